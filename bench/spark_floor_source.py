"""A Python streaming source that reads nothing: the floor of PySpark's Python data sources.

``format("floor")`` (register :class:`FloorSource`; it supports ``Trigger.AvailableNow``) has the
kaflux source's columns and yields the same Arrow batch over and over from memory, so a query
over it costs what PySpark's machinery costs for any Python streaming source (the driver-side
source process, the Python workers, Arrow to the JVM) and nothing for reading. It imports
neither kaflux nor pyspark_kaflux. Options: ``rows`` (per micro-batch), ``batches``
(micro-batches before it has no more data), ``partitions`` (tasks per micro-batch),
``batchRows`` (rows per Arrow batch).

Spark's Python workers import this module by name (the class is pickled by reference), so its
directory must be on their ``PYTHONPATH`` (the benchmarks add ``bench/`` before Spark starts).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, SupportsTriggerAvailableNow
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

_BATCHES: dict[int, Any] = {}


def _batch(rows: int) -> Any:
    """``rows`` rows shaped like the benchmark's topic (8-byte keys, 100-byte values from 4096)."""
    batch = _BATCHES.get(rows)
    if batch is None:
        import pyarrow as pa

        values = [(f"{i:04x}" * 25).encode() for i in range(4096)]
        batch = _BATCHES[rows] = pa.RecordBatch.from_pydict(
            {
                "key": pa.array([b"%08d" % i for i in range(rows)], pa.binary()),
                "value": pa.array([values[i % 4096] for i in range(rows)], pa.binary()),
                "topic": pa.array(["bench"] * rows, pa.string()),
                "partition": pa.array([0] * rows, pa.int32()),
                "offset": pa.array(range(rows), pa.int64()),
                "timestamp": pa.array([1_790_000_000_000_000] * rows, pa.timestamp("us", tz="UTC")),
                "timestampType": pa.array([0] * rows, pa.int32()),
            }
        )
    return batch


class _Part(InputPartition):
    def __init__(self, rows: int) -> None:
        super().__init__(rows)
        self.rows = rows


class _Reader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, rows: int, batches: int, partitions: int, batch_rows: int) -> None:
        self.rows, self.batches, self.parts, self.batch_rows = rows, batches, partitions, batch_rows

    def initialOffset(self) -> dict[str, int]:
        return {"batch": 0}

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        """One micro-batch of ``rows`` a trigger, ``batches`` of them in all."""
        return {"batch": min(start["batch"] + 1, self.batches)}

    def prepareForTriggerAvailableNow(self) -> None:
        pass

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        rows = (end["batch"] - start["batch"]) * self.rows
        return (
            [_Part(rows * (i + 1) // self.parts - rows * i // self.parts) for i in range(self.parts)]
            if rows
            else []
        )

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, _Part)
        batch = _batch(self.batch_rows)
        whole, rest = divmod(partition.rows, self.batch_rows)
        for _ in range(whole):
            yield batch
        if rest:
            yield batch.slice(0, rest)

    def commit(self, end: dict[str, int]) -> None:
        pass


class FloorSource(DataSource):
    """``format("floor")``: see the module's docstring."""

    @classmethod
    def name(cls) -> str:
        return "floor"

    def schema(self) -> StructType:
        return StructType(
            [
                StructField("key", BinaryType()),
                StructField("value", BinaryType()),
                StructField("topic", StringType()),
                StructField("partition", IntegerType()),
                StructField("offset", LongType()),
                StructField("timestamp", TimestampType()),
                StructField("timestampType", IntegerType()),
            ]
        )

    def streamReader(self, schema: StructType) -> _Reader:
        o = self.options
        return _Reader(
            int(o.get("rows", "1000000")),
            int(o.get("batches", "1")),
            int(o.get("partitions", "6")),
            int(o.get("batchRows", "10000")),
        )


class FloorSink(DataSource):
    """``format("floor_sink")``: a Python sink that counts the Arrow batches Spark hands it and
    sends nothing, the floor of any PySpark Python data-source writer (the Python workers and
    the rows' way from the JVM to them as Arrow). Register it with
    ``spark.dataSource.register(FloorSink)``; write with ``.mode("append")``."""

    @classmethod
    def name(cls) -> str:
        return "floor_sink"

    def writer(self, schema: StructType, overwrite: bool) -> Any:
        from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

        class _Counter(DataSourceArrowWriter):
            def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
                rows = 0
                for batch in iterator:
                    rows += batch.num_rows
                return WriterCommitMessage()

        return _Counter()
