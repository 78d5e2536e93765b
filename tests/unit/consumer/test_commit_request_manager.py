"""CommitRequestManager against the fake cluster: commit retries, member errors, auto-commit,
OffsetFetch."""

from __future__ import annotations

import logging
from concurrent.futures import Future

import pytest

from kaflux.consumer.commit_request_manager import (
    MAX_OFFSET_COMMIT_VERSION,
    MAX_OFFSET_FETCH_VERSION,
    CommitRequestManager,
    MemberInfo,
)
from kaflux.consumer.coordinator_request_manager import CoordinatorRequestManager
from kaflux.consumer.subscription_state import FetchPosition, ResetStrategy, SubscriptionState
from kaflux.errors import (
    CommitFailedError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    RebalanceInProgressError,
    RetriableCommitFailedError,
    StaleMemberEpochError,
    UnknownTopicOrPartitionError,
)
from kaflux.network.backoff import RequestState
from kaflux.network.cluster import coordinator_node_id
from kaflux.protocol.messages.find_coordinator import FindCoordinatorRequest
from kaflux.protocol.messages.offset_commit import OffsetCommitRequest
from kaflux.protocol.messages.offset_fetch import OffsetFetchRequest
from kaflux.structs import OffsetAndMetadata, TopicPartition

from support.fakes import (
    BACKOFF_MS,
    COORDINATOR_LOAD_IN_PROGRESS,
    ILLEGAL_GENERATION,
    NOT_COORDINATOR,
    UNKNOWN_MEMBER_ID,
    ClientSide,
    FakeCluster,
    connect,
    exact_backoff,
)

TP, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)
UNSTABLE_OFFSET_COMMIT = 88
Offsets = dict[TopicPartition, OffsetAndMetadata]


class Group:
    """Coordinator lookup and commits for group ``g`` over a fake cluster."""

    def __init__(
        self,
        fake: FakeCluster,
        *,
        auto_commit_interval_ms: int | None = None,
        member: MemberInfo | None = None,
    ) -> None:
        self.fake = fake
        self.side: ClientSide = connect(fake, ["t"])
        self.net = self.side.net
        self.subscription = SubscriptionState(ResetStrategy.EARLIEST)
        self.subscription.assign_from_user([TP, TP1])
        self.fatal: list[KafkaError] = []
        self.coordinator = CoordinatorRequestManager(
            "g", RequestState(exact_backoff()), self.side.cluster, self.fatal.append
        )
        self.commits = CommitRequestManager(
            "g",
            self.coordinator,
            self.subscription,
            retry_backoff=exact_backoff(),
            auto_commit_interval_ms=auto_commit_interval_ms,
            require_stable=True,
            member_info=(lambda: member) if member is not None else MemberInfo,
        )

    def run(self, now_ms: int) -> None:
        self.net.run([self.side.metadata, self.coordinator, self.commits], now_ms)

    def ready(self, now_ms: int = 0) -> int:
        """Find the coordinator; returns the next free time."""
        self.run(now_ms)
        assert self.coordinator.coordinator is not None
        return now_ms + 1

    def commit(
        self, offsets: dict[TopicPartition, int], *, sync: bool, deadline_ms: int = 60_000
    ) -> Future[Offsets]:
        future: Future[Offsets] = Future()
        self.commits.commit(
            {tp: OffsetAndMetadata(o) for tp, o in offsets.items()},
            retry=sync,
            deadline_ms=deadline_ms,
            future=future,
        )
        return future

    def committed(
        self, tps: frozenset[TopicPartition], deadline_ms: int = 60_000
    ) -> Future[dict[TopicPartition, OffsetAndMetadata | None]]:
        future: Future[dict[TopicPartition, OffsetAndMetadata | None]] = Future()
        self.commits.fetch_committed(tps, deadline_ms, future)
        return future

    def stored(self) -> dict[TopicPartition, int]:
        return {tp: c.offset for tp, c in self.fake.committed.get("g", {}).items()}


