"""Encoder of Kafka v2 record batches. [pure]

:class:`BatchBuilder` accumulates records and :meth:`BatchBuilder.build` returns a complete
batch (header, compressed records, CRC-32C). :func:`build_control_batch` writes the
transaction markers (COMMIT / ABORT) a transaction coordinator appends, for tests of
transactional reads. :func:`assemble_batch` packs an already-encoded records section.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final

from kaflux.records.compression import CODEC_NAMES, compress
from kaflux.records.crc import crc32c
from kaflux.records.types import (
    ATTRIBUTES_OFFSET,
    CONTROL_MASK,
    CRC_OFFSET,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BytesLike,
)

_BATCH_HEADER: Final = struct.Struct(">qiibIhiqqqhii")
_CRC: Final = struct.Struct(">I")
_CONTROL_KEY: Final = struct.Struct(">hh")
_END_TXN_MARKER: Final = struct.Struct(">hi")
#: Upper bound of a record's overhead besides key, value and headers: length varint (5),
#: attributes (1), timestamp delta varlong (10), offset delta varint (5), key and value
#: length varints (5 + 5) and header count varint (5).
_MAX_RECORD_OVERHEAD: Final = 36


def _put_varint(out: bytearray, value: int) -> None:
    """Append the zig-zag varint encoding of a signed 64-bit ``value`` to ``out``."""
    value = (value << 1) ^ (value >> 63)
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def estimate_record_size(
    key: BytesLike | None, value: BytesLike | None, headers: Sequence[tuple[str, BytesLike | None]] = ()
) -> int:
    """An upper bound of the encoded (uncompressed) size of one record."""
    size = _MAX_RECORD_OVERHEAD
    if key is not None:
        size += len(key)
    if value is not None:
        size += len(value)
    for header_key, header_value in headers:
        size += 10 + len(header_key.encode())
        if header_value is not None:
            size += len(header_value)
    return size


def assemble_batch(
    payload: BytesLike,
    *,
    record_count: int,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    """Pack a v2 batch around ``payload`` (the records section, compressed if
    ``attributes`` says so) and fill in the length and CRC-32C fields."""
    out = bytearray(RECORD_BATCH_OVERHEAD + len(payload))
    try:
        _BATCH_HEADER.pack_into(
            out,
            0,
            base_offset,
            len(out) - LOG_OVERHEAD,
            partition_leader_epoch,
            MAGIC_V2,
            0,
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            record_count,
        )
    except struct.error as exc:
        raise ValueError(f"batch header field out of range: {exc}") from exc
    out[RECORD_BATCH_OVERHEAD:] = payload
    _CRC.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


class BatchBuilder:
    """Accumulates records into one v2 record batch.

    ``append`` returns each record's offset delta (0, 1, 2, ...). The first record's
    timestamp is the batch's base timestamp; ``max_timestamp`` is the largest record
    timestamp. ``timestamp_type=1`` (LOG_APPEND_TIME) sets the attribute bit, as a broker
    does; readers then report ``max_timestamp`` for every record.
    """

    __slots__ = (
        "_base_timestamp",
        "_buf",
        "_count",
        "_max_timestamp",
        "base_offset",
        "base_sequence",
        "compression",
        "is_control",
        "is_transactional",
        "partition_leader_epoch",
        "producer_epoch",
        "producer_id",
        "timestamp_type",
    )

    def __init__(
        self,
        compression: int = 0,
        *,
        base_offset: int = 0,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        is_transactional: bool = False,
        partition_leader_epoch: int = -1,
        timestamp_type: int = 0,
        is_control: bool = False,
    ) -> None:
        if compression not in CODEC_NAMES:
            raise ValueError(f"unknown compression codec id {compression}")
        if timestamp_type not in (0, 1):
            raise ValueError(
                f"timestamp_type must be 0 (create time) or 1 (log append time), not {timestamp_type}"
            )
        self.compression = compression
        self.base_offset = base_offset
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.is_transactional = is_transactional
        self.partition_leader_epoch = partition_leader_epoch
        self.timestamp_type = timestamp_type
        self.is_control = is_control
        self._buf = bytearray()
        self._count = 0
        self._base_timestamp = NO_TIMESTAMP
        self._max_timestamp = NO_TIMESTAMP

    @property
    def record_count(self) -> int:
        return self._count

    def estimated_size(self) -> int:
        """Size of the batch built now, before compression (header included)."""
        return RECORD_BATCH_OVERHEAD + len(self._buf)

    def append(
        self,
        timestamp_ms: int,
        key: BytesLike | None,
        value: BytesLike | None,
        headers: Sequence[tuple[str, BytesLike | None]] = (),
    ) -> int:
        """Add a record; returns its offset delta."""
        offset_delta = self._count
        if offset_delta == 0:
            self._base_timestamp = timestamp_ms
            self._max_timestamp = timestamp_ms
        elif timestamp_ms > self._max_timestamp:
            self._max_timestamp = timestamp_ms
        body = bytearray(b"\x00")  # record attributes: unused
        _put_varint(body, timestamp_ms - self._base_timestamp)
        _put_varint(body, offset_delta)
        if key is None:
            body.append(1)  # zig-zag(-1)
        else:
            _put_varint(body, len(key))
            body += key
        if value is None:
            body.append(1)
        else:
            _put_varint(body, len(value))
            body += value
        _put_varint(body, len(headers))
        for header_key, header_value in headers:
            encoded_key = header_key.encode()
            _put_varint(body, len(encoded_key))
            body += encoded_key
            if header_value is None:
                body.append(1)
            else:
                _put_varint(body, len(header_value))
                body += header_value
        buf = self._buf
        _put_varint(buf, len(body))
        buf += body
        self._count = offset_delta + 1
        return offset_delta

    def attributes(self) -> int:
        attributes = self.compression
        if self.timestamp_type == LOG_APPEND_TIME:
            attributes |= TIMESTAMP_TYPE_MASK
        if self.is_transactional:
            attributes |= TRANSACTIONAL_MASK
        if self.is_control:
            attributes |= CONTROL_MASK
        return attributes

    def build(self) -> bytes:
        """The complete batch. An empty builder gives a batch of zero records."""
        payload = compress(self.compression, self._buf) if self.compression else bytes(self._buf)
        return assemble_batch(
            payload,
            record_count=self._count,
            attributes=self.attributes(),
            last_offset_delta=max(self._count - 1, 0),
            base_timestamp=self._base_timestamp,
            max_timestamp=self._max_timestamp,
            base_offset=self.base_offset,
            partition_leader_epoch=self.partition_leader_epoch,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=self.base_sequence,
        )


def build_control_batch(
    control_type: int,
    *,
    producer_id: int,
    producer_epoch: int,
    timestamp_ms: int,
    base_offset: int = 0,
    coordinator_epoch: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A transaction marker batch: one control record of ``control_type`` (0 ABORT,
    1 COMMIT) in a transactional control batch, as the broker writes it."""
    builder = BatchBuilder(
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )
    builder.append(
        timestamp_ms,
        _CONTROL_KEY.pack(0, control_type),
        _END_TXN_MARKER.pack(0, coordinator_epoch),
    )
    return builder.build()
