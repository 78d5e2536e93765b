"""Record batches and their columns for the record-kernel tests: hypothesis strategies for whole
batches, a builder for them, and a reader of :class:`~kaflux.records.RecordColumns` buffers that
checks their Arrow layout independently of both column builders. [test]"""

from __future__ import annotations

import itertools
from array import array
from typing import Any

from hypothesis import strategies as st

from kaflux.records import BatchBuilder, RecordColumns

Row = tuple[str, int, int, int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]


def rows_of(columns: RecordColumns) -> list[Row]:
    """Read the Arrow-layout buffers back (independently of both builders), checking sizes."""
    n = columns.num_rows
    h = columns.header_count

    def ints(code: str, buf: bytearray, count: int) -> array[int]:
        values = array(code)
        values.frombytes(bytes(buf))
        assert len(values) == count, (code, len(values), count)
        return values

    def valid(bitmap: bytearray | None, nulls: int, count: int) -> list[bool]:
        if bitmap is None:
            assert nulls == 0
            return [True] * count
        assert len(bitmap) == (count + 7) // 8
        if count & 7:
            assert bitmap[-1] >> (count & 7) == 0, "bits past the last row must be clear"
        flags = [bool(bitmap[i >> 3] >> (i & 7) & 1) for i in range(count)]
        assert flags.count(False) == nulls > 0
        return flags

    def binary(
        bitmap: bytearray | None, nulls: int, offsets_buf: bytearray, data: bytearray, count: int
    ) -> list[bytes | None]:
        offsets = ints("i", offsets_buf, count + 1)
        assert offsets[0] == 0 and offsets[-1] == len(data)
        assert all(a <= b for a, b in itertools.pairwise(offsets))
        flags = valid(bitmap, nulls, count)
        out: list[bytes | None] = []
        for i in range(count):
            if flags[i]:
                out.append(bytes(data[offsets[i] : offsets[i + 1]]))
            else:
                assert offsets[i] == offsets[i + 1]
                out.append(None)
        return out

    topics = binary(None, 0, columns.topic_offsets, columns.topic_data, n)
    keys = binary(columns.key_validity, columns.key_null_count, columns.key_offsets, columns.key_data, n)
    values = binary(
        columns.value_validity, columns.value_null_count, columns.value_offsets, columns.value_data, n
    )
    header_keys = binary(None, 0, columns.header_key_offsets, columns.header_key_data, h)
    header_values = binary(
        columns.header_value_validity,
        columns.header_value_null_count,
        columns.header_value_offsets,
        columns.header_value_data,
        h,
    )
    header_offsets = ints("i", columns.header_offsets, n + 1)
    assert header_offsets[0] == 0 and header_offsets[-1] == h
    offsets = ints("q", columns.offset, n)
    timestamps = ints("q", columns.timestamp, n)
    types = ints("i", columns.timestamp_type, n)
    partitions = ints("i", columns.partition, n)
    rows: list[Row] = []
    for i in range(n):
        topic = topics[i]
        assert topic is not None
        headers = [
            ((header_keys[j] or b"").decode(), header_values[j])
            for j in range(header_offsets[i], header_offsets[i + 1])
        ]
        rows.append(
            (topic.decode(), partitions[i], offsets[i], timestamps[i], types[i], keys[i], values[i], headers)
        )
    return rows


maybe_bytes = st.none() | st.binary(max_size=60)
record_st = st.tuples(
    st.integers(0, 2**50),
    maybe_bytes,
    maybe_bytes,
    st.lists(st.tuples(st.sampled_from(["h", "", "ключ", "🔑", "trace-id"]), maybe_bytes), max_size=3),
)
batch_st = st.tuples(
    st.integers(0, 4),  # codec
    st.integers(0, 1),  # timestamp type
    st.integers(0, 2**62),  # base offset
    st.lists(record_st, max_size=12),
)


def build(codec: int, timestamp_type: int, base_offset: int, records: list[Any]) -> bytes:
    builder = BatchBuilder(codec, base_offset=base_offset, timestamp_type=timestamp_type)
    for ts, key, value, headers in records:
        builder.append(ts, key, value, headers)
    return builder.build()
