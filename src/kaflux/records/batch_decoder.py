"""Pure-Python decoder of Kafka v2 record batches (the consumer hot path). [pure]

:func:`iter_batches` walks the batches of a Fetch response's ``records`` field (a
``memoryview`` into the receive buffer) and yields :class:`RecordBatch` objects whose
header fields are parsed and whose CRC-32C is checked; :meth:`RecordBatch.records`
decompresses the batch once and decodes all its records with :func:`decode_records`, the
inner kernel a compiled twin can replace (see :mod:`kaflux.records.interface`).

Semantics:

* A trailing batch cut short by the broker's fetch size limit is not an error: iteration
  stops before it. If even the first batch is incomplete nothing is yielded;
  :func:`first_batch_size` then tells how many bytes that batch needs (``RecordTooLarge``
  reporting is the consumer's business). A batch length that points past the end of the
  buffer is indistinguishable from such a cut, so it is treated the same way.
* Every other structural problem -- bad magic (magic 0/1 is the unsupported legacy
  format), batch length too small, CRC mismatch, unknown codec, negative record count,
  decompression failure or oversized output, varints or lengths running past their
  record, record count not matching the data, bytes left after the last record, invalid
  UTF-8 in a header key -- raises :class:`~kaflux.errors.CorruptRecordError` naming topic,
  partition and the batch's base offset. No other exception type escapes and all work is
  bounded by the input size (decompression by :func:`~kaflux.records.compression.decompression_limit`).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Final

from kaflux.errors import CorruptRecordError, IllegalStateError
from kaflux.records.compression import codec_name, decompress
from kaflux.records.consumer_record import ConsumerRecord, consumer_records_from
from kaflux.records.crc import crc32c
from kaflux.records.definitions import (
    INT64_MIN,
    MAX_CODEC,
    MIN_RECORD_BODY,
    MIN_RECORD_SIZE,
    check_append_arguments,
    check_record_context,
)
from kaflux.records.types import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_MASK,
    DELETE_HORIZON_MASK,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_V2,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    Record,
    RecordFormatError,
)

_BATCH_HEADER: Final = struct.Struct(">qiibIhiqqqhii")
_LOG_HEADER: Final = struct.Struct(">qi")
_CONTROL_KEY: Final = struct.Struct(">hh")
_MIN_BATCH_LENGTH: Final = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD
_new_tuple = tuple.__new__
#: Zig-zag decoding of the one-byte varints 0..127.
_ZIGZAG: Final = tuple((u >> 1) ^ -(u & 1) for u in range(0x80))


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """Decode the zig-zag varint at ``pos`` (up to 10 bytes); returns (value, next pos).

    Used for the multi-byte case; the kernel decodes one-byte varints inline.
    """
    byte = data[pos]
    pos += 1
    value = byte & 0x7F
    shift = 7
    while byte & 0x80:
        if shift > 63:
            raise RecordFormatError(f"varint at position {pos - 10} is longer than 10 bytes")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
    return (value >> 1) ^ -(value & 1), pos


def decode_records(
    data: bytes,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
) -> list[Record]:
    """Decode exactly ``count`` records occupying ``data[pos:end]`` (``data`` must be ``bytes``:
    slicing it is the fastest way to copy out keys and values).

    Record offsets are ``base_offset + offset_delta``; timestamps are ``base_timestamp +
    timestamp_delta`` unless ``log_append_time`` is given, in which case every record gets
    it. Raises :class:`RecordFormatError` (and nothing else) on any malformation,
    including fewer or more bytes than ``count`` records occupy.
    """
    if pos < 0 or end > len(data) or pos > end:
        raise RecordFormatError(f"record range {pos}..{end} is outside the {len(data)}-byte buffer")
    if count < 0:
        raise RecordFormatError(f"negative record count {count}")
    if count > (end - pos) // MIN_RECORD_SIZE:
        raise RecordFormatError(f"record count {count} cannot fit in {end - pos} bytes")
    records: list[Record] = []
    append = records.append
    new = _new_tuple
    read_varint = _read_varint
    zz = _ZIGZAG
    key_cache: dict[bytes, str] = {}
    try:
        for _ in range(count):
            # Varints are decoded inline when they take one byte (through the _ZIGZAG table)
            # or two (zig-zag: (v >> 1) ^ -(v & 1)), by _read_varint when longer.
            b = data[pos]
            if b < 0x80:
                length = zz[b]
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                length = (b & 0x7F) | (c << 7)
                length = (length >> 1) ^ -(length & 1)
                pos += 2
            else:
                length, pos = read_varint(data, pos)
            rec_end = pos + length
            if length < MIN_RECORD_BODY or rec_end > end:
                raise RecordFormatError(f"record length {length} is out of range")
            pos += 1  # attributes (int8, unused)
            b = data[pos]
            if b < 0x80:
                ts_delta = zz[b]
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                ts_delta = (b & 0x7F) | (c << 7)
                ts_delta = (ts_delta >> 1) ^ -(ts_delta & 1)
                pos += 2
            else:
                ts_delta, pos = read_varint(data, pos)
            b = data[pos]
            if b < 0x80:
                offset_delta = zz[b]
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                offset_delta = (b & 0x7F) | (c << 7)
                offset_delta = (offset_delta >> 1) ^ -(offset_delta & 1)
                pos += 2
            else:
                offset_delta, pos = read_varint(data, pos)
            b = data[pos]
            if b < 0x80:
                size = zz[b]
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                size = (b & 0x7F) | (c << 7)
                size = (size >> 1) ^ -(size & 1)
                pos += 2
            else:
                size, pos = read_varint(data, pos)
            if size >= 0:
                key: bytes | None = data[pos : pos + size]
                pos += size
            elif size == -1:
                key = None
            else:
                raise RecordFormatError(f"negative key length {size}")
            b = data[pos]
            if b < 0x80:
                size = zz[b]
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                size = (b & 0x7F) | (c << 7)
                size = (size >> 1) ^ -(size & 1)
                pos += 2
            else:
                size, pos = read_varint(data, pos)
            if size >= 0:
                value: bytes | None = data[pos : pos + size]
                pos += size
            elif size == -1:
                value = None
            else:
                raise RecordFormatError(f"negative value length {size}")
            b = data[pos]
            if b < 0x80:
                header_count = zz[b]
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                header_count = (b & 0x7F) | (c << 7)
                header_count = (header_count >> 1) ^ -(header_count & 1)
                pos += 2
            else:
                header_count, pos = read_varint(data, pos)
            headers: list[tuple[str, bytes | None]] = []
            if header_count:
                # each header takes at least two bytes (key length and value length)
                if header_count < 0 or header_count > (rec_end - pos) // 2:
                    raise RecordFormatError(f"header count {header_count} is out of range")
                while header_count:
                    header_count -= 1
                    b = data[pos]
                    if b < 0x80:
                        size = zz[b]
                        pos += 1
                    elif (c := data[pos + 1]) < 0x80:
                        size = (b & 0x7F) | (c << 7)
                        size = (size >> 1) ^ -(size & 1)
                        pos += 2
                    else:
                        size, pos = read_varint(data, pos)
                    if size < 0:
                        raise RecordFormatError(f"negative header key length {size}")
                    raw_key = data[pos : pos + size]
                    header_key = key_cache.get(raw_key)
                    if header_key is None:  # decode each distinct key once per batch
                        header_key = key_cache[raw_key] = raw_key.decode()
                    pos += size
                    b = data[pos]
                    if b < 0x80:
                        size = zz[b]
                        pos += 1
                    elif (c := data[pos + 1]) < 0x80:
                        size = (b & 0x7F) | (c << 7)
                        size = (size >> 1) ^ -(size & 1)
                        pos += 2
                    else:
                        size, pos = read_varint(data, pos)
                    if size >= 0:
                        headers.append((header_key, data[pos : pos + size]))
                        pos += size
                    elif size == -1:
                        headers.append((header_key, None))
                    else:
                        raise RecordFormatError(f"negative header value length {size}")
            if pos != rec_end:
                raise RecordFormatError(f"record occupies {length} bytes but its fields end elsewhere")
            append(
                new(
                    Record,
                    (
                        base_offset + offset_delta,
                        base_timestamp + ts_delta if log_append_time is None else log_append_time,
                        key,
                        value,
                        headers,
                    ),
                )
            )
    except IndexError:
        raise RecordFormatError("record data runs past the end of the batch") from None
    except UnicodeDecodeError:
        raise RecordFormatError("header key is not valid UTF-8") from None
    if pos != end:
        raise RecordFormatError(f"{end - pos} bytes of trailing data after {count} records")
    return records


def control_type(record: Record) -> int:
    """The type of a control record: 0 = ABORT, 1 = COMMIT (other values are unknown types).

    Raises :class:`RecordFormatError` when the key is not a control record key (at least
    4 bytes: int16 version >= 0, int16 type).
    """
    key = record.key
    if key is None or len(key) < _CONTROL_KEY.size:
        raise RecordFormatError("control record key is missing or shorter than 4 bytes")
    version, ctype = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise RecordFormatError(f"control record key has negative version {version}")
    return int(ctype)


class RecordBatch:
    """One v2 record batch: its parsed header and the (still encoded) records.

    Built by :func:`iter_batches`. Holds a view of the batch bytes, so it keeps the
    receive buffer alive until dropped.
    """

    __slots__ = (
        "_buf",
        "attributes",
        "base_offset",
        "base_sequence",
        "base_timestamp",
        "batch_length",
        "compression",
        "crc",
        "has_delete_horizon",
        "is_control",
        "is_transactional",
        "last_offset_delta",
        "magic",
        "max_timestamp",
        "partition",
        "partition_leader_epoch",
        "producer_epoch",
        "producer_id",
        "record_count",
        "timestamp_type",
        "topic",
    )

    def __init__(
        self,
        buf: memoryview,
        header: tuple[int, int, int, int, int, int, int, int, int, int, int, int, int],
        topic: str | None,
        partition: int | None,
    ) -> None:
        self._buf = buf
        (
            self.base_offset,
            self.batch_length,
            self.partition_leader_epoch,
            self.magic,
            self.crc,
            attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.record_count,
        ) = header
        self.attributes = attributes
        self.compression = attributes & COMPRESSION_MASK
        self.timestamp_type = 1 if attributes & TIMESTAMP_TYPE_MASK else 0
        self.is_transactional = bool(attributes & TRANSACTIONAL_MASK)
        self.is_control = bool(attributes & CONTROL_MASK)
        self.has_delete_horizon = bool(attributes & DELETE_HORIZON_MASK)
        self.topic = topic
        self.partition = partition

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        """The offset following this batch (where the consumer continues)."""
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size_in_bytes(self) -> int:
        """Bytes this batch occupies in the fetch response."""
        return LOG_OVERHEAD + self.batch_length

    def raw(self) -> memoryview:
        """The batch's bytes, as received."""
        return self._buf

    def corrupt(self, message: str) -> CorruptRecordError:
        """A CorruptRecordError locating this batch (for callers' own validation)."""
        return CorruptRecordError(
            message, topic=self.topic, partition=self.partition, offset=self.base_offset
        )

    def records(self) -> list[Record]:
        """Decompress (once per call) and decode all records of the batch."""
        codec = self.compression
        if codec:
            try:
                data = decompress(codec, self._buf[RECORD_BATCH_OVERHEAD:])
            except RecordFormatError as exc:
                raise self.corrupt(str(exc)) from exc
            pos = 0
        else:
            # One copy of the batch: slicing ``bytes`` is much faster than slicing a
            # memoryview and converting, and key/value must be copied out anyway.
            data = self._buf.tobytes()
            pos = RECORD_BATCH_OVERHEAD
        try:
            return decode_records(
                data,
                pos,
                len(data),
                self.record_count,
                self.base_offset,
                self.base_timestamp,
                self.max_timestamp if self.timestamp_type == LOG_APPEND_TIME else None,
            )
        except RecordFormatError as exc:
            where = f" ({codec_name(codec)}-compressed batch)" if codec else ""
            raise self.corrupt(f"{exc}{where}") from exc

    def consumer_records(
        self, topic: str, partition: int, leader_epoch: int | None, min_offset: int = INT64_MIN
    ) -> list[ConsumerRecord]:
        """Decompress (once per call) and decode all records of the batch, and return the
        :class:`ConsumerRecord` of each from the first whose offset is ``min_offset`` or more
        on (the leading ones before a consumer's position are left out), tagged with
        ``topic``, ``partition``, the batch's timestamp type and ``leader_epoch``.

        Raises what :meth:`records` raises, and CorruptRecordError when an offset or
        timestamp does not fit int64 (as ``ColumnBuilder.append_batch`` does); ValueError
        when ``partition`` does not fit int32 or ``min_offset`` int64, TypeError when
        ``topic`` is not a str or ``leader_epoch`` neither an int nor None.
        """
        check_append_arguments(partition, min_offset, 0)
        check_record_context(topic, leader_epoch)
        return consumer_records_from(
            self, self.records(), topic, partition, leader_epoch, min_offset, ConsumerRecord
        )

    def control_type(self) -> int:
        """For a control batch, the type of its control record: 0 = ABORT, 1 = COMMIT."""
        if not self.is_control:
            raise IllegalStateError("control_type() called on a batch that is not a control batch")
        records = self.records()
        if not records:
            raise self.corrupt("control batch holds no records")
        try:
            return control_type(records[0])
        except RecordFormatError as exc:
            raise self.corrupt(str(exc)) from exc

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, last_offset_delta={self.last_offset_delta}, "
            f"record_count={self.record_count}, compression={codec_name(self.compression)}, "
            f"timestamp_type={self.timestamp_type}, is_transactional={self.is_transactional}, "
            f"is_control={self.is_control}, producer_id={self.producer_id}, "
            f"producer_epoch={self.producer_epoch}, base_sequence={self.base_sequence})"
        )


