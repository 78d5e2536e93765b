"""A KIP-848 member leaving its group (epoch -1; a static member closing: -2), from any state."""

from __future__ import annotations

import pytest

from kaflux.consumer.member_state import (
    MemberState,
)
from kaflux.protocol.messages.offset_commit import (
    OffsetCommitRequest,
)

from support.fake_consumer_group_coordinator import (
    UNRELEASED_INSTANCE_ID,
    FakeConsumerGroupCoordinator,
)
from support.kip848_membership_rig import (
    HB,
    HEARTBEAT_MS,
    LOST,
    REVOKED,
    SESSION_MS,
    M,
    _name,
    all_of,
    entered,
    held_heartbeat,
    member_in,
    moves,
    new_driver,
    stable_group,
    tps,
)

# -- leaving -----------------------------------------------------------------------------------------------


def test_unsubscribe_revokes_then_sends_a_leave_heartbeat_with_epoch_minus_1() -> None:
    driver, (a, b) = stable_group("a", "b")
    owned = a.assignment()
    member_id = a.member_id
    a.auto_ack = False
    future = a.leave()
    assert a.state is M.PREPARE_LEAVING
    assert a.fetchable() == set()
    driver.run(500)
    assert not future.done()
    assert all(e.request.member_epoch != -1 for e in driver.heartbeats(a))  # not before the callback
    call = a.ack(REVOKED)
    assert set(call.partitions) == owned
    assert a.state is M.LEAVING
    driver.run_until(future.done)
    assert future.result() is None
    assert a.state is M.UNJOINED
    leave = driver.heartbeats(a)[-1]
    assert leave.request.member_epoch == -1 and leave.sent_ms >= (call.acknowledged_ms or 0)
    assert leave.error_code == 0
    assert member_id not in driver.group().members
    assert a.member_id == member_id  # kept for life (KIP-1082)
    assert a.assignment() == set()
    driver.settle(b)
    assert b.assignment() == all_of(6)


LEAVE_STATES = {
    # state: (the coordinator is told, the callback that gives the partitions up)
    M.JOINING: (True, None),
    M.STABLE: (True, REVOKED),
    M.RECONCILING: (True, REVOKED),
    M.PREPARE_REVOCATION: (True, REVOKED),
    M.REVOKING_PARTITIONS: (True, REVOKED),
    M.ASSIGNING_PARTITIONS: (True, REVOKED),
    M.ACKNOWLEDGING: (True, REVOKED),
    M.LOSING_PARTITIONS: (False, LOST),
    M.STALE: (False, LOST),
    M.UNJOINED: (False, None),
}


@pytest.mark.parametrize("state", list(LEAVE_STATES), ids=_name)
def test_unsubscribe_in_any_state_completes_and_tells_the_coordinator_if_it_knows_the_member(
    state: MemberState,
) -> None:
    told, method = LEAVE_STATES[state]
    driver, a = member_in(state)
    owned = a.assignment()
    member_id = a.member_id
    before = len(a.transitions)
    requested = len(a.requested)
    pending = [e for e in a.pending_callbacks if e.method in (REVOKED, LOST)]
    beats = len(driver.heartbeats(a))
    future = a.leave()
    a.auto_ack = True
    driver.release_all()
    driver.run_until(future.done, timeout_ms=3 * HEARTBEAT_MS)
    assert future.exception() is None
    assert a.state is M.UNJOINED
    if state is not M.UNJOINED:
        assert moves(a, before)[0] == (state, M.PREPARE_LEAVING)
    leaves = [e for e in driver.heartbeats(a)[beats:] if e.request.member_epoch == -1]
    assert len(leaves) == (1 if told else 0)
    if told:
        assert member_id not in driver.group().members
    # the callback pending at the leave (if any) hands over its partitions, the leave the rest
    released = pending + [e for e in a.requested[requested:] if e.method in (REVOKED, LOST)]
    assert set().union(*(set(e.partitions) for e in released)) == owned
    assert {e.method for e in released} == ({method} if owned else set())
    assert a.assignment() == set()
    assert a.member_id == member_id


def test_subscribing_again_after_unsubscribe_rejoins_with_the_same_member_id() -> None:
    driver, (a,) = stable_group("a", partitions=2)
    member_id = a.member_id
    driver.run_until(a.leave().done)
    assert member_id not in driver.group().members
    beats = len(driver.heartbeats(a))
    a.subscribe(["t"])
    driver.settle()
    rejoin = driver.heartbeats(a)[beats]
    assert (rejoin.request.member_id, rejoin.request.member_epoch) == (member_id, 0)
    assert rejoin.request.subscribed_topic_names == ["t"] and rejoin.request.topic_partitions == []
    assert a.assignment() == all_of(2)
    assert a.manager.generation == driver.group().members[member_id].member_epoch > 1


def test_leave_during_a_revocation_waits_for_its_callback_then_revokes_the_rest_and_leaves() -> None:
    driver, a = member_in(M.REVOKING_PARTITIONS)
    b = driver.members["b"]
    first = a.pending_callbacks[0]
    assert (first.method, set(first.partitions)) == (REVOKED, tps(3, 4, 5))
    future = a.leave()
    driver.release_all()
    driver.run(2 * HEARTBEAT_MS)
    assert a.state is M.PREPARE_LEAVING and not future.done()
    assert all(e.request.member_epoch != -1 for e in driver.heartbeats(a))
    a.ack(REVOKED)  # the pending revocation ends ...
    assert [set(e.partitions) for e in a.pending_callbacks] == [tps(0, 1, 2)]  # ... the rest goes
    call = a.ack(REVOKED)
    driver.run_until(future.done)
    leave = driver.heartbeats(a)[-1]
    assert leave.request.member_epoch == -1 and leave.sent_ms >= (call.acknowledged_ms or 0)
    assert a.state is M.UNJOINED
    driver.settle(b)
    assert b.assignment() == all_of(6)


