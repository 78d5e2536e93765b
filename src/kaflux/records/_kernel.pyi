"""Type stub of the compiled record kernel (``_kernel.pyx``); see ``batch_decoder``,
``columns`` and ``consumer_record`` for the semantics, which are the same. (Its own
``ConsumerRecord`` type is typed as the pure class, whose interface it has.)"""

from collections.abc import Iterator
from typing import Any, Final

from kaflux.errors import CorruptRecordError
from kaflux.records.consumer_record import ConsumerRecord as ConsumerRecord
from kaflux.records.definitions import RecordColumns
from kaflux.records.types import BytesLike, Record

SOURCE_SHA256: Final[str]

def crc32c(data: BytesLike, /) -> int: ...
def crc32c_portable(data: BytesLike, /) -> int: ...
def crc32c_hardware() -> bool: ...
def utf8_valid(data: BytesLike, /) -> bool: ...
def decode_records(
    data: bytes,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
) -> list[Record]: ...
def control_type(record: Record) -> int: ...
def to_arrow(columns: RecordColumns, /) -> Any: ...
def first_batch_size(buf: memoryview) -> int | None: ...
def iter_batches(
    buf: memoryview,
    *,
    check_crcs: bool = True,
    topic: str | None = None,
    partition: int | None = None,
) -> Iterator[RecordBatch]: ...

class RecordBatch:
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
    def __init__(
        self,
        buf: memoryview,
        header: tuple[int, int, int, int, int, int, int, int, int, int, int, int, int],
        topic: str | None,
        partition: int | None,
    ) -> None: ...
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

class BatchCursor:
    @property
    def batch(self) -> RecordBatch: ...
    def __init__(self, batch: Any) -> None: ...
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

class ColumnBuilder:
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
