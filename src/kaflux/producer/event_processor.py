"""Applies the producer's application events on its network thread. [bg]

A :class:`~kaflux.producer.events.TopicPartitionsEvent` waits for the topic in cluster
metadata (failed at its deadline, or at once by an error retrying will not cure); a
:class:`~kaflux.producer.events.TransactionalEvent` runs its operation on the
:class:`~kaflux.producer.transaction_manager.TransactionManager`; a metrics snapshot is measured
here, where the network thread's registry lives.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kaflux.errors import KafkaError, KafkaTimeoutError
from kaflux.network.factory import NetworkStack
from kaflux.producer.events import MetricsSnapshotEvent, TopicPartitionsEvent, TransactionalEvent
from kaflux.producer.transaction_manager import TransactionManager
from kaflux.timeouts import explain

if TYPE_CHECKING:
    from kaflux.metrics.registry import MetricsRegistry


class ProducerEventProcessor:
    """Resolves partition lookups from cluster metadata and runs transactional calls."""

    def __init__(
        self,
        network: NetworkStack,
        transaction_manager: TransactionManager | None,
        metrics: MetricsRegistry | None = None,
    ) -> None:
        """``metrics``: the network thread's registry, measured for MetricsSnapshotEvent."""
        self._metrics = metrics
        self._cluster = network.cluster
        self._metadata = network.metadata
        self._reachability = network.client.reachability
        self._tm = transaction_manager
        self._pending: list[TopicPartitionsEvent] = []
        network.metadata.add_error_listener(self._on_metadata_error)

    def _on_metadata_error(self, topic: str | None, error: KafkaError) -> None:
        """A failure retrying will not cure (a refused login; an unauthorized topic): the
        sends waiting for metadata fail with it now instead of at max.block.ms."""
        still: list[TopicPartitionsEvent] = []
        for event in self._pending:
            if topic is None or topic == event.topic:
                if not event.future.done():
                    event.future.set_exception(error)
            else:
                still.append(event)
        self._pending = still

    def process(self, event: object, now_ms: int) -> None:
        if isinstance(event, TopicPartitionsEvent):
            self._metadata.add_topics({event.topic})
            self._metadata.request_update()
            self._pending.append(event)
        elif isinstance(event, TransactionalEvent):
            if self._tm is None:  # pragma: no cover - the producer checks first
                raise KafkaError("the producer has no transaction manager")
            # A KafkaError raised here (a call in the wrong state) reaches the caller through
            # the event's future (NetworkThread._drain_events).
            event.future.set_result(event.operation(self._tm))
        elif isinstance(event, MetricsSnapshotEvent):
            event.future.set_result({} if self._metrics is None else self._metrics.snapshot(now_ms))
        else:  # pragma: no cover - a programming error
            raise TypeError(f"unknown producer event {event!r}")

    def expire(self, now_ms: int) -> None:
        still: list[TopicPartitionsEvent] = []
        for event in self._pending:
            partitions = self._cluster.partitions_for(event.topic)
            if partitions:
                event.future.set_result(partitions)
            elif now_ms >= event.deadline_ms:
                unreachable = self._reachability.unreachable()
                if unreachable is not None:
                    message = explain(
                        f"no metadata for topic {event.topic!r} within max.block.ms", unreachable
                    )
                else:
                    cause = self._metadata.topic_error(event.topic)
                    detail = f" (last metadata error: {cause})" if cause is not None else ""
                    message = (
                        f"topic {event.topic!r} was not found in cluster metadata within "
                        f"max.block.ms{detail}; create it first or check the name"
                    )
                event.future.set_exception(KafkaTimeoutError(message))
            else:
                still.append(event)
        self._pending = still

    def next_deadline_ms(self) -> int | None:
        return min((e.deadline_ms for e in self._pending), default=None)

    def fail_all(self, error: Exception) -> None:
        for event in self._pending:
            if not event.future.done():
                event.future.set_exception(error)
        self._pending = []
        if self._tm is not None and isinstance(error, KafkaError):
            self._tm.close(error)
