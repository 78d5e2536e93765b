"""The producer's record encoder: the compiled module and its pure-Python twin, one suite for both.

Each test runs against both implementations (``encoder`` fixture) and checks the bytes against
the record decoder; a property test checks that the two write identical bytes and chunks.
"""

from __future__ import annotations

import gc
import random
import sys
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kaflux.producer.partitioner import murmur2 as reference_murmur2
from kaflux.records import assemble_batch, encode, iter_batches, kernels
from kaflux.records.encode import BinaryColumn, HeadersColumn, IntColumn
from kaflux.structs import RecordMetadata

compiled: ModuleType | None
try:
    compiled = kernels.load_compiled_encoder()
except ImportError:  # pragma: no cover - a build without the extension (or a stale one)
    compiled = None

IMPLEMENTATIONS = [encode] + ([compiled] if compiled is not None else [])


@pytest.fixture(params=IMPLEMENTATIONS, ids=lambda m: m.KIND)
def encoder(request: pytest.FixtureRequest) -> ModuleType:
    module: ModuleType = request.param
    return module


def test_the_compiled_encoder_is_built_and_current() -> None:
    assert compiled is not None, "build it: python setup.py build_ext --inplace"
    assert kernels.encoder() is compiled


def decode(
    records: bytes, count: int, base_ts: int, max_ts: int
) -> list[tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]]:
    batch = assemble_batch(
        records,
        record_count=count,
        attributes=0,
        last_offset_delta=count - 1,
        base_timestamp=base_ts,
        max_timestamp=max_ts,
    )
    (parsed,) = list(iter_batches(memoryview(batch)))
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in parsed.records()]


def test_call_deliveries_calls_each_callback_in_order_with_its_metadata(encoder: ModuleType) -> None:
    calls: list[tuple[object, object]] = []
    raised: list[str] = []

    def record(metadata: RecordMetadata, error: object) -> None:
        calls.append((metadata, error))

    def fail(metadata: RecordMetadata, error: object) -> None:
        raise RuntimeError("callback bug")

    def on_error() -> None:
        raised.append(str(sys.exc_info()[1]))  # called within the except block

    callbacks = [0, 50, record, 1, 51, fail, 2, 52, record]
    encoder.call_deliveries(callbacks, RecordMetadata, "t", 3, 1_000, -1, on_error)
    assert calls == [(RecordMetadata("t", 3, 1_000, 50), None), (RecordMetadata("t", 3, 1_002, 52), None)]
    assert all(type(metadata) is RecordMetadata for metadata, _ in calls)
    assert raised == ["callback bug"]
    calls.clear()
    # offset unknown (acks=0, or a duplicate), and the broker's log-append time
    encoder.call_deliveries([4, 50, record], RecordMetadata, "t", 3, -1, 777, on_error)
    assert calls == [(RecordMetadata("t", 3, -1, 777), None)]


def test_call_deliveries_refuses_bad_input_before_calling_any(encoder: ModuleType) -> None:
    calls: list[object] = []
    with pytest.raises(ValueError, match="triples"):
        encoder.call_deliveries([0, 50, calls.append, 1], RecordMetadata, "t", 3, 0, -1, print)
    with pytest.raises(TypeError, match="NamedTuple of 4 fields"):
        encoder.call_deliveries([0, 50, calls.append], tuple, "t", 3, 0, -1, print)
    assert calls == []


def test_untrack_takes_an_object_out_of_the_cyclic_gc_when_compiled(encoder: ModuleType) -> None:
    class Plain:
        pass

    obj = Plain()
    encoder.untrack(obj)
    # the compiled twin untracks; Python cannot, so the pure twin leaves it tracked
    assert gc.is_tracked(obj) is (encoder.KIND == "pure")
    encoder.track(obj)
    encoder.track(obj)  # tracking a tracked object does nothing
    assert gc.is_tracked(obj)
    encoder.untrack(12)  # not a GC object: nothing to do
    encoder.track(12)
    assert not gc.is_tracked(12)


@pytest.mark.parametrize("key", [b"", b"a", b"ab", b"abc", b"abcd", b"00001234", bytes(range(256)) * 3])
def test_murmur2_is_kafkas(encoder: ModuleType, key: bytes) -> None:
    assert encoder.murmur2(key) == reference_murmur2(key)


def test_partition_for_key_matches_java_for_known_keys(encoder: ModuleType) -> None:
    # values from Java's BuiltInPartitioner (Utils.toPositive(murmur2(key)) % 3)
    assert [encoder.partition_for_key(k, 3) for k in (b"a", b"b", b"customer-7")] == [
        (reference_murmur2(k) & 0x7FFFFFFF) % 3 for k in (b"a", b"b", b"customer-7")
    ]
    with pytest.raises(ValueError, match="positive"):
        encoder.partition_for_key(b"a", 0)


