"""Application events of the producer. [pure data: created on the application thread,
applied on the network thread by :class:`~kaflux.producer.event_processor.ProducerEventProcessor`]

``send()`` needs no event: it appends to the shared accumulator. Events carry what needs the
network thread: a topic's partitions (cluster metadata lives there) and every
transactional call, which the :class:`~kaflux.producer.transaction_manager.TransactionManager`
(a request manager, owned by the network thread) turns into requests. A transactional event's
future resolves to the manager's own future for the operation (or to None when the call is
complete at once, as ``begin_transaction``), which the application then waits on.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kaflux.structs import PartitionInfo

if TYPE_CHECKING:
    from kaflux.metrics.registry import Snapshot
    from kaflux.producer.transaction_manager import TransactionManager

__all__ = ["MetricsSnapshotEvent", "TopicPartitionsEvent", "TransactionalEvent"]


@dataclass(slots=True)
class TopicPartitionsEvent:
    """Learn the partitions of ``topic`` (completes ``future`` with them, sorted)."""

    topic: str
    deadline_ms: int
    future: Future[list[PartitionInfo]] = field(default_factory=Future)


@dataclass(slots=True)
class TransactionalEvent:
    """Run ``operation`` on the transaction manager; ``future`` gets what it returns."""

    operation: Callable[[TransactionManager], Future[None] | None]
    future: Future[Future[None] | None] = field(default_factory=Future)


@dataclass(slots=True)
class MetricsSnapshotEvent:
    """``metrics()``: the network thread's metrics, measured there; ``future`` gets
    ``{group: {name: value}}``."""

    future: Future[Snapshot] = field(default_factory=Future)
