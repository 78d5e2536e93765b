"""Decoder semantics: batch walking, truncation, header fields, control batches, and the
CorruptRecordError raised for each kind of malformed batch or record."""

from __future__ import annotations

import struct

import pytest

from kaflux.errors import CorruptRecordError, IllegalStateError
from kaflux.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    BatchBuilder,
    Record,
    RecordFormatError,
    assemble_batch,
    build_control_batch,
    compress,
)
from kaflux.records.interface import RecordBatchView, RecordDecoder


def zz(value: int) -> bytes:
    """Zig-zag varint encoding, written independently of the library."""
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        if n < 0x80:
            out.append(n)
            return bytes(out)
        out.append((n & 0x7F) | 0x80)
        n >>= 7


def record_bytes(
    *,
    ts_delta: int = 0,
    offset_delta: int = 0,
    key: bytes | None = b"k",
    value: bytes | None = b"v",
    headers: list[tuple[bytes, bytes | None]] = [],  # noqa: B006 - never mutated
    raw_body: bytes | None = None,
    length_adjust: int = 0,
) -> bytes:
    """One encoded record (``raw_body`` replaces the body fields when given)."""
    if raw_body is None:
        body = b"\x00" + zz(ts_delta) + zz(offset_delta)
        body += zz(-1) if key is None else zz(len(key)) + key
        body += zz(-1) if value is None else zz(len(value)) + value
        body += zz(len(headers))
        for header_key, header_value in headers:
            body += zz(len(header_key)) + header_key
            body += zz(-1) if header_value is None else zz(len(header_value)) + header_value
    else:
        body = raw_body
    return zz(len(body) + length_adjust) + body


def batch_of(records: bytes, count: int, *, attributes: int = 0, base_offset: int = 100) -> bytes:
    return assemble_batch(
        records,
        record_count=count,
        attributes=attributes,
        last_offset_delta=max(count - 1, 0),
        base_timestamp=1000,
        max_timestamp=2000,
        base_offset=base_offset,
    )


def decode_all(
    kernel: RecordDecoder, buf: bytes, *, check_crcs: bool = True
) -> list[tuple[RecordBatchView, list[Record]]]:
    return [
        (batch, batch.records())
        for batch in kernel.iter_batches(memoryview(buf), check_crcs=check_crcs, topic="orders", partition=7)
    ]


def simple_batch(base_offset: int = 0, n: int = 3, codec: int = 0) -> bytes:
    builder = BatchBuilder(codec, base_offset=base_offset)
    for i in range(n):
        builder.append(1000 + i, b"key%d" % i, b"value%d" % i * 10, [("h", b"%d" % i)])
    return builder.build()


# --- walking and truncation ------------------------------------------------------------------


def test_walks_consecutive_batches(kernel: RecordDecoder) -> None:
    buf = simple_batch(0, 3) + simple_batch(3, 2, codec=3) + simple_batch(5, 4, codec=1)
    decoded = decode_all(kernel, buf)
    assert [b.base_offset for b, _ in decoded] == [0, 3, 5]
    assert [r.offset for _, records in decoded for r in records] == list(range(9))
    assert sum(b.size_in_bytes for b, _ in decoded) == len(buf)
    assert [b.next_offset for b, _ in decoded] == [3, 5, 9]


def test_accepts_bytes_and_bytearray_views(kernel: RecordDecoder) -> None:
    buf = simple_batch()
    for candidate in (buf, bytearray(buf), memoryview(bytearray(buf))):
        (batch,) = kernel.iter_batches(candidate)  # type: ignore[arg-type]
        assert len(batch.records()) == 3


def test_accepts_odd_views(kernel: RecordDecoder) -> None:
    buf = simple_batch()
    doubled = bytes(b for byte in buf for b in (byte, 0))
    strided = memoryview(doubled)[::2]
    assert not strided.c_contiguous
    (batch,) = kernel.iter_batches(strided)
    assert len(batch.records()) == 3
    padded = buf + bytes(-len(buf) % 4)
    (batch,) = kernel.iter_batches(memoryview(padded).cast("I"))  # trailing zero padding is < 12 bytes
    assert len(batch.records()) == 3


def test_empty_and_tiny_buffers(kernel: RecordDecoder) -> None:
    assert decode_all(kernel, b"") == []
    for size in range(1, 12):
        assert decode_all(kernel, bytes(size)) == []
        assert kernel.first_batch_size(memoryview(bytes(size))) is None
    assert kernel.first_batch_size(memoryview(b"")) is None


def test_truncated_trailing_batch_is_ignored(kernel: RecordDecoder) -> None:
    first = simple_batch(0, 3)
    second = simple_batch(3, 5, codec=4)
    for cut in range(len(second)):
        decoded = decode_all(kernel, first + second[:cut])
        assert [b.base_offset for b, _ in decoded] == [0], cut


