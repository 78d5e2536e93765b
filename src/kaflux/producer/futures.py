"""What ``send()`` returns: one shared result per batch, one light future per record.
[shared: the network thread completes a :class:`ProduceResult`; any thread waits on its futures]

A ``concurrent.futures.Future`` costs about a microsecond to create and another to complete,
more than everything else ``send()`` does. So, as Java's ``FutureRecordMetadata`` and
``ProduceRequestResult``, the records of a batch share one :class:`ProduceResult` (completed once,
by the network thread), and each record gets a :class:`RecordFuture` that only knows its result
and its place in the batch. A record future is a real ``Future`` subclass: ``result()``,
``exception()``, ``done()`` and ``add_done_callback()`` read the shared result, and
``concurrent.futures.wait()`` / ``as_completed()`` work too (a record future touched by them
gets the ordinary ``Future`` internals on first use and is completed with its batch).

Delivery callbacks (``send(..., callback=fn)``) are kept on the result and called, in record
order, on the network thread when the batch completes: ``fn(metadata, None)`` on success,
``fn(metadata, error)`` on failure, with ``metadata.offset == -1`` then (as Java does). They must
be quick; an exception in one is logged and does not affect the others.
"""

from __future__ import annotations

import gc
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeoutError
from typing import Any, NamedTuple, TypeVar

from kaflux.errors import KafkaError
from kaflux.records import kernels
from kaflux.structs import RecordMetadata, TopicPartition

__all__ = ["BatchFuture", "BatchMetadata", "DeliveryCallback", "ProduceResult", "RecordFuture"]

log = logging.getLogger("kaflux.producer")
#: ``object.__new__``: an instance without running its class's ``__init__``.
_new_object: Any = object.__new__

#: ``callback(metadata, error)``; ``error`` is None on success.
DeliveryCallback = Callable[[RecordMetadata, KafkaError | None], Any]

T = TypeVar("T")

#: The attributes of a plain ``Future`` that ``concurrent.futures.wait`` and friends read.
_FUTURE_INTERNALS = frozenset(
    {"_condition", "_state", "_result", "_exception", "_waiters", "_done_callbacks"}
)


class BatchMetadata(NamedTuple):
    """Where one batch of ``send_arrow()`` landed: its first offset and how many records it held
    (offset -1 with ``acks=0``)."""

    topic: str
    partition: int
    offset: int
    record_count: int
    timestamp: int


