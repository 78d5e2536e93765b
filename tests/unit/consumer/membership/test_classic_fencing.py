"""Fencing, coordinator errors and fatal errors of the classic member."""

from __future__ import annotations

import pytest

from kaflux.errors import (
    FencedInstanceIdError,
    GroupAuthorizationFailedError,
    InconsistentGroupProtocolError,
)
from kaflux.network.cluster import coordinator_node_id
from kaflux.protocol.messages.find_coordinator import FindCoordinatorRequest
from kaflux.protocol.messages.heartbeat import HeartbeatRequest
from kaflux.protocol.messages.join_group import JoinGroupRequest
from kaflux.protocol.messages.sync_group import SyncGroupRequest

from support.classic_membership_rig import (
    ASSIGNED,
    COOPERATIVE,
    EAGER,
    HEARTBEAT_MS,
    LOST,
    REVOKED,
    SESSION_MS,
    M,
    all_of,
    record_fetchable,
    stable_group,
)
from support.fake_group_coordinator import (
    GROUP_AUTHORIZATION_FAILED,
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    NOT_COORDINATOR,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    FakeGroupCoordinator,
    GroupDriver,
)
from support.fakes import FakeCluster

# -- fencing and coordinator errors ----------------------------------------------------------------


@pytest.mark.parametrize(
    "code", [UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION], ids=["unknown_member", "illegal_generation"]
)
def test_a_fenced_heartbeat_loses_the_partitions_and_rejoins(code: int) -> None:
    driver, (a,) = stable_group("a", partitions=4)
    a.auto_ack = False
    old_id = a.member_id
    before = len(a.transitions)
    driver.coordinator.inject(HeartbeatRequest, code)
    driver.run_until(lambda: a.state is M.LOSING_PARTITIONS, timeout_ms=2 * HEARTBEAT_MS)
    assert a.fetchable() == set()
    assert a.manager.generation == -1
    assert a.pending_callbacks[0].method == LOST
    assert a.pending_callbacks[0].partitions == all_of(4)
    driver.run(500)
    assert a.state is M.LOSING_PARTITIONS  # waits for on_partitions_lost
    a.ack(LOST)
    assert a.state is M.JOINING
    assert a.assignment() == set()
    assert a.member_id == ("" if code == UNKNOWN_MEMBER_ID else old_id)
    assert [t for _, _, t in a.transitions[before:]] == [M.LOSING_PARTITIONS, M.JOINING]
    a.auto_ack = True
    driver.settle()
    assert a.assignment() == all_of(4)
    assert a.calls_of(REVOKED) == []


def test_a_member_removed_by_the_coordinator_is_fenced_by_its_next_heartbeat() -> None:
    driver, (a, b) = stable_group("a", "b", assignors=EAGER)
    owned = a.assignment()
    requested = len(a.requested)
    driver.coordinator.remove_member("g", a.member_id, driver.now_ms)
    driver.run_until(lambda: a.state is M.LOSING_PARTITIONS, timeout_ms=2 * HEARTBEAT_MS)
    beat = a.sent(HeartbeatRequest)[-1]
    assert beat.error_code == UNKNOWN_MEMBER_ID
    # lost, not revoked: the partitions may already belong to someone else
    assert [(e.method, e.partitions) for e in a.requested[requested:]] == [(LOST, owned)]
    driver.settle()
    assert a.assignment() | b.assignment() == all_of(6)


def test_a_crashed_member_is_expired_after_the_session_timeout() -> None:
    driver, (a, b) = stable_group("a", "b", assignors=EAGER)
    b.stopped = True
    crashed_at = driver.now_ms
    driver.run_until(lambda: b.member_id not in driver.group().members, timeout_ms=2 * SESSION_MS)
    assert SESSION_MS - HEARTBEAT_MS <= driver.now_ms - crashed_at <= SESSION_MS + driver.step_ms
    driver.settle(a)
    assert a.assignment() == all_of(6)


