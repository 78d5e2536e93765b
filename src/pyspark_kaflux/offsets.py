"""Offsets, offset ranges and the arithmetic on them. [pure]

A streaming offset is the JSON shape of Spark's Kafka checkpoint, ``{"topic": {"0": 42}}``:
the next offset to read of every partition. Spark compares offsets as serialized JSON strings,
so :func:`to_json` always orders topics by name and partitions by number.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kaflux.structs import TopicPartition

__all__ = [
    "INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE",
    "INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_TRUE",
    "DataLossError",
    "InvalidOffsetRangeError",
    "OffsetRange",
    "PartitionOffsets",
    "RangePlan",
    "backlog",
    "from_json",
    "plan_ranges",
    "rate_limit",
    "split_ranges",
    "to_json",
]

PartitionOffsets = dict[TopicPartition, int]

INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE = (
    " Some data may have been lost because they are not available in Kafka any more; either the data "
    "was aged out by Kafka or the topic may have been deleted before all the data in the topic was "
    "processed. If you don't want your streaming query to fail on such cases, set the source option "
    '"failOnDataLoss" to "false".'
)
INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_TRUE = (
    " Some data may have been lost because they are not available in Kafka any more; either the data "
    "was aged out by Kafka or the topic may have been deleted before all the data in the topic was "
    "processed. If you want your streaming query to fail on such cases, set the source option "
    '"failOnDataLoss" to "true".'
)


class DataLossError(RuntimeError):
    """Offsets the query should read are gone (deleted topic, aged-out records, a truncated log)
    and ``failOnDataLoss`` is true."""


class InvalidOffsetRangeError(ValueError):
    """A batch query's resolved start offset of a partition lies after its end offset."""


