"""FetchBuffer + FetchCollector: max.poll.records, pause, staleness, transactions, bad data.

Every test using :class:`Rig` runs four times: on both record kernels, and through both
sinks of the collector -- ``collect()`` (ConsumerRecord objects, what ``poll()`` returns)
and ``collect_arrow()`` (an Arrow batch, what ``poll_arrow()`` returns) -- with the same
expectations, so the two sinks are held to the same positions, limits and errors.
"""

from __future__ import annotations

import random
import struct
import traceback
from collections.abc import Iterator, Sequence
from types import SimpleNamespace
from typing import Any

import pytest

from kaflux.consumer.completed_fetch import CompletedFetch, Deserializer
from kaflux.consumer.fetch_buffer import FetchBuffer
from kaflux.consumer.fetch_collector import FetchCollector
from kaflux.consumer.subscription_state import FetchPosition, ResetStrategy, SubscriptionState
from kaflux.errors import CorruptRecordError, OffsetOutOfRangeError, RecordDeserializationError
from kaflux.records import CONTROL_ABORT, CONTROL_COMMIT, BatchBuilder, build_control_batch
from kaflux.records.interface import RecordDecoder
from kaflux.structs import TopicPartition

from support.fakes import FakeCluster, connect
from support.record_kernels import KERNELS, kernel_named

P0, P1 = TopicPartition("t", 0), TopicPartition("t", 1)
SINKS = ["records", "columns"]


@pytest.fixture(autouse=True, params=[(k, s) for k in KERNELS for s in SINKS], ids=lambda p: "-".join(p))
def mode(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """Which kernel and which sink the Rig of this test run uses."""
    kernel_name, sink = request.param
    if sink == "columns":
        pytest.importorskip("pyarrow")
    Rig.kernel = kernel_named(kernel_name)
    Rig.sink = sink
    yield request.param
    del Rig.kernel, Rig.sink


def rows_by_partition(arrow_batch: Any) -> dict[TopicPartition, list[SimpleNamespace]]:
    """The rows of a poll_arrow()-style batch as objects with ConsumerRecord's attribute names,
    grouped by partition in row order."""
    out: dict[TopicPartition, list[SimpleNamespace]] = {}
    for row in arrow_batch.to_pylist():
        timestamp = row["timestamp"]
        row["timestamp"] = round(timestamp.timestamp() * 1000)
        row["headers"] = [(h["key"], h["value"]) for h in row["headers"]]
        out.setdefault(TopicPartition(row["topic"], row["partition"]), []).append(SimpleNamespace(**row))
    return out


def batch(base: int, values: Sequence[bytes], *, producer_id: int = -1, transactional: bool = False) -> bytes:
    builder = BatchBuilder(
        base_offset=base,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        is_transactional=transactional,
    )
    for i, value in enumerate(values):
        builder.append(1_000 + base + i, None, value)
    return builder.build()


def control(base: int, kind: int, producer_id: int) -> bytes:
    return build_control_batch(
        kind, producer_id=producer_id, producer_epoch=0, timestamp_ms=5, base_offset=base
    )


def corrupt(base: int, values: Sequence[bytes]) -> bytes:
    data = bytearray(batch(base, values))
    data[-1] ^= 0xFF
    return bytes(data)


class Rig:
    kernel: RecordDecoder
    sink: str

    def __init__(
        self,
        *partitions: TopicPartition,
        max_poll_records: int = 500,
        value_deserializer: Deserializer | None = None,
    ) -> None:
        self.subscription = SubscriptionState(ResetStrategy.EARLIEST)
        self.subscription.assign_from_user(partitions or (P0, P1))
        for tp in self.subscription.assigned_partitions():
            self.subscription.seek(tp, FetchPosition(0))
        self.buffer = FetchBuffer()
        self.collector = FetchCollector(
            self.subscription,
            self.buffer,
            max_poll_records=max_poll_records,
            value_deserializer=value_deserializer,
            kernel=self.kernel,
        )

    def fetched(
        self,
        tp: TopicPartition,
        *batches: bytes,
        offset: int | None = None,
        aborted: list[tuple[int, int]] | None = None,
        read_committed: bool = False,
        error: Exception | None = None,
    ) -> CompletedFetch:
        """A fetch of ``tp`` from its current position, added to the buffer."""
        position = self.subscription.position(tp)
        fetch = CompletedFetch(
            tp,
            offset if offset is not None else (position.offset if position else 0),
            self.subscription.position_version(tp),
            None if error is not None else memoryview(b"".join(batches)),
            high_watermark=100,
            last_stable_offset=90,
            log_start_offset=0,
            aborted_transactions=aborted,
            error=error,  # type: ignore[arg-type]
            read_committed=read_committed,
        )
        self.buffer.add([fetch])
        return fetch

    def collect_records(self) -> dict[TopicPartition, list[Any]]:
        """One collect through this run's sink: ConsumerRecords, or rows with their attributes."""
        if self.sink == "records":
            return dict(self.collector.collect())
        return rows_by_partition(self.collector.collect_arrow())

    def collect(self) -> dict[TopicPartition, list[bytes | None]]:
        return {tp: [r.value for r in records] for tp, records in self.collect_records().items()}

    def offsets(self) -> dict[TopicPartition, list[int]]:
        return {tp: [r.offset for r in records] for tp, records in self.collect_records().items()}

    def position(self, tp: TopicPartition) -> int | None:
        position = self.subscription.position(tp)
        return None if position is None else position.offset


def values(n: int, prefix: str = "v") -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(n)]


