"""Turns buffered fetches into the records ``poll()`` returns. [app]

Takes completed fetches from the fetch buffer in arrival order, drops stale ones (the
partition was unassigned or its position moved since the fetch was sent), decodes up to
``max.poll.records`` records and advances each partition's position past what it returns.
Data of paused partitions stays buffered untouched.
"""

from __future__ import annotations

from kaflux.consumer.completed_fetch import CompletedFetch, Deserializer
from kaflux.consumer.consumer_record import ConsumerRecord
from kaflux.consumer.fetch_buffer import FetchBuffer
from kaflux.consumer.subscription_state import FetchPosition, SubscriptionState
from kaflux.errors import KafkaError
from kaflux.structs import TopicPartition


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
    ) -> None:
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
        out: dict[TopicPartition, list[ConsumerRecord]] = {}
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
                    if out:
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
            elif self._subscription.is_paused(current.tp):
                detached = self._buffer.take_next_in_line()
                if detached is not None:
                    self._buffer.park(detached)
                continue
            elif not self._still_current(current):
                current.drain()
                self._buffer.set_next_in_line(None)  # release its bytes so fetching can go on
                self.released_fetches += 1
                continue
            records = self._drain(current, remaining, bool(out))
            if records is None:
                break
            if records:
                out.setdefault(current.tp, []).extend(records)
                remaining -= len(records)
            if current.consumed:
                self._buffer.set_next_in_line(None)  # release its bytes now
                self.released_fetches += 1
        return out

    def _initialize(self, fetch: CompletedFetch) -> bool:
        """Check the fetch still matches the partition's position; record its offsets."""
        tp = fetch.tp
        if not self._subscription.is_readable(tp):
            return False
        position = self._subscription.position(tp)
        if position is None or position.offset != fetch.fetch_offset:
            return False
        if self._subscription.position_version(tp) != fetch.position_version:
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
        """Whether the partition is still assigned and positioned where this fetch continues."""
        if not self._subscription.is_readable(fetch.tp):
            return False
        position = self._subscription.position(fetch.tp)
        return position is not None and position.offset == fetch.next_fetch_offset

    def _drain(
        self, fetch: CompletedFetch, max_records: int, have_records: bool
    ) -> list[ConsumerRecord] | None:
        """Records from ``fetch``; None when it failed after other records were collected
        (the error is raised again on the next call)."""
        before = fetch.next_fetch_offset
        try:
            records = fetch.fetch_records(max_records, self._key_deserializer, self._value_deserializer)
        except KafkaError:
            if have_records:
                return None
            raise
        finally:
            if fetch.next_fetch_offset > before:
                self._subscription.advance(
                    fetch.tp, FetchPosition(fetch.next_fetch_offset, fetch.last_epoch), expected_offset=before
                )
        return records
