"""Events between a share consumer's two threads, and the processor that applies them.
[bg: :class:`ShareEventProcessor`; the events are plain data]

Application events carry what the application thread decided (a subscription, the
acknowledgements of the records it was given) and, when it waits, a future. The processor
applies them to the share membership and the share-consume manager on the network thread,
remembers the blocking ones, fails them at their deadline (:meth:`ShareEventProcessor.expire`)
and at close (:meth:`ShareEventProcessor.fail_all`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kaflux.consumer.events import CompletableEvent, complete, fail
from kaflux.consumer.member_state import MemberState
from kaflux.consumer.share.acknowledgements import Acknowledgements
from kaflux.consumer.share.consume_request_manager import ShareCommit, ShareConsumeRequestManager
from kaflux.errors import KafkaTimeoutError
from kaflux.metrics.clients import SHARE_COORDINATOR_METRICS
from kaflux.structs import TopicPartition

if TYPE_CHECKING:
    from kaflux.consumer.share.heartbeat import ShareHeartbeatRequestManager
    from kaflux.consumer.share.membership import ShareMembershipManager
    from kaflux.metrics.registry import MetricsRegistry
    from kaflux.network.metadata_manager import MetadataManager

AcksByNode = dict[int, dict[TopicPartition, Acknowledgements]]


@dataclass(slots=True)
class ShareSubscribeEvent(CompletableEvent):
    """``subscribe()``: keep these topics' metadata fresh and join (or update) the group."""

    topics: frozenset[str]


@dataclass(slots=True)
class ShareAcknowledgeEvent:
    """Acknowledgements taken at ``poll()``/``commit_*()``; with a commit, sent at once."""

    acks: AcksByNode
    commit: ShareCommit | None = None
    #: per broker, the last delivery the application has seen and fully acknowledged
    settled: dict[int, int] | None = None


@dataclass(slots=True)
class ShareCloseSessionsEvent:
    """``close()``: send the last acknowledgements and close every share session (in one event,
    so that no fetch slips in between to acquire records only to release them)."""

    commit: ShareCommit
    acks: AcksByNode


@dataclass(slots=True)
class ShareLeaveEvent(CompletableEvent):
    """``unsubscribe()``/``close()``: leave the group (heartbeat with epoch -1)."""


@dataclass(slots=True)
class ShareGroupStateEvent(CompletableEvent):
    """``group_state()``."""


@dataclass(slots=True)
class ShareMetricsEvent(CompletableEvent):
    """``metrics()``: the network thread's counters."""


class ShareEventProcessor:
    """Applies a share consumer's application events on its network thread."""

    def __init__(
        self,
        membership: ShareMembershipManager,
        consume: ShareConsumeRequestManager,
        heartbeat: ShareHeartbeatRequestManager,
        metadata: MetadataManager,
        metrics: MetricsRegistry | None = None,
    ) -> None:
        self._membership = membership
        self._consume = consume
        self._heartbeat = heartbeat
        self._metadata = metadata
        #: the network thread's metrics, which metrics() measures
        self._metrics_registry = metrics
        self._pending: list[CompletableEvent] = []
        self._leaving: list[ShareLeaveEvent] = []

    def process(self, event: Any, now_ms: int) -> None:
        if isinstance(event, CompletableEvent):
            self._pending = [e for e in self._pending if not e.future.done()]
            self._pending.append(event)
        membership = self._membership
        if isinstance(event, ShareSubscribeEvent):
            self._metadata.set_topics(set(event.topics))
            if membership.state in (MemberState.LEAVING, MemberState.PREPARE_LEAVING):
                membership.finish_leave()
            membership.subscribe(event.topics)
            complete(event.future, None)
        elif isinstance(event, ShareAcknowledgeEvent):
            self._consume.acknowledge(event.acks, event.commit, event.settled)
        elif isinstance(event, ShareCloseSessionsEvent):
            self._consume.acknowledge(event.acks)
            self._consume.close(event.commit)
        elif isinstance(event, ShareLeaveEvent):
            if membership.prepare_leaving():
                membership.leave()
            self._metadata.set_topics(set())
            self._leaving.append(event)
            self._check_left()
        elif isinstance(event, ShareGroupStateEvent):
            complete(event.future, membership.group_state())
        elif isinstance(event, ShareMetricsEvent):
            complete(event.future, self._metrics(now_ms))
        else:
            raise TypeError(f"unknown share consumer event {type(event).__name__}")

    def _metrics(self, now_ms: int) -> dict[str, dict[str, float]]:
        snapshot = {} if self._metrics_registry is None else self._metrics_registry.snapshot(now_ms)
        out = {group: dict(values) for group, values in snapshot.items()}
        coordinator = out.setdefault(SHARE_COORDINATOR_METRICS, {})
        coordinator["assigned-partitions"] = float(len(self._membership.assigned_partitions()))
        return out

    def _check_left(self) -> None:
        if not self._leaving:
            return
        if self._membership.state in (MemberState.UNJOINED, MemberState.FATAL):
            for event in self._leaving:
                complete(event.future, None)
            self._leaving = []

    def expire(self, now_ms: int) -> None:
        self._check_left()
        self._membership.refresh()
        still: list[CompletableEvent] = []
        for event in self._pending:
            if event.future.done():
                continue
            if now_ms >= event.deadline_ms:
                fail(event.future, KafkaTimeoutError(f"{type(event).__name__} did not complete in time"))
            else:
                still.append(event)
        self._pending = still

    def next_deadline_ms(self) -> int | None:
        deadlines = [e.deadline_ms for e in self._pending if not e.future.done()]
        return min(deadlines) if deadlines else None

    def fail_all(self, error: Exception) -> None:
        for event in self._pending:
            fail(event.future, error)
        self._pending = []
        self._leaving = []
