"""What ``AdminClient.list_offsets`` is asked and answers: which offset of a partition
(:class:`OffsetSpec`), under which isolation level (:class:`IsolationLevel`), and the offset found
(:class:`ListOffsetsResultInfo`). [pure]

The names and meanings are Java's (``OffsetSpec``, ``IsolationLevel``, ``ListOffsetsResultInfo``
of ``org.apache.kafka.clients.admin``). A spec is sent as ListOffsets' ``timestamp`` field: -2 the
log start offset, -1 the end offset, -3 the record with the highest timestamp (KIP-734, ListOffsets
v7), or a time in ms.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kaflux.admin.names import NamedIntEnum
from kaflux.errors import InvalidArgumentError
from kaflux.structs import TopicPartition
from kaflux.validation import is_topic_partition_pair

__all__ = [
    "EARLIEST",
    "LATEST",
    "MAX_TIMESTAMP",
    "MAX_TIMESTAMP_MIN_VERSION",
    "IsolationLevel",
    "ListOffsetsResultInfo",
    "OffsetSpec",
    "offset_keys",
]

#: ListOffsets timestamps: the log start offset, the end offset, the highest timestamp's record
EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3
#: the first ListOffsets version that knows :data:`MAX_TIMESTAMP` (KIP-734)
MAX_TIMESTAMP_MIN_VERSION = 7

_NAMES = {EARLIEST: "earliest", LATEST: "latest", MAX_TIMESTAMP: "max_timestamp"}


class IsolationLevel(NamedIntEnum):
    """Which end offset ListOffsets answers (Java's ``IsolationLevel``): the high watermark
    (``read_uncommitted``), or the last stable offset, before the first open transaction
    (``read_committed``)."""

    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Which offset of a partition to look up (Java's ``OffsetSpec``). Build one with
    :meth:`earliest`, :meth:`latest`, :meth:`max_timestamp` or :meth:`for_timestamp`.

    ``timestamp`` is the value sent in ListOffsets: -2, -1, -3, or a time in ms (>= 0).
    """

    timestamp: int

    def __post_init__(self) -> None:
        ts = self.timestamp
        if isinstance(ts, bool) or not isinstance(ts, int) or (ts < 0 and ts not in _NAMES):
            raise InvalidArgumentError(
                f"OffsetSpec: {ts!r} is not a timestamp in ms (an int >= 0); use OffsetSpec.earliest(), "
                "latest(), max_timestamp() or for_timestamp(ms)"
            )

    @classmethod
    def earliest(cls) -> OffsetSpec:
        """The offset of the first record still in the log (the log start offset)."""
        return cls(EARLIEST)

    @classmethod
    def latest(cls) -> OffsetSpec:
        """The offset the next record will get: the high watermark, or under
        ``read_committed`` the last stable offset."""
        return cls(LATEST)

    @classmethod
    def max_timestamp(cls) -> OffsetSpec:
        """The offset and timestamp of the record with the highest timestamp (KIP-734; brokers
        with ListOffsets v7 or later). On an empty partition the offset is -1."""
        return cls(MAX_TIMESTAMP)

    @classmethod
    def for_timestamp(cls, timestamp_ms: int) -> OffsetSpec:
        """The earliest offset whose record's timestamp is at or after ``timestamp_ms``
        (-1 when there is none). Raises InvalidArgumentError for a negative time."""
        if isinstance(timestamp_ms, bool) or not isinstance(timestamp_ms, int) or timestamp_ms < 0:
            raise InvalidArgumentError(
                f"OffsetSpec.for_timestamp(): the time must be an int >= 0 (ms since the epoch), "
                f"got {timestamp_ms!r}"
            )
        return cls(timestamp_ms)

    def __repr__(self) -> str:
        name = _NAMES.get(self.timestamp)
        return f"OffsetSpec.{name}()" if name else f"OffsetSpec.for_timestamp({self.timestamp})"


@dataclass(frozen=True, slots=True)
class ListOffsetsResultInfo:
    """What ListOffsets found for one partition (Java's ``ListOffsetsResultInfo``).

    ``offset`` is -1 when there is no such record (a time after the last record's, or
    ``max_timestamp`` on an empty partition). ``timestamp`` is the record's timestamp for
    ``for_timestamp`` and ``max_timestamp``, -1 for ``earliest`` and ``latest`` (as Kafka
    answers). ``leader_epoch`` is the epoch of the leader that wrote the record, None when the
    broker reports none.
    """

    offset: int
    timestamp: int
    leader_epoch: int | None


def offset_keys(specs: Mapping[TopicPartition, OffsetSpec], what: str) -> list[tuple[TopicPartition, int]]:
    """``specs`` checked, as ``(partition, timestamp)`` keys. Raises InvalidArgumentError for
    no mapping, an empty one, a key that is not a partition, or a value that is not an
    OffsetSpec."""
    if not isinstance(specs, Mapping):
        raise InvalidArgumentError(
            f"{what} takes a mapping {{TopicPartition: OffsetSpec}}, got {type(specs).__name__}"
        )
    if not specs:
        raise InvalidArgumentError(f"{what}: no partitions given; pass {{TopicPartition: OffsetSpec}}")
    keys = []
    for tp, spec in specs.items():
        if not is_topic_partition_pair(tp):
            raise InvalidArgumentError(f"{what}: expected TopicPartition(topic, partition) keys, got {tp!r}")
        if not isinstance(spec, OffsetSpec):
            raise InvalidArgumentError(
                f"{what}: the spec for {TopicPartition(*tp)} must be an OffsetSpec (OffsetSpec.earliest(), "
                f"latest(), max_timestamp() or for_timestamp(ms)), got {spec!r}"
            )
        keys.append((TopicPartition(*tp), spec.timestamp))
    return keys