@pytest.fixture
def fake() -> FakeCluster:
    fake = FakeCluster(brokers=2)
    fake.create_topic("t", 2)
    fake.coordinators["g"] = 1
    return fake


def test_commit_is_sent_to_the_coordinator_and_stored(fake: FakeCluster) -> None:
    group = Group(fake, member=MemberInfo(generation=4, member_id="m-1"))
    now = group.ready()
    future = group.commit({TP: 5, TP1: 7}, sync=True)
    group.run(now)
    assert future.result(0) == {TP: OffsetAndMetadata(5), TP1: OffsetAndMetadata(7)}
    assert group.stored() == {TP: 5, TP1: 7}
    (exchange,) = [e for e in group.net.exchanges if e.api is OffsetCommitRequest]
    assert exchange.node_id == coordinator_node_id(1)
    assert exchange.broker_id == 1
    assert exchange.version == MAX_OFFSET_COMMIT_VERSION
    assert (exchange.request.generation_id_or_member_epoch, exchange.request.member_id) == (4, "m-1")


def test_commit_waits_until_the_coordinator_is_known(fake: FakeCluster) -> None:
    group = Group(fake)
    future = group.commit({TP: 5}, sync=True)
    group.run(0)  # FindCoordinator is answered after the commit manager was polled
    assert group.net.sent(OffsetCommitRequest) == []
    group.run(1)
    assert future.result(0) == {TP: OffsetAndMetadata(5)}


def test_commit_metadata_and_leader_epoch_are_sent(fake: FakeCluster) -> None:
    group = Group(fake)
    now = group.ready()
    future: Future[Offsets] = Future()
    group.commits.commit({TP: OffsetAndMetadata(9, "note", 3)}, retry=True, deadline_ms=10_000, future=future)
    group.run(now)
    future.result(0)
    stored = fake.committed["g"][TP]
    assert (stored.offset, stored.metadata, stored.leader_epoch) == (9, "note", 3)


def test_empty_commit_completes_at_once(fake: FakeCluster) -> None:
    group = Group(fake)
    assert group.commit({}, sync=True).result(0) == {}


def test_sync_commit_retries_retriable_errors_with_backoff(fake: FakeCluster) -> None:
    group = Group(fake)
    now = group.ready()
    fake.inject(OffsetCommitRequest, COORDINATOR_LOAD_IN_PROGRESS, count=2)
    future = group.commit({TP: 5}, sync=True)
    group.run(now)
    group.run(now + BACKOFF_MS - 1)
    assert len(group.net.sent(OffsetCommitRequest)) == 1
    group.run(now + BACKOFF_MS)
    group.run(now + BACKOFF_MS + 2 * BACKOFF_MS - 1)
    assert len(group.net.sent(OffsetCommitRequest)) == 2
    group.run(now + 3 * BACKOFF_MS)
    assert future.result(0) == {TP: OffsetAndMetadata(5)}
    assert len(group.net.sent(OffsetCommitRequest)) == 3


def test_sync_commit_times_out_at_its_deadline(fake: FakeCluster) -> None:
    group = Group(fake)
    now = group.ready()
    fake.inject(OffsetCommitRequest, COORDINATOR_LOAD_IN_PROGRESS, count=-1)
    future = group.commit({TP: 5}, sync=True, deadline_ms=now + 500)
    while not future.done() and now < 5_000:
        group.run(now)
        now += 10
    with pytest.raises(KafkaTimeoutError):
        future.result(0)
    assert now <= 600
    assert group.stored() == {}


def test_async_commit_is_never_retried(fake: FakeCluster) -> None:
    group = Group(fake)
    now = group.ready()
    fake.inject(OffsetCommitRequest, COORDINATOR_LOAD_IN_PROGRESS)
    future = group.commit({TP: 5}, sync=False)
    group.run(now)
    with pytest.raises(RetriableCommitFailedError):
        future.result(0)
    group.run(now + 10_000)
    assert len(group.net.sent(OffsetCommitRequest)) == 1


