"""poll_arrow() returns exactly what poll() returns, as one Arrow batch.

Two levels: the collector's two sinks call by call on both record kernels (deterministic:
in-memory fetches), and the real Consumer's ``poll()`` and ``poll_arrow()`` against the
socket fake broker (the active kernel; run the suite with ``KAFLUX_PURE=1`` for the other).
The data covers keys and null keys, null values, headers (with null values), every codec,
log-append-time batches, transactional data with commit and abort markers under
read_committed and read_uncommitted, and batches read a few records at a time.

``poll_arrow()`` decodes a fetch's batches ahead into Arrow columns and hands out slices of
them; the tests of that patch the module's limits so that calls cut batches short, cross
what was decoded, and concatenate.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kaflux import Consumer, TopicPartition
from kaflux.consumer import completed_fetch
from kaflux.consumer.completed_fetch import CompletedFetch
from kaflux.consumer.consumer_record import ConsumerRecords
from kaflux.consumer.fetch_buffer import FetchBuffer
from kaflux.consumer.fetch_collector import FetchCollector
from kaflux.consumer.subscription_state import FetchPosition, ResetStrategy, SubscriptionState
from kaflux.errors import CorruptRecordError
from kaflux.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    BatchBuilder,
    build_control_batch,
)
from kaflux.records.interface import RecordDecoder

from support.fakes import FakeCluster
from support.record_kernels import KERNELS, kernel_named
from support.socket_fake_broker import SocketFakeBroker

pa = pytest.importorskip("pyarrow")

TOPIC = "mixed"
TP0, TP1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)
CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
Row = tuple[str, int, int, int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]

ARROW_SCHEMA = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("ms", tz="UTC")),
        pa.field("timestamp_type", pa.int32()),
        pa.field(
            "headers",
            pa.list_(
                pa.struct([pa.field("key", pa.string(), nullable=False), pa.field("value", pa.binary())])
            ),
        ),
    ]
)


# --- the data ---------------------------------------------------------------------------------------


def data_batch(
    base: int,
    n: int,
    *,
    codec: int = NONE,
    tag: str = "v",
    log_append_time: bool = False,
    producer_id: int = -1,
    transactional: bool = False,
) -> bytes:
    """``n`` records: every third key null, every fifth value null, headers on every other
    record (one with a null value)."""
    builder = BatchBuilder(
        codec,
        base_offset=base,
        timestamp_type=1 if log_append_time else 0,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        is_transactional=transactional,
        partition_leader_epoch=3,
    )
    for i in range(n):
        key = None if i % 3 == 0 else b"k%d" % (base + i)
        value = None if i % 5 == 4 else f"{tag}{base + i}".encode() * (1 + i % 4)
        headers = [("trace", b"t%d" % i), ("ключ", None)] if i % 2 else []
        builder.append(1_700_000_000_000 + base + i, key, value, headers)
    return builder.build()


def marker(base: int, kind: int, producer_id: int) -> bytes:
    return build_control_batch(
        kind, producer_id=producer_id, producer_epoch=0, timestamp_ms=9, base_offset=base
    )


def partition_log() -> tuple[list[bytes], list[tuple[int, int]]]:
    """Batches of one partition from offset 0 (and its aborted transactions as (pid, first)):
    every codec, a log-append-time batch, a committed and an aborted transaction interleaved
    with their markers, then plain data."""
    batches: list[bytes] = []
    offset = 0
    for codec in CODECS:
        batches.append(data_batch(offset, 7, codec=codec, tag=f"c{codec}-"))
        offset += 7
    batches.append(data_batch(offset, 4, log_append_time=True, codec=LZ4))
    offset += 4
    committed_first = offset
    batches.append(data_batch(offset, 3, producer_id=7, transactional=True, tag="commit-"))
    offset += 3
    aborted_first = offset
    batches.append(data_batch(offset, 5, producer_id=8, transactional=True, tag="abort-", codec=ZSTD))
    offset += 5
    batches.append(data_batch(offset, 2, producer_id=7, transactional=True, tag="commit-"))
    offset += 2
    batches.append(marker(offset, CONTROL_ABORT, 8))
    offset += 1
    batches.append(marker(offset, CONTROL_COMMIT, 7))
    offset += 1
    batches.append(data_batch(offset, 6, codec=SNAPPY, tag="after-"))
    assert committed_first < aborted_first
    return batches, [(8, aborted_first)]


# --- the collector, both sinks ----------------------------------------------------------------------


class Reader:
    """A collector over two partitions holding :func:`partition_log` each."""

    def __init__(self, kernel: RecordDecoder, *, max_poll_records: int, read_committed: bool) -> None:
        self.subscription = SubscriptionState(ResetStrategy.EARLIEST)
        self.subscription.assign_from_user([TP0, TP1])
        self.buffer = FetchBuffer()
        self.collector = FetchCollector(
            self.subscription, self.buffer, max_poll_records=max_poll_records, kernel=kernel
        )
        batches, aborted = partition_log()
        for tp in (TP0, TP1):
            self.subscription.seek(tp, FetchPosition(0))
            self.buffer.add(
                [
                    CompletedFetch(
                        tp,
                        0,
                        self.subscription.position_version(tp),
                        memoryview(b"".join(batches)),
                        high_watermark=1000,
                        last_stable_offset=1000,
                        aborted_transactions=aborted,
                        read_committed=read_committed,
                    )
                ]
            )

    def positions(self) -> tuple[int | None, ...]:
        return tuple(p.offset if (p := self.subscription.position(tp)) else None for tp in (TP0, TP1))

    def poll(self) -> list[Row]:
        return [row_of_record(r) for r in ConsumerRecords(self.collector.collect())]

    def poll_arrow(self) -> list[Row]:
        batch = self.collector.collect_arrow()
        assert batch.schema == ARROW_SCHEMA
        return rows_of_arrow(batch)


def row_of_record(r: Any) -> Row:
    return (r.topic, r.partition, r.offset, r.timestamp, r.timestamp_type, r.key, r.value, list(r.headers))


def rows_of_arrow(batch: Any) -> list[Row]:
    rows = []
    for row in batch.to_pylist():
        millis = round(row["timestamp"].timestamp() * 1000)
        headers = [(h["key"], h["value"]) for h in row["headers"]]
        rows.append(
            (
                row["topic"],
                row["partition"],
                row["offset"],
                millis,
                row["timestamp_type"],
                row["key"],
                row["value"],
                headers,
            )
        )
    return rows


def calls(reader: Reader, poll: Callable[[], list[Row]]) -> list[tuple[list[Row], tuple[int | None, ...]]]:
    """What each call returns and the positions after it, until a call returns nothing."""
    out = []
    while rows := poll():
        out.append((rows, reader.positions()))
    out.append(([], reader.positions()))
    return out


@pytest.mark.parametrize("read_committed", [True, False], ids=["read_committed", "read_uncommitted"])
@pytest.mark.parametrize("max_poll_records", [3, 500, 5000])  # 5000: one set of columns per call
@pytest.mark.parametrize("kernel_name", KERNELS)
def test_columns_sink_returns_what_records_sink_returns_call_by_call(
    kernel_name: str, max_poll_records: int, read_committed: bool
) -> None:
    kernel = kernel_named(kernel_name)
    by_records = Reader(kernel, max_poll_records=max_poll_records, read_committed=read_committed)
    by_columns = Reader(kernel, max_poll_records=max_poll_records, read_committed=read_committed)
    expected = calls(by_records, by_records.poll)
    assert calls(by_columns, by_columns.poll_arrow) == expected
    rows = [row for rows, _ in expected for row in rows]
    values = [r[6] for r in rows]
    # the data the test is about is there: null keys and values, headers, every codec's records,
    # log append time; the aborted transaction only without read_committed; never a marker
    assert any(r[5] is None for r in rows) and any(r[6] is None for r in rows)
    assert any(r[7] for r in rows) and any(not r[7] for r in rows)
    assert {r[4] for r in rows} == {0, 1}
    assert all(any(v is not None and v.startswith(b"c%d-" % c) for v in values) for c in CODECS)
    assert any(v is not None and v.startswith(b"commit-") for v in values)
    assert any(v is not None and v.startswith(b"abort-") for v in values) is not read_committed
    assert expected[-1][1] == (57, 57)  # past both markers and the last batch
    if max_poll_records == 3:
        assert all(len(rows) <= 3 for rows, _ in expected)


@pytest.mark.parametrize("kernel_name", KERNELS)
def test_both_kernels_and_sinks_agree(kernel_name: str) -> None:
    pure = Reader(kernel_named("pure"), max_poll_records=500, read_committed=True)
    other = Reader(kernel_named(kernel_name), max_poll_records=500, read_committed=True)
    assert calls(other, other.poll_arrow) == calls(pure, pure.poll)


@pytest.mark.parametrize("kernel_name", KERNELS)
def test_sinks_can_alternate_in_the_middle_of_a_batch(kernel_name: str) -> None:
    kernel = kernel_named(kernel_name)
    reference = Reader(kernel, max_poll_records=4, read_committed=True)
    expected = calls(reference, reference.poll)
    mixed = Reader(kernel, max_poll_records=4, read_committed=True)
    got = []
    for i in range(len(expected)):
        rows = mixed.poll_arrow() if i % 3 == 1 else mixed.poll()
        got.append((rows, mixed.positions()))
    assert got == expected


@pytest.mark.parametrize("kernel_name", KERNELS)
def test_records_carry_the_batch_leader_epoch(kernel_name: str) -> None:
    reader = Reader(kernel_named(kernel_name), max_poll_records=5, read_committed=False)
    records = list(ConsumerRecords(reader.collector.collect()))
    assert records and {r.leader_epoch for r in records} == {3}
    assert reader.subscription.position(TP0) == FetchPosition(5, 3)


# --- decoding ahead: slices, chunks, positions ---------------------------------------------------------


#: (MIN_DECODE_ROWS, MIN_DECODE_BYTES, DECODE_AHEAD_BYTES): every call decodes exactly its rows,
#: cutting batches, at most one batch at a time; every call decodes exactly its rows; calls
#: share whole batches decoded one at a time, concatenating where they cross one; calls share
#: rows decoded a few calls' worth at a time, cut where a call ends
CHUNKINGS = {
    "exact-one-batch": (1, 0, 1),
    "exact": (1, 0, 10**9),
    "whole-batches": (10**9, 0, 1),
    "calls-aligned": (7, 10**9, 10**9),
}


@pytest.fixture(params=list(CHUNKINGS))
def small_chunks(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    rows, nbytes, ahead = CHUNKINGS[request.param]
    monkeypatch.setattr(completed_fetch, "MIN_DECODE_ROWS", rows)
    monkeypatch.setattr(completed_fetch, "MIN_DECODE_BYTES", nbytes)
    monkeypatch.setattr(completed_fetch, "DECODE_AHEAD_BYTES", ahead)
    return str(request.param)


@pytest.mark.parametrize("read_committed", [True, False], ids=["read_committed", "read_uncommitted"])
@pytest.mark.parametrize("max_poll_records", [2, 5, 40])
@pytest.mark.parametrize("kernel_name", KERNELS)
def test_small_decode_chunks_return_what_poll_returns_call_by_call(
    kernel_name: str, max_poll_records: int, read_committed: bool, small_chunks: str
) -> None:
    kernel = kernel_named(kernel_name)
    by_records = Reader(kernel, max_poll_records=max_poll_records, read_committed=read_committed)
    by_columns = Reader(kernel, max_poll_records=max_poll_records, read_committed=read_committed)
    expected = calls(by_records, by_records.poll)
    assert calls(by_columns, by_columns.poll_arrow) == expected
    assert len(expected) > 3
    assert expected[-1][1] == (57, 57)


def single_fetch(
    kernel: RecordDecoder, *batches: bytes, max_poll_records: int
) -> tuple[Reader, CompletedFetch]:
    """A Reader whose buffer holds one fetch of TP0 with ``batches`` (and nothing of TP1)."""
    reader = Reader(kernel, max_poll_records=max_poll_records, read_committed=False)
    reader.buffer.clear()
    fetch = CompletedFetch(
        TP0, 0, reader.subscription.position_version(TP0), memoryview(b"".join(batches)), high_watermark=1000
    )
    reader.buffer.add([fetch])
    return reader, fetch


@pytest.mark.parametrize("kernel_name", KERNELS)
def test_calls_hand_out_slices_of_one_decoded_batch(kernel_name: str) -> None:
    reader, fetch = single_fetch(
        kernel_named(kernel_name), data_batch(0, 6), data_batch(6, 6), max_poll_records=4
    )
    first = reader.collector.collect_arrow()
    assert fetch.decoded_rows == 8  # both batches decoded at once, 4 rows handed out
    second = reader.collector.collect_arrow()
    assert first.column(4).to_pylist() == [0, 1, 2, 3]
    assert second.column(4).to_pylist() == [4, 5, 6, 7]
    assert reader.subscription.position(TP0) == FetchPosition(8, 3)
    # zero copy: both are views of the same value buffer, the second one further in
    first_values, second_values = first.column(1), second.column(1)
    assert first_values.buffers()[2].address == second_values.buffers()[2].address
    assert (first_values.offset, second_values.offset) == (0, 4)


@pytest.mark.parametrize("kernel_name", KERNELS)
def test_pausing_in_the_middle_of_a_fetch_lets_go_of_its_decoded_rows(kernel_name: str) -> None:
    reader, fetch = single_fetch(kernel_named(kernel_name), data_batch(0, 10), max_poll_records=4)
    assert reader.collector.collect_arrow().num_rows == 4
    assert fetch.decoded_rows == 6
    reader.subscription.pause([TP0])
    assert reader.collector.collect_arrow().num_rows == 0
    assert fetch.decoded_rows == 0  # the fetched bytes stay buffered, not the decoded rows
    assert reader.buffer.size_bytes() == fetch.size_bytes
    reader.subscription.resume([TP0])
    assert reader.collector.collect_arrow().column(4).to_pylist() == [4, 5, 6, 7]
    assert reader.subscription.position(TP0) == FetchPosition(8, 3)


@pytest.mark.parametrize("kernel_name", KERNELS)
def test_seeking_in_the_middle_of_a_fetch_drops_its_decoded_rows(kernel_name: str) -> None:
    reader, fetch = single_fetch(kernel_named(kernel_name), data_batch(0, 10), max_poll_records=4)
    assert reader.collector.collect_arrow().num_rows == 4
    reader.subscription.seek(TP0, FetchPosition(6))
    assert reader.collector.collect_arrow().num_rows == 0
    assert fetch.consumed and fetch.decoded_rows == 0
    assert reader.buffer.size_bytes() == 0
    assert reader.subscription.position(TP0) == FetchPosition(6)


@pytest.mark.parametrize("kernel_name", KERNELS)
def test_corrupt_batch_in_the_middle_of_a_fetch_is_raised_after_the_rows_before_it(
    kernel_name: str, small_chunks: str
) -> None:
    bad = bytearray(data_batch(8, 4))
    bad[-1] ^= 0xFF
    reader, _ = single_fetch(
        kernel_named(kernel_name), data_batch(0, 5), data_batch(5, 3), bytes(bad), max_poll_records=3
    )
    got = []
    while batch := reader.collector.collect_arrow():
        got.append(batch.column(4).to_pylist())
        if sum(map(len, got)) == 8:
            break
    assert [o for offsets in got for o in offsets] == list(range(8))
    for _ in range(2):  # raised, at the position after the good rows, on every later call
        with pytest.raises(CorruptRecordError) as raised:
            reader.collector.collect_arrow()
        assert raised.value.offset == 8
    assert reader.subscription.position(TP0) == FetchPosition(8, 3)


# --- the Consumer over sockets ------------------------------------------------------------------------


@pytest.fixture
def broker() -> Iterator[SocketFakeBroker]:
    cluster = FakeCluster(1)
    cluster.create_topic(TOPIC, 2)
    batches, _ = partition_log()
    for tp in (TP0, TP1):
        for data in batches[:-4]:  # the transactions go through the cluster's own bookkeeping
            cluster.append_batch(tp, data)
        cluster.produce(tp, [b"t7-a", b"t7-b"], keys=[b"x", None], producer_id=7, transactional=True)
        cluster.produce(tp, [b"t8-a"], producer_id=8, transactional=True, compression=GZIP)
        cluster.end_transaction(tp, 8, commit=False)
        cluster.end_transaction(tp, 7, commit=True)
        cluster.append_batch(tp, batches[-1])
    srv = SocketFakeBroker(cluster)
    yield srv
    srv.close()


def consumer_for(broker: SocketFakeBroker, **config: Any) -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "auto.offset.reset": "earliest",
            "max.partition.fetch.bytes": 600,  # many small fetches
            **config,
        }
    )
    consumer.assign([TP0, TP1])
    return consumer


def read_all(consumer: Consumer, poll: Callable[[], list[Row]], ends: dict[TopicPartition, int]) -> list[Row]:
    rows: list[Row] = []
    deadline = time.monotonic() + 30
    while any(consumer.position(tp) < end for tp, end in ends.items()):
        assert time.monotonic() < deadline, "did not reach the end of the partitions"
        rows += poll()
    return rows


@pytest.mark.parametrize("max_poll_records", [7, 5000])  # slices; one set of columns per call
@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_poll_arrow_returns_what_poll_returns(
    broker: SocketFakeBroker, isolation: str, max_poll_records: int
) -> None:
    ends = {tp: broker.cluster.partition(tp).high_watermark for tp in (TP0, TP1)}
    config = {"isolation.level": isolation, "max.poll.records": max_poll_records}
    by_poll = consumer_for(broker, **config)
    by_arrow = consumer_for(broker, **config)
    try:
        expected = read_all(by_poll, lambda: [row_of_record(r) for r in by_poll.poll(0.2)], ends)

        def arrow() -> list[Row]:
            batch = by_arrow.poll_arrow(0.2)
            assert batch.schema == ARROW_SCHEMA
            assert batch.num_rows <= max_poll_records
            return rows_of_arrow(batch)

        got = read_all(by_arrow, arrow, ends)
    finally:
        by_poll.close(timeout=5)
        by_arrow.close(timeout=5)
    # fetches may interleave the two partitions differently: compare each partition in order
    for tp in (TP0, TP1):
        assert [r for r in got if r[1] == tp.partition] == [r for r in expected if r[1] == tp.partition]
    values = {r[6] for r in expected}
    assert b"t7-a" in values and (b"t8-a" in values) is (isolation == "read_uncommitted")
    assert len(expected) > 2 * 40


def test_poll_arrow_returns_an_empty_batch_with_the_schema_when_nothing_arrives(
    broker: SocketFakeBroker,
) -> None:
    consumer = consumer_for(broker)
    try:
        for tp in (TP0, TP1):
            consumer.seek(tp, broker.cluster.partition(tp).high_watermark)
        batch = consumer.poll_arrow(0.1)
    finally:
        consumer.close(timeout=5)
    assert batch.num_rows == 0
    assert batch.schema == ARROW_SCHEMA


def test_poll_arrow_without_pyarrow_names_the_extra_and_takes_nothing(
    broker: SocketFakeBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    consumer = consumer_for(broker)
    try:
        monkeypatch.setitem(sys.modules, "pyarrow", None)  # makes `import pyarrow` fail
        with pytest.raises(ImportError, match=r"kaflux\[arrow\]"):
            consumer.poll_arrow(1.0)
        monkeypatch.undo()
        assert consumer.position(TP0, timeout=10) == 0
        assert consumer.poll_arrow(5.0).num_rows > 0
    finally:
        consumer.close(timeout=5)