def to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """``{topic: {partition: offset}}`` with topics sorted by name and partitions by number."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def from_json(data: Mapping[str, Mapping[str, int]] | None) -> PartitionOffsets:
    """The inverse of :func:`to_json` (partition keys may be strings, as JSON makes them)."""
    if not data:
        return {}
    return {
        TopicPartition(topic, int(part)): int(offset)
        for topic, parts in data.items()
        for part, offset in parts.items()
    }


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Offsets ``[start, end)`` of one partition: what one Spark task reads."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def _starts(
    start: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    new_start: Mapping[TopicPartition, int],
) -> dict[TopicPartition, int]:
    """Where each partition of ``latest`` begins: its start offset, else (a new partition) its earliest."""
    begins: dict[TopicPartition, int] = {}
    for tp in latest:
        if tp in start:
            begins[tp] = start[tp]
        elif tp in new_start:
            begins[tp] = new_start[tp]
    return begins


def backlog(
    start: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    new_start: Mapping[TopicPartition, int] | None = None,
) -> int:
    """Offsets available between ``start`` and ``latest`` (new partitions from ``new_start``)."""
    begins = _starts(start, latest, new_start or {})
    return sum(max(0, latest[tp] - begin) for tp, begin in begins.items())


def rate_limit(
    limit: int,
    start: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    new_start: Mapping[TopicPartition, int] | None = None,
) -> PartitionOffsets:
    """End offsets that admit at most ``limit`` offsets, split across partitions in proportion to
    their backlog (``maxOffsetsPerTrigger``).

    Shares are proportional, rounded by largest remainders, so unlike Spark's rounding (which
    may exceed ``limit`` by one per small partition) the total is exactly ``limit``. As in Spark,
    no partition with a backlog is starved: one that would get nothing gets one offset, taken from
    the largest share. Partitions without a backlog (or without a known start) keep their latest
    offset. If ``limit`` is smaller than the number of partitions with a backlog, the largest
    backlogs get one offset each. Ties go by partition order, so the result is deterministic.
    """
    if limit < 1:
        raise ValueError(f"limit must be positive, got {limit}")
    begins = _starts(start, latest, new_start or {})
    sizes = {tp: latest[tp] - begin for tp, begin in begins.items() if latest[tp] - begin > 0}
    result: PartitionOffsets = dict(latest)
    total = sum(sizes.values())
    if total <= limit:
        return result
    order = sorted(sizes, key=lambda tp: (-sizes[tp], tp))
    if limit < len(order):
        for i, tp in enumerate(order):
            result[tp] = begins[tp] + (1 if i < limit else 0)
        return result
    quota = {tp: limit * sizes[tp] // total for tp in order}
    leftover = limit - sum(quota.values())
    for tp in sorted(order, key=lambda tp: (-(limit * sizes[tp] % total), tp))[:leftover]:
        quota[tp] += 1
    for tp in order:
        if quota[tp] == 0:  # limit >= len(order), so some other share is at least 2
            donor = max(order, key=lambda t: (quota[t], sizes[t]))
            quota[donor] -= 1
            quota[tp] = 1
    for tp in order:
        result[tp] = begins[tp] + quota[tp]
    return result


@dataclass(slots=True)
class RangePlan:
    """The offset ranges of a micro-batch and the data losses noticed while planning them."""

    ranges: list[OffsetRange] = field(default_factory=list)
    data_loss: list[str] = field(default_factory=list)


def plan_ranges(
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    new_start: Mapping[TopicPartition, int],
) -> RangePlan:
    """The ranges between two streaming offsets, as Spark's Kafka micro-batch plans them.

    Partitions only in ``end`` are new and start at their earliest offset (``new_start``).
    Data losses are reported (not raised): partitions that disappeared, a new partition that
    does not start at 0 or whose earliest offset is unknown, an end before the start (the log
    was truncated or the topic re-created). Such partitions get no range.
    """
    plan = RangePlan()
    gone = sorted(set(start) - set(end))
    if gone:
        plan.data_loss.append(f"{_names(gone)} are gone. Some data may have been missed.")
    for tp in sorted(end):
        if tp in start:
            begin = start[tp]
        elif tp in new_start:
            begin = new_start[tp]
            if begin != 0:
                plan.data_loss.append(
                    f"Added partition {tp} starts from {begin} instead of 0. Some data may have been missed."
                )
        else:
            plan.data_loss.append(f"Cannot find earliest offsets of {tp}. Some data may have been missed.")
            continue
        until = end[tp]
        if until < begin:
            plan.data_loss.append(
                f"Partition {tp}'s offset was changed from {begin} to {until}, "
                "some data may have been missed."
            )
        elif until > begin:
            plan.ranges.append(OffsetRange(tp.topic, tp.partition, begin, until))
    return plan


def _names(tps: Iterable[TopicPartition]) -> str:
    return "[" + ", ".join(str(tp) for tp in tps) + "]"


def split_ranges(
    ranges: Iterable[OffsetRange],
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
) -> list[OffsetRange]:
    """Split ranges into more Spark tasks (``minPartitions`` / ``maxRecordsPerPartition``).

    Empty ranges are dropped. With ``min_partitions`` larger than the number of ranges, large
    ranges are split in proportion to their size, as Spark's ``KafkaOffsetRangeCalculator``
    does (small ranges stay whole). Every range is also split so that no piece holds more
    than ``max_records_per_partition`` offsets. Pieces are contiguous and of near-equal size.
    """
    nonempty = [r for r in ranges if r.size > 0]
    parts = dict.fromkeys(range(len(nonempty)), 1)
    if min_partitions is not None and len(nonempty) < min_partitions:
        total = sum(r.size for r in nonempty)

        def part_count(size: int, total_size: int, wanted: int) -> int:
            return max(math.ceil(size / total_size * wanted), 1)

        unsplit = {i for i, r in enumerate(nonempty) if part_count(r.size, total, min_partitions) == 1}
        split_total = total - sum(nonempty[i].size for i in unsplit)
        split_min = max(min_partitions - len(unsplit), 1)
        for i, r in enumerate(nonempty):
            if i not in unsplit:
                parts[i] = part_count(r.size, split_total, split_min)
    if max_records_per_partition is not None:
        for i, r in enumerate(nonempty):
            parts[i] = max(parts[i], math.ceil(r.size / max_records_per_partition))
    out: list[OffsetRange] = []
    for i, r in enumerate(nonempty):
        remaining, begin = r.size, r.start
        for piece in range(parts[i]):
            this = remaining // (parts[i] - piece)
            remaining -= this
            finish = min(begin + this, r.end)
            if finish > begin:
                out.append(OffsetRange(r.topic, r.partition, begin, finish))
            begin = finish
    return out