def first_batch_size(buf: memoryview) -> int | None:
    """Bytes the first batch in ``buf`` occupies according to its length field.

    ``None`` when ``buf`` is too short to hold the length field (fewer than 12 bytes).
    When :func:`iter_batches` yields nothing for a non-empty buffer, a result larger than
    ``len(buf)`` means the first batch did not fit the fetch size: report RecordTooLarge or
    fetch again with a larger limit.
    """
    if len(buf) < LOG_OVERHEAD:
        return None
    (_base_offset, length) = _LOG_HEADER.unpack_from(buf, 0)
    return LOG_OVERHEAD + int(length)


def iter_batches(
    buf: memoryview,
    *,
    check_crcs: bool = True,
    topic: str | None = None,
    partition: int | None = None,
) -> Iterator[RecordBatch]:
    """Yield the complete v2 record batches in ``buf`` (see the module docstring).

    A truncated trailing batch ends the iteration silently; malformed data raises
    :class:`CorruptRecordError`.
    """
    if not isinstance(buf, memoryview):
        buf = memoryview(buf)
    if not buf.c_contiguous:
        buf = memoryview(buf.tobytes())
    elif buf.format != "B" or buf.ndim != 1:
        buf = buf.cast("B")
    pos = 0
    n = len(buf)
    header_struct = _BATCH_HEADER
    while n - pos >= LOG_OVERHEAD:
        base_offset, length = _LOG_HEADER.unpack_from(buf, pos)
        if n - pos > MAGIC_OFFSET:
            magic = buf[pos + MAGIC_OFFSET]
            if magic != MAGIC_V2:
                if magic in (0, 1):
                    message = (
                        f"legacy message format (magic v{magic}) is not supported; kaflux reads magic v2"
                    )
                else:
                    message = f"unknown magic byte {magic}"
                raise CorruptRecordError(message, topic=topic, partition=partition, offset=base_offset)
        if length < _MIN_BATCH_LENGTH:
            raise CorruptRecordError(
                f"batch length {length} is smaller than the {_MIN_BATCH_LENGTH}-byte v2 batch header",
                topic=topic,
                partition=partition,
                offset=base_offset,
            )
        end = pos + LOG_OVERHEAD + length
        if end > n:
            return  # truncated trailing batch (fetch size limit): not an error
        header = header_struct.unpack_from(buf, pos)
        view = buf[pos:end]
        if check_crcs:
            computed = crc32c(view[ATTRIBUTES_OFFSET:])
            if computed != header[4]:
                raise CorruptRecordError(
                    f"CRC-32C mismatch: batch says 0x{header[4]:08x}, data gives 0x{computed:08x}",
                    topic=topic,
                    partition=partition,
                    offset=base_offset,
                )
        batch = RecordBatch(view, header, topic, partition)
        if batch.compression > MAX_CODEC:
            raise batch.corrupt(f"unknown compression codec id {batch.compression}")
        if batch.record_count < 0:
            raise batch.corrupt(f"negative record count {batch.record_count}")
        yield batch
        pos = end