def test_collect_stops_at_max_poll_records_and_resumes_there() -> None:
    rig = Rig(P0, max_poll_records=4)
    rig.fetched(P0, batch(0, values(10)))
    assert [len(rig.offsets()[P0]) for _ in range(3)] == [4, 4, 2]
    assert rig.position(P0) == 10
    assert rig.collect() == {}


def test_max_poll_records_spans_partitions_in_arrival_order() -> None:
    rig = Rig(max_poll_records=5)
    rig.fetched(P1, batch(0, values(3, "b")))
    rig.fetched(P0, batch(0, values(3, "a")))
    assert rig.collect() == {P1: [b"b0", b"b1", b"b2"], P0: [b"a0", b"a1"]}
    assert rig.collect() == {P0: [b"a2"]}


def test_records_carry_their_coordinates() -> None:
    rig = Rig(P0)
    rig.fetched(P0, batch(0, [b"x"]))
    (record,) = rig.collect_records()[P0]
    assert (record.topic, record.partition, record.offset, record.timestamp, record.value) == (
        "t",
        0,
        0,
        1_000,
        b"x",
    )


def test_consumed_fetch_frees_its_buffer_bytes() -> None:
    rig = Rig(P0)
    fetch = rig.fetched(P0, batch(0, values(3)))
    assert rig.buffer.size_bytes() == fetch.size_bytes > 0
    rig.collect()
    assert rig.buffer.size_bytes() == 0
    assert rig.buffer.buffered_partitions() == set()


def test_buffered_partitions_include_the_one_being_read() -> None:
    rig = Rig(P0, P1, max_poll_records=1)
    rig.fetched(P0, batch(0, values(3)))
    rig.fetched(P1, batch(0, values(3)))
    rig.collect()
    assert rig.buffer.buffered_partitions() == {P0, P1}


def test_paused_partition_keeps_its_buffered_data_until_resumed() -> None:
    rig = Rig()
    rig.fetched(P0, batch(0, values(2, "a")))
    rig.fetched(P1, batch(0, values(2, "b")))
    rig.subscription.pause([P0])
    assert rig.collect() == {P1: [b"b0", b"b1"]}
    assert rig.buffer.buffered_partitions() == {P0}
    rig.subscription.resume([P0])
    assert rig.collect() == {P0: [b"a0", b"a1"]}


