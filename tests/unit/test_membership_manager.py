"""MembershipManager (classic protocol) against an in-memory group coordinator, on injected time.

Every test builds real MembershipManagers, wired as ``kaflux.Consumer`` wires them, and drives
them with :class:`fake_group_coordinator.GroupDriver`: the driver plays the application thread
(PollEvents, rebalance callbacks) and the network thread (manager polls, requests encoded and
decoded at the negotiated version, responses delivered), ``step_ms`` (10 ms) at a time.

Tests marked ``xfail(strict=True, reason="BUG: ...")`` document bugs in ``src/``: they assert
the correct behaviour and fail until the bug is fixed.
"""

from __future__ import annotations

from typing import Any

import pytest

from kaflux.consumer.assignors import Subscription, decode_subscription, encode_subscription
from kaflux.consumer.member_state import HEARTBEAT_STATES, MemberState
from kaflux.consumer.membership_manager import LEADER_METADATA_WAIT_MS
from kaflux.errors import (
    CommitFailedError,
    FencedInstanceIdError,
    GroupAuthorizationFailedError,
    InconsistentGroupProtocolError,
    RebalanceInProgressError,
)
from kaflux.network.cluster import coordinator_node_id
from kaflux.network.requests import MAX_POLL_TIMEOUT_MS
from kaflux.protocol.messages.find_coordinator import FindCoordinatorRequest
from kaflux.protocol.messages.heartbeat import HeartbeatRequest
from kaflux.protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from kaflux.protocol.messages.leave_group import LeaveGroupRequest
from kaflux.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kaflux.protocol.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment
from kaflux.structs import TopicPartition

from support.fake_group_coordinator import (
    GROUP_AUTHORIZATION_FAILED,
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    MEMBER_ID_REQUIRED,
    NOT_COORDINATOR,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    FakeGroupCoordinator,
    GroupDriver,
    GroupState,
    Member,
    exclusive_ownership,
)
from support.fakes import FakeCluster, FakePartition, roundtrip

M = MemberState
REVOKED = "on_partitions_revoked"
ASSIGNED = "on_partitions_assigned"
LOST = "on_partitions_lost"
HEARTBEAT_MS = 1_000
SESSION_MS = 10_000
MAX_POLL_MS = 30_000
EAGER = ("range",)
COOPERATIVE = ("cooperative-sticky",)
#: states in which an eager member must hold nothing fetchable: from the start of the
#: revocation until its new assignment is acknowledged
EAGER_NOTHING_FETCHABLE = {
    M.PREPARE_REVOCATION,
    M.REVOKING_PARTITIONS,
    M.PARTITIONS_REVOKED,
    M.JOINING,
    M.AWAITING_SYNC,
}


def tps(*partitions: int, topic: str = "t") -> set[TopicPartition]:
    return {TopicPartition(topic, p) for p in partitions}


def all_of(count: int, topic: str = "t") -> set[TopicPartition]:
    return tps(*range(count), topic=topic)


def stable_group(
    *names: str, partitions: int = 6, assignors: tuple[str, ...] = EAGER, **member_kw: Any
) -> tuple[GroupDriver, list[Member]]:
    """A driver with ``names`` joined one after the other and settled."""
    driver = GroupDriver(topics={"t": partitions})
    members = []
    for name in names:
        members.append(driver.add_member(name, assignors=assignors, **member_kw))
        driver.settle()
    return driver, members


def sent_between(member: Member, api: type, start: int, end: int) -> list[int]:
    return [e.sent_ms for e in member.sent(api) if start <= e.sent_ms <= end]


def entered(member: Member, state: MemberState) -> int:
    """When ``member`` last entered ``state``."""
    return max(t for t, _, target in member.transitions if target is state)


def record_fetchable(
    driver: GroupDriver, member: Member
) -> list[tuple[int, MemberState, frozenset[TopicPartition]]]:
    """After every action of the driver: (time, state, fetchable partitions) of ``member``."""
    seen: list[tuple[int, MemberState, frozenset[TopicPartition]]] = []
    driver.observers.append(lambda d: seen.append((d.now_ms, member.state, frozenset(member.fetchable()))))
    return seen


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


# -- eager rebalance -------------------------------------------------------------------------------


