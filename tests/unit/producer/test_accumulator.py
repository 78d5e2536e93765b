"""RecordAccumulator: linger, batch.size, buffer.memory, ordering and expiry."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from kaflux.errors import KafkaTimeoutError
from kaflux.producer.accumulator import BATCH_OVERHEAD, RecordAccumulator, record_size
from kaflux.records import iter_batches
from kaflux.structs import TopicPartition

TP = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)
FAR = 1e12  # a max.block.ms deadline that never passes


def accumulator(
    *,
    batch_size: int = 16384,
    linger_ms: int = 5,
    buffer_memory: int = 1 << 25,
    delivery_timeout_ms: int = 120_000,
) -> RecordAccumulator:
    return RecordAccumulator(
        batch_size=batch_size,
        linger_ms=linger_ms,
        buffer_memory=buffer_memory,
        compression=0,
        delivery_timeout_ms=delivery_timeout_ms,
    )


def clock(value: float = 0.0) -> Callable[[], float]:
    return lambda: value


def append(acc: RecordAccumulator, tp: TopicPartition = TP, value: bytes = b"v", now_ms: int = 0) -> bool:
    """Append one record; returns whether it rolled over to a new batch because the last was full."""
    _, _, rolled_over = acc.append(tp, 1_000, None, value, [], now_ms, FAR, clock())
    return rolled_over


def leader_0(_: TopicPartition) -> int:
    return 0


def values_of(batch_bytes: bytes) -> list[bytes | None]:
    return [r.value for b in iter_batches(memoryview(batch_bytes)) for r in b.records()]


def test_batch_is_not_ready_before_linger_ms() -> None:
    acc = accumulator(linger_ms=5)
    append(acc, now_ms=100)
    ready, wait_ms, _ = acc.drain_ready(104, leader_0)
    assert ready == {}
    assert wait_ms == 1


def test_batch_is_ready_once_linger_ms_passed() -> None:
    acc = accumulator(linger_ms=5)
    append(acc, now_ms=100)
    ready, _, _ = acc.drain_ready(105, leader_0)
    assert [b.tp for b in ready[0]] == [TP]


def test_first_record_starts_a_batch_without_rolling_over() -> None:
    _, new_batch, rolled_over = accumulator().append(TP, 1_000, None, b"v", [], 0, FAR, clock())
    assert (new_batch, rolled_over) == (True, False)


def test_only_the_record_that_opens_a_batch_reports_a_new_batch() -> None:
    acc = accumulator()
    assert [acc.append(TP, 0, None, b"v", [], 0, FAR, clock())[1] for _ in range(3)] == [True, False, False]


def test_records_of_one_partition_share_a_batch() -> None:
    acc = accumulator()
    for value in (b"a", b"b", b"c"):
        assert append(acc, value=value) is False
    ready, _, _ = acc.drain_ready(10, leader_0)
    (batch,) = ready[0]
    assert values_of(batch.build(0)) == [b"a", b"b", b"c"]


def test_a_record_that_overflows_batch_size_starts_a_new_batch_and_the_full_one_is_ready() -> None:
    value = b"x" * 100
    acc = accumulator(batch_size=BATCH_OVERHEAD + 2 * record_size(None, value, []), linger_ms=1_000)
    assert append(acc, value=value) is False
    assert append(acc, value=value) is False
    assert append(acc, value=value) is True
    ready, _, _ = acc.drain_ready(0, leader_0)
    (batch,) = ready[0]
    assert batch.count == 2


def test_a_record_larger_than_batch_size_gets_a_batch_of_its_own() -> None:
    acc = accumulator(batch_size=10, linger_ms=1_000)
    append(acc, value=b"y" * 500)
    ready, _, _ = acc.drain_ready(0, leader_0)
    assert ready[0][0].count == 1


def test_flush_makes_lingering_batches_ready() -> None:
    acc = accumulator(linger_ms=1_000)
    append(acc)
    acc.begin_flush()
    assert acc.drain_ready(0, leader_0)[0]
    acc.end_flush()


def test_close_makes_lingering_batches_ready() -> None:
    acc = accumulator(linger_ms=1_000)
    append(acc)
    acc.close()
    assert acc.drain_ready(0, leader_0)[0]


def test_batches_are_grouped_by_leader() -> None:
    acc = accumulator(linger_ms=0)
    append(acc, TP)
    append(acc, TP1)
    ready, _, _ = acc.drain_ready(0, lambda tp: 10 + tp.partition)
    assert {node: [b.tp for b in batches] for node, batches in ready.items()} == {10: [TP], 11: [TP1]}


def test_partition_without_a_leader_is_reported_and_kept() -> None:
    acc = accumulator(linger_ms=0)
    append(acc)
    ready, _, unknown = acc.drain_ready(0, lambda _: None)
    assert ready == {}
    assert unknown
    assert acc.has_unsent()


def test_only_one_batch_per_partition_is_in_flight() -> None:
    value = b"x" * 100
    acc = accumulator(batch_size=BATCH_OVERHEAD + record_size(None, value, []), linger_ms=0)
    for _ in range(3):
        append(acc, value=value)
    first = acc.drain_ready(0, leader_0)[0][0][0]
    assert acc.drain_ready(1, leader_0)[0] == {}
    acc.deallocate(first)
    assert len(acc.drain_ready(2, leader_0)[0][0]) == 1


def test_reenqueued_batch_goes_first_and_waits_for_its_retry_time() -> None:
    acc = accumulator(linger_ms=0)
    append(acc, value=b"first")
    (first,) = acc.drain_ready(0, leader_0)[0][0]
    append(acc, value=b"second")
    acc.reenqueue(first, retry_at_ms=300)
    ready, wait_ms, _ = acc.drain_ready(100, leader_0)
    assert ready == {}
    assert wait_ms == 200
    (again,) = acc.drain_ready(300, leader_0)[0][0]
    assert again is first
    assert again.attempts == 1
    assert values_of(again.build(0)) == [b"first"]


def test_a_new_batch_takes_batch_size_bytes_of_buffer_memory_and_appends_take_none() -> None:
    acc = accumulator(buffer_memory=1_000, batch_size=600, linger_ms=1_000)
    append(acc, TP, value=b"a")
    for _ in range(20):
        append(acc, TP, value=b"b")  # joins the open batch: no new allocation, no wait
    with pytest.raises(KafkaTimeoutError, match=r"buffer\.memory=1000"):
        acc.append(TP1, 0, None, b"c", [], 0, 5.0, clock(5.0))  # another 600 bytes do not fit


def test_full_buffer_blocks_until_the_deadline_then_raises() -> None:
    acc = accumulator(buffer_memory=1_000, batch_size=600, linger_ms=1_000)
    append(acc, TP)
    readings = iter([4.99, 5.0])
    with pytest.raises(KafkaTimeoutError):
        acc.append(TP1, 0, None, b"more", [], 0, deadline_s=5.0, clock_s=lambda: next(readings))
    assert next(readings, "consumed") == "consumed", "the clock was read again after waiting"


def test_full_buffer_blocks_until_a_batch_is_freed() -> None:
    acc = accumulator(buffer_memory=1_000, batch_size=600, linger_ms=0)
    append(acc, TP)
    (batch,) = acc.drain_ready(0, leader_0)[0][0]
    waiting = threading.Event()
    results: list[object] = []

    def reading_clock() -> float:
        waiting.set()
        return time.monotonic()

    def blocked_append() -> None:
        results.append(acc.append(TP1, 0, None, b"more", [], 0, time.monotonic() + 30, reading_clock))

    thread = threading.Thread(target=blocked_append, daemon=True)
    thread.start()
    assert waiting.wait(5), "append did not reach the wait"
    assert results == []
    acc.deallocate(batch)
    thread.join(5)
    assert not thread.is_alive()
    assert len(results) == 1


def test_a_record_larger_than_batch_size_allocates_its_own_size() -> None:
    acc = accumulator(buffer_memory=1_000, batch_size=100, linger_ms=1_000)
    append(acc, TP, value=b"x" * 700)
    with pytest.raises(KafkaTimeoutError):
        acc.append(TP1, 0, None, b"y" * 400, [], 0, 5.0, clock(5.0))


def test_expire_returns_batches_older_than_delivery_timeout() -> None:
    acc = accumulator(delivery_timeout_ms=1_000, linger_ms=5_000)
    append(acc, TP, now_ms=0)
    append(acc, TP1, now_ms=500)
    assert acc.expire(999) == []
    (expired,) = acc.expire(1_000)
    assert expired.tp == TP
    assert not expired.done, "the sender fails the futures, not the accumulator"


def test_in_flight_batches_do_not_expire() -> None:
    acc = accumulator(delivery_timeout_ms=1_000, linger_ms=0)
    append(acc)
    acc.drain_ready(0, leader_0)
    assert acc.expire(5_000) == []


def test_complete_resolves_each_record_with_its_offset() -> None:
    acc = accumulator(linger_ms=0)
    futures = [acc.append(TP, 1_000 + i, None, b"v", [], 0, FAR, clock())[0] for i in range(3)]
    (batch,) = acc.drain_ready(0, leader_0)[0][0]
    batch.complete(base_offset=40, log_append_time_ms=-1)
    assert [(f.result().offset, f.result().timestamp) for f in futures] == [
        (40, 1_000),
        (41, 1_001),
        (42, 1_002),
    ]


def test_await_all_complete_waits_until_every_batch_is_finished() -> None:
    acc = accumulator(linger_ms=0)
    append(acc)
    assert acc.await_all_complete(1.0, clock(1.0)) is False
    (batch,) = acc.drain_ready(0, leader_0)[0][0]
    batch.complete(0, -1)
    acc.deallocate(batch)
    assert acc.await_all_complete(0.0, clock(1.0)) is True


def test_fail_all_fails_unsent_records() -> None:
    acc = accumulator(linger_ms=1_000)
    future, _, _ = acc.append(TP, 0, None, b"v", [], 0, FAR, clock())
    acc.fail_all(KafkaTimeoutError("closing"))
    with pytest.raises(KafkaTimeoutError, match="closing"):
        future.result(0)
    assert not acc.has_unsent()
