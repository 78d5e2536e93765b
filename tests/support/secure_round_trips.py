"""What the TLS, SASL and Kerberos integration tests check once a client is logged in: a topic
created, records written and read back with kaflux, and a consumer group reading through the
secured listener. [test]"""

from __future__ import annotations

import time
import uuid
from typing import Any

from kaflux import AdminClient, Consumer, NewTopic, Producer, TopicPartition

from support.group_helpers import WAIT_S, wait_until


def kaflux_round_trip(config: dict[str, Any], topic: str, records: int) -> list[bytes]:
    """AdminClient creates ``topic``, Producer writes ``records`` records to partition 0, and an
    assigned Consumer reads exactly those back. Returns the values written."""
    with AdminClient(config) as admin:
        admin.create_topics([NewTopic(topic, 1)], timeout=WAIT_S)
    values = [b"v%d" % i for i in range(records)]
    with Producer({**config, "linger.ms": 0}) as producer:
        for future in [producer.send(topic, v, partition=0) for v in values]:
            future.result(timeout=WAIT_S)
    consumer = Consumer({**config, "auto.offset.reset": "earliest"})
    got: list[bytes | None] = []
    try:
        consumer.assign([TopicPartition(topic, 0)])
        wait_until(
            lambda: bool(got.extend(r.value for r in consumer.poll(0.2))) or len(got) >= records,  # type: ignore[func-returns-value]
            WAIT_S,
            lambda: f"kaflux read {len(got)}",
        )
    finally:
        consumer.close(timeout=5)
    assert got == values
    return values


def group_round_trip(config: dict[str, Any], topic: str) -> None:
    """A record on each of two partitions, read by a consumer group member that is assigned
    both and commits."""
    with AdminClient(config) as admin:
        admin.create_topics([NewTopic(topic, 2)], timeout=WAIT_S)
    with Producer({**config, "linger.ms": 0}) as producer:
        for p in range(2):
            producer.send(topic, b"g%d" % p, partition=p).result(timeout=WAIT_S)
    consumer = Consumer(
        {
            **config,
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 1000,
        }
    )
    got: set[bytes | None] = set()
    try:
        consumer.subscribe([topic])
        wait_until(
            lambda: bool(got.update(r.value for r in consumer.poll(0.2))) or len(got) == 2,  # type: ignore[func-returns-value]
            WAIT_S,
            lambda: f"read {got}",
        )
        assert consumer.assignment() == {TopicPartition(topic, p) for p in range(2)}
        consumer.commit_sync()
    finally:
        consumer.close(timeout=10)
    assert got == {b"g0", b"g1"}


def produce_across_sessions(config: dict[str, Any], topic: str, seconds: float = 4.0) -> int:
    """Create ``topic`` and produce to it, one record at a time, for ``seconds``: the producer
    keeps using its connections while their SASL sessions expire (KIP-368). Returns the count."""
    with AdminClient(config) as admin:
        admin.create_topics([NewTopic(topic, 1)], timeout=WAIT_S)
    sent = 0
    with Producer({**config, "linger.ms": 0}) as producer:
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            producer.send(topic, b"r%d" % sent, partition=0).result(timeout=WAIT_S)
            sent += 1
    return sent