def test_eager_second_member_makes_the_first_revoke_everything_before_rejoining() -> None:
    driver, (a,) = stable_group("a", assignors=EAGER)
    driver.observers.append(exclusive_ownership)
    seen = record_fetchable(driver, a)
    before = len(a.transitions)
    assert a.fetchable() == all_of(6)

    b = driver.add_member("b", assignors=EAGER)
    driver.settle()

    assert [t for _, _, t in a.transitions[before:]] == [
        M.PREPARE_REVOCATION,
        M.REVOKING_PARTITIONS,
        M.PARTITIONS_REVOKED,
        M.JOINING,
        M.AWAITING_SYNC,
        M.ASSIGNING_PARTITIONS,
        M.STABLE,
    ]
    revoked = a.calls_of(REVOKED)
    assert [c.partitions for c in revoked] == [all_of(6)]
    # everything was revoked before a's JoinGroup of the new generation went out
    second_join = [e for e in a.sent(JoinGroupRequest) if e.sent_ms > revoked[0].requested_ms]
    assert second_join
    assert revoked[0].acknowledged_ms is not None
    assert second_join[0].sent_ms >= revoked[0].acknowledged_ms
    # eager members join owning nothing
    metadata = second_join[0].request.protocols[0].metadata
    assert decode_subscription(metadata).owned_partitions == ()
    # fetching stopped at once and stayed stopped until the new assignment
    in_rebalance = [f for _, state, f in seen if state in EAGER_NOTHING_FETCHABLE]
    assert in_rebalance
    assert all(f == frozenset() for f in in_rebalance)
    # the result: disjoint and complete (range: a sorts first)
    assert a.assignment() == tps(0, 1, 2)
    assert b.assignment() == tps(3, 4, 5)
    assert a.calls_of(ASSIGNED)[-1].partitions == tps(0, 1, 2)
    assert b.calls_of(ASSIGNED)[-1].partitions == tps(3, 4, 5)
    assert [g.members for g in driver.group().generations] == [(a.member_id,), (a.member_id, b.member_id)]


def test_eager_revocation_waits_in_revoking_partitions_for_the_acknowledgement() -> None:
    driver, (a,) = stable_group("a", assignors=EAGER)
    a.auto_ack = False
    b = driver.add_member("b", assignors=EAGER)
    driver.run_until(lambda: a.state is M.REVOKING_PARTITIONS)
    since = driver.now_ms
    driver.run(500)
    assert a.state is M.REVOKING_PARTITIONS
    assert a.fetchable() == set()
    assert a.assignment() == all_of(6)  # still held (for the callback), but not fetched
    assert sent_between(a, JoinGroupRequest, since, driver.now_ms) == []
    a.ack(REVOKED)
    assert a.state is M.JOINING
    assert a.assignment() == set()
    a.auto_ack = True
    driver.settle()
    assert a.assignment() | b.assignment() == all_of(6)


def test_a_slow_revocation_callback_does_not_cause_a_second_rebalance() -> None:
    driver, (a,) = stable_group("a", assignors=EAGER)
    a.auto_ack = False
    b = driver.add_member("b", assignors=EAGER)
    driver.run_until(lambda: a.state is M.REVOKING_PARTITIONS)
    # on_partitions_revoked takes longer than heartbeat.interval.ms (committing, say)
    driver.run(2 * HEARTBEAT_MS + 500)
    a.ack(REVOKED)
    a.auto_ack = True
    driver.run(10_000)
    assert driver.stable(a, b)
    # one rebalance for b's arrival, not two
    assert len(driver.group().generations) == 2


# -- cooperative rebalance -------------------------------------------------------------------------


def test_cooperative_second_member_only_moves_what_it_must_and_keeps_the_rest_fetchable() -> None:
    driver, (a,) = stable_group("a", assignors=COOPERATIVE)
    driver.observers.append(exclusive_ownership)
    seen = record_fetchable(driver, a)
    before = len(a.transitions)

    b = driver.add_member("b", assignors=COOPERATIVE)
    driver.settle()

    kept = a.assignment()
    moved = all_of(6) - kept
    assert len(kept) == len(moved) == 3
    assert b.assignment() == moved
    # a kept its partitions fetchable throughout both rebalances
    assert seen
    assert all(kept <= f for _, _, f in seen)
    # a revoked only what moved, after the first SyncGroup, and rejoined at once
    assert [c.partitions for c in a.calls_of(REVOKED)] == [moved]
    assert [t for _, _, t in a.transitions[before:]] == [
        M.JOINING,
        M.AWAITING_SYNC,
        M.PREPARE_REVOCATION,
        M.REVOKING_PARTITIONS,
        M.PARTITIONS_REVOKED,
        M.ASSIGNING_PARTITIONS,
        M.STABLE,
        M.JOINING,
        M.AWAITING_SYNC,
        M.ASSIGNING_PARTITIONS,
        M.STABLE,
    ]
    # the moved partitions were withheld in the first rebalance and handed over in the second
    generations = driver.group().generations
    assert len(generations) == 3
    assert [c.partitions for c in b.calls_of(ASSIGNED)] == [frozenset(), moved]
    # a's second JoinGroup claims only what it kept
    claims = a.sent(JoinGroupRequest)[-1].request.protocols[0].metadata
    assert set(decode_subscription(claims).owned_partitions) == kept
    assert a.calls_of(LOST) == [] and b.calls_of(REVOKED) == []


