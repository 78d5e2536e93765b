"""Acquired records out of a ShareFetch answer, with their delivery counts. [pure]

A ShareFetch answer carries whole record batches and, separately, the offset ranges the broker
acquired for this member, each with a delivery count. :func:`acquired_records` decodes the
batches with a record kernel and keeps the records of those ranges: in the common case a batch
lies (from the range's first offset on) in one range, and only as many records as the range has
offsets are built; otherwise each record is matched against the ranges. Control batches and
records outside the ranges are skipped; batches past the last range are not read at all.
"""

from __future__ import annotations

from kaflux.records import ConsumerRecord
from kaflux.records.interface import RecordDecoder


def acquired_records(
    kernel: RecordDecoder,
    data: memoryview | None,
    topic: str,
    partition: int,
    acquired: list[tuple[int, int, int]],
    *,
    check_crcs: bool = True,
) -> list[ConsumerRecord]:
    """The records of ``data`` whose offsets lie in ``acquired`` ((first, last, delivery count)
    ranges), in offset order, each with its ``delivery_count``."""
    ranges = sorted(acquired)
    out: list[ConsumerRecord] = []
    if data is None or not ranges:
        return out
    index = 0
    first, last, count = ranges[0]
    end = ranges[-1][1]
    for batch in kernel.iter_batches(data, check_crcs=check_crcs, topic=topic, partition=partition):
        if batch.base_offset > end:
            break  # nothing acquired beyond: the rest of the data is not ours
        if batch.is_control or batch.last_offset < first:
            continue
        epoch = batch.partition_leader_epoch if batch.partition_leader_epoch >= 0 else None
        # At most as many records as the range has offsets: the batch may run on past it (the
        # broker sends whole batches), and those need not be built.
        records = kernel.BatchCursor(batch).consumer_records(topic, partition, epoch, first, last - first + 1)
        if records and records[-1].offset <= last and (index + 1 == len(ranges) or batch.last_offset <= last):
            # The common case: the batch (from ``first`` on) lies in one acquired range.
            for record in records:
                record.delivery_count = count
            out += records
            continue
        for record in batch.consumer_records(topic, partition, epoch, first):
            offset = record.offset
            while offset > last and index + 1 < len(ranges):
                index += 1
                first, last, count = ranges[index]
            if first <= offset <= last:
                record.delivery_count = count
                out.append(record)
    return out
