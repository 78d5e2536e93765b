"""Events between the consumer's two threads. [pure data]

*Application events* travel from the application thread to the network thread; the blocking
ones carry a ``concurrent.futures.Future`` and a deadline, and the network thread's event
processor fails them with :class:`~kaflux.errors.KafkaTimeoutError` once the deadline passes.
*Background events* travel the other way and are handled inside ``poll()``.
"""

from __future__ import annotations

from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kaflux.consumer.close_options import GroupMembershipOperation
from kaflux.structs import OffsetAndMetadata, TopicPartition

T = TypeVar("T")


def complete(future: Future[T], result: T) -> None:
    """Set a result unless the future is already done (expired or woken up)."""
    try:
        future.set_result(result)
    except InvalidStateError:
        pass


def fail(future: Future[Any], error: BaseException) -> None:
    """Set an exception unless the future is already done."""
    try:
        future.set_exception(error)
    except InvalidStateError:
        pass


# -- application events ---------------------------------------------------------------------


@dataclass(slots=True)
class CompletableEvent:
    """Base of events the application thread waits for."""

    deadline_ms: int
    future: Future[Any] = field(default_factory=Future, kw_only=True)


@dataclass(slots=True)
class AssignmentChangeEvent(CompletableEvent):
    """``assign()``: auto-commit the old positions, then set the manual assignment."""

    partitions: list[TopicPartition]


@dataclass(slots=True)
class PollEvent:
    """A ``poll()`` pass: drives the auto-commit timer (and, with a group, the poll timer)."""

    now_ms: int


@dataclass(slots=True)
class CheckAndUpdatePositionsEvent(CompletableEvent):
    """Resolve missing positions (committed offset, else ``auto.offset.reset``)."""

    partitions: list[TopicPartition] | None = None


@dataclass(slots=True)
class CommitEvent(CompletableEvent):
    """``commit_sync`` (retried until the deadline) or ``commit_async`` (never retried)."""

    offsets: dict[TopicPartition, OffsetAndMetadata] | None
    sync: bool


@dataclass(slots=True)
class FetchCommittedOffsetsEvent(CompletableEvent):
    """``committed()``: OffsetFetch for these partitions."""

    partitions: list[TopicPartition]


@dataclass(slots=True)
class ListOffsetsEvent(CompletableEvent):
    """``offsets_for_times`` / ``beginning_offsets`` / ``end_offsets``."""

    timestamps: dict[TopicPartition, int]
    require_timestamp: bool


@dataclass(slots=True)
class TopicMetadataEvent(CompletableEvent):
    """``partitions_for(topic)`` or, with ``topic=None``, ``list_topics()``."""

    topic: str | None


@dataclass(slots=True)
class SubscriptionChangeEvent:
    """``subscribe()``: the subscription changed; join (or rejoin) on the next poll."""

    has_listener: bool


@dataclass(slots=True)
class LeaveGroupEvent(CompletableEvent):
    """``unsubscribe()`` or ``close()``: revoke (callbacks), then leave the group.

    On close a static member (``group.instance.id``) stays in the group: its partitions are
    kept for it until ``session.timeout.ms`` passes. ``membership`` (close() only, KIP-1092)
    may say otherwise: LEAVE_GROUP leaves also a static member, REMAIN_IN_GROUP keeps also a
    dynamic one.
    """

    on_close: bool
    membership: GroupMembershipOperation = GroupMembershipOperation.DEFAULT


@dataclass(slots=True)
class GroupStateEvent(CompletableEvent):
    """``group_state()``: a snapshot of the membership, taken on the network thread."""


@dataclass(slots=True)
class MetricsSnapshotEvent(CompletableEvent):
    """``metrics()``: the network thread's metrics, measured there (its registry is its own);
    the future gets ``{group: {name: value}}``."""


@dataclass(slots=True)
class EnforceRebalanceEvent:
    """``enforce_rebalance()``: rejoin the group."""

    reason: str


@dataclass(slots=True)
class RebalanceCallbackCompletedEvent:
    """The application ran a rebalance listener method; the membership may proceed."""

    callback_id: int
    method: str
    error: BaseException | None


ApplicationEvent = (
    AssignmentChangeEvent
    | SubscriptionChangeEvent
    | LeaveGroupEvent
    | EnforceRebalanceEvent
    | RebalanceCallbackCompletedEvent
    | PollEvent
    | CheckAndUpdatePositionsEvent
    | CommitEvent
    | FetchCommittedOffsetsEvent
    | ListOffsetsEvent
    | TopicMetadataEvent
    | GroupStateEvent
    | MetricsSnapshotEvent
)


# -- background events ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ErrorEvent:
    """An error the network thread found that the application must see (raised by poll)."""

    error: BaseException


@dataclass(frozen=True, slots=True)
class RebalanceCallbackNeededEvent:
    """Run ``method`` ("on_partitions_revoked", "on_partitions_assigned" or
    "on_partitions_lost") of the rebalance listener with ``partitions``, then acknowledge with
    :class:`RebalanceCallbackCompletedEvent` carrying the same ``callback_id``."""

    callback_id: int
    method: str
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class AutoCommittedEvent:
    """Auto-commit committed ``offsets`` (posted only for a consumer with interceptors, whose
    ``on_commit`` runs on the application thread, as in Java)."""

    offsets: dict[TopicPartition, OffsetAndMetadata]


BackgroundEvent = ErrorEvent | RebalanceCallbackNeededEvent | AutoCommittedEvent