@pytest.mark.parametrize("assignors", [EAGER, COOPERATIVE], ids=["eager", "cooperative"])
def test_members_coming_and_going_never_share_a_partition(assignors: tuple[str, ...]) -> None:
    driver = GroupDriver(topics={"t": 7})
    driver.observers.append(exclusive_ownership)
    members = [driver.add_member(name, assignors=assignors) for name in "abc"]
    driver.settle()
    members.append(driver.add_member("d", assignors=assignors))
    driver.settle()
    leaving = members.pop(1)
    future = leaving.leave()
    driver.run_until(future.done)
    leaving.stopped = True
    driver.settle()
    members.append(driver.add_member("e", assignors=assignors))
    driver.settle()
    owned = [m.assignment() for m in members]
    assert set().union(*owned) == all_of(7)
    assert sum(len(o) for o in owned) == 7
    assert max(len(o) for o in owned) - min(len(o) for o in owned) <= 1
    for m in members:
        assert m.fetchable() == m.assignment()


# -- callbacks -------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", [REVOKED, ASSIGNED])
def test_a_callback_that_raises_still_lets_the_rebalance_proceed(method: str) -> None:
    driver, (a,) = stable_group("a", assignors=EAGER)
    a.callback_errors[method] = RuntimeError("listener bug")
    b = driver.add_member("b", assignors=EAGER)
    driver.settle()
    assert a.assignment() == tps(0, 1, 2)
    assert b.assignment() == tps(3, 4, 5)
    assert any(c.error is not None for c in a.calls_of(method))
    assert a.fetchable() == tps(0, 1, 2)


def test_assigning_partitions_waits_for_the_acknowledgement_even_with_an_empty_assignment() -> None:
    driver, _ = stable_group("a", partitions=1, assignors=EAGER)
    b = driver.add_member("b", assignors=EAGER)
    b.auto_ack = False
    driver.run_until(lambda: b.state is M.ASSIGNING_PARTITIONS)
    driver.run(1_000)
    assert b.state is M.ASSIGNING_PARTITIONS
    assert b.pending_callbacks[0].partitions == frozenset()
    b.ack(ASSIGNED)
    assert b.state is M.STABLE


def test_without_a_listener_no_callbacks_are_requested() -> None:
    driver = GroupDriver(topics={"t": 4})
    a = driver.add_member("a", has_listener=False)
    driver.settle()
    b = driver.add_member("b", has_listener=False)
    driver.settle()
    assert a.requested == [] and b.requested == []
    assert a.assignment() | b.assignment() == all_of(4)


def test_an_acknowledgement_for_an_abandoned_rebalance_is_ignored() -> None:
    driver, (a,) = stable_group("a", assignors=EAGER)
    a.auto_ack = False
    driver.add_member("b", assignors=EAGER)
    driver.run_until(lambda: a.state is M.REVOKING_PARTITIONS)
    stale = a.pending_callbacks[0]
    # fenced while the application thread runs on_partitions_revoked
    driver.coordinator.inject(HeartbeatRequest, UNKNOWN_MEMBER_ID, member_id=a.member_id)
    driver.run_until(lambda: a.state is M.LOSING_PARTITIONS)
    a.manager.on_callback_completed(stale.callback_id, stale.method, None)
    assert a.state is M.LOSING_PARTITIONS
    a.pending_callbacks.remove(stale)
    a.ack(LOST)
    assert a.state is M.JOINING


# -- auto-commit -----------------------------------------------------------------------------------


