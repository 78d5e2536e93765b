"""Partitions and offsets as the driver sees them. [io; runs in the driver's Python processes]

:class:`OffsetReader` answers what Spark's ``KafkaOffsetReader`` answers: which partitions the
subscription covers now, their earliest and latest offsets, offsets for timestamps, and the
resolution of a ``startingOffsets``/``endingOffsets``-like spec into exact offsets. It uses a
cached kaflux consumer (never joined to a group) that is created lazily, so the reader object
itself holds only plain, picklable data.

Latest offsets come from ListOffsets (``Consumer.end_offsets``), like Spark's. Brokers that
answer ListOffsets LATEST wrongly (Tansu 0.6) therefore make "latest" wrong here too.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, TypeVar

from kaflux.errors import KafkaError, KafkaTimeoutError
from kaflux.structs import TopicPartition
from pyspark_kaflux.client_cache import borrowed_consumer
from pyspark_kaflux.offsets import PartitionOffsets
from pyspark_kaflux.options import (
    EARLIEST,
    LATEST,
    Assign,
    EarliestOffsets,
    GlobalTimestamp,
    KafluxOptionError,
    LatestOffsets,
    OffsetSpec,
    SourceOptions,
    SpecificOffsets,
    SpecificTimestamps,
    Subscribe,
    SubscribePattern,
    driver_consumer_config,
)

if TYPE_CHECKING:  # the cached consumer is made (and its module imported) on the first lookup
    from kaflux import Consumer

__all__ = ["OffsetReader"]

log = logging.getLogger("pyspark_kaflux")
T = TypeVar("T")
_DEFAULT_TIMEOUT_S = 30.0


class OffsetReader:
    """Looks up the subscription's partitions and their offsets (driver side)."""

    def __init__(self, options: SourceOptions) -> None:
        self._options = options
        self._config = driver_consumer_config(options.kafka_config)
        raw_timeout = options.kafka_config.get("default.api.timeout.ms")
        self._timeout_s = int(raw_timeout) / 1000 if raw_timeout is not None else _DEFAULT_TIMEOUT_S

    def _with_consumer(self, action: Callable[[Consumer], T]) -> T:
        """Run ``action`` with the cached driver consumer, retrying retriable errors
        ``fetchOffset.numRetries`` times, ``fetchOffset.retryIntervalMs`` apart."""
        attempts = self._options.fetch_offset_num_retries + 1
        for attempt in range(attempts):
            try:
                with borrowed_consumer(self._config) as consumer:
                    return action(consumer)
            except KafkaError as e:
                # A timeout already spent the whole deadline on kaflux's own retries.
                if not e.retriable or isinstance(e, KafkaTimeoutError) or attempt == attempts - 1:
                    raise
                log.warning("kaflux offset lookup failed (attempt %d of %d): %s", attempt + 1, attempts, e)
                time.sleep(self._options.fetch_offset_retry_interval_ms / 1000)
        raise AssertionError("unreachable")  # pragma: no cover

    # -- partitions ---------------------------------------------------------------------------

    def partitions(self) -> list[TopicPartition]:
        """The partitions the subscription covers now (sorted); missing topics contribute none."""
        strategy = self._options.strategy

        def lookup(consumer: Consumer) -> list[TopicPartition]:
            if isinstance(strategy, SubscribePattern):
                topics = consumer.list_topics(timeout=self._timeout_s)
                return sorted(
                    TopicPartition(name, p.partition)
                    for name, infos in topics.items()
                    if strategy.matches(name)
                    for p in infos
                )
            names = (
                strategy.topics
                if isinstance(strategy, Subscribe)
                else sorted({tp.topic for tp in strategy.partitions})
            )
            found = {
                TopicPartition(name, p.partition)
                for name in names
                for p in consumer.partitions_for(name, timeout=self._timeout_s)
            }
            if isinstance(strategy, Assign):
                missing = sorted(set(strategy.partitions) - found)
                if missing:
                    log.warning(
                        "assigned partitions that do not exist (yet): %s", ", ".join(map(str, missing))
                    )
                return sorted(set(strategy.partitions) & found)
            return sorted(found)

        return self._with_consumer(lookup)

    def _existing(self, tps: Iterable[TopicPartition]) -> list[TopicPartition]:
        wanted = set(tps)
        topics = {tp.topic for tp in wanted}

        def lookup(consumer: Consumer) -> list[TopicPartition]:
            found = {
                TopicPartition(name, p.partition)
                for name in topics
                for p in consumer.partitions_for(name, timeout=self._timeout_s)
            }
            return sorted(wanted & found)

        return self._with_consumer(lookup)

    # -- offsets ------------------------------------------------------------------------------

    def _list(
        self,
        tps: Iterable[TopicPartition],
        lookup: Callable[[Consumer, list[TopicPartition]], dict[TopicPartition, int]],
    ) -> PartitionOffsets:
        """Offsets of the partitions that exist; a partition deleted meanwhile is left out."""
        wanted = sorted(set(tps))
        if not wanted:
            return {}
        try:
            return self._with_consumer(lambda c: lookup(c, wanted))
        except KafkaTimeoutError:
            still = self._existing(wanted)
            if still == wanted:
                raise
            log.warning(
                "partitions disappeared during an offset lookup: %s", sorted(set(wanted) - set(still))
            )
            return self._with_consumer(lambda c: lookup(c, still)) if still else {}

    def earliest(self, tps: Iterable[TopicPartition]) -> PartitionOffsets:
        """The first offset of each partition."""
        return self._list(tps, lambda c, w: c.beginning_offsets(w, timeout=self._timeout_s))

    def latest(self, tps: Iterable[TopicPartition]) -> PartitionOffsets:
        """The end (next offset to be written; the LSO under read_committed) of each partition."""
        return self._list(tps, lambda c, w: c.end_offsets(w, timeout=self._timeout_s))

    def for_times(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        """The earliest offset with a timestamp >= the given one (ms), or None where there is none."""
        if not timestamps:
            return {}

        def lookup(consumer: Consumer) -> dict[TopicPartition, int | None]:
            found = consumer.offsets_for_times(dict(timestamps), timeout=self._timeout_s)
            return {tp: (None if r is None else r.offset) for tp, r in found.items()}

        return self._with_consumer(lookup)

    # -- resolving a spec -----------------------------------------------------------------------

    def resolve(self, spec: OffsetSpec, tps: list[TopicPartition], *, starting: bool) -> PartitionOffsets:
        """Exact offsets for ``spec`` over the partitions ``tps`` (-2/-1 become earliest/latest).

        Raises:
            KafluxOptionError: specific offsets or timestamps do not name exactly ``tps``, or
                (``startingOffsetsByTimestampStrategy=error``) no offset matches a starting timestamp.
        """
        option = "startingOffsets" if starting else "endingOffsets"
        if isinstance(spec, EarliestOffsets):
            return self.earliest(tps)
        if isinstance(spec, LatestOffsets):
            return self.latest(tps)
        if isinstance(spec, SpecificOffsets):
            _check_same_partitions(option, spec.offsets, tps, "Use -1 for latest, -2 for earliest.")
            earliest = self.earliest([tp for tp, o in spec.offsets.items() if o == EARLIEST])
            latest = self.latest([tp for tp, o in spec.offsets.items() if o == LATEST])
            out: PartitionOffsets = {}
            value: int | None
            for tp, offset in sorted(spec.offsets.items()):
                value = (
                    earliest.get(tp) if offset == EARLIEST else latest.get(tp) if offset == LATEST else offset
                )
                if value is not None:
                    out[tp] = value
            return out
        if isinstance(spec, GlobalTimestamp):
            timestamps = dict.fromkeys(tps, spec.timestamp)
        else:
            assert isinstance(spec, SpecificTimestamps)
            _check_same_partitions(f"{option}ByTimestamp", spec.timestamps, tps, "")
            timestamps = dict(spec.timestamps)
        found = self.for_times(timestamps)
        missing = sorted(tp for tp in timestamps if found.get(tp) is None)
        if missing and starting and spec.strategy == "error":
            tp = missing[0]
            raise KafluxOptionError(
                f"No offset matched from request of topic-partition {tp} and timestamp {timestamps[tp]}. "
                "Set option 'startingOffsetsByTimestampStrategy' to 'latest' to start from the latest "
                "offset instead."
            )
        latest = self.latest(missing)
        resolved: PartitionOffsets = {}
        for tp in sorted(timestamps):
            matched = found.get(tp)
            if matched is None:
                matched = latest.get(tp)
            if matched is not None:
                resolved[tp] = matched
        return resolved


def _check_same_partitions(
    option: str, given: Mapping[TopicPartition, int], tps: list[TopicPartition], hint: str
) -> None:
    if set(given) != set(tps):
        names = ", ".join(str(tp) for tp in sorted(given))
        assigned = ", ".join(str(tp) for tp in sorted(tps))
        raise KafluxOptionError(
            f"If option '{option}' contains specific offsets, you must specify all TopicPartitions. {hint} "
            f"Specified: [{names}] Assigned: [{assigned}]".replace("  ", " ")
        )
