"""Applies application events on the network thread. [bg]

Each event goes to the request manager or shared state it targets, and the event's future is
completed, or chained to the manager's future. Blocking events are remembered until done so
that :meth:`ApplicationEventProcessor.expire` can fail them once their deadline passes (the
"reaper" of Java's design), and :meth:`fail_all` at close.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, assert_never

from kaflux.consumer.commit_request_manager import CommitRequestManager
from kaflux.consumer.events import (
    ApplicationEvent,
    AssignmentChangeEvent,
    CheckAndUpdatePositionsEvent,
    CommitEvent,
    CompletableEvent,
    EnforceRebalanceEvent,
    FetchCommittedOffsetsEvent,
    GroupStateEvent,
    LeaveGroupEvent,
    ListOffsetsEvent,
    MetricsSnapshotEvent,
    PollEvent,
    RebalanceCallbackCompletedEvent,
    SubscriptionChangeEvent,
    TopicMetadataEvent,
    complete,
    fail,
)
from kaflux.consumer.membership.core import MembershipCore
from kaflux.consumer.offsets_request_manager import OffsetsRequestManager
from kaflux.consumer.subscription_state import SubscriptionState
from kaflux.errors import InvalidGroupIdError, KafkaError, KafkaTimeoutError
from kaflux.network.metadata_manager import MetadataAnswer, MetadataManager

if TYPE_CHECKING:
    from kaflux.metrics.registry import MetricsRegistry


class ApplicationEventProcessor:
    """Dispatches application events to request managers."""

    def __init__(
        self,
        subscription: SubscriptionState,
        metadata: MetadataManager,
        commits: CommitRequestManager | None,
        offsets: OffsetsRequestManager,
        membership: MembershipCore | None,
        *,
        allow_auto_create_topics: bool,
        metrics: MetricsRegistry | None = None,
    ) -> None:
        """``metrics``: the network thread's registry, measured for MetricsSnapshotEvent."""
        self._subscription = subscription
        self._metadata = metadata
        self._commits = commits
        self._offsets = offsets
        self._membership = membership
        self._auto_create = allow_auto_create_topics
        self._metrics = metrics
        self._pending: list[CompletableEvent] = []

    def process(self, event: ApplicationEvent, now_ms: int) -> None:
        if self._membership is not None:
            self._membership.metrics.tick(now_ms)  # rebalances are timed by the last tick
        if isinstance(event, CompletableEvent):
            self._pending = [e for e in self._pending if not e.future.done()]
            self._pending.append(event)
        match event:
            case AssignmentChangeEvent():
                self._assign(event, now_ms)
            case PollEvent():
                if self._commits is not None:
                    self._commits.maybe_auto_commit(now_ms)
                if self._membership is not None:
                    self._membership.on_poll(event.now_ms)
            case SubscriptionChangeEvent():
                if self._membership is not None:
                    self._membership.on_subscription_change(event.has_listener)
            case LeaveGroupEvent():
                if self._membership is None:
                    complete(event.future, None)
                else:
                    self._membership.leave(
                        event.future, on_close=event.on_close, now_ms=now_ms, membership=event.membership
                    )
            case EnforceRebalanceEvent():
                if self._membership is not None:
                    self._membership.request_rejoin(event.reason)
            case RebalanceCallbackCompletedEvent():
                if self._membership is not None:
                    self._membership.on_callback_completed(event.callback_id, event.method, event.error)
            case CheckAndUpdatePositionsEvent():
                self._offsets.await_positions(event.partitions, event.deadline_ms, event.future)
            case CommitEvent():
                commits = self._require_group(event.future)
                if commits is not None:
                    offsets = (
                        event.offsets if event.offsets is not None else self._subscription.all_consumed()
                    )
                    commits.commit(
                        offsets, retry=event.sync, deadline_ms=event.deadline_ms, future=event.future
                    )
            case FetchCommittedOffsetsEvent():
                commits = self._require_group(event.future)
                if commits is not None:
                    commits.fetch_committed(frozenset(event.partitions), event.deadline_ms, event.future)
            case ListOffsetsEvent():
                self._offsets.list_offsets(event.timestamps, event.deadline_ms, event.future)
            case TopicMetadataEvent():
                self._topic_metadata(event)
            case GroupStateEvent():
                if self._membership is None:
                    fail(event.future, InvalidGroupIdError("group_state() needs a group.id in the config"))
                else:
                    complete(event.future, self._membership.group_state())
            case MetricsSnapshotEvent():
                complete(event.future, {} if self._metrics is None else self._metrics.snapshot(now_ms))
            case _:
                assert_never(event)

    def _assign(self, event: AssignmentChangeEvent, now_ms: int) -> None:
        if self._commits is not None and self._commits.auto_commit_enabled:
            # Commit what was consumed from the old assignment before it changes.
            self._commits.auto_commit_now(now_ms)
        self._subscription.assign_from_user(event.partitions)
        self._metadata.set_topics({tp.topic for tp in event.partitions})
        complete(event.future, None)

    def _require_group(self, future: Future[Any]) -> CommitRequestManager | None:
        if self._commits is None:
            fail(future, InvalidGroupIdError("committing and reading commits need a group.id in the config"))
        return self._commits

    def _topic_metadata(self, event: TopicMetadataEvent) -> None:
        future = event.future

        def on_answer(answer: MetadataAnswer | None, error: KafkaError | None) -> None:
            if error is not None:
                fail(future, error)
            else:
                complete(future, answer)

        topics = None if event.topic is None else [event.topic]
        self._metadata.request_topics(
            topics,
            on_answer,
            auto_create=self._auto_create and event.topic is not None,
            deadline_ms=event.deadline_ms,
        )

    def expire(self, now_ms: int) -> None:
        """Fail blocking events whose deadline passed (position waits and metadata requests
        first, by their managers, whose messages name what was asked and the cause)."""
        if self._membership is not None:
            self._membership.metrics.tick(now_ms)
        self._offsets.expire_waiters(now_ms)
        self._metadata.expire_requests(now_ms)
        for event in self._pending:
            if not event.future.done() and now_ms >= event.deadline_ms:
                fail(
                    event.future,
                    KafkaTimeoutError(f"{type(event).__name__} did not complete before its deadline"),
                )
        self._pending = [e for e in self._pending if not e.future.done()]

    def next_deadline_ms(self) -> int | None:
        """The nearest deadline of a blocking event still waiting, if any."""
        pending = [e.deadline_ms for e in self._pending if not e.future.done()]
        return min(pending) if pending else None

    def fail_all(self, error: Exception) -> None:
        """At close: fail everything still waiting."""
        for event in self._pending:
            fail(event.future, error)
        self._pending = []
        self._offsets.fail_all(error)
        if self._commits is not None:
            self._commits.fail_all(error)
