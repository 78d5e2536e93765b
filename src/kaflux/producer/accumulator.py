"""Per-partition batches waiting to be sent. [shared: the application thread appends, the
network thread drains; one lock and condition guard the queues]

Memory is bounded by ``buffer.memory``, counted per batch as Java's buffer pool does: opening a
batch takes ``batch.size`` bytes (more for a larger first record) and
:meth:`RecordAccumulator.append` blocks (up to ``max.block.ms``) until that much is free;
appending to an open batch costs nothing more, so the per-record path stays short. A batch is ready when it is
full (``batch.size``), has waited ``linger.ms``, or a flush or close is under way.

Records are encoded as they are appended (:class:`~kaflux.records.encode.RecordsWriter`, the
compiled encoder when built), so a batch only needs its header when it is sent. A batch is
*closed* when it is drained: its records are compressed once, and its header (producer id,
epoch, base sequence, CRC) is written then, and again only if those change (an epoch bump).

Ordering. Without idempotence one batch per partition is in flight at a time, so retries
never reorder a partition. With it, up to ``max.in.flight.requests.per.connection`` (at most
5) may be; each carries a sequence number, and a batch that comes back for a retry is put back
in sequence order; the :class:`~kaflux.producer.transaction_manager.TransactionManager` then lets
only the lowest outstanding sequence of the partition go out until it is resolved (as Java's
``RecordAccumulator`` does).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from kaflux.errors import KafkaTimeoutError
from kaflux.producer.futures import DeliveryCallback, ProduceResult, RecordFuture
from kaflux.producer.sequences import NO_SEQUENCE, increment_sequence
from kaflux.records import assemble_batch, compress, kernels
from kaflux.records.encode import Chunk
from kaflux.records.types import TRANSACTIONAL_MASK
from kaflux.structs import TopicPartition

if TYPE_CHECKING:
    from kaflux.records.encode import RecordsWriter

Header = tuple[str, bytes | None]

#: bytes a batch needs beyond its records (the v2 batch header)
BATCH_OVERHEAD = 61


def record_size(key: bytes | None, value: bytes | None, headers: Sequence[Header]) -> int:
    """An upper estimate of a record's encoded size (varint overheads included)."""
    return 21 + len(key or b"") + len(value or b"") + sum(len(k) + len(v or b"") + 10 for k, v in headers)


