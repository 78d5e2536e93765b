"""Read one offset range of one partition into Arrow record batches. [io; runs on executors]

:func:`read_partition` is what the batch and the stream reader's ``read()`` run: it borrows a
cached consumer (:mod:`pyspark_kaflux.client_cache`), positions it with assign + seek (or
reuses its prefetched records when it already stands at the range's start), and polls until the
consumer's position reaches the range's end. Records at or after the end are dropped, so a
range never yields more than it covers; gaps (compaction, transaction markers) are skipped by
the position, not counted.

Records never become Python objects here: the consumer's ``poll_arrow()`` decodes them
straight into Arrow buffers, and :func:`to_source_schema` turns those into the source's
schema with Arrow compute (timestamps to microseconds, empty header lists to nulls as
Spark's Kafka source has them).

Data loss is noticed here too: a start before the log's first offset (records removed), a
partition that disappeared, or a log that now ends before the range does. With
``failOnDataLoss`` these raise :class:`~pyspark_kaflux.offsets.DataLossError`; otherwise the
missing part is skipped with a warning.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from kaflux import Consumer, TopicPartition
from kaflux.errors import KafkaError, OffsetOutOfRangeError
from pyspark_kaflux.client_cache import borrowed
from pyspark_kaflux.input_partition import KafkaInputPartition
from pyspark_kaflux.offsets import (
    INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE,
    INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_TRUE,
    DataLossError,
    OffsetRange,
)
from pyspark_kaflux.options import SourceOptions, executor_consumer_config
from pyspark_kaflux.schema import arrow_schema, headers_arrow_type

__all__ = ["KafkaInputPartition", "read_partition", "read_range", "to_source_schema"]

log = logging.getLogger("pyspark_kaflux")

#: Rows per yielded RecordBatch (at least; one poll's rows are never split).
BATCH_ROWS = 10_000
#: Longest single poll; between polls the loop checks for a stall.
POLL_SLICE_S = 0.5
#: How long the position may stand still (with the partition's end known to be behind the
#: range's end) before the missing offsets count as lost; also how often metadata is checked.
STALL_CHECK_S = 3.0
_TIMESTAMP_US = pa.timestamp("us", tz="UTC")
_HEADERS_ARROW_TYPE = headers_arrow_type()
_HEADER_STRUCT_FIELDS = list(_HEADERS_ARROW_TYPE.value_type)


@dataclass(eq=False)
class Carry:
    """What one range's read leaves for the next range of the same partition, on the same consumer.

    The last ``poll_arrow()`` of a range usually returns records past its end (a poll returns up
    to ``max.poll.records``). They are kept here instead of being dropped, with the consumer's
    position after them, so that the next range, starting at this one's end, begins with them:
    no seek, no refetch. Spark's ``KafkaDataConsumer`` keeps its fetched records the same way.
    """

    tp: TopicPartition | None = None
    #: the offset the carried records continue from: the end of the range that left them
    start: int = -1
    #: the consumer's position after them (nothing else was polled since)
    position: int = -1
    #: the records polled at or after ``start`` (poll_arrow()'s schema), or None
    batch: pa.RecordBatch | None = None

    def clear(self) -> None:
        self.tp, self.start, self.position, self.batch = None, -1, -1, None


def _spark_headers(headers: pa.ListArray) -> pa.ListArray:
    """poll_arrow()'s headers (an empty list for none) as the source's: null for none, and
    the element and field names Spark's Arrow conversion expects. No data is copied."""
    offsets = headers.offsets
    entries = headers.values  # the entries of the unsliced array: the offsets index into them
    if headers.offset:  # a slice: rebase the offsets on its first entry (Arrow wants that with nulls)
        first = offsets[0]
        entries = entries.slice(first.as_py())
        offsets = pc.subtract(offsets, first)
    struct = pa.StructArray.from_arrays(entries.flatten(), fields=_HEADER_STRUCT_FIELDS)
    none = pc.equal(pc.list_value_length(headers), 0)
    return pa.ListArray.from_arrays(offsets, struct, type=_HEADERS_ARROW_TYPE, mask=none)


