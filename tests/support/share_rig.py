"""Drives a share consumer's real request managers against :class:`FakeShareGroup`. [test]

Not a test module. :class:`ShareRig` wires a ``ShareMembershipManager``, its
``ShareHeartbeatRequestManager`` and a ``ShareConsumeRequestManager`` (with a real
``ShareFetchBuffer``) as ``kaflux.ShareConsumer`` does (``components.build_share_group``: the
membership on the shared core, the heartbeat given the membership, the poll timer fed by the
membership), minus the network thread: :meth:`pump`
polls them at the rig's injected time, hands each request to the fake group and runs the
response handlers. Nothing reads a clock or opens a socket.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kaflux.config import ShareConsumerConfig
from kaflux.consumer.components import share_group_settings
from kaflux.consumer.membership.group import GroupSettings
from kaflux.consumer.positions import ResetStrategy
from kaflux.consumer.share.consume_request_manager import ShareConsumeRequestManager
from kaflux.consumer.share.fetch_buffer import ShareFetchBuffer
from kaflux.consumer.share.heartbeat import ShareHeartbeatRequestManager
from kaflux.consumer.share.membership import ShareMembershipManager, TopicNames
from kaflux.consumer.subscription_state import SubscriptionState
from kaflux.errors import KafkaConnectionError, KafkaError, UnsupportedVersionError
from kaflux.metrics.clients import ShareMetrics
from kaflux.metrics.registry import MetricsRegistry
from kaflux.metrics.stats import MetricConfig
from kaflux.network.backoff import RequestState
from kaflux.network.cluster import ClusterMetadata
from kaflux.network.metadata_manager import MetadataManager
from kaflux.network.requests import ClientRequest, ClientResponse, UnsentRequest
from kaflux.protocol.messages import share_acknowledge as sa
from kaflux.protocol.messages import share_fetch as sf
from kaflux.protocol.messages import share_group_heartbeat as hb
from kaflux.structs import TopicPartition

from support.fake_share_group import FakeShareGroup
from support.fakes import exact_backoff

COORDINATOR = 1000


class FakeCoordinator:
    """The coordinator lookup, already answered (``coordinator_id`` None: unknown)."""

    def __init__(self) -> None:
        self.coordinator_id: int | None = COORDINATOR
        self.marked_unknown: list[str] = []

    def mark_unknown(self, reason: str) -> None:
        self.marked_unknown.append(reason)
        self.coordinator_id = None


def share_settings(group_id: str) -> GroupSettings:
    """A share consumer's group settings, as ``kaflux.ShareConsumer`` derives them."""
    config = ShareConsumerConfig.from_dict({"bootstrap.servers": "127.0.0.1:9092", "group.id": group_id})
    return share_group_settings(config)


def share_membership(
    group_id: str,
    member_id: str,
    topics: TopicNames,
    *,
    coordinator: FakeCoordinator | None = None,
    request_metadata: Callable[[set[str]], None],
    on_fatal: Callable[[KafkaError], None],
) -> ShareMembershipManager:
    """A share membership on the shared core, with its own subscription and an idle metadata
    manager (the rig answers metadata requests itself)."""
    return ShareMembershipManager(
        share_settings(group_id),
        member_id,
        topics,
        coordinator=coordinator or FakeCoordinator(),
        subscription=SubscriptionState(ResetStrategy.LATEST),
        metadata=MetadataManager(ClusterMetadata([]), RequestState(exact_backoff()), max_age_ms=300_000),
        request_metadata=request_metadata,
        on_fatal=on_fatal,
    )


