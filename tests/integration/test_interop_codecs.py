"""Wire interoperability with confluent-kafka (librdkafka) for every compression codec.

* Records written by confluent-kafka with each codec are read byte-exactly by ``kaflux.Consumer``.
* Records written by ``kaflux.Producer`` with each codec are read byte-exactly by confluent-kafka.
* Keyed records land where librdkafka's ``murmur2_random`` partitioner puts them.

Each codec test also reads the stored record batches with a raw Fetch (independent of both clients)
and checks their compression attribute, so a producer that silently skipped compression fails the test.
"""

from __future__ import annotations

import random
import socket
import struct
import time
import uuid
from dataclasses import dataclass
from typing import Any

import pytest

from kaflux import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from kaflux.consumer.consumer_record import CREATE_TIME
from kaflux.devbrokers.brokers import Broker

ck = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.integration

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
WAIT_S = 15.0


# --- helpers --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rec:
    partition: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    timestamp: int


def sample_records(partitions: int) -> list[Rec]:
    """Edge cases (null/empty keys and values, null and duplicate headers) plus compressible bulk."""
    base_ts = int(time.time() * 1000) - 60_000  # explicit, clearly not "now"
    specials: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]] = [
        (None, b"", []),
        (b"", None, []),
        (None, None, [("only-null", None)]),
        (b"k-dup", b"v", [("dup", b"1"), ("dup", b"2"), ("dup", None), ("empty", b"")]),
        (bytes(range(256)), bytes(range(255, -1, -1)), [("bin", bytes(range(256)))]),
        ("ключ".encode(), "значение ✓".encode(), [("заголовок", "✓".encode())]),
    ]
    out: list[Rec] = []
    for i, (key, value, headers) in enumerate(specials):
        out.append(Rec(i % partitions, key, value, headers, base_ts + i))
    for i in range(len(specials), 120):
        value = (f"record-{i:04d} " * (1 + i % 40)).encode()  # compressible
        key = None if i % 7 == 0 else f"key-{i % 13}".encode()
        headers = [("seq", str(i).encode()), ("seq", None)] if i % 5 == 0 else []
        out.append(Rec(i % partitions, key, value, headers, base_ts + i * 3))
    return out


def create_topic(broker: Broker, topic: str, partitions: int) -> None:
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(topic, partitions)], timeout=WAIT_S)


def raw_batches(broker: Broker, topic: str, partition: int, end_offset: int) -> list[tuple[int, int, int]]:
    """Read a partition with raw Fetch v4 requests; return ``(base_offset, record_count, codec)``
    of every stored record batch up to ``end_offset`` (exclusive)."""
    batches: list[tuple[int, int, int]] = []
    offset = 0
    deadline = time.monotonic() + WAIT_S
    with socket.create_connection((broker.host, broker.port), timeout=WAIT_S) as sock:
        correlation = 0
        while offset < end_offset:
            assert time.monotonic() < deadline, f"raw fetch stuck at offset {offset} of {end_offset}"
            correlation += 1
            client = b"kx-raw"
            t = topic.encode()
            body = struct.pack(">hhih", 1, 4, correlation, len(client)) + client
            body += struct.pack(">iiiib", -1, 200, 1, 8 << 20, 0)
            body += struct.pack(">ih", 1, len(t)) + t + struct.pack(">iiqi", 1, partition, offset, 8 << 20)
            sock.sendall(struct.pack(">i", len(body)) + body)
            response = _recv(sock, struct.unpack(">i", _recv(sock, 4))[0])
            pos = 0
            (corr,) = struct.unpack_from(">i", response, pos)
            assert corr == correlation
            pos += 4 + 4  # correlation id, throttle time
            (n_topics,) = struct.unpack_from(">i", response, pos)
            pos += 4
            records = b""
            for _ in range(n_topics):
                (tlen,) = struct.unpack_from(">h", response, pos)
                pos += 2 + tlen
                (n_parts,) = struct.unpack_from(">i", response, pos)
                pos += 4
                for _ in range(n_parts):
                    _, error, _, _ = struct.unpack_from(">ihqq", response, pos)
                    assert error == 0, f"raw fetch error code {error}"
                    pos += 4 + 2 + 8 + 8
                    (n_aborted,) = struct.unpack_from(">i", response, pos)
                    pos += 4 + max(0, n_aborted) * 16
                    (rlen,) = struct.unpack_from(">i", response, pos)
                    pos += 4
                    if rlen > 0:
                        records = response[pos : pos + rlen]
                        pos += rlen
            bpos = 0
            while bpos + 61 <= len(records):
                base, length = struct.unpack_from(">qi", records, bpos)
                if bpos + 12 + length > len(records):
                    break  # a partial batch at the end of the response
                (attributes,) = struct.unpack_from(">h", records, bpos + 21)
                (last_delta,) = struct.unpack_from(">i", records, bpos + 23)
                (count,) = struct.unpack_from(">i", records, bpos + 57)
                if base + last_delta >= offset and base < end_offset:
                    batches.append((base, count, attributes & 0x7))
                offset = max(offset, base + last_delta + 1)
                bpos += 12 + length
    return batches


