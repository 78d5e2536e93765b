"""Encoding records for the producer: the pure-Python twin of ``kaflux.records._encode``. [pure]

Both modules offer the same functions and behave identically (the same bytes, the same errors);
the producer uses the compiled one when it is built (see
:func:`kaflux.records.kernels.encoder`). They write the *records section* of a v2 record batch
(each record: a length varint, attributes, timestamp and offset deltas, key, value, headers);
the batch header, compression and CRC are added when a batch is closed
(:func:`kaflux.records.assemble_batch`).

* :func:`murmur2` / :func:`partition_for_key`: Kafka's key hash and default partition.
* :func:`call_deliveries`: the producer's delivery callbacks of a batch written without error.
* :func:`untrack` / :func:`track`: nothing here (Python cannot take an object out of the cyclic
  garbage collector); the compiled twin's take the producer's record futures out of it.
* :class:`RecordsWriter`: one batch's records, appended one at a time, up to a byte limit.
* :func:`encode_columns`: many rows at once from Arrow-layout buffers (``Producer.send_arrow``):
  each row's partition is chosen (the row's own, its key's hash, or a sticky partition that
  moves on when its batch fills), and each partition's rows are cut into chunks of at most
  ``limit`` bytes. It returns ``(partition, records, record_count, base_timestamp, max_timestamp)``
  per chunk, in row order within each partition.

Columns are passed as :class:`BinaryColumn` / :class:`IntColumn` / :class:`HeadersColumn`
tuples (defined in :mod:`kaflux.records.definitions`, shared with the compiled twin) of buffers
(memoryviews), exactly as Arrow lays them out: a validity bitmap (``None``: no nulls), int32
offsets into a data buffer, and the array's ``offset`` (a sliced array starts there). Nothing
here imports pyarrow.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

from kaflux.records.definitions import BinaryColumn, Chunk, HeadersColumn, IntColumn

__all__ = [
    "KIND",
    "BinaryColumn",
    "Chunk",
    "HeadersColumn",
    "IntColumn",
    "RecordsWriter",
    "call_deliveries",
    "encode_columns",
    "murmur2",
    "partition_for_key",
    "track",
    "untrack",
]

#: Which implementation this module is ("pure"; the compiled twin says "compiled").
KIND: Final = "pure"

_M: Final = 0x5BD1E995
_MASK: Final = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's 32-bit murmur2 (seed 0x9747b28c), as a signed 32-bit int like Java's."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    end = length - (length & 3)
    for i in range(0, end, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length & 3
    if rest == 3:
        h ^= data[end + 2] << 16
    if rest >= 2:
        h ^= data[end + 1] << 8
    if rest >= 1:
        h ^= data[end]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition Java's default partitioner picks for ``key``."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


def call_deliveries(
    callbacks: list[Any],
    metadata_type: type[tuple[Any, ...]],
    topic: str,
    partition: int,
    base_offset: int,
    log_append_time: int,
    on_error: Callable[[], object],
) -> None:
    """Call the delivery callbacks of a batch written without error, in order.

    ``callbacks`` is flat: index (in the batch), timestamp, callback for each record. Each is
    called as ``callback(metadata_type(topic, partition, offset, timestamp), None)``: offset
    ``base_offset + index`` (-1 when ``base_offset`` is), timestamp ``log_append_time`` when it
    is not -1, else the record's. An exception in one calls ``on_error()`` (within the
    ``except`` block, so it may log the exception) and the others still run.

    Raises:
        ValueError: ``callbacks`` is not made of triples (nothing is called).
        TypeError: ``metadata_type`` is not a tuple class of 4 fields (a NamedTuple).
    """
    if len(callbacks) % 3:
        raise ValueError("callbacks must be (index, timestamp, callback) triples")
    if (
        not issubclass(metadata_type, tuple)
        or len(getattr(metadata_type, "_fields", ())) != 4
        or metadata_type.__basicsize__ != tuple.__basicsize__
    ):
        raise TypeError(f"metadata_type must be a NamedTuple of 4 fields, got {metadata_type!r}")
    new = tuple.__new__
    each = iter(callbacks)
    for index, timestamp, callback in zip(each, each, each, strict=True):
        offset = base_offset + index if base_offset >= 0 else -1
        metadata = new(
            metadata_type, (topic, partition, offset, log_append_time if log_append_time >= 0 else timestamp)
        )
        try:
            callback(metadata, None)
        except Exception:
            on_error()


def untrack(obj: object) -> None:
    """The compiled twin takes ``obj`` out of the cyclic garbage collector; Python cannot, so
    this does nothing (``obj`` stays tracked: correct, only slower to collect around)."""


def track(obj: object) -> None:
    """Undo :func:`untrack`: nothing to undo here."""


def _varint_size(value: int) -> int:
    """Bytes of the zig-zag varint of a signed 64-bit ``value``."""
    z = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    size = 1
    while z > 0x7F:
        z >>= 7
        size += 1
    return size


def _put_varint(out: bytearray, value: int) -> None:
    z = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)


def _check_bytes(what: str, data: object) -> None:
    if data is not None and not isinstance(data, bytes):
        raise TypeError(f"{what} must be bytes or None, got {type(data).__name__}")


def _encoded_headers(headers: Sequence[tuple[str, bytes | None]] | None) -> list[tuple[bytes, bytes | None]]:
    if not headers:
        return []
    out: list[tuple[bytes, bytes | None]] = []
    for item in headers:
        if not isinstance(item, tuple) or len(item) != 2:
            raise TypeError(f"a header must be a (str, bytes | None) pair, got {item!r}")
        key, value = item
        if not isinstance(key, str):
            raise TypeError(f"a header key must be str, got {type(key).__name__}")
        _check_bytes("a header value", value)
        out.append((key.encode("utf-8"), value))
    return out


def _write_record(
    out: bytearray,
    timestamp_delta: int,
    offset_delta: int,
    key: bytes | memoryview | None,
    value: bytes | memoryview | None,
    headers: Sequence[tuple[bytes | memoryview, bytes | memoryview | None]],
) -> None:
    """Append one record (its length varint first) to ``out``."""
    body = 1 + _varint_size(timestamp_delta) + _varint_size(offset_delta)
    body += 1 if key is None else _varint_size(len(key)) + len(key)
    body += 1 if value is None else _varint_size(len(value)) + len(value)
    body += _varint_size(len(headers))
    for hk, hv in headers:
        body += _varint_size(len(hk)) + len(hk)
        body += 1 if hv is None else _varint_size(len(hv)) + len(hv)
    _put_varint(out, body)
    out.append(0)
    _put_varint(out, timestamp_delta)
    _put_varint(out, offset_delta)
    if key is None:
        out.append(1)
    else:
        _put_varint(out, len(key))
        out += key
    if value is None:
        out.append(1)
    else:
        _put_varint(out, len(value))
        out += value
    _put_varint(out, len(headers))
    for hk, hv in headers:
        _put_varint(out, len(hk))
        out += hk
        if hv is None:
            out.append(1)
        else:
            _put_varint(out, len(hv))
            out += hv


class RecordsWriter:
    """The records of one batch, appended in order, up to ``limit`` bytes.

    The first record's timestamp is the batch's base timestamp. A record that would take the
    section over ``limit`` is refused (``append`` returns 0) unless the writer is empty: a
    batch always takes its first record, however large.
    """

    __slots__ = ("_base_timestamp", "_buf", "_count", "_limit", "_max_timestamp")

    def __init__(self, limit: int) -> None:
        self._buf = bytearray()
        self._count = 0
        self._limit = limit
        self._base_timestamp = -1
        self._max_timestamp = -1

    def append(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
    ) -> int:
        """Add a record; returns the bytes it took, or 0 when it does not fit (nothing added).

        Raises:
            TypeError: ``key``, ``value`` or a header value is not bytes or None, or a header
                is not a (str, bytes | None) pair.
        """
        _check_bytes("key", key)
        _check_bytes("value", value)
        encoded = _encoded_headers(headers)
        count = self._count
        base = timestamp if count == 0 else self._base_timestamp
        buf = self._buf
        before = len(buf)
        _write_record(buf, timestamp - base, count, key, value, encoded)
        added = len(buf) - before
        if count and len(buf) > self._limit:
            del buf[before:]
            return 0
        if count == 0:
            self._base_timestamp = self._max_timestamp = timestamp
        elif timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        self._count = count + 1
        return added

    @property
    def count(self) -> int:
        """Records appended so far."""
        return self._count

    @property
    def size(self) -> int:
        """Bytes of the records section so far."""
        return len(self._buf)

    @property
    def base_timestamp(self) -> int:
        """The first record's timestamp (-1 while empty)."""
        return self._base_timestamp

    @property
    def max_timestamp(self) -> int:
        """The largest record timestamp (-1 while empty)."""
        return self._max_timestamp

    def getvalue(self) -> bytes:
        """The records section."""
        return bytes(self._buf)


