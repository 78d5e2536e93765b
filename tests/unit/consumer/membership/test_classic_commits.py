"""Commits around classic rebalances: auto-commit before the revocation, and which generation
a commit carries."""

from __future__ import annotations

import pytest

from kaflux.consumer.member_state import MemberState
from kaflux.errors import (
    CommitFailedError,
    RebalanceInProgressError,
)
from kaflux.protocol.messages.heartbeat import HeartbeatRequest
from kaflux.protocol.messages.join_group import JoinGroupRequest
from kaflux.protocol.messages.offset_commit import (
    OffsetCommitRequest,
)
from kaflux.protocol.messages.sync_group import SyncGroupRequest
from kaflux.structs import TopicPartition

from support.classic_membership_rig import COOPERATIVE, EAGER, HEARTBEAT_MS, REVOKED, M, all_of, stable_group
from support.fake_group_coordinator import (
    ILLEGAL_GENERATION,
    NOT_COORDINATOR,
    UNKNOWN_MEMBER_ID,
)

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
