"""Turns buffered fetches into the records ``poll()`` and ``poll_arrow()`` return. [app]

Takes completed fetches from the fetch buffer in arrival order, drops stale ones (the
partition was unassigned or its position moved since the fetch was sent), decodes up to
``max.poll.records`` records and advances each partition's position past what it returns.
Data of paused partitions stays buffered untouched.

One walk, two sinks: :meth:`FetchCollector.collect` gathers ``ConsumerRecord`` objects per
partition, :meth:`FetchCollector.collect_arrow` one ``pyarrow.RecordBatch`` of the same
records (slices of each fetch's rows, decoded ahead into Arrow columns by the record kernel,
with no object per record; see :mod:`kaflux.consumer.completed_fetch`). Positions,
staleness, pausing, ``max.poll.records``, transactions and errors are handled once, for both.

For the metrics (with ``tally=True``), it counts in :attr:`FetchCollector.tally` what it
returns, once per partition taken from, never per record: the records, the bytes of a fetch
when its first records are returned, and the partition's lag after the take. The consumer
records the tally once per ``poll()``.
"""

from __future__ import annotations

from typing import Any, Protocol

from kaflux.consumer import completed_fetch
from kaflux.consumer.completed_fetch import CompletedFetch, Deserializer
from kaflux.consumer.consumer_record import ConsumerRecord
from kaflux.consumer.fetch_buffer import FetchBuffer
from kaflux.consumer.subscription_state import SubscriptionState
from kaflux.errors import KafkaError
from kaflux.records import active_kernel
from kaflux.records.interface import ColumnBuilderView, RecordDecoder
from kaflux.structs import TopicPartition


class _Sink(Protocol):
    """Where one collect() puts the records it takes."""

    #: records taken so far
    count: int

    def take(self, fetch: CompletedFetch, max_records: int) -> int:
        """Take up to ``max_records`` records from ``fetch``; returns how many."""
        ...


class _RecordSink:
    """``ConsumerRecord`` objects, grouped by partition in the order taken."""

    __slots__ = ("count", "key_deserializer", "out", "value_deserializer")

    def __init__(
        self, key_deserializer: Deserializer | None, value_deserializer: Deserializer | None
    ) -> None:
        self.count = 0
        self.out: dict[TopicPartition, list[ConsumerRecord]] = {}
        self.key_deserializer = key_deserializer
        self.value_deserializer = value_deserializer

    def take(self, fetch: CompletedFetch, max_records: int) -> int:
        records = fetch.fetch_records(max_records, self.key_deserializer, self.value_deserializer)
        if records:
            existing = self.out.get(fetch.tp)
            if existing is None:
                self.out[fetch.tp] = records
            else:
                existing.extend(records)
            self.count += len(records)
        return len(records)


class _ArrowSink:
    """``pyarrow.RecordBatch`` slices of the fetches' decoded rows, in the order taken."""

    __slots__ = ("builder", "call_rows", "count", "parts")

    def __init__(self, builder: ColumnBuilderView, call_rows: int) -> None:
        self.count = 0
        self.builder = builder
        self.call_rows = call_rows
        self.parts: list[Any] = []

    def take(self, fetch: CompletedFetch, max_records: int) -> int:
        taken = fetch.fetch_arrow(self.builder, max_records, self.parts, self.call_rows)
        self.count += taken
        return taken


class _ColumnSink:
    """Rows of one ``ColumnBuilder`` (a large call: its columns are made once)."""

    __slots__ = ("builder", "count")

    def __init__(self, builder: ColumnBuilderView) -> None:
        self.count = 0
        self.builder = builder

    def take(self, fetch: CompletedFetch, max_records: int) -> int:
        taken = fetch.append_arrow(self.builder, max_records)
        self.count += taken
        return taken