@pytest.mark.parametrize("assignors", [EAGER, COOPERATIVE], ids=["eager", "cooperative"])
def test_auto_commit_commits_consumed_positions_before_the_revocation_callback(
    assignors: tuple[str, ...],
) -> None:
    driver, (a,) = stable_group("a", assignors=assignors, auto_commit=True)
    for p, tp in enumerate(sorted(a.assignment())):
        a.consume(tp, 10 + p)
    driver.hold(OffsetCommitRequest, a)
    b = driver.add_member("b", assignors=assignors, auto_commit=True)
    driver.run_until(lambda: bool(a.sent(OffsetCommitRequest)))
    commit = a.sent(OffsetCommitRequest)[0]
    # while the commit is in flight the partitions are not fetched and no callback runs yet
    driver.run(300)
    assert a.state is M.PREPARE_REVOCATION
    assert a.requested_of(REVOKED) == []
    # eager: everything is being revoked; cooperative: only the half that moves
    assert len(a.fetchable()) == (0 if assignors == EAGER else 3)
    driver.release(OffsetCommitRequest, a)
    driver.settle()

    revoked = a.requested_of(REVOKED)
    assert revoked
    callback_at = next(
        t for t, who, kind, d in driver.log if who == "a" and kind == "callback" and d[0] == REVOKED
    )
    assert commit.sent_ms < callback_at
    committed = {
        TopicPartition(t.name, p.partition_index): p.committed_offset
        for t in commit.request.topics
        for p in t.partitions
    }
    assert committed == {tp: 10 + p for p, tp in enumerate(sorted(all_of(6)))}
    # eager commits before rejoining (generation 1), cooperative after the SyncGroup (generation 2)
    assert commit.request.generation_id_or_member_epoch == (1 if assignors == EAGER else 2)
    assert commit.request.member_id == a.member_id
    assert commit.error_code == 0
    stored = driver.coordinator.cluster.committed["g"]
    assert {tp: c.offset for tp, c in stored.items()} == committed
    # b starts its partitions where a stopped
    for tp in b.assignment():
        position = b.subscription.position(tp)
        assert position is not None and position.offset == committed[tp]


def test_eager_partitions_are_not_fetchable_while_the_auto_commit_is_in_flight() -> None:
    driver, (a,) = stable_group("a", assignors=EAGER, auto_commit=True)
    for tp in a.assignment():
        a.consume(tp, 3)
    driver.hold(OffsetCommitRequest, a)
    driver.add_member("b", assignors=EAGER, auto_commit=True)
    driver.run_until(lambda: a.state is M.PREPARE_REVOCATION)
    assert a.fetchable() == set()
    driver.run(500)
    assert a.state is M.PREPARE_REVOCATION and a.fetchable() == set()
    driver.release(OffsetCommitRequest, a)
    driver.settle()


def test_a_failed_auto_commit_does_not_stop_the_revocation() -> None:
    driver, (a,) = stable_group("a", assignors=EAGER, auto_commit=True)
    for tp in a.assignment():
        a.consume(tp, 3)
    driver.coordinator.inject(OffsetCommitRequest, NOT_COORDINATOR)
    b = driver.add_member("b", assignors=EAGER, auto_commit=True)
    driver.settle()
    assert a.sent(OffsetCommitRequest)[0].error_code == NOT_COORDINATOR
    assert [c.partitions for c in a.calls_of(REVOKED)] == [all_of(6)]
    assert a.assignment() | b.assignment() == all_of(6)


# -- poll timer ------------------------------------------------------------------------------------


def test_poll_timer_expiry_leaves_the_group_and_the_next_poll_rejoins() -> None:
    driver, (a, b) = stable_group("a", "b", assignors=EAGER, max_poll_interval_ms=5_000)
    owned = a.assignment()
    a.polling = False
    last_poll = driver.now_ms - driver.step_ms
    driver.run_until(lambda: a.state is M.STALE, timeout_ms=10_000)

    assert a.states()[-3:] == [M.PREPARE_LEAVING, M.LEAVING, M.STALE]
    leave = a.sent(LeaveGroupRequest)
    assert len(leave) == 1
    assert leave[0].request.member_id
    assert last_poll + 5_000 < leave[0].sent_ms <= last_poll + 5_000 + 2 * driver.step_ms
    assert a.fetchable() == set()  # its partitions stopped being fetched at the expiry
    assert a.requested_of(LOST) == []  # on_partitions_lost runs on the application's next poll
    # the others rebalance without it
    driver.settle(b)
    assert b.assignment() == all_of(6)

    stale_for = 3_000
    driver.run(stale_for)
    assert a.state is M.STALE
    assert a.sent(JoinGroupRequest)[-1].sent_ms < leave[0].sent_ms
    a.polling = True
    driver.step()
    assert [(c.method, set(c.partitions)) for c in a.calls_of(LOST)] == [(LOST, owned)]
    assert M.LOSING_PARTITIONS in a.states()
    driver.settle()
    assert a.assignment() | b.assignment() == all_of(6)
    assert not a.assignment() & b.assignment()


def test_the_application_may_block_in_poll_only_until_the_next_heartbeat() -> None:
    """maximum_time_to_wait bounds how long poll() waits on the application thread: until the
    next heartbeat while in the group, not at all once the poll timer ran out, and only the
    longest poll slice outside a group."""
    driver, (a,) = stable_group("a", max_poll_interval_ms=60_000)
    heartbeat = a.manager.heartbeat
    now = driver.now_ms
    beat = a.sent(HeartbeatRequest)[-1].sent_ms
    assert a.manager.maximum_time_to_wait(now) == max(0, beat + HEARTBEAT_MS - now)
    assert 0 < a.manager.maximum_time_to_wait(now) <= HEARTBEAT_MS
    heartbeat.poll_timer.reset(now - 60_001)  # the application stopped polling a while ago
    assert a.manager.maximum_time_to_wait(now) == 0
    a.leave()
    driver.run_until(lambda: a.state is M.UNJOINED, timeout_ms=10_000)
    assert a.manager.maximum_time_to_wait(driver.now_ms) == MAX_POLL_TIMEOUT_MS


