"""Records as the consumer returns them: the pure-Python ``ConsumerRecord``. [pure]

The compiled kernel (``kaflux.records._kernel``) has a ``ConsumerRecord`` type with the same
constructor, attributes, equality and repr, which its ``RecordBatch.consumer_records``
builds straight from the batch bytes; ``kaflux.records.ConsumerRecord`` (re-exported as
``kaflux.ConsumerRecord``) is the active kernel's. This module also holds the pure
``consumer_records`` logic both kernels share for their slow path.
"""

from __future__ import annotations

from typing import Any

from kaflux.records.definitions import CorruptionReporter, check_record_range
from kaflux.records.types import Record
from kaflux.structs import TopicPartition


class ConsumerRecord:
    """One record: where it was (topic, partition, offset), when, and what.

    ``timestamp`` is epoch milliseconds; ``timestamp_type`` is 0 (create time) or 1 (log
    append time). ``key`` and ``value`` are bytes (or what the deserializers returned);
    ``headers`` is a list of ``(str, bytes | None)``, empty when the record has none;
    ``leader_epoch`` is the partition leader epoch of the record's batch, or None;
    ``delivery_count`` is how many times a share group delivered the record (KIP-932), None
    for records a plain consumer read.
    """

    __slots__ = (
        "delivery_count",
        "headers",
        "key",
        "leader_epoch",
        "offset",
        "partition",
        "timestamp",
        "timestamp_type",
        "topic",
        "value",
    )

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        timestamp: int,
        timestamp_type: int,
        key: Any,
        value: Any,
        headers: list[tuple[str, bytes | None]] | None,
        leader_epoch: int | None,
        delivery_count: int | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self.headers: list[tuple[str, bytes | None]] = [] if headers is None else headers
        self.leader_epoch = leader_epoch
        self.delivery_count = delivery_count

    @property
    def topic_partition(self) -> TopicPartition:
        """``TopicPartition(topic, partition)``."""
        return TopicPartition(self.topic, self.partition)

    def __repr__(self) -> str:
        return (
            f"ConsumerRecord(topic={self.topic!r}, partition={self.partition}, offset={self.offset}, "
            f"timestamp={self.timestamp}, key={self.key!r}, value={self.value!r})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ConsumerRecord):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self.__slots__)

    __hash__ = None  # type: ignore[assignment]


def consumer_records_from(
    batch: CorruptionReporter,
    records: list[Record],
    topic: str,
    partition: int,
    leader_epoch: int | None,
    min_offset: int,
    record_type: type[ConsumerRecord],
) -> list[ConsumerRecord]:
    """The ConsumerRecords of ``records`` (all of ``batch``) from the first whose offset is
    ``min_offset`` or more on; CorruptRecordError when any offset or timestamp does not fit
    int64 (only corrupt data has those)."""
    check_record_range(batch, records)
    count = len(records)
    i = 0
    while i < count and records[i][0] < min_offset:
        i += 1
    make = record_type
    ttype = batch.timestamp_type
    return [make(topic, partition, r[0], r[1], ttype, r[2], r[3], r[4], leader_epoch) for r in records[i:]]