def test_rebalance_in_progress_on_a_heartbeat_rejoins() -> None:
    driver, (a,) = stable_group("a", partitions=2, assignors=COOPERATIVE)
    joins = len(a.sent(JoinGroupRequest))
    before = len(a.transitions)
    seen = record_fetchable(driver, a)
    driver.coordinator.inject(HeartbeatRequest, REBALANCE_IN_PROGRESS)
    driver.run_until(lambda: M.JOINING in a.states()[before:], timeout_ms=2 * HEARTBEAT_MS)
    assert a.sent(HeartbeatRequest)[-1].error_code == REBALANCE_IN_PROGRESS
    driver.settle()
    assert a.states()[before:] == [M.JOINING, M.AWAITING_SYNC, M.ASSIGNING_PARTITIONS, M.STABLE]
    assert all(f == all_of(2) for _, _, f in seen)  # cooperative: nothing is revoked to rejoin
    assert len(a.sent(JoinGroupRequest)) == joins + 1
    assert a.assignment() == all_of(2)
    assert a.calls_of(LOST) == [] and a.calls_of(REVOKED) == []


def test_not_coordinator_on_a_heartbeat_finds_the_coordinator_again() -> None:
    driver, (a,) = stable_group("a")
    finds = len(a.sent(FindCoordinatorRequest))
    driver.coordinator.inject(HeartbeatRequest, NOT_COORDINATOR)
    driver.run_until(lambda: a.coordinator.coordinator is None, timeout_ms=2 * HEARTBEAT_MS)
    assert a.sent(HeartbeatRequest)[-1].error_code == NOT_COORDINATOR
    driver.step()
    assert len(a.sent(FindCoordinatorRequest)) == finds + 1
    assert a.coordinator.coordinator is not None
    driver.run(3 * HEARTBEAT_MS)
    assert a.state is M.STABLE
    assert a.sent(HeartbeatRequest)[-1].error_code == 0


def test_a_moved_coordinator_is_found_and_used() -> None:
    coordinator = FakeGroupCoordinator(FakeCluster(brokers=2))
    driver = GroupDriver(coordinator, topics={"t": 4})
    a = driver.add_member("a")
    driver.settle()
    assert {e.unsent.node_id for e in a.sent(HeartbeatRequest)} <= {coordinator_node_id(0)}
    coordinator.cluster.coordinators["g"] = 1
    driver.run(3 * HEARTBEAT_MS)
    assert a.state is M.STABLE
    assert a.coordinator.coordinator is not None and a.coordinator.coordinator.node_id == 1
    assert a.sent(HeartbeatRequest)[-1].unsent.node_id == coordinator_node_id(1)
    assert a.sent(HeartbeatRequest)[-1].error_code == 0


@pytest.mark.parametrize(
    ("code", "lost"),
    [(REBALANCE_IN_PROGRESS, False), (UNKNOWN_MEMBER_ID, True), (ILLEGAL_GENERATION, True)],
    ids=["rebalance_in_progress", "unknown_member", "illegal_generation"],
)
def test_sync_group_errors_rejoin_or_fence(code: int, lost: bool) -> None:
    driver, (a,) = stable_group("a", partitions=3, assignors=COOPERATIVE)
    owned = a.assignment()
    old_id = a.member_id
    before, requested = len(a.transitions), len(a.requested)
    seen = record_fetchable(driver, a)
    driver.coordinator.inject(SyncGroupRequest, code)
    a.manager.request_rejoin("test")
    driver.run_until(lambda: a.sent(SyncGroupRequest)[-1].error_code == code)
    failed_at = a.sent(SyncGroupRequest)[-1].delivered_ms or 0
    driver.settle()
    rejoin = next(e for e in a.sent(JoinGroupRequest) if e.sent_ms > failed_at)
    if lost:
        assert a.states()[before:][:4] == [M.JOINING, M.AWAITING_SYNC, M.LOSING_PARTITIONS, M.JOINING]
        assert (a.requested[requested].method, a.requested[requested].partitions) == (LOST, owned)
        assert rejoin.request.member_id == ("" if code == UNKNOWN_MEMBER_ID else old_id)
        assert all(f == frozenset() for _, state, f in seen if state is M.LOSING_PARTITIONS)
    else:
        assert a.states()[before:][:3] == [M.JOINING, M.AWAITING_SYNC, M.JOINING]
        assert all(e.method == ASSIGNED for e in a.requested[requested:])
        assert rejoin.request.member_id == old_id
        assert all(f == owned for _, _, f in seen)  # cooperative: kept fetchable throughout
    driver.settle()
    assert a.assignment() == all_of(3)


