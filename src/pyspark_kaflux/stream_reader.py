"""The micro-batch reader: ``spark.readStream.format("kaflux")``. [io]

Offsets are the JSON of Spark's Kafka checkpoints, ``{"topic": {"0": 42}}``, built in sorted
order because Spark compares them as strings. Everything but ``read()`` runs in the query's
driver-side Python process, which lives as long as the query (so the ``maxTriggerDelay`` timer
and the ``Trigger.AvailableNow`` target can be kept on ``self``); ``read()`` runs on executors,
on a copy of this object made by Spark's planner, and only uses the options.

Admission control: ``maxOffsetsPerTrigger`` caps each micro-batch (split across partitions in
proportion to their backlog, see :func:`~pyspark_kaflux.offsets.rate_limit`);
``minOffsetsPerTrigger`` skips triggers until enough offsets are available or
``maxTriggerDelay`` has passed since the last batch.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from pyspark_kaflux.input_partition import KafkaInputPartition
from pyspark_kaflux.offsets import (
    INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE,
    INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_TRUE,
    DataLossError,
    PartitionOffsets,
    backlog,
    from_json,
    plan_ranges,
    rate_limit,
    split_ranges,
    to_json,
)
from pyspark_kaflux.options import SourceOptions

if TYPE_CHECKING:
    import pyarrow as pa

    from pyspark_kaflux.offset_reader import OffsetReader

__all__ = ["KafluxStreamReader"]

log = logging.getLogger("pyspark_kaflux")

JsonOffsets = dict[str, dict[str, int]]


class KafluxStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans micro-batches over the subscription's partitions and reads them on executors."""

    def __init__(self, options: SourceOptions) -> None:
        self._options = options
        #: Trigger.AvailableNow: the latest offsets when the query started; never read past them.
        self._target: PartitionOffsets | None = None
        #: maxTriggerDelay: when the last micro-batch was admitted (monotonic seconds).
        self._last_trigger_s: float | None = None
        self._latest_seen: JsonOffsets | None = None

    def _offsets(self) -> OffsetReader:
        # Imported here: this object is also what executors unpickle to read(), and the driver's
        # process imports the consumer only when it first looks offsets up.
        from pyspark_kaflux.offset_reader import OffsetReader

        return OffsetReader(self._options)

    # -- where to start --------------------------------------------------------------------------

    def initialOffset(self) -> JsonOffsets:
        """The ``startingOffsets`` (or ``startingTimestamp``...) of a new query, resolved now."""
        reader = self._offsets()
        tps = reader.partitions()
        return to_json(reader.resolve(self._options.starting, tps, starting=True))

    # -- how far to go ------------------------------------------------------------------------------

    def getDefaultReadLimit(self) -> ReadLimit:
        options = self._options
        if options.max_offsets_per_trigger is not None:
            return ReadMaxRows(options.max_offsets_per_trigger)
        if options.min_offsets_per_trigger is not None:
            return ReadMinRows(options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Freeze "latest" for Trigger.AvailableNow: later data is left to the next run."""
        reader = self._offsets()
        self._target = reader.latest(reader.partitions())

    def latestOffset(self, start: JsonOffsets, limit: ReadLimit) -> JsonOffsets:
        """The end offset of the next micro-batch (``start`` itself when there is nothing to do)."""
        begin = from_json(start)
        reader = self._offsets()
        latest = dict(self._target) if self._target is not None else reader.latest(reader.partitions())
        self._latest_seen = to_json(latest)
        if isinstance(limit, ReadAllAvailable):
            return to_json(latest)
        new = [tp for tp in latest if tp not in begin]
        new_start = reader.earliest(new) if new else {}
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else self._options.max_offsets_per_trigger
        min_rows = limit.min_rows if isinstance(limit, ReadMinRows) else self._options.min_offsets_per_trigger
        if (
            min_rows is not None
            and self._target is None
            and self._delay_batch(min_rows, backlog(begin, latest, new_start))
        ):
            return start
        if max_rows is not None:
            return to_json(rate_limit(max_rows, begin, latest, new_start))
        return to_json(latest)

    def _delay_batch(self, min_rows: int, available: int) -> bool:
        """Whether to skip this trigger: fewer than ``min_rows`` offsets and ``maxTriggerDelay``
        not yet passed since the last batch (or the query's first trigger)."""
        now = time.monotonic()
        if self._last_trigger_s is None:
            self._last_trigger_s = now
        if (now - self._last_trigger_s) * 1000 >= self._options.max_trigger_delay_ms or available >= min_rows:
            self._last_trigger_s = now
            return False
        return True

    def reportLatestOffset(self) -> JsonOffsets | None:
        """The latest offsets seen by the last ``latestOffset`` call, before admission control."""
        return self._latest_seen

    # -- planning and reading --------------------------------------------------------------------------

    def partitions(self, start: JsonOffsets, end: JsonOffsets) -> list[InputPartition]:
        """One task per offset range between ``start`` and ``end`` (more with ``minPartitions``).

        Raises:
            DataLossError: partitions disappeared or offsets went backwards, and ``failOnDataLoss``.
        """
        begin, until = from_json(start), from_json(end)
        new = [tp for tp in until if tp not in begin]
        new_start = self._offsets().earliest(new) if new else {}
        plan = plan_ranges(begin, until, new_start)
        for message in plan.data_loss:
            self._report_data_loss(message)
        pieces = split_ranges(
            plan.ranges, self._options.min_partitions, self._options.max_records_per_partition
        )
        return [KafkaInputPartition(r) for r in pieces]

    def _report_data_loss(self, message: str) -> None:
        if self._options.fail_on_data_loss:
            raise DataLossError(message + INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE)
        log.warning("%s", message + INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_TRUE)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Yield the records of one range as Arrow batches (runs on an executor)."""
        from pyspark_kaflux.range_reader import read_partition  # the executors' path: pyarrow, decoding

        if isinstance(partition, KafkaInputPartition):
            yield from read_partition(self._options, partition.offset_range)

    def commit(self, end: JsonOffsets) -> None:
        """Nothing to do: the query's checkpoint holds the offsets; no group offsets are committed."""

    def stop(self) -> None:
        """Nothing to release: cached consumers live with their process."""
