"""``ConsumerRecord``, ``RecordBatch.consumer_records`` and ``BatchCursor`` /
``ColumnBuilder.append_cursor``, on both kernels (the compiled one's garbage-collector
behaviour on its own)."""

from __future__ import annotations

import gc
import pickle
import struct
import weakref
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kaflux.errors import CorruptRecordError
from kaflux.records import assemble_batch, build_control_batch
from kaflux.records.interface import RecordDecoder
from kaflux.structs import TopicPartition

from support.record_columns import batch_st, build, rows_of

Fields = tuple[Any, ...]


def fields(record: Any) -> Fields:
    return (
        record.topic,
        record.partition,
        record.offset,
        record.timestamp,
        record.timestamp_type,
        record.key,
        record.value,
        record.headers,
        record.leader_epoch,
    )


def one_batch(kernel: RecordDecoder | ModuleType, raw: bytes, **kwargs: Any) -> Any:
    (batch,) = kernel.iter_batches(memoryview(raw), **kwargs)
    return batch


# --- ConsumerRecord -------------------------------------------------------------------------------


def make(kernel: RecordDecoder, **changes: Any) -> Any:
    args: dict[str, Any] = {
        "topic": "t",
        "partition": 2,
        "offset": 41,
        "timestamp": 1_700_000_000_123,
        "timestamp_type": 1,
        "key": b"k",
        "value": b"v",
        "headers": [("h", b"x")],
        "leader_epoch": 5,
    }
    args.update(changes)
    return kernel.ConsumerRecord(*args.values())


def test_consumer_record_attributes_and_repr(kernel: RecordDecoder) -> None:
    record = make(kernel)
    assert fields(record) == ("t", 2, 41, 1_700_000_000_123, 1, b"k", b"v", [("h", b"x")], 5)
    assert record.topic_partition == TopicPartition("t", 2)
    assert repr(record) == (
        "ConsumerRecord(topic='t', partition=2, offset=41, timestamp=1700000000123, key=b'k', value=b'v')"
    )


def test_consumer_record_equality_and_no_hash(kernel: RecordDecoder) -> None:
    record = make(kernel)
    assert record == make(kernel)
    assert (record != make(kernel)) is False
    for name, other in [("offset", 42), ("value", b"w"), ("headers", []), ("leader_epoch", None)]:
        assert record != make(kernel, **{name: other}), name
    assert record != ("t", 2, 41)
    with pytest.raises(TypeError):
        hash(record)


def test_consumer_record_attributes_can_be_replaced(kernel: RecordDecoder) -> None:
    record = make(kernel)
    record.key = "a string now"
    record.value = {"decoded": True}
    record.headers.append(("more", None))
    assert (record.key, record.value, record.headers) == (
        "a string now",
        {"decoded": True},
        [("h", b"x"), ("more", None)],
    )


def test_consumer_record_pickles(kernel: RecordDecoder) -> None:
    record = make(kernel, key=None)
    copy = pickle.loads(pickle.dumps(record))
    assert type(copy) is type(record) and fields(copy) == fields(record)


def test_delivery_count_is_none_unless_a_share_group_set_it(kernel: RecordDecoder) -> None:
    record = make(kernel)
    assert record.delivery_count is None
    record.delivery_count = 2
    assert record.delivery_count == 2
    assert record != make(kernel)  # it takes part in equality
    shared = kernel.ConsumerRecord("t", 2, 41, 1_700_000_000_123, 1, b"k", b"v", [("h", b"x")], 5, 2)
    assert shared == record
    copy = pickle.loads(pickle.dumps(record))
    assert copy.delivery_count == 2 and copy == record


def test_headers_absent_are_an_empty_list_that_stays(kernel: RecordDecoder) -> None:
    (record,) = one_batch(kernel, build(0, 0, 0, [(1, b"k", b"v", [])])).consumer_records("t", 0, None)
    assert record.headers == []
    record.headers.append(("late", b"1"))
    assert record.headers == [("late", b"1")]
    assert record == make(
        kernel,
        partition=0,
        offset=0,
        timestamp=1,
        timestamp_type=0,
        headers=[("late", b"1")],
        leader_epoch=None,
    )


# --- consumer_records -----------------------------------------------------------------------------


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(spec=batch_st, epoch=st.none() | st.integers(0, 2**31 - 1), partition=st.integers(0, 2**31 - 1))
def test_consumer_records_match_records(
    kernel: RecordDecoder, spec: Any, epoch: int | None, partition: int
) -> None:
    batch = one_batch(kernel, build(*spec))
    expected = [
        ("topic", partition, r.offset, r.timestamp, batch.timestamp_type, r.key, r.value, r.headers, epoch)
        for r in batch.records()
    ]
    assert [fields(r) for r in batch.consumer_records("topic", partition, epoch)] == expected
    assert all(type(r) is kernel.ConsumerRecord for r in batch.consumer_records("topic", partition, epoch))


