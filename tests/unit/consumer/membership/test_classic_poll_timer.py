"""The classic member's poll timer (max.poll.interval.ms): it leaves the group when the
application stops polling."""

from __future__ import annotations

from kaflux.network.requests import MAX_POLL_TIMEOUT_MS
from kaflux.protocol.messages.heartbeat import HeartbeatRequest
from kaflux.protocol.messages.join_group import JoinGroupRequest
from kaflux.protocol.messages.leave_group import LeaveGroupRequest

from support.classic_membership_rig import EAGER, HEARTBEAT_MS, LOST, M, all_of, stable_group

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
    heartbeat = a.heartbeat
    now = driver.now_ms
    beat = a.sent(HeartbeatRequest)[-1].sent_ms
    assert a.heartbeat.maximum_time_to_wait(now) == max(0, beat + HEARTBEAT_MS - now)
    assert 0 < a.heartbeat.maximum_time_to_wait(now) <= HEARTBEAT_MS
    heartbeat.poll_timer.reset(now - 60_001)  # the application stopped polling a while ago
    assert a.heartbeat.maximum_time_to_wait(now) == 0
    a.leave()
    driver.run_until(lambda: a.state is M.UNJOINED, timeout_ms=10_000)
    assert a.heartbeat.maximum_time_to_wait(driver.now_ms) == MAX_POLL_TIMEOUT_MS


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
