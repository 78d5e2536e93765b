"""Records as the consumer returns them. [pure]"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kaflux.structs import TopicPartition

CREATE_TIME = 0
LOG_APPEND_TIME = 1


class ConsumerRecord:
    """One record: where it was (topic, partition, offset), when, and what.

    ``timestamp`` is epoch milliseconds; ``timestamp_type`` is 0 (create time) or 1 (log
    append time). ``key`` and ``value`` are bytes (or what the deserializers returned);
    ``headers`` is a list of ``(str, bytes | None)``.
    """

    __slots__ = (
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
        headers: list[tuple[str, bytes | None]],
        leader_epoch: int | None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self.headers = headers
        self.leader_epoch = leader_epoch

    @property
    def topic_partition(self) -> TopicPartition:
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


class ConsumerRecords:
    """What one ``poll()`` returns: records grouped by partition, in offset order per partition.

    Iterating yields every record; ``len()`` counts them.
    """

    __slots__ = ("_by_partition", "_count")

    def __init__(self, by_partition: dict[TopicPartition, list[ConsumerRecord]] | None = None) -> None:
        self._by_partition = by_partition or {}
        self._count = sum(len(v) for v in self._by_partition.values())

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    def __iter__(self) -> Iterator[ConsumerRecord]:
        for records in self._by_partition.values():
            yield from records

    def partitions(self) -> set[TopicPartition]:
        """Partitions that have records in this batch."""
        return set(self._by_partition)

    def records(self, tp: TopicPartition) -> list[ConsumerRecord]:
        """The records of one partition (empty if none)."""
        return list(self._by_partition.get(tp, ()))

    def __repr__(self) -> str:
        return f"ConsumerRecords({self._count} records from {len(self._by_partition)} partitions)"
