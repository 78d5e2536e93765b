"""Property tests: random records through BatchBuilder and back, for every codec and flag."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kaflux.records import BatchBuilder, Record, estimate_record_size
from kaflux.records.interface import RecordDecoder

Headers = list[tuple[str, bytes | None]]
RawRecord = tuple[int, bytes | None, bytes | None, Headers]

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
maybe_bytes = st.none() | st.binary(max_size=300)
headers_st = st.lists(st.tuples(st.text(max_size=20), maybe_bytes), max_size=4)
timestamps = st.integers(min_value=0, max_value=2**53)
record_st = st.tuples(timestamps, maybe_bytes, maybe_bytes, headers_st)


@dataclass
class BatchSpec:
    codec: int
    base_offset: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool
    is_control: bool
    partition_leader_epoch: int
    timestamp_type: int
    records: list[RawRecord]


batch_spec = st.builds(
    BatchSpec,
    codec=st.integers(0, 4),
    base_offset=st.integers(min_value=0, max_value=2**62),
    producer_id=st.integers(min_value=-1, max_value=2**63 - 1),
    producer_epoch=st.integers(min_value=-1, max_value=2**15 - 1),
    base_sequence=st.integers(min_value=-1, max_value=2**31 - 1),
    is_transactional=st.booleans(),
    is_control=st.booleans(),
    partition_leader_epoch=st.integers(min_value=-1, max_value=2**31 - 1),
    timestamp_type=st.integers(0, 1),
    records=st.lists(record_st, max_size=40),
)


def build(spec: BatchSpec) -> bytes:
    builder = BatchBuilder(
        spec.codec,
        base_offset=spec.base_offset,
        producer_id=spec.producer_id,
        producer_epoch=spec.producer_epoch,
        base_sequence=spec.base_sequence,
        is_transactional=spec.is_transactional,
        is_control=spec.is_control,
        partition_leader_epoch=spec.partition_leader_epoch,
        timestamp_type=spec.timestamp_type,
    )
    for i, (ts, key, value, headers) in enumerate(spec.records):
        assert builder.append(ts, key, value, headers) == i
        assert builder.record_count == i + 1
    return builder.build()


def expected_records(spec: BatchSpec) -> list[Record]:
    max_ts = max((r[0] for r in spec.records), default=-1)
    return [
        Record(spec.base_offset + i, max_ts if spec.timestamp_type == 1 else ts, key, value, list(headers))
        for i, (ts, key, value, headers) in enumerate(spec.records)
    ]


def check_batch_matches(
    kernel: RecordDecoder, spec: BatchSpec, batch_view: memoryview, check_crcs: bool = True
) -> None:
    (batch,) = kernel.iter_batches(batch_view, check_crcs=check_crcs, topic="t", partition=1)
    assert batch.magic == 2
    assert batch.compression == spec.codec
    assert batch.base_offset == spec.base_offset
    assert batch.producer_id == spec.producer_id
    assert batch.producer_epoch == spec.producer_epoch
    assert batch.base_sequence == spec.base_sequence
    assert batch.is_transactional == spec.is_transactional
    assert batch.is_control == spec.is_control
    assert batch.partition_leader_epoch == spec.partition_leader_epoch
    assert batch.timestamp_type == spec.timestamp_type
    assert batch.record_count == len(spec.records)
    assert batch.last_offset_delta == max(len(spec.records) - 1, 0)
    if spec.records:
        assert batch.base_timestamp == spec.records[0][0]
        assert batch.max_timestamp == max(r[0] for r in spec.records)
    assert batch.size_in_bytes == len(batch_view)
    assert batch.records() == expected_records(spec)
    assert batch.records() == expected_records(spec)  # decoding is repeatable


@settings(
    max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(spec=batch_spec)
def test_round_trip(kernel: RecordDecoder, spec: BatchSpec) -> None:
    raw = build(spec)
    check_batch_matches(kernel, spec, memoryview(raw))
    check_batch_matches(kernel, spec, memoryview(raw), check_crcs=False)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(specs=st.lists(batch_spec, min_size=1, max_size=4), cut=st.integers(min_value=0))
def test_many_batches_and_a_truncated_tail(kernel: RecordDecoder, specs: list[BatchSpec], cut: int) -> None:
    raws = [build(spec) for spec in specs]
    tail = raws[-1][: cut % len(raws[-1])]  # a strict prefix of the last batch
    buf = memoryview(b"".join(raws[:-1]) + tail)
    batches = list(kernel.iter_batches(buf))
    assert len(batches) == len(specs) - 1
    for spec, batch in zip(specs, batches, strict=False):
        assert batch.records() == expected_records(spec)


@settings(max_examples=30, deadline=None)
@given(
    codec=st.integers(0, 4),
    count=st.integers(min_value=200, max_value=1500),
    key=maybe_bytes,
    value=maybe_bytes,
    headers=headers_st,
    ts=timestamps,
)
def test_many_records(
    kernel: RecordDecoder,
    codec: int,
    count: int,
    key: bytes | None,
    value: bytes | None,
    headers: Headers,
    ts: int,
) -> None:
    builder = BatchBuilder(codec, base_offset=10)
    for i in range(count):
        builder.append(ts + i, key, value, headers)
    (batch,) = kernel.iter_batches(memoryview(builder.build()))
    records = batch.records()
    assert len(records) == count
    assert records[-1] == Record(10 + count - 1, ts + count - 1, key, value, headers)


@given(key=maybe_bytes, value=maybe_bytes, headers=headers_st, ts_delta=INT64)
def test_estimate_record_size_is_an_upper_bound(
    key: bytes | None, value: bytes | None, headers: Headers, ts_delta: int
) -> None:
    builder = BatchBuilder()
    builder.append(0, None, None)
    before = builder.estimated_size()
    try:
        builder.append(ts_delta, key, value, headers)
    except OverflowError:  # pragma: no cover - python ints never overflow here
        pytest.fail("varint encoding overflowed")
    assert builder.estimated_size() - before <= estimate_record_size(key, value, headers)


def test_builder_argument_validation() -> None:
    with pytest.raises(ValueError, match="codec"):
        BatchBuilder(5)
    with pytest.raises(ValueError, match="timestamp_type"):
        BatchBuilder(timestamp_type=2)
    builder = BatchBuilder(producer_epoch=1 << 20)
    builder.append(0, None, None)
    with pytest.raises(ValueError, match="out of range"):
        builder.build()


def test_builder_accepts_bytes_like(kernel: RecordDecoder) -> None:
    builder = BatchBuilder(3)
    builder.append(1, bytearray(b"key"), memoryview(b"value"), [("h", bytearray(b"x"))])
    (batch,) = kernel.iter_batches(memoryview(builder.build()))
    assert batch.records() == [Record(0, 1, b"key", b"value", [("h", b"x")])]


def test_decoded_buffers_are_independent_of_the_input(kernel: RecordDecoder) -> None:
    builder = BatchBuilder()
    builder.append(1, b"key", b"value", [("h", b"hv")])
    raw = bytearray(builder.build())
    (batch,) = kernel.iter_batches(memoryview(raw))
    (record,) = batch.records()
    raw[61:] = bytes(len(raw) - 61)  # the receive buffer gets reused
    assert record == Record(0, 1, b"key", b"value", [("h", b"hv")])
    assert isinstance(record.key, bytes) and isinstance(record.value, bytes)