class ProducerBatch:
    """Records for one partition that travel in one record batch."""

    __slots__ = (
        "attempts",
        "base_sequence",
        "base_timestamp",
        "created_ms",
        "deallocated",
        "encoded",
        "in_flight",
        "is_transactional",
        "max_timestamp",
        "payload",
        "producer_epoch",
        "producer_id",
        "record_count",
        "result",
        "retry_at_ms",
        "sequence_reset",
        "size",
        "tp",
        "writer",
    )

    def __init__(self, tp: TopicPartition, writer: RecordsWriter | None, created_ms: int) -> None:
        self.tp = tp
        self.writer = writer
        self.created_ms = created_ms
        self.result = ProduceResult(tp)
        self.attempts = 0
        self.retry_at_ms = 0
        #: bytes counted against buffer.memory (its allocation: batch.size, or more)
        self.size = BATCH_OVERHEAD
        self.record_count = 0
        self.base_timestamp = -1
        self.max_timestamp = -1
        #: the records section, compressed, once the batch is closed
        self.payload: bytes | None = None
        #: the whole batch as sent (header included), rebuilt when the producer state changes
        self.encoded: bytes | None = None
        self.producer_id = -1
        self.producer_epoch = -1
        self.base_sequence = NO_SEQUENCE
        self.is_transactional = False
        #: the sequence was rewritten (an epoch bump) since it was first assigned
        self.sequence_reset = False
        self.in_flight = False
        self.deallocated = False

    @classmethod
    def from_chunk(cls, tp: TopicPartition, chunk: Chunk, created_ms: int) -> ProducerBatch:
        """A closed-for-appends batch holding an already-encoded records section."""
        batch = cls(tp, None, created_ms)
        batch.record_count = chunk.record_count
        batch.base_timestamp = chunk.base_timestamp
        batch.max_timestamp = chunk.max_timestamp
        batch.payload = chunk.records
        batch.size = BATCH_OVERHEAD + len(chunk.records)
        return batch

    # -- state --------------------------------------------------------------------------------

    @property
    def has_sequence(self) -> bool:
        return self.base_sequence != NO_SEQUENCE

    @property
    def last_sequence(self) -> int:
        """The sequence of the batch's last record."""
        return increment_sequence(self.base_sequence, self.record_count - 1)

    @property
    def count(self) -> int:
        """Records in the batch (appends included while it is open)."""
        return self.writer.count if self.writer is not None else self.record_count

    def close(self, compression: int, level: int | None = None) -> None:
        """No more appends: keep the (compressed, at codec ``level``) records section."""
        writer = self.writer
        if writer is None:
            return
        self.writer = None
        self.record_count = writer.count
        self.base_timestamp = writer.base_timestamp
        self.max_timestamp = writer.max_timestamp
        records = writer.getvalue()
        self.payload = compress(compression, records, level) if compression else records

    def set_producer_state(
        self, producer_id: int, epoch: int, base_sequence: int, transactional: bool
    ) -> None:
        """Give the batch its producer id, epoch and first sequence (when first drained)."""
        self.producer_id = producer_id
        self.producer_epoch = epoch
        self.base_sequence = base_sequence
        self.is_transactional = transactional
        self.encoded = None

    def reset_producer_state(self, producer_id: int, epoch: int, base_sequence: int) -> None:
        """Rewrite the producer state of a batch already sent (after an epoch bump)."""
        self.set_producer_state(producer_id, epoch, base_sequence, self.is_transactional)
        self.sequence_reset = True

    def build(self, compression: int, level: int | None = None) -> bytes:
        """The batch as it goes on the wire (closed first if needed)."""
        if self.encoded is None:
            self.close(compression, level)
            assert self.payload is not None
            attributes = compression
            if self.is_transactional:
                attributes |= TRANSACTIONAL_MASK
            count = self.record_count
            self.encoded = assemble_batch(
                self.payload,
                record_count=count,
                attributes=attributes,
                last_offset_delta=max(count - 1, 0),
                base_timestamp=self.base_timestamp,
                max_timestamp=self.max_timestamp,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                base_sequence=self.base_sequence,
            )
        return self.encoded

    # -- outcome ------------------------------------------------------------------------------

    def complete(self, base_offset: int, log_append_time_ms: int) -> None:
        """Resolve every record's future from the broker's answer."""
        self.result.complete(base_offset, log_append_time_ms)

    def fail(self, error: BaseException) -> None:
        """Fail every record's future."""
        self.result.fail(error)

    @property
    def done(self) -> bool:
        return self.result.done

    def __repr__(self) -> str:
        return (
            f"<ProducerBatch {self.tp} records={self.count} seq={self.base_sequence} "
            f"epoch={self.producer_epoch} attempts={self.attempts}>"
        )


