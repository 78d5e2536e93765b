"""Position validation after a leader change (KIP-320) and leaders taken from Fetch responses
(KIP-951): the offsets request manager, the fetcher and the collector against the fake cluster,
time injected; and one real Consumer over loopback, where poll() raises LogTruncationError.

The story of most tests: a consumer read six records written in leader epoch 0 (two batches,
offsets 0-5), so its position is offset 6, offset epoch 0. Then the partition's leader moves,
cleanly (the log is kept) or uncleanly (the new leader's log ends at 3, and it writes "x" and
"y" at offsets 3 and 4 in its own epoch).
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kaflux import Consumer
from kaflux.consumer.fetch_buffer import FetchBuffer
from kaflux.consumer.fetch_collector import FetchCollector
from kaflux.consumer.positions import ValidationOutcome, validate_position
from kaflux.consumer.subscription_state import FetchPosition, FetchState, ResetStrategy, SubscriptionState
from kaflux.errors import (
    InvalidOffsetError,
    KafkaError,
    LogTruncationError,
    TopicAuthorizationFailedError,
    UnsupportedVersionError,
)
from kaflux.protocol.api import CLIENT_VERSIONS, ApiKey
from kaflux.protocol.messages.fetch import FetchRequest
from kaflux.protocol.messages.list_offsets import ListOffsetsRequest
from kaflux.protocol.messages.metadata import MetadataRequest
from kaflux.protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest
from kaflux.structs import OffsetAndMetadata, TopicPartition

from support.fakes import (
    BACKOFF_MS,
    FENCED_LEADER_EPOCH,
    NOT_LEADER_OR_FOLLOWER,
    UNKNOWN_LEADER_EPOCH,
    UNKNOWN_TOPIC_OR_PARTITION,
    ClientSide,
    Exchange,
    FakeCluster,
    connect,
    fetch_partitions,
)
from support.socket_fake_broker import SocketFakeBroker

T0 = TopicPartition("t", 0)
TOPIC_AUTHORIZATION_FAILED = 29
CLUSTER_AUTHORIZATION_FAILED = 31


class Rig:
    """Metadata, offsets and fetch managers, buffer and collector over a fake cluster."""

    def __init__(self, fake: FakeCluster, *, reset: ResetStrategy = ResetStrategy.EARLIEST) -> None:
        self.fake = fake
        self.side: ClientSide = connect(fake, {"t"})
        self.net = self.side.net
        self.subscription = SubscriptionState(reset)
        self.subscription.assign_from_user([T0])
        self.buffer = FetchBuffer()
        self.errors: list[KafkaError] = []
        self.offsets = self.side.offsets(self.subscription, None, self.errors.append)
        self.fetcher = self.side.fetcher(self.subscription, self.buffer, use_sessions=False)
        self.collector = FetchCollector(self.subscription, self.buffer, max_poll_records=500)

    def run(self, now_ms: int, *, metadata: bool = True) -> list[Exchange]:
        """One network-thread pass with instant answers (without the metadata manager: no
        metadata request goes out, whatever is asked for)."""
        managers: list[Any] = [self.offsets, self.fetcher]
        return self.net.run([self.side.metadata, *managers] if metadata else managers, now_ms)

    def consume(self) -> list[bytes | None]:
        return [r.value for r in self.collector.collect().get(T0, [])]

    def drive(
        self, until: Callable[[], bool], *, start_ms: int, metadata: bool = True
    ) -> tuple[int, list[bytes | None]]:
        """Run passes (1 ms apart) and consume until ``until()``; returns the time and what was read."""
        got: list[bytes | None] = []
        for now in range(start_ms, start_ms + 50):
            if until():
                return now, got
            self.run(now, metadata=metadata)
            got += self.consume()
        raise AssertionError("condition not reached")

    def state(self) -> FetchState:
        (state,) = [
            fs for fs in FetchState if any(tp == T0 for tp, _ in self.subscription.partitions_in_state(fs))
        ]
        return state

    def sent(self, api: type[Any]) -> list[Exchange]:
        return [e for e in self.net.exchanges if e.api is api]


def six_records_read(fake: FakeCluster, *, reset: ResetStrategy = ResetStrategy.EARLIEST) -> Rig:
    """A consumer positioned at offset 6, offset epoch 0, validated against broker 0 epoch 0."""
    fake.create_topic("t", 1, leaders=[0])
    fake.produce(T0, [b"a", b"b", b"c"])
    fake.produce(T0, [b"d", b"e", b"f"])
    rig = Rig(fake, reset=reset)
    rig.subscription.seek(T0, FetchPosition(0))
    _, got = rig.drive(lambda: rig.subscription.position(T0) == FetchPosition(6, 0, 0, 0), start_ms=0)
    assert got == [b"a", b"b", b"c", b"d", b"e", b"f"]
    return rig


def elect_uncleanly(fake: FakeCluster, leader: int = 1) -> None:
    """The new leader's log ends at offset 3; it writes x and y there in its own epoch."""
    fake.truncate(T0, 3)
    fake.move_leader(T0, leader)
    fake.produce(T0, [b"x", b"y"])


