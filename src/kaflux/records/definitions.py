"""What the record kernels' twins share: bounds, messages, argument checks, column layouts. [pure]

A leaf module (standard library only): the pure-Python decoder (:mod:`~kaflux.records.batch_decoder`,
:mod:`~kaflux.records.columns`, :mod:`~kaflux.records.consumer_record`), the compiled one
(``_kernel.pyx``), the pure encoder (:mod:`~kaflux.records.encode`) and the compiled one
(``_encode.pyx``) all import their shared definitions from here, so that the twins cannot
drift apart on a bound or a message. ``setup.py`` loads this file by its path (before kaflux is
installed) for :func:`source_sha256` and the source lists, so it must import nothing from kaflux.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final, NamedTuple, Protocol

# --- bounds -------------------------------------------------------------------------------------
INT32_MIN: Final = -(2**31)
INT32_MAX: Final = 2**31 - 1
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1

#: Smallest possible encoded record: 1 length byte + attributes, timestamp delta, offset
#: delta, key length, value length and header count of one byte each.
MIN_RECORD_SIZE: Final = 7
#: Smallest record body (what follows the record's length varint).
MIN_RECORD_BODY: Final = 6
#: Highest compression codec id (zstd).
MAX_CODEC: Final = 4

# --- messages -----------------------------------------------------------------------------------
#: Message of the OverflowError raised when a column would exceed Arrow's int32 offsets.
OVERFLOW_MESSAGE: Final = (
    "column data would exceed 2**31 - 1 bytes (Arrow int32 offsets); call finish() and append again"
)


def out_of_range_message(offset: int, timestamp: int) -> str:
    """The CorruptRecordError message for a record whose offset or timestamp exceeds int64."""
    return f"record at offset {offset} has an offset or timestamp (ms {timestamp}) outside the int64 range"


# --- argument checks (same messages in both kernels) -----------------------------------------------
def check_append_arguments(partition: int, min_offset: int, max_records: int) -> None:
    """Argument checks of ``append_batch``/``append_cursor``/``consumer_records``."""
    if not INT32_MIN <= partition <= INT32_MAX:
        raise ValueError(f"partition {partition} is outside the int32 range")
    if not INT64_MIN <= min_offset <= INT64_MAX:
        raise ValueError(f"min_offset {min_offset} is outside the int64 range")
    if max_records < 0:
        raise ValueError(f"max_records must not be negative, got {max_records}")


def check_record_context(topic: object, leader_epoch: object) -> None:
    """Argument checks of ``consumer_records``."""
    if type(topic) is not str:
        raise TypeError(f"topic must be a str, got {type(topic).__name__}")
    if leader_epoch is not None and type(leader_epoch) is not int:
        raise TypeError(f"leader_epoch must be an int or None, got {type(leader_epoch).__name__}")


class CorruptionReporter(Protocol):
    """What the shared checks need of a batch (either kernel's ``RecordBatch``)."""

    @property
    def timestamp_type(self) -> int: ...

    def corrupt(self, message: str) -> Exception: ...


def check_record_range(batch: CorruptionReporter, records: Iterable[tuple[Any, ...]]) -> None:
    """Raise ``batch.corrupt(...)`` for the first record whose offset or timestamp does not fit
    int64 (only corrupt data has those)."""
    for record in records:
        offset, timestamp = record[0], record[1]
        if not (INT64_MIN <= offset <= INT64_MAX and INT64_MIN <= timestamp <= INT64_MAX):
            raise batch.corrupt(out_of_range_message(offset, timestamp))


# --- the decoder's columns ------------------------------------------------------------------------
class RecordColumns(NamedTuple):
    """Decoded records as Arrow-layout buffers (``n = num_rows``, ``h = header_count``).

    Integer buffers are in native byte order (little-endian on every platform Arrow runs
    on); offsets buffers hold ``n + 1`` (or ``h + 1``) int32 values starting at 0. A
    validity bitmap has bit ``i`` (LSB first) set when row ``i`` is not null, holds
    ``(rows + 7) // 8`` bytes with the bits past the last row clear, and is ``None`` when
    the column has no null.
    """

    num_rows: int
    offset: bytearray  #: int64[n]
    timestamp: bytearray  #: int64[n], epoch milliseconds
    timestamp_type: bytearray  #: int32[n]: 0 create time, 1 log append time
    partition: bytearray  #: int32[n]
    topic_offsets: bytearray  #: int32[n + 1] into topic_data
    topic_data: bytearray  #: UTF-8
    key_validity: bytearray | None
    key_null_count: int
    key_offsets: bytearray  #: int32[n + 1] into key_data
    key_data: bytearray
    value_validity: bytearray | None
    value_null_count: int
    value_offsets: bytearray  #: int32[n + 1] into value_data
    value_data: bytearray
    header_offsets: bytearray  #: int32[n + 1]: row i's headers are entries [o[i], o[i + 1])
    header_count: int  #: h, the number of header entries
    header_key_offsets: bytearray  #: int32[h + 1] into header_key_data
    header_key_data: bytearray  #: UTF-8
    header_value_validity: bytearray | None
    header_value_null_count: int
    header_value_offsets: bytearray  #: int32[h + 1] into header_value_data
    header_value_data: bytearray


# --- the encoder's columns and chunks -------------------------------------------------------------
class BinaryColumn(NamedTuple):
    """An Arrow binary (or utf8) array: ``offsets`` are int32 (``offset + n + 1`` of them)."""

    validity: memoryview | None
    offsets: memoryview
    data: memoryview
    offset: int


class IntColumn(NamedTuple):
    """An Arrow int32 (partitions) or int64 (timestamps, ms) array."""

    validity: memoryview | None
    values: memoryview
    offset: int


class HeadersColumn(NamedTuple):
    """An Arrow ``list<struct<key: utf8, value: binary>>`` array: row ``i``'s headers are entries
    ``offsets[offset + i]`` to ``offsets[offset + i + 1]`` of ``keys`` and ``values`` (the
    struct's children, with the struct's own offset already applied)."""

    validity: memoryview | None
    offsets: memoryview
    offset: int
    keys: BinaryColumn | None
    values: BinaryColumn | None


class Chunk(NamedTuple):
    """One partition batch's records section."""

    partition: int
    records: bytes
    record_count: int
    base_timestamp: int
    max_timestamp: int


# --- the compiled twins' sources ------------------------------------------------------------------
#: Files the compiled decoder (``_kernel``) is built from: ``_kernel.pyx`` includes the ``.pxi``
#: files. setup.py stamps the build with their SHA-256; the loader compares.
KERNEL_SOURCES: Final = (
    "_kernel.pyx",
    "_kernel_buffers.pxi",
    "_kernel_consumer_record.pxi",
    "_kernel_decode.pxi",
    "_kernel_batches.pxi",
    "_kernel_columns.pxi",
    "_kernel_arrow.pxi",
    "_kernel_impl.h",
)
#: Files the compiled encoder (``_encode``) is built from.
ENCODER_SOURCES: Final = ("_encode.pyx",)


def source_sha256(directory: Path, names: Iterable[str]) -> str | None:
    """SHA-256 over the files ``names`` in ``directory`` (name and content of each), or None
    when one is missing (an installed wheel ships no sources)."""
    digest = hashlib.sha256()
    try:
        for name in names:
            digest.update(name.encode() + b"\0" + (directory / name).read_bytes() + b"\0")
    except OSError:
        return None
    return digest.hexdigest()
