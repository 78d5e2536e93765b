"""Records as the consumer returns them. [pure]

:class:`ConsumerRecord` is the record kernel's (``kaflux.records.ConsumerRecord``: the
compiled kernel's small C-level type, or its pure-Python twin), which builds it straight from
the batch bytes. :class:`ConsumerRecords` is what one ``poll()`` returns.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain

from kaflux.records import CREATE_TIME, LOG_APPEND_TIME, ConsumerRecord
from kaflux.structs import TopicPartition

__all__ = ["CREATE_TIME", "LOG_APPEND_TIME", "ConsumerRecord", "ConsumerRecords"]


class ConsumerRecords:
    """What one ``poll()`` returns: records grouped by partition, in offset order per partition.

    Iterating yields every record; ``len()`` counts them.
    """

    __slots__ = ("_by_partition", "_count")

    def __init__(self, by_partition: dict[TopicPartition, list[ConsumerRecord]] | None = None) -> None:
        self._by_partition = by_partition or {}
        self._count = sum(map(len, self._by_partition.values()))

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    def __iter__(self) -> Iterator[ConsumerRecord]:
        by_partition = self._by_partition
        if len(by_partition) == 1:
            return iter(next(iter(by_partition.values())))
        return chain.from_iterable(by_partition.values())

    def partitions(self) -> set[TopicPartition]:
        """Partitions that have records in this batch."""
        return set(self._by_partition)

    def records(self, tp: TopicPartition) -> list[ConsumerRecord]:
        """The records of one partition (empty if none)."""
        return list(self._by_partition.get(tp, ()))

    def __repr__(self) -> str:
        return f"ConsumerRecords({self._count} records from {len(self._by_partition)} partitions)"