def _is_valid(validity: memoryview | None, index: int) -> bool:
    return validity is None or bool(validity[index >> 3] & (1 << (index & 7)))


def _binary(column: BinaryColumn | None, row: int) -> memoryview | None:
    if column is None:
        return None
    index = column.offset + row
    if not _is_valid(column.validity, index):
        return None
    return column.data[column.offsets[index] : column.offsets[index + 1]]


class _Open:
    """A partition's chunk being filled."""

    __slots__ = ("base", "buf", "count", "max_ts")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.count = 0
        self.base = 0
        self.max_ts = 0


def encode_columns(
    num_rows: int,
    num_partitions: int,
    sticky_partition: int,
    limit: int,
    default_timestamp: int,
    keys: BinaryColumn | None,
    values: BinaryColumn | None,
    partitions: IntColumn | None,
    timestamps: IntColumn | None,
    headers: HeadersColumn | None,
) -> tuple[list[Chunk], int]:
    """Encode ``num_rows`` rows into per-partition chunks of at most ``limit`` bytes.

    A row goes to its ``partitions`` value when that is not null, else to the partition of its
    key (:func:`partition_for_key`), else (no key) to the sticky partition, which moves to the
    next partition each time a chunk of the sticky partition fills up (the row that did not fit
    goes there). Null timestamps (or no timestamp column) mean ``default_timestamp``. Returns the
    chunks -- those that filled up in the order they did, then the rest by partition -- and the
    sticky partition to use next. Within a partition, chunks and records keep row order.

    Raises:
        ValueError: a row's partition is outside ``[0, num_partitions)``, or a header entry's key
            is null.
    """
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    sticky = sticky_partition % num_partitions
    open_chunks: dict[int, _Open] = {}
    chunks: list[Chunk] = []

    def try_append(
        partition: int,
        timestamp: int,
        key: memoryview | None,
        value: memoryview | None,
        row_headers: list[tuple[memoryview, memoryview | None]],
    ) -> bool:
        """Add the row to the partition's open chunk (starting one if needed); False when it
        does not fit in a chunk that already has records (nothing is added then)."""
        chunk = open_chunks.get(partition)
        if chunk is None:
            chunk = open_chunks[partition] = _Open()
        if chunk.count == 0:
            chunk.base = chunk.max_ts = timestamp
            _write_record(chunk.buf, 0, 0, key, value, row_headers)
            chunk.count = 1
            return True
        before = len(chunk.buf)
        _write_record(chunk.buf, timestamp - chunk.base, chunk.count, key, value, row_headers)
        if len(chunk.buf) > limit:
            del chunk.buf[before:]
            return False
        chunk.count += 1
        if timestamp > chunk.max_ts:
            chunk.max_ts = timestamp
        return True

    def roll(partition: int) -> None:
        chunk = open_chunks.pop(partition)
        chunks.append(Chunk(partition, bytes(chunk.buf), chunk.count, chunk.base, chunk.max_ts))

    for row in range(num_rows):
        key = _binary(keys, row)
        value = _binary(values, row)
        partition = -1
        if partitions is not None:
            index = partitions.offset + row
            if _is_valid(partitions.validity, index):
                partition = partitions.values[index]
                if not 0 <= partition < num_partitions:
                    raise ValueError(
                        f"row {row}: partition {partition} does not exist (the topic has {num_partitions})"
                    )
        by_sticky = False
        if partition < 0:
            if key is not None:
                partition = (murmur2(bytes(key)) & 0x7FFFFFFF) % num_partitions
            else:
                partition, by_sticky = sticky, True
        timestamp = default_timestamp
        if timestamps is not None:
            index = timestamps.offset + row
            if _is_valid(timestamps.validity, index):
                timestamp = timestamps.values[index]
        row_headers: list[tuple[memoryview, memoryview | None]] = []
        if headers is not None:
            index = headers.offset + row
            if _is_valid(headers.validity, index):
                for entry in range(headers.offsets[index], headers.offsets[index + 1]):
                    header_key = _binary(headers.keys, entry)
                    if header_key is None:
                        raise ValueError(f"row {row}: a header has a null key")
                    row_headers.append((header_key, _binary(headers.values, entry)))
        if try_append(partition, timestamp, key, value, row_headers):
            continue
        roll(partition)
        if by_sticky and num_partitions > 1:
            sticky = partition = (sticky + 1) % num_partitions
            if try_append(partition, timestamp, key, value, row_headers):
                continue
            roll(partition)
        try_append(partition, timestamp, key, value, row_headers)
    for partition in sorted(open_chunks):
        roll(partition)
    return chunks, sticky