class ProduceResult:
    """The outcome of one batch, shared by the futures of its records."""

    __slots__ = (
        "_callbacks",
        "_done",
        "_done_callbacks",
        "_lock",
        "_materialized",
        "_waiter",
        "base_offset",
        "error",
        "log_append_time",
        "tp",
    )

    def __init__(self, tp: TopicPartition) -> None:
        self.tp = tp
        self.base_offset = -1
        self.log_append_time = -1
        self.error: BaseException | None = None
        #: set once, under the lock; read without it (a bool read is atomic)
        self._done = False
        #: made by the first wait() before the outcome: most batches are never waited for, and
        #: an Event (a Condition and two locks) per batch was a measurable share of send()
        self._waiter: threading.Event | None = None
        self._lock = threading.Lock()
        #: delivery callbacks, flat: index, timestamp, callback for each record. A tuple per
        #: record would be a container the cyclic GC tracks: with hundreds of thousands of
        #: records in flight, every full collection walked them all (0.5-0.8 µs per record)
        self._callbacks: list[Any] | None = None
        self._done_callbacks: list[tuple[Future[Any], Callable[[Any], object]]] | None = None
        self._materialized: list[_ResultFuture[Any]] | None = None

    @property
    def done(self) -> bool:
        """Whether the batch has an outcome."""
        return self._done

    def wait(self, timeout: float | None) -> bool:
        """Block until the batch has an outcome; False if ``timeout`` seconds passed first."""
        if self._done:
            return True
        with self._lock:
            if self._done:
                return True
            if self._waiter is None:
                self._waiter = threading.Event()
            waiter = self._waiter
        return waiter.wait(timeout)

    def metadata(self, index: int, timestamp: int) -> RecordMetadata:
        """Where the batch's record number ``index`` landed (offset -1 while unknown)."""
        offset = self.base_offset + index if self.base_offset >= 0 else -1
        ts = self.log_append_time if self.log_append_time >= 0 else timestamp
        return RecordMetadata(self.tp.topic, self.tp.partition, offset, ts)

    def add_delivery_callback(self, index: int, timestamp: int, callback: DeliveryCallback) -> None:
        """Call ``callback`` for record ``index`` when the batch completes (at once if it has)."""
        with self._lock:
            if not self._done:
                if self._callbacks is None:
                    self._callbacks = [index, timestamp, callback]
                else:
                    self._callbacks += (index, timestamp, callback)
                return
        self._call_delivery(index, timestamp, callback)

    def open_future(
        self,
        index: int,
        timestamp: int,
        callback: DeliveryCallback | None,
        untrack: Callable[[object], None],
    ) -> RecordFuture:
        """The future of record ``index`` of a batch that cannot have an outcome yet, with its
        delivery ``callback`` (if any) registered, without taking this result's lock: the
        record accumulator calls it while it holds its own lock and the batch is still open
        (queued, not drained), and every path to an outcome first takes the batch out of its
        queue under that lock, so :meth:`_finish` sees the callback.

        One call for what ``send()`` does per record (register, make the future): the
        future is made here without ``RecordFuture.__init__``'s Python frame, and is passed to
        ``untrack`` (the record encoder's: the compiled one takes it out of the cyclic garbage
        collector, see :class:`RecordFuture`)."""
        if callback is not None:
            callbacks = self._callbacks
            if callbacks is None:
                self._callbacks = [index, timestamp, callback]
            else:
                callbacks += (index, timestamp, callback)
        future: RecordFuture = _new_object(RecordFuture)
        future._result_ref = self
        future._index = index
        future._timestamp = timestamp
        untrack(future)
        return future

    def add_done_callback(self, future: Future[Any], fn: Callable[[Any], object]) -> None:
        """``future.add_done_callback(fn)`` for a future of this result."""
        with self._lock:
            if not self._done:
                if self._done_callbacks is None:
                    self._done_callbacks = []
                self._done_callbacks.append((future, fn))
                return
        _call_done(future, fn)

    # -- the network thread ----------------------------------------------------------------

    def complete(self, base_offset: int, log_append_time: int = -1) -> None:
        """The batch was written at ``base_offset``; resolve every record. Once only."""
        self._finish(base_offset, log_append_time, None)

    def fail(self, error: BaseException) -> None:
        """The batch failed with ``error``; fail every record. Once only."""
        self._finish(-1, -1, error)

    def _finish(self, base_offset: int, log_append_time: int, error: BaseException | None) -> None:
        with self._lock:
            if self._done:
                return
            self.base_offset = base_offset
            self.log_append_time = log_append_time
            self.error = error
            self._done = True
            waiter = self._waiter
            callbacks, self._callbacks = self._callbacks, None
            done_callbacks, self._done_callbacks = self._done_callbacks, None
            materialized, self._materialized = self._materialized, None
        if waiter is not None:  # set outside the lock: one lock at a time
            waiter.set()
        if materialized:
            for settled in materialized:
                settled._settle()
        if callbacks:
            if error is None:
                self._call_deliveries(callbacks)
            else:
                each = iter(callbacks)
                for index, timestamp, callback in zip(each, each, each, strict=True):
                    self._call_delivery(index, timestamp, callback)
        if done_callbacks:
            for future, fn in done_callbacks:
                _call_done(future, fn)

    def _call_deliveries(self, callbacks: list[Any]) -> None:
        """The delivery callbacks of a batch written without error: :meth:`_call_delivery`'s
        success case for many records in one loop, run by the record encoder (compiled: one
        metadata tuple made per record in C, no Python frame besides the callback's)."""
        tp = self.tp
        _deliveries()(
            callbacks,
            RecordMetadata,
            tp.topic,
            tp.partition,
            self.base_offset,
            self.log_append_time,
            self._delivery_raised,
        )

    def _delivery_raised(self) -> None:
        """Log the exception a delivery callback raised (called in its ``except`` block)."""
        log.exception("a delivery callback for %s raised", self.tp)

    def _call_delivery(self, index: int, timestamp: int, callback: DeliveryCallback) -> None:
        error = self.error
        try:
            if error is None:
                callback(self.metadata(index, timestamp), None)
            else:
                failed = RecordMetadata(self.tp.topic, self.tp.partition, -1, timestamp)
                callback(failed, error if isinstance(error, KafkaError) else KafkaError(str(error)))
        except Exception:
            log.exception("a delivery callback for %s raised", self.tp)

    def _materialize(self, future: _ResultFuture[Any]) -> None:
        """Give ``future`` the internals of a plain Future (for concurrent.futures.wait...)."""
        if not gc.is_tracked(future):
            # Its plain-Future internals (a condition, waiters) may take part in cycles.
            _compiled_track()(future)
        with self._lock:
            Future.__init__(future)
            if self._done:
                future._settle()
            else:
                if self._materialized is None:
                    self._materialized = []
                self._materialized.append(future)


#: the record encoder's call_deliveries (resolved on first use, as the producer's encoder is)
_call_deliveries_fn: Callable[..., None] | None = None