class DrainGate(Protocol):
    """What the accumulator asks the transaction manager while draining (idempotence)."""

    def may_drain(self, tp: TopicPartition, first: ProducerBatch) -> bool: ...

    def on_drain(self, batch: ProducerBatch) -> None: ...


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
        compression_level: int | None = None,
        max_in_flight_per_partition: int = 1,
        encoder: ModuleType | None = None,
        max_block_ms: int = 60_000,
    ) -> None:
        self._batch_size = max(batch_size, 1)
        self._records_limit = max(self._batch_size - BATCH_OVERHEAD, 1)
        self._linger_ms = linger_ms
        self._buffer_memory = buffer_memory
        self._compression = compression
        self._compression_level = compression_level
        self._delivery_timeout_ms = delivery_timeout_ms
        self._max_in_flight = max(1, max_in_flight_per_partition)
        self._max_block_s = max_block_ms / 1000
        encoder = encoder or kernels.encoder()
        self._writer_cls: Any = encoder.RecordsWriter
        #: takes a record future out of the cyclic GC (compiled encoder; the pure one cannot)
        self._untrack: Callable[[object], None] = encoder.untrack
        # One plain lock (cheap to take on the send path) and a condition over it for waiting.
        self._lock = threading.Lock()
        self._acquire = self._lock.acquire
        self._release = self._lock.release
        self._cond = threading.Condition(self._lock)
        #: threads in _wait(): a finished batch notifies the condition only when there are any
        #: (a notify_all with nobody waiting still cost ~7 % of the network thread at 1 KiB)
        self._cond_waiters = 0
        self._batches: dict[TopicPartition, deque[ProducerBatch]] = {}
        #: drained batches per partition whose outcome is not known yet
        self._in_flight: dict[TopicPartition, int] = {}
        self._used_bytes = 0
        #: batches appended and not yet deallocated (in flight included)
        self._incomplete_batches = 0
        self._all: set[ProducerBatch] = set()
        self._flushing = 0
        self._closing = False
        #: called (outside the lock) whenever a batch is deallocated: event loops' waiters
        self._waiters: list[Callable[[], None]] = []

    @property
    def compression(self) -> int:
        """The codec id batches are compressed with."""
        return self._compression

    @property
    def compression_level(self) -> int | None:
        """The codec's level (``compression.<codec>.level``; None: its default)."""
        return self._compression_level

    @property
    def batch_size(self) -> int:
        return self._batch_size

    @property
    def buffer_memory(self) -> int:
        """``buffer.memory``: the bytes batches may take."""
        return self._buffer_memory

    def available_bytes(self) -> int:
        """``buffer.memory`` not taken by batches (Java's buffer-available-bytes)."""
        with self._lock:
            return max(0, self._buffer_memory - self._used_bytes)

    # -- application thread -------------------------------------------------------------------

    def _wait(self, timeout_s: float) -> None:
        """Wait on the condition (the lock held) for a finished batch, at most ``timeout_s``."""
        self._cond_waiters += 1
        try:
            self._cond.wait(timeout_s)
        finally:
            self._cond_waiters -= 1

    def _must_wait(self, size: int) -> bool:
        """Whether allocating ``size`` bytes must wait (the lock held); a single allocation
        larger than the whole buffer waits only for the buffer to be empty."""
        return self._used_bytes > 0 and self._used_bytes + size > self._buffer_memory

    def _wait_for_memory(self, deadline_s: float, clock_s: Callable[[], float]) -> None:
        """Block (the lock held) until some memory is freed; raise at the deadline."""
        remaining = deadline_s - clock_s()
        if remaining <= 0:
            raise KafkaTimeoutError(
                f"buffer.memory={self._buffer_memory} is full and did not drain within "
                "max.block.ms; the broker may be unreachable or slower than the production rate"
            )
        self._wait(remaining)

    def append(
        self,
        tp: TopicPartition,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] | None,
        now_ms: int,
        deadline_s: float,
        clock_s: Callable[[], float],
        callback: DeliveryCallback | None = None,
    ) -> tuple[RecordFuture, bool, bool]:
        """Append a record; returns ``(future, new_batch, rolled_over)``: whether the record
        opened a new batch, and whether that was because the previous one was full.

        Memory is counted per batch, as Java's buffer pool does: a new batch takes
        ``batch.size`` bytes (or its first record's size, if larger) from ``buffer.memory``
        and waits for that much to be free. ``now_ms`` -1 and ``deadline_s`` 0 mean "now" and
        "now + max.block.ms", read from ``clock_s`` only when a batch is created.

        Raises:
            KafkaTimeoutError: ``buffer.memory`` stayed full until the deadline.
            TypeError: the key, value or headers are not bytes / (str, bytes | None) pairs.
        """
        # acquire/release rather than "with": this runs for every record, and is cheaper so
        self._acquire()
        try:
            queue = self._batches.get(tp)
            if queue:
                batch = queue[-1]
                writer = batch.writer
                if writer is not None:
                    if writer.append(timestamp, key, value, headers):
                        # the common case: the record joins the open batch, which can have no
                        # outcome before we unlock
                        future = batch.result.open_future(
                            writer.count - 1, timestamp, callback, self._untrack
                        )
                        return future, False, False
                    rolled_over = True
                else:
                    rolled_over = False
            else:
                rolled_over = False
            return self._append_new(
                tp, timestamp, key, value, headers, now_ms, deadline_s, clock_s, callback, rolled_over
            )
        finally:
            self._release()

    def _append_new(
        self,
        tp: TopicPartition,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] | None,
        now_ms: int,
        deadline_s: float,
        clock_s: Callable[[], float],
        callback: DeliveryCallback | None,
        rolled_over: bool,
    ) -> tuple[RecordFuture, bool, bool]:
        """Open a new batch for the record (the lock held)."""
        writer = self._writer_cls(self._records_limit)
        added = writer.append(timestamp, key, value, headers)
        size = max(self._batch_size, BATCH_OVERHEAD + added)
        if self._must_wait(size):
            if deadline_s <= 0:
                deadline_s = clock_s() + self._max_block_s
            while self._must_wait(size):
                self._wait_for_memory(deadline_s, clock_s)
                # Others may have appended meanwhile: the record may fit their batch now.
                queue = self._batches.get(tp)
                if (
                    queue
                    and queue[-1].writer is not None
                    and queue[-1].writer.append(timestamp, key, value, headers)
                ):
                    batch = queue[-1]
                    index = batch.count - 1
                    if callback is not None:
                        batch.result.add_delivery_callback(index, timestamp, callback)
                    return RecordFuture(batch.result, index, timestamp), False, False
        if now_ms < 0:
            now_ms = int(clock_s() * 1000)
        batch = ProducerBatch(tp, writer, now_ms)
        batch.size = size
        queue = self._batches.get(tp)
        if queue is None:
            queue = self._batches[tp] = deque()
        queue.append(batch)
        self._all.add(batch)
        self._used_bytes += size
        self._incomplete_batches += 1
        if callback is not None:
            batch.result.add_delivery_callback(0, timestamp, callback)
        return RecordFuture(batch.result, 0, timestamp), True, rolled_over

    def append_batch(self, batch: ProducerBatch, deadline_s: float, clock_s: Callable[[], float]) -> None:
        """Queue a batch encoded elsewhere (``send_arrow``) behind the partition's others.

        Raises:
            KafkaTimeoutError: ``buffer.memory`` stayed full until ``deadline_s``.
        """
        with self._lock:
            while self._must_wait(batch.size):
                self._wait_for_memory(deadline_s, clock_s)
            queue = self._batches.get(batch.tp)
            if queue is None:
                queue = self._batches[batch.tp] = deque()
            elif queue and queue[-1].writer is not None:
                # The open batch is older: close it for appends so the order stays as sent.
                queue[-1].close(self._compression, self._compression_level)
            queue.append(batch)
            self._all.add(batch)
            self._used_bytes += batch.size
            self._incomplete_batches += 1

    def begin_flush(self) -> None:
        """Make every batch ready now (until :meth:`end_flush`)."""
        with self._lock:
            self._flushing += 1

    def end_flush(self) -> None:
        """Undo one :meth:`begin_flush`."""
        with self._lock:
            self._flushing -= 1

    @property
    def flush_in_progress(self) -> bool:
        return self._flushing > 0

    def await_all_complete(self, deadline_s: float, clock_s: Callable[[], float]) -> bool:
        """Wait until every batch appended so far has a result; False on timeout."""
        with self._lock:
            while self._incomplete_batches > 0:
                remaining = deadline_s - clock_s()
                if remaining <= 0:
                    return False
                self._wait(remaining)
            return True

    def has_room(self) -> bool:
        """Whether a new batch (``batch.size`` bytes) fits in ``buffer.memory`` now."""
        with self._lock:
            return not self._must_wait(self._batch_size)

    def await_room(self, deadline_s: float, clock_s: Callable[[], float]) -> bool:
        """Wait until a new batch fits (True) or ``deadline_s`` passes (False)."""
        with self._lock:
            while self._must_wait(self._batch_size):
                remaining = deadline_s - clock_s()
                if remaining <= 0:
                    return False
                self._wait(remaining)
            return True

    def watch(self, waiter: Callable[[], None]) -> None:
        """Call ``waiter`` (on the network thread) each time a batch is finished and its memory
        freed, until :meth:`unwatch`: how an event loop waits on this buffer."""
        with self._lock:
            self._waiters = [*self._waiters, waiter]

    def unwatch(self, waiter: Callable[[], None]) -> None:
        """Stop calling ``waiter``."""
        with self._lock:
            self._waiters = [w for w in self._waiters if w is not waiter]

    def close(self) -> None:
        """From now on every batch is ready immediately."""
        with self._lock:
            self._closing = True

    # -- network thread ----------------------------------------------------------------------

    def topics_with_data(self) -> set[str]:
        """Topics that have unsent batches."""
        with self._lock:
            return {tp.topic for tp, q in self._batches.items() if q}

    def partitions_with_data(self) -> list[TopicPartition]:
        """Partitions that have unsent batches."""
        with self._lock:
            return [tp for tp, q in self._batches.items() if q]

    def drain_ready(
        self,
        now_ms: int,
        leader_for: Callable[[TopicPartition], int | None],
        gate: DrainGate | None = None,
        node_full: Callable[[int], bool] | None = None,
    ) -> tuple[dict[int, list[ProducerBatch]], int, bool]:
        """Take the ready batches, at most one per partition, grouped by leader broker (they
        leave the queue; the caller must end each with :meth:`deallocate` or :meth:`reenqueue`).

        ``gate`` (idempotence) may hold a partition back and gives each batch its sequence;
        ``node_full(node)`` says a broker takes no more requests now.

        Returns ``(batches_by_node, ms_until_next_ready, unknown_leader)``.
        """
        ready: dict[int, list[ProducerBatch]] = {}
        next_ms = 2**31
        unknown_leader = False
        with self._lock:
            immediate = self._flushing > 0 or self._closing
            for tp, queue in self._batches.items():
                if not queue or self._in_flight.get(tp, 0) >= self._max_in_flight:
                    continue
                batch = queue[0]
                if batch.attempts > 0:
                    due_ms = batch.retry_at_ms
                    sendable = now_ms >= due_ms
                else:
                    due_ms = batch.created_ms + self._linger_ms
                    writer = batch.writer
                    full = (
                        len(queue) > 1 or writer is None or BATCH_OVERHEAD + writer.size >= self._batch_size
                    )
                    sendable = full or immediate or now_ms >= due_ms
                if not sendable:
                    next_ms = min(next_ms, due_ms - now_ms)
                    continue
                leader = leader_for(tp)
                if leader is None:
                    unknown_leader = True
                    continue
                if node_full is not None and node_full(leader):
                    continue
                if gate is not None and not gate.may_drain(tp, batch):
                    continue
                queue.popleft()
                batch.in_flight = True
                self._in_flight[tp] = self._in_flight.get(tp, 0) + 1
                ready.setdefault(leader, []).append(batch)
        # Out of the queue, the batches are this thread's alone: close them (copy, compress)
        # without the lock, which send() needs for every record.
        for batches in ready.values():
            for batch in batches:
                batch.close(self._compression, self._compression_level)
                if gate is not None:
                    gate.on_drain(batch)
        return ready, next_ms, unknown_leader

    def expire(self, now_ms: int) -> list[ProducerBatch]:
        """Remove queued batches older than ``delivery.timeout.ms`` (from each partition's
        head); the caller fails them, then calls :meth:`deallocate` (so flush() cannot return
        before)."""
        expired: list[ProducerBatch] = []
        with self._lock:
            for queue in self._batches.values():
                while queue and now_ms - queue[0].created_ms >= self._delivery_timeout_ms:
                    expired.append(queue.popleft())
        return expired

    def reenqueue(self, batch: ProducerBatch, retry_at_ms: int) -> None:
        """Put a batch that failed retriably back at the head of its partition, in sequence
        order among the other retries."""
        with self._lock:
            batch.attempts += 1
            batch.retry_at_ms = retry_at_ms
            self._leave_flight(batch)
            queue = self._batches.setdefault(batch.tp, deque())
            if batch.has_sequence:
                ahead: list[ProducerBatch] = []
                while queue and queue[0].has_sequence and queue[0].base_sequence < batch.base_sequence:
                    ahead.append(queue.popleft())
                queue.appendleft(batch)
                for earlier in reversed(ahead):
                    queue.appendleft(earlier)
            else:
                queue.appendleft(batch)

    def _leave_flight(self, batch: ProducerBatch) -> None:
        if batch.in_flight:
            batch.in_flight = False
            count = self._in_flight.get(batch.tp, 0) - 1
            if count > 0:
                self._in_flight[batch.tp] = count
            else:
                self._in_flight.pop(batch.tp, None)

    def deallocate(self, batch: ProducerBatch) -> None:
        """The batch is finished (its futures resolved or failed): free its memory, unmute
        its partition, and count its records as complete. Idempotent."""
        with self._lock:
            if batch.deallocated:
                return
            batch.deallocated = True
            self._leave_flight(batch)
            self._all.discard(batch)
            self._used_bytes -= batch.size
            self._incomplete_batches -= 1
            if self._cond_waiters:
                self._cond.notify_all()
            waiters = self._waiters
        for waiter in waiters:  # a copy-on-write list: safe to iterate outside the lock
            waiter()

    def has_unsent(self) -> bool:
        """Whether any batch waits to be sent."""
        with self._lock:
            return any(self._batches.values())

    def has_incomplete(self) -> bool:
        """Whether any batch appended so far (sent or not) has no outcome yet."""
        with self._lock:
            return self._incomplete_batches > 0

    def in_flight_count(self, tp: TopicPartition) -> int:
        """Drained batches of ``tp`` without an outcome yet."""
        with self._lock:
            return self._in_flight.get(tp, 0)

    def abort_undrained(self, error: BaseException, *, keep_sequenced: bool = False) -> list[ProducerBatch]:
        """Fail every batch still queued with ``error`` and free it; returns them. In-flight
        batches are left to finish; with ``keep_sequenced`` so are queued batches that were
        sent before and wait for a retry (they have a sequence number)."""
        with self._lock:
            batches: list[ProducerBatch] = []
            for queue in self._batches.values():
                kept = [b for b in queue if keep_sequenced and b.has_sequence]
                batches.extend(b for b in queue if not (keep_sequenced and b.has_sequence))
                queue.clear()
                queue.extend(kept)
        for batch in batches:
            batch.fail(error)
            self.deallocate(batch)
        return batches

    def fail_all(self, error: BaseException) -> None:
        """At close, once the network thread is gone: fail every batch without an outcome,
        queued or in flight, so that no future stays pending."""
        with self._lock:
            batches = list(self._all)
            for queue in self._batches.values():
                queue.clear()
        for batch in batches:
            batch.fail(error)
            self.deallocate(batch)


class BufferSignal:
    """A :class:`~kaflux.blocking.Signal` over the accumulator: signalled when every batch is
    complete (``all_complete``, for ``flush()``) or when a new batch fits in ``buffer.memory``."""

    def __init__(
        self, accumulator: RecordAccumulator, clock_s: Callable[[], float], *, all_complete: bool
    ) -> None:
        self._accumulator = accumulator
        self._clock_s = clock_s
        self._all_complete = all_complete

    def _ready(self) -> bool:
        if self._all_complete:
            return not self._accumulator.has_incomplete()
        return self._accumulator.has_room()

    def await_signal(self, timeout_s: float) -> bool:
        deadline = self._clock_s() + timeout_s
        if self._all_complete:
            return self._accumulator.await_all_complete(deadline, self._clock_s)
        return self._accumulator.await_room(deadline, self._clock_s)

    def watch(self, waiter: Callable[[], None]) -> bool:
        self._accumulator.watch(waiter)
        return self._ready()

    def unwatch(self, waiter: Callable[[], None]) -> None:
        self._accumulator.unwatch(waiter)
