"""Classic rebalances: eager (revoke everything, then rejoin), cooperative (move only what must
move), and the rebalance callbacks they wait for."""

from __future__ import annotations

import pytest

from kaflux.consumer.assignors import decode_subscription
from kaflux.protocol.messages.heartbeat import HeartbeatRequest
from kaflux.protocol.messages.join_group import JoinGroupRequest

from support.classic_membership_rig import (
    ASSIGNED,
    COOPERATIVE,
    EAGER,
    EAGER_NOTHING_FETCHABLE,
    HEARTBEAT_MS,
    LOST,
    REVOKED,
    M,
    all_of,
    record_fetchable,
    sent_between,
    stable_group,
    tps,
)
from support.fake_group_coordinator import (
    UNKNOWN_MEMBER_ID,
    GroupDriver,
    exclusive_ownership,
)

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