def test_non_retriable_error_fails_a_sync_commit_at_once(fake: FakeCluster) -> None:
    group = Group(fake)
    now = group.ready()
    fake.inject(OffsetCommitRequest, 28)  # INVALID_COMMIT_OFFSET_SIZE
    future = group.commit({TP: 5}, sync=True)
    group.run(now)
    with pytest.raises(KafkaError) as info:
        future.result(0)
    assert not info.value.retriable


def test_unknown_member_id_fails_with_commit_failed_error(fake: FakeCluster) -> None:
    group = Group(fake)
    now = group.ready()
    fake.inject(OffsetCommitRequest, UNKNOWN_MEMBER_ID)
    future = group.commit({TP: 5}, sync=True)
    group.run(now)
    with pytest.raises(CommitFailedError, match=r"max\.poll\.interval\.ms"):
        future.result(0)
    assert len(group.net.sent(OffsetCommitRequest)) == 1


def test_commit_failed_error_names_the_member_the_generation_and_the_group(fake: FakeCluster) -> None:
    group = Group(fake, member=MemberInfo(generation=7, member_id="m-1"))
    now = group.ready()
    fake.inject(OffsetCommitRequest, ILLEGAL_GENERATION)
    future = group.commit({TP: 5}, sync=True)
    group.run(now)
    with pytest.raises(CommitFailedError) as info:
        future.result(0)
    assert (info.value.group_id, info.value.generation, info.value.member_id) == ("g", 7, "m-1")
    assert "'m-1'" in str(info.value) and "generation 7" in str(info.value)
    assert "pause-and-poll" in str(info.value)


def test_a_member_still_in_the_group_after_a_rebalance_is_told_to_commit_again(fake: FakeCluster) -> None:
    """A cooperative member keeps its partitions through a rebalance; its commit sent in the old
    generation is refused, but it is no 'lost member' (as Java: RebalanceInProgress)."""
    member = MemberInfo(generation=7, member_id="m-1")
    group = Group(fake)
    group.commits = CommitRequestManager(
        "g",
        group.coordinator,
        group.subscription,
        retry_backoff=exact_backoff(),
        auto_commit_interval_ms=None,
        require_stable=True,
        member_info=lambda: member,
    )
    now = group.ready()
    fake.inject(OffsetCommitRequest, ILLEGAL_GENERATION)
    future = group.commit({TP: 5}, sync=True)
    (exchange,) = group.net.add_all(group.commits.poll(now), now)
    member = MemberInfo(generation=8, member_id="m-1")  # the rebalance completed meanwhile
    group.net.deliver(exchange, received_ms=now)
    with pytest.raises(RebalanceInProgressError, match="still a member"):
        future.result(0)


def test_a_retriable_auto_commit_failure_is_logged_at_debug_only(
    fake: FakeCluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="kaflux.consumer.commit_request_manager")
    group = Group(fake, auto_commit_interval_ms=100)
    group.ready(0)
    consumed(group, p0=3)
    fake.inject(OffsetCommitRequest, COORDINATOR_LOAD_IN_PROGRESS, count=5)
    for now in range(100, 1_100, 100):
        group.run(now)
    failures = [r for r in caplog.records if "auto-commit failed" in r.getMessage()]
    assert failures, "the failures are logged"
    assert {r.levelno for r in failures} == {logging.DEBUG}