@dataclass
class ShareRig:
    group: FakeShareGroup
    member_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    now_ms: int = 0
    #: the highest version the "broker" serves for ShareFetch/ShareAcknowledge
    share_version: int = 1
    errors: list[KafkaError] = field(default_factory=list)
    acknowledged: list[tuple[dict[TopicPartition, set[int]], KafkaError | None]] = field(default_factory=list)
    metadata_requests: int = 0
    #: requests of this kind are failed with a lost connection instead of being answered
    cut: set[type] = field(default_factory=set)
    sent: list[Any] = field(default_factory=list)
    max_poll_records: int = 100
    acquire_mode: str = "batch_optimized"

    def __post_init__(self) -> None:
        self.coordinator = FakeCoordinator()
        self.buffer = ShareFetchBuffer()
        self.membership = share_membership(
            self.group.group_id,
            self.member_id,
            self.group,
            coordinator=self.coordinator,
            request_metadata=lambda topics: self._metadata(),
            on_fatal=self.errors.append,
        )
        #: the network thread's metrics, as ShareConsumer wires them
        self.metrics = MetricsRegistry(MetricConfig(samples=2, window_ms=30_000))
        share_metrics = ShareMetrics(self.metrics)
        self.heartbeat = ShareHeartbeatRequestManager(
            self.membership,
            self.coordinator,
            share_settings(self.group.group_id),
            exact_backoff(),
            on_heartbeat=share_metrics.heartbeat_sent,
        )
        self.membership.add_poll_listener(self.heartbeat.reset_poll_timer)
        self.consume = ShareConsumeRequestManager(
            self.membership,
            self.group,
            self.buffer,
            request_metadata=self._metadata,
            on_acknowledged=lambda acks, error: self.acknowledged.append(
                ({tp: a.offsets() for tp, a in acks.items() if a.offsets()}, error)
            ),
            on_error=self.errors.append,
            topic_ids=self.membership.topic_id,
            max_poll_records=self.max_poll_records,
            acquire_mode=self.acquire_mode,
            metrics=share_metrics,
        )

    def _metadata(self) -> None:
        self.metadata_requests += 1

    def advance(self, ms: int) -> None:
        self.now_ms += ms
        self.group.tick(self.now_ms)

    def pump(self, passes: int = 1) -> list[Any]:
        """Poll every manager and answer what they sent, ``passes`` times; the requests sent."""
        sent: list[Any] = []
        for _ in range(passes):
            unsent: list[UnsentRequest[Any]] = []
            for manager in (self.heartbeat, self.consume):
                unsent.extend(manager.poll(self.now_ms).unsent)
            for request in unsent:
                self._answer(request)
            sent.extend(r.request for r in unsent)
        self.sent.extend(sent)
        return sent

    def _answer(self, unsent: UnsentRequest[Any]) -> None:
        message = unsent.request
        node = unsent.node_id if unsent.node_id is not None else -1
        client_request = ClientRequest(node, message, unsent.handler, self.now_ms)
        version = min(self.share_version, unsent.max_version or 2)
        body: Any = None
        error: KafkaError | None = None
        if type(message) in self.cut:
            error = KafkaConnectionError("connection to the broker lost")
        elif isinstance(message, hb.ShareGroupHeartbeatRequest):
            body = self.group.heartbeat(message)
            version = 1
        elif isinstance(message, sf.ShareFetchRequest):
            try:
                body = self.group.share_fetch(node, message, version)
            except UnsupportedVersionError as exc:  # as the network client fails an unencodable request
                error = exc
        elif isinstance(message, sa.ShareAcknowledgeRequest):
            try:
                body = self.group.share_acknowledge(node, message, version)
            except UnsupportedVersionError as exc:  # as the network client fails an unencodable request
                error = exc
        else:  # pragma: no cover - the rig sends nothing else
            raise AssertionError(f"unexpected request {message!r}")
        unsent.handler(ClientResponse(client_request, body, error, version, self.now_ms))

    def join(self, topics: list[str]) -> None:
        """Subscribe and heartbeat until STABLE with an assignment."""
        self.membership.subscribe(topics)
        self.pump()
        assert self.membership.state.name == "STABLE", self.membership.state

    def take_all(
        self, *, settle: bool = True
    ) -> list[tuple[TopicPartition, list[tuple[int, int, int]], int]]:
        """Everything in the buffer: (partition, acquired ranges, node), released; with
        ``settle``, reported settled as an application that acknowledged it all would."""
        out = []
        seen: dict[int, int] = {}
        while (fetch := self.buffer.take()) is not None:
            out.append((fetch.tp, fetch.acquired, fetch.node))
            seen[fetch.node] = max(fetch.seq, seen.get(fetch.node, 0))
            self.buffer.release(fetch)
        if settle and seen:
            self.consume.acknowledge({}, settled=seen)
        return out