def test_truncated_first_batch_yields_nothing_and_reports_size(kernel: RecordDecoder) -> None:
    batch = simple_batch(0, 50)
    for cut in range(12, len(batch)):
        view = memoryview(batch[:cut])
        assert list(kernel.iter_batches(view)) == []
        assert kernel.first_batch_size(view) == len(batch)
    assert kernel.first_batch_size(memoryview(batch)) == len(batch)


def test_legacy_magic_is_unsupported(kernel: RecordDecoder) -> None:
    buf = bytearray(simple_batch(base_offset=55))
    for magic in (0, 1):
        buf[16] = magic
        with pytest.raises(CorruptRecordError, match="legacy message format") as info:
            decode_all(kernel, bytes(buf))
        assert (info.value.topic, info.value.partition, info.value.offset) == ("orders", 7, 55)


def test_legacy_magic_small_length(kernel: RecordDecoder) -> None:
    # a v0 message set entry: offset, size 14+, crc, magic 0 ... shorter than a v2 header
    legacy = struct.pack(">qiIbb", 0, 14 + 6, 0, 0, 0) + b"\xff\xff\xff\xff" + b"\x00\x00\x00\x01v" + b"\0"
    with pytest.raises(CorruptRecordError, match="legacy"):
        decode_all(kernel, legacy)


@pytest.mark.parametrize("magic", [3, 4, 0x7F, 0x80, 0xFF])
def test_unknown_magic(kernel: RecordDecoder, magic: int) -> None:
    buf = bytearray(simple_batch())
    buf[16] = magic
    with pytest.raises(CorruptRecordError, match="magic"):
        decode_all(kernel, bytes(buf))


def test_magic_checked_in_truncated_trailing_batch(kernel: RecordDecoder) -> None:
    second = bytearray(simple_batch(3))
    second[16] = 1
    with pytest.raises(CorruptRecordError, match="legacy"):
        decode_all(kernel, simple_batch(0) + bytes(second[:30]))


@pytest.mark.parametrize("length", [-(2**31), -1, 0, 1, 48])
def test_batch_length_too_small(kernel: RecordDecoder, length: int) -> None:
    buf = bytearray(simple_batch())
    struct.pack_into(">i", buf, 8, length)
    with pytest.raises(CorruptRecordError, match="batch length"):
        decode_all(kernel, bytes(buf))


# --- header fields ----------------------------------------------------------------------------


def test_header_fields(kernel: RecordDecoder) -> None:
    builder = BatchBuilder(
        4,
        base_offset=1 << 40,
        producer_id=123456789,
        producer_epoch=7,
        base_sequence=99,
        is_transactional=True,
        partition_leader_epoch=12,
    )
    builder.append(5000, b"a", b"b")
    builder.append(4000, None, None)
    builder.append(9000, b"c", None)
    (batch,) = kernel.iter_batches(memoryview(builder.build()))
    assert batch.base_offset == 1 << 40
    assert batch.partition_leader_epoch == 12
    assert batch.compression == 4
    assert batch.is_transactional and not batch.is_control
    assert batch.timestamp_type == 0
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (123456789, 7, 99)
    assert (batch.base_timestamp, batch.max_timestamp) == (5000, 9000)
    assert batch.last_offset_delta == 2 and batch.last_offset == (1 << 40) + 2
    assert batch.record_count == 3
    assert [(r.timestamp, r.key, r.value) for r in batch.records()] == [
        (5000, b"a", b"b"),
        (4000, None, None),
        (9000, b"c", None),
    ]
    assert "RecordBatch(" in repr(batch) and bytes(batch.raw()) == builder.build()


def test_log_append_time_uses_max_timestamp(kernel: RecordDecoder) -> None:
    builder = BatchBuilder(1, timestamp_type=1)
    for ts in (100, 300, 200):
        builder.append(ts, None, b"x")
    (batch,) = kernel.iter_batches(memoryview(builder.build()))
    assert batch.timestamp_type == 1
    assert [r.timestamp for r in batch.records()] == [300, 300, 300]


def test_attribute_bits(kernel: RecordDecoder) -> None:
    records = record_bytes()
    cases: list[tuple[int, str, object]] = [
        (0x08, "timestamp_type", 1),
        (0x10, "is_transactional", True),
        (0x20, "is_control", True),
        (0x40, "has_delete_horizon", True),
    ]
    for attributes, name, value in cases:
        (batch,) = kernel.iter_batches(memoryview(batch_of(records, 1, attributes=attributes)))
        assert getattr(batch, name) == value
        assert batch.attributes == attributes


def test_empty_batch(kernel: RecordDecoder) -> None:
    (batch,) = kernel.iter_batches(memoryview(BatchBuilder(3).build()))
    assert batch.record_count == 0
    assert batch.records() == []


