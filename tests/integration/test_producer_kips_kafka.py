"""Smaller Kafka 4.x producer KIPs on Apache Kafka 4.4:

* KIP-1118: ``flush()`` inside a delivery callback raises IllegalStateError at once (it would
  wait forever for the thread that runs the callback) and the producer goes on working;
* KIP-390: records compressed at each codec's lowest and highest level are accepted by the broker
  and read back intact.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kaflux import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from kaflux.errors import IllegalStateError, KafkaError
from kaflux.structs import RecordMetadata

pytestmark = pytest.mark.integration


def _topic(bootstrap: str) -> str:
    name = f"kx-kips-{uuid.uuid4().hex[:8]}"
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(name, 1, 1)], timeout=60.0)
    return name


def test_flush_inside_a_delivery_callback_is_refused_not_a_deadlock(kafka: Any) -> None:
    bootstrap = kafka.bootstrap_servers
    topic = _topic(bootstrap)
    raised: list[BaseException] = []
    with Producer({"bootstrap.servers": bootstrap}) as producer:

        def callback(metadata: RecordMetadata, error: KafkaError | None) -> None:
            try:
                producer.flush(5.0)
            except BaseException as exc:
                raised.append(exc)

        producer.send(topic, b"a", partition=0, callback=callback)
        producer.flush(30.0)
        assert len(raised) == 1 and isinstance(raised[0], IllegalStateError)
        assert "callback" in str(raised[0]) and "deadlock" in str(raised[0])
        # the producer is unharmed
        assert producer.send(topic, b"b", partition=0).result(30.0).offset == 1


@pytest.mark.parametrize(
    ("codec", "levels"),
    [("gzip", (1, 9)), ("lz4", (1, 17)), ("zstd", (-131072, 22))],
    ids=["gzip", "lz4", "zstd"],
)
def test_every_compression_level_is_accepted_and_reads_back(
    kafka: Any, codec: str, levels: tuple[int, int]
) -> None:
    bootstrap = kafka.bootstrap_servers
    topic = _topic(bootstrap)
    values = [b"value %d %s" % (i, b"x" * (i % 50)) for i in range(200)]
    for level in levels:
        config = {
            "bootstrap.servers": bootstrap,
            "compression.type": codec,
            f"compression.{codec}.level": level,
        }
        with Producer(config) as producer:
            for value in values:
                producer.send(topic, value, partition=0)
            producer.flush(30.0)
    read: list[bytes] = []
    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        for _ in range(120):
            read += [r.value or b"" for r in consumer.poll(0.5)]
            if len(read) >= 2 * len(values):
                break
    assert read == values + values


def test_auto_offset_reset_by_duration_starts_at_the_first_record_that_recent(kafka: Any) -> None:
    """KIP-1106: by_duration:PT1H skips records older than an hour; by_duration:PT1M with every
    record older starts at the end."""
    import time

    bootstrap = kafka.bootstrap_servers
    topic = _topic(bootstrap)
    now_ms = int(time.time() * 1000)
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for i, age_min in enumerate((180, 120, 30, 10)):
            producer.send(topic, b"v%d" % i, partition=0, timestamp=now_ms - age_min * 60_000)
        producer.flush(30.0)

    def read(reset: str, expected: int) -> list[bytes]:
        config = {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": reset,
        }
        out: list[bytes] = []
        with Consumer(config) as consumer:
            consumer.subscribe([topic])
            deadline = time.monotonic() + 60
            while (len(out) < expected or not consumer.assignment()) and time.monotonic() < deadline:
                out += [r.value or b"" for r in consumer.poll(0.5)]
            position = consumer.position(TopicPartition(topic, 0), 30.0)
        assert position == 4
        return out

    assert read("by_duration:PT1H", 2) == [b"v2", b"v3"]
    assert read("by_duration:PT1M", 0) == []
