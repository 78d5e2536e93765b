"""One partition's data from one Fetch response. [app: read by the collector; built on bg]

The network thread builds a :class:`CompletedFetch` from a Fetch response without touching the
record bytes (``records`` is a zero-copy view of the receive buffer). The application thread's
collector then reads it through one of two sinks, with the same walk over its batches -- CRC
check, decompression, control and aborted-transaction filtering, position tracking:

* :meth:`CompletedFetch.fetch_records` (``poll()``): :class:`ConsumerRecord` objects, built by
  the record kernel straight from the batch bytes, at most ``max_records`` per call.
* :meth:`CompletedFetch.fetch_columns` (``poll_arrow()``): rows appended to a record kernel
  ``ColumnBuilder``, no Python object per record.

Both take the records of the current batch through one record kernel ``BatchCursor``: it
checks the whole batch (a batch is found corrupt whole, before any of its records is handed
out), then each call builds only the records it takes, so calls may alternate between the
sinks. (Building ConsumerRecords a call's worth at a time also keeps the garbage collector
quiet: a burst of a whole batch's objects would trigger a collection.)
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from typing import Any

from kaflux.errors import CorruptRecordError, KafkaError, RecordDeserializationError
from kaflux.records import CONTROL_ABORT, ConsumerRecord, active_kernel
from kaflux.records.interface import BatchCursorView, ColumnBuilderView, RecordBatchView, RecordDecoder
from kaflux.serialization import Deserializer as ContextDeserializer
from kaflux.serialization import Field, SerializationContext, takes_context
from kaflux.structs import TopicPartition

#: a plain ``fn(data) -> object``, or a :class:`kaflux.serialization.Deserializer` (sees the
#: topic, key or value, and the headers)
Deserializer = Callable[[bytes | None], Any] | ContextDeserializer


class CompletedFetch:
    """Fetched data of one partition, consumed incrementally by the collector."""

    __slots__ = (
        "_aborted",
        "_aborted_pids",
        "_batch",
        "_batches",
        "_check_crcs",
        "_corruption",
        "_cursor",
        "_index",
        "_read_committed",
        "_records",
        "consumed",
        "error",
        "fetch_offset",
        "high_watermark",
        "initialized",
        "kernel",
        "last_epoch",
        "last_stable_offset",
        "log_start_offset",
        "next_fetch_offset",
        "position_version",
        "records",
        "size_bytes",
        "tp",
    )

    def __init__(
        self,
        tp: TopicPartition,
        fetch_offset: int,
        position_version: int,
        records: memoryview | None,
        *,
        high_watermark: int = -1,
        last_stable_offset: int = -1,
        log_start_offset: int = -1,
        aborted_transactions: list[tuple[int, int]] | None = None,
        error: KafkaError | None = None,
        read_committed: bool = False,
        check_crcs: bool = True,
        kernel: RecordDecoder | None = None,
    ) -> None:
        self.tp = tp
        self.fetch_offset = fetch_offset
        self.position_version = position_version
        self.records = records
        self.size_bytes = len(records) if records is not None else 0
        self.high_watermark = high_watermark
        self.last_stable_offset = last_stable_offset
        self.log_start_offset = log_start_offset
        self.error = error
        self.next_fetch_offset = fetch_offset
        self.last_epoch: int | None = None
        self.consumed = False
        self.initialized = False
        self._read_committed = read_committed
        self._check_crcs = check_crcs
        # (first_offset, producer_id) min-heap of aborted transactions, per KIP-98
        self._aborted: list[tuple[int, int]] = [(first, pid) for pid, first in (aborted_transactions or [])]
        heapq.heapify(self._aborted)
        self._aborted_pids: set[int] = set()
        #: the record kernel that decodes it (the collector may set it before the first read)
        self.kernel: RecordDecoder = kernel if kernel is not None else active_kernel()
        self._batches: Iterator[RecordBatchView] | None = None
        # The batch being read and its cursor; ConsumerRecords taken from the cursor but not
        # returned yet (a deserializer failed on _records[_index]).
        self._batch: RecordBatchView | None = None
        self._cursor: BatchCursorView | None = None
        self._records: list[ConsumerRecord] | None = None
        self._index = 0
        # (reason, position) of corrupt data met; it is raised on every later call
        self._corruption: tuple[str, int] | None = None

    def _next_batch(self) -> RecordBatchView | None:
        if self._batches is None:
            if self.records is None:
                return None
            self._batches = self.kernel.iter_batches(
                self.records, check_crcs=self._check_crcs, topic=self.tp.topic, partition=self.tp.partition
            )
        return next(self._batches, None)

    def _skip_batch(self, batch: RecordBatchView) -> bool:
        """Whether to skip ``batch`` entirely (already consumed, control, or aborted)."""
        if batch.next_offset <= self.next_fetch_offset:
            return True
        if self._read_committed and batch.is_transactional:
            while self._aborted and self._aborted[0][0] <= batch.last_offset:
                self._aborted_pids.add(heapq.heappop(self._aborted)[1])
            if batch.is_control:
                if batch.control_type() == CONTROL_ABORT:
                    self._aborted_pids.discard(batch.producer_id)
                return True
            if batch.producer_id in self._aborted_pids:
                return True
        return batch.is_control

    def _load_next_batch(self) -> bool:
        """Advance to the next batch with records to return; False when the data is exhausted."""
        while True:
            batch = self._next_batch()
            if batch is None:
                return False
            if self._skip_batch(batch):
                self.next_fetch_offset = max(self.next_fetch_offset, batch.next_offset)
                continue
            self._batch = batch
            epoch = batch.partition_leader_epoch
            self.last_epoch = epoch if epoch >= 0 else self.last_epoch
            return True

    def _batch_used_up(self) -> bool:
        """Whether all of the current batch was taken."""
        if self._records is not None and self._index < len(self._records):
            return False
        return self._cursor is not None and self._cursor.remaining == 0

    def _cursor_of(self, batch: RecordBatchView) -> BatchCursorView:
        """The current batch's cursor (made, and the batch checked, on first use)."""
        if self._cursor is None:
            self._cursor = self.kernel.BatchCursor(batch)
        return self._cursor

    def _read(
        self,
        max_records: int,
        take: Callable[[RecordBatchView, int], int],
        taken_before_error: Callable[[], int] | None = None,
    ) -> int:
        """The walk both sinks share: ``take(batch, limit)`` takes up to ``limit`` records of
        the current batch from the position on (moving ``next_fetch_offset``) and returns how
        many it took; this moves from batch to batch and handles errors. Returns the number
        of records taken. A ``take`` that can fail after taking some records (deserializers)
        passes ``taken_before_error``, the number taken in this call so far.

        Errors (corrupt data, a failing deserializer) are raised only when no record was
        taken in this call; otherwise the records come first and the error on the next
        call. The position does not move past a record that failed, so the error repeats
        until the application seeks past it. Corrupt data is reported at the position (the
        offset after the last good record), never at an offset read from the bad bytes.
        """
        if self._corruption is not None:
            raise self._corrupt_error()
        taken = 0
        try:
            while taken < max_records:
                batch = self._batch
                if batch is None or self._batch_used_up():
                    if batch is not None:
                        self.next_fetch_offset = max(self.next_fetch_offset, batch.next_offset)
                        self._drop_batch()
                    if not self._load_next_batch():
                        self.consumed = True
                        break
                    continue
                taken += take(batch, max_records - taken)
        except CorruptRecordError as exc:
            # The batch iterator cannot resume after corrupt data: remember it. The decoder's
            # error names the offset in the batch header, which may be garbage like the rest.
            self._corruption = (exc.reason, self.next_fetch_offset)
        except (RecordDeserializationError, OverflowError):
            # A deserializer failed (the position stays at that record, so the next call
            # fails on it again), or the columns are full (the caller has records).
            if taken_before_error is not None:
                taken = taken_before_error()
            if not taken:
                raise
        if self._corruption is not None and not taken:
            raise self._corrupt_error()
        return taken

    def _drop_batch(self) -> None:
        self._batch = None
        self._records = None
        self._cursor = None

    def fetch_records(
        self,
        max_records: int,
        key_deserializer: Deserializer | None,
        value_deserializer: Deserializer | None,
    ) -> list[ConsumerRecord]:
        """Decode and return up to ``max_records`` records from the current position (see
        :meth:`_read` for errors)."""
        out: list[ConsumerRecord] = []
        tp = self.tp
        key_ctx = takes_context(key_deserializer)
        value_ctx = takes_context(value_deserializer)

        def take(batch: RecordBatchView, limit: int) -> int:
            records = self._records
            if records is None or self._index >= len(records):
                records = self._records = self._cursor_of(batch).consumer_records(
                    tp.topic, tp.partition, self.last_epoch, self.next_fetch_offset, limit
                )
                self._index = 0
            i = self._index
            end = min(len(records), i + limit)
            if i >= end:
                return 0
            if key_deserializer is None and value_deserializer is None:
                out.extend(records if i == 0 and end == len(records) else records[i:end])
                self._index = end
                self.next_fetch_offset = records[end - 1].offset + 1
                return end - i
            for j in range(i, end):
                record = records[j]
                # both first, so a failure leaves the record as it was for the next call
                key = (
                    record.key
                    if key_deserializer is None
                    else self._deserialize(key_deserializer, record, True, key_ctx)
                )
                value = (
                    record.value
                    if value_deserializer is None
                    else self._deserialize(value_deserializer, record, False, value_ctx)
                )
                record.key = key
                record.value = value
                out.append(record)
                self._index = j + 1
                self.next_fetch_offset = record.offset + 1
            return end - i

        self._read(max_records, take, out.__len__)
        return out

    def fetch_columns(self, builder: ColumnBuilderView, max_records: int) -> int:
        """Append up to ``max_records`` records from the current position to ``builder`` (a
        ColumnBuilder of this fetch's kernel); returns how many (see :meth:`_read` for
        errors). Raises OverflowError, having appended nothing, when the builder's columns
        are full."""
        tp = self.tp
        kernel = self.kernel

        def take(batch: RecordBatchView, limit: int) -> int:
            if self._records is not None:
                if self._index < len(self._records):
                    # records poll() took from the cursor and could not return (a deserializer
                    # failed): start the batch again, min_offset skips what was returned
                    self._cursor = kernel.BatchCursor(batch)
                self._records = None
            appended, last_offset = builder.append_cursor(
                self._cursor_of(batch), tp.topic, tp.partition, self.next_fetch_offset, limit
            )
            if last_offset is not None:
                self.next_fetch_offset = last_offset + 1
            return appended

        return self._read(max_records, take)

    def _corrupt_error(self) -> CorruptRecordError:
        """A new error for the corrupt data met: raising one stored instance again and again
        would add the frames of every raise to its traceback."""
        assert self._corruption is not None
        reason, position = self._corruption
        return CorruptRecordError(reason, topic=self.tp.topic, partition=self.tp.partition, offset=position)

    def _deserialize(
        self, deserializer: Any, record: ConsumerRecord, is_key: bool, with_context: bool
    ) -> Any:
        data = record.key if is_key else record.value
        try:
            if with_context:
                field: Field = "key" if is_key else "value"
                return deserializer(data, SerializationContext(self.tp.topic, field, record.headers or None))
            return deserializer(data)
        except Exception as exc:
            raise RecordDeserializationError(
                repr(exc),
                topic=self.tp.topic,
                partition=self.tp.partition,
                offset=record.offset,
                origin="key" if is_key else "value",
            ) from exc

    def drain(self) -> None:
        """Mark as fully consumed (its partition was unassigned or reset)."""
        self.consumed = True
        self._drop_batch()
        self._batches = None
