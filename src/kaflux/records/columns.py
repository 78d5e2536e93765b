"""Columnar decoding of record batches into Arrow-layout buffers. [pure]

:class:`ColumnBuilder` accumulates the records of many batches (of any topics and
partitions) as column buffers in the Apache Arrow memory layout; :meth:`ColumnBuilder.finish`
hands them out as a :class:`RecordColumns` of ``bytearray`` objects, which
:func:`to_arrow` (or ``pyarrow.Array.from_buffers`` directly) wraps without copying.

This module is the pure-Python twin; the compiled kernel (``kaflux.records._kernel``) has a
``ColumnBuilder`` with the same contract that decodes straight from the batch bytes into
the buffers, creating no Python object per record. ``kaflux.records.ColumnBuilder`` is the
active one. The contract (see also :class:`kaflux.records.interface.ColumnBuilderView`):

* ``append_batch(batch, topic, partition, min_offset, max_records)`` decodes *all* records
  of ``batch`` (so it raises exactly what ``batch.records()`` raises, as
  :class:`~kaflux.errors.CorruptRecordError`), skips the leading records whose offset is
  below ``min_offset`` (records before the consumer's position), appends up to
  ``max_records`` of the rest and returns ``(appended, remaining, last_offset)``:
  ``remaining`` counts the batch's records after the appended ones, ``last_offset`` is the
  offset of the last appended record (``None`` if none was). A batch is appended
  completely or not at all: on any error the builder is left as it was.
* A record whose offset or timestamp does not fit in int64 (possible only with corrupt
  data) raises ``CorruptRecordError``; data columns are limited to ``2**31 - 1`` bytes
  (Arrow ``binary``/``string`` use int32 offsets): an append that would exceed that raises
  ``OverflowError`` and changes nothing -- call :meth:`finish` and append the batch again.
* ``append_cursor(cursor, topic, partition, min_offset, max_records)`` does the same for
  the next records of a :class:`BatchCursor` (a batch checked whole once, then taken a few
  records at a time, as a consumer takes it under ``max.poll.records``) and returns
  ``(appended, last_offset)``.
* ``finish()`` returns the columns and resets the builder.

:func:`to_arrow` (this kernel's; the compiled kernel has its own, through the Arrow C data
interface) makes a ``pyarrow.RecordBatch`` of the columns without copying them.
"""

from __future__ import annotations

import sys
from array import array
from typing import Any

from kaflux.records.consumer_record import ConsumerRecord
from kaflux.records.definitions import (
    INT32_MAX,
    INT64_MIN,
    OVERFLOW_MESSAGE,
    RecordColumns,
    check_append_arguments,
    check_record_context,
    check_record_range,
)
from kaflux.records.types import Record

__all__ = ["OVERFLOW_MESSAGE", "BatchCursor", "ColumnBuilder", "RecordColumns", "arrow_schema", "to_arrow"]