def test_a_member_that_keeps_polling_stays_in_the_group() -> None:
    driver, (a,) = stable_group("a", max_poll_interval_ms=5_000)
    driver.run(20_000)  # polling every step
    assert a.state is M.STABLE
    assert a.sent(LeaveGroupRequest) == []


def test_unsubscribe_while_stale_completes() -> None:
    driver, (a, _b) = stable_group("a", "b", max_poll_interval_ms=5_000)
    a.polling = False
    driver.run_until(lambda: a.state is M.STALE, timeout_ms=10_000)
    future = a.leave()
    driver.run_until(future.done, timeout_ms=5_000)
    assert future.exception() is None
    assert a.state is M.UNJOINED
    assert a.assignment() == set()


def test_unsubscribe_during_the_poll_timer_leave_completes() -> None:
    driver, (a, _b) = stable_group("a", "b", max_poll_interval_ms=5_000)
    a.polling = False
    driver.hold(LeaveGroupRequest, a)
    driver.run_until(lambda: a.state is M.LEAVING, timeout_ms=10_000)
    future = a.leave()
    driver.release(LeaveGroupRequest, a)
    driver.run(5_000)
    assert future.done()
    assert a.state is M.UNJOINED


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
    assert a.manager.poll(driver.now_ms).unsent == []


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


# -- leaving ---------------------------------------------------------------------------------------


def test_leave_revokes_then_sends_leave_group_then_is_unjoined() -> None:
    driver, (a, b) = stable_group("a", "b", assignors=EAGER)
    owned = a.assignment()
    a.auto_ack = False
    future = a.leave()
    assert a.state is M.PREPARE_LEAVING
    assert a.fetchable() == set()
    driver.run(500)
    assert not future.done()
    assert a.sent(LeaveGroupRequest) == []  # not before the callback is acknowledged
    call = a.ack(REVOKED)
    assert call.partitions == owned
    assert a.state is M.LEAVING
    driver.run_until(future.done)
    assert future.result() is None
    assert a.state is M.UNJOINED
    leave = a.sent(LeaveGroupRequest)
    assert len(leave) == 1 and leave[0].sent_ms >= (call.acknowledged_ms or 0)
    assert leave[0].error_code == 0
    assert a.member_id == "" and a.manager.generation == -1
    assert a.assignment() == set()
    driver.settle(b)
    assert b.assignment() == all_of(6)


def test_leave_while_unjoined_completes_at_once() -> None:
    driver = GroupDriver(topics={"t": 2})
    a = driver.add_member("a")
    future = a.leave()
    assert future.done() and a.state is M.UNJOINED
    assert a.sent(LeaveGroupRequest) == []


