"""Per-partition batches waiting to be sent. [shared: the application thread appends, the
network thread drains; one lock and condition guard everything]

Memory is bounded by ``buffer.memory``: :meth:`RecordAccumulator.append` blocks (up to its
deadline) while the bytes of unsent and in-flight batches exceed it. A batch is ready when it
is full (``batch.size``), has waited ``linger.ms``, or a flush or close is under way. One
batch per partition is in flight at a time, so retries never reorder a partition.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

from kaflux.errors import KafkaTimeoutError
from kaflux.records import BatchBuilder
from kaflux.structs import RecordMetadata, TopicPartition

Header = tuple[str, bytes | None]

#: bytes a batch needs beyond its records (the v2 batch header)
BATCH_OVERHEAD = 61


def record_size(key: bytes | None, value: bytes | None, headers: Sequence[Header]) -> int:
    """An upper estimate of a record's encoded size (varint overheads included)."""
    return 21 + len(key or b"") + len(value or b"") + sum(len(k) + len(v or b"") + 10 for k, v in headers)


@dataclass(slots=True)
class ProducerBatch:
    """Records for one partition that travel in one record batch."""

    tp: TopicPartition
    builder: BatchBuilder
    created_ms: int
    futures: list[tuple[Future[RecordMetadata], int]] = field(default_factory=list)
    attempts: int = 0
    retry_at_ms: int = 0
    size: int = BATCH_OVERHEAD

    def try_append(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header],
        batch_size: int,
        future: Future[RecordMetadata],
    ) -> bool:
        """Append if the batch has room (an empty batch always takes one record)."""
        size = record_size(key, value, headers)
        if self.futures and self.size + size > batch_size:
            return False
        self.builder.append(timestamp, key, value, headers)
        self.futures.append((future, timestamp))
        self.size += size
        return True

    def complete(self, base_offset: int, log_append_time_ms: int) -> None:
        """Resolve every record's future from the broker's answer."""
        for index, (future, timestamp) in enumerate(self.futures):
            if future.done():
                continue
            offset = base_offset + index if base_offset >= 0 else -1
            ts = log_append_time_ms if log_append_time_ms >= 0 else timestamp
            future.set_result(RecordMetadata(self.tp.topic, self.tp.partition, offset, ts))

    def fail(self, error: BaseException) -> None:
        """Fail every record's future."""
        for future, _ in self.futures:
            if not future.done():
                future.set_exception(error)