def test_unsubscribe_with_the_join_in_flight_tells_the_coordinator() -> None:
    """The coordinator may have added the member before it answered: the member sends its
    leave (as Java does from JOINING), so the others need not wait for its session to expire."""
    driver, (a,) = stable_group("a")
    b = driver.add_member("b")
    driver.hold(HB, b)
    driver.run_until(lambda: held_heartbeat(driver, b) is not None)
    assert b.state is M.JOINING and b.member_id in driver.group().members
    driver.unhold(HB, b)
    future = b.leave()
    driver.run_until(future.done, timeout_ms=HEARTBEAT_MS)
    leave = driver.heartbeats(b)[-1]
    assert (leave.request.member_id, leave.request.member_epoch) == (b.member_id, -1)
    assert b.member_id not in driver.group().members
    driver.release_all()  # the join's answer comes after the leave: ignored
    driver.run(100)
    assert b.state is M.UNJOINED and b.assignment() == set()
    b.stopped = True
    took = driver.settle(a)
    assert took < SESSION_MS // 2
    assert a.assignment() == all_of(6)


def test_heartbeats_go_on_while_the_leave_revocation_callback_runs() -> None:
    """PREPARE_LEAVING with a valid epoch heartbeats (Java does): a slow on_partitions_revoked
    in unsubscribe()/close() does not let the member's session expire; an epoch the coordinator
    moves meanwhile is taken, so the commit and the leave that follow use it."""
    coordinator = FakeConsumerGroupCoordinator(heartbeat_interval_ms=300, session_timeout_ms=2_000)
    driver = new_driver(coordinator, topics={"t": 6})
    a, b, c = (driver.add_member(name, auto_commit=True) for name in "abc")
    driver.settle()
    a.auto_ack = False
    for tp in a.assignment():
        a.consume(tp, 4)
    future = a.leave()
    assert a.state is M.PREPARE_LEAVING
    b.leave()  # the coordinator moves a to a new epoch meanwhile (a gains b's partitions)
    driver.run(3 * 2_000)
    assert a.member_id in driver.group().members  # its session did not expire
    beats = [e for e in driver.heartbeats(a) if e.sent_ms >= entered(a, M.PREPARE_LEAVING)]
    assert len(beats) >= 3 * 2_000 // 300 - 1
    assert all(e.error_code == 0 for e in beats)
    assert a.manager.generation == driver.group().members[a.member_id].member_epoch
    a.ack(REVOKED)
    driver.run_until(future.done)
    commit = a.sent(OffsetCommitRequest)[-1]
    assert commit.error_code == 0  # committed at the current epoch
    assert driver.heartbeats(a)[-1].request.member_epoch == -1
    assert driver.heartbeats(a)[-1].error_code == 0
    assert a.member_id not in driver.group().members
    driver.settle(c)
    assert c.assignment() == all_of(6)


def test_a_static_member_closing_leaves_with_epoch_minus_2_and_keeps_its_partitions() -> None:
    driver = new_driver(topics={"t": 4})
    a = driver.add_member("a", instance_id="s1")
    b = driver.add_member("b", instance_id="s2")
    driver.settle()
    owned = a.assignment()
    member_id = a.member_id
    future = a.leave(on_close=True)
    driver.run_until(future.done)
    assert [c.method for c in a.calls][-1] == REVOKED
    leave = driver.heartbeats(a)[-1]
    assert (leave.request.member_epoch, leave.request.instance_id) == (-2, "s1")
    assert leave.error_code == 0 and leave.response.member_epoch == -2
    a.stopped = True
    driver.run(SESSION_MS // 2)
    # its place and partitions are kept until its session expires: b gets nothing more
    assert driver.group().members[member_id].assigned
    assert b.assignment() == all_of(4) - owned
    assert b.state is M.STABLE
    driver.run_until(lambda: member_id not in driver.group().members, timeout_ms=SESSION_MS)
    driver.settle(b)
    assert b.assignment() == all_of(4)


def test_a_static_member_restarting_after_close_gets_its_partitions_back() -> None:
    driver = new_driver(topics={"t": 4})
    a = driver.add_member("a", instance_id="s1")
    b = driver.add_member("b", instance_id="s2")
    driver.settle()
    owned, other = a.assignment(), b.assignment()
    driver.run_until(a.leave(on_close=True).done)
    a.stopped = True
    b_calls = len(b.calls)
    a2 = driver.add_member("a2", instance_id="s1")
    driver.settle(a2, b)
    assert a2.member_id != a.member_id
    assert a2.assignment() == owned
    assert b.assignment() == other and len(b.calls) == b_calls  # b never noticed
    # while the old instance is active, a second one with the same id is refused
    a3 = driver.add_member("a3", instance_id="s1")
    driver.run_until(lambda: a3.state is M.FATAL, timeout_ms=2 * HEARTBEAT_MS)
    assert driver.heartbeats(a3)[-1].error_code == UNRELEASED_INSTANCE_ID


def test_a_static_member_unsubscribing_leaves_with_epoch_minus_1() -> None:
    driver = new_driver(topics={"t": 4})
    a = driver.add_member("a", instance_id="s1")
    b = driver.add_member("b", instance_id="s2")
    driver.settle()
    member_id = a.member_id
    driver.run_until(a.leave(on_close=False).done)
    assert driver.heartbeats(a)[-1].request.member_epoch == -1
    assert member_id not in driver.group().members
    driver.settle(b)
    assert b.assignment() == all_of(4)