def test_record_varints_of_every_width(kernel: RecordDecoder) -> None:
    builder = BatchBuilder(0, base_offset=0)
    base = 1_600_000_000_000
    deltas = [0, 1, -1, 63, -64, 64, 8191, -8192, 8192, 1 << 20, -(1 << 35), 1 << 50]
    for delta in deltas:
        builder.append(base + delta, b"k" * 70, b"v" * 9000, [("h" * 70, b"x" * 300)] * 3)
    (batch,) = kernel.iter_batches(memoryview(builder.build()))
    records = batch.records()
    assert [r.timestamp - base for r in records] == deltas
    assert all(r.key == b"k" * 70 and r.value == b"v" * 9000 for r in records)
    assert all(r.headers == [("h" * 70, b"x" * 300)] * 3 for r in records)


def test_large_offset_delta(kernel: RecordDecoder) -> None:
    records = record_bytes(offset_delta=1 << 31) + record_bytes(offset_delta=(1 << 40) + 1)
    (batch,) = kernel.iter_batches(memoryview(batch_of(records, 2, base_offset=5)))
    assert [r.offset for r in batch.records()] == [5 + (1 << 31), 6 + (1 << 40)]


def test_unicode_header_keys_and_null_values(kernel: RecordDecoder) -> None:
    builder = BatchBuilder()
    builder.append(1, b"k", b"v", [("ключ", b"1"), ("🔑", None), ("", b"")])
    (batch,) = kernel.iter_batches(memoryview(builder.build()))
    assert batch.records()[0].headers == [("ключ", b"1"), ("🔑", None), ("", b"")]


# --- control batches --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [CONTROL_ABORT, CONTROL_COMMIT])
def test_control_batches(kernel: RecordDecoder, kind: int) -> None:
    raw = build_control_batch(kind, producer_id=42, producer_epoch=3, timestamp_ms=777, base_offset=10)
    (batch,) = kernel.iter_batches(memoryview(raw))
    assert batch.is_control and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch) == (42, 3)
    assert batch.control_type() == kind
    (record,) = batch.records()
    assert record.offset == 10 and record.timestamp == 777
    assert kernel.control_type(record) == kind
    assert record.value == struct.pack(">hi", 0, 0)


def test_control_type_errors(kernel: RecordDecoder) -> None:
    (plain,) = kernel.iter_batches(memoryview(simple_batch()))
    with pytest.raises(IllegalStateError):
        plain.control_type()
    with pytest.raises(RecordFormatError):
        kernel.control_type(Record(0, 0, None, None, []))
    with pytest.raises(RecordFormatError):
        kernel.control_type(Record(0, 0, b"\x00\x00\x01", None, []))
    with pytest.raises(RecordFormatError):
        kernel.control_type(Record(0, 0, b"\xff\xff\x00\x01", None, []))
    assert kernel.control_type(Record(0, 0, b"\x00\x00\x00\x07", None, [])) == 7  # unknown type
    bad_key = record_bytes(key=b"\x00")
    (batch,) = kernel.iter_batches(memoryview(batch_of(bad_key, 1, attributes=0x30)))
    with pytest.raises(CorruptRecordError, match="control record key"):
        batch.control_type()
    (empty,) = kernel.iter_batches(memoryview(batch_of(b"", 0, attributes=0x30)))
    with pytest.raises(CorruptRecordError, match="no records"):
        empty.control_type()


# --- corrupt batches and records ---------------------------------------------------------------


def test_crc_mismatch(kernel: RecordDecoder) -> None:
    buf = bytearray(simple_batch(base_offset=77))
    buf[-1] ^= 0x01  # last byte of the last header value
    with pytest.raises(CorruptRecordError, match="CRC") as info:
        decode_all(kernel, bytes(buf))
    assert (info.value.topic, info.value.partition, info.value.offset) == ("orders", 7, 77)
    assert "orders-7 at offset 77" in str(info.value)
    ((_, records),) = decode_all(kernel, bytes(buf), check_crcs=False)
    assert records[-1].headers == [("h", b"3")]


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_codec(kernel: RecordDecoder, codec: int) -> None:
    with pytest.raises(CorruptRecordError, match="unknown compression codec"):
        decode_all(kernel, batch_of(record_bytes(), 1, attributes=codec))


def test_negative_record_count(kernel: RecordDecoder) -> None:
    with pytest.raises(CorruptRecordError, match="negative record count"):
        decode_all(kernel, batch_of(record_bytes(), -1))


def test_record_count_larger_than_data(kernel: RecordDecoder) -> None:
    with pytest.raises(CorruptRecordError):
        decode_all(kernel, batch_of(record_bytes() * 2, 3))
    with pytest.raises(CorruptRecordError, match="cannot fit"):
        decode_all(kernel, batch_of(record_bytes(), 2**31 - 1))


