"""One partition's data from one Fetch response. [app: read by the collector; built on bg]

The network thread builds a :class:`CompletedFetch` from a Fetch response without touching the
record bytes (``records`` is a zero-copy view of the receive buffer). The application thread's
collector then reads it through one of two sinks, with the same walk over its batches -- CRC
check, decompression, control and aborted-transaction filtering, position tracking:

* :meth:`CompletedFetch.fetch_records` (``poll()``): :class:`ConsumerRecord` objects, built by
  the record kernel straight from the batch bytes, at most ``max_records`` per call.
* :meth:`CompletedFetch.fetch_arrow` (``poll_arrow()``): zero-copy slices of ``pyarrow``
  record batches, no Python object per record.

``fetch_records`` takes the records of the current batch through one record kernel
``BatchCursor``: it checks the whole batch (a batch is found corrupt whole, before any of its
records is handed out), then each call builds only the records it takes. (Building
ConsumerRecords a call's worth at a time also keeps the garbage collector quiet: a burst of a
whole batch's objects would trigger a collection.)

``fetch_arrow`` decodes ahead instead: batches from the position on, into one record kernel
``ColumnBuilder`` (one pass per batch: its records are checked as they are decoded), made a
``pyarrow.RecordBatch`` once; calls hand out slices of it, which copy nothing. Small calls
(``max.poll.records`` 500) share a few thousand rows, decoded up to where a call ends (the
rest of the batch cut there is decoded first next time), so that only a call crossing
fetches concatenates. Large calls (:meth:`CompletedFetch.append_arrow`) append exactly their
rows to one builder shared by the call's fetches, converted once. What is decoded ahead is
bounded in bytes (:data:`DECODE_AHEAD_BYTES`), and dropped with the fetch (seek,
unassignment) or when its partition is paused (:meth:`CompletedFetch.release_decoded`; the
fetched bytes stay for the resume).

The two walks are separate: a call of the other kind restarts the walk over the fetch's
batches from the position (the position, not the walk, is the state both share), so
``poll()`` and ``poll_arrow()`` may alternate on one consumer.
"""

from __future__ import annotations

import heapq
import sys
from collections.abc import Callable, Iterator
from typing import Any

from kaflux.errors import (
    CorruptRecordError,
    DeserializerUnavailableError,
    KafkaError,
    RecordDeserializationError,
    deserialization_error,
)
from kaflux.records import CONTROL_ABORT, ConsumerRecord, active_kernel
from kaflux.records.interface import BatchCursorView, ColumnBuilderView, RecordBatchView, RecordDecoder
from kaflux.serialization import Deserializer as ContextDeserializer
from kaflux.serialization import Field, SerializationContext, takes_context
from kaflux.structs import TopicPartition

#: a plain ``fn(data) -> object``, or a :class:`kaflux.serialization.Deserializer` (sees the
#: topic, key or value, and the headers)
Deserializer = Callable[[bytes | None], Any] | ContextDeserializer

#: decoded column data (keys, values, headers, topic names) ``poll_arrow()`` decodes at once at
#: most, plus one batch (a larger call takes its rows from several decodings, concatenated)
DECODE_AHEAD_BYTES = 8 << 20
#: ``poll_arrow()`` calls for fewer rows decode theirs and the next calls' up to this many rows
#: (fewer past this many bytes of column data): enough rows for several calls to share one
#: conversion to Arrow, few enough bytes to stay in the processor's cache until read; larger
#: calls decode exactly their rows into one set of columns
MIN_DECODE_ROWS = 4096
MIN_DECODE_BYTES = 512 << 10

# which walk over the batches a fetch is in (see the module docstring)
_NO_WALK, _RECORDS, _COLUMNS, _RESTART = 0, 1, 2, 3