class Tally:
    """What collect() calls returned since the last :meth:`reset` (see FetchCollector)."""

    __slots__ = ("bytes", "lags", "records")

    def __init__(self) -> None:
        #: records returned
        self.records = 0
        #: bytes of the fetches whose first records were returned
        self.bytes = 0
        #: per partition returned from: its lag after the last take (end offset - position)
        self.lags: dict[TopicPartition, int] = {}

    def reset(self) -> None:
        """Count from zero again."""
        self.records = self.bytes = 0
        self.lags.clear()


class FetchCollector:
    """Collects records from the fetch buffer for one ``poll()``."""

    def __init__(
        self,
        subscription: SubscriptionState,
        buffer: FetchBuffer,
        *,
        max_poll_records: int,
        key_deserializer: Deserializer | None = None,
        value_deserializer: Deserializer | None = None,
        kernel: RecordDecoder | None = None,
        tally: bool = False,
        read_committed: bool = False,
    ) -> None:
        """``kernel``: the record kernel to decode with (default: the active one).
        ``tally``: count what is returned in :attr:`tally` (lag measured to the last stable
        offset with ``read_committed``)."""
        self._read_committed = read_committed
        #: what was returned since the tally's last reset (None without ``tally``)
        self.tally: Tally | None = Tally() if tally else None
        self._kernel = kernel
        self._column_builder: ColumnBuilderView | None = None
        self._empty_batch: Any = None
        self._subscription = subscription
        self._buffer = buffer
        self._max_poll_records = max_poll_records
        self._key_deserializer = key_deserializer
        self._value_deserializer = value_deserializer
        #: fetches fully read during the last collect() (their partitions can be fetched again)
        self.released_fetches = 0

    def collect(self) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records from the buffer, at most ``max.poll.records``, positions advanced.

        Raises the error of a failed fetch or a bad record, but only when no record was
        collected first (then it is raised on the next call).
        """
        sink = _RecordSink(self._key_deserializer, self._value_deserializer)
        self._collect(sink)
        return sink.out

    def collect_arrow(self) -> Any:
        """:meth:`collect` as one ``pyarrow.RecordBatch`` (the schema of
        ``kaflux.records.arrow_schema()``): the same records, positions and errors. The
        deserializers do not apply (the columns hold the bytes). Needs pyarrow.

        With ``max.poll.records`` below :data:`~kaflux.consumer.completed_fetch.MIN_DECODE_ROWS`
        a call's rows of one fetch are a slice of rows decoded ahead from it (shared by the
        next calls), concatenated only where they come from more than one; larger calls
        decode exactly their rows into one set of columns."""
        builder = self._column_builder
        kernel = self._kernel or active_kernel()
        if builder is None:  # kept: it sizes its next columns like the last ones
            builder = self._column_builder = kernel.ColumnBuilder()
        if self._max_poll_records >= completed_fetch.MIN_DECODE_ROWS:
            columns = _ColumnSink(builder)
            try:
                self._collect(columns)
            except BaseException:
                builder.finish()  # let go of what was appended
                raise
            return kernel.to_arrow(builder.finish())
        sink = _ArrowSink(builder, self._max_poll_records)
        self._collect(sink)
        parts = sink.parts
        if len(parts) == 1:
            return parts[0]
        if parts:
            import pyarrow

            return pyarrow.concat_batches(parts)
        if self._empty_batch is None:
            self._empty_batch = kernel.to_arrow(builder.finish())
        return self._empty_batch

    def _collect(self, sink: _Sink) -> None:
        remaining = self._max_poll_records
        self.released_fetches = 0
        parked = self._buffer.parked_partitions()
        if parked:
            self._buffer.unpark({tp for tp in parked if not self._subscription.is_paused(tp)})
        while remaining > 0:
            current = self._buffer.next_in_line()
            if current is None or current.consumed:
                fetch = self._buffer.poll()
                if fetch is None:
                    break
                if self._subscription.is_paused(fetch.tp):
                    self._buffer.park(fetch)
                    continue
                if fetch.error is not None:
                    if not self._error_still_relevant(fetch):
                        self._buffer.release(fetch)  # the position moved on: a stale error
                        continue
                    if sink.count:
                        self._buffer.requeue_front(fetch)
                        break
                    self._buffer.release(fetch)
                    raise fetch.error
                # A fetch parked part-way through (paused) continues where it stopped.
                usable = self._still_current(fetch) if fetch.initialized else self._initialize(fetch)
                if not usable:
                    self._buffer.release(fetch)
                    self.released_fetches += 1
                    continue
                self._buffer.set_next_in_line(fetch)
                current = fetch
            elif self._subscription.returnable_offset(current.tp) != current.next_fetch_offset:
                if self._subscription.is_paused(current.tp):
                    detached = self._buffer.take_next_in_line()
                    if detached is not None:
                        detached.release_decoded()  # kept fetched, not decoded, while paused
                        self._buffer.park(detached)
                else:  # unassigned, or its position moved
                    current.drain()
                    self._buffer.set_next_in_line(None)  # release its bytes so fetching can go on
                    self.released_fetches += 1
                continue
            taken = self._drain(current, remaining, sink)
            if taken is None:
                break
            remaining -= taken
            if current.consumed:
                self._buffer.set_next_in_line(None)  # release its bytes now
                self.released_fetches += 1

    def _initialize(self, fetch: CompletedFetch) -> bool:
        """Check the fetch still matches the partition's position; record its offsets. Data of
        a partition without a valid position (awaiting validation against a new leader, or a
        reset) is dropped, as Java does: it is fetched again once the position is settled."""
        tp = fetch.tp
        if self._kernel is not None:
            fetch.kernel = self._kernel
        valid = self._subscription.valid_position(tp)
        if valid is None:
            return False
        position, version = valid
        if position.offset != fetch.fetch_offset or version != fetch.position_version:
            return False
        self._subscription.update_fetch_offsets(
            tp, fetch.high_watermark, fetch.last_stable_offset, fetch.log_start_offset
        )
        fetch.initialized = True
        return True

    def _error_still_relevant(self, fetch: CompletedFetch) -> bool:
        """An error fetched for a position the application has since left is dropped."""
        tp = fetch.tp
        return (
            self._subscription.is_readable(tp)
            and self._subscription.position_version(tp) == fetch.position_version
        )

    def _still_current(self, fetch: CompletedFetch) -> bool:
        """Whether the partition is still assigned, with a valid position where this fetch
        continues."""
        valid = self._subscription.valid_position(fetch.tp)
        return valid is not None and valid[0].offset == fetch.next_fetch_offset

    def _drain(self, fetch: CompletedFetch, max_records: int, sink: _Sink) -> int | None:
        """Records from ``fetch`` into ``sink``; how many, or None when it failed after
        other records were collected (the error is raised again on the next call) or the
        sink's columns are full."""
        before = fetch.next_fetch_offset
        taken = 0
        try:
            taken = sink.take(fetch, max_records)
            return taken
        except KafkaError:
            if sink.count:
                return None
            raise
        except OverflowError:
            # Columns past Arrow's 2 GiB: what was collected goes out, the rest next time.
            if sink.count:
                return None
            raise
        finally:
            if fetch.next_fetch_offset > before:
                self._subscription.advance_offset(fetch.tp, fetch.next_fetch_offset, fetch.last_epoch, before)
            tally = self.tally
            if taken and tally is not None:
                tally.records += taken
                if before == fetch.fetch_offset:
                    tally.bytes += fetch.size_bytes
                # The fetch's own end offset: a partition with data in the buffer is not
                # fetched again, so no newer one is known.
                end = fetch.last_stable_offset if self._read_committed else fetch.high_watermark
                if end >= 0:
                    tally.lags[fetch.tp] = max(0, end - fetch.next_fetch_offset)
