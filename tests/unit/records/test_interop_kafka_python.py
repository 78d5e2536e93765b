"""Interop with kafka-python's independent v2 record batch implementation (no broker).

kafka-python's record code (``kafka.record``) writes and reads batches with its own framing,
varints and CRC code; we check both directions for every codec: its batches decode with
ours to exactly the bytes it was given, and ours decode with its reader.

kafka-python gets its codecs from optional packages (python-snappy, lz4, zstandard) that
are not installed here; the ``kafka_python_codecs`` fixture plugs cramjam into the hooks
its codec layer calls (python-snappy's ``compress``/``decompress`` for raw blocks, and the
lz4/zstd encode/decode functions). gzip is kafka-python's own (stdlib gzip, level 9), and
snappy *framing* is kafka-python's own xerial writer -- the format the Java client uses.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import cramjam
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kaflux.records import BatchBuilder, Record, build_control_batch
from kaflux.records.interface import RecordDecoder

kafka_codec = pytest.importorskip("kafka.codec")
kafka_default_records = pytest.importorskip("kafka.record.default_records")
kafka_memory_records = pytest.importorskip("kafka.record.memory_records")

CODECS = [0, 1, 2, 3, 4]
Headers = list[tuple[str, bytes | None]]


def _lz4_frame(data: bytes) -> bytes:
    compressor = cramjam.lz4.Compressor(block_linked=False)
    compressor.compress(bytes(data))
    return bytes(compressor.finish())


@pytest.fixture(autouse=True)
def kafka_python_codecs(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    snappy = SimpleNamespace(
        compress=lambda data: bytes(cramjam.snappy.compress_raw(bytes(data))),
        decompress=lambda data: bytes(cramjam.snappy.decompress_raw(bytes(data))),
    )
    monkeypatch.setattr(kafka_codec, "snappy", snappy)
    monkeypatch.setattr(kafka_codec, "lz4", SimpleNamespace())  # has_lz4() checks it is not None
    monkeypatch.setattr(kafka_codec, "zstd", SimpleNamespace())
    monkeypatch.setattr(kafka_default_records, "lz4_encode", _lz4_frame)
    monkeypatch.setattr(kafka_default_records, "lz4_decode", lambda data: bytes(cramjam.lz4.decompress(data)))
    monkeypatch.setattr(kafka_default_records, "zstd_encode", lambda data: bytes(cramjam.zstd.compress(data)))
    monkeypatch.setattr(
        kafka_default_records, "zstd_decode", lambda data: bytes(cramjam.zstd.decompress(bytes(data)))
    )
    yield


def kp_build(
    codec: int,
    records: list[tuple[int, bytes | None, bytes | None, Headers]],
    *,
    transactional: bool = False,
) -> bytes:
    builder = kafka_default_records.DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=transactional,
        producer_id=77 if transactional else -1,
        producer_epoch=3 if transactional else -1,
        base_sequence=10 if transactional else -1,
        batch_size=1 << 30,
    )
    for offset, (ts, key, value, headers) in enumerate(records):
        assert builder.append(offset, ts, key, value, headers) is not None
    return bytes(builder.build())


def kp_read(buf: bytes) -> list[tuple[Any, list[Any]]]:
    out = []
    memory_records = kafka_memory_records.MemoryRecords(buf)
    while memory_records.has_next():
        batch = memory_records.next_batch()
        assert batch.validate_crc()
        out.append((batch, list(batch)))
    return out


def compressible_records(n: int = 20) -> list[tuple[int, bytes | None, bytes | None, Headers]]:
    return [
        (
            1_700_000_000_000 + 3 * i,
            b"key-%04d" % i,
            b"the same value again %d " % (i % 3) * 10,
            [("h", b"v")],
        )
        for i in range(n)
    ]


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_batches_decode_with_ours(kernel: RecordDecoder, codec: int) -> None:
    records = compressible_records()
    raw = kp_build(codec, records)
    (batch,) = kernel.iter_batches(memoryview(raw))
    assert batch.compression == codec  # kafka-python keeps the codec only when it helps
    if codec == 2:
        assert raw[61:69] == b"\x82SNAPPY\x00"  # xerial framing, as the Java client writes
    assert batch.records() == [Record(i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(records)]


@pytest.mark.parametrize("codec", CODECS)
def test_our_batches_decode_with_kafka_python(codec: int) -> None:
    records = compressible_records()
    builder = BatchBuilder(codec, base_offset=500)
    for ts, key, value, headers in records:
        builder.append(ts, key, value, headers)
    ((batch, decoded),) = kp_read(builder.build())
    assert batch.compression_type == codec
    assert batch.base_offset == 500
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in decoded] == [
        (500 + i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(records)
    ]


def test_uncompressed_batches_are_byte_identical() -> None:
    extra: list[tuple[int, bytes | None, bytes | None, Headers]] = [
        (5, None, None, []),
        (1_700_000_000_000, b"", b"", [("", None)]),
    ]
    records = compressible_records(7) + extra
    builder = BatchBuilder(0, partition_leader_epoch=0)  # kafka-python writes epoch 0
    for ts, key, value, headers in records:
        builder.append(ts, key, value, headers)
    assert builder.build() == kp_build(0, records)


def test_transactional_batches(kernel: RecordDecoder) -> None:
    records = compressible_records(5)
    raw = kp_build(3, records, transactional=True)
    (batch,) = kernel.iter_batches(memoryview(raw))
    assert batch.is_transactional and not batch.is_control
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (77, 3, 10)
    assert len(batch.records()) == 5

    builder = BatchBuilder(4, producer_id=77, producer_epoch=3, base_sequence=10, is_transactional=True)
    for ts, key, value, headers in records:
        builder.append(ts, key, value, headers)
    ((kp_batch, _),) = kp_read(builder.build())
    assert kp_batch.is_transactional
    assert (kp_batch.producer_id, kp_batch.producer_epoch, kp_batch.base_sequence) == (77, 3, 10)


@pytest.mark.parametrize("kind", [0, 1])
def test_control_batches_decode_with_kafka_python(kind: int) -> None:
    raw = build_control_batch(kind, producer_id=77, producer_epoch=3, timestamp_ms=1234, base_offset=9)
    ((batch, (record,)),) = kp_read(raw)
    assert batch.is_control_batch and batch.is_transactional
    assert record.offset == 9 and record.type == kind and record.commit == (kind == 1)


def test_log_append_time_matches_kafka_python(kernel: RecordDecoder) -> None:
    builder = BatchBuilder(2, timestamp_type=1)
    for ts in (30, 10, 20):
        builder.append(ts, None, b"x" * 100)
    raw = builder.build()
    ((_, kp_records),) = kp_read(raw)
    (batch,) = kernel.iter_batches(memoryview(raw))
    assert [r.timestamp for r in batch.records()] == [r.timestamp for r in kp_records] == [30, 30, 30]


def test_many_batches_through_memory_records(kernel: RecordDecoder) -> None:
    raws = []
    for n, codec in enumerate(CODECS):
        builder = BatchBuilder(codec, base_offset=n * 100)
        for ts, key, value, headers in compressible_records(10):
            builder.append(ts, key, value, headers)
        raws.append(builder.build())
    decoded = kp_read(b"".join(raws))
    assert [batch.base_offset for batch, _ in decoded] == [0, 100, 200, 300, 400]
    ours = list(kernel.iter_batches(memoryview(b"".join(raws))))
    for (kp_batch, kp_records), batch in zip(decoded, ours, strict=True):
        assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in kp_records] == [
            tuple(r) for r in batch.records()
        ]
        assert kp_batch.crc == batch.crc


maybe_bytes = st.none() | st.binary(max_size=200)
record_st = st.tuples(
    st.integers(min_value=0, max_value=2**53),
    maybe_bytes,
    maybe_bytes,
    st.lists(st.tuples(st.text(max_size=10), maybe_bytes), max_size=3),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(codec=st.sampled_from(CODECS), records=st.lists(record_st, min_size=1, max_size=25))
def test_property_both_directions(
    kernel: RecordDecoder, codec: int, records: list[tuple[int, bytes | None, bytes | None, Headers]]
) -> None:
    expected = [(i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(records)]
    # kafka-python -> kaflux (codec may have been dropped by kafka-python if it didn't help)
    (batch,) = kernel.iter_batches(memoryview(kp_build(codec, records)))
    assert [tuple(r) for r in batch.records()] == expected
    # kaflux -> kafka-python
    builder = BatchBuilder(codec)
    for ts, key, value, headers in records:
        builder.append(ts, key, value, headers)
    ((kp_batch, kp_records),) = kp_read(builder.build())
    assert kp_batch.compression_type == codec
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in kp_records] == expected
