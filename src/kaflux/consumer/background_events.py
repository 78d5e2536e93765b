"""Background events: what the network thread hands the consumer's application thread.
[shared: :meth:`BackgroundEventHandler.post` and the error hooks run on the network thread,
:meth:`BackgroundEventHandler.process` on the application thread]

As Java's ``BackgroundEventHandler`` and ``BackgroundEventProcessor``: the network thread queues
errors the application must see and rebalance callbacks to run, and wakes a waiting ``poll()``;
``poll()`` (and ``unsubscribe()`` / ``close()``) drains the queue between waits, runs the
callbacks and raises the first error (later ones are logged).
"""

from __future__ import annotations

import logging
import queue
from collections.abc import Callable, Iterable
from typing import Protocol

from kaflux.blocking import Steps
from kaflux.consumer.events import (
    AutoCommittedEvent,
    BackgroundEvent,
    ErrorEvent,
    RebalanceCallbackNeededEvent,
)
from kaflux.errors import KafkaError, NoOffsetForPartitionError
from kaflux.structs import OffsetAndMetadata, TopicPartition

log = logging.getLogger(__name__)

#: runs one rebalance callback (as steps: an ``async def`` listener is awaited); its error
RunCallback = Callable[[RebalanceCallbackNeededEvent], Steps[BaseException | None]]


class SubscriptionView(Protocol):
    """What the handler reads of the subscription (``SubscriptionState``)."""

    def subscription(self) -> Iterable[str]: ...

    def assigned_partitions(self) -> Iterable[TopicPartition]: ...

    def still_awaiting_reset(self, tp: TopicPartition) -> bool: ...


class BackgroundEventHandler:
    """The queue of background events, its network-thread hooks and its processing."""

    def __init__(
        self,
        client_id: str,
        subscription: SubscriptionView,
        wake: Callable[[], None],
        on_auto_committed: Callable[[dict[TopicPartition, OffsetAndMetadata]], None] | None = None,
    ) -> None:
        """``wake``: cut short a waiting ``poll()`` (``FetchBuffer.wakeup``);
        ``on_auto_committed``: the interceptors' ``on_commit``, for auto-commits."""
        self._client_id = client_id
        self._on_auto_committed = on_auto_committed
        self._subscription = subscription
        self._wake = wake
        self._queue: queue.SimpleQueue[BackgroundEvent] = queue.SimpleQueue()

    # -- network thread --------------------------------------------------------------------

    def post(self, event: BackgroundEvent) -> None:
        """[bg] Queue a background event and wake a waiting poll()."""
        self._queue.put(event)
        self._wake()

    def post_error(self, error: KafkaError) -> None:
        """[bg] Hand an error to the application thread; raised by the next poll()."""
        self.post(ErrorEvent(error))

    def on_topic_error(self, topic: str | None, error: KafkaError) -> None:
        """[bg] A metadata refresh reported an error that retrying will not cure: for a topic
        (e.g. TOPIC_AUTHORIZATION_FAILED), raise it from poll() if the topic is in use; for the
        refresh itself (e.g. a failed login), always."""
        if (
            topic is None
            or topic in self._subscription.subscription()
            or any(tp.topic == topic for tp in self._subscription.assigned_partitions())
        ):
            self.post_error(error)

    # -- application thread ----------------------------------------------------------------

    def has_pending(self) -> bool:
        """Whether events wait (an event being posted now may be seen only next time)."""
        return not self._queue.empty()

    def process(self, run_callback: RunCallback) -> Steps[None]:
        """Run requested rebalance callbacks and raise the first error (others are logged)."""
        first: BaseException | None = None
        while True:
            try:
                event = self._queue.get_nowait()
            except queue.Empty:
                break
            if isinstance(event, ErrorEvent):
                error: BaseException | None = event.error
            elif isinstance(event, AutoCommittedEvent):
                if self._on_auto_committed is not None:
                    self._on_auto_committed(event.offsets)
                continue
            else:
                error = yield from run_callback(event)
            if error is None or self._is_stale(error):
                continue
            if first is None:
                first = error
            else:
                log.warning("%s: further background error: %s", self._client_id, error)
        if first is not None:
            raise first

    def process_after_close(self) -> None:
        """At close: report the auto-commits still queued; drop the rest (the consumer is
        closed: no callback may run, no error matters any more)."""
        while True:
            try:
                event = self._queue.get_nowait()
            except queue.Empty:
                return
            if isinstance(event, AutoCommittedEvent) and self._on_auto_committed is not None:
                self._on_auto_committed(event.offsets)

    def _is_stale(self, error: BaseException) -> bool:
        """A NoOffsetForPartitionError is moot once the application gave its partitions a
        position (a seek that raced with the network thread's check)."""
        if not isinstance(error, NoOffsetForPartitionError):
            return False
        return not any(self._subscription.still_awaiting_reset(tp) for tp in error.partitions)