def to_source_schema(batch: pa.RecordBatch, include_headers: bool) -> pa.RecordBatch:
    """A ``Consumer.poll_arrow()`` batch in the source's schema (:func:`arrow_schema`):
    ``timestamp`` in microseconds, ``timestampType``, and ``headers`` (null for a record
    without headers) or no headers column. Column operations only, no per-record work."""
    columns = [
        batch.column(0),  # key
        batch.column(1),  # value
        batch.column(2),  # topic
        batch.column(3),  # partition
        batch.column(4),  # offset
        batch.column(5).cast(_TIMESTAMP_US),
        batch.column(6),  # timestamp_type
    ]
    if include_headers:
        columns.append(_spark_headers(batch.column(7)))
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(include_headers))


def _count_below(offsets: pa.Array, bound: int) -> int:
    """How many of ``offsets`` (ascending) are below ``bound``: the index of the first at or
    above it."""
    n = len(offsets)
    if n == 0 or offsets[0].as_py() >= bound:
        return 0
    if offsets[n - 1].as_py() < bound:
        return n
    return int(pc.sum(pc.less(offsets, bound)).as_py())


def _concat(pending: list[pa.RecordBatch]) -> pa.RecordBatch:
    return pending[0] if len(pending) == 1 else pa.concat_batches(pending)


def _position_at(consumer: Consumer, tp: TopicPartition, offset: int, carry: Carry) -> pa.RecordBatch | None:
    """Make ``consumer`` read ``tp`` from ``offset``, keeping its prefetched data if it is there;
    returns the carried records to read first (see :class:`Carry`), if any."""
    carried, carried_position = carry.batch, carry.position
    continues = carry.tp == tp and carry.start == offset
    carry.clear()
    try:
        if consumer.assignment() == {tp}:
            position = consumer.position(tp, timeout=5.0)
            if continues and position == carried_position:  # nothing polled since: go on with them
                consumer.resume([tp])
                return carried
            if position == offset:  # it stands at offset (nothing carried): go on from there
                consumer.resume([tp])
                return None
    except KafkaError:  # no usable position: position it afresh
        pass
    consumer.assign([tp])
    consumer.seek(tp, offset)
    consumer.resume([tp])
    return None


def _lost(message: str, fail_on_data_loss: bool) -> None:
    """Raise (failOnDataLoss) or warn about missing offsets."""
    if fail_on_data_loss:
        raise DataLossError(message + INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE)
    log.warning("%s", message + INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_TRUE)


def _partition_exists(consumer: Consumer, tp: TopicPartition) -> bool:
    try:
        return any(p.partition == tp.partition for p in consumer.partitions_for(tp.topic, timeout=10.0))
    except KafkaError as e:  # cannot tell: assume it is there, the poll timeout still applies
        log.debug("metadata check of %s failed: %s", tp, e)
        return True


