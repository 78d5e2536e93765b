"""The record kernel's public interface: the Protocols both decoder twins implement. [pure]

Two implementations exist: the pure-Python one (:mod:`kaflux.records.batch_decoder` plus
:mod:`kaflux.records.columns`, gathered in ``kaflux.records._pure``) and the compiled twin
``kaflux.records._kernel`` (Cython, ``_kernel.pyx`` and its ``.pxi`` includes). mypy checks
that both modules satisfy :class:`RecordDecoder` (in :mod:`kaflux.records`;
:mod:`kaflux.records.kernels` chooses one), and code outside ``kaflux.records`` types its
kernel arguments with these. Both provide the functions and classes below with the same
semantics -- same results, same exception types and messages -- so :mod:`kaflux.records` can
pick either (``kaflux.records.KERNEL`` says which). The hot paths are
:meth:`RecordBatchView.records` (one ``Record`` per record) and
:meth:`ColumnBuilderView.append_batch` (Arrow-layout columns, no object per record).

Columnar decoding contract (``ColumnBuilder``), for building ``pyarrow`` record batches::

    builder = kaflux.records.ColumnBuilder()
    for batch in iter_batches(view, topic=t, partition=p):
        appended, remaining, last_offset = builder.append_batch(batch, t, p, position, budget)
    columns = builder.finish()              # RecordColumns of bytearrays, builder reset
    table = kaflux.records.columns.to_arrow(columns)   # zero-copy pyarrow.RecordBatch

* ``append_batch(batch, topic, partition, min_offset=-2**63, max_records=sys.maxsize)``
  takes a batch from the *same* kernel's ``iter_batches``. It decodes all the batch's
  records -- raising exactly the :class:`~kaflux.errors.CorruptRecordError` that
  ``batch.records()`` would -- skips the *leading* records whose offset is below
  ``min_offset`` and appends up to ``max_records`` of the others, each tagged with
  ``topic``, ``partition`` and the batch's timestamp type. Returns ``(appended, remaining,
  last_offset)``: records appended, records of the batch left after them (0 when the batch
  is used up), and the offset of the last appended record (``None`` when none was).
  Control batches are decoded like any other; skipping them is the caller's business.
  It is atomic: on any exception the builder is unchanged.
* A record whose offset or timestamp does not fit int64 raises ``CorruptRecordError``
  (only corrupt data has those). ``partition`` must fit int32 and ``min_offset`` int64,
  ``max_records`` must be >= 0 (``ValueError``). A variable-size column growing past
  ``2**31 - 1`` bytes (Arrow's int32 offsets) raises ``OverflowError`` after the batch was
  found valid: call ``finish()`` and append the batch again.
* ``finish()`` returns a :class:`~kaflux.records.definitions.RecordColumns` and resets the
  builder. Every buffer is a ``bytearray`` in Arrow layout (native-endian int32 offsets
  starting at 0, LSB-first validity bitmaps with the bits past the last row clear, ``None``
  instead of a bitmap for columns without nulls) that ``pyarrow.py_buffer`` wraps without
  copying; see ``RecordColumns`` for the field list. Header keys are UTF-8 (validated as
  ``records()`` does); ``timestamp`` is epoch milliseconds, the batch's ``max_timestamp``
  for LOG_APPEND_TIME batches.
* ``len(builder)`` is the number of rows so far; ``builder.nbytes`` the bytes of
  variable-size data (to decide when to ``finish()``).
* ``BatchCursor(batch)`` decodes and checks a whole batch at once (raising what
  ``append_batch`` would), then ``builder.append_cursor(cursor, topic, partition,
  min_offset, max_records) -> (appended, last_offset)`` appends its next records, skipping
  the leading ones below ``min_offset``, resuming where the previous call stopped: a
  consumer takes a batch ``max.poll.records`` at a time without decoding it again.
  ``cursor.consumer_records(topic, partition, leader_epoch, min_offset, max_records)``
  takes the next records the same way as ConsumerRecords; the two may alternate.

Object decoding for the consumer: ``batch.consumer_records(topic, partition,
leader_epoch, min_offset)`` decodes all records like ``records()`` (raising the same
errors, plus the int64 range error of ``append_batch``) and returns a ``ConsumerRecord``
(the kernel's own type, see :mod:`kaflux.records.consumer_record`) for each record from the
first whose offset is at least ``min_offset`` on.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

from kaflux.errors import CorruptRecordError
from kaflux.records.consumer_record import ConsumerRecord
from kaflux.records.definitions import RecordColumns
from kaflux.records.types import Record


class RecordBatchView(Protocol):
    """What a decoded batch exposes (see ``batch_decoder.RecordBatch``)."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    compression: int
    timestamp_type: int
    is_transactional: bool
    is_control: bool
    has_delete_horizon: bool
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    topic: str | None
    partition: int | None

    @property
    def last_offset(self) -> int: ...

    @property
    def next_offset(self) -> int: ...

    @property
    def size_in_bytes(self) -> int: ...

    def raw(self) -> memoryview: ...

    def corrupt(self, message: str) -> CorruptRecordError: ...

    def records(self) -> list[Record]: ...

    def consumer_records(
        self, topic: str, partition: int, leader_epoch: int | None, min_offset: int = ...
    ) -> list[ConsumerRecord]: ...

    def control_type(self) -> int: ...