# -- a leader change validates the position ------------------------------------------------------


def test_after_a_leader_change_the_position_is_validated_then_fetching_resumes_at_the_same_offset() -> None:
    fake = FakeCluster(2, report_current_leader=False)
    rig = six_records_read(fake)
    fake.move_leader(T0, 1)
    fake.produce(T0, [b"g"])
    rig.side.metadata.request_update()
    now, got = rig.drive(lambda: rig.sent(OffsetForLeaderEpochRequest) != [], start_ms=100)
    (validation,) = rig.sent(OffsetForLeaderEpochRequest)
    assert validation.broker_id == 1
    ((topic,),) = [validation.request.topics]
    (asked,) = topic.partitions
    assert (topic.topic, asked.partition, asked.current_leader_epoch, asked.leader_epoch) == ("t", 0, 1, 0)
    assert validation.response.topics[0].partitions[0].end_offset == 6  # epoch 0 ends where 1 began
    # nothing of t-0 was fetched from the new leader before its answer
    first_to_new_leader = [e for e in rig.sent(FetchRequest) if e.broker_id == 1]
    assert all(rig.net.exchanges.index(e) > rig.net.exchanges.index(validation) for e in first_to_new_leader)
    assert rig.subscription.position(T0) == FetchPosition(6, 0, 1, 1)
    assert rig.state() is FetchState.FETCHING
    _, more = rig.drive(lambda: rig.subscription.position(T0) == FetchPosition(7, 1, 1, 1), start_ms=now)
    assert got + more == [b"g"]
    assert rig.errors == []


def test_data_buffered_from_the_old_leader_is_dropped_while_the_position_awaits_validation() -> None:
    fake = FakeCluster(2, report_current_leader=False)
    rig = six_records_read(fake)
    fake.produce(T0, [b"g"])
    rig.net.add_all(rig.fetcher.poll(100), 100)
    rig.net.deliver_all(received_ms=100)  # g is buffered
    fake.move_leader(T0, 1)
    rig.side.metadata.request_update()
    rig.net.add_all(rig.side.metadata.poll(100), 100)
    rig.net.deliver_all(received_ms=100)
    (validation,) = rig.net.add_all(rig.offsets.poll(101), 101)  # t-0 awaits validation
    assert validation.api is OffsetForLeaderEpochRequest
    assert rig.state() is FetchState.AWAIT_VALIDATION
    assert rig.consume() == []
    assert rig.buffer.size_bytes() == 0
    _, got = rig.drive(lambda: rig.subscription.position(T0) == FetchPosition(7, 0, 1, 1), start_ms=102)
    assert got == [b"g"]  # read again, from the new leader, once validated


# -- truncation ----------------------------------------------------------------------------------


