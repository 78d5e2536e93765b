"""Producer backpressure and lifecycle against real brokers: delivery callbacks, buffer.memory with
max.block.ms, flush(timeout), close(timeout) delivering or failing every record, and send_arrow."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kaflux import AdminClient, Consumer, NewTopic, Producer, RecordMetadata, TopicPartition
from kaflux.devbrokers.brokers import Broker, BrokerUnavailableError
from kaflux.errors import KafkaError, KafkaTimeoutError
from kaflux.producer import BatchMetadata

from support.scenarios import ProxiedBroker, create_topic, start_proxied_broker, unique_name

pytestmark = pytest.mark.integration

WAIT_S = 20.0


def new_topic(broker: Broker, partitions: int = 1) -> str:
    topic = unique_name("kx-life")
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(topic, partitions)], timeout=WAIT_S)
    return topic


def read(bootstrap: str, topic: str, partitions: int, count: int) -> list[Any]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        out: list[Any] = []
        deadline = time.monotonic() + WAIT_S
        while len(out) < count:
            assert time.monotonic() < deadline, f"read {len(out)} of {count}"
            out.extend(consumer.poll(0.5))
        return out
    finally:
        consumer.close(5)


@pytest.fixture(scope="module")
def proxied() -> Iterator[ProxiedBroker]:
    try:
        broker = start_proxied_broker("noida")
    except BrokerUnavailableError as e:
        pytest.skip(f"noida broker not available: {e}")
    try:
        yield broker
    finally:
        broker.close()


@pytest.fixture
def proxy(proxied: ProxiedBroker) -> Iterator[ProxiedBroker]:
    proxied.proxy.reset()
    yield proxied
    proxied.proxy.reset()


def test_delivery_callbacks_run_once_per_record_in_order_next_to_the_futures(broker: Broker) -> None:
    topic = new_topic(broker)
    calls: list[tuple[RecordMetadata, KafkaError | None, str]] = []
    with Producer({"bootstrap.servers": broker.bootstrap_servers}) as producer:
        futures = [
            producer.send(
                topic,
                b"v%d" % i,
                partition=0,
                callback=lambda m, e: calls.append((m, e, threading.current_thread().name)),
            )
            for i in range(50)
        ]
        producer.flush(WAIT_S)
    assert [m for m, _, _ in calls] == [f.result(0) for f in futures]
    assert [m.offset for m, _, _ in calls] == list(range(50))
    assert all(e is None for _, e, _ in calls)
    assert all(name.startswith("kaflux-producer-network") for _, _, name in calls)


def test_a_full_buffer_blocks_send_for_max_block_ms_then_raises(proxy: ProxiedBroker) -> None:
    topic = unique_name("kx-life")
    create_topic(proxy.bootstrap_servers, topic, 1)
    config = {
        "bootstrap.servers": proxy.bootstrap_servers,
        "buffer.memory": 64 * 1024,
        "batch.size": 16384,
        "max.block.ms": 1000,
        # Batches leave only when full, so each holds ~16 records: with linger.ms=0 the network
        # thread may send a batch after each of the first records (each keeping a 16 KiB chunk
        # of the buffer), and how many fit would depend on thread scheduling (34 once in CI).
        "linger.ms": 60_000,
    }
    with Producer(config) as producer:
        warm_up = producer.send(topic, b"warm-up")
        producer.flush(WAIT_S)
        warm_up.result(WAIT_S)
        proxy.proxy.stall()  # the broker stops answering: nothing frees the buffer
        sent = 0
        started = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match=r"buffer\.memory"):
            while True:
                producer.send(topic, b"x" * 1000)
                sent += 1
                assert time.monotonic() - started < WAIT_S
        blocked = time.monotonic() - started
        assert 1.0 <= blocked < 1.0 + 5.0, f"blocked {blocked:.2f} s"
        assert 40 <= sent <= 70, "64 KiB of 16 KiB batches hold about 60 such records"
        proxy.proxy.unstall()
        producer.flush(WAIT_S)


def test_flush_raises_after_its_timeout_while_records_are_pending(proxy: ProxiedBroker) -> None:
    topic = unique_name("kx-life")
    create_topic(proxy.bootstrap_servers, topic, 1)
    with Producer({"bootstrap.servers": proxy.bootstrap_servers}) as producer:
        producer.send(topic, b"warm-up").result(WAIT_S)
        proxy.proxy.stall()
        future = producer.send(topic, b"stuck")
        started = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match="flush"):
            producer.flush(0.5)
        assert 0.5 <= time.monotonic() - started < 3.0
        assert not future.done()
        proxy.proxy.unstall()
        producer.flush(WAIT_S)
        assert future.result(0).offset == 1


def test_close_with_a_timeout_fails_every_record_it_could_not_deliver(proxy: ProxiedBroker) -> None:
    topic = unique_name("kx-life")
    create_topic(proxy.bootstrap_servers, topic, 1)
    producer = Producer({"bootstrap.servers": proxy.bootstrap_servers, "linger.ms": 100})
    producer.send(topic, b"warm-up").result(WAIT_S)
    proxy.proxy.stall()
    futures = [producer.send(topic, b"r%d" % i) for i in range(100)]
    started = time.monotonic()
    producer.close(1.0)
    assert time.monotonic() - started < 4.0
    assert all(f.done() for f in futures), "close() leaves no record pending"
    assert all(isinstance(f.exception(0), KafkaError) for f in futures)


def test_close_delivers_what_it_can_in_time(broker: Broker) -> None:
    topic = new_topic(broker)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 60_000})
    futures = [producer.send(topic, b"r%d" % i) for i in range(200)]
    producer.close(WAIT_S)
    assert [f.result(0).offset for f in futures] == list(range(200))


def test_send_arrow_writes_every_row_to_its_partition_in_order(broker: Broker) -> None:
    pa = pytest.importorskip("pyarrow")
    topic = new_topic(broker, 3)
    rows = 5000
    header_type = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array([b"k%d" % (i % 7) for i in range(rows)], pa.binary()),
            pa.array([f"value-{i}" for i in range(rows)], pa.string()),
            pa.array([i % 3 if i % 2 else None for i in range(rows)], pa.int32()),
            pa.array([1_700_000_000_000 + i for i in range(rows)], pa.timestamp("ms")),
            pa.array(
                [[{"key": "row", "value": b"%d" % i}] if i % 5 == 0 else None for i in range(rows)],
                header_type,
            ),
        ],
        names=["key", "value", "partition", "timestamp", "headers"],
    )
    with Producer({"bootstrap.servers": broker.bootstrap_servers}) as producer:
        futures = producer.send_arrow(topic, batch)
        producer.flush(WAIT_S)
    metas = [f.result(0) for f in futures]
    assert all(isinstance(m, BatchMetadata) for m in metas)
    assert sum(m.record_count for m in metas) == rows
    records = read(broker.bootstrap_servers, topic, 3, rows)
    by_partition: dict[int, list[int]] = {}
    for r in records:
        i = int(r.value.split(b"-")[1])
        by_partition.setdefault(r.partition, []).append(i)
        assert r.key == b"k%d" % (i % 7)
        assert r.timestamp == 1_700_000_000_000 + i
        assert r.headers == ([("row", b"%d" % i)] if i % 5 == 0 else [])
        if i % 2:
            assert r.partition == i % 3, "an explicit partition wins over the key"
    for partition, indexes in by_partition.items():
        assert indexes == sorted(indexes), f"partition {partition} is out of row order"