def read_range(
    consumer: Consumer,
    offset_range: OffsetRange,
    *,
    include_headers: bool,
    fail_on_data_loss: bool,
    poll_timeout_ms: int,
    batch_rows: int = BATCH_ROWS,
    stall_check_s: float = STALL_CHECK_S,
    carry: Carry | None = None,
) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``offset_range`` (``[start, end)``) as RecordBatches.

    With a ``carry`` (kept with the consumer between ranges), records polled past the end are
    left there for the next range, and taken from there when this range continues where the last
    one ended.

    Raises:
        DataLossError: offsets of the range are gone and ``fail_on_data_loss`` is set.
        TimeoutError: the position did not move for ``poll_timeout_ms`` (the broker is
            unreachable, or the range's offsets are not there yet).
    """
    tp, end = offset_range.tp, offset_range.end
    position = offset_range.start
    if position >= end:
        return
    if carry is None:
        carry = Carry()
    carried = _position_at(consumer, tp, position, carry)
    leftover: pa.RecordBatch | None = None  # what the last poll returned past end
    pending: list[pa.RecordBatch] = []
    pending_rows = 0
    last_progress = time.monotonic()
    next_check = last_progress + stall_check_s
    at_end_checks = 0  # consecutive stall checks that found the partition ending before `end`
    while position < end:
        before = position
        try:
            if carried is not None:
                polled, carried = carried, None
            else:
                polled = consumer.poll_arrow(POLL_SLICE_S)  # only tp is assigned
            offsets = polled.column(4)
            low, high = _count_below(offsets, position), _count_below(offsets, end)
            if high > low:
                pending.append(to_source_schema(polled.slice(low, high - low), include_headers))
                pending_rows += high - low
                position = offsets[high - 1].as_py() + 1
            leftover = polled.slice(high) if high < len(polled) else None
            # The consumer's position also moves past gaps (transaction markers, aborted or
            # compacted records), so it decides when the range is done.
            position = max(position, consumer.position(tp, timeout=10.0))
        except OffsetOutOfRangeError:
            resumed = _after_out_of_range(consumer, tp, position, end, fail_on_data_loss)
            if resumed is None:
                break
            position, last_progress = resumed, time.monotonic()
            continue
        now = time.monotonic()
        if position > before:
            last_progress, next_check, at_end_checks = now, now + stall_check_s, 0
        if pending_rows >= batch_rows:
            yield _concat(pending)
            pending, pending_rows = [], 0
        if position >= end or now < next_check:
            continue
        # The position has not moved for stall_check_s: find out why.
        next_check = now + stall_check_s
        if not _partition_exists(consumer, tp):
            _lost(
                f"Partition {tp} is gone (was its topic deleted?); "
                f"offsets [{position}, {end}) cannot be read.",
                fail_on_data_loss,
            )
            break
        # A lag of 0 means the high watermark of the last fetch is at the position. Two checks in a
        # row rule out a watermark left over from before this range (fetches go on meanwhile).
        at_end_checks = at_end_checks + 1 if consumer.current_lag(tp) == 0 else 0
        if at_end_checks >= 2:
            _lost(
                f"Cannot fetch records in [{position}, {end}) of {tp}: the partition now ends at {position} "
                "(was the topic re-created or its log truncated?).",
                fail_on_data_loss,
            )
            break
        if now - last_progress >= poll_timeout_ms / 1000:
            raise TimeoutError(
                f"Failed to get records for {tp} at offset {position} (reading up to {end}) after polling "
                f"for {poll_timeout_ms} ms (option kafkaConsumer.pollTimeoutMs)"
            )
    if pending:
        yield _concat(pending)
    consumer.pause([tp])
    if position >= end:  # read to the end: the next range of tp may start from here
        carry.tp, carry.start, carry.batch = tp, end, leftover
        carry.position = consumer.position(tp, timeout=10.0)


def _after_out_of_range(
    consumer: Consumer, tp: TopicPartition, position: int, end: int, fail_on_data_loss: bool
) -> int | None:
    """Handle OFFSET_OUT_OF_RANGE at ``position``: the new position, or None to stop reading."""
    earliest = consumer.beginning_offsets([tp], timeout=30.0)[tp]
    if position < earliest:
        _lost(
            f"Cannot fetch offset {position} of {tp}: the earliest offset is now {earliest}.",
            fail_on_data_loss,
        )
        if earliest >= end:
            return None
        consumer.seek(tp, earliest)
        return earliest
    _lost(
        f"Cannot fetch offset {position} of {tp}: it is past the end of the partition's log.",
        fail_on_data_loss,
    )
    return None


def read_partition(options: SourceOptions, offset_range: OffsetRange) -> Iterator[pa.RecordBatch]:
    """Read one range with a cached consumer configured from ``options`` (the executor side of
    both readers)."""
    config = executor_consumer_config(options.kafka_config)
    with borrowed(config, prefer=offset_range.tp) as pooled:
        if not isinstance(pooled.carried, Carry):
            pooled.carried = Carry()
        batches = read_range(
            pooled.consumer,
            offset_range,
            include_headers=options.include_headers,
            fail_on_data_loss=options.fail_on_data_loss,
            poll_timeout_ms=options.poll_timeout_ms,
            carry=pooled.carried,
        )
        if not options.resolved_formats:
            yield from batches
            return
        from pyspark_kaflux.schema_columns import decode_batch

        for batch in batches:  # typed key/value columns (value.format=avro ...)
            yield decode_batch(batch, options)
