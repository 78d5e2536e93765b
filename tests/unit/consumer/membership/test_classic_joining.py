"""The classic membership joins: the first poll starts the join, every JoinGroup version,
heartbeats once in the group; the leader's assignment and its metadata."""

from __future__ import annotations

import pytest

from kaflux.consumer.member_state import HEARTBEAT_STATES
from kaflux.consumer.membership.classic_membership import LEADER_METADATA_WAIT_MS
from kaflux.protocol.messages.heartbeat import HeartbeatRequest
from kaflux.protocol.messages.join_group import JoinGroupRequest
from kaflux.protocol.messages.sync_group import SyncGroupRequest

from support.classic_membership_rig import (
    ASSIGNED,
    HEARTBEAT_MS,
    SESSION_MS,
    M,
    all_of,
    entered,
    sent_between,
    stable_group,
)
from support.fake_group_coordinator import (
    MEMBER_ID_REQUIRED,
    FakeGroupCoordinator,
    GroupDriver,
    GroupState,
)
from support.fakes import FakePartition

# -- joining ---------------------------------------------------------------------------------------


def test_single_member_joins_and_gets_every_partition() -> None:
    driver = GroupDriver(topics={"t": 6})
    a = driver.add_member("a")
    assert a.state is M.UNJOINED
    driver.settle()

    assert a.states() == [M.JOINING, M.AWAITING_SYNC, M.ASSIGNING_PARTITIONS, M.STABLE]
    assert a.assignment() == all_of(6)
    assert [(e.method, set(e.partitions)) for e in a.requested] == [(ASSIGNED, all_of(6))]
    group = driver.group()
    assert group.state is GroupState.STABLE
    assert list(group.members) == [a.member_id]
    assert group.leader_id == a.member_id
    assert a.manager.generation == group.generation == 1
    assert a.manager.group_metadata.member_id == a.member_id
    assert a.manager.group_metadata.generation_id == 1
    # KIP-394: the first JoinGroup has no member id and is told to come back with one
    joins = a.sent(JoinGroupRequest)
    assert [e.request.member_id for e in joins] == ["", a.member_id]
    assert joins[0].error_code == MEMBER_ID_REQUIRED
    assert joins[0].response.member_id == a.member_id
    assert joins[1].error_code == 0
    # the subscription travels in the protocol metadata; the leader got it back
    assert joins[1].request.protocols[0].name == "range"
    assert [m.member_id for m in joins[1].response.members] == [a.member_id]


def test_the_join_starts_at_the_first_poll_after_subscribe() -> None:
    driver = GroupDriver(topics={"t": 2})
    a = driver.add_member("a")
    a.polling = False
    driver.run(2_000)
    assert a.state is M.UNJOINED
    assert a.sent(JoinGroupRequest) == []
    a.polling = True
    driver.settle()
    assert a.assignment() == all_of(2)


def test_partitions_are_not_fetchable_until_on_partitions_assigned_is_acknowledged() -> None:
    driver = GroupDriver(topics={"t": 4})
    a = driver.add_member("a")
    a.auto_ack = False
    driver.run_until(lambda: a.state is M.ASSIGNING_PARTITIONS)
    a.resolve_positions()
    driver.run(3_000)
    assert a.state is M.ASSIGNING_PARTITIONS
    assert a.assignment() == all_of(4)
    assert a.fetchable() == set()
    # the member holds a generation meanwhile, so it keeps heartbeating
    assert sent_between(a, HeartbeatRequest, 0, driver.now_ms)
    call = a.ack(ASSIGNED)
    assert call.partitions == all_of(4)
    assert a.state is M.STABLE
    assert a.fetchable() == all_of(4)


def test_heartbeats_go_out_every_interval_while_stable() -> None:
    driver, (a,) = stable_group("a")
    synced = a.sent(SyncGroupRequest)[-1].delivered_ms
    assert synced is not None
    driver.run(10_500)
    beats = a.sent(HeartbeatRequest)
    # The first heartbeat goes out at the next pass after the SyncGroup answer (not an interval
    # later), then one per interval.
    first = beats[0].sent_ms
    assert synced <= first < synced + HEARTBEAT_MS // 10
    assert [e.sent_ms for e in beats] == [first + HEARTBEAT_MS * k for k in range(len(beats))]
    assert len(beats) == 11
    assert all(e.request.generation_id == 1 and e.request.member_id == a.member_id for e in beats)
    assert all(e.error_code == 0 for e in beats)
    assert all(e.state in HEARTBEAT_STATES for e in beats)


