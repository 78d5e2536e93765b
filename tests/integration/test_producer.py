"""``kaflux.Producer`` against real brokers: futures, offsets, headers, batching, flush and close."""

from __future__ import annotations

import concurrent.futures
import socket
import struct
import time

import pytest

from kaflux import AdminClient, Consumer, NewTopic, Producer, RecordMetadata, TopicPartition
from kaflux.devbrokers.brokers import Broker
from kaflux.errors import IllegalStateError

pytestmark = pytest.mark.integration

WAIT_S = 15.0
HOUR_MS = 3_600_000


def create_topic(broker: Broker, topic: str, partitions: int = 1) -> None:
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(topic, partitions)], timeout=WAIT_S)


def read_all(broker: Broker, tp: TopicPartition, count: int) -> list:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([tp])
        out: list = []
        deadline = time.monotonic() + WAIT_S
        while len(out) < count:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"read {len(out)} of {count} records from {tp}"
            out.extend(consumer.poll(min(1.0, remaining)))
        return out
    finally:
        consumer.close()


def stored_batch_sizes(broker: Broker, topic: str, partition: int, end_offset: int) -> list[int]:
    """Record counts of the stored record batches of a partition, via raw Fetch v4 requests."""
    counts: list[int] = []
    offset = 0
    deadline = time.monotonic() + WAIT_S
    with socket.create_connection((broker.host, broker.port), timeout=WAIT_S) as sock:
        while offset < end_offset:
            assert time.monotonic() < deadline, f"raw fetch stuck at offset {offset}"
            t = topic.encode()
            body = struct.pack(">hhih", 1, 4, 7, 2) + b"kx"
            body += struct.pack(">iiiib", -1, 200, 1, 8 << 20, 0)
            body += struct.pack(">ih", 1, len(t)) + t + struct.pack(">iiqi", 1, partition, offset, 8 << 20)
            sock.sendall(struct.pack(">i", len(body)) + body)
            data = _recv(sock, struct.unpack(">i", _recv(sock, 4))[0])
            # correlation, throttle, 1 topic (count, name), 1 partition (count, index, error, hw, lso)
            pos = 4 + 4 + 4 + 2 + len(t) + 4
            _, error, _, _ = struct.unpack_from(">ihqq", data, pos)
            assert error == 0, f"raw fetch error code {error}"
            pos += 22
            (n_aborted,) = struct.unpack_from(">i", data, pos)
            pos += 4 + max(0, n_aborted) * 16
            (size,) = struct.unpack_from(">i", data, pos)
            records = data[pos + 4 : pos + 4 + max(0, size)]
            bpos = 0
            while bpos + 61 <= len(records):
                base, length = struct.unpack_from(">qi", records, bpos)
                if bpos + 12 + length > len(records):
                    break
                (last_delta,) = struct.unpack_from(">i", records, bpos + 23)
                (count,) = struct.unpack_from(">i", records, bpos + 57)
                if base >= offset:
                    counts.append(count)
                offset = max(offset, base + last_delta + 1)
                bpos += 12 + length
    return counts


def _recv(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed")
        buf += chunk
    return bytes(buf)


def test_futures_resolve_to_contiguous_offsets_and_given_timestamps(broker: Broker, topic_name: str):
    create_topic(broker, topic_name)
    base_ts = int(time.time() * 1000) - 10_000
    with Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 10}) as producer:
        first = [producer.send(topic_name, b"a%d" % i, timestamp=base_ts + i) for i in range(40)]
        producer.flush(WAIT_S)
        second = [
            producer.send(topic_name, b"b%d" % i, partition=0, timestamp=base_ts + 100 + i) for i in range(25)
        ]
        producer.flush(WAIT_S)
    metas = [f.result(timeout=0) for f in first + second]
    assert metas == [RecordMetadata(topic_name, 0, i, base_ts + i) for i in range(40)] + [
        RecordMetadata(topic_name, 0, 40 + i, base_ts + 100 + i) for i in range(25)
    ]
    records = read_all(broker, TopicPartition(topic_name, 0), 65)
    assert [(r.offset, r.value, r.timestamp) for r in records] == [
        (m.offset, (b"a%d" % i if i < 40 else b"b%d" % (i - 40)), m.timestamp) for i, m in enumerate(metas)
    ]


