"""The executor side of the source, without Spark: reading one offset range with a kaflux consumer.

A range ``[start, end)`` yields exactly its records and stops when the consumer's position reaches
``end``, also when the last offsets are transaction markers or aborted records (gaps); an end the
partition no longer reaches is data loss.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pytest

from kaflux import Consumer, TopicPartition
from kaflux.devbrokers.brokers import Broker
from kaflux.records import BatchBuilder, ColumnBuilder, iter_batches, to_arrow
from pyspark_kaflux import client_cache
from pyspark_kaflux.offsets import DataLossError, OffsetRange
from pyspark_kaflux.options import executor_consumer_config, parse_source_options
from pyspark_kaflux.range_reader import Carry, read_partition, read_range, to_source_schema
from pyspark_kaflux.schema import arrow_schema

from support.spark_helpers import WAIT_S, create_topic, produce

pytestmark = pytest.mark.integration
ck = pytest.importorskip("confluent_kafka")


def offsets_of(batches: Iterator[pa.RecordBatch]) -> list[int]:
    out: list[int] = []
    for batch in batches:
        assert batch.schema.equals(arrow_schema(False))
        out.extend(batch.column("offset").to_pylist())
    return out


@pytest.fixture
def consumer_for(broker_config: dict[str, str]) -> Iterator[Any]:
    consumers: list[Consumer] = []

    def make(**extra: str) -> Consumer:
        consumer = Consumer(executor_consumer_config({**broker_config, **extra}))
        consumers.append(consumer)
        return consumer

    yield make
    for consumer in consumers:
        consumer.close()


@pytest.fixture
def broker_config(broker: Broker) -> dict[str, str]:
    return {"bootstrap.servers": broker.bootstrap_servers}


def test_consecutive_ranges_yield_exactly_their_records(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 1)
    produce(broker.bootstrap_servers, topic_name, 50, partitions=1)
    options = parse_source_options(
        {"kafka.bootstrap.servers": broker.bootstrap_servers, "subscribe": topic_name}, streaming=False
    )
    try:
        # The second range continues where the first stopped: the cached consumer is reused.
        assert offsets_of(read_partition(options, OffsetRange(topic_name, 0, 0, 20))) == list(range(20))
        assert offsets_of(read_partition(options, OffsetRange(topic_name, 0, 20, 33))) == list(range(20, 33))
        assert offsets_of(read_partition(options, OffsetRange(topic_name, 0, 5, 7))) == [5, 6]
        assert offsets_of(read_partition(options, OffsetRange(topic_name, 0, 9, 9))) == []
    finally:
        client_cache.close_all()


class CountingPolls:
    """A consumer that counts its ``poll_arrow()`` calls (everything else goes to the real one)."""

    def __init__(self, consumer: Consumer) -> None:
        self._consumer = consumer
        self.polls = 0

    def poll_arrow(self, timeout: float = 0.0) -> pa.RecordBatch:
        self.polls += 1
        return self._consumer.poll_arrow(timeout)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._consumer, name)


def read_with(consumer: Any, topic: str, start: int, end: int, carry: Carry) -> list[int]:
    return offsets_of(
        read_range(
            consumer,
            OffsetRange(topic, 0, start, end),
            include_headers=False,
            fail_on_data_loss=True,
            poll_timeout_ms=20_000,
            carry=carry,
        )
    )


@pytest.mark.parametrize("broker", ["kafka", "noida"], indirect=True)
def test_the_next_range_starts_with_the_records_the_last_one_polled_past_its_end(
    consumer_for: Any, broker: Broker, topic_name: str
) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 1)
    produce(broker.bootstrap_servers, topic_name, 50, partitions=1)
    consumer, carry = CountingPolls(consumer_for()), Carry()
    assert read_with(consumer, topic_name, 0, 20, carry) == list(range(20))
    # one poll returned the 50 records: the 30 past the range's end are kept, not dropped
    assert carry.start == 20 and carry.batch is not None
    assert carry.batch.column(4).to_pylist() == list(range(20, 50))
    polls = consumer.polls
    # the next two ranges are read from them, without polling (no seek, no refetch)
    assert read_with(consumer, topic_name, 20, 33, carry) == list(range(20, 33))
    assert read_with(consumer, topic_name, 33, 50, carry) == list(range(33, 50))
    assert consumer.polls == polls
    assert carry.start == 50 and carry.batch is None
    # a range elsewhere repositions the consumer and reads its records afresh
    assert read_with(consumer, topic_name, 5, 7, carry) == [5, 6]
    assert consumer.polls > polls
    assert carry.start == 7 and carry.batch is not None and carry.batch.column(4)[0].as_py() == 7
    # carried records do not serve a range that does not continue them
    assert read_with(consumer, topic_name, 8, 10, carry) == [8, 9]


@pytest.mark.parametrize("broker", ["kafka", "noida"], indirect=True)
def test_read_partition_keeps_a_consumer_per_partition_and_its_carried_records(
    broker: Broker, topic_name: str
) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 2)
    produce(broker.bootstrap_servers, topic_name, 60, partitions=2)
    options = parse_source_options(
        {"kafka.bootstrap.servers": broker.bootstrap_servers, "subscribe": topic_name}, streaming=True
    )
    config = executor_consumer_config(options.kafka_config)
    try:
        # micro-batches alternating between the two partitions, as one Python worker sees them
        got: dict[int, list[int]] = {0: [], 1: []}
        for start, end in ((0, 10), (10, 20), (20, 30)):
            for partition in (0, 1):
                got[partition] += offsets_of(
                    read_partition(options, OffsetRange(topic_name, partition, start, end))
                )
        assert got == {0: list(range(30)), 1: list(range(30))}
        # one consumer per partition, each holding what it polled past its last range
        for partition in (0, 1):
            tp = TopicPartition(topic_name, partition)
            with client_cache.borrowed(config, prefer=tp) as pooled:
                assert pooled.consumer.assignment() == {tp}
                assert isinstance(pooled.carried, Carry) and pooled.carried.start == 30
    finally:
        client_cache.close_all()


@contextlib.contextmanager
def transactional_producer(broker: Broker) -> Iterator[Any]:
    producer = ck.Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "transactional.id": f"kx-{uuid.uuid4().hex}"}
    )
    try:
        producer.init_transactions(WAIT_S)
        yield producer
    finally:
        producer.close()


@pytest.mark.parametrize("broker", ["kafka", "noida"], indirect=True)
def test_transaction_markers_and_aborted_records_are_skipped_gaps(
    consumer_for: Any, topic_name: str, broker: Broker
) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 1)
    # offsets 0-4 committed, 5 marker, 6-8 aborted, 9 marker, 10-11 committed, 12 marker; end 13
    with transactional_producer(broker) as producer:
        for count, commit in ((5, True), (3, False), (2, True)):
            producer.begin_transaction()
            for i in range(count):
                producer.produce(topic_name, value=b"x%d" % i, partition=0)
            producer.flush(WAIT_S)
            (producer.commit_transaction if commit else producer.abort_transaction)(WAIT_S)
    committed = consumer_for(**{"isolation.level": "read_committed"})

    def read(consumer: Consumer, start: int, end: int) -> list[int]:
        began = time.monotonic()
        got = offsets_of(
            read_range(
                consumer,
                OffsetRange(topic_name, 0, start, end),
                include_headers=False,
                fail_on_data_loss=True,
                poll_timeout_ms=20_000,
            )
        )
        assert time.monotonic() - began < 2.5, "the range must end on the position, without a stall"
        return got

    assert read(committed, 0, 13) == [0, 1, 2, 3, 4, 10, 11]
    carry = Carry()  # consecutive ranges ending on gaps, the later ones starting with carried records
    assert [read_with(committed, topic_name, s, e, carry) for s, e in ((0, 6), (6, 10), (10, 13))] == [
        [0, 1, 2, 3, 4],
        [],
        [10, 11],
    ]
    assert read(committed, 3, 10) == [3, 4]  # ends on a marker after aborted records
    assert read(committed, 0, 6) == [0, 1, 2, 3, 4]  # ends right after a marker
    uncommitted = consumer_for()
    assert read(uncommitted, 0, 13) == [0, 1, 2, 3, 4, 6, 7, 8, 10, 11]


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_a_range_past_the_end_of_the_log_is_data_loss(
    consumer_for: Any, broker: Broker, topic_name: str, fail_on_data_loss: bool
) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 1)
    produce(broker.bootstrap_servers, topic_name, 5, partitions=1)
    batches = read_range(
        consumer_for(),
        OffsetRange(topic_name, 0, 2, 10),
        include_headers=False,
        fail_on_data_loss=fail_on_data_loss,
        poll_timeout_ms=20_000,
        stall_check_s=0.3,
    )
    if fail_on_data_loss:
        with pytest.raises(DataLossError, match=r"Cannot fetch records in \[5, 10\).*now ends at 5"):
            offsets_of(batches)
    else:
        assert offsets_of(batches) == [2, 3, 4]


def test_poll_arrow_batches_become_the_source_schema_column_by_column() -> None:
    """Headers become null for records without any (as in Spark's Kafka source), timestamps
    microseconds; slices (the range trimming) convert like the whole batch."""
    builder = BatchBuilder(base_offset=100)
    for i in range(7):
        headers = [(f"h{i}", b"x"), ("n", None)] if i % 3 == 1 else []
        builder.append(1_700_000_000_000 + i, None if i % 2 else b"k%d" % i, b"v%d" % i, headers)
    columns = ColumnBuilder()
    (batch,) = iter_batches(memoryview(builder.build()))
    columns.append_batch(batch, "t", 4)
    polled = to_arrow(columns.finish())
    expected = [
        {
            "key": None if i % 2 else b"k%d" % i,
            "value": b"v%d" % i,
            "topic": "t",
            "partition": 4,
            "offset": 100 + i,
            "timestamp": datetime.fromtimestamp(1_700_000_000 + i / 1000, tz=UTC),
            "timestampType": 0,
            "headers": [{"key": f"h{i}", "value": b"x"}, {"key": "n", "value": None}] if i % 3 == 1 else None,
        }
        for i in range(7)
    ]
    for start in range(7):
        for length in range(7 - start):
            converted = to_source_schema(polled.slice(start, length), include_headers=True)
            converted.validate(full=True)
            assert converted.schema.equals(arrow_schema(True))
            rows = converted.to_pylist()
            assert [{**r, "timestamp": r["timestamp"].astimezone(UTC)} for r in rows] == expected[
                start : start + length
            ]
    without = to_source_schema(polled, include_headers=False)
    assert without.schema.equals(arrow_schema(False))


@pytest.mark.parametrize("broker", ["kafka", "noida"], indirect=True)
def test_a_partition_without_a_consumer_gets_a_new_one_until_the_pool_is_full(
    broker: Broker, topic_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 3)
    config = executor_consumer_config({"bootstrap.servers": broker.bootstrap_servers})
    tps = [TopicPartition(topic_name, p) for p in range(3)]
    monkeypatch.setattr(client_cache, "MAX_IDLE_CONSUMERS", 2)
    try:
        made = []
        for tp in tps[:2]:
            with client_cache.borrowed(config, prefer=tp) as pooled:
                pooled.consumer.assign([tp])
                made.append(pooled.consumer)
        assert made[0] is not made[1]  # partition 1 did not take partition 0's consumer over
        with client_cache.borrowed(config, prefer=tps[0]) as pooled:
            assert pooled.consumer is made[0]
        # the pool is full: partition 2 takes over the least recently returned (partition 1's)
        with client_cache.borrowed(config, prefer=tps[2]) as pooled:
            assert pooled.consumer is made[1]
    finally:
        client_cache.close_all()