def test_not_coordinator_finds_the_coordinator_again_and_retries_there(fake: FakeCluster) -> None:
    group = Group(fake)
    now = group.ready()
    fake.coordinators["g"] = 0  # the coordinator moved
    future = group.commit({TP: 5}, sync=True)
    group.run(now)
    (failed,) = [e for e in group.net.exchanges if e.api is OffsetCommitRequest]
    assert failed.response.topics[0].partitions[0].error_code == NOT_COORDINATOR
    assert group.coordinator.coordinator is None
    group.run(now + 1)
    assert len(group.net.sent(FindCoordinatorRequest)) == 2
    assert group.coordinator.coordinator_id == coordinator_node_id(0)
    group.run(now + 1 + BACKOFF_MS)
    assert future.result(0) == {TP: OffsetAndMetadata(5)}
    assert [e.broker_id for e in group.net.exchanges if e.api is OffsetCommitRequest] == [1, 0]


def test_lost_connection_marks_the_coordinator_unknown(fake: FakeCluster) -> None:
    group = Group(fake)
    now = group.ready()
    future = group.commit({TP: 5}, sync=True)
    (exchange,) = group.net.add_all(group.commits.poll(now), now)
    group.net.fail(exchange, KafkaConnectionError("reset by peer"), received_ms=now)
    assert group.coordinator.coordinator is None
    assert not future.done()


def test_lost_commit_response_times_out_and_the_retry_succeeds(fake: FakeCluster) -> None:
    group = Group(fake)
    now = group.ready()
    fake.drop(OffsetCommitRequest)
    future = group.commit({TP: 5}, sync=True)
    group.run(now)
    assert not future.done()
    (lost,) = group.net.expire(now + 30_000)
    assert isinstance(lost.error, KafkaTimeoutError)
    assert group.coordinator.coordinator is None
    for step in range(1, 4):
        group.run(now + 30_000 + step * BACKOFF_MS)
    assert future.result(0) == {TP: OffsetAndMetadata(5)}
    assert len(group.net.sent(OffsetCommitRequest)) == 2


def test_fail_all_fails_pending_commits_and_fetches(fake: FakeCluster) -> None:
    group = Group(fake)
    commit = group.commit({TP: 5}, sync=True)
    fetch = group.committed(frozenset({TP}))
    assert group.commits.has_pending()
    group.commits.fail_all(KafkaConnectionError("closed"))
    for future in (commit, fetch):
        with pytest.raises(KafkaConnectionError):
            future.result(0)
    assert not group.commits.has_pending()


# -- auto-commit -------------------------------------------------------------------------


def consumed(group: Group, **positions: int) -> None:
    for name, offset in positions.items():
        group.subscription.seek(TopicPartition("t", int(name[1:])), FetchPosition(offset))


def commits_sent(group: Group) -> list[dict[TopicPartition, int]]:
    return [
        {
            TopicPartition(t.name, p.partition_index): p.committed_offset
            for t in r.topics
            for p in t.partitions
        }
        for r in group.net.sent(OffsetCommitRequest)
    ]


def test_auto_commit_fires_at_the_interval(fake: FakeCluster) -> None:
    group = Group(fake, auto_commit_interval_ms=5_000)
    group.ready(0)  # the first poll arms the timer
    consumed(group, p0=3, p1=4)
    group.run(4_999)
    assert commits_sent(group) == []
    group.run(5_000)
    assert commits_sent(group) == [{TP: 3, TP1: 4}]
    assert group.stored() == {TP: 3, TP1: 4}


def test_auto_commit_sends_only_changed_offsets(fake: FakeCluster) -> None:
    group = Group(fake, auto_commit_interval_ms=1_000)
    group.ready(0)
    consumed(group, p0=3, p1=4)
    group.run(1_000)
    consumed(group, p0=8)
    group.run(2_000)
    group.run(3_000)  # nothing changed: nothing sent
    assert commits_sent(group) == [{TP: 3, TP1: 4}, {TP: 8}]


def test_auto_commit_poll_asks_to_be_polled_again_at_the_interval(fake: FakeCluster) -> None:
    group = Group(fake, auto_commit_interval_ms=5_000)
    group.ready(0)
    assert group.commits.poll(1_000).time_until_next_poll_ms == 4_000


