"""``poll_arrow()`` against ``poll()`` on real brokers: the same records, positions and
transaction handling (confluent-kafka writes the data: keys, null keys, headers, every codec,
committed and aborted transactions). On noida-db, which sends aborted-transaction lists, also
under read_committed; Tansu does not filter aborted records for any client, so there both
isolation levels only have to agree with each other."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kaflux import AdminClient, Consumer, NewTopic, TopicPartition
from kaflux.devbrokers.brokers import Broker, NoidaBroker

ck = pytest.importorskip("confluent_kafka")
pa = pytest.importorskip("pyarrow")

pytestmark = pytest.mark.integration

WAIT_S = 15.0
Row = tuple[int, int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]


def create_topic(broker: Broker, topic: str, partitions: int) -> None:
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(topic, partitions)], timeout=WAIT_S)


@contextlib.contextmanager
def transactional_producer(broker: Broker) -> Iterator[Any]:
    producer = ck.Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "transactional.id": f"kx-arrow-{uuid.uuid4().hex}"}
    )
    try:
        producer.init_transactions(WAIT_S)
        yield producer
    finally:
        producer.close()


def write_mixed_data(broker: Broker, topic: str) -> None:
    """Per codec a few records (null keys, headers) on both partitions, then a committed, an
    aborted and another committed transaction on partition 0."""
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        producer = ck.Producer(
            {"bootstrap.servers": broker.bootstrap_servers, "compression.type": codec, "linger.ms": 5}
        )
        for i in range(12):
            producer.produce(
                topic,
                value=f"{codec}-{i}".encode() * (1 + i % 3),
                key=None if i % 4 == 0 else b"k%d" % i,
                partition=i % 2,
                headers=[("trace", b"t%d" % i), ("empty", None)] if i % 3 == 0 else None,
            )
        assert producer.flush(WAIT_S) == 0
    with transactional_producer(broker) as producer:
        for tag, commit in ((b"commit-a", True), (b"abort", False), (b"commit-b", True)):
            producer.begin_transaction()
            for i in range(4):
                producer.produce(topic, value=b"%s-%d" % (tag, i), key=b"tx", partition=0)
            producer.flush(WAIT_S)
            (producer.commit_transaction if commit else producer.abort_transaction)(WAIT_S)


def row_of(r: Any) -> Row:
    return (r.partition, r.offset, r.timestamp, r.key, r.value, list(r.headers))


def arrow_rows(batch: Any) -> list[Row]:
    return [
        (
            row["partition"],
            row["offset"],
            round(row["timestamp"].timestamp() * 1000),
            row["key"],
            row["value"],
            [(h["key"], h["value"]) for h in row["headers"]],
        )
        for row in batch.to_pylist()
    ]


def read_to_end(
    broker: Broker, topic: str, isolation: str, poll: Callable[[Consumer], list[Row]]
) -> list[Row]:
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": f"kx-arrow-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": isolation,
            "max.poll.records": 9,
        }
    )
    try:
        consumer.assign(tps)
        # what write_mixed_data wrote (Tansu's ListOffsets LATEST is not to be trusted): 30
        # records per partition, and on partition 0 three transactions of 4 records and a marker
        ends = {tps[0]: 45, tps[1]: 30}
        rows: list[Row] = []
        deadline = time.monotonic() + 30
        while any(consumer.position(tp, timeout=WAIT_S) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, f"positions did not reach {ends}"
            rows += poll(consumer)
        return sorted(rows)
    finally:
        consumer.close(timeout=10)


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_poll_arrow_reads_what_poll_reads(broker: Broker, topic_name: str, isolation: str) -> None:
    create_topic(broker, topic_name, 2)
    write_mixed_data(broker, topic_name)

    def by_poll(consumer: Consumer) -> list[Row]:
        return [row_of(r) for r in consumer.poll(0.5)]

    def by_arrow(consumer: Consumer) -> list[Row]:
        batch = consumer.poll_arrow(0.5)
        assert batch.num_rows <= 9
        return arrow_rows(batch)

    expected = read_to_end(broker, topic_name, isolation, by_poll)
    assert read_to_end(broker, topic_name, isolation, by_arrow) == expected
    values = [r[4] for r in expected]
    assert len([v for v in values if not v.startswith((b"commit", b"abort"))]) == 60  # type: ignore[union-attr]
    assert len([v for v in values if v.startswith(b"commit")]) == 8  # type: ignore[union-attr]
    assert any(r[3] is None for r in expected) and any(r[5] for r in expected)
    if isolation == "read_committed" and isinstance(broker, NoidaBroker):
        assert not any(v.startswith(b"abort") for v in values)  # type: ignore[union-attr]
