"""OffsetsRequestManager against the fake cluster: initial positions, resets, lookups."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import Any

import pytest

from kaflux.consumer.commit_request_manager import CommitRequestManager
from kaflux.consumer.coordinator_request_manager import CoordinatorRequestManager
from kaflux.consumer.offsets_request_manager import OffsetResult
from kaflux.consumer.subscription_state import FetchPosition, FetchState, ResetStrategy, SubscriptionState
from kaflux.errors import (
    KafkaError,
    KafkaTimeoutError,
    NoOffsetForPartitionError,
    TopicAuthorizationFailedError,
)
from kaflux.network.backoff import RequestState
from kaflux.protocol.messages.list_offsets import ListOffsetsRequest
from kaflux.protocol.messages.offset_fetch import OffsetFetchRequest
from kaflux.protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest
from kaflux.structs import TopicPartition

from support.fakes import (
    BACKOFF_MS,
    NOT_LEADER_OR_FOLLOWER,
    ClientSide,
    FakeCluster,
    connect,
    exact_backoff,
)

TP = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)
TOPIC_AUTHORIZATION_FAILED = 29


class Offsets:
    """Metadata, optional group (coordinator + commits) and the offsets manager over a fake."""

    def __init__(
        self,
        fake: FakeCluster,
        partitions: Iterable[TopicPartition] = (TP,),
        *,
        group: str | None = "g",
        reset: ResetStrategy = ResetStrategy.EARLIEST,
        read_committed: bool = False,
    ) -> None:
        partitions = list(partitions)
        self.fake = fake
        self.side: ClientSide = connect(fake, {tp.topic for tp in partitions})
        self.net = self.side.net
        self.subscription = SubscriptionState(reset)
        self.subscription.assign_from_user(partitions)
        self.errors: list[KafkaError] = []
        self.managers: list[Any] = [self.side.metadata]
        commits = None
        self.commits: CommitRequestManager | None = None
        if group is not None:
            coordinator = CoordinatorRequestManager(
                group, RequestState(exact_backoff()), self.side.cluster, self.errors.append
            )
            commits = CommitRequestManager(
                group,
                coordinator,
                self.subscription,
                retry_backoff=exact_backoff(),
                auto_commit_interval_ms=None,
                require_stable=read_committed,
            )
            self.managers += [coordinator, commits]
            self.commits = commits
        self.offsets = self.side.offsets(
            self.subscription, commits, self.errors.append, read_committed=read_committed
        )
        self.managers.append(self.offsets)

    def run(self, now_ms: int) -> list[Any]:
        return self.net.run(self.managers, now_ms)

    def run_until(
        self, done: Callable[[], bool], start_ms: int = 0, step_ms: int = 1, passes: int = 50
    ) -> int:
        now = start_ms
        for _ in range(passes):
            if done():
                return now
            self.run(now)
            now += step_ms
        raise AssertionError("condition not reached")

    def position(self, tp: TopicPartition = TP) -> FetchPosition | None:
        return self.subscription.position(tp)


@pytest.fixture
def fake() -> FakeCluster:
    fake = FakeCluster(brokers=2)
    fake.create_topic("t", 2, leaders=[0, 1])
    for tp in (TP, TP1):
        fake.produce(tp, [b"a", b"b", b"c", b"d"])
    fake.delete_records(TP, 1)
    return fake


def test_initial_position_is_the_committed_offset_when_the_group_has_one(fake: FakeCluster) -> None:
    fake.commit("g", TP, 3, leader_epoch=0)
    rig = Offsets(fake)
    rig.run_until(lambda: rig.position() is not None)
    assert rig.position() == FetchPosition(3, 0, 0, 0)
    assert rig.net.sent(ListOffsetsRequest) == []


def test_a_committed_offset_with_a_leader_epoch_is_validated_before_fetching(fake: FakeCluster) -> None:
    fake.move_leader(TP, 0)  # epoch 1 since offset 4
    fake.commit("g", TP, 3, leader_epoch=0)
    rig = Offsets(fake)
    rig.run_until(lambda: rig.subscription.has_all_positions([TP]))
    assert rig.position() == FetchPosition(3, 0, 1, 0)
    (validation,) = rig.net.sent(OffsetForLeaderEpochRequest)
    asked = validation.topics[0].partitions[0]
    assert (asked.current_leader_epoch, asked.leader_epoch) == (1, 0)


def test_a_committed_offset_whose_epoch_the_leader_cannot_place_is_reset(fake: FakeCluster) -> None:
    fake.commit("g", TP, 3, leader_epoch=5)  # the leader is at epoch 0: it cannot tell
    rig = Offsets(fake, reset=ResetStrategy.EARLIEST)
    rig.run_until(lambda: rig.subscription.has_all_positions([TP]))
    assert rig.position() == FetchPosition(1, None, 0, 0)  # the log start, not the commit
    assert len(rig.net.sent(OffsetForLeaderEpochRequest)) == 1


def test_without_a_committed_offset_the_partition_is_reset(fake: FakeCluster) -> None:
    rig = Offsets(fake, reset=ResetStrategy.EARLIEST)
    rig.run_until(lambda: rig.position() is not None)
    assert rig.position() == FetchPosition(1, None, 0, 0)
    (lookup,) = rig.net.sent(ListOffsetsRequest)
    assert lookup.topics[0].partitions[0].timestamp == -2


def test_latest_reset_goes_to_the_end(fake: FakeCluster) -> None:
    rig = Offsets(fake, reset=ResetStrategy.LATEST)
    rig.run_until(lambda: rig.position() is not None)
    assert rig.position().offset == 4  # type: ignore[union-attr]


def test_without_a_group_the_partition_is_reset_at_once(fake: FakeCluster) -> None:
    rig = Offsets(fake, group=None)
    rig.run(0)
    assert rig.net.sent(OffsetFetchRequest) == []
    assert len(rig.net.sent(ListOffsetsRequest)) == 1
    assert rig.position() == FetchPosition(1, None, 0, 0)


def test_reset_policy_none_reports_no_offset_for_partition_once(fake: FakeCluster) -> None:
    rig = Offsets(fake, reset=ResetStrategy.NONE)
    for now in range(10):
        rig.run(now)
    assert len(rig.errors) == 1
    (error,) = rig.errors
    assert isinstance(error, NoOffsetForPartitionError)
    assert error.partitions == {TP}
    assert rig.position() is None
    assert rig.net.sent(ListOffsetsRequest) == []


def test_seek_to_beginning_is_resolved_with_list_offsets(fake: FakeCluster) -> None:
    rig = Offsets(fake, group=None)
    rig.subscription.seek(TP, FetchPosition(3))
    rig.subscription.request_reset(TP, ResetStrategy.EARLIEST)
    rig.run(0)
    assert rig.position() == FetchPosition(1, None, 0, 0)


def test_reset_result_is_ignored_if_the_position_moved_meanwhile(fake: FakeCluster) -> None:
    rig = Offsets(fake, group=None)
    rig.net.add_all(rig.offsets.poll(0), 0)
    rig.subscription.seek(TP, FetchPosition(2))
    rig.net.deliver_all(received_ms=1)
    assert rig.position() == FetchPosition(2)


def test_committed_offset_is_ignored_if_the_position_moved_meanwhile(fake: FakeCluster) -> None:
    fake.commit("g", TP, 3)
    rig = Offsets(fake)
    rig.run(0)  # finds the coordinator; the offsets manager asks for TP's committed offset
    assert rig.commits is not None
    (offset_fetch,) = rig.net.add_all(rig.commits.poll(1), 1)
    assert offset_fetch.api is OffsetFetchRequest
    rig.subscription.seek(TP, FetchPosition(0))
    rig.net.deliver_all(received_ms=2)
    assert rig.position() == FetchPosition(0)


def test_reset_is_retried_after_a_retriable_error(fake: FakeCluster) -> None:
    fake.inject(ListOffsetsRequest, NOT_LEADER_OR_FOLLOWER, tp=TP)
    rig = Offsets(fake, group=None)
    rig.run(0)
    assert rig.position() is None
    rig.run(BACKOFF_MS - 1)
    assert len(rig.net.sent(ListOffsetsRequest)) == 1
    rig.run(BACKOFF_MS)
    assert rig.position() == FetchPosition(1, None, 0, 0)


def test_partition_left_out_of_a_reset_answer_is_asked_for_again(fake: FakeCluster) -> None:
    fake.omit(ListOffsetsRequest, TP)
    rig = Offsets(fake, group=None)
    rig.run(0)
    assert rig.position() is None
    for now in range(1, 20 * BACKOFF_MS, BACKOFF_MS):
        rig.run(now)
    assert rig.position() == FetchPosition(1, None, 0, 0)


def test_await_positions_completes_once_every_partition_has_one(fake: FakeCluster) -> None:
    rig = Offsets(fake, [TP, TP1], group=None)
    future: Future[bool] = Future()
    rig.offsets.await_positions(None, deadline_ms=10_000, future=future)
    rig.run(0)
    rig.run(1)
    assert future.result(0) is True


def test_await_positions_times_out_at_its_deadline(fake: FakeCluster) -> None:
    fake.stop_broker(0)
    rig = Offsets(fake, group=None)
    future: Future[bool] = Future()
    rig.offsets.await_positions([TP], deadline_ms=500, future=future)
    rig.run(499)
    assert not future.done()
    rig.run(500)
    with pytest.raises(KafkaTimeoutError):
        future.result(0)


def test_await_positions_fails_when_there_is_no_reset_policy(fake: FakeCluster) -> None:
    rig = Offsets(fake, reset=ResetStrategy.NONE, group=None)
    future: Future[bool] = Future()
    rig.offsets.await_positions([TP], deadline_ms=10_000, future=future)
    rig.run(0)
    with pytest.raises(NoOffsetForPartitionError):
        future.result(0)


def lookup(
    rig: Offsets, timestamps: dict[TopicPartition, int], deadline_ms: int
) -> Future[dict[TopicPartition, OffsetResult]]:
    future: Future[dict[TopicPartition, OffsetResult]] = Future()
    rig.offsets.list_offsets(timestamps, deadline_ms, future)
    return future


def test_list_offsets_answers_per_partition(fake: FakeCluster) -> None:
    rig = Offsets(fake, group=None)
    rig.subscription.seek(TP, FetchPosition(0))  # no reset of its own
    future = lookup(rig, {TP: -2, TP1: -1}, 10_000)
    rig.run(0)
    assert future.result(0) == {TP: (1, -1, 0), TP1: (4, -1, 0)}
    assert sorted(e.broker_id for e in rig.net.exchanges if e.api is ListOffsetsRequest) == [0, 1]  # type: ignore[type-var]


def test_list_offsets_by_timestamp(fake: FakeCluster) -> None:
    rig = Offsets(fake, group=None)
    future = lookup(rig, {TP1: 1_002, TP: 99_999}, 10_000)
    rig.run(0)
    assert future.result(0) == {TP1: (2, 1_002, 0), TP: None}


def test_empty_lookup_completes_at_once(fake: FakeCluster) -> None:
    rig = Offsets(fake, group=None)
    assert lookup(rig, {}, 0).result(0) == {}


def test_list_offsets_retries_retriable_errors_until_the_deadline(fake: FakeCluster) -> None:
    fake.inject(ListOffsetsRequest, NOT_LEADER_OR_FOLLOWER, tp=TP1, count=-1)
    rig = Offsets(fake, [TP], group=None)
    future = lookup(rig, {TP1: -1}, deadline_ms=1_000)
    now = 0
    while not future.done() and now <= 2_000:
        rig.run(now)
        now += 10
    with pytest.raises(KafkaTimeoutError):
        future.result(0)
    attempts = [e for e in rig.net.exchanges if e.api is ListOffsetsRequest and e.sent_ms > 0]
    assert len(attempts) >= 3
    assert now - 10 >= 1_000


def test_list_offsets_succeeds_after_a_retriable_error(fake: FakeCluster) -> None:
    fake.inject(ListOffsetsRequest, NOT_LEADER_OR_FOLLOWER, tp=TP1)
    rig = Offsets(fake, [TP], group=None)
    future = lookup(rig, {TP1: -1}, deadline_ms=10_000)
    rig.run(1)
    assert not future.done()
    rig.run(1 + BACKOFF_MS)
    assert future.result(0) == {TP1: (4, -1, 0)}


def test_list_offsets_fails_at_once_on_a_non_retriable_error(fake: FakeCluster) -> None:
    fake.inject(ListOffsetsRequest, TOPIC_AUTHORIZATION_FAILED, tp=TP1)
    rig = Offsets(fake, [TP], group=None)
    future = lookup(rig, {TP1: -1}, deadline_ms=10_000)
    rig.run(1)
    with pytest.raises(TopicAuthorizationFailedError):
        future.result(0)


def test_fail_all_fails_pending_lookups(fake: FakeCluster) -> None:
    rig = Offsets(fake, group=None)
    future = lookup(rig, {TP: -1}, deadline_ms=10_000)
    rig.offsets.fail_all(KafkaTimeoutError("closing"))
    with pytest.raises(KafkaTimeoutError, match="closing"):
        future.result(0)


def test_non_retriable_reset_error_is_reported(fake: FakeCluster) -> None:
    fake.inject(ListOffsetsRequest, TOPIC_AUTHORIZATION_FAILED, tp=TP, count=-1)
    rig = Offsets(fake, group=None)
    for now in range(0, 1_000, BACKOFF_MS):
        rig.run(now)
    assert rig.errors
    assert all(isinstance(e, TopicAuthorizationFailedError) for e in rig.errors)


def test_lookup_failing_on_two_leaders_fails_once_without_a_handler_crash(fake: FakeCluster) -> None:
    rig = Offsets(fake, [TP], group=None)
    rig.run(0)  # resolves TP's initial position first
    fake.inject(ListOffsetsRequest, TOPIC_AUTHORIZATION_FAILED, tp=TP)
    fake.inject(ListOffsetsRequest, TOPIC_AUTHORIZATION_FAILED, tp=TP1)
    future = lookup(rig, {TP: -1, TP1: -1}, deadline_ms=10_000)
    sent = rig.net.add_all(rig.offsets.poll(1), 1)
    assert sorted(e.broker_id for e in sent) == [0, 1]  # type: ignore[type-var]
    rig.net.deliver_all(received_ms=2)
    with pytest.raises(TopicAuthorizationFailedError):
        future.result(0)


def test_unknown_leader_is_looked_up_in_metadata_first(fake: FakeCluster) -> None:
    fake.create_topic("other", 1)
    rig = Offsets(fake, group=None)
    future = lookup(rig, {TopicPartition("other", 0): -1}, deadline_ms=10_000)
    rig.run(0)  # no leader known yet: metadata for "other" is requested
    assert rig.side.cluster.leader_for(TopicPartition("other", 0)) == 0
    rig.run(60)
    assert future.result(0) == {TopicPartition("other", 0): (0, -1, 0)}


def test_partitions_awaiting_reset_are_not_fetching(fake: FakeCluster) -> None:
    rig = Offsets(fake, reset=ResetStrategy.NONE, group=None)
    rig.run(0)
    assert [tp for tp, _ in rig.subscription.partitions_in_state(FetchState.AWAIT_RESET)] == [TP]
    assert not rig.subscription.is_fetchable(TP)
