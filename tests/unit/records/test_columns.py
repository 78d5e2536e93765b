"""Columnar decoding (``ColumnBuilder``) against the object decoder (``RecordBatch.records()``),
for both kernels; the compiled builder's buffers byte-for-byte against the pure builder's."""

from __future__ import annotations

import gc
import random
import struct
import sys
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kaflux.errors import CorruptRecordError
from kaflux.records import (
    Record,
    _pure,
    assemble_batch,
    build_control_batch,
)
from kaflux.records.interface import RecordBatchView, RecordDecoder

from support.record_columns import Row, batch_st, build, rows_of


def expected_rows(batch: RecordBatchView, topic: str, partition: int, records: list[Record]) -> list[Row]:
    return [(topic, partition, r[0], r[1], batch.timestamp_type, r[2], r[3], r[4]) for r in records]


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(batches=st.lists(batch_st, min_size=1, max_size=4), partitions=st.lists(st.integers(0, 2**31 - 1)))
def test_columns_match_records(kernel: RecordDecoder, batches: list[Any], partitions: list[int]) -> None:
    builder = kernel.ColumnBuilder()
    expected: list[Row] = []
    for i, spec in enumerate(batches):
        topic = f"topic-{i % 2}"
        partition = partitions[i] if i < len(partitions) else i
        (batch,) = kernel.iter_batches(memoryview(build(*spec)))
        records = batch.records()
        result = builder.append_batch(batch, topic, partition)
        last = records[-1].offset if records else None
        assert result == (len(records), 0, last)
        expected += expected_rows(batch, topic, partition, records)
    assert len(builder) == len(expected)
    columns = builder.finish()
    assert rows_of(columns) == expected
    assert len(builder) == 0 and builder.finish().num_rows == 0  # finish() starts over


def test_empty_builder(kernel: RecordDecoder) -> None:
    columns = kernel.ColumnBuilder().finish()
    assert columns.num_rows == 0 and columns.header_count == 0
    assert rows_of(columns) == []
    assert bytes(columns.key_offsets) == bytes(4) and columns.key_validity is None


def test_selection(kernel: RecordDecoder) -> None:
    raw = build(0, 0, 100, [(i, b"k%d" % i, b"v", []) for i in range(10)])
    (batch,) = kernel.iter_batches(memoryview(raw))
    cases = [
        ((), (10, 0, 109)),
        ((103,), (7, 0, 109)),
        ((103, 2), (2, 5, 104)),
        ((0, 0), (0, 10, None)),
        ((110,), (0, 0, None)),
        ((109, 5), (1, 0, 109)),
    ]
    for args, result in cases:
        builder = kernel.ColumnBuilder()
        assert builder.append_batch(batch, "t", 0, *args) == result
        offsets = [row[2] for row in rows_of(builder.finish())]
        first = args[0] if args else 100
        assert offsets == list(range(max(first, 100), max(first, 100) + result[0]))


def test_selection_skips_only_leading_records(kernel: RecordDecoder) -> None:
    """As the consumer does after a seek: offsets below min_offset after the first record at
    or above it are kept (only corrupt or compacted-and-odd data has them)."""
    body = b""
    for delta in (0, 5, 2, 7):
        record = b"\x00\x00" + bytes([delta * 2]) + b"\x01\x01\x00"
        body += bytes([len(record) * 2]) + record
    raw = assemble_batch(
        body, record_count=4, attributes=0, last_offset_delta=7, base_timestamp=0, max_timestamp=0
    )
    (batch,) = kernel.iter_batches(memoryview(raw))
    builder = kernel.ColumnBuilder()
    assert builder.append_batch(batch, "t", 0, 3) == (3, 0, 7)
    assert [row[2] for row in rows_of(builder.finish())] == [5, 2, 7]


def test_append_is_atomic_and_errors_match_records(kernel: RecordDecoder) -> None:
    good = build(3, 0, 0, [(1, b"k", b"v", [("h", b"x")])] * 3)
    bad = bytearray(build(0, 0, 50, [(1, None, b"value", [("h", None)])] * 4))
    bad[-3] = 0x7F  # the last record's header value length: runs past the end
    builder = kernel.ColumnBuilder()
    (good_batch,) = kernel.iter_batches(memoryview(good))
    builder.append_batch(good_batch, "t", 1)
    (bad_batch,) = kernel.iter_batches(memoryview(bytes(bad)), check_crcs=False, topic="t", partition=1)
    with pytest.raises(CorruptRecordError) as from_records:
        bad_batch.records()
    with pytest.raises(CorruptRecordError) as from_columns:
        builder.append_batch(bad_batch, "t", 1)
    assert str(from_columns.value) == str(from_records.value)
    assert len(builder) == 3
    assert rows_of(builder.finish()) == [("t", 1, i, 1, 0, b"k", b"v", [("h", b"x")]) for i in range(3)]


