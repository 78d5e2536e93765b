"""The KIP-848 member's poll timer and how long the application may wait; late answers to heartbeats of an
earlier incarnation."""

from __future__ import annotations

import pytest

from kaflux.network.requests import MAX_POLL_TIMEOUT_MS

from support.fake_consumer_group_coordinator import (
    FENCED_MEMBER_EPOCH,
    FakeConsumerGroupCoordinator,
)
from support.kip848_membership_rig import (
    HB,
    HEARTBEAT_MS,
    LOST,
    SESSION_MS,
    M,
    all_of,
    held_heartbeat,
    member_in,
    moves,
    new_driver,
    stable_group,
)

# -- the poll timer --------------------------------------------------------------------------------------


def test_poll_timer_expiry_sends_a_leave_heartbeat_then_the_next_poll_loses_and_rejoins() -> None:
    driver, (a, b) = stable_group("a", "b", max_poll_interval_ms=5_000)
    owned = a.assignment()
    member_id = a.member_id
    a.polling = False
    last_poll = driver.now_ms - driver.step_ms
    driver.run_until(lambda: a.state is M.STALE, timeout_ms=10_000)

    assert a.states()[-3:] == [M.PREPARE_LEAVING, M.LEAVING, M.STALE]
    leave = driver.heartbeats(a)[-1]
    assert last_poll + 5_000 < leave.sent_ms <= last_poll + 5_000 + 2 * driver.step_ms
    assert leave.request.member_epoch == -1
    assert leave.request.member_id == member_id
    # every optional field null, as librdkafka leaves
    assert leave.request.subscribed_topic_names is None and leave.request.subscribed_topic_regex is None
    assert leave.request.topic_partitions is None and leave.request.rebalance_timeout_ms == -1
    assert leave.error_code == 0
    assert member_id not in driver.group().members
    assert a.fetchable() == set()
    assert a.requested_of(LOST) == []  # on_partitions_lost runs on the application's next poll
    driver.settle(b)
    assert b.assignment() == all_of(6)

    driver.run(3_000)
    assert a.state is M.STALE
    assert driver.heartbeats(a)[-1] is leave  # no heartbeats while stale
    a.polling = True
    driver.step()
    assert [(c.method, set(c.partitions)) for c in a.calls_of(LOST)] == [(LOST, owned)]
    driver.settle()
    rejoin = next(e for e in driver.heartbeats(a) if e.sent_ms > leave.sent_ms)
    assert (rejoin.request.member_id, rejoin.request.member_epoch) == (member_id, 0)
    assert (M.STALE, M.LOSING_PARTITIONS) in moves(a)
    assert a.assignment() | b.assignment() == all_of(6)
    assert a.assignment() and b.assignment()


def test_a_member_that_keeps_polling_stays_in_the_group() -> None:
    driver, (a,) = stable_group("a", max_poll_interval_ms=3_000)
    driver.run(10_000)
    assert a.state is M.STABLE
    assert all(e.request.member_epoch > 0 for e in driver.heartbeats(a)[1:])


def test_a_crashed_member_is_expired_after_the_session_timeout() -> None:
    driver, (a, b) = stable_group("a", "b")
    b.stopped = True
    crashed_at = driver.now_ms
    driver.run_until(lambda: b.member_id not in driver.group().members, timeout_ms=2 * SESSION_MS)
    assert SESSION_MS - HEARTBEAT_MS <= driver.now_ms - crashed_at <= SESSION_MS + driver.step_ms
    driver.settle(a)
    assert a.assignment() == all_of(6)


def test_unsubscribe_while_stale_completes_without_a_leave_heartbeat() -> None:
    driver, a = member_in(M.STALE)
    beats = len(driver.heartbeats(a))
    future = a.leave()
    driver.run_until(future.done, timeout_ms=1_000)
    assert a.state is M.UNJOINED
    assert len(driver.heartbeats(a)) == beats
    assert [set(c.partitions) for c in a.calls_of(LOST)] == [all_of(6)]
    assert a.assignment() == set()


# -- late answers and waiting -------------------------------------------------------------------------------


@pytest.mark.parametrize("late", ["fenced", "revocation"])
def test_a_late_answer_to_a_heartbeat_sent_before_the_member_left_and_rejoined_is_ignored(late: str) -> None:
    """The poll timer's leave drops the heartbeat in flight; its answer, delivered after the
    member rejoined, must change nothing (Java could apply it while JOINING)."""
    driver, (a,) = stable_group("a", max_poll_interval_ms=3_000)
    if late == "fenced":
        driver.coordinator.inject(HB, FENCED_MEMBER_EPOCH, member_id=a.member_id)
    else:
        driver.add_member("b", subscribe=False)  # answered later: "revoke 3-5" at the old epoch
    driver.hold(HB, a)
    if late == "revocation":
        driver.members["b"].subscribe(["t"])
        driver.run_until(lambda: driver.group().group_epoch == 2)
    driver.run_until(lambda: held_heartbeat(driver, a) is not None, timeout_ms=2 * HEARTBEAT_MS)
    stale = held_heartbeat(driver, a)
    assert stale is not None
    driver.unhold(HB, a)
    old_epoch = stale.request.member_epoch
    a.polling = False
    driver.run_until(lambda: a.state is M.STALE, timeout_ms=5_000)
    a.polling = True
    driver.settle()
    epoch, owned, calls = a.manager.generation, a.assignment(), len(a.calls)
    assert epoch != old_epoch
    before = len(a.transitions)
    beats = len(driver.heartbeats(a))
    stale.held = False
    driver.step()
    assert stale.done and stale.response is not None
    assert stale.error_code == (FENCED_MEMBER_EPOCH if late == "fenced" else 0)
    driver.run(3 * HEARTBEAT_MS)
    assert a.transitions[before:] == []
    assert a.manager.generation == epoch and a.assignment() == owned
    assert len(a.calls) == calls
    assert all(e.error_code == 0 for e in driver.heartbeats(a)[beats:])


def test_maximum_time_to_wait_is_the_time_to_the_next_heartbeat_and_zero_once_the_poll_timer_expired() -> (
    None
):
    driver, (a,) = stable_group("a", max_poll_interval_ms=60_000)
    now = driver.now_ms
    beat = driver.heartbeats(a)[-1].sent_ms
    assert a.heartbeat.maximum_time_to_wait(now) == max(0, beat + HEARTBEAT_MS - now)
    assert 0 < a.heartbeat.maximum_time_to_wait(now) <= HEARTBEAT_MS
    a.heartbeat.poll_timer.reset(now - 60_001)  # the application stopped polling a while ago
    assert a.heartbeat.maximum_time_to_wait(now) == 0
    a.heartbeat.poll_timer.reset(now)
    future = a.leave()
    driver.run_until(future.done, timeout_ms=10_000)
    assert a.heartbeat.maximum_time_to_wait(driver.now_ms) == MAX_POLL_TIMEOUT_MS


def test_maximum_time_to_wait_follows_the_coordinator_interval() -> None:
    coordinator = FakeConsumerGroupCoordinator(heartbeat_interval_ms=4_000)
    driver = new_driver(coordinator, topics={"t": 2})
    a = driver.add_member("a")
    assert a.heartbeat.maximum_time_to_wait(driver.now_ms) == MAX_POLL_TIMEOUT_MS  # not in a group
    driver.settle()
    driver.run(1_000)
    beat = driver.heartbeats(a)[-1].sent_ms
    assert a.heartbeat.maximum_time_to_wait(driver.now_ms) == beat + 4_000 - driver.now_ms > HEARTBEAT_MS
