"""A classic member leaving its group (unsubscribe, close), and static members (KIP-345)."""

from __future__ import annotations

import pytest

from kaflux.protocol.messages.heartbeat import HeartbeatRequest
from kaflux.protocol.messages.join_group import JoinGroupRequest
from kaflux.protocol.messages.leave_group import LeaveGroupRequest
from kaflux.protocol.messages.offset_commit import (
    OffsetCommitRequest,
)

from support.classic_membership_rig import (
    EAGER,
    HEARTBEAT_MS,
    REVOKED,
    SESSION_MS,
    M,
    all_of,
    sent_between,
    stable_group,
)
from support.fake_group_coordinator import (
    FakeGroupCoordinator,
    GroupDriver,
    exclusive_ownership,
)

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
