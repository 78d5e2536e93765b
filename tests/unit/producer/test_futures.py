"""Record futures: one shared result per batch, light per-record futures that still behave as
``concurrent.futures.Future`` (wait, as_completed, callbacks), and delivery callbacks."""

from __future__ import annotations

import concurrent.futures
import gc
import threading
import weakref
from concurrent.futures import Future
from types import ModuleType

import pytest

from kaflux.errors import KafkaError, NotLeaderOrFollowerError
from kaflux.producer.futures import BatchFuture, BatchMetadata, ProduceResult, RecordFuture
from kaflux.records import encode, kernels
from kaflux.structs import RecordMetadata, TopicPartition

TP = TopicPartition("t", 3)


def futures_of(result: ProduceResult, count: int) -> list[RecordFuture]:
    return [RecordFuture(result, i, 1_000 + i) for i in range(count)]


def test_record_futures_resolve_to_their_offsets_and_timestamps() -> None:
    result = ProduceResult(TP)
    futures = futures_of(result, 3)
    assert isinstance(futures[0], Future)
    assert not any(f.done() for f in futures)
    result.complete(40)
    assert [f.result(0) for f in futures] == [RecordMetadata("t", 3, 40 + i, 1_000 + i) for i in range(3)]
    assert futures[0].exception(0) is None


def test_log_append_time_replaces_the_record_timestamps() -> None:
    result = ProduceResult(TP)
    (future,) = futures_of(result, 1)
    result.complete(5, log_append_time=9_999)
    assert future.result(0).timestamp == 9_999


def test_a_failed_batch_fails_every_record() -> None:
    result = ProduceResult(TP)
    futures = futures_of(result, 2)
    result.fail(NotLeaderOrFollowerError("gone"))
    for future in futures:
        with pytest.raises(NotLeaderOrFollowerError):
            future.result(0)
        assert isinstance(future.exception(0), NotLeaderOrFollowerError)


def test_only_the_first_outcome_counts() -> None:
    result = ProduceResult(TP)
    (future,) = futures_of(result, 1)
    result.complete(1)
    result.fail(KafkaError("late"))
    assert future.result(0).offset == 1


def test_result_times_out_while_pending() -> None:
    (future,) = futures_of(ProduceResult(TP), 1)
    with pytest.raises(concurrent.futures.TimeoutError):
        future.result(0.01)


def test_done_callbacks_run_once_when_the_batch_completes_or_at_once_after() -> None:
    result = ProduceResult(TP)
    early, late = futures_of(result, 2)
    calls: list[RecordFuture] = []
    early.add_done_callback(calls.append)  # type: ignore[arg-type]
    assert calls == []
    result.complete(0)
    late.add_done_callback(calls.append)  # type: ignore[arg-type]
    assert calls == [early, late]


def test_delivery_callbacks_get_metadata_or_the_error_in_record_order() -> None:
    ok, failed = ProduceResult(TP), ProduceResult(TP)
    calls: list[tuple[RecordMetadata, KafkaError | None]] = []
    for index in range(3):
        ok.add_delivery_callback(index, 100 + index, lambda m, e: calls.append((m, e)))
    failed.add_delivery_callback(0, 7, lambda m, e: calls.append((m, e)))
    ok.complete(10)
    error = NotLeaderOrFollowerError("x")
    failed.fail(error)
    assert calls == [
        (RecordMetadata("t", 3, 10, 100), None),
        (RecordMetadata("t", 3, 11, 101), None),
        (RecordMetadata("t", 3, 12, 102), None),
        (RecordMetadata("t", 3, -1, 7), error),
    ]


def test_a_raising_delivery_callback_does_not_stop_the_others(caplog: pytest.LogCaptureFixture) -> None:
    result = ProduceResult(TP)
    calls: list[int] = []

    def boom(metadata: RecordMetadata, error: KafkaError | None) -> None:
        raise RuntimeError("application bug")

    result.add_delivery_callback(0, 0, boom)
    result.add_delivery_callback(1, 0, lambda m, e: calls.append(m.offset))
    result.complete(0)
    assert calls == [1]
    assert "delivery callback" in caplog.text