def test_trailing_data_after_records(kernel: RecordDecoder) -> None:
    with pytest.raises(CorruptRecordError, match="trailing"):
        decode_all(kernel, batch_of(record_bytes() * 2, 1))
    with pytest.raises(CorruptRecordError, match="trailing"):
        decode_all(kernel, batch_of(record_bytes() + b"\x00", 1))


def test_decompression_failure(kernel: RecordDecoder) -> None:
    for codec in (1, 2, 3, 4):
        with pytest.raises(CorruptRecordError, match="offset 100") as info:
            decode_all(kernel, batch_of(b"definitely not compressed data", 1, attributes=codec))
        assert info.value.offset == 100


def test_compressed_records_structure_errors_name_the_codec(kernel: RecordDecoder) -> None:
    payload = compress(3, record_bytes() + b"junk")
    with pytest.raises(CorruptRecordError, match="lz4-compressed"):
        decode_all(kernel, batch_of(payload, 1, attributes=3))


@pytest.mark.parametrize(
    ("records", "count", "message"),
    [
        (record_bytes(key=None, raw_body=b"\x00\x00\x00" + zz(-2) + zz(0) + zz(0)), 1, "negative key length"),
        (record_bytes(raw_body=b"\x00\x00\x00" + zz(-1) + zz(-3) + zz(0)), 1, "negative value length"),
        (record_bytes(raw_body=b"\x00\x00\x00" + zz(-1) + zz(-1) + zz(1) + zz(-1) + zz(-1)), 1, "header key"),
        (
            record_bytes(raw_body=b"\x00\x00\x00" + zz(-1) + zz(-1) + zz(1) + zz(1) + b"h" + zz(-2)),
            1,
            "header value",
        ),
        (record_bytes(raw_body=b"\x00\x00\x00" + zz(-1) + zz(-1) + zz(-1)), 1, "header count"),
        (record_bytes(raw_body=b"\x00\x00\x00" + zz(-1) + zz(-1) + zz(100)), 1, "header count"),
        (
            record_bytes(raw_body=b"\x00" + b"\xff" * 11 + b"\x01" + zz(-1) + zz(-1) + zz(0)),
            1,
            "longer than 10",
        ),
        (zz(5) + b"\x00" * 6, 1, "record length"),
        (zz(-1) + b"\x00" * 10, 1, "record length"),
        (record_bytes(length_adjust=1) + b"\x00", 1, "fields end elsewhere"),
        (record_bytes(length_adjust=-1) + b"\x00", 1, "fields end elsewhere"),
        (record_bytes(length_adjust=50), 1, "record length"),
        (record_bytes(key=b"abc", raw_body=b"\x00\x00\x00" + zz(30) + b"abc" + zz(-1) + zz(0)), 1, None),
        (record_bytes(headers=[(b"\xff\xfe", b"v")]), 1, "UTF-8"),
        (record_bytes()[:-1], 1, None),
    ],
)
def test_malformed_records(kernel: RecordDecoder, records: bytes, count: int, message: str | None) -> None:
    buf = batch_of(records, count)
    with pytest.raises(CorruptRecordError, match=message) as info:
        decode_all(kernel, buf)
    assert info.value.offset == 100


def test_hand_encoded_record_helper_is_valid(kernel: RecordDecoder) -> None:
    ((_, decoded),) = decode_all(kernel, batch_of(record_bytes(headers=[(b"h", None)]), 1))
    assert decoded == [Record(100, 1000, b"k", b"v", [("h", None)])]


def test_varint_running_past_the_end(kernel: RecordDecoder) -> None:
    with pytest.raises(CorruptRecordError, match="past the end"):
        decode_all(kernel, batch_of(b"\x80\x80\x80\x80\x80\x80\x80", 1))


# --- the kernel on its own ----------------------------------------------------------------------


def test_decode_records_kernel(kernel: RecordDecoder) -> None:
    data = b"xx" + record_bytes(offset_delta=1, ts_delta=-5) + b"yy"
    assert kernel.decode_records(data, 2, len(data) - 2, 1, 10, 1000, None) == [
        Record(11, 995, b"k", b"v", [])
    ]
    assert kernel.decode_records(data, 2, len(data) - 2, 1, 10, 1000, 42)[0].timestamp == 42
    assert kernel.decode_records(b"", 0, 0, 0, 0, 0, None) == []
    for args in [(-1, len(data)), (3, 2), (0, len(data) + 1)]:
        with pytest.raises(RecordFormatError, match="outside"):
            kernel.decode_records(data, args[0], args[1], 1, 0, 0, None)
    with pytest.raises(RecordFormatError, match="negative record count"):
        kernel.decode_records(data, 2, len(data) - 2, -1, 0, 0, None)
