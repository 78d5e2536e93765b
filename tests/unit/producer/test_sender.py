"""ProduceRequestManager against the fake cluster: success, retries, failures, acks=0."""

from __future__ import annotations

from concurrent.futures import Future

import pytest

from kaflux.errors import (
    KafkaConnectionError,
    KafkaTimeoutError,
    NotLeaderOrFollowerError,
    RecordTooLargeError,
)
from kaflux.producer.accumulator import RecordAccumulator
from kaflux.producer.sender import ProduceRequestManager
from kaflux.protocol.messages.metadata import MetadataRequest
from kaflux.protocol.messages.produce import ProduceRequest
from kaflux.structs import Node, RecordMetadata, TopicPartition

from support.fakes import (
    BACKOFF_MS,
    NOT_LEADER_OR_FOLLOWER,
    ClientSide,
    FakeCluster,
    connect,
    exact_backoff,
)

TP = TopicPartition("t", 0)
MESSAGE_TOO_LARGE = 10
REQUEST_TIMED_OUT = 7


class Producer:
    """Accumulator + sender + metadata over a fake cluster, driven with explicit time."""

    def __init__(
        self,
        fake: FakeCluster,
        *,
        acks: int = -1,
        retries: int = 2**31 - 1,
        delivery_timeout_ms: int = 120_000,
        linger_ms: int = 0,
        topics: tuple[str, ...] = ("t",),
    ) -> None:
        self.side: ClientSide = connect(fake, topics)
        self.fake = fake
        self.net = self.side.net
        self.accumulator = RecordAccumulator(
            batch_size=16384,
            linger_ms=linger_ms,
            buffer_memory=1 << 20,
            compression=0,
            delivery_timeout_ms=delivery_timeout_ms,
        )
        self.sender = ProduceRequestManager(
            self.accumulator,
            self.side.cluster,
            self.side.metadata,
            acks=acks,
            request_timeout_ms=30_000,
            retries=retries,
            delivery_timeout_ms=delivery_timeout_ms,
            retry_backoff=exact_backoff(),
        )

    def send(self, value: bytes, tp: TopicPartition = TP, now_ms: int = 0) -> Future[RecordMetadata]:
        future, _, _ = self.accumulator.append(tp, 5_000, None, value, [], now_ms, 1e12, lambda: 0.0)
        return future

    def run(self, now_ms: int) -> int:
        """One pass of the network thread with instant answers; returns Produce requests sent."""
        sent = self.net.run([self.side.metadata, self.sender], now_ms)
        return sum(1 for e in sent if e.api is ProduceRequest)


@pytest.fixture
def fake() -> FakeCluster:
    fake = FakeCluster(brokers=2)
    fake.create_topic("t", 1, leaders=[0])
    fake.produce(TP, [b"old-0", b"old-1"])
    return fake


def test_success_resolves_futures_with_offsets_and_appends_to_the_log(fake: FakeCluster) -> None:
    producer = Producer(fake)
    futures = [producer.send(v) for v in (b"a", b"b", b"c")]
    assert producer.run(0) == 1
    assert [f.result(0) for f in futures] == [RecordMetadata("t", 0, offset, 5_000) for offset in (2, 3, 4)]
    assert [value for _, _, value in fake.records(TP)] == [b"old-0", b"old-1", b"a", b"b", b"c"]


def test_nothing_is_sent_before_linger_ms(fake: FakeCluster) -> None:
    producer = Producer(fake, linger_ms=5)
    future = producer.send(b"a", now_ms=100)
    assert producer.run(104) == 0
    assert producer.run(105) == 1
    assert future.result(0).offset == 2


def test_retriable_error_is_retried_after_the_backoff_then_succeeds(fake: FakeCluster) -> None:
    fake.inject(ProduceRequest, REQUEST_TIMED_OUT, tp=TP)
    producer = Producer(fake)
    future = producer.send(b"a")
    assert producer.run(0) == 1
    assert not future.done()
    assert producer.run(BACKOFF_MS - 1) == 0
    assert producer.run(BACKOFF_MS) == 1
    assert future.result(0).offset == 2
    assert [value for _, _, value in fake.records(TP)][2:] == [b"a"]


def test_not_leader_refreshes_metadata_and_the_retry_goes_to_the_new_leader(fake: FakeCluster) -> None:
    producer = Producer(fake)
    fake.move_leader(TP, 1)
    future = producer.send(b"a")
    producer.run(0)
    assert not future.done()
    producer.run(1)  # the loop comes round at once: the metadata refresh goes out
    assert producer.side.cluster.leader_for(TP) == 1
    producer.run(BACKOFF_MS)
    assert future.result(0).offset == 2
    (first, retry) = [e.broker_id for e in producer.net.exchanges if e.api is ProduceRequest]
    assert (first, retry) == (0, 1)
    assert len(producer.net.sent(MetadataRequest)) == 2