def test_consumer_records_skip_only_leading_records_below_min_offset(kernel: RecordDecoder) -> None:
    batch = one_batch(kernel, build(0, 0, 100, [(i, b"k", b"v", []) for i in range(6)]))
    assert [r.offset for r in batch.consumer_records("t", 0, None, 103)] == [103, 104, 105]
    assert batch.consumer_records("t", 0, None, 106) == []
    body = b""
    for delta in (0, 5, 2, 7):
        record = b"\x00\x00" + bytes([delta * 2]) + b"\x01\x01\x00"
        body += bytes([len(record) * 2]) + record
    odd = assemble_batch(
        body, record_count=4, attributes=0, last_offset_delta=7, base_timestamp=0, max_timestamp=0
    )
    assert [r.offset for r in one_batch(kernel, odd).consumer_records("t", 0, None, 3)] == [5, 2, 7]


def test_consumer_records_fail_like_records(kernel: RecordDecoder) -> None:
    bad = bytearray(build(0, 0, 50, [(1, None, b"value", [("h", None)])] * 4))
    bad[-3] = 0x7F  # the last record's header value length: runs past the end
    batch = one_batch(kernel, bytes(bad), check_crcs=False, topic="t", partition=1)
    with pytest.raises(CorruptRecordError) as from_records:
        batch.records()
    with pytest.raises(CorruptRecordError) as from_consumer_records:
        batch.consumer_records("t", 1, None)
    assert str(from_consumer_records.value) == str(from_records.value)


def test_consumer_records_refuse_offsets_outside_int64(kernel: RecordDecoder) -> None:
    raw = bytearray(build(0, 0, 0, [(1, b"k", b"v", [])] * 3))
    struct.pack_into(">q", raw, 0, 2**63 - 2)  # base offset (outside the CRC)
    batch = one_batch(kernel, bytes(raw), topic="t", partition=0)
    with pytest.raises(CorruptRecordError, match="record at offset 9223372036854775808 has an offset"):
        batch.consumer_records("t", 0, None)


def test_consumer_records_with_a_delta_beyond_64_bits_under_log_append_time(kernel: RecordDecoder) -> None:
    body = b"\x00" + b"\xfe" * 9 + b"\x03" + b"\x00" + b"\x02k" + b"\x02v" + b"\x00"
    raw = assemble_batch(
        bytes([len(body) * 2]) + body,
        record_count=1,
        attributes=0x08,
        last_offset_delta=0,
        base_timestamp=5,
        max_timestamp=777,
    )
    (record,) = one_batch(kernel, raw).consumer_records("t", 2, 1)
    assert fields(record) == ("t", 2, 0, 777, 1, b"k", b"v", [], 1)


def test_consumer_records_of_a_control_batch(kernel: RecordDecoder) -> None:
    batch = one_batch(kernel, build_control_batch(1, producer_id=3, producer_epoch=0, timestamp_ms=9))
    (record,) = batch.consumer_records("t", 0, None)
    assert record.key == b"\x00\x00\x00\x01"


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        (("t", 2**31, None), ValueError, "partition 2147483648 is outside the int32 range"),
        (("t", 0, None, 2**63), ValueError, "min_offset 9223372036854775808 is outside the int64 range"),
        ((b"t", 0, None), TypeError, "topic must be a str, got bytes"),
        (("t", 0, "5"), TypeError, "leader_epoch must be an int or None, got str"),
    ],
)
def test_consumer_records_argument_errors(
    kernel: RecordDecoder, args: tuple[Any, ...], error: type[Exception], message: str
) -> None:
    batch = one_batch(kernel, build(0, 0, 0, [(1, b"k", b"v", [])]))
    with pytest.raises(error, match=message):
        batch.consumer_records(*args)


# --- BatchCursor ----------------------------------------------------------------------------------


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(spec=batch_st, step=st.integers(1, 5), skip=st.integers(0, 4))
def test_cursor_appends_in_steps_what_append_batch_appends(
    kernel: RecordDecoder, spec: Any, step: int, skip: int
) -> None:
    batch = one_batch(kernel, build(*spec))
    min_offset = batch.base_offset + skip
    whole = kernel.ColumnBuilder()
    appended, _, last = whole.append_batch(batch, "t", 4, min_offset)
    cursor = kernel.BatchCursor(batch)
    assert cursor.remaining == batch.record_count
    steps = kernel.ColumnBuilder()
    results = []
    while cursor.remaining:
        results.append(steps.append_cursor(cursor, "t", 4, min_offset, step))
    assert sum(n for n, _ in results) == appended
    assert all(n <= step for n, _ in results)
    assert (results[-1][1] if results and results[-1][0] else last) == last
    assert rows_of(steps.finish()) == rows_of(whole.finish())
    assert steps.append_cursor(cursor, "t", 4) == (0, None)