def test_partition_paused_in_the_middle_of_a_fetch_continues_where_it_stopped() -> None:
    rig = Rig(P0, max_poll_records=2)
    rig.fetched(P0, batch(0, values(5)))
    assert rig.offsets() == {P0: [0, 1]}
    rig.subscription.pause([P0])
    assert rig.collect() == {}
    rig.subscription.resume([P0])
    assert rig.offsets() == {P0: [2, 3]}


def test_fetch_made_before_a_seek_is_dropped() -> None:
    rig = Rig(P0)
    rig.fetched(P0, batch(0, values(3)))
    rig.subscription.seek(P0, FetchPosition(0))  # same offset, but a new position version
    assert rig.collect() == {}
    assert rig.buffer.size_bytes() == 0
    assert rig.collector.released_fetches == 1


def test_fetch_for_a_different_offset_is_dropped() -> None:
    rig = Rig(P0)
    rig.fetched(P0, batch(5, values(3)), offset=5)
    assert rig.collect() == {}
    assert rig.position(P0) == 0


def test_fetch_of_an_unassigned_partition_is_dropped() -> None:
    rig = Rig()
    rig.fetched(P1, batch(0, values(3)))
    rig.subscription.assign_from_user([P0])
    assert rig.collect() == {}


def test_seek_while_reading_a_fetch_drops_the_rest_of_it() -> None:
    rig = Rig(P0, max_poll_records=2)
    rig.fetched(P0, batch(0, values(6)))
    rig.collect()
    rig.subscription.seek(P0, FetchPosition(1))
    assert rig.collect() == {}
    assert rig.position(P0) == 1


def test_collect_skips_records_before_the_fetch_offset() -> None:
    rig = Rig(P0)
    rig.subscription.seek(P0, FetchPosition(2))
    rig.fetched(P0, batch(0, values(5)))  # brokers return whole batches
    assert rig.offsets() == {P0: [2, 3, 4]}


def test_control_batches_are_skipped_and_the_position_moves_past_them() -> None:
    rig = Rig(P0)
    rig.fetched(P0, batch(0, [b"a"], producer_id=7, transactional=True), control(1, CONTROL_COMMIT, 7))
    assert rig.collect() == {P0: [b"a"]}
    assert rig.position(P0) == 2


def test_a_full_call_ending_before_a_marker_stops_there_and_the_next_call_moves_past_it() -> None:
    rig = Rig(P0, max_poll_records=2)
    rig.fetched(
        P0,
        batch(0, [b"a", b"b"], producer_id=7, transactional=True),
        control(2, CONTROL_COMMIT, 7),
        read_committed=True,
    )
    assert rig.collect() == {P0: [b"a", b"b"]}
    assert rig.position(P0) == 2  # the call was full: the marker is not looked at yet
    assert rig.collect() == {}
    assert rig.position(P0) == 3
    assert rig.buffer.size_bytes() == 0


def test_a_call_taking_the_rest_of_a_fetch_moves_past_its_trailing_markers() -> None:
    rig = Rig(P0, max_poll_records=3)
    rig.fetched(
        P0,
        batch(0, [b"a", b"b"], producer_id=7, transactional=True),
        control(2, CONTROL_COMMIT, 7),
        read_committed=True,
    )
    assert rig.collect() == {P0: [b"a", b"b"]}
    assert rig.position(P0) == 3


def test_pause_then_seek_in_the_middle_of_a_fetch_reads_from_the_new_position() -> None:
    rig = Rig(P0, max_poll_records=2)
    rig.fetched(P0, batch(0, values(6)))
    assert rig.offsets() == {P0: [0, 1]}
    rig.subscription.pause([P0])
    assert rig.collect() == {}
    rig.subscription.seek(P0, FetchPosition(4))
    rig.subscription.resume([P0])
    assert rig.collect() == {}  # the parked fetch continued at 2: dropped, fetched again
    assert rig.buffer.size_bytes() == 0
    assert rig.position(P0) == 4