def test_non_retriable_error_fails_the_futures_with_the_broker_error_class(fake: FakeCluster) -> None:
    fake.inject(ProduceRequest, MESSAGE_TOO_LARGE, tp=TP)
    producer = Producer(fake)
    futures = [producer.send(b"a"), producer.send(b"b")]
    producer.run(0)
    for future in futures:
        with pytest.raises(RecordTooLargeError):
            future.result(0)
    assert producer.run(10_000) == 0
    assert not producer.accumulator.has_unsent()


def test_retries_setting_limits_the_attempts(fake: FakeCluster) -> None:
    fake.inject(ProduceRequest, NOT_LEADER_OR_FOLLOWER, tp=TP, count=-1)
    producer = Producer(fake, retries=1)
    future = producer.send(b"a")
    now = 0
    while not future.done() and now < 10_000:
        producer.run(now)
        now += BACKOFF_MS
    with pytest.raises(NotLeaderOrFollowerError):
        future.result(0)
    assert len(producer.net.sent(ProduceRequest)) == 2


def test_lost_connection_is_retried(fake: FakeCluster) -> None:
    producer = Producer(fake)
    fake.stop_broker(0)
    future = producer.send(b"a")
    producer.run(0)
    (failed,) = [e for e in producer.net.exchanges if e.api is ProduceRequest]
    assert isinstance(failed.error, KafkaConnectionError)
    fake.start_broker(0)
    producer.run(BACKOFF_MS)
    assert future.result(0).offset == 2


def test_acks_zero_resolves_without_waiting_for_an_answer(fake: FakeCluster) -> None:
    producer = Producer(fake, acks=0)
    future = producer.send(b"a")
    producer.run(0)
    (exchange,) = [e for e in producer.net.exchanges if e.api is ProduceRequest]
    assert exchange.unsent.expect_response is False
    assert exchange.request.acks == 0
    assert future.result(0) == RecordMetadata("t", 0, -1, 5_000)
    assert [value for _, _, value in fake.records(TP)][2:] == [b"a"]


def test_batch_without_a_leader_expires_after_delivery_timeout(fake: FakeCluster) -> None:
    producer = Producer(fake, delivery_timeout_ms=1_000, topics=())
    future = producer.send(b"a", tp=TopicPartition("missing", 0), now_ms=0)
    producer.run(0)
    producer.run(999)
    assert not future.done()
    producer.run(1_000)
    with pytest.raises(KafkaTimeoutError, match=r"delivery\.timeout\.ms=1000"):
        future.result(0)


def test_unknown_leader_asks_for_a_metadata_update(fake: FakeCluster) -> None:
    producer = Producer(fake, topics=())
    fake.create_topic("late", 1)
    producer.send(b"a", tp=TopicPartition("late", 0))
    result = producer.sender.poll(0)
    assert result.unsent == []
    assert result.time_until_next_poll_ms <= 50
    (metadata,) = producer.side.metadata.poll(0).unsent
    assert isinstance(metadata.request, MetadataRequest)
    assert [t.name for t in metadata.request.topics] == ["late"]  # type: ignore[union-attr]


def test_retriable_error_after_the_delivery_timeout_fails_with_a_timeout_naming_it(fake: FakeCluster) -> None:
    fake.inject(ProduceRequest, REQUEST_TIMED_OUT, tp=TP)
    producer = Producer(fake, delivery_timeout_ms=1_000)
    future = producer.send(b"a")
    producer.net.add_all(producer.sender.poll(0), 0)
    producer.net.deliver_all(received_ms=1_000)
    with pytest.raises(KafkaTimeoutError, match=r"delivery\.timeout\.ms=1000.*RequestTimedOutError"):
        future.result(0)
    assert len(producer.net.sent(ProduceRequest)) == 1


def test_non_retriable_error_after_the_delivery_timeout_keeps_its_class(fake: FakeCluster) -> None:
    fake.inject(ProduceRequest, MESSAGE_TOO_LARGE, tp=TP)
    producer = Producer(fake, delivery_timeout_ms=1_000)
    future = producer.send(b"a")
    producer.net.add_all(producer.sender.poll(0), 0)
    producer.net.deliver_all(received_ms=5_000)
    with pytest.raises(RecordTooLargeError):
        future.result(0)