def test_offsets_outside_int64(kernel: RecordDecoder) -> None:
    raw = bytearray(build(0, 0, 0, [(1, b"k", b"v", [])] * 3))
    struct.pack_into(">q", raw, 0, 2**63 - 2)  # base offset (outside the CRC)
    (batch,) = kernel.iter_batches(memoryview(bytes(raw)), topic="t", partition=0)
    assert [r.offset for r in batch.records()] == [2**63 - 2, 2**63 - 1, 2**63]
    builder = kernel.ColumnBuilder()
    with pytest.raises(CorruptRecordError, match="record at offset 9223372036854775808 has an offset"):
        builder.append_batch(batch, "t", 0)
    assert len(builder) == 0


def test_log_append_time_with_overflowing_timestamp_delta(kernel: RecordDecoder) -> None:
    """A 10-byte timestamp delta beyond 64 bits is ignored under LOG_APPEND_TIME: the record
    is valid (the compiled kernel takes its slow path for it)."""
    body = b"\x00" + b"\xfe" * 9 + b"\x03" + b"\x00" + b"\x02k" + b"\x02v" + b"\x00"
    record = bytes([len(body) * 2]) + body
    raw = assemble_batch(
        record, record_count=1, attributes=0x08, last_offset_delta=0, base_timestamp=5, max_timestamp=777
    )
    (batch,) = kernel.iter_batches(memoryview(raw))
    assert batch.records() == [Record(0, 777, b"k", b"v", [])]
    builder = kernel.ColumnBuilder()
    assert builder.append_batch(batch, "t", 2) == (1, 0, 0)
    assert rows_of(builder.finish()) == [("t", 2, 0, 777, 1, b"k", b"v", [])]


def test_control_batches_decode_like_others(kernel: RecordDecoder) -> None:
    (batch,) = kernel.iter_batches(
        memoryview(build_control_batch(1, producer_id=3, producer_epoch=0, timestamp_ms=9))
    )
    builder = kernel.ColumnBuilder()
    assert builder.append_batch(batch, "t", 0) == (1, 0, 0)
    assert rows_of(builder.finish())[0][5] == b"\x00\x00\x00\x01"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((2**31, 0, 1), "partition 2147483648 is outside the int32 range"),
        ((0, 2**63, 1), "min_offset 9223372036854775808 is outside the int64 range"),
        ((0, 0, -1), "max_records must not be negative, got -1"),
    ],
)
def test_argument_errors(kernel: RecordDecoder, args: tuple[int, int, int], message: str) -> None:
    (batch,) = kernel.iter_batches(memoryview(build(0, 0, 0, [(1, b"k", b"v", [])])))
    with pytest.raises(ValueError, match=message):
        kernel.ColumnBuilder().append_batch(batch, "t", *args)


def test_compiled_columns_equal_pure_columns(compiled: ModuleType) -> None:
    rng = random.Random(7)
    raws = []
    for i in range(60):
        records = [
            (
                rng.randint(0, 2**45),
                None if rng.random() < 0.3 else rng.randbytes(rng.randint(0, 20)),
                None if rng.random() < 0.2 else rng.randbytes(rng.randint(0, 200)),
                [
                    (f"k{rng.randint(0, 3)}", None if rng.random() < 0.3 else b"v")
                    for _ in range(rng.randint(0, 3))
                ],
            )
            for _ in range(rng.randint(0, 30))
        ]
        raws.append(build(i % 5, i % 2, i * 1000, records))
    buf = memoryview(b"".join(raws))
    results = []
    for kernel in (compiled, _pure):
        builder = kernel.ColumnBuilder()
        appended = [
            builder.append_batch(batch, "topic", n % 7, rng_min, rng_max)
            for n, (batch, rng_min, rng_max) in enumerate(
                zip(kernel.iter_batches(buf), [0, 5, 10**9] * 20, [sys.maxsize, 3, 1] * 20, strict=False)
            )
        ]
        results.append((appended, len(builder), builder.nbytes, builder.finish()))
    assert results[0] == results[1]