def test_failed_auto_commit_is_retried_after_the_retry_backoff(fake: FakeCluster) -> None:
    group = Group(fake, auto_commit_interval_ms=5_000)
    group.ready(0)
    consumed(group, p0=3)
    fake.inject(OffsetCommitRequest, COORDINATOR_LOAD_IN_PROGRESS)
    group.run(5_000)
    assert len(commits_sent(group)) == 1
    group.run(5_000 + BACKOFF_MS)
    assert commits_sent(group) == [{TP: 3}, {TP: 3}]
    assert group.stored() == {TP: 3}


def test_auto_commit_now_commits_consumed_positions(fake: FakeCluster) -> None:
    group = Group(fake, auto_commit_interval_ms=5_000)
    now = group.ready()
    consumed(group, p1=6)
    done: Future[Offsets] = Future()
    group.commits.auto_commit_now(now, done)
    group.run(now)
    assert done.result(0) == {TP1: OffsetAndMetadata(6)}


class MovingMember:
    """The member as the membership reports it, changed by the test mid-commit."""

    def __init__(self, epoch: int) -> None:
        self.info = MemberInfo(generation=epoch, member_id="m-1")

    def __call__(self) -> MemberInfo:
        return self.info


def revoking_group(fake: FakeCluster, member: MovingMember) -> Group:
    group = Group(fake, auto_commit_interval_ms=5_000)
    group.commits = CommitRequestManager(
        "g",
        group.coordinator,
        group.subscription,
        retry_backoff=exact_backoff(),
        auto_commit_interval_ms=5_000,
        require_stable=True,
        member_info=member,
        consumer_protocol=True,
    )
    return group


def commit_before_revocation(
    group: Group, fault: int, *, count: int = 1, now: int, until_ms: int = 60_000
) -> Future[Offsets]:
    """Partition 0 consumed up to 4; the next ``count`` OffsetCommits fail with ``fault``; the
    membership asks for the commit before revoking, retried until ``now + until_ms``."""
    consumed(group, p0=4)
    group.fake.inject(OffsetCommitRequest, fault, count=count)
    done: Future[Offsets] = Future()
    group.commits.auto_commit_now(now, done, before_revocation_until_ms=now + until_ms)
    return done


def test_commit_before_revocation_retries_what_an_interval_auto_commit_does_not(fake: FakeCluster) -> None:
    group = revoking_group(fake, MovingMember(3))
    now = group.ready()
    done = commit_before_revocation(group, COORDINATOR_LOAD_IN_PROGRESS, count=2, now=now)
    group.run(now)
    group.run(now + BACKOFF_MS)
    assert not done.done()
    group.run(now + 3 * BACKOFF_MS)
    assert done.result(0) == {TP: OffsetAndMetadata(4)}
    assert commits_sent(group) == [{TP: 4}] * 3
    assert group.stored() == {TP: 4}


def test_commit_before_revocation_after_a_stale_epoch_is_sent_again_with_the_new_epoch(
    fake: FakeCluster,
) -> None:
    member = MovingMember(3)
    group = revoking_group(fake, member)
    now = group.ready()
    done = commit_before_revocation(group, StaleMemberEpochError.code, now=now)
    group.run(now)
    assert not done.done()
    member.info = MemberInfo(generation=4, member_id="m-1")  # the heartbeat brought epoch 4
    group.run(now + BACKOFF_MS)
    assert done.result(0) == {TP: OffsetAndMetadata(4)}
    epochs = [r.generation_id_or_member_epoch for r in group.net.sent(OffsetCommitRequest)]
    assert epochs == [3, 4]


def test_a_user_commit_with_a_stale_epoch_fails_as_in_java(fake: FakeCluster) -> None:
    group = revoking_group(fake, MovingMember(3))
    now = group.ready()
    fake.inject(OffsetCommitRequest, StaleMemberEpochError.code)
    future = group.commit({TP: 5}, sync=True)
    group.run(now)
    with pytest.raises(CommitFailedError, match="StaleMemberEpochError"):
        future.result(0)
    assert len(group.net.sent(OffsetCommitRequest)) == 1


