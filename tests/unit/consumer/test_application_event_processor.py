"""ApplicationEventProcessor: every event reaches its target; expiry and close."""

from __future__ import annotations

from typing import Any

import pytest

from kaflux.consumer.commit_request_manager import CommitRequestManager
from kaflux.consumer.coordinator_request_manager import CoordinatorRequestManager
from kaflux.consumer.event_processor import ApplicationEventProcessor
from kaflux.consumer.events import (
    AssignmentChangeEvent,
    CheckAndUpdatePositionsEvent,
    CommitEvent,
    FetchCommittedOffsetsEvent,
    ListOffsetsEvent,
    PollEvent,
    TopicMetadataEvent,
)
from kaflux.consumer.subscription_state import FetchPosition, ResetStrategy, SubscriptionState
from kaflux.errors import (
    InvalidGroupIdError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    RetriableCommitFailedError,
)
from kaflux.network.backoff import RequestState
from kaflux.protocol.messages.metadata import MetadataRequest
from kaflux.protocol.messages.offset_commit import OffsetCommitRequest
from kaflux.structs import OffsetAndMetadata, TopicPartition

from support.fakes import COORDINATOR_LOAD_IN_PROGRESS, ClientSide, FakeCluster, connect, exact_backoff

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
FAR = 10**9


class Rig:
    def __init__(
        self, fake: FakeCluster, *, group: str | None = "g", auto_commit_interval_ms: int | None = None
    ) -> None:
        self.side: ClientSide = connect(fake)
        self.net = self.side.net
        self.subscription = SubscriptionState(ResetStrategy.EARLIEST)
        self.errors: list[KafkaError] = []
        self.managers: list[Any] = [self.side.metadata]
        self.commits = None
        if group is not None:
            coordinator = CoordinatorRequestManager(
                group, RequestState(exact_backoff()), self.side.cluster, self.errors.append
            )
            self.commits = CommitRequestManager(
                group,
                coordinator,
                self.subscription,
                retry_backoff=exact_backoff(),
                auto_commit_interval_ms=auto_commit_interval_ms,
                require_stable=False,
            )
            self.managers += [coordinator, self.commits]
        self.offsets = self.side.offsets(self.subscription, self.commits, self.errors.append)
        self.managers.append(self.offsets)
        self.processor = ApplicationEventProcessor(
            self.subscription,
            self.side.metadata,
            self.commits,
            self.offsets,
            membership=None,  # manual assignment: no group membership
            allow_auto_create_topics=False,
        )

    def run(self, now_ms: int, passes: int = 1) -> None:
        for i in range(passes):
            self.net.run(self.managers, now_ms + i)


@pytest.fixture
def fake() -> FakeCluster:
    fake = FakeCluster()
    fake.create_topic("a", 2)
    fake.create_topic("b", 1)
    for tp in (A0, A1, B0):
        fake.produce(tp, [b"x", b"y", b"z"])
    fake.commit("g", A0, 2)
    return fake


def test_assignment_change_assigns_and_refreshes_metadata_for_its_topics(fake: FakeCluster) -> None:
    rig = Rig(fake, group=None)
    event = AssignmentChangeEvent(FAR, partitions=[A0, B0])
    rig.processor.process(event, 0)
    assert event.future.result(0) is None
    assert rig.subscription.assigned_partitions() == [A0, B0]
    (metadata,) = rig.side.metadata.poll(0).unsent
    assert isinstance(metadata.request, MetadataRequest)
    assert sorted(t.name for t in metadata.request.topics) == ["a", "b"]  # type: ignore[type-var, union-attr]


def test_assignment_change_commits_the_old_positions_first(fake: FakeCluster) -> None:
    rig = Rig(fake, auto_commit_interval_ms=5_000)
    rig.processor.process(AssignmentChangeEvent(FAR, partitions=[A0, A1]), 0)
    rig.subscription.seek(A1, FetchPosition(3))
    rig.processor.process(AssignmentChangeEvent(FAR, partitions=[B0]), 1)
    rig.run(2, passes=2)
    (commit,) = rig.net.sent(OffsetCommitRequest)
    assert [(t.name, p.partition_index, p.committed_offset) for t in commit.topics for p in t.partitions] == [
        ("a", 1, 3)
    ]


def test_poll_event_drives_the_auto_commit_timer(fake: FakeCluster) -> None:
    rig = Rig(fake, auto_commit_interval_ms=1_000)
    rig.processor.process(AssignmentChangeEvent(FAR, partitions=[A0]), 0)
    rig.processor.process(PollEvent(0), 0)
    rig.subscription.seek(A0, FetchPosition(3))
    assert rig.commits is not None
    rig.processor.process(PollEvent(999), 999)
    assert not rig.commits.has_pending()
    rig.processor.process(PollEvent(1_000), 1_000)
    assert rig.commits.has_pending()