def test_headers_round_trip_in_list_and_mapping_form(broker: Broker, topic_name: str):
    create_topic(broker, topic_name)
    header_sets: list = [
        [("dup", b"1"), ("dup", b"2"), ("dup", None)],
        {"a": b"x", "b": None, "c": b""},
        [("ünï", "ç".encode()), ("bin", bytes(range(256)))],
        [],
        None,
    ]
    with Producer({"bootstrap.servers": broker.bootstrap_servers}) as producer:
        futures = [producer.send(topic_name, b"v", headers=h) for h in header_sets]
        producer.flush(WAIT_S)
    assert [f.result(timeout=0).offset for f in futures] == list(range(len(header_sets)))
    records = read_all(broker, TopicPartition(topic_name, 0), len(header_sets))
    assert [r.headers for r in records] == [
        [("dup", b"1"), ("dup", b"2"), ("dup", None)],
        [("a", b"x"), ("b", None), ("c", b"")],
        [("ünï", "ç".encode()), ("bin", bytes(range(256)))],
        [],
        [],
    ]


def test_flush_sends_lingering_records_and_resolves_every_future(broker: Broker, topic_name: str):
    create_topic(broker, topic_name)
    config = {"bootstrap.servers": broker.bootstrap_servers, "linger.ms": HOUR_MS, "batch.size": 1 << 20}
    with Producer(config) as producer:
        futures = [producer.send(topic_name, b"r%d" % i) for i in range(20)]
        # linger.ms is an hour and the batch is far from full: nothing may be sent yet.
        done, _ = concurrent.futures.wait(futures, timeout=0.5)
        assert done == set()
        started = time.monotonic()
        producer.flush(WAIT_S)
        assert time.monotonic() - started < 5.0
        assert all(f.done() for f in futures)
        assert [f.result(timeout=0).offset for f in futures] == list(range(20))


def test_linger_ms_holds_a_record_until_it_expires(broker: Broker, topic_name: str):
    create_topic(broker, topic_name)
    with Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 500}) as producer:
        producer.send(topic_name, b"warm-up").result(timeout=WAIT_S)  # metadata and connection ready
        started = time.monotonic()
        future = producer.send(topic_name, b"lingering")
        future.result(timeout=WAIT_S)
        elapsed = time.monotonic() - started
    assert 0.48 <= elapsed < 3.0  # (ms clock rounding)


def test_full_batches_are_sent_without_waiting_for_linger(broker: Broker, topic_name: str):
    create_topic(broker, topic_name)
    value = b"x" * 100
    config = {"bootstrap.servers": broker.bootstrap_servers, "linger.ms": HOUR_MS, "batch.size": 1000}
    with Producer(config) as producer:
        futures = [producer.send(topic_name, value) for _ in range(45)]
        # All but the last (partial) batch are full, so they go out although linger.ms is an hour.
        concurrent.futures.wait(futures[:36], timeout=WAIT_S)
        assert all(f.done() and f.exception() is None for f in futures[:36])
        assert not futures[-1].done()
        producer.flush(WAIT_S)
        assert [f.result(timeout=0).offset for f in futures] == list(range(45))
    sizes = stored_batch_sizes(broker, topic_name, 0, 45)
    assert sum(sizes) == 45
    assert len(sizes) >= 5  # 45 records of ~120 bytes cannot fit in fewer 1000-byte batches
    assert max(sizes) <= 9


def test_records_sent_together_share_few_batches(broker: Broker, topic_name: str):
    create_topic(broker, topic_name)
    with Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 200}) as producer:
        producer.send(topic_name, b"warm-up").result(timeout=WAIT_S)
        futures = [producer.send(topic_name, b"r%03d" % i) for i in range(300)]
        producer.flush(WAIT_S)
    assert [f.result(timeout=0).offset for f in futures] == list(range(1, 301))
    sizes = stored_batch_sizes(broker, topic_name, 0, 301)
    assert sum(sizes) == 301
    assert sizes[0] == 1  # the warm-up record
    assert len(sizes) <= 4, sizes  # 300 small records within one linger window: a batch or few


def test_acks_zero_resolves_futures_without_offsets(broker: Broker, topic_name: str):
    create_topic(broker, topic_name)
    with Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "0"}) as producer:
        futures = [producer.send(topic_name, b"r%d" % i) for i in range(5)]
        producer.flush(WAIT_S)
    assert [f.result(timeout=0).offset for f in futures] == [-1] * 5
    assert [r.value for r in read_all(broker, TopicPartition(topic_name, 0), 5)] == [
        b"r%d" % i for i in range(5)
    ]


def test_close_sends_pending_records_and_later_sends_fail(broker: Broker, topic_name: str):
    create_topic(broker, topic_name)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": HOUR_MS})
    futures = [producer.send(topic_name, b"c%d" % i) for i in range(10)]
    started = time.monotonic()
    producer.close(10.0)
    assert time.monotonic() - started < 5.0
    assert [f.result(timeout=0).offset for f in futures] == list(range(10))
    producer.close()  # idempotent
    with pytest.raises(IllegalStateError):
        producer.send(topic_name, b"late")
    assert [r.value for r in read_all(broker, TopicPartition(topic_name, 0), 10)] == [
        b"c%d" % i for i in range(10)
    ]