def test_a_coordinator_error_on_join_group_retries_after_backoff() -> None:
    driver = GroupDriver(topics={"t": 2})
    a = driver.add_member("a")
    driver.coordinator.inject(JoinGroupRequest, NOT_COORDINATOR)
    driver.settle()
    joins = a.sent(JoinGroupRequest)
    assert joins[0].error_code == NOT_COORDINATOR
    assert joins[1].sent_ms - joins[0].sent_ms >= 100  # retry.backoff.ms
    assert len(a.sent(FindCoordinatorRequest)) == 2


def test_a_lost_join_group_response_times_out_and_the_member_joins_again() -> None:
    driver = GroupDriver(topics={"t": 2})
    a = driver.add_member("a", max_poll_interval_ms=3_000, request_timeout_ms=2_000)
    driver.drop(JoinGroupRequest)
    driver.settle(timeout_ms=30_000)
    first = a.sent(JoinGroupRequest)[0]
    assert first.dropped
    assert first.delivered_ms == first.sent_ms + 3_000 + 5_000  # rebalance timeout + 5 s
    assert a.assignment() == all_of(2)


# -- fatal errors ----------------------------------------------------------------------------------


def test_group_authorization_failure_on_join_is_fatal() -> None:
    driver = GroupDriver(topics={"t": 2})
    a = driver.add_member("a")
    driver.coordinator.inject(JoinGroupRequest, GROUP_AUTHORIZATION_FAILED)
    driver.run(1_000)
    assert a.state is M.FATAL
    assert len(a.fatal) == 1 and isinstance(a.fatal[0], GroupAuthorizationFailedError)
    assert a.errors == a.fatal
    sent = len(driver.exchanges)
    driver.run(5_000)
    assert [e for e in driver.exchanges[sent:] if e.api in (JoinGroupRequest, HeartbeatRequest)] == []
    assert a.heartbeat.poll(driver.now_ms).unsent == []


def test_an_inconsistent_group_protocol_is_fatal_for_the_joiner_only() -> None:
    driver, (a,) = stable_group("a", assignors=("range",))
    b = driver.add_member("b", assignors=("roundrobin",))
    driver.run(3_000)
    assert b.state is M.FATAL
    assert len(b.fatal) == 1 and isinstance(b.fatal[0], InconsistentGroupProtocolError)
    assert b.sent(JoinGroupRequest)[-1].error_code == INCONSISTENT_GROUP_PROTOCOL
    assert a.state is M.STABLE and a.assignment() == all_of(6)
    assert len(driver.group().generations) == 1


def test_an_unknown_assignor_chosen_by_the_coordinator_is_an_inconsistent_protocol_error() -> None:
    driver = GroupDriver(topics={"t": 2})
    driver.coordinator.forced_protocol = "roundrobin"
    a = driver.add_member("a", assignors=("range",))
    driver.run(500)
    assert a.state is M.FATAL
    assert isinstance(a.fatal[0], InconsistentGroupProtocolError)


def test_a_member_that_becomes_fatal_gives_its_partitions_up() -> None:
    driver = GroupDriver(topics={"t": 4})
    a = driver.add_member("a", instance_id="s1")
    driver.add_member("b", instance_id="s2")
    driver.settle()
    owned = a.assignment()
    replacement = driver.add_member("a2", instance_id="s1")
    driver.run_until(lambda: replacement.state is M.STABLE and not replacement.pending_callbacks)
    driver.run_until(lambda: a.state is M.FATAL, timeout_ms=2 * HEARTBEAT_MS)
    assert isinstance(a.fatal[0], FencedInstanceIdError)
    assert replacement.assignment() == owned
    assert a.fetchable() == set()
    assert [e.partitions for e in a.requested_of(LOST)] == [owned]
    driver.step()  # the application thread runs on_partitions_lost
    assert a.assignment() == set()