def test_no_heartbeats_while_joining() -> None:
    driver, (a, b) = stable_group("a", "b")
    b.stopped = True  # b hangs: no heartbeats, no rejoin
    a.manager.request_rejoin("test")
    driver.run_until(lambda: a.state is M.JOINING)
    joined_at = driver.now_ms
    # the coordinator holds a's JoinGroup until b rejoins or its session expires
    driver.run_until(lambda: a.state is not M.JOINING, timeout_ms=2 * SESSION_MS)
    left_at = driver.now_ms
    assert left_at - joined_at >= SESSION_MS - 2 * HEARTBEAT_MS
    assert sent_between(a, HeartbeatRequest, joined_at, left_at) == []
    assert all(e.state in HEARTBEAT_STATES for e in a.sent(HeartbeatRequest))
    driver.settle(a)
    assert a.assignment() == all_of(6)
    assert list(driver.group().members) == [a.member_id]


@pytest.mark.parametrize("join_version", [2, 3, 4, 5, 7, 9])
def test_joins_at_every_join_group_version(join_version: int) -> None:
    coordinator = FakeGroupCoordinator(max_versions={JoinGroupRequest: join_version, SyncGroupRequest: 3})
    driver = GroupDriver(coordinator, topics={"t": 4})
    a = driver.add_member("a")
    b = driver.add_member("b")
    driver.settle()
    assert a.assignment() | b.assignment() == all_of(4)
    assert not a.assignment() & b.assignment()
    joins = a.sent(JoinGroupRequest)
    assert {e.version for e in joins} == {join_version}
    member_id_required = [e for e in joins if e.error_code == MEMBER_ID_REQUIRED]
    assert bool(member_id_required) is (join_version >= 4)


# -- the leader and metadata -----------------------------------------------------------------------


def test_the_leader_waits_for_metadata_of_a_subscribed_topic() -> None:
    driver = GroupDriver(topics={"t": 2})
    a = driver.add_member("a", topics=("t", "late"))
    driver.run_until(lambda: a.state is M.AWAITING_SYNC)
    joined = entered(a, M.AWAITING_SYNC)
    driver.run(500)
    assert a.sent(SyncGroupRequest) == []  # waiting for "late"
    driver.coordinator.cluster.create_topic("late", 3)
    driver.settle()
    sync = a.sent(SyncGroupRequest)[0]
    assert sync.sent_ms - joined < LEADER_METADATA_WAIT_MS
    assert a.assignment() == all_of(2) | all_of(3, topic="late")


def test_the_leader_assigns_what_it_knows_after_the_metadata_wait() -> None:
    driver = GroupDriver(topics={"t": 2})
    a = driver.add_member("a", topics=("t", "missing"))
    driver.run_until(lambda: a.state is M.AWAITING_SYNC)
    joined = entered(a, M.AWAITING_SYNC)
    driver.settle()
    sync = a.sent(SyncGroupRequest)[0]
    assert LEADER_METADATA_WAIT_MS <= sync.sent_ms - joined <= LEADER_METADATA_WAIT_MS + 100
    assert a.assignment() == all_of(2)


def test_the_leader_rejoins_when_a_partition_count_changes() -> None:
    driver = GroupDriver(topics={"t": 2})
    a = driver.add_member("a", metadata_max_age_ms=1_000)
    b = driver.add_member("b", metadata_max_age_ms=1_000)
    driver.settle()
    generations = len(driver.group().generations)
    driver.coordinator.cluster.topics["t"].partitions[2] = FakePartition(leader=0)
    driver.coordinator.cluster.topics["t"].partitions[3] = FakePartition(leader=0)
    driver.run(3_000)
    driver.settle()
    assert len(driver.group().generations) == generations + 1
    assert a.assignment() | b.assignment() == all_of(4)
    assert len(a.assignment()) == len(b.assignment()) == 2


def test_the_leader_rejoins_when_a_missing_topic_appears() -> None:
    driver = GroupDriver(topics={"t": 2})
    a = driver.add_member("a", topics=("t", "later"), metadata_max_age_ms=1_000)
    driver.settle()
    assert a.assignment() == all_of(2)
    driver.coordinator.cluster.create_topic("later", 2)
    driver.run(5_000)
    driver.settle()
    assert a.assignment() == all_of(2) | all_of(2, topic="later")


def test_the_leader_watches_topics_only_followers_subscribe_to() -> None:
    driver = GroupDriver(topics={"t": 2, "u": 2})
    a = driver.add_member("a", topics=("t",), metadata_max_age_ms=1_000)
    driver.settle()
    b = driver.add_member("b", topics=("t", "u"), metadata_max_age_ms=1_000)
    driver.settle()
    assert driver.group().leader_id == a.member_id
    driver.coordinator.cluster.topics["u"].partitions[2] = FakePartition(leader=0)
    driver.run(5_000)
    driver.settle()
    assert all_of(3, topic="u") <= b.assignment()