@pytest.mark.parametrize("reset", [ResetStrategy.EARLIEST, ResetStrategy.LATEST])
def test_truncation_with_a_reset_policy_moves_the_position_to_where_the_log_diverges(
    reset: ResetStrategy,
) -> None:
    fake = FakeCluster(2)
    rig = six_records_read(fake, reset=reset)
    elect_uncleanly(fake)
    now, got = rig.drive(lambda: rig.subscription.position(T0) == FetchPosition(3, 0, 1, 1), start_ms=100)
    _, more = rig.drive(lambda: rig.subscription.position(T0) == FetchPosition(5, 1, 1, 1), start_ms=now)
    assert got + more == [b"x", b"y"]  # neither a re-read from the start nor a jump to the end
    assert rig.sent(ListOffsetsRequest) == []
    assert rig.errors == []


def test_truncation_without_a_reset_policy_raises_log_truncation_error_and_stops_the_partition() -> None:
    fake = FakeCluster(2)
    rig = six_records_read(fake, reset=ResetStrategy.NONE)
    elect_uncleanly(fake)
    now, got = rig.drive(lambda: rig.errors != [], start_ms=100)
    (error,) = rig.errors
    assert isinstance(error, LogTruncationError) and isinstance(error, InvalidOffsetError)
    assert error.offset_out_of_range_partitions == error.offsets == {T0: 6}
    assert error.partitions == frozenset({T0})
    assert error.divergent_offsets == {T0: OffsetAndMetadata(3, "", 0)}
    assert "t-0 at offset 6" in str(error) and "offset 3" in str(error) and "seek" in str(error)
    assert got == []
    # reported once; the partition waits for the application, unfetched
    for later in range(now, now + 20 * BACKOFF_MS, BACKOFF_MS):
        rig.run(later)
        assert rig.consume() == []
    assert len(rig.errors) == 1
    assert rig.state() is FetchState.AWAIT_VALIDATION
    assert [e for e in rig.sent(FetchRequest) if e.broker_id == 1 and T0 in fetch_partitions(e.request)] == []
    rig.subscription.seek(T0, FetchPosition(3))  # the application seeks to the divergent offset
    _, more = rig.drive(
        lambda: rig.subscription.position(T0) == FetchPosition(5, 1, 1, 1), start_ms=now + 5000
    )
    assert more == [b"x", b"y"]


def test_an_epoch_the_leader_cannot_place_resets_by_the_policy() -> None:
    """A seek with a leader epoch the leader never had (here: newer than its own): the leader
    answers an undefined end offset, which Java reads as a truncation at an unknown point."""
    fake = FakeCluster(2)
    rig = six_records_read(fake)
    rig.subscription.seek(T0, FetchPosition(4, 7))
    now, got = rig.drive(lambda: rig.sent(ListOffsetsRequest) != [], start_ms=100)
    (validation,) = rig.sent(OffsetForLeaderEpochRequest)
    assert validation.request.topics[0].partitions[0].leader_epoch == 7
    assert validation.response.topics[0].partitions[0].end_offset == -1
    assert rig.sent(ListOffsetsRequest)[0].request.topics[0].partitions[0].timestamp == -2  # earliest
    _, more = rig.drive(lambda: rig.subscription.position(T0) == FetchPosition(6, 0, 0, 0), start_ms=now)
    assert got + more == [b"a", b"b", b"c", b"d", b"e", b"f"]


def test_an_epoch_the_leader_cannot_place_without_a_reset_policy_raises_without_a_divergent_offset() -> None:
    fake = FakeCluster(2)
    rig = six_records_read(fake, reset=ResetStrategy.NONE)
    rig.subscription.seek(T0, FetchPosition(4, 7))
    rig.drive(lambda: rig.errors != [], start_ms=100)
    (error,) = rig.errors
    assert isinstance(error, LogTruncationError)
    assert (error.offsets, error.divergent_offsets) == ({T0: 4}, {})
    assert "unknown" in str(error)