def test_read_committed_drops_aborted_transactions() -> None:
    rig = Rig(P0)
    rig.fetched(
        P0,
        batch(0, [b"t7-a"], producer_id=7, transactional=True),
        batch(1, [b"t8-a"], producer_id=8, transactional=True),
        batch(2, [b"t7-b"], producer_id=7, transactional=True),
        control(3, CONTROL_ABORT, 8),
        control(4, CONTROL_COMMIT, 7),
        batch(5, [b"t8-new"], producer_id=8, transactional=True),
        batch(6, [b"plain"]),
        aborted=[(8, 1)],
        read_committed=True,
    )
    assert rig.collect() == {P0: [b"t7-a", b"t7-b", b"t8-new", b"plain"]}
    assert rig.position(P0) == 7


def test_read_uncommitted_returns_aborted_records_too() -> None:
    rig = Rig(P0)
    rig.fetched(
        P0,
        batch(0, [b"aborted"], producer_id=8, transactional=True),
        control(1, CONTROL_ABORT, 8),
        aborted=[(8, 0)],
        read_committed=False,
    )
    assert rig.collect() == {P0: [b"aborted"]}


def test_corrupt_batch_comes_after_the_good_records_and_keeps_raising() -> None:
    rig = Rig(P0)
    rig.fetched(P0, batch(0, values(2)), corrupt(2, values(3)))
    assert rig.offsets() == {P0: [0, 1]}
    for _ in range(2):
        with pytest.raises(CorruptRecordError) as info:
            rig.collect()
        assert (info.value.topic, info.value.partition, info.value.offset) == ("t", 0, 2)
    assert rig.position(P0) == 2


def test_seeking_past_a_corrupt_batch_moves_on() -> None:
    rig = Rig(P0)
    rig.fetched(P0, corrupt(0, values(3)))
    with pytest.raises(CorruptRecordError):
        rig.collect()
    rig.subscription.seek(P0, FetchPosition(3))
    assert rig.collect() == {}
    rig.fetched(P0, batch(3, [b"next"]))
    assert rig.collect() == {P0: [b"next"]}


@pytest.mark.ci_may_skip("the module runs once per sink; deserializers apply to poll()'s only")
def test_deserializer_error_names_the_offset_and_keeps_the_position() -> None:
    def strict(data: bytes | None) -> str:
        if data == b"bad":
            raise ValueError("not utf-8 enough")
        return (data or b"").decode()

    if Rig.sink == "columns":
        pytest.skip("deserializers apply to poll() only")
    rig = Rig(P0, value_deserializer=strict)
    rig.fetched(P0, batch(0, [b"ok", b"bad", b"later"]))
    assert rig.collect() == {P0: ["ok"]}
    for _ in range(2):
        with pytest.raises(RecordDeserializationError) as info:
            rig.collect()
        assert (info.value.topic_partition, info.value.offset, info.value.origin) == (P0, 1, "value")
        assert rig.position(P0) == 1


@pytest.mark.ci_may_skip("the module runs once per sink; deserializers apply to poll()'s only")
def test_a_deserializer_error_carries_the_records_raw_bytes_timestamp_and_headers() -> None:
    """KIP-1036: the error holds the record as fetched, for a dead-letter queue."""
    if Rig.sink == "columns":
        pytest.skip("deserializers apply to poll() only")

    def strict(data: bytes | None) -> str:
        if data == b"\xffbad":
            raise ValueError("not utf-8")
        return (data or b"").decode()

    builder = BatchBuilder(base_offset=0)
    builder.append(1_000, b"k0", b"ok")
    builder.append(1_001, b"k1", b"\xffbad", [("trace", b"t-1"), ("empty", None)])
    rig = Rig(P0, value_deserializer=strict)
    rig.fetched(P0, builder.build())
    assert rig.collect() == {P0: ["ok"]}
    with pytest.raises(RecordDeserializationError) as info:
        rig.collect()
    error = info.value
    assert (error.offset, error.origin) == (1, "value")
    assert (error.key, error.value) == (b"k1", b"\xffbad")
    assert (error.timestamp, error.timestamp_type) == (1_001, 0)
    assert error.headers == [("trace", b"t-1"), ("empty", None)]