def test_a_static_member_closing_does_not_leave_the_group() -> None:
    driver = GroupDriver(topics={"t": 4})
    a = driver.add_member("a", instance_id="s1")
    b = driver.add_member("b", instance_id="s2")
    driver.settle()
    member_id = a.member_id
    future = a.leave(on_close=True)
    driver.run_until(future.done)
    assert a.state is M.UNJOINED
    assert a.sent(LeaveGroupRequest) == []
    assert [c.method for c in a.calls][-1] == REVOKED
    a.stopped = True
    driver.run(SESSION_MS // 2)
    assert member_id in driver.group().members  # kept until the session times out
    assert b.state is M.STABLE and driver.group().generation == 2


def test_a_static_member_unsubscribing_leaves_the_group() -> None:
    driver = GroupDriver(topics={"t": 4})
    a = driver.add_member("a", instance_id="s1")
    b = driver.add_member("b", instance_id="s2")
    driver.settle()
    member_id = a.member_id
    future = a.leave(on_close=False)
    driver.run_until(future.done)
    assert len(a.sent(LeaveGroupRequest)) == 1
    assert member_id not in driver.group().members
    a.stopped = True
    driver.settle(b)
    assert b.assignment() == all_of(4)


def test_leave_with_auto_commit_commits_the_consumed_positions() -> None:
    driver, (a, _b) = stable_group("a", "b", partitions=4, assignors=EAGER, auto_commit=True)
    owned = a.assignment()
    for tp in owned:
        a.consume(tp, 7)
    future = a.leave()
    driver.run_until(future.done)
    commit = a.sent(OffsetCommitRequest)[-1]
    assert commit.request.generation_id_or_member_epoch == 2
    assert commit.request.member_id
    assert commit.error_code == 0
    stored = driver.coordinator.cluster.committed.get("g", {})
    assert {tp: stored[tp].offset for tp in owned if tp in stored} == {tp: 7 for tp in owned}


def test_leave_while_a_join_is_held_by_the_coordinator_sends_leave_group_promptly() -> None:
    driver, (a, b) = stable_group("a", "b", assignors=EAGER, max_poll_interval_ms=60_000)
    b.polling = False  # b's application is busy: it cannot run on_partitions_revoked yet
    a.manager.request_rejoin("test")
    driver.run_until(lambda: a.state is M.JOINING)
    driver.run(1_000)
    start = driver.now_ms
    a.leave()
    driver.run(1_000)
    assert sent_between(a, LeaveGroupRequest, start, driver.now_ms)


# -- static membership -----------------------------------------------------------------------------


@pytest.mark.parametrize("join_version", [5, 9])
@pytest.mark.parametrize("replaced", ["leader", "follower"])
def test_a_replaced_static_member_gets_its_partitions_back_without_a_rebalance(
    replaced: str, join_version: int
) -> None:
    coordinator = FakeGroupCoordinator(max_versions={JoinGroupRequest: join_version})
    driver = GroupDriver(coordinator, topics={"t": 6})
    driver.observers.append(exclusive_ownership)
    a = driver.add_member("a", instance_id="s1")
    driver.settle()
    b = driver.add_member("b", instance_id="s2")
    driver.settle()
    assert driver.group().leader_id == a.member_id
    old, other = (a, b) if replaced == "leader" else (b, a)
    owned, other_owned = old.assignment(), other.assignment()
    generation = driver.group().generation
    other_joins, other_calls = len(other.sent(JoinGroupRequest)), len(other.calls)
    since = driver.now_ms

    old.stopped = True  # the process dies (no LeaveGroup) ...
    driver.run(SESSION_MS // 2)
    new = driver.add_member(f"{old.name}2", instance_id=old.manager._instance_id)  # ... and restarts
    driver.settle(new, other)

    assert new.assignment() == owned
    assert new.member_id != old.member_id
    assert [e.error_code for e in new.sent(JoinGroupRequest)] == [0]  # no MEMBER_ID_REQUIRED
    assert driver.group().generation == generation
    assert other.assignment() == other_owned
    assert len(other.sent(JoinGroupRequest)) == other_joins
    assert len(other.calls) == other_calls
    driver.run(3 * HEARTBEAT_MS)
    beats = [e for e in other.sent(HeartbeatRequest) if e.sent_ms >= since]
    assert len(beats) >= 7 and all(e.error_code == 0 for e in beats)
    assert driver.stable(new, other) and driver.group().generation == generation


def test_a_static_member_not_back_within_the_session_timeout_is_replaced_by_a_rebalance() -> None:
    driver = GroupDriver(topics={"t": 4})
    a = driver.add_member("a", instance_id="s1")
    b = driver.add_member("b", instance_id="s2")
    driver.settle()
    b.stopped = True
    driver.run_until(lambda: "s2" not in driver.group().static, timeout_ms=2 * SESSION_MS)
    driver.settle(a)
    assert a.assignment() == all_of(4)


# -- commits during rebalances and after fencing ---------------------------------------------------


def test_a_commit_while_stable_carries_the_generation() -> None:
    driver, (a,) = stable_group("a", partitions=2)
    future = a.commit({TopicPartition("t", 0): 5})
    driver.run_until(future.done)
    assert future.exception() is None
    commit = a.sent(OffsetCommitRequest)[-1]
    assert commit.request.generation_id_or_member_epoch == 1
    assert commit.request.member_id == a.member_id


@pytest.mark.parametrize("state", [M.JOINING, M.AWAITING_SYNC])
def test_a_commit_during_a_rebalance_fails_with_rebalance_in_progress(state: MemberState) -> None:
    driver, (a,) = stable_group("a", partitions=2, assignors=COOPERATIVE)
    held = JoinGroupRequest if state is M.JOINING else SyncGroupRequest
    driver.hold(held, a)
    a.manager.request_rejoin("test")
    driver.run_until(lambda: a.state is state)
    future = a.commit({TopicPartition("t", 0): 5})
    driver.run_until(future.done, timeout_ms=1_000)
    assert isinstance(future.exception(), RebalanceInProgressError)
    assert a.sent(OffsetCommitRequest) == []
    driver.release(held, a)
    driver.settle()


def test_a_commit_after_the_coordinator_removed_the_member_fails_with_commit_failed() -> None:
    driver, (a, _b) = stable_group("a", "b", partitions=4)
    driver.coordinator.remove_member("g", a.member_id, driver.now_ms)
    future = a.commit({next(iter(a.assignment())): 5})
    driver.run_until(future.done, timeout_ms=1_000)
    assert isinstance(future.exception(), CommitFailedError)
    assert a.sent(OffsetCommitRequest)[-1].error_code == UNKNOWN_MEMBER_ID


def test_a_commit_while_losing_partitions_fails_with_commit_failed() -> None:
    driver, (a, _b) = stable_group("a", "b", partitions=4)
    a.auto_ack = False
    driver.coordinator.inject(HeartbeatRequest, ILLEGAL_GENERATION, member_id=a.member_id)
    driver.run_until(lambda: a.state is M.LOSING_PARTITIONS, timeout_ms=2 * HEARTBEAT_MS)
    commits_before = len(a.sent(OffsetCommitRequest))
    future = a.commit({TopicPartition("t", 0): 5})
    driver.run_until(future.done, timeout_ms=1_000)
    assert isinstance(future.exception(), CommitFailedError)
    # Like Java, the client refuses it: nothing is sent without a valid generation.
    assert len(a.sent(OffsetCommitRequest)) == commits_before


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


# -- the fake coordinator itself -------------------------------------------------------------------


def test_the_coordinator_holds_a_join_until_every_known_member_rejoined() -> None:
    driver, (a, b) = stable_group("a", "b", assignors=COOPERATIVE)
    b.polling = False
    b.auto_ack = False
    b.stopped = True  # b will not rejoin: the join completes at the rebalance timeout or b's expiry
    a.manager.request_rejoin("test")
    driver.run_until(lambda: a.state is M.JOINING)
    start = driver.now_ms
    driver.run_until(lambda: a.state is not M.JOINING, timeout_ms=MAX_POLL_MS + 1_000)
    assert (
        driver.group().state is GroupState.COMPLETING_REBALANCE or driver.group().state is GroupState.STABLE
    )
    assert driver.now_ms - start >= SESSION_MS - 2 * HEARTBEAT_MS
    assert list(driver.group().members) == [a.member_id]


def test_the_coordinator_answers_rebalance_in_progress_to_heartbeats_while_a_join_is_pending() -> None:
    driver, (a,) = stable_group("a", assignors=COOPERATIVE)
    b = driver.add_member("b", assignors=COOPERATIVE)
    driver.run_until(lambda: driver.group().state is GroupState.PREPARING_REBALANCE)
    driver.run_until(lambda: a.state is M.JOINING, timeout_ms=2 * HEARTBEAT_MS)
    assert a.sent(HeartbeatRequest)[-1].error_code == REBALANCE_IN_PROGRESS
    driver.settle()
    assert b.assignment()


def test_the_coordinator_expires_a_member_that_never_comes_back_with_its_member_id() -> None:
    driver = GroupDriver(topics={"t": 2})
    a = driver.add_member("a")
    driver.settle()
    b = driver.add_member("b")
    driver.hold(JoinGroupRequest, b)
    driver.run_until(lambda: bool(driver.group().pending))
    b.stopped = True
    driver.run_until(lambda: not driver.group().pending, timeout_ms=2 * SESSION_MS)
    driver.run(3 * HEARTBEAT_MS)
    assert driver.stable(a) and a.assignment() == all_of(2)


def test_the_driver_is_deterministic() -> None:
    def scenario() -> list[tuple[int, str, str, object]]:
        driver, _ = stable_group("a", "b", "c", assignors=COOPERATIVE, partitions=5)
        return [(t, who, kind, detail) for t, who, kind, detail in driver.log]

    first = scenario()
    assert first == scenario()
    assert len(first) > 50


# direct requests to the coordinator (generated classes, encoded and decoded at ``version``)


def call(
    coordinator: FakeGroupCoordinator, request: Any, now_ms: int, version: int | None = None
) -> list[Any]:
    """Send ``request`` to broker 0; the response(s) delivered so far (none while it is held)."""
    cls = type(request)
    v = cls.MAX_VERSION if version is None else version
    answers: list[Any] = []
    coordinator.handle(
        0, roundtrip(request, v), v, now_ms, lambda r: answers.append(roundtrip(r, v, cls.RESPONSE))
    )
    return answers


def join_request(member_id: str = "", *, rebalance_timeout_ms: int = 5_000) -> JoinGroupRequest:
    metadata = encode_subscription(Subscription(("t",)))
    return JoinGroupRequest(
        group_id="g",
        session_timeout_ms=SESSION_MS,
        rebalance_timeout_ms=rebalance_timeout_ms,
        member_id=member_id,
        protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol(name="range", metadata=metadata)],
    )


def commit_request(generation: int, member_id: str) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id="g",
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        topics=[
            OffsetCommitRequestTopic(
                name="t", partitions=[OffsetCommitRequestPartition(partition_index=0, committed_offset=9)]
            )
        ],
    )