def test_check_and_update_positions_completes_once_positions_are_known(fake: FakeCluster) -> None:
    rig = Rig(fake)
    rig.processor.process(AssignmentChangeEvent(FAR, partitions=[A0, A1]), 0)
    event = CheckAndUpdatePositionsEvent(FAR, partitions=None)
    rig.processor.process(event, 0)
    rig.run(0, passes=4)
    assert event.future.result(0) is True
    assert rig.subscription.position(A0) == FetchPosition(2, None, 0, 0)  # committed
    assert rig.subscription.position(A1) == FetchPosition(0, None, 0, 0)  # reset to earliest


def test_sync_commit_without_offsets_commits_every_consumed_position(fake: FakeCluster) -> None:
    rig = Rig(fake)
    rig.processor.process(AssignmentChangeEvent(FAR, partitions=[A0, A1]), 0)
    rig.subscription.seek(A0, FetchPosition(1))
    event = CommitEvent(FAR, offsets=None, sync=True)
    rig.processor.process(event, 0)
    rig.run(0, passes=2)
    assert event.future.result(0) == {A0: OffsetAndMetadata(1)}
    assert fake.committed["g"][A0].offset == 1


def test_async_commit_is_not_retried(fake: FakeCluster) -> None:
    rig = Rig(fake)
    rig.run(0)
    fake.inject(OffsetCommitRequest, COORDINATOR_LOAD_IN_PROGRESS)
    event = CommitEvent(FAR, offsets={B0: OffsetAndMetadata(1)}, sync=False)
    rig.processor.process(event, 1)
    rig.run(1)
    with pytest.raises(RetriableCommitFailedError):
        event.future.result(0)


@pytest.mark.parametrize(
    "event",
    [CommitEvent(FAR, offsets=None, sync=True), FetchCommittedOffsetsEvent(FAR, partitions=[A0])],
    ids=["commit", "committed"],
)
def test_group_events_without_a_group_fail_with_invalid_group_id(fake: FakeCluster, event: Any) -> None:
    rig = Rig(fake, group=None)
    rig.processor.process(event, 0)
    with pytest.raises(InvalidGroupIdError):
        event.future.result(0)


def test_fetch_committed_offsets(fake: FakeCluster) -> None:
    rig = Rig(fake)
    event = FetchCommittedOffsetsEvent(FAR, partitions=[A0, A1])
    rig.processor.process(event, 0)
    rig.run(0, passes=2)
    assert event.future.result(0) == {A0: OffsetAndMetadata(2), A1: None}


def test_list_offsets(fake: FakeCluster) -> None:
    rig = Rig(fake, group=None)
    event = ListOffsetsEvent(FAR, timestamps={A1: -1, B0: -2}, require_timestamp=False)
    rig.processor.process(event, 0)
    rig.run(0)  # leaders unknown: metadata first, the lookup waits 50 ms
    assert not event.future.done()
    rig.run(50)
    assert event.future.result(0) == {A1: (3, -1, 0), B0: (0, -1, 0)}


def test_topic_metadata_for_one_topic(fake: FakeCluster) -> None:
    rig = Rig(fake, group=None)
    event = TopicMetadataEvent(FAR, topic="a")
    rig.processor.process(event, 0)
    rig.run(0)
    answer = event.future.result(0)
    assert sorted(answer.topics) == ["a"]
    assert sorted(answer.topics["a"].partitions) == [0, 1]


def test_topic_metadata_for_all_topics(fake: FakeCluster) -> None:
    rig = Rig(fake, group=None)
    event = TopicMetadataEvent(FAR, topic=None)
    rig.processor.process(event, 0)
    rig.run(0)
    assert sorted(event.future.result(0).topics) == ["a", "b"]


def test_expire_fails_only_overdue_events(fake: FakeCluster) -> None:
    rig = Rig(fake)
    overdue = FetchCommittedOffsetsEvent(100, partitions=[A0])
    later = FetchCommittedOffsetsEvent(200, partitions=[A1])
    rig.processor.process(overdue, 0)
    rig.processor.process(later, 0)
    rig.processor.expire(99)
    assert not overdue.future.done()
    rig.processor.expire(100)
    with pytest.raises(KafkaTimeoutError, match="FetchCommittedOffsetsEvent"):
        overdue.future.result(0)
    assert not later.future.done()


def test_expire_leaves_completed_events_alone(fake: FakeCluster) -> None:
    rig = Rig(fake, group=None)
    event = AssignmentChangeEvent(100, partitions=[A0])
    rig.processor.process(event, 0)
    rig.processor.expire(1_000)
    assert event.future.result(0) is None


def test_fail_all_fails_pending_events_and_the_managers_work(fake: FakeCluster) -> None:
    rig = Rig(fake)
    committed = FetchCommittedOffsetsEvent(FAR, partitions=[A0])
    lookup = ListOffsetsEvent(FAR, timestamps={A0: -1}, require_timestamp=False)
    rig.processor.process(committed, 0)
    rig.processor.process(lookup, 0)
    error = KafkaConnectionError("the client was closed")
    rig.processor.fail_all(error)
    for event in (committed, lookup):
        with pytest.raises(KafkaConnectionError):
            event.future.result(0)
    assert rig.commits is not None
    assert not rig.commits.has_pending()