class BatchCursorView(Protocol):
    """A batch being appended to columns a few records at a time (see ``columns.BatchCursor``)."""

    def __init__(self, batch: Any) -> None: ...

    @property
    def batch(self) -> Any: ...

    @property
    def remaining(self) -> int: ...

    def consumer_records(
        self,
        topic: str,
        partition: int,
        leader_epoch: int | None,
        min_offset: int = ...,
        max_records: int = ...,
    ) -> list[ConsumerRecord]: ...


class ColumnBuilderView(Protocol):
    """Accumulates decoded records as Arrow-layout columns (see the module docstring)."""

    def __len__(self) -> int: ...

    @property
    def nbytes(self) -> int: ...

    def append_batch(
        self,
        batch: Any,
        topic: str,
        partition: int,
        min_offset: int = ...,
        max_records: int = ...,
    ) -> tuple[int, int, int | None]: ...

    def append_cursor(
        self,
        cursor: Any,
        topic: str,
        partition: int,
        min_offset: int = ...,
        max_records: int = ...,
    ) -> tuple[int, int | None]: ...

    def finish(self) -> RecordColumns: ...


class RecordDecoder(Protocol):
    """The module-level names of a record decoder implementation."""

    @property
    def RecordBatch(self) -> type[RecordBatchView]: ...

    @property
    def ColumnBuilder(self) -> type[ColumnBuilderView]: ...

    @property
    def BatchCursor(self) -> type[BatchCursorView]: ...

    @property
    def ConsumerRecord(self) -> type[ConsumerRecord]: ...

    def decode_records(
        self,
        data: bytes,
        pos: int,
        end: int,
        count: int,
        base_offset: int,
        base_timestamp: int,
        log_append_time: int | None,
        /,
    ) -> list[Record]:
        """Decode exactly ``count`` records from ``data[pos:end]``; raise
        ``RecordFormatError`` (only) on malformed data."""
        ...

    def iter_batches(
        self,
        buf: memoryview,
        *,
        check_crcs: bool = ...,
        topic: str | None = ...,
        partition: int | None = ...,
    ) -> Iterator[RecordBatchView]:
        """Yield the complete batches of ``buf``; raise ``CorruptRecordError`` (only)."""
        ...

    def first_batch_size(self, buf: memoryview, /) -> int | None:
        """Bytes the first batch in ``buf`` needs, or None below 12 bytes."""
        ...

    def control_type(self, record: Record, /) -> int:
        """Control record type (0 ABORT, 1 COMMIT) from a control record's key."""
        ...

    def to_arrow(self, columns: RecordColumns, /) -> Any:
        """A ``pyarrow.RecordBatch`` over the buffers of ``columns`` (no copy), with the
        schema ``columns.arrow_schema()``."""
        ...


__all__ = ["BatchCursorView", "ColumnBuilderView", "RecordBatchView", "RecordDecoder"]