def test_writer_records_decode_back(encoder: ModuleType) -> None:
    writer = encoder.RecordsWriter(1 << 20)
    assert writer.append(1_000, b"k", b"v", [("h", b"x"), ("n", None)]) > 0
    assert writer.append(990, None, None) > 0  # an earlier timestamp: a negative delta
    assert writer.append(1_500, b"", b"") > 0
    assert (writer.count, writer.base_timestamp, writer.max_timestamp) == (3, 1_000, 1_500)
    assert decode(writer.getvalue(), 3, 1_000, 1_500) == [
        (0, 1_000, b"k", b"v", [("h", b"x"), ("n", None)]),
        (1, 990, None, None, []),
        (2, 1_500, b"", b"", []),
    ]


def test_writer_refuses_a_record_past_its_limit_but_always_takes_the_first(encoder: ModuleType) -> None:
    writer = encoder.RecordsWriter(30)
    assert writer.append(0, None, b"x" * 100) > 30, "an empty writer takes any record"
    assert writer.append(0, None, b"y") == 0
    assert writer.count == 1
    small = encoder.RecordsWriter(30)
    sizes = [small.append(0, None, b"abc") for _ in range(4)]
    assert sizes == [10, 10, 10, 0] and small.size == 30


def test_writer_returns_exactly_the_bytes_added(encoder: ModuleType) -> None:
    writer = encoder.RecordsWriter(1 << 20)
    total = sum(writer.append(i, b"k%d" % i, b"v" * i, [("h", b"1")] * (i % 3)) for i in range(300))
    assert total == writer.size == len(writer.getvalue())


@pytest.mark.parametrize(
    ("key", "value", "headers", "message"),
    [
        ("s", b"v", None, "key must be bytes"),
        (None, bytearray(b"v"), None, "value must be bytes"),
        (None, b"v", [("h",)], "header must be"),
        (None, b"v", [(1, b"x")], "header key must be str"),
        (None, b"v", [("h", "x")], "header value must be bytes"),
    ],
)
def test_writer_type_errors_are_the_same(
    encoder: ModuleType, key: object, value: object, headers: object, message: str
) -> None:
    writer = encoder.RecordsWriter(100)
    with pytest.raises(TypeError, match=message):
        writer.append(0, key, value, headers)
    assert writer.count == 0 and writer.size == 0


# -- columns ---------------------------------------------------------------------------------