def test_a_returned_epoch_older_than_the_position_s_means_its_records_are_gone() -> None:
    position = FetchPosition(6, 2, 3, 1)
    assert validate_position(position, 8, 1, has_reset_policy=True).outcome is ValidationOutcome.RESET
    assert validate_position(position, 8, 1, has_reset_policy=False).outcome is ValidationOutcome.TRUNCATED
    assert validate_position(position, 8, 2, has_reset_policy=False).outcome is ValidationOutcome.VALID
    assert validate_position(position, 6, 2, has_reset_policy=False).outcome is ValidationOutcome.VALID
    moved = validate_position(position, 4, 1, has_reset_policy=True)
    assert (moved.outcome, moved.position) == (ValidationOutcome.SEEK, FetchPosition(4, 1, 3, 1))


def test_log_truncation_error_pickles() -> None:
    error = LogTruncationError(offsets={T0: 6}, divergent_offsets={T0: OffsetAndMetadata(3, "", 0)})
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is LogTruncationError
    assert (str(copy), copy.offsets, copy.divergent_offsets) == (str(error), {T0: 6}, error.divergent_offsets)


# -- brokers that cannot validate ------------------------------------------------------------------


@pytest.mark.parametrize("versions", [None, (0, 1)], ids=["no-api", "up-to-v1"])
def test_a_leader_without_offset_for_leader_epoch_v2_cannot_validate_so_fetching_goes_on_unvalidated(
    versions: tuple[int, int] | None,
) -> None:
    api: dict[ApiKey, tuple[int, int]] = {
        k: v for k, v in CLIENT_VERSIONS.items() if k is not ApiKey.OFFSET_FOR_LEADER_EPOCH
    }
    if versions is not None:
        api[ApiKey.OFFSET_FOR_LEADER_EPOCH] = versions
    fake = FakeCluster(2, api_versions=api)
    rig = six_records_read(fake)
    elect_uncleanly(fake)  # a validation would find this; a broker without the API cannot tell
    fake.produce(T0, [b"z"])  # offset 5: the position (6) is the log end again
    now, got = rig.drive(
        lambda: rig.sent(OffsetForLeaderEpochRequest) != [] and rig.state() is FetchState.FETCHING,
        start_ms=100,
    )
    (attempt,) = rig.sent(OffsetForLeaderEpochRequest)
    if versions is None:
        assert isinstance(attempt.error, UnsupportedVersionError)
    else:
        assert attempt.version == 1  # answered, but a v1 answer cannot validate
    assert rig.subscription.position(T0) == FetchPosition(6, 0, 1, 1)  # unvalidated, on the new leader
    fake.produce(T0, [b"after"])
    _, more = rig.drive(lambda: rig.subscription.position(T0).offset == 7, start_ms=now + 10)  # type: ignore[union-attr]
    assert got + more == [b"after"]
    assert rig.errors == [] and rig.sent(ListOffsetsRequest) == []


def test_a_v2_broker_that_wants_cluster_permission_leaves_the_position_unvalidated() -> None:
    api = dict(CLIENT_VERSIONS)
    api[ApiKey.OFFSET_FOR_LEADER_EPOCH] = (0, 2)
    fake = FakeCluster(2, api_versions=api)
    rig = six_records_read(fake)
    fake.move_leader(T0, 1)
    fake.inject(OffsetForLeaderEpochRequest, CLUSTER_AUTHORIZATION_FAILED, tp=T0)
    rig.drive(lambda: rig.sent(OffsetForLeaderEpochRequest) != [], start_ms=100)
    assert rig.sent(OffsetForLeaderEpochRequest)[0].version == 2
    assert rig.state() is FetchState.FETCHING
    assert rig.subscription.position(T0) == FetchPosition(6, 0, 1, 1)
    assert rig.errors == []


# -- errors answering OffsetForLeaderEpoch ---------------------------------------------------------