class RecordAccumulator:
    """Batches by partition; bounded in bytes."""

    def __init__(
        self,
        *,
        batch_size: int,
        linger_ms: int,
        buffer_memory: int,
        compression: int,
        delivery_timeout_ms: int,
    ) -> None:
        self._batch_size = max(batch_size, 1)
        self._linger_ms = linger_ms
        self._buffer_memory = buffer_memory
        self._compression = compression
        self._delivery_timeout_ms = delivery_timeout_ms
        self._lock = threading.Condition()
        self._batches: dict[TopicPartition, deque[ProducerBatch]] = {}
        self._in_flight: set[TopicPartition] = set()
        self._used_bytes = 0
        self._incomplete = 0
        self._flushing = 0
        self._closing = False

    # -- application thread ------------------------------------------------------------------

    def append(
        self,
        tp: TopicPartition,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header],
        now_ms: int,
        deadline_s: float,
        clock_s: Callable[[], float],
    ) -> tuple[Future[RecordMetadata], bool, bool]:
        """Add a record; returns its future, whether it started a new batch (the sender then
        needs a wakeup to schedule it) and whether that was because the last batch was full.

        Blocks while the buffer is full, until ``deadline_s`` on the ``clock_s`` clock; then
        raises KafkaTimeoutError.
        """
        needed = record_size(key, value, headers)
        future: Future[RecordMetadata] = Future()
        with self._lock:
            while self._used_bytes > 0 and self._used_bytes + needed > self._buffer_memory:
                remaining = deadline_s - clock_s()
                if remaining <= 0:
                    raise KafkaTimeoutError(
                        f"buffer.memory={self._buffer_memory} is full and did not drain within "
                        "max.block.ms; the broker may be unreachable or slower than the production rate"
                    )
                self._lock.wait(remaining)
            queue = self._batches.setdefault(tp, deque())
            last = queue[-1] if queue else None
            new_batch = rolled_over = False
            if last is None or not last.try_append(timestamp, key, value, headers, self._batch_size, future):
                batch = ProducerBatch(tp, BatchBuilder(self._compression), now_ms)
                batch.try_append(timestamp, key, value, headers, self._batch_size, future)
                queue.append(batch)
                self._used_bytes += BATCH_OVERHEAD
                new_batch, rolled_over = True, last is not None
            self._used_bytes += needed
            self._incomplete += 1
        return future, new_batch, rolled_over

    def begin_flush(self) -> None:
        """Make every batch ready now (until :meth:`end_flush`)."""
        with self._lock:
            self._flushing += 1

    def end_flush(self) -> None:
        """Undo one :meth:`begin_flush`."""
        with self._lock:
            self._flushing -= 1

    def await_all_complete(self, deadline_s: float, clock_s: Callable[[], float]) -> bool:
        """Wait until every record appended so far has a result; False on timeout."""
        with self._lock:
            while self._incomplete > 0:
                remaining = deadline_s - clock_s()
                if remaining <= 0:
                    return False
                self._lock.wait(remaining)
            return True

    def close(self) -> None:
        """From now on every batch is ready immediately."""
        with self._lock:
            self._closing = True

    # -- network thread ----------------------------------------------------------------------

    def topics_with_data(self) -> set[str]:
        """Topics that have unsent batches."""
        with self._lock:
            return {tp.topic for tp, q in self._batches.items() if q}

    def drain_ready(
        self, now_ms: int, leader_for: Callable[[TopicPartition], int | None]
    ) -> tuple[dict[int, list[ProducerBatch]], int, bool]:
        """Take the ready batches, grouped by leader broker (they leave the queue; the caller
        must end each with :meth:`deallocate` or :meth:`reenqueue`).

        Returns ``(batches_by_node, ms_until_next_ready, unknown_leader)``.
        """
        ready: dict[int, list[ProducerBatch]] = {}
        next_ms = 2**31
        unknown_leader = False
        with self._lock:
            immediate = self._flushing > 0 or self._closing
            for tp, queue in self._batches.items():
                if not queue or tp in self._in_flight:
                    continue
                batch = queue[0]
                if batch.attempts > 0:
                    due_ms = batch.retry_at_ms
                    sendable = now_ms >= due_ms
                else:
                    due_ms = batch.created_ms + self._linger_ms
                    full = len(queue) > 1 or batch.size >= self._batch_size
                    sendable = full or immediate or now_ms >= due_ms
                if not sendable:
                    next_ms = min(next_ms, due_ms - now_ms)
                    continue
                leader = leader_for(tp)
                if leader is None:
                    unknown_leader = True
                    continue
                queue.popleft()
                self._in_flight.add(tp)
                ready.setdefault(leader, []).append(batch)
        return ready, next_ms, unknown_leader

    def expire(self, now_ms: int) -> list[ProducerBatch]:
        """Remove batches older than ``delivery.timeout.ms`` that are not in flight; the caller
        fails them, then calls :meth:`deallocate` (so flush() cannot return before)."""
        expired: list[ProducerBatch] = []
        with self._lock:
            for tp, queue in self._batches.items():
                while (
                    queue
                    and tp not in self._in_flight
                    and now_ms - queue[0].created_ms >= self._delivery_timeout_ms
                ):
                    expired.append(queue.popleft())
        return expired

    def reenqueue(self, batch: ProducerBatch, retry_at_ms: int) -> None:
        """Put a batch that failed retriably back at the head of its partition."""
        with self._lock:
            batch.attempts += 1
            batch.retry_at_ms = retry_at_ms
            self._in_flight.discard(batch.tp)
            self._batches.setdefault(batch.tp, deque()).appendleft(batch)

    def deallocate(self, batch: ProducerBatch) -> None:
        """The batch is finished (its futures resolved or failed): free its memory, unmute
        its partition, and count its records as complete."""
        with self._lock:
            self._in_flight.discard(batch.tp)
            self._used_bytes -= batch.size
            self._incomplete -= len(batch.futures)
            self._lock.notify_all()

    def has_unsent(self) -> bool:
        """Whether any batch waits to be sent."""
        with self._lock:
            return any(self._batches.values())

    def fail_all(self, error: BaseException) -> None:
        """At close: fail every unsent batch."""
        with self._lock:
            batches = [b for q in self._batches.values() for b in q]
            self._batches.clear()
        for batch in batches:
            batch.fail(error)
            self.deallocate(batch)