def test_commit_before_revocation_gives_up_at_once_on_a_deleted_topic(fake: FakeCluster) -> None:
    group = revoking_group(fake, MovingMember(3))
    now = group.ready()
    done = commit_before_revocation(group, UnknownTopicOrPartitionError.code, now=now)
    group.run(now)
    with pytest.raises(UnknownTopicOrPartitionError):
        done.result(0)
    assert len(group.net.sent(OffsetCommitRequest)) == 1


def test_commit_before_revocation_stops_retrying_at_its_deadline(fake: FakeCluster) -> None:
    group = revoking_group(fake, MovingMember(3))
    now = group.ready()
    done = commit_before_revocation(group, COORDINATOR_LOAD_IN_PROGRESS, count=-1, now=now, until_ms=500)
    while not done.done() and now < 5_000:
        group.run(now)
        now += 10
    with pytest.raises(KafkaTimeoutError):
        done.result(0)
    assert now <= 600


# -- OffsetFetch ---------------------------------------------------------------------------


def test_committed_offsets_are_fetched_from_the_coordinator(fake: FakeCluster) -> None:
    fake.commit("g", TP, 11, "meta", 2)
    group = Group(fake)
    now = group.ready()
    future = group.committed(frozenset({TP, TP1}))
    group.run(now)
    assert future.result(0) == {TP: OffsetAndMetadata(11, "meta", 2), TP1: None}
    (exchange,) = [e for e in group.net.exchanges if e.api is OffsetFetchRequest]
    assert exchange.version == MAX_OFFSET_FETCH_VERSION
    assert exchange.request.require_stable is True


def test_identical_offset_fetches_share_one_request(fake: FakeCluster) -> None:
    fake.commit("g", TP, 11)
    group = Group(fake)
    now = group.ready()
    first = group.committed(frozenset({TP}))
    second = group.committed(frozenset({TP}))
    other = group.committed(frozenset({TP, TP1}))
    group.run(now)
    assert first.result(0) == second.result(0) == {TP: OffsetAndMetadata(11)}
    assert other.result(0) == {TP: OffsetAndMetadata(11), TP1: None}
    assert len(group.net.sent(OffsetFetchRequest)) == 2


def test_offset_fetch_retries_unstable_offsets(fake: FakeCluster) -> None:
    fake.commit("g", TP, 11)
    group = Group(fake)
    now = group.ready()
    fake.inject(OffsetFetchRequest, UNSTABLE_OFFSET_COMMIT, tp=TP)
    future = group.committed(frozenset({TP}))
    group.run(now)
    assert not future.done()
    group.run(now + BACKOFF_MS)
    assert future.result(0) == {TP: OffsetAndMetadata(11)}


def test_offset_fetch_retries_until_its_deadline(fake: FakeCluster) -> None:
    group = Group(fake)
    now = group.ready()
    fake.inject(OffsetFetchRequest, COORDINATOR_LOAD_IN_PROGRESS, count=-1)
    future = group.committed(frozenset({TP}), deadline_ms=now + 300)
    while not future.done() and now < 5_000:
        group.run(now)
        now += 10
    with pytest.raises(KafkaTimeoutError):
        future.result(0)
    assert now <= 400
    assert len(group.net.sent(OffsetFetchRequest)) >= 2


def test_offset_fetch_not_coordinator_finds_the_coordinator_again(fake: FakeCluster) -> None:
    fake.commit("g", TP, 11)
    group = Group(fake)
    now = group.ready()
    fake.inject(OffsetFetchRequest, NOT_COORDINATOR)
    future = group.committed(frozenset({TP}))
    group.run(now)
    assert group.coordinator.coordinator is None
    for step in range(1, 4):
        group.run(now + step * BACKOFF_MS)
    assert future.result(0) == {TP: OffsetAndMetadata(11)}