@pytest.mark.parametrize(
    "code", [NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH, FENCED_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION]
)
def test_retriable_validation_errors_refresh_metadata_and_retry_after_the_backoff(code: int) -> None:
    fake = FakeCluster(2)
    rig = six_records_read(fake)
    fake.move_leader(T0, 1)
    fake.inject(OffsetForLeaderEpochRequest, code, tp=T0)
    now, _ = rig.drive(lambda: rig.sent(OffsetForLeaderEpochRequest) != [], start_ms=100)
    assert rig.side.metadata.poll(now).unsent, "a metadata refresh is due"
    assert rig.state() is FetchState.AWAIT_VALIDATION
    failed_at = rig.sent(OffsetForLeaderEpochRequest)[0].sent_ms
    rig.run(failed_at + BACKOFF_MS - 1, metadata=False)
    assert len(rig.sent(OffsetForLeaderEpochRequest)) == 1
    rig.run(failed_at + BACKOFF_MS, metadata=False)
    assert len(rig.sent(OffsetForLeaderEpochRequest)) == 2
    assert rig.state() is FetchState.FETCHING
    assert rig.errors == []


def test_an_unauthorized_topic_reaches_the_application_and_validation_is_retried() -> None:
    fake = FakeCluster(2)
    rig = six_records_read(fake)
    fake.move_leader(T0, 1)
    fake.inject(OffsetForLeaderEpochRequest, TOPIC_AUTHORIZATION_FAILED, tp=T0)
    now, _ = rig.drive(lambda: rig.errors != [], start_ms=100)
    (error,) = rig.errors
    assert isinstance(error, TopicAuthorizationFailedError) and "t" in str(error)
    assert rig.state() is FetchState.AWAIT_VALIDATION
    rig.drive(lambda: rig.state() is FetchState.FETCHING, start_ms=now + BACKOFF_MS)


# -- FENCED_LEADER_EPOCH and KIP-951 in Fetch responses -------------------------------------------


def test_fenced_leader_epoch_on_fetch_refreshes_metadata_then_the_position_is_validated() -> None:
    fake = FakeCluster(2, report_current_leader=False)
    rig = six_records_read(fake)
    fake.move_leader(T0, 0)  # same broker, new epoch: the consumer's epoch 0 is fenced
    fake.produce(T0, [b"g"])
    (fetch,) = rig.net.add_all(rig.fetcher.poll(100), 100)
    rig.net.deliver(fetch, received_ms=100)
    assert fetch.response.responses[0].partitions[0].error_code == FENCED_LEADER_EPOCH
    assert rig.side.cluster.leader_epoch(T0) == 0
    assert [e.api for e in rig.net.add_all(rig.side.metadata.poll(100), 100)] == [MetadataRequest]
    rig.net.deliver_all(received_ms=100)
    _, got = rig.drive(lambda: rig.subscription.position(T0) == FetchPosition(7, 1, 1, 0), start_ms=101)
    (validation,) = rig.sent(OffsetForLeaderEpochRequest)
    assert validation.request.topics[0].partitions[0].current_leader_epoch == 1
    assert got == [b"g"]


def test_the_current_leader_in_a_fetch_response_moves_the_next_fetch_without_a_metadata_response() -> None:
    fake = FakeCluster(2)
    rig = six_records_read(fake)
    metadata_before = len(rig.sent(MetadataRequest))
    fake.move_leader(T0, 1)
    fake.produce(T0, [b"g"])
    (fetch,) = rig.run(100, metadata=False)
    partition = fetch.response.responses[0].partitions[0]
    assert (fetch.broker_id, partition.error_code) == (0, NOT_LEADER_OR_FOLLOWER)
    assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (1, 1)
    assert (rig.side.cluster.leader_for(T0), rig.side.cluster.leader_epoch(T0)) == (1, 1)
    assert rig.state() is FetchState.AWAIT_VALIDATION
    _, got = rig.drive(
        lambda: rig.subscription.position(T0) == FetchPosition(7, 1, 1, 1), start_ms=101, metadata=False
    )
    assert got == [b"g"]
    assert [e.broker_id for e in rig.sent(OffsetForLeaderEpochRequest)] == [1]
    assert [e.broker_id for e in rig.sent(FetchRequest)][-1] == 1
    assert len(rig.sent(MetadataRequest)) == metadata_before  # no metadata round trip was needed
    assert rig.side.metadata.poll(200).unsent, "a metadata refresh is still asked for, as Java does"


