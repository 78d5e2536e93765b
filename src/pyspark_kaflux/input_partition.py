"""One Spark task's work, as the planner hands it to an executor. [pure]

Its own module, importing nothing but pyspark's ``InputPartition``, so that the driver-side
planners (the stream reader's ``partitions()`` runs in PySpark's streaming-source process) build
partitions without importing the executors' read path (pyarrow, the consumer's decoding).
"""

from __future__ import annotations

from pyspark.sql.datasource import InputPartition

from pyspark_kaflux.offsets import OffsetRange

__all__ = ["KafkaInputPartition"]


class KafkaInputPartition(InputPartition):
    """One Spark task's work: an :class:`~pyspark_kaflux.offsets.OffsetRange` (plain data)."""

    def __init__(self, offset_range: OffsetRange) -> None:
        super().__init__(offset_range)
        self.offset_range = offset_range

    def __repr__(self) -> str:
        r = self.offset_range
        return f"KafkaInputPartition({r.topic}-{r.partition} [{r.start}, {r.end}))"
