"""Type stub of the compiled record encoder (``_encode.pyx``); see :mod:`kaflux.records.encode`."""

from collections.abc import Callable, Sequence
from typing import Any, Final

from kaflux.records.definitions import BinaryColumn, Chunk, HeadersColumn, IntColumn

KIND: Final[str]
SOURCE_SHA256: Final[str]

def murmur2(data: bytes) -> int: ...
def partition_for_key(key: bytes, num_partitions: int) -> int: ...
def call_deliveries(
    callbacks: list[Any],
    metadata_type: type[tuple[Any, ...]],
    topic: str,
    partition: int,
    base_offset: int,
    log_append_time: int,
    on_error: Callable[[], object],
) -> None: ...
def untrack(obj: object) -> None: ...
def track(obj: object) -> None: ...

class RecordsWriter:
    def __init__(self, limit: int) -> None: ...
    def append(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
    ) -> int: ...
    @property
    def count(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def base_timestamp(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    def getvalue(self) -> bytes: ...

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
) -> tuple[list[Chunk], int]: ...
