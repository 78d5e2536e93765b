"""The typed interface of the record decoder. [pure]

:mod:`kaflux.records.batch_decoder` is the pure-Python implementation; a compiled twin
(Cython, mypyc or a Rust extension) must provide the same functions with the same
semantics, so :mod:`kaflux.records` can pick either. The hot kernel is
:meth:`RecordDecoder.decode_records`; the batch walk is per batch and cheap.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

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

    def records(self) -> list[Record]: ...

    def control_type(self) -> int: ...


class RecordDecoder(Protocol):
    """The module-level functions of a record decoder implementation."""

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