def join_two(coordinator: FakeGroupCoordinator) -> tuple[str, str]:
    """Members x (leader) and y in a stable generation 1 of group ``g``; returns their ids."""
    (rx,) = call(coordinator, join_request(), 0)
    (ry,) = call(coordinator, join_request(), 0)
    assert rx.error_code == ry.error_code == MEMBER_ID_REQUIRED
    x, y = rx.member_id, ry.member_id
    assert call(coordinator, join_request(x), 0) == []  # held: y is pending
    (jy,) = call(coordinator, join_request(y), 0)
    assert jy.generation_id == 1 and jy.leader == x and jy.members == []
    assert call(coordinator, SyncGroupRequest(group_id="g", generation_id=1, member_id=y), 0) == []
    assignments = [
        SyncGroupRequestAssignment(member_id=x, assignment=b""),
        SyncGroupRequestAssignment(member_id=y, assignment=b""),
    ]
    (sx,) = call(
        coordinator, SyncGroupRequest(group_id="g", generation_id=1, member_id=x, assignments=assignments), 0
    )
    assert sx.error_code == 0
    assert coordinator.group("g").state is GroupState.STABLE
    return x, y


def test_the_coordinator_completes_a_join_at_the_rebalance_timeout_without_absent_members() -> None:
    coordinator = FakeGroupCoordinator()
    coordinator.cluster.create_topic("t", 2)
    x, y = join_two(coordinator)
    assert call(coordinator, join_request(x), 100) == []  # x rejoins: held until y rejoins
    for now in range(1_000, 5_100, 1_000):  # y stays alive but does not rejoin
        (beat,) = call(coordinator, HeartbeatRequest(group_id="g", generation_id=1, member_id=y), now)
        assert beat.error_code == REBALANCE_IN_PROGRESS
        coordinator.tick(now)
        assert coordinator.group("g").state is GroupState.PREPARING_REBALANCE
    coordinator.tick(5_100)  # 100 + rebalance timeout
    group = coordinator.group("g")
    assert group.state is GroupState.COMPLETING_REBALANCE
    assert group.generation == 2 and list(group.members) == [x]
    (beat,) = call(coordinator, HeartbeatRequest(group_id="g", generation_id=1, member_id=y), 5_200)
    assert beat.error_code == UNKNOWN_MEMBER_ID


