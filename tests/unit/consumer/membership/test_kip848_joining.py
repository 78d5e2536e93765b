"""The KIP-848 member joins (epoch 0, every partition), runs its rebalance callbacks, and reports
its state."""

from __future__ import annotations

import itertools
import re

import pytest

from support.kip848_membership_rig import (
    ASSIGNED,
    HB,
    HEARTBEAT_MS,
    REVOKED,
    M,
    all_of,
    moves,
    new_driver,
    owned_in,
    stable_group,
    tps,
)

# -- joining ---------------------------------------------------------------------------------------------


def test_a_single_member_joins_with_epoch_0_and_gets_every_partition() -> None:
    driver = new_driver(topics={"t": 6})
    a = driver.add_member("a", max_poll_interval_ms=45_000)
    assert a.state is M.UNJOINED
    driver.settle()

    assert a.states() == [M.JOINING, M.RECONCILING, M.ASSIGNING_PARTITIONS, M.ACKNOWLEDGING, M.STABLE]
    assert a.assignment() == all_of(6)
    assert [(c.method, set(c.partitions)) for c in a.calls] == [(ASSIGNED, all_of(6))]
    known = driver.group().members[a.member_id]
    assert a.manager.generation == known.member_epoch == driver.group().group_epoch == 1
    assert a.manager.group_metadata.member_id == a.member_id
    assert a.manager.group_metadata.generation_id == 1
    # the member id is the client's own (KIP-1082): Uuid.toString() form, 22 characters
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", a.member_id)
    join, ack = driver.heartbeats(a)[:2]
    assert join.version == 1
    assert (join.request.member_id, join.request.member_epoch) == (a.member_id, 0)
    assert join.request.subscribed_topic_names == ["t"]
    assert join.request.subscribed_topic_regex == ""  # a join carries an empty regex with the names
    assert join.request.rebalance_timeout_ms == 45_000  # max.poll.interval.ms
    assert join.request.topic_partitions == []
    assert join.response.member_epoch == 1
    # the acknowledgement: the assignment in place, at the new epoch, nothing else changed
    assert ack.request.member_epoch == 1
    assert owned_in(ack.request, driver) == all_of(6)
    assert ack.request.subscribed_topic_names is None and ack.request.rebalance_timeout_ms == -1


def test_the_join_starts_at_the_first_poll_after_subscribe() -> None:
    driver = new_driver(topics={"t": 2})
    a = driver.add_member("a")
    a.polling = False
    driver.run(2_000)
    assert a.state is M.UNJOINED
    assert driver.heartbeats(a) == []
    a.polling = True
    driver.settle()
    assert a.assignment() == all_of(2)


def test_partitions_are_not_fetchable_until_on_partitions_assigned_is_acknowledged() -> None:
    driver = new_driver(topics={"t": 3})
    a = driver.add_member("a")
    a.auto_ack = False
    driver.run_until(lambda: a.state is M.ASSIGNING_PARTITIONS)
    driver.run(500)
    assert a.assignment() == all_of(3)
    assert a.fetchable() == set()
    a.ack(ASSIGNED)
    assert a.fetchable() == all_of(3)


# -- rebalance callbacks -------------------------------------------------------------------------------


@pytest.mark.parametrize("method", [REVOKED, ASSIGNED])
def test_a_raising_rebalance_callback_still_lets_the_reconciliation_proceed(method: str) -> None:
    """Current kaflux behaviour (both protocols): the error is logged and the reconciliation
    goes on. Java instead leaves the member RECONCILING without acknowledging, until the
    coordinator's rebalance timeout removes it."""
    driver, (a,) = stable_group("a")
    a.callback_errors[method] = RuntimeError("listener failed")
    b = driver.add_member("b")
    driver.settle()
    assert any(c.error is not None for c in a.calls_of(method))
    assert a.assignment() == tps(0, 1, 2) and b.assignment() == tps(3, 4, 5)
    assert a.state is M.STABLE
    assert a.fetchable() == tps(0, 1, 2)


def test_without_a_listener_no_callbacks_are_requested() -> None:
    driver, (a,) = stable_group("a", has_listener=False)
    b = driver.add_member("b", has_listener=False)
    driver.settle()
    assert a.requested == [] and b.requested == []
    assert a.assignment() | b.assignment() == all_of(6)
    assert (M.REVOKING_PARTITIONS, M.PARTITIONS_REVOKED) in moves(a)


# -- observability ---------------------------------------------------------------------------------


def test_group_state_reports_the_epoch_member_id_assignment_and_reason() -> None:
    _, (_, b) = stable_group("a", "b", partitions=4)
    state = b.manager.group_state()
    assert (state.protocol, state.state, state.member_id) == ("consumer", "STABLE", b.member_id)
    assert state.generation == b.manager.epoch > 0  # type: ignore[attr-defined]
    assert state.assignment == frozenset(b.assignment()) and state.assignment
    assert state.reason.startswith("new target assignment from the coordinator at epoch")


def test_group_state_names_a_fence_as_the_reason() -> None:
    driver, (a,) = stable_group("a", partitions=4)
    a.auto_ack = False
    driver.coordinator.inject(HB, 110, member_id=a.member_id)
    driver.run_until(lambda: a.state is M.LOSING_PARTITIONS, timeout_ms=2 * HEARTBEAT_MS)
    state = a.manager.group_state()
    assert (state.state, state.reason) == (
        "LOSING_PARTITIONS",
        "fenced by the coordinator: FencedMemberEpochError",
    )


def test_every_state_change_is_logged_at_info_with_its_reason(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("INFO", logger="kaflux.consumer.membership"):
        driver, (a,) = stable_group("a", partitions=4)
        a.leave()
        driver.run_until(lambda: a.state is M.UNJOINED, timeout_ms=4 * HEARTBEAT_MS)
    changes = [
        r.getMessage()
        for r in caplog.records
        if r.levelname == "INFO"
        and r.name.startswith("kaflux.consumer.membership")
        and " -> " in r.getMessage()
    ]
    states = [M.UNJOINED, *a.states()]
    moved = list(itertools.pairwise(states))
    assert len(changes) == len(moved), changes
    assert all(f"{s.name} -> {t.name}" in line for line, (s, t) in zip(changes, moved, strict=True))
    assert "(unsubscribe())" in changes[-1]