class CompletedFetch:
    """Fetched data of one partition, consumed incrementally by the collector."""

    __slots__ = (
        "_aborted",
        "_aborted_initial",
        "_aborted_pids",
        "_batch",
        "_batches",
        "_check_crcs",
        "_chunk",
        "_chunk_end_epoch",
        "_chunk_end_offset",
        "_chunk_epochs",
        "_chunk_offsets",
        "_chunk_row",
        "_chunk_rows",
        "_corruption",
        "_cursor",
        "_decode_offset",
        "_index",
        "_pending",
        "_read_committed",
        "_records",
        "_walk",
        "_walk_done",
        "_walk_epoch",
        "_walk_offset",
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
        self._aborted_initial: list[tuple[int, int]] = [
            (first, pid) for pid, first in (aborted_transactions or [])
        ]
        heapq.heapify(self._aborted_initial)
        self._aborted = list(self._aborted_initial)
        self._aborted_pids: set[int] = set()
        self._walk = _NO_WALK
        #: the record kernel that decodes it (the collector may set it before the first read)
        self.kernel: RecordDecoder = kernel if kernel is not None else active_kernel()
        self._batches: Iterator[RecordBatchView] | None = None
        # The batch being read and its cursor; ConsumerRecords taken from the cursor but not
        # returned yet (a deserializer failed on _records[_index]).
        self._batch: RecordBatchView | None = None
        self._cursor: BatchCursorView | None = None
        self._records: list[ConsumerRecord] | None = None
        self._index = 0
        # (reason, position) of corrupt data met; it is raised on every later call (for the
        # columns, once the rows before it are handed out)
        self._corruption: tuple[str, int] | None = None
        # The columns walk: decoded rows not handed out yet (a pyarrow.RecordBatch), their
        # offsets, the first row of each leader epoch in them, where the walk is after them.
        self._chunk: Any = None
        self._chunk_offsets: memoryview | None = None
        self._chunk_epochs: list[tuple[int, int | None]] = []
        self._chunk_row = self._chunk_rows = 0
        self._chunk_end_offset = fetch_offset
        self._chunk_end_epoch: int | None = None
        self._walk_offset = self._decode_offset = fetch_offset
        self._walk_epoch: int | None = None
        self._walk_done = False
        # batches the walk accepted, to decode (from the decode offset on) before it goes on:
        # one a large call took part of, or one that did not fit the last columns (OverflowError)
        self._pending: list[RecordBatchView] = []

    def _next_batch(self) -> RecordBatchView | None:
        if self._batches is None:
            if self.records is None:
                return None
            self._batches = self.kernel.iter_batches(
                self.records, check_crcs=self._check_crcs, topic=self.tp.topic, partition=self.tp.partition
            )
        return next(self._batches, None)

    def _skip_batch(self, batch: RecordBatchView, position: int) -> bool:
        """Whether to skip ``batch`` entirely (control, aborted, or before ``position``). The
        transaction bookkeeping sees every batch, also those before the position, as Java's
        does: a walk restarted from the first batch then knows the same aborted producers."""
        if self._read_committed and batch.is_transactional:
            while self._aborted and self._aborted[0][0] <= batch.last_offset:
                self._aborted_pids.add(heapq.heappop(self._aborted)[1])
            if batch.is_control:
                if batch.control_type() == CONTROL_ABORT:
                    self._aborted_pids.discard(batch.producer_id)
                return True
            if batch.producer_id in self._aborted_pids:
                return True
        return batch.is_control or batch.next_offset <= position

    def _load_next_batch(self) -> bool:
        """Advance to the next batch with records to return; False when the data is exhausted."""
        while True:
            batch = self._next_batch()
            if batch is None:
                return False
            if self._skip_batch(batch, self.next_fetch_offset):
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
        if self._walk != _RECORDS:
            self._start_walk(_RECORDS)
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
        except (RecordDeserializationError, DeserializerUnavailableError, OverflowError):
            # A deserializer failed, or could not reach its registry (the position stays at
            # that record, so the next call tries it again), or the columns are full (the
            # caller has records).
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

    def fetch_arrow(
        self, builder: ColumnBuilderView, max_records: int, out: list[Any], call_rows: int | None = None
    ) -> int:
        """Append to ``out`` up to ``max_records`` rows from the position on, as one
        ``pyarrow.RecordBatch`` (a zero-copy slice of the decoded rows; ``builder``, a
        ColumnBuilder of this fetch's kernel, decodes them), and move the position past them;
        returns how many (0: the fetch is used up, ``consumed`` is then set). ``call_rows``:
        the rows later calls take (``max.poll.records``; default ``max_records``), so that
        what is decoded ends where a call does.

        Corrupt data is raised (CorruptRecordError, at the offset after the last good record)
        once the rows before it are handed out, and again on every later call. OverflowError
        when one batch alone does not fit Arrow's columns.
        """
        if self._walk != _COLUMNS:
            self._start_walk(_COLUMNS)
        row = self._chunk_row
        left = self._chunk_rows - row
        while not left:  # nothing decoded left to hand out
            if self._chunk is not None:
                # a full call took the last decoded rows: on past what was skipped after them
                self.next_fetch_offset = self._chunk_end_offset
                self.last_epoch = self._chunk_end_epoch
                self._drop_chunk()
            if self._corruption is not None:
                raise self._corrupt_error()
            if self._walk_done and not self._pending:
                self.consumed = True
                return 0
            self._decode_ahead(builder, max_records, call_rows or max_records)
            row = self._chunk_row
            left = self._chunk_rows - row
        taken = max_records if max_records < left else left
        end = row + taken
        out.append(self._chunk.slice(row, taken))
        if taken < max_records:
            # All the decoded rows, and the call wants more: on past the batches skipped
            # after them (markers, aborted data), as poll() goes on looking for records.
            self.next_fetch_offset = self._chunk_end_offset
            self.last_epoch = self._chunk_end_epoch
            self._drop_chunk()
        else:
            # A full call stops after its last row, as poll()'s does (even before a marker).
            assert self._chunk_offsets is not None
            self._chunk_row = end
            self.next_fetch_offset = self._chunk_offsets[end - 1] + 1
            epochs = self._chunk_epochs
            self.last_epoch = epochs[0][1] if len(epochs) == 1 else _epoch_of_row(epochs, end - 1)
        return taken

    @property
    def decoded_rows(self) -> int:
        """Rows decoded ahead for ``poll_arrow()`` and not handed out yet."""
        return self._chunk_rows - self._chunk_row

    def append_arrow(self, builder: ColumnBuilderView, max_records: int) -> int:
        """Append up to ``max_records`` rows from the position on to ``builder`` (a
        ColumnBuilder of this fetch's kernel, shared by the fetches of one call: a large call
        makes its columns once, with no concatenation) and move the position past them;
        returns how many (0: the fetch is used up, ``consumed`` is then set). Errors as
        :meth:`fetch_arrow`; on an error the rows appended before it stay in the builder."""
        if self._walk != _COLUMNS or self._chunk is not None:
            if self._walk == _COLUMNS:  # rows decoded for slices: decode from the position
                self._walk = _RESTART
            self._start_walk(_COLUMNS)
        if self._corruption is not None:
            raise self._corrupt_error()
        if self._walk_done and not self._pending:
            self.consumed = True
            return 0
        rows, epochs, last_offset = self._decode(builder, max_records, max_records, cap=sys.maxsize)
        if rows == max_records and last_offset is not None:
            # a full call stops after its last row, as poll()'s does (even before a marker)
            self.next_fetch_offset = last_offset + 1
            self.last_epoch = epochs[-1][1]
        else:
            self.next_fetch_offset = self._decode_offset
            self.last_epoch = self._walk_epoch
            if self._corruption is not None:
                if not rows:
                    raise self._corrupt_error()
            elif self._walk_done and not self._pending:
                self.consumed = True
        return rows

    def _decode_ahead(self, builder: ColumnBuilderView, wanted: int, call_rows: int) -> None:
        """Decode the ``wanted`` rows of this call and those of the next calls of
        ``call_rows`` rows, up to :data:`MIN_DECODE_ROWS` rows in all (the last batch cut
        where a call ends, so that later calls need no concatenation), fewer once past
        :data:`MIN_DECODE_BYTES` bytes (then ending with a whole batch) or
        :data:`DECODE_AHEAD_BYTES`; or up to the end of the data or corrupt data. They become
        the rows handed out next. With no row decoded, the position moves past the batches
        skipped (markers, aborted data)."""
        target = wanted
        if target < MIN_DECODE_ROWS:
            target += -(-(MIN_DECODE_ROWS - target) // call_rows) * call_rows
        rows, epochs, _ = self._decode(
            builder, wanted, target, cap=DECODE_AHEAD_BYTES, min_bytes=MIN_DECODE_BYTES
        )
        columns = builder.finish()  # and the builder starts over
        if not rows:
            self.next_fetch_offset = self._decode_offset
            self.last_epoch = self._walk_epoch
            return
        self._chunk = self.kernel.to_arrow(columns)
        self._chunk_offsets = memoryview(columns.offset).cast("q")
        self._chunk_epochs = epochs
        self._chunk_row = 0
        self._chunk_rows = rows
        self._chunk_end_offset = self._decode_offset
        self._chunk_end_epoch = self._walk_epoch

    def _decode(
        self, builder: ColumnBuilderView, wanted: int, target: int, *, cap: int, min_bytes: int = 0
    ) -> tuple[int, list[tuple[int, int | None]], int | None]:
        """The columns walk: append to ``builder`` the rows from the decode offset on, until
        ``target`` rows (exactly: the last batch is cut, its rest decoded first next time);
        past ``wanted`` rows and ``min_bytes`` bytes of column data, or past ``cap`` bytes,
        it stops after the batch appended; it stops at the end of the data or corrupt data
        (remembered). Returns the rows appended, the first row of each leader epoch among
        them and the offset of the last one (None without rows)."""
        tp = self.tp
        topic, partition = tp.topic, tp.partition
        offset = self._decode_offset  # where the rows decoded start
        walk = self._walk_offset  # where the batch iterator is
        epoch = self._walk_epoch
        epochs: list[tuple[int, int | None]] = []
        pending = self._pending
        rows = 0
        nbytes = 0
        last_row: int | None = None
        try:
            while rows < target and nbytes < cap and (rows < wanted or nbytes < min_bytes):
                if pending:
                    batch = pending.pop(0)  # accepted by the walk already
                else:
                    offset = max(offset, walk)  # on past what the walk skipped
                    fetched = self._next_batch()
                    if fetched is None:
                        self._walk_done = True
                        break
                    batch = fetched
                    if self._skip_batch(batch, offset):
                        offset = walk = max(offset, batch.next_offset)
                        continue
                try:
                    appended, remaining, last_offset = builder.append_batch(
                        batch, topic, partition, offset, target - rows
                    )
                except OverflowError:
                    pending.insert(0, batch)  # the first of the next rows (raised at once alone)
                    if not rows:
                        raise
                    break
                batch_epoch = batch.partition_leader_epoch
                if batch_epoch >= 0:
                    epoch = batch_epoch
                if appended:
                    if not epochs or epochs[-1][1] != epoch:
                        epochs.append((rows, epoch))
                    rows += appended
                    last_row = last_offset
                    if target > wanted or cap != sys.maxsize:
                        nbytes = builder.nbytes
                if remaining and last_offset is not None:  # cut short: the rest comes next
                    pending.insert(0, batch)
                    offset = last_offset + 1
                    break
                offset = max(offset, batch.next_offset)
                walk = max(walk, offset)
        except CorruptRecordError as exc:
            # The batch iterator cannot resume after corrupt data. The decoder's error names
            # the offset in the batch header, which may be garbage like the rest.
            self._corruption = (exc.reason, offset)
        if not pending:
            offset = max(offset, walk)
        self._walk_offset = walk
        self._decode_offset = offset
        self._walk_epoch = epoch
        return rows, epochs, last_row

    def _drop_chunk(self) -> None:
        self._chunk = self._chunk_offsets = None
        self._chunk_row = self._chunk_rows = 0

    def _start_walk(self, walk: int) -> None:
        """Walk the batches afresh from the position on, for ``walk`` (records or columns):
        what the other walk decoded ahead is dropped, its corruption found again (at the same
        position) when the new walk gets there."""
        if self._walk != _NO_WALK:
            self._batches = None
            self._drop_batch()
            self._drop_chunk()
            self._pending = []
            self._corruption = None
            self._aborted = list(self._aborted_initial)
            self._aborted_pids = set()
        self._walk = walk
        self._walk_offset = self._decode_offset = self.next_fetch_offset
        self._walk_epoch = self.last_epoch
        self._walk_done = False

    def release_decoded(self) -> None:
        """Let go of the rows decoded ahead (the partition was paused): the fetched bytes stay,
        and are decoded again from the position when it is resumed."""
        if self._walk == _COLUMNS:
            self._drop_chunk()
            self._pending = []
            self._walk = _RESTART

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
            # an outage (the Schema Registry did not answer) or bad data
            raise deserialization_error(
                exc,
                topic=self.tp.topic,
                partition=self.tp.partition,
                offset=record.offset,
                origin="key" if is_key else "value",
                record=record,
            ) from exc

    def drain(self) -> None:
        """Mark as fully consumed (its partition was unassigned or reset)."""
        self.consumed = True
        self._drop_batch()
        self._drop_chunk()
        self._pending = []
        self._batches = None


def _epoch_of_row(epochs: list[tuple[int, int | None]], row: int) -> int | None:
    """The leader epoch of ``row`` from ``(first row, epoch)`` entries in row order."""
    for first, epoch in reversed(epochs):
        if first <= row:
            return epoch
    return epochs[0][1]