class _Binary:
    """One variable-size column: offsets, data and validity bits."""

    __slots__ = ("data", "null_count", "offsets", "valid")

    def __init__(self) -> None:
        self.offsets = array("i", [0])
        self.data = bytearray()
        self.valid: list[bool] = []
        self.null_count = 0

    def append(self, item: bytes | None) -> None:
        if item is None:
            self.valid.append(False)
            self.null_count += 1
        else:
            self.data += item
            self.valid.append(True)
        self.offsets.append(len(self.data))

    def state(self) -> tuple[int, int, int]:
        return len(self.offsets), len(self.data), self.null_count

    def restore(self, state: tuple[int, int, int]) -> None:
        n_offsets, n_data, self.null_count = state
        del self.offsets[n_offsets:]
        del self.data[n_data:]
        del self.valid[n_offsets - 1 :]

    def validity(self) -> bytearray | None:
        if not self.null_count:
            return None
        bits = bytearray((len(self.valid) + 7) // 8)
        for i, valid in enumerate(self.valid):
            if valid:
                bits[i >> 3] |= 1 << (i & 7)
        return bits


class BatchCursor:
    """A batch whose records a consumer takes a few at a time, as columns
    (:meth:`ColumnBuilder.append_cursor`) or as ConsumerRecords (:meth:`consumer_records`),
    under ``max.poll.records``; both kinds of take may alternate.

    Made once per batch: it decodes (and decompresses) the whole batch at once, raising
    exactly what ``append_batch`` would (the batch's CorruptRecordError, or the int64 range
    error), so that a batch is found bad before any of its records is handed out; later
    takes resume where the last one stopped instead of decoding the batch again. (The
    compiled twin checks the batch up front and then builds only what each take takes.)
    """

    __slots__ = ("_index", "_records", "batch")

    def __init__(self, batch: Any) -> None:
        records: list[Record] = batch.records()
        check_record_range(batch, records)
        self.batch = batch
        self._records = records
        self._index = 0

    @property
    def remaining(self) -> int:
        """Records of the batch not yet taken or skipped."""
        return len(self._records) - self._index

    def consumer_records(
        self,
        topic: str,
        partition: int,
        leader_epoch: int | None,
        min_offset: int = INT64_MIN,
        max_records: int = sys.maxsize,
    ) -> list[ConsumerRecord]:
        """The ConsumerRecords of the next records: skip the leading ones whose offset is
        below ``min_offset``, then take up to ``max_records`` (tagged as
        ``RecordBatch.consumer_records`` tags them). The cursor moves past what was skipped
        and taken. Argument errors as ``consumer_records``."""
        check_append_arguments(partition, min_offset, max_records)
        check_record_context(topic, leader_epoch)
        records = self._records
        count = len(records)
        i = self._index
        while i < count and records[i][0] < min_offset:
            i += 1
        end = min(count, i + max_records)
        self._index = end
        ttype = self.batch.timestamp_type
        make = ConsumerRecord
        return [
            make(topic, partition, r[0], r[1], ttype, r[2], r[3], r[4], leader_epoch) for r in records[i:end]
        ]


class ColumnBuilder:
    """Accumulates records of many batches as Arrow-layout columns (see the module docstring)."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._offset = array("q")
        self._timestamp = array("q")
        self._timestamp_type = array("i")
        self._partition = array("i")
        self._topic = _Binary()
        self._key = _Binary()
        self._value = _Binary()
        self._header_offsets = array("i", [0])
        self._header_key = _Binary()
        self._header_value = _Binary()

    def __len__(self) -> int:
        return len(self._offset)

    @property
    def nbytes(self) -> int:
        """Bytes of the variable-size data (topic, key, value, header key and value)."""
        return sum(
            len(column.data)
            for column in (self._topic, self._key, self._value, self._header_key, self._header_value)
        )

    def append_batch(
        self,
        batch: Any,
        topic: str,
        partition: int,
        min_offset: int = INT64_MIN,
        max_records: int = sys.maxsize,
    ) -> tuple[int, int, int | None]:
        """Decode ``batch`` and append its records from ``min_offset`` on, at most
        ``max_records`` of them; returns ``(appended, remaining, last_offset)``."""
        check_append_arguments(partition, min_offset, max_records)
        topic_utf8 = topic.encode()
        records: list[Record] = batch.records()
        check_record_range(batch, records)
        count = len(records)
        i = 0
        while i < count and records[i][0] < min_offset:
            i += 1
        end = min(count, i + max_records)
        self._append(records, i, end, topic_utf8, partition, int(batch.timestamp_type))
        return end - i, count - end, records[end - 1][0] if end > i else None

    def append_cursor(
        self,
        cursor: BatchCursor,
        topic: str,
        partition: int,
        min_offset: int = INT64_MIN,
        max_records: int = sys.maxsize,
    ) -> tuple[int, int | None]:
        """Append the next records of ``cursor``: skip the leading ones whose offset is below
        ``min_offset``, then take up to ``max_records``; returns ``(appended, last_offset)``
        (``last_offset`` None when none was appended). The cursor moves past what was
        skipped and appended. Atomic like :meth:`append_batch` (the same OverflowError)."""
        check_append_arguments(partition, min_offset, max_records)
        if not isinstance(cursor, BatchCursor):
            raise TypeError(f"expected a pure-kernel BatchCursor, got {type(cursor).__name__}")
        topic_utf8 = topic.encode()
        records = cursor._records
        count = len(records)
        i = cursor._index
        while i < count and records[i][0] < min_offset:
            i += 1
        end = min(count, i + max_records)
        self._append(records, i, end, topic_utf8, partition, int(cursor.batch.timestamp_type))
        cursor._index = end
        return end - i, records[end - 1][0] if end > i else None

    def _append(
        self, records: list[Record], i: int, end: int, topic_utf8: bytes, partition: int, timestamp_type: int
    ) -> None:
        """Append ``records[i:end]``, all or none."""
        state = self._state()
        try:
            for record in records[i:end]:
                self._offset.append(record[0])
                self._timestamp.append(record[1])
                self._timestamp_type.append(timestamp_type)
                self._partition.append(partition)
                self._topic.append(topic_utf8)
                self._key.append(record[2])
                self._value.append(record[3])
                for header_key, header_value in record[4]:
                    self._header_key.append(header_key.encode())
                    self._header_value.append(header_value)
                self._header_offsets.append(len(self._header_key.offsets) - 1)
                if max(self._column_sizes()) > INT32_MAX:
                    raise OverflowError(OVERFLOW_MESSAGE)
        except BaseException:
            self._restore(state)
            raise

    def _column_sizes(self) -> list[int]:
        """Sizes that must fit Arrow's int32 offsets: data bytes per column, header entries."""
        columns = (self._topic, self._key, self._value, self._header_key, self._header_value)
        return [len(column.data) for column in columns] + [len(self._header_key.offsets) - 1]

    def _state(self) -> tuple[Any, ...]:
        return (
            len(self._offset),
            len(self._header_offsets),
            self._topic.state(),
            self._key.state(),
            self._value.state(),
            self._header_key.state(),
            self._header_value.state(),
        )

    def _restore(self, state: tuple[Any, ...]) -> None:
        rows, header_rows, topic, key, value, header_key, header_value = state
        for column in (self._offset, self._timestamp, self._timestamp_type, self._partition):
            del column[rows:]
        del self._header_offsets[header_rows:]
        self._topic.restore(topic)
        self._key.restore(key)
        self._value.restore(value)
        self._header_key.restore(header_key)
        self._header_value.restore(header_value)

    def finish(self) -> RecordColumns:
        """The columns of everything appended so far; the builder starts over empty."""
        columns = RecordColumns(
            num_rows=len(self._offset),
            offset=bytearray(self._offset.tobytes()),
            timestamp=bytearray(self._timestamp.tobytes()),
            timestamp_type=bytearray(self._timestamp_type.tobytes()),
            partition=bytearray(self._partition.tobytes()),
            topic_offsets=bytearray(self._topic.offsets.tobytes()),
            topic_data=self._topic.data,
            key_validity=self._key.validity(),
            key_null_count=self._key.null_count,
            key_offsets=bytearray(self._key.offsets.tobytes()),
            key_data=self._key.data,
            value_validity=self._value.validity(),
            value_null_count=self._value.null_count,
            value_offsets=bytearray(self._value.offsets.tobytes()),
            value_data=self._value.data,
            header_offsets=bytearray(self._header_offsets.tobytes()),
            header_count=len(self._header_key.offsets) - 1,
            header_key_offsets=bytearray(self._header_key.offsets.tobytes()),
            header_key_data=self._header_key.data,
            header_value_validity=self._header_value.validity(),
            header_value_null_count=self._header_value.null_count,
            header_value_offsets=bytearray(self._header_value.offsets.tobytes()),
            header_value_data=self._header_value.data,
        )
        self._reset()
        return columns


_ARROW_SCHEMA: list[Any] = []


def arrow_schema() -> Any:
    """The ``pyarrow.Schema`` of :func:`to_arrow`'s batches (made once): ``key`` binary,
    ``value`` binary, ``topic`` string, ``partition`` int32, ``offset`` int64, ``timestamp``
    timestamp[ms, tz=UTC], ``timestamp_type`` int32, ``headers`` list<struct<key: string not
    null, value: binary>>. Needs pyarrow."""
    if not _ARROW_SCHEMA:
        import pyarrow as pa

        header = pa.struct([pa.field("key", pa.string(), nullable=False), pa.field("value", pa.binary())])
        _ARROW_SCHEMA.append(
            pa.schema(
                [
                    pa.field("key", pa.binary()),
                    pa.field("value", pa.binary()),
                    pa.field("topic", pa.string()),
                    pa.field("partition", pa.int32()),
                    pa.field("offset", pa.int64()),
                    pa.field("timestamp", pa.timestamp("ms", tz="UTC")),
                    pa.field("timestamp_type", pa.int32()),
                    pa.field("headers", pa.list_(header)),
                ]
            )
        )
    return _ARROW_SCHEMA[0]


def to_arrow(columns: RecordColumns) -> Any:
    """A ``pyarrow.RecordBatch`` over the buffers of ``columns``, without copying them, with
    the schema :func:`arrow_schema`. Needs pyarrow (the ``arrow`` extra).

    This is the pure kernel's; the compiled kernel's (``kaflux.records.to_arrow`` is the
    active one) hands the buffers over in one step through the Arrow C data interface.
    """
    import pyarrow as pa

    n = columns.num_rows
    h = columns.header_count
    buf = pa.py_buffer

    def binary(
        kind: Any, length: int, validity: bytearray | None, nulls: int, offsets: bytearray, data: bytearray
    ) -> Any:
        return pa.Array.from_buffers(
            kind, length, [None if validity is None else buf(validity), buf(offsets), buf(data)], nulls
        )

    header_struct = pa.StructArray.from_arrays(
        [
            binary(pa.string(), h, None, 0, columns.header_key_offsets, columns.header_key_data),
            binary(
                pa.binary(),
                h,
                columns.header_value_validity,
                columns.header_value_null_count,
                columns.header_value_offsets,
                columns.header_value_data,
            ),
        ],
        fields=[pa.field("key", pa.string(), nullable=False), pa.field("value", pa.binary())],
    )
    headers = pa.Array.from_buffers(
        pa.list_(header_struct.type), n, [None, buf(columns.header_offsets)], 0, children=[header_struct]
    )
    arrays = [
        binary(
            pa.binary(),
            n,
            columns.key_validity,
            columns.key_null_count,
            columns.key_offsets,
            columns.key_data,
        ),
        binary(
            pa.binary(),
            n,
            columns.value_validity,
            columns.value_null_count,
            columns.value_offsets,
            columns.value_data,
        ),
        binary(pa.string(), n, None, 0, columns.topic_offsets, columns.topic_data),
        pa.Array.from_buffers(pa.int32(), n, [None, buf(columns.partition)], 0),
        pa.Array.from_buffers(pa.int64(), n, [None, buf(columns.offset)], 0),
        pa.Array.from_buffers(pa.timestamp("ms", tz="UTC"), n, [None, buf(columns.timestamp)], 0),
        pa.Array.from_buffers(pa.int32(), n, [None, buf(columns.timestamp_type)], 0),
        headers,
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema())
