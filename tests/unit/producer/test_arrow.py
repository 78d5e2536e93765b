"""send_arrow's view of a pyarrow RecordBatch: column types, slices, headers, and the errors; and the
ImportError naming the extra when pyarrow is missing."""

from __future__ import annotations

import sys

import pytest

from kaflux import Producer
from kaflux.producer.arrow import arrow_columns, require_pyarrow
from kaflux.records import assemble_batch, iter_batches, kernels

pa = pytest.importorskip("pyarrow")

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def rows_of(
    batch: object, partitions: int = 1
) -> list[tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]]:
    """Encode ``batch`` with the encoder and decode it: (partition, timestamp, key, value, headers)."""
    columns = arrow_columns(pa, batch)
    chunks, _ = kernels.encoder().encode_columns(
        columns.num_rows,
        partitions,
        0,
        1 << 20,
        42,
        columns.keys,
        columns.values,
        columns.partitions,
        columns.timestamps,
        columns.headers,
    )
    out = []
    for chunk in chunks:
        data = assemble_batch(
            chunk.records,
            record_count=chunk.record_count,
            attributes=0,
            last_offset_delta=chunk.record_count - 1,
            base_timestamp=chunk.base_timestamp,
            max_timestamp=chunk.max_timestamp,
        )
        for parsed in iter_batches(memoryview(data)):
            out += [(chunk.partition, r.timestamp, r.key, r.value, list(r.headers)) for r in parsed.records()]
    return out


@pytest.mark.parametrize("kind", [pa.binary(), pa.string(), pa.large_binary(), pa.large_string()])
def test_binary_and_string_columns_are_sent_as_bytes(kind: object) -> None:
    values = ["a", None, "ççç"]
    raw = [v.encode() if v is not None else None for v in values]
    column = pa.array(raw if kind in (pa.binary(), pa.large_binary()) else values, kind)
    batch = pa.RecordBatch.from_arrays([column, column], names=["key", "value"])
    assert [(k, v) for _, _, k, v, _ in rows_of(batch)] == [(r, r) for r in raw]


def test_a_sliced_batch_sends_only_its_rows() -> None:
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array([b"v%d" % i for i in range(10)]),
            pa.array([None, 5, None, 7, None, 9, None, 1, None, 0], pa.int64()),
        ],
        names=["value", "timestamp"],
    ).slice(3, 4)
    assert [(ts, v) for _, ts, _, v, _ in rows_of(batch)] == [
        (7, b"v3"),
        (42, b"v4"),
        (9, b"v5"),
        (42, b"v6"),
    ]


def test_timestamps_in_other_units_become_milliseconds() -> None:
    batch = pa.RecordBatch.from_arrays(
        [pa.array([b"v"]), pa.array([1_700_000_000_123_456], pa.timestamp("us"))],
        names=["value", "timestamp"],
    )
    assert [ts for _, ts, _, _, _ in rows_of(batch)] == [1_700_000_000_123]


def test_partitions_and_headers_columns() -> None:
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array([b"a", b"b", b"c"]),
            pa.array([2, None, 0], pa.int64()),
            pa.array([[{"key": "h", "value": b"1"}, {"key": "n", "value": None}], None, []], HEADERS),
        ],
        names=["value", "partition", "headers"],
    )
    rows = sorted(rows_of(batch, partitions=3), key=lambda r: r[3] or b"")
    assert [(p, v, h) for p, _, _, v, h in rows] == [
        (2, b"a", [("h", b"1"), ("n", None)]),
        (0, b"b", []),
        (0, b"c", []),
    ]


@pytest.mark.parametrize(
    ("arrays", "names", "error", "message"),
    [
        ([pa.array([b"k"])], ["key"], ValueError, "needs a 'value' column"),
        ([pa.array([1])], ["value"], TypeError, "must be binary or string"),
        ([pa.array([b"v"]), pa.array(["x"])], ["value", "partition"], TypeError, "integer column"),
        (
            [pa.array([b"v"]), pa.array([2**40], pa.int64())],
            ["value", "partition"],
            pa.ArrowInvalid,
            "not in range",
        ),
        ([pa.array([b"v"]), pa.array([["x"]])], ["value", "headers"], TypeError, "list<struct"),
    ],
)
def test_columns_of_the_wrong_type_are_refused(
    arrays: list[object], names: list[str], error: type[BaseException], message: str
) -> None:
    with pytest.raises(error, match=message):
        arrow_columns(pa, pa.RecordBatch.from_arrays(arrays, names=names))


def test_without_pyarrow_send_arrow_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(ImportError, match=r"kaflux\[arrow\]"):
        require_pyarrow()
    producer = Producer({"bootstrap.servers": "127.0.0.1:1"})
    try:
        with pytest.raises(ImportError, match=r"pip install 'kaflux\[arrow\]'"):
            producer.send_arrow("t", object())
    finally:
        producer.close(0)