def _deliveries() -> Callable[..., None]:
    global _call_deliveries_fn
    if _call_deliveries_fn is None:
        _call_deliveries_fn = kernels.encoder().call_deliveries
    return _call_deliveries_fn


def _compiled_track() -> Callable[[object], None]:
    """The compiled encoder's ``track``: only it untracks futures, so only it is asked to
    track one again (imported on first use)."""
    from kaflux.records._encode import track

    return track


def _call_done(future: Future[Any], fn: Callable[[Any], object]) -> None:
    try:
        fn(future)
    except Exception:
        log.exception("a done-callback of a producer future raised")


class _ResultFuture(Future[T]):
    """A future read from a :class:`ProduceResult`; :meth:`_value` says what it resolves to."""

    __slots__ = ("_result_ref",)
    _result_ref: ProduceResult

    def _value(self) -> T:  # pragma: no cover - every subclass overrides it
        raise NotImplementedError

    def __getattr__(self, name: str) -> Any:
        # Only reached for attributes not set yet: the plain-Future internals, on first use.
        if name in _FUTURE_INTERNALS:
            self._result_ref._materialize(self)
            return object.__getattribute__(self, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _settle(self) -> None:
        """Complete the plain-Future internals from the result (called under its lock)."""
        error = self._result_ref.error
        if error is None:
            Future.set_result(self, self._value())
        else:
            Future.set_exception(self, error)

    def cancel(self) -> bool:
        """A record on its way cannot be cancelled: always False (as Java)."""
        return False

    def cancelled(self) -> bool:
        return False

    def running(self) -> bool:
        return not self._result_ref.done

    def done(self) -> bool:
        return self._result_ref.done

    def result(self, timeout: float | None = None) -> T:
        """The value once the batch completed; raises its error if it failed.

        Raises:
            TimeoutError: not complete within ``timeout`` seconds.
        """
        result = self._result_ref
        if not result.wait(timeout):
            raise FutureTimeoutError()
        if result.error is not None:
            raise result.error
        return self._value()

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The error once the batch completed (None on success).

        Raises:
            TimeoutError: not complete within ``timeout`` seconds.
        """
        result = self._result_ref
        if not result.wait(timeout):
            raise FutureTimeoutError()
        return result.error

    def add_done_callback(self, fn: Callable[[Future[T]], object]) -> None:
        """Call ``fn(self)`` once the record's batch completed (on the network thread), or now."""
        self._result_ref.add_done_callback(self, fn)

    def set_running_or_notify_cancel(self) -> bool:
        raise RuntimeError("producer futures are completed by the producer")

    def set_result(self, result: T) -> None:
        raise RuntimeError("producer futures are completed by the producer")

    def set_exception(self, exception: BaseException | None) -> None:
        raise RuntimeError("producer futures are completed by the producer")

    def __repr__(self) -> str:
        result = self._result_ref
        if not result.done:
            return f"<{type(self).__name__} {result.tp} pending>"
        if result.error is not None:
            return f"<{type(self).__name__} {result.tp} failed: {type(result.error).__name__}>"
        return f"<{type(self).__name__} {self._value()}>"


class RecordFuture(_ResultFuture[RecordMetadata]):
    """The future of one record: resolves to its :class:`~kaflux.RecordMetadata`.

    The futures ``send()`` makes are not tracked by the cyclic garbage collector (with the
    compiled record encoder): an application that keeps them (a list of a million futures)
    made every full collection walk them all, about 0.5 µs per record in all. A record future
    refers only to its batch's result, which drops its callbacks once complete, so no cycle
    goes through it for good; one that gets its plain-``Future`` internals (for
    ``concurrent.futures.wait``...) is tracked again. Attributes an application sets on a
    record future must not refer back to it (such a cycle would not be collected).
    """

    __slots__ = ("_index", "_timestamp")

    def __init__(self, result: ProduceResult, index: int, timestamp: int) -> None:
        # No Future.__init__: the plain internals are made only if something asks for them.
        self._result_ref = result
        self._index = index
        self._timestamp = timestamp

    def _value(self) -> RecordMetadata:
        return self._result_ref.metadata(self._index, self._timestamp)


class BatchFuture(_ResultFuture[BatchMetadata]):
    """The future of one ``send_arrow()`` batch: resolves to its :class:`BatchMetadata`."""

    __slots__ = ("_count", "_timestamp")

    def __init__(self, result: ProduceResult, record_count: int, timestamp: int) -> None:
        self._result_ref = result
        self._count = record_count
        self._timestamp = timestamp

    def _value(self) -> BatchMetadata:
        result = self._result_ref
        ts = result.log_append_time if result.log_append_time >= 0 else self._timestamp
        return BatchMetadata(result.tp.topic, result.tp.partition, result.base_offset, self._count, ts)
