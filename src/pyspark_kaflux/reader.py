"""The batch reader: ``spark.read.format("kaflux")``. [io]

``partitions()`` runs in Spark's planner process: it resolves ``startingOffsets`` and
``endingOffsets`` (or their timestamp forms) into exact offsets and returns one
:class:`~pyspark_kaflux.input_partition.KafkaInputPartition` per offset range (more with
``minPartitions`` / ``maxRecordsPerPartition``). ``read()`` runs on executors.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSourceReader, InputPartition

from pyspark_kaflux.input_partition import KafkaInputPartition
from pyspark_kaflux.offsets import InvalidOffsetRangeError, OffsetRange, split_ranges
from pyspark_kaflux.options import SourceOptions

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["KafluxBatchReader"]


class KafluxBatchReader(DataSourceReader):
    """Reads the offset ranges between the starting and ending offsets of every partition."""

    def __init__(self, options: SourceOptions) -> None:
        self._options = options

    def partitions(self) -> list[InputPartition]:
        """Resolve the offsets now and plan one task per (split) partition range.

        Raises:
            KafluxOptionError: specific offsets or timestamps do not cover the partitions.
            InvalidOffsetRangeError: a resolved start lies after its end.
        """
        from pyspark_kaflux.offset_reader import OffsetReader  # the planner's side: no read path

        options = self._options
        assert options.ending is not None, "a batch query has ending offsets"
        offsets = OffsetReader(options)
        tps = offsets.partitions()
        start = offsets.resolve(options.starting, tps, starting=True)
        end = offsets.resolve(options.ending, tps, starting=False)
        ranges: list[OffsetRange] = []
        for tp in sorted(set(start) & set(end)):
            if start[tp] > end[tp]:
                raise InvalidOffsetRangeError(
                    f"The resolved start offset {start[tp]} is greater than the end offset {end[tp]} "
                    f"for topic {tp.topic} partition {tp.partition}."
                )
            ranges.append(OffsetRange(tp.topic, tp.partition, start[tp], end[tp]))
        pieces = split_ranges(ranges, options.min_partitions, options.max_records_per_partition)
        return [KafkaInputPartition(r) for r in pieces]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Yield the records of one range as Arrow batches (runs on an executor)."""
        from pyspark_kaflux.range_reader import read_partition

        if isinstance(partition, KafkaInputPartition):
            yield from read_partition(self._options, partition.offset_range)