def test_the_coordinator_validates_commits_as_kafka_does() -> None:
    coordinator = FakeGroupCoordinator()
    coordinator.cluster.create_topic("t", 2)
    # no group yet: a plain commit (no generation) is stored
    (ok,) = call(coordinator, commit_request(-1, ""), 0)
    assert ok.topics[0].partitions[0].error_code == 0
    x, _ = join_two(coordinator)
    codes = {
        "member": commit_request(1, x),
        "no generation in a non-empty group": commit_request(-1, ""),
        "stale generation": commit_request(0, x),
        "unknown member": commit_request(1, "nobody"),
    }
    answers = {k: call(coordinator, r, 10)[0].topics[0].partitions[0].error_code for k, r in codes.items()}
    assert answers == {
        "member": 0,
        "no generation in a non-empty group": UNKNOWN_MEMBER_ID,
        "stale generation": ILLEGAL_GENERATION,
        "unknown member": UNKNOWN_MEMBER_ID,
    }
    # while the leader computes the next generation's assignment, commits wait
    call(coordinator, join_request(x), 20)
    coordinator.remove_member("g", _, 20)
    assert coordinator.group("g").state is GroupState.COMPLETING_REBALANCE
    (busy,) = call(coordinator, commit_request(2, x), 30)
    assert busy.topics[0].partitions[0].error_code == REBALANCE_IN_PROGRESS


def test_the_coordinator_keeps_the_subscriptions_it_was_sent() -> None:
    driver, (a, b) = stable_group("a", "b", assignors=COOPERATIVE)
    group = driver.group()
    assert group.subscription(a.member_id).topics == ("t",)
    # a's last JoinGroup claimed what it kept; b joined last owning nothing
    claims = {
        m.name: set(decode_subscription(group.members[m.member_id].metadata(COOPERATIVE[0])).owned_partitions)
        for m in (a, b)
    }
    assert claims == {"a": a.assignment(), "b": set()}
    assert {mid: set(asg.partitions) for mid, asg in group.assignments().items()} == {
        a.member_id: a.assignment(),
        b.member_id: b.assignment(),
    }