def test_to_arrow_wraps_the_buffers(kernel: RecordDecoder) -> None:
    pa = pytest.importorskip("pyarrow")
    raw = build(3, 0, 10, [(1000, b"k", b"v1", [("h", b"x"), ("g", None)]), (2000, None, None, [])])
    (batch,) = kernel.iter_batches(memoryview(raw))
    builder = kernel.ColumnBuilder()
    builder.append_batch(batch, "orders", 4)
    columns = builder.finish()
    table = kernel.to_arrow(columns)
    assert table.schema == pa.schema(
        [
            ("key", pa.binary()),
            ("value", pa.binary()),
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            ("timestamp", pa.timestamp("ms", tz="UTC")),
            ("timestamp_type", pa.int32()),
            (
                "headers",
                pa.list_(pa.struct([pa.field("key", pa.string(), nullable=False), ("value", pa.binary())])),
            ),
        ]
    )
    table.validate(full=True)
    rows = table.to_pylist()
    assert [(r["key"], r["value"], r["topic"], r["partition"], r["offset"]) for r in rows] == [
        (b"k", b"v1", "orders", 4, 10),
        (None, None, "orders", 4, 11),
    ]
    assert [int(r["timestamp"].timestamp() * 1000) for r in rows] == [1000, 2000]
    assert rows[0]["headers"] == [{"key": "h", "value": b"x"}, {"key": "g", "value": None}]
    assert rows[1]["headers"] == []
    # zero-copy: the Arrow value buffer is the builder's bytearray
    value_data = table.column("value").buffers()[2]
    assert value_data.address == pa.py_buffer(columns.value_data).address
    assert table.equals(_pure.to_arrow(columns)) and table.schema == _pure.to_arrow(columns).schema


def test_to_arrow_keeps_the_buffers_alive_and_fixed_in_size(kernel: RecordDecoder) -> None:
    pytest.importorskip("pyarrow")
    (batch,) = kernel.iter_batches(memoryview(build(0, 0, 0, [(1, b"k", b"v", [("h", b"x")])] * 5)))
    builder = kernel.ColumnBuilder()
    builder.append_batch(batch, "t", 0)
    columns = builder.finish()
    table = kernel.to_arrow(columns)
    key_data = columns.key_data
    del columns, builder
    gc.collect()
    assert table.column("key").to_pylist() == [b"k"] * 5  # still there
    with pytest.raises(BufferError):
        key_data.extend(b"more")  # pyarrow still reads it
    del table
    gc.collect()
    key_data.extend(b"more")


@pytest.mark.parametrize("rows", [0, 1, 7, 9, 64])
def test_compiled_to_arrow_equals_pure_to_arrow(compiled: ModuleType, rows: int) -> None:
    pytest.importorskip("pyarrow")
    records = [
        (i, None if i % 3 == 0 else b"k%d" % i, None if i % 4 == 1 else b"v" * i, [("h", None)] * (i % 3))
        for i in range(rows)
    ]
    (batch,) = compiled.iter_batches(memoryview(build(0, 0, 0, records)))
    builder = compiled.ColumnBuilder()
    builder.append_batch(batch, "t", 0)
    columns = builder.finish()
    got, want = compiled.to_arrow(columns), _pure.to_arrow(columns)
    got.validate(full=True)
    assert got.equals(want) and got.schema == want.schema
    assert got.column("key").null_count == want.column("key").null_count


def test_compiled_to_arrow_refuses_columns_shorter_than_their_rows(compiled: ModuleType) -> None:
    pytest.importorskip("pyarrow")
    (batch,) = compiled.iter_batches(memoryview(build(0, 0, 0, [(1, b"k", b"v", [])] * 3)))
    builder = compiled.ColumnBuilder()
    builder.append_batch(batch, "t", 0)
    columns = builder.finish()
    with pytest.raises(ValueError, match=r"RecordColumns\.offset holds 24 bytes, fewer than the 32"):
        compiled.to_arrow(columns._replace(num_rows=4))
    with pytest.raises(ValueError, match=r"RecordColumns\.value_offsets ends at 3, outside its 2 bytes"):
        compiled.to_arrow(columns._replace(value_data=bytearray(b"vv")))
    assert compiled.to_arrow(columns).num_rows == 3  # nothing stayed locked
