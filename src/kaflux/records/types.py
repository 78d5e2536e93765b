"""Value types and constants of the Kafka v2 record format (magic 2). [pure]

The on-the-wire layout (all integers big-endian) of one record batch::

    offset  size  field
         0     8  base_offset            (not covered by the CRC)
         8     4  batch_length           bytes after this field (not covered)
        12     4  partition_leader_epoch (not covered)
        16     1  magic = 2              (not covered)
        17     4  crc                    CRC-32C of bytes 21 .. end
        21     2  attributes
        23     4  last_offset_delta
        27     8  base_timestamp
        35     8  max_timestamp
        43     8  producer_id
        51     2  producer_epoch
        53     4  base_sequence
        57     4  record_count
        61     *  records (compressed as one blob when attributes & 0x7 != 0)

Each record is ``length: varint``, ``attributes: int8``, ``timestamp_delta: varlong``,
``offset_delta: varint``, ``key: varint-length bytes`` (-1 = null), ``value`` (same),
``header_count: varint`` and per header ``key: varint-length UTF-8`` and
``value: varint-length bytes`` (-1 = null). Varints are zig-zag encoded.
"""

from __future__ import annotations

from typing import Final, NamedTuple, TypeAlias

from kaflux.errors import KafkaError

#: What the codecs and the encoder accept as binary input.
BytesLike: TypeAlias = bytes | bytearray | memoryview

# --- batch layout -------------------------------------------------------------------------
MAGIC_V2: Final = 2
#: Bytes before (and including) the batch length field: base_offset + batch_length.
LOG_OVERHEAD: Final = 12
#: Size of a v2 batch header, i.e. of a batch holding no records.
RECORD_BATCH_OVERHEAD: Final = 61
#: Offset of the magic byte from the start of a batch (same for every message format).
MAGIC_OFFSET: Final = 16
#: Offset of the CRC field, and of the first byte the CRC covers.
CRC_OFFSET: Final = 17
ATTRIBUTES_OFFSET: Final = 21

# --- attribute bits -----------------------------------------------------------------------
COMPRESSION_MASK: Final = 0x07
TIMESTAMP_TYPE_MASK: Final = 0x08
TRANSACTIONAL_MASK: Final = 0x10
CONTROL_MASK: Final = 0x20
DELETE_HORIZON_MASK: Final = 0x40

# --- timestamp types ----------------------------------------------------------------------
CREATE_TIME: Final = 0
LOG_APPEND_TIME: Final = 1
NO_TIMESTAMP: Final = -1

# --- producer fields ----------------------------------------------------------------------
NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
NO_SEQUENCE: Final = -1
NO_PARTITION_LEADER_EPOCH: Final = -1

# --- control records ----------------------------------------------------------------------
CONTROL_ABORT: Final = 0
CONTROL_COMMIT: Final = 1


class Record(NamedTuple):
    """One decoded record.

    ``timestamp`` is epoch milliseconds: the batch's ``base_timestamp`` plus the record's
    delta for CREATE_TIME batches, the batch's ``max_timestamp`` for LOG_APPEND_TIME batches.
    Header keys are ``str`` (UTF-8 on the wire); header values may be ``None``.
    """

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


class RecordFormatError(KafkaError, ValueError):
    """Malformed record data found by a low-level codec or record kernel.

    Raised by :mod:`kaflux.records.compression` and by the record kernel
    (``decode_records``), which do not know where the data came from. The batch layer turns
    it into :class:`kaflux.errors.CorruptRecordError` naming topic, partition and offset;
    consumers only ever see that.
    """