def test_concurrent_futures_wait_and_as_completed_accept_record_futures() -> None:
    first, second = ProduceResult(TP), ProduceResult(TP)
    futures = futures_of(first, 2) + futures_of(second, 1)
    done, not_done = concurrent.futures.wait(futures, timeout=0)
    assert (done, not_done) == (set(), set(futures))
    first.complete(0)
    done, not_done = concurrent.futures.wait(futures, timeout=0)
    assert done == set(futures[:2]) and not_done == {futures[2]}
    threading.Timer(0.05, second.complete, args=(5,)).start()
    done, _ = concurrent.futures.wait(futures, timeout=5)
    assert done == set(futures)
    assert {f.result(0).offset for f in concurrent.futures.as_completed(futures, timeout=5)} == {0, 1, 5}


def test_record_futures_cannot_be_cancelled_or_completed_by_hand() -> None:
    (future,) = futures_of(ProduceResult(TP), 1)
    assert future.cancel() is False
    assert not future.cancelled()
    with pytest.raises(RuntimeError):
        future.set_result(RecordMetadata("t", 0, 0, 0))


def test_batch_futures_resolve_to_batch_metadata() -> None:
    result = ProduceResult(TP)
    future = BatchFuture(result, 250, 77)
    result.complete(1_000)
    assert future.result(0) == BatchMetadata("t", 3, 1_000, 250, 77)


def test_callbacks_registered_on_an_open_batch_get_log_append_time_metadata() -> None:
    result = ProduceResult(TP)
    calls: list[tuple[RecordMetadata, KafkaError | None]] = []
    first = result.open_future(0, 5, lambda m, e: calls.append((m, e)), encode.untrack)
    second = result.open_future(1, 6, lambda m, e: calls.append((m, e)), encode.untrack)
    third = result.open_future(2, 7, None, encode.untrack)
    assert not first.done() and not third.done()
    result.complete(40, log_append_time=999)
    assert [f.result(0) for f in (first, second, third)] == [
        RecordMetadata("t", 3, 40, 999),
        RecordMetadata("t", 3, 41, 999),
        RecordMetadata("t", 3, 42, 999),
    ]
    assert type(third) is RecordFuture
    assert calls == [(RecordMetadata("t", 3, 40, 999), None), (RecordMetadata("t", 3, 41, 999), None)]
    assert all(type(metadata) is RecordMetadata for metadata, _ in calls)
    assert calls[0][0].offset == 40 and calls[1][0].timestamp == 999


def _encoders() -> list[ModuleType]:
    try:
        return [encode, kernels.load_compiled_encoder()]
    except ImportError:  # pragma: no cover - a build without the extension
        return [encode]


@pytest.mark.parametrize("encoder", _encoders(), ids=lambda m: m.KIND)
def test_open_futures_leave_the_cyclic_gc_until_they_get_plain_future_internals(encoder: ModuleType) -> None:
    result = ProduceResult(TP)
    calls: list[RecordMetadata] = []
    future = result.open_future(0, 5, lambda m, e: calls.append(m), encoder.untrack)
    kept = result.open_future(1, 6, None, encoder.untrack)
    # the compiled encoder untracks them; the pure one cannot
    assert gc.is_tracked(future) is (encoder.KIND == "pure")
    assert gc.is_tracked(kept) is (encoder.KIND == "pure")
    done, pending = concurrent.futures.wait([future], timeout=0)  # makes its Future internals
    assert (done, pending) == (set(), {future})
    assert gc.is_tracked(future)
    result.complete(7)
    assert concurrent.futures.wait([future], timeout=0).done == {future}
    assert future.result(0) == RecordMetadata("t", 3, 7, 5) == calls[0]
    assert kept.result(0) == RecordMetadata("t", 3, 8, 6)
    # no cycle goes through an untracked future: its reference count alone frees it
    gone = weakref.ref(kept)
    del kept
    assert gone() is None