def test_produce_request_may_not_outlive_the_delivery_timeout(fake: FakeCluster) -> None:
    producer = Producer(fake, delivery_timeout_ms=1_000, linger_ms=800)
    producer.send(b"a", now_ms=0)
    (unsent,) = producer.sender.poll(800).unsent
    assert unsent.timeout_ms == 200
    assert unsent.deadline_ms == 1_000


def test_produce_request_timeout_is_request_timeout_when_delivery_allows(fake: FakeCluster) -> None:
    producer = Producer(fake)
    producer.send(b"a")
    (unsent,) = producer.sender.poll(0).unsent
    assert unsent.timeout_ms == 30_000


def test_expired_records_are_not_counted_complete_before_their_futures_fail() -> None:
    accumulator = RecordAccumulator(
        batch_size=16384, linger_ms=10_000, buffer_memory=1 << 20, compression=0, delivery_timeout_ms=1_000
    )
    future, _, _ = accumulator.append(TP, 0, None, b"a", [], 0, 1e12, lambda: 0.0)
    assert len(accumulator.expire(1_000)) == 1
    assert not future.done()
    assert accumulator.await_all_complete(0.0, lambda: 1.0) is False


def test_the_current_leader_in_a_produce_response_moves_the_retry_at_once_without_metadata(
    fake: FakeCluster,
) -> None:
    """KIP-951: NOT_LEADER_OR_FOLLOWER names the new leader, here a broker the client has not
    heard of (its address comes in the response's node endpoints); the retry goes there at
    once, without a backoff and before any metadata response."""
    producer = Producer(fake)
    fake.brokers[2] = Node(2, "broker2.fake", 9094)
    fake.move_leader(TP, 2)
    future = producer.send(b"a")
    (first,) = producer.net.add_all(producer.sender.poll(0), 0)
    producer.net.deliver(first, received_ms=0)
    answer = first.response.responses[0].partition_responses[0]
    assert (first.broker_id, answer.error_code) == (0, NOT_LEADER_OR_FOLLOWER)
    assert (answer.current_leader.leader_id, answer.current_leader.leader_epoch) == (2, 1)
    assert producer.side.cluster.leader_for(TP) == 2
    assert producer.side.cluster.node(2) == Node(2, "broker2.fake", 9094)
    (retry,) = producer.net.add_all(producer.sender.poll(0), 0)  # same millisecond: no backoff
    producer.net.deliver(retry, received_ms=0)
    assert retry.broker_id == 2
    assert future.result(0).offset == 2
    assert len(producer.net.sent(MetadataRequest)) == 1  # connect's only
    assert producer.side.metadata.poll(1).unsent, "a metadata refresh is still asked for, as Java does"


class _Connections:
    """A fake of the network client's connection view (sender.LeaderConnections)."""

    def __init__(self) -> None:
        self.ready_nodes: set[int] = set()
        self.backing_off: set[int] = set()
        self.asked: list[int] = []

    def ready(self, node_id: int, now_ms: int) -> bool:
        self.asked.append(node_id)
        return node_id in self.ready_nodes

    def connection_failed_recently(self, node_id: int, now_ms: int) -> bool:
        return node_id in self.backing_off


def test_batches_wait_in_the_accumulator_while_their_leader_cannot_be_reached(fake: FakeCluster) -> None:
    """Found by the 3-node Apache Kafka fault tests: a batch drained for a dead leader sat in the
    unsent queue for request.timeout.ms, so the partition stalled until the dead broker came back
    even though the metadata already named a new leader. Before the fix the first run sent (that
    is, queued) a Produce request for the unreachable leader."""
    producer = Producer(fake)
    connections = _Connections()
    producer.sender = ProduceRequestManager(
        producer.accumulator,
        producer.side.cluster,
        producer.side.metadata,
        acks=-1,
        request_timeout_ms=30_000,
        retries=2**31 - 1,
        delivery_timeout_ms=120_000,
        retry_backoff=exact_backoff(),
        connections=connections,
    )
    connections.backing_off.add(0)  # the leader of TP is down
    future = producer.send(b"a")
    result = producer.sender.poll(0)
    assert result.unsent == [] and 0 in connections.asked  # asked (which starts a connection)
    assert result.time_until_next_poll_ms <= 50  # and looks again soon
    assert not future.done()
    connections.backing_off.clear()
    connections.ready_nodes.add(0)  # connected again (or a new leader that is reachable)
    assert producer.run(1) == 1
    assert future.result(0).offset == 2