@pytest.mark.ci_may_skip("the module runs once per sink; this test mixes both sinks itself")
def test_columns_after_a_deserializer_failure_start_at_the_failing_record() -> None:
    """poll() failed on a record; poll_arrow() (no deserializers) returns it and goes on."""
    if Rig.sink == "columns":
        pytest.skip("mixes both sinks itself")

    def strict(data: bytes | None) -> bytes:
        if data == b"bad":
            raise ValueError("no")
        return data or b""

    rig = Rig(P0, value_deserializer=strict, max_poll_records=2)
    rig.fetched(P0, batch(0, [b"a", b"bad", b"c", b"d"]), batch(4, [b"e"]))
    assert rig.collect() == {P0: [b"a"]}
    assert rig.position(P0) == 1
    rows = rows_by_partition(rig.collector.collect_arrow())
    assert [(r.offset, r.value) for r in rows[P0]] == [(1, b"bad"), (2, b"c")]
    assert rig.collect() == {P0: [b"d", b"e"]}
    assert rig.position(P0) == 5


def test_failed_fetch_raises_its_error() -> None:
    rig = Rig(P0)
    rig.fetched(P0, error=OffsetOutOfRangeError("fetching t-0"))
    with pytest.raises(OffsetOutOfRangeError):
        rig.collect()
    assert rig.collect() == {}


def test_failed_fetch_after_records_is_raised_on_the_next_collect() -> None:
    rig = Rig()
    rig.fetched(P0, batch(0, [b"a"]))
    rig.fetched(P1, error=OffsetOutOfRangeError("fetching t-1"))
    assert rig.collect() == {P0: [b"a"]}
    with pytest.raises(OffsetOutOfRangeError):
        rig.collect()


def test_retain_all_drops_data_of_partitions_no_longer_assigned() -> None:
    rig = Rig()
    rig.fetched(P0, batch(0, values(2)))
    kept = rig.fetched(P1, batch(0, values(2)))
    rig.buffer.retain_all({P1})
    assert rig.buffer.buffered_partitions() == {P1}
    assert rig.buffer.size_bytes() == kept.size_bytes


def test_await_not_empty_returns_at_once_when_data_is_buffered() -> None:
    rig = Rig(P0)
    rig.fetched(P0, batch(0, [b"a"]))
    assert rig.buffer.await_not_empty(0.0) is True


def test_wakeup_cuts_await_not_empty_short() -> None:
    buffer = FetchBuffer()
    buffer.wakeup()
    assert buffer.await_not_empty(30.0) is False


def test_seek_while_reading_releases_the_buffer_so_fetching_resumes() -> None:
    fake = FakeCluster()
    (tp,) = fake.create_topic("t", 1)
    fake.produce(tp, values(5))
    side = connect(fake, ["t"])
    subscription = SubscriptionState(ResetStrategy.EARLIEST)
    subscription.assign_from_user([tp])
    subscription.seek(tp, FetchPosition(0))
    buffer = FetchBuffer()
    fetcher = side.fetcher(subscription, buffer, fetch_max_bytes=1 << 20, buffer_max_bytes=1)
    collector = FetchCollector(subscription, buffer, max_poll_records=2)
    side.net.run([fetcher], 0)
    assert len(collector.collect()[tp]) == 2
    subscription.seek(tp, FetchPosition(0))  # read it again from the start
    assert collector.collect() == {}
    assert buffer.size_bytes() == 0
    assert fetcher.poll(1).unsent != []


def test_out_of_range_error_for_an_abandoned_position_is_not_raised() -> None:
    rig = Rig(P0)
    rig.fetched(P0, offset=50, error=OffsetOutOfRangeError("fetching t-0 at offset 50"))
    rig.subscription.seek(P0, FetchPosition(3))
    assert rig.collect() == {}


