"""Helpers for the ``pyspark_kaflux`` tests: create and delete topics, produce records (remembering
where each landed) and read them back with a kaflux consumer."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kaflux import AdminClient, Consumer, ConsumerRecord, NewTopic, Producer, TopicPartition

WAIT_S = 30.0


@dataclass(frozen=True)
class Produced:
    """A record as produced, with where it landed."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple[tuple[str, bytes | None], ...] = ()

    @property
    def spark_timestamp(self) -> datetime:
        """The timestamp as Spark returns it in a UTC session: a naive UTC datetime."""
        return datetime.fromtimestamp(self.timestamp / 1000, UTC).replace(tzinfo=None)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions)], timeout=WAIT_S)


def delete_topic(bootstrap: str, topic: str) -> None:
    """Delete ``topic`` and wait until metadata no longer lists it.

    This uses confluent-kafka's admin client: kaflux's ``AdminClient.delete_topics`` sends
    DeleteTopics v6 with only the v0-5 ``topic_names`` field filled, so brokers delete nothing
    (and it reports success on the empty answer). Switch back once that is fixed.
    """
    from confluent_kafka.admin import AdminClient as CkAdminClient

    admin = CkAdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics([topic], operation_timeout=WAIT_S).values():
        future.result(timeout=WAIT_S)
    with AdminClient({"bootstrap.servers": bootstrap}) as kx_admin:
        assert wait_until(lambda: topic not in kx_admin.list_topics(timeout=WAIT_S)), f"{topic} still listed"


def produce(
    bootstrap: str,
    topic: str,
    count: int,
    *,
    partitions: int,
    start: int = 0,
    timestamps: Sequence[int] | None = None,
    headers: bool = False,
    producer: Producer | None = None,
) -> list[Produced]:
    """Produce ``count`` records round-robin over ``partitions`` (keys ``k<i>``, values ``v<i>``;
    every third record without a key, every fourth with headers when ``headers``)."""
    own = producer is None
    sender = producer or Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    try:
        now = int(time.time() * 1000)
        pending = []
        for n in range(count):
            i = start + n
            key = None if i % 3 == 2 else b"k%d" % i
            value = b"v%d" % i
            ts = timestamps[n] if timestamps is not None else now + n
            record_headers: tuple[tuple[str, bytes | None], ...] = ()
            if headers and i % 4 == 0:
                record_headers = (("h1", b"x%d" % i), ("h2", None))
            future = sender.send(
                topic, value, key=key, partition=i % partitions, timestamp=ts, headers=list(record_headers)
            )
            pending.append((future, key, value, ts, record_headers))
        sender.flush(WAIT_S)
        out = []
        for future, key, value, ts, record_headers in pending:
            meta = future.result(timeout=WAIT_S)
            out.append(Produced(topic, meta.partition, meta.offset, key, value, ts, record_headers))
        return out
    finally:
        if own:
            sender.close(WAIT_S)


def consume_all(bootstrap: str, topic: str, expected: int, partitions: int) -> list[ConsumerRecord]:
    """Read ``expected`` records of ``topic`` from the beginning with a kaflux consumer."""
    records: list[ConsumerRecord] = []
    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        deadline = time.monotonic() + WAIT_S
        while len(records) < expected and time.monotonic() < deadline:
            records.extend(consumer.poll(0.5))
        extra_deadline = time.monotonic() + 1.0
        while time.monotonic() < extra_deadline:  # anything beyond `expected` would be a duplicate
            records.extend(consumer.poll(0.2))
    return records


def wait_until(predicate: Callable[[], Any], timeout: float = WAIT_S, interval: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())