def test_cursor_takes_a_batch_apart_with_other_appends_between(kernel: RecordDecoder) -> None:
    first = one_batch(kernel, build(3, 0, 0, [(i, b"a%d" % i, b"v", [("h", None)]) for i in range(5)]))
    second = one_batch(kernel, build(0, 1, 100, [(i, None, b"b%d" % i, []) for i in range(3)]))
    builder = kernel.ColumnBuilder()
    cursor = kernel.BatchCursor(first)
    assert builder.append_cursor(cursor, "t", 0, 1, 2) == (2, 2)  # skips offset 0
    assert builder.append_batch(second, "u", 1) == (3, 0, 102)
    assert builder.append_cursor(cursor, "t", 0, 3, 10) == (2, 4)
    assert cursor.remaining == 0
    rows = rows_of(builder.finish())
    assert [(r[0], r[2], r[5] or r[6]) for r in rows] == [
        ("t", 1, b"a1"),
        ("t", 2, b"a2"),
        ("u", 100, b"b0"),
        ("u", 101, b"b1"),
        ("u", 102, b"b2"),
        ("t", 3, b"a3"),
        ("t", 4, b"a4"),
    ]


def test_cursor_fails_at_once_like_append_batch(kernel: RecordDecoder) -> None:
    bad = bytearray(build(0, 0, 50, [(1, None, b"value", [("h", None)])] * 4))
    bad[-3] = 0x7F
    bad_batch = one_batch(kernel, bytes(bad), check_crcs=False, topic="t", partition=1)
    with pytest.raises(CorruptRecordError) as from_columns:
        kernel.ColumnBuilder().append_batch(bad_batch, "t", 1)
    with pytest.raises(CorruptRecordError) as from_cursor:
        kernel.BatchCursor(bad_batch)
    assert str(from_cursor.value) == str(from_columns.value)
    raw = bytearray(build(0, 0, 0, [(1, b"k", b"v", [])] * 3))
    struct.pack_into(">q", raw, 0, 2**63 - 2)
    with pytest.raises(CorruptRecordError, match="outside the int64 range"):
        kernel.BatchCursor(one_batch(kernel, bytes(raw)))


# --- the compiled kernel and the garbage collector ------------------------------------------------------


def test_records_without_containers_are_not_tracked_until_they_hold_one(compiled: ModuleType) -> None:
    raw = build(0, 0, 0, [(1, b"k", b"v", []), (2, None, b"v", [("h", b"x")])])
    plain, with_headers = one_batch(compiled, raw).consumer_records("t", 0, 7)
    assert not gc.is_tracked(plain)
    assert gc.is_tracked(with_headers)  # holds a list
    plain.value = b"other bytes"
    assert not gc.is_tracked(plain)
    plain.value = [1]
    assert gc.is_tracked(plain)
    (other,) = one_batch(compiled, build(0, 0, 0, [(1, b"k", b"v", [])])).consumer_records("t", 0, None)
    assert not gc.is_tracked(other)
    assert other.headers == [] and gc.is_tracked(other)  # a list made on first access


def test_a_reference_cycle_through_a_record_is_collected(compiled: ModuleType) -> None:
    class Box:
        record: Any = None

    (record,) = one_batch(compiled, build(0, 0, 0, [(1, b"k", b"v", [])])).consumer_records("t", 0, None)
    box = Box()
    box.record = record
    record.value = box
    alive = weakref.ref(box)
    del box, record
    gc.collect()
    assert alive() is None


def test_decoding_a_large_batch_runs_no_collection(compiled: ModuleType) -> None:
    batch = one_batch(compiled, build(0, 0, 0, [(i, b"k", b"v", []) for i in range(20_000)]))
    runs: list[str] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            runs.append(phase)

    gc.callbacks.append(count)
    try:
        records = batch.consumer_records("t", 0, None)
    finally:
        gc.callbacks.remove(count)
    assert len(records) == 20_000
    assert runs == []
    assert gc.isenabled()


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(spec=batch_st, step=st.integers(1, 5), skip=st.integers(0, 4))
def test_cursor_takes_consumer_records_in_steps_and_alternates_with_columns(
    kernel: RecordDecoder, spec: Any, step: int, skip: int
) -> None:
    batch = one_batch(kernel, build(*spec))
    min_offset = batch.base_offset + skip
    whole = [fields(r) for r in batch.consumer_records("t", 4, 9, min_offset)]
    cursor = kernel.BatchCursor(batch)
    taken: list[Fields] = []
    while cursor.remaining:
        records = cursor.consumer_records("t", 4, 9, min_offset, step)
        assert len(records) <= step
        taken += [fields(r) for r in records]
    assert taken == whole
    assert cursor.consumer_records("t", 4, 9) == []
    # taking turns: ConsumerRecords, then columns, then ConsumerRecords...
    cursor = kernel.BatchCursor(batch)
    builder = kernel.ColumnBuilder()
    rows: list[Fields] = []
    turn = 0
    while cursor.remaining:
        if turn % 2 == 0:
            rows += [fields(r)[:8] for r in cursor.consumer_records("t", 4, 9, min_offset, step)]
        else:
            builder.append_cursor(cursor, "t", 4, min_offset, step)
            rows += [row for row in rows_of(builder.finish())]
        turn += 1
    assert rows == [w[:8] for w in whole]