def _recv(sock: socket.socket, n: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = sock.recv(n - len(chunks))
        if not chunk:
            raise ConnectionError("broker closed the raw fetch connection")
        chunks += chunk
    return bytes(chunks)


def poll_kaflux(consumer: Consumer, count: int, timeout: float = WAIT_S) -> list:
    deadline = time.monotonic() + timeout
    out: list = []
    while len(out) < count:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"kaflux returned {len(out)} of {count} records within {timeout} s"
        out.extend(consumer.poll(min(remaining, 1.0)))
    return out


def by_partition(records: list[Rec]) -> dict[int, list[Rec]]:
    out: dict[int, list[Rec]] = {}
    for r in records:
        out.setdefault(r.partition, []).append(r)
    return out


# --- confluent-kafka -> kaflux --------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_produced_records_are_read_byte_exactly_by_kaflux(
    broker: Broker, topic_name: str, codec: str
):
    partitions = 2
    create_topic(broker, topic_name, partitions)
    records = sample_records(partitions)
    producer = ck.Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "compression.type": codec, "linger.ms": 20}
    )
    errors: list = []
    for r in records:
        producer.produce(
            topic_name,
            value=r.value,
            key=r.key,
            partition=r.partition,
            headers=r.headers or None,
            timestamp=r.timestamp,
            on_delivery=lambda err, msg: errors.append(err) if err else None,
        )
    assert producer.flush(WAIT_S) == 0
    assert errors == []

    expected = by_partition(records)
    for p, recs in expected.items():
        stored = raw_batches(broker, topic_name, p, len(recs))
        assert sum(count for _, count, _ in stored) == len(recs)
        assert {c for _, _, c in stored} == {CODEC_IDS[codec]}, f"batches of partition {p}: {stored}"

    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic_name, p) for p in range(partitions)])
        got = poll_kaflux(consumer, len(records))
    finally:
        consumer.close()

    for p, recs in expected.items():
        mine = [r for r in got if r.partition == p]
        assert [r.offset for r in mine] == list(range(len(recs)))
        assert [(r.key, r.value, r.headers, r.timestamp, r.timestamp_type) for r in mine] == [
            (r.key, r.value, r.headers, r.timestamp, CREATE_TIME) for r in recs
        ]
        assert all(r.topic == topic_name for r in mine)
    # Null and empty must stay distinct (not only equal after normalisation).
    first = next(r for r in got if r.partition == 0)
    assert first.key is None and first.value == b"" and first.value is not None


# --- kaflux -> confluent-kafka --------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_kaflux_produced_records_are_read_byte_exactly_by_confluent(
    broker: Broker, topic_name: str, codec: str
):
    partitions = 2
    create_topic(broker, topic_name, partitions)
    records = sample_records(partitions)
    with Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "compression.type": codec, "linger.ms": 20}
    ) as producer:
        futures = [
            producer.send(
                topic_name,
                r.value,
                key=r.key,
                headers=r.headers,
                partition=r.partition,
                timestamp=r.timestamp,
            )
            for r in records
        ]
        producer.flush(WAIT_S)
    metas = [f.result(timeout=0) for f in futures]
    expected = by_partition(records)
    for p, recs in expected.items():
        assert sorted(m.offset for m in metas if m.partition == p) == list(range(len(recs)))
        stored = raw_batches(broker, topic_name, p, len(recs))
        assert sum(count for _, count, _ in stored) == len(recs)
        assert {c for _, _, c in stored} == {CODEC_IDS[codec]}, f"batches of partition {p}: {stored}"

    consumer = ck.Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": f"kx-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
        }
    )
    got: list[Any] = []
    try:
        consumer.assign([ck.TopicPartition(topic_name, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + WAIT_S
        while len(got) < len(records):
            assert time.monotonic() < deadline, f"confluent read {len(got)} of {len(records)} records"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append(msg)
    finally:
        consumer.close()

    for p, recs in expected.items():
        mine = [m for m in got if m.partition() == p]
        assert [m.offset() for m in mine] == list(range(len(recs)))
        assert [(m.key(), m.value(), m.headers() or [], m.timestamp()) for m in mine] == [
            (r.key, r.value, r.headers, (ck.TIMESTAMP_CREATE_TIME, r.timestamp)) for r in recs
        ]
    first = next(m for m in got if m.partition() == 0)
    assert first.key() is None and first.value() == b""


# --- partitioner ----------------------------------------------------------------------------------


def test_keyed_partitioning_matches_librdkafka_murmur2_random(broker: Broker, topic_name: str):
    partitions = 7
    create_topic(broker, topic_name, partitions)
    rng = random.Random(0x6B786C78)
    keys = [b"", b"a", b"ab", b"abc", b"abcd", b"\xff" * 5, b"\x00" * 3]
    keys += [rng.randbytes(rng.randint(1, 64)) for _ in range(200)]

    delivered: dict[int, int] = {}
    producer = ck.Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "partitioner": "murmur2_random", "linger.ms": 5}
    )
    for i, key in enumerate(keys):

        def on_delivery(err, msg, i=i):
            assert err is None, err
            delivered[i] = msg.partition()

        producer.produce(topic_name, value=b"x", key=key, on_delivery=on_delivery)
    assert producer.flush(WAIT_S) == 0
    assert len(delivered) == len(keys)

    with Producer({"bootstrap.servers": broker.bootstrap_servers}) as kx:
        futures = [kx.send(topic_name, b"x", key=key) for key in keys]
        kx.flush(WAIT_S)
    mine = {i: f.result(timeout=0).partition for i, f in enumerate(futures)}

    mismatches = {keys[i].hex(): (mine[i], delivered[i]) for i in range(len(keys)) if mine[i] != delivered[i]}
    assert mismatches == {}
    assert len(set(delivered.values())) == partitions  # the keys really spread over all partitions
