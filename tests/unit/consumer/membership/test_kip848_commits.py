"""Commits of a KIP-848 member: the member epoch they carry, and when they fail on the client."""

from __future__ import annotations

from kaflux.errors import (
    CommitFailedError,
)
from kaflux.protocol.messages.offset_commit import (
    OffsetCommitRequest,
)
from kaflux.structs import TopicPartition

from support.fake_consumer_group_coordinator import (
    FENCED_MEMBER_EPOCH,
    STALE_MEMBER_EPOCH,
)
from support.kip848_membership_rig import (
    HB,
    HEARTBEAT_MS,
    REVOKED,
    M,
    all_of,
    entered,
    member_in,
    stable_group,
)

# -- commits ---------------------------------------------------------------------------------------------


def test_a_commit_while_stable_carries_the_member_epoch_at_offset_commit_v9() -> None:
    driver, (a,) = stable_group("a", partitions=2)
    future = a.commit({TopicPartition("t", 0): 5})
    driver.run_until(future.done)
    assert future.exception() is None
    commit = a.sent(OffsetCommitRequest)[-1]
    assert commit.version == 9
    assert commit.request.generation_id_or_member_epoch == a.manager.generation == 1
    assert commit.request.member_id == a.member_id
    assert driver.coordinator.cluster.committed["g"][TopicPartition("t", 0)].offset == 5


def test_auto_commit_commits_before_the_revocation_with_the_member_epoch() -> None:
    driver, (a,) = stable_group("a", auto_commit=True)
    for tp in a.assignment():
        a.consume(tp, 7)
    epoch = a.manager.generation
    driver.add_member("b")
    driver.settle()
    revoke = a.calls_of(REVOKED)[0]
    commit = next(e for e in a.sent(OffsetCommitRequest) if e.sent_ms >= entered(a, M.PREPARE_REVOCATION))
    assert commit.state is M.PREPARE_REVOCATION
    assert commit.version == 9
    assert commit.request.generation_id_or_member_epoch == epoch
    assert commit.request.member_id == a.member_id
    assert commit.error_code == 0
    assert commit.delivered_ms is not None and commit.delivered_ms <= revoke.requested_ms
    stored = driver.coordinator.cluster.committed["g"]
    assert {tp: stored[tp].offset for tp in all_of(6)} == {tp: 7 for tp in all_of(6)}


def test_a_commit_with_a_stale_member_epoch_fails_with_commit_failed() -> None:
    driver, (a, c) = stable_group("a", "c")
    # The coordinator moves a to a new epoch (c leaves, a gains partitions) in an answer a
    # does not get yet.
    driver.hold(HB, a)
    driver.run_until(c.leave().done)
    driver.run_until(lambda: driver.group().members[a.member_id].member_epoch > a.manager.generation)
    assert a.state is M.STABLE
    future = a.commit({TopicPartition("t", 0): 5})
    driver.run_until(future.done, timeout_ms=1_000)
    assert isinstance(future.exception(), CommitFailedError)
    commit = a.sent(OffsetCommitRequest)[-1]
    assert commit.request.generation_id_or_member_epoch == a.manager.generation
    assert commit.error_code == STALE_MEMBER_EPOCH
    assert a.state is M.STABLE  # a commit error does not fence
    driver.release(HB, a)
    driver.settle(a)
    retried = a.commit({TopicPartition("t", 0): 5})
    driver.run_until(retried.done, timeout_ms=1_000)
    assert retried.exception() is None


def test_a_commit_before_revocation_is_abandoned_when_the_member_is_fenced() -> None:
    """The commit made before a revocation is retried for up to max.poll.interval.ms; once the
    member lost its partitions, it must stop: later, with a newer epoch, it could commit the
    positions of partitions another member now owns."""
    driver, a = member_in(M.PREPARE_REVOCATION, code=FENCED_MEMBER_EPOCH)  # its commit is held
    assert a.commits.has_pending()
    revoked_before = len(a.calls_of(REVOKED))
    driver.release(HB, a)  # the held heartbeat answers FENCED_MEMBER_EPOCH
    driver.run_until(lambda: a.state is M.LOSING_PARTITIONS, timeout_ms=3 * HEARTBEAT_MS)
    driver.step()
    assert not a.commits.has_pending()  # its response is still held, but nobody waits for it
    sent = len(a.sent(OffsetCommitRequest))
    driver.release(OffsetCommitRequest, a)
    driver.settle(a)
    assert len(a.calls_of(REVOKED)) == revoked_before  # the abandoned revocation did not go on
    assert len(a.sent(OffsetCommitRequest)) == sent  # and its commit was never sent again


def test_a_commit_while_fenced_fails_on_the_client() -> None:
    driver, a = member_in(M.LOSING_PARTITIONS)
    commits = len(a.sent(OffsetCommitRequest))
    future = a.commit({TopicPartition("t", 0): 5})
    driver.run_until(future.done, timeout_ms=1_000)
    assert isinstance(future.exception(), CommitFailedError)
    assert len(a.sent(OffsetCommitRequest)) == commits  # refused before sending