def binary_column(values: list[bytes | None], offset: int = 0) -> BinaryColumn:
    """An Arrow-layout binary column; ``offset`` leading junk rows emulate a sliced array."""
    rows = [b"junk"] * offset + values
    offsets = [0]
    data = bytearray()
    bits = bytearray((len(rows) + 7) // 8)
    for i, v in enumerate(rows):
        if v is not None:
            data += v
            bits[i >> 3] |= 1 << (i & 7)
        offsets.append(len(data))
    validity = None if all(v is not None for v in rows) else memoryview(bytes(bits))
    return BinaryColumn(
        validity,
        memoryview(bytearray(b"".join(o.to_bytes(4, "little") for o in offsets))).cast("i"),
        memoryview(bytes(data)),
        offset,
    )


def int_column(values: list[int | None], wide: bool) -> IntColumn:
    bits = bytearray((len(values) + 7) // 8)
    raw = bytearray()
    for i, v in enumerate(values):
        if v is not None:
            bits[i >> 3] |= 1 << (i & 7)
        raw += (v or 0).to_bytes(8 if wide else 4, "little", signed=True)
    validity = None if all(v is not None for v in values) else memoryview(bytes(bits))
    return IntColumn(validity, memoryview(raw).cast("q" if wide else "i"), 0)


def headers_column(rows: list[list[tuple[bytes, bytes | None]] | None]) -> HeadersColumn:
    offsets = [0]
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    bits = bytearray((len(rows) + 7) // 8)
    for i, row in enumerate(rows):
        if row is not None:
            bits[i >> 3] |= 1 << (i & 7)
            for k, v in row:
                keys.append(k)
                values.append(v)
        offsets.append(len(keys))
    validity = None if all(r is not None for r in rows) else memoryview(bytes(bits))
    raw = memoryview(bytearray(b"".join(o.to_bytes(4, "little") for o in offsets))).cast("i")
    return HeadersColumn(validity, raw, 0, binary_column(keys), binary_column(values))


def encode_rows(encoder: ModuleType, rows: int, num_partitions: int, limit: int, **columns: object):  # type: ignore[no-untyped-def]
    return encoder.encode_columns(
        rows,
        num_partitions,
        columns.get("sticky", 0),
        limit,
        columns.get("now", 7_000),
        columns.get("keys"),
        columns.get("values"),
        columns.get("partitions"),
        columns.get("timestamps"),
        columns.get("headers"),
    )


def test_columns_go_to_their_partition_or_their_keys(encoder: ModuleType) -> None:
    keys = [b"a", b"b", None, b"c"]
    values = [b"1", b"2", b"3", None]
    chunks, _ = encode_rows(
        encoder,
        4,
        3,
        1 << 20,
        keys=binary_column(keys),
        values=binary_column(values),
        partitions=int_column([None, 2, None, None], wide=False),
        timestamps=int_column([100, None, 300, 400], wide=True),
        sticky=1,
    )
    placed = {
        c.partition: decode(c.records, c.record_count, c.base_timestamp, c.max_timestamp) for c in chunks
    }
    key_a = reference_murmur2(b"a") & 0x7FFFFFFF
    key_c = reference_murmur2(b"c") & 0x7FFFFFFF
    expected: dict[int, list[tuple[int, bytes | None, bytes | None]]] = {}
    for partition, ts, key, value in [
        (key_a % 3, 100, b"a", b"1"),
        (2, 7_000, b"b", b"2"),
        (1, 300, None, b"3"),
        (key_c % 3, 400, b"c", None),
    ]:
        expected.setdefault(partition, []).append((ts, key, value))
    assert {p: [(ts, k, v) for _, ts, k, v, _ in records] for p, records in placed.items()} == expected
    assert [c.partition for c in chunks] == sorted(placed)


def test_headers_and_sliced_columns(encoder: ModuleType) -> None:
    chunks, _ = encode_rows(
        encoder,
        3,
        1,
        1 << 20,
        values=binary_column([b"x", b"y", b"z"], offset=2),
        headers=headers_column([[(b"h1", b"v"), (b"h2", None)], None, []]),
    )
    (chunk,) = chunks
    records = decode(chunk.records, chunk.record_count, chunk.base_timestamp, chunk.max_timestamp)
    assert [(v, h) for _, _, _, v, h in records] == [
        (b"x", [("h1", b"v"), ("h2", None)]),
        (b"y", []),
        (b"z", []),
    ]


def test_rows_are_cut_into_chunks_and_keyless_rows_move_on_when_one_fills(encoder: ModuleType) -> None:
    values: list[bytes | None] = [b"%03d" % i for i in range(30)]
    chunks, sticky = encode_rows(encoder, 30, 3, 45, values=binary_column(values), sticky=2)
    assert all(len(c.records) <= 45 for c in chunks)
    assert sum(c.record_count for c in chunks) == 30
    order = [c.partition for c in chunks]
    assert order[:3] == [2, 0, 1], "the sticky partition moves to the next one as each chunk fills"
    seen = [
        v
        for c in chunks
        for _, _, _, v, _ in decode(c.records, c.record_count, c.base_timestamp, c.max_timestamp)
    ]
    assert sorted(seen) == values  # type: ignore[type-var]
    assert sticky == order[-1] or sticky in order


def test_an_out_of_range_partition_is_refused(encoder: ModuleType) -> None:
    with pytest.raises(ValueError, match="row 1: partition 5 does not exist"):
        encode_rows(
            encoder, 2, 3, 1000, values=binary_column([b"a", b"b"]), partitions=int_column([0, 5], wide=False)
        )


def test_a_null_header_key_is_refused(encoder: ModuleType) -> None:
    headers = headers_column([[(b"k", b"v")]])
    headers = headers._replace(keys=binary_column([None]))
    with pytest.raises(ValueError, match="row 0: a header has a null key"):
        encode_rows(encoder, 1, 1, 1000, values=binary_column([b"a"]), headers=headers)


@pytest.mark.skipif(compiled is None, reason="the compiled encoder is not built")
@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.binary(max_size=12)),
            st.one_of(st.none(), st.binary(max_size=40)),
            st.one_of(st.none(), st.integers(0, 3)),
            st.one_of(st.none(), st.integers(-(2**40), 2**40)),
        ),
        max_size=60,
    ),
    st.integers(10, 300),
    st.integers(0, 7),
)
def test_both_encoders_write_the_same_chunks(rows, limit: int, sticky: int) -> None:  # type: ignore[no-untyped-def]
    columns = {
        "keys": binary_column([r[0] for r in rows]),
        "values": binary_column([r[1] for r in rows]),
        "partitions": int_column([r[2] for r in rows], wide=False),
        "timestamps": int_column([r[3] for r in rows], wide=True),
        "sticky": sticky,
    }
    assert compiled is not None
    assert encode_rows(encode, len(rows), 4, limit, **columns) == encode_rows(
        compiled, len(rows), 4, limit, **columns
    )


@pytest.mark.skipif(compiled is None, reason="the compiled encoder is not built")
def test_both_writers_write_the_same_bytes() -> None:
    rng = random.Random(3)
    assert compiled is not None
    pure, fast = encode.RecordsWriter(5_000), compiled.RecordsWriter(5_000)
    for _ in range(500):
        args = (
            rng.randrange(-(2**40), 2**40),
            rng.choice([None, rng.randbytes(rng.randrange(20))]),
            rng.choice([None, rng.randbytes(rng.randrange(300))]),
            [(f"h{i}", rng.choice([None, b"x" * i])) for i in range(rng.randrange(3))],
        )
        assert pure.append(*args) == fast.append(*args)
    assert pure.getvalue() == fast.getvalue()
    assert (pure.count, pure.base_timestamp, pure.max_timestamp) == (
        fast.count,
        fast.base_timestamp,
        fast.max_timestamp,
    )