def test_out_of_range_error_from_a_fetch_names_the_partition_and_offset() -> None:
    fake = FakeCluster()
    (tp,) = fake.create_topic("t", 1)
    side = connect(fake, ["t"])
    subscription = SubscriptionState(ResetStrategy.NONE)
    subscription.assign_from_user([tp])
    subscription.seek(tp, FetchPosition(50))
    buffer = FetchBuffer()
    fetcher = side.fetcher(subscription, buffer, fetch_max_bytes=1 << 20, buffer_max_bytes=1 << 20)
    side.net.run([fetcher], 0)
    with pytest.raises(OffsetOutOfRangeError) as info:
        FetchCollector(subscription, buffer, max_poll_records=10).collect()
    assert info.value.offsets == {tp: 50}


# --- corrupt data: the sticky error and where it is reported ---------------------------------------------

GARBAGE_OFFSET = -592381556101223951  # what the random batch claimed as its base offset


def random_batch() -> bytes:
    """A "batch" of random bytes whose base offset field reads as :data:`GARBAGE_OFFSET`."""
    data = struct.pack(">q", GARBAGE_OFFSET) + random.Random(16277).randbytes(200)
    assert data[16] != 2  # not even the magic byte is right
    return data


def bad_crc_batch(base: int, values: Sequence[bytes]) -> bytes:
    """A batch whose CRC is wrong and whose base offset field (not covered by the CRC) is garbage."""
    data = bytearray(corrupt(base, values))
    struct.pack_into(">q", data, 0, GARBAGE_OFFSET)
    return bytes(data)


def traceback_depth(exc: BaseException) -> int:
    return len(traceback.extract_tb(exc.__traceback__))


@pytest.mark.parametrize("good_first", [False, True], ids=["corrupt-first", "after-good-records"])
def test_polling_over_a_corrupt_batch_does_not_grow_the_error(good_first: bool) -> None:
    rig = Rig(P0)
    rig.fetched(
        P0, *([batch(0, values(2))] if good_first else []), corrupt(2 if good_first else 0, values(3))
    )
    if good_first:
        assert rig.offsets() == {P0: [0, 1]}
    depths = []
    for _ in range(200):
        with pytest.raises(CorruptRecordError) as info:
            rig.collect()
        err = info.value
        depths.append(traceback_depth(err))
        assert err.__context__ is not err and err.__cause__ is not err
        seen: set[int] = set()
        link: BaseException | None = err
        while link is not None:  # a finite chain of other exceptions, not a growing or cyclic one
            assert id(link) not in seen
            seen.add(id(link))
            link = link.__context__
        assert len(seen) <= 2
    assert depths == [depths[0]] * 200
    assert rig.position(P0) == (2 if good_first else 0)


@pytest.mark.parametrize(
    ("data", "reason"),
    [(random_batch(), "magic"), (bad_crc_batch(42, values(3)), "CRC")],
    ids=["random-bytes", "bad-crc"],
)
def test_corrupt_batch_error_reports_the_consumer_position(data: bytes, reason: str) -> None:
    rig = Rig(P0)
    rig.subscription.seek(P0, FetchPosition(42))
    rig.fetched(P0, data)
    with pytest.raises(CorruptRecordError, match=reason) as info:
        rig.collect()
    err = info.value
    assert (err.topic, err.partition, err.offset) == ("t", 0, 42)
    message = str(err)
    assert "t-0 at offset 42" in message
    assert str(GARBAGE_OFFSET)[1:] not in message  # nothing parsed from the bad bytes
    assert "seek t-0 to an offset beyond the corrupt batch" in message
    assert rig.position(P0) == 42


def test_corrupt_batch_after_good_ones_reports_the_last_good_position() -> None:
    rig = Rig(P0)
    rig.subscription.seek(P0, FetchPosition(42))
    rig.fetched(P0, batch(42, values(2)), random_batch())
    assert rig.offsets() == {P0: [42, 43]}
    for _ in range(2):
        with pytest.raises(CorruptRecordError) as info:
            rig.collect()
        assert (info.value.topic, info.value.partition, info.value.offset) == ("t", 0, 44)
        assert str(GARBAGE_OFFSET)[1:] not in str(info.value)