def test_a_position_without_an_offset_epoch_follows_the_fetch_response_s_leader_at_once() -> None:
    fake = FakeCluster(2)
    fake.create_topic("t", 1, leaders=[0])
    fake.produce(T0, [b"a"])
    rig = Rig(fake)
    rig.subscription.seek(T0, FetchPosition(1))  # nothing consumed: no epoch to validate
    rig.run(0, metadata=False)
    fake.move_leader(T0, 1)
    fake.produce(T0, [b"b"])
    rig.run(1, metadata=False)  # broker 0: NOT_LEADER_OR_FOLLOWER, current leader 1
    assert rig.subscription.position(T0) == FetchPosition(1, None, 1, 1)
    (fetch,) = rig.run(2, metadata=False)
    assert fetch.broker_id == 1 and rig.consume() == [b"b"]
    assert rig.sent(OffsetForLeaderEpochRequest) == []


def test_a_leader_named_with_an_older_epoch_than_known_is_ignored() -> None:
    fake = FakeCluster(2)
    rig = six_records_read(fake)
    fake.move_leader(T0, 1)
    rig.side.metadata.request_update()
    rig.run(100)  # metadata: broker 1, epoch 1
    assert rig.side.cluster.update_partition_leadership({T0: (0, 0)}) == set()
    assert (rig.side.cluster.leader_for(T0), rig.side.cluster.leader_epoch(T0)) == (1, 1)


# -- positions from committed offsets and seeks ----------------------------------------------------


def test_a_seek_with_a_leader_epoch_is_validated_before_fetching() -> None:
    fake = FakeCluster(2)
    rig = six_records_read(fake)
    elect_uncleanly(fake, leader=0)
    rig.side.metadata.request_update()
    rig.run(100)
    rig.subscription.seek(T0, FetchPosition(5, 0))  # e.g. a committed offset read elsewhere
    _, got = rig.drive(lambda: rig.subscription.position(T0) == FetchPosition(5, 1, 1, 0), start_ms=101)
    (validation,) = rig.sent(OffsetForLeaderEpochRequest)
    assert validation.request.topics[0].partitions[0].leader_epoch == 0
    assert got == [b"x", b"y"]  # moved back to 3, where epoch 0 ends on the leader


# -- the real consumer -----------------------------------------------------------------------------


@pytest.fixture
def broker() -> Iterator[SocketFakeBroker]:
    cluster = FakeCluster(1)
    cluster.create_topic("t", 1)
    cluster.produce(T0, [b"a", b"b", b"c"])
    cluster.produce(T0, [b"d", b"e", b"f"])
    srv = SocketFakeBroker(cluster)
    yield srv
    srv.close()


def test_poll_raises_log_truncation_error_after_an_unclean_election(broker: SocketFakeBroker) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "auto.offset.reset": "none",
            "retry.backoff.ms": 10,
            "retry.backoff.max.ms": 50,
            "fetch.max.wait.ms": 50,
        }
    )
    try:
        consumer.assign([T0])
        consumer.seek(T0, 0)
        read: list[bytes | None] = []
        deadline = time.monotonic() + 10
        while len(read) < 6 and time.monotonic() < deadline:
            read += [r.value for r in consumer.poll(0.1)]
        assert read == [b"a", b"b", b"c", b"d", b"e", b"f"]
        with broker._lock:  # as the broker's own threads do
            broker.cluster.truncate(T0, 3)
            broker.cluster.move_leader(T0, 0)  # same broker, new epoch: an unclean election
            broker.cluster.produce(T0, [b"x", b"y"])
        with pytest.raises(LogTruncationError) as raised:
            while time.monotonic() < deadline:
                assert consumer.poll(0.1) == []
        assert raised.value.divergent_offsets == {T0: OffsetAndMetadata(3, "", 0)}
        assert raised.value.offsets == {T0: 6}
        consumer.seek(T0, 3)
        while len(read) < 8 and time.monotonic() < deadline:
            read += [r.value for r in consumer.poll(0.1)]
        assert read[6:] == [b"x", b"y"]
    finally:
        consumer.close(timeout=5)
