"""Builds a consumer's background components from its config. [app: at construction]

:func:`build_consumer_components` is the one place that wires the request managers the
consumer's network thread runs (Java's ``RequestManagers``) and the event processor that feeds
them: the coordinator, commit, membership and heartbeat managers (with a ``group.id`` only),
the offsets and fetch managers, and the metadata manager of the network stack, in the order the
network thread polls them. A group protocol is a membership and its heartbeat request manager,
built apart by the protocol's builder in :data:`GROUP_PROTOCOLS` (the heartbeat is given the
membership; the membership never sees the heartbeat) and registered side by side.
:func:`build_share_group` does the same for a share consumer's membership and heartbeat
(KIP-932), which ``kaflux.ShareConsumer`` registers with its own managers.
``kaflux.Consumer`` calls it, and so do the test fakes that drive real managers without a
network thread (``tests/fake_group_coordinator.py``).

Given the network thread's metrics registry, it also wires what records into it: the fetch
manager (:class:`~kaflux.metrics.clients.FetchMetrics`), the commit manager and the membership
(:class:`~kaflux.metrics.clients.CoordinatorMetrics`), and the event processor, which measures
the registry for ``Consumer.metrics()`` (the consumer wires its network client).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from kaflux.config import ConsumerConfig, ShareConsumerConfig
from kaflux.consumer.assignors import assignor_for_name
from kaflux.consumer.commit_request_manager import CommitRequestManager, MemberInfo
from kaflux.consumer.coordinator_request_manager import CoordinatorRequestManager
from kaflux.consumer.event_processor import ApplicationEventProcessor
from kaflux.consumer.events import BackgroundEvent
from kaflux.consumer.fetch_buffer import FetchBuffer
from kaflux.consumer.fetch_request_manager import FetchRequestManager
from kaflux.consumer.membership.classic_heartbeat import ClassicHeartbeatRequestManager
from kaflux.consumer.membership.classic_membership import ClassicMembershipManager
from kaflux.consumer.membership.consumer_heartbeat import ConsumerHeartbeatRequestManager
from kaflux.consumer.membership.consumer_membership import ConsumerMembershipManager
from kaflux.consumer.membership.contracts import GroupHeartbeat
from kaflux.consumer.membership.core import MembershipCore
from kaflux.consumer.membership.group import GroupSettings
from kaflux.consumer.offsets_request_manager import OffsetsRequestManager
from kaflux.consumer.positions import ResetStrategy
from kaflux.consumer.share.heartbeat import ShareHeartbeatRequestManager
from kaflux.consumer.share.membership import ShareMembershipManager
from kaflux.consumer.subscription_state import SubscriptionState
from kaflux.errors import KafkaError
from kaflux.metrics.clients import CoordinatorMetrics, FetchMetrics
from kaflux.metrics.registry import MetricsRegistry
from kaflux.network.backoff import ExponentialBackoff, RequestState
from kaflux.network.cluster import ClusterMetadata
from kaflux.network.metadata_manager import MetadataManager
from kaflux.network.requests import RequestManager
from kaflux.structs import OffsetAndMetadata, TopicPartition


class NetworkParts(Protocol):
    """What the components need of a network stack (``kaflux.network.factory.NetworkStack``)."""

    @property
    def cluster(self) -> ClusterMetadata: ...

    @property
    def metadata(self) -> MetadataManager: ...

    @property
    def retry_backoff(self) -> ExponentialBackoff: ...


@dataclass(frozen=True, slots=True)
class ConsumerComponents:
    """A consumer's request managers and event processor, ready for its network thread."""

    metadata: MetadataManager
    #: the group's managers, None without a group.id
    coordinator: CoordinatorRequestManager | None
    commits: CommitRequestManager | None
    membership: MembershipCore | None
    #: the membership's heartbeat request manager, None without a group.id
    heartbeat: GroupHeartbeat | None
    offsets: OffsetsRequestManager
    fetcher: FetchRequestManager
    processor: ApplicationEventProcessor

    @property
    def managers(self) -> list[RequestManager]:
        """Every request manager, in the order the network thread polls them (the membership
        before its heartbeat: what it reconciles in a pass is acknowledged in the same pass)."""
        group: list[RequestManager] = [
            m for m in (self.coordinator, self.commits, self.membership, self.heartbeat) if m is not None
        ]
        return [self.metadata, *group, self.offsets, self.fetcher]


def group_settings(config: ConsumerConfig) -> GroupSettings | None:
    """The settings of the consumer's group membership; None without a group.id."""
    if config.group_id is None:
        return None
    return GroupSettings(
        group_id=config.group_id,
        group_instance_id=config.group_instance_id,
        auto_commit=config.auto_commit,
        exclude_internal_topics=config.exclude_internal_topics,
        rebalance_timeout_ms=config.max_poll_interval_ms,
        session_timeout_ms=config.session_timeout_ms,
        heartbeat_interval_ms=config.heartbeat_interval_ms,
        request_timeout_ms=config.request_timeout_ms,
        client_rack=config.client_rack,
    )


@dataclass(frozen=True, slots=True)
class GroupParts:
    """What a group protocol's builder is given: the consumer's parts its membership uses."""

    config: ConsumerConfig
    settings: GroupSettings
    network: NetworkParts
    coordinator: CoordinatorRequestManager
    subscription: SubscriptionState
    commits: CommitRequestManager
    post_event: Callable[[BackgroundEvent], None]


def _classic_group(parts: GroupParts) -> tuple[MembershipCore, GroupHeartbeat]:
    membership = ClassicMembershipManager(
        parts.settings,
        coordinator=parts.coordinator,
        subscription=parts.subscription,
        cluster=parts.network.cluster,
        metadata=parts.network.metadata,
        commits=parts.commits,
        assignors=[assignor_for_name(name) for name in parts.config.partition_assignment_strategy],
        post_event=parts.post_event,
    )
    heartbeat = ClassicHeartbeatRequestManager(
        membership, parts.coordinator, parts.settings, parts.network.retry_backoff
    )
    return membership, heartbeat


def _consumer_group(parts: GroupParts) -> tuple[MembershipCore, GroupHeartbeat]:
    membership = ConsumerMembershipManager(
        parts.settings,
        coordinator=parts.coordinator,
        subscription=parts.subscription,
        cluster=parts.network.cluster,
        metadata=parts.network.metadata,
        commits=parts.commits,
        retry_backoff=parts.network.retry_backoff,
        post_event=parts.post_event,
    )
    heartbeat = ConsumerHeartbeatRequestManager(
        membership,
        parts.coordinator,
        parts.settings,
        parts.network.retry_backoff,
        parts.config.group_remote_assignor,
    )
    return membership, heartbeat


#: ``group.protocol`` -> the builder of its membership and heartbeat request manager
GROUP_PROTOCOLS: dict[str, Callable[[GroupParts], tuple[MembershipCore, GroupHeartbeat]]] = {
    "classic": _classic_group,
    "consumer": _consumer_group,
}


#: a share member's poll timer never runs (its heartbeat's POLL_TIMER_STATES is empty); the
#: base still sizes one, with Java's ``max.poll.interval.ms`` default
_SHARE_POLL_INTERVAL_MS = 300_000


def share_group_settings(config: ShareConsumerConfig) -> GroupSettings:
    """A share consumer's group settings: no static membership, no commits, no poll timer; the
    coordinator sets the session and the heartbeat interval."""
    return GroupSettings(
        group_id=config.group_id,
        group_instance_id=None,
        auto_commit=False,
        exclude_internal_topics=True,
        rebalance_timeout_ms=_SHARE_POLL_INTERVAL_MS,
        session_timeout_ms=0,
        heartbeat_interval_ms=0,
        request_timeout_ms=config.request_timeout_ms,
        client_rack=config.client_rack,
    )


@dataclass(frozen=True, slots=True)
class ShareGroupParts:
    """What the share group builder is given: the share consumer's parts its membership uses."""

    config: ShareConsumerConfig
    #: generated by the client (KIP-1082) and kept for the member's life
    member_id: str
    network: NetworkParts
    coordinator: CoordinatorRequestManager
    #: fatal group errors, for the application
    on_fatal: Callable[[KafkaError], None]
    #: called with ``now_ms`` for each heartbeat sent (the share consumer's metrics)
    on_heartbeat: Callable[[int], None] | None = None


def build_share_group(parts: ShareGroupParts) -> tuple[ShareMembershipManager, ShareHeartbeatRequestManager]:
    """A share consumer's membership and its heartbeat request manager, built apart (the
    heartbeat is given the membership), the heartbeat's poll timer fed by the membership, as
    :func:`build_consumer_components` does for the other protocols. The share consumer registers
    the membership, then the heartbeat, with its network thread."""
    settings = share_group_settings(parts.config)
    network = parts.network
    membership = ShareMembershipManager(
        settings,
        parts.member_id,
        network.cluster,
        coordinator=parts.coordinator,
        subscription=SubscriptionState(ResetStrategy.LATEST),  # the network thread's own
        metadata=network.metadata,
        request_metadata=lambda topics: network.metadata.request_update(),
        on_fatal=parts.on_fatal,
    )
    heartbeat = ShareHeartbeatRequestManager(
        membership, parts.coordinator, settings, network.retry_backoff, on_heartbeat=parts.on_heartbeat
    )
    membership.add_poll_listener(heartbeat.reset_poll_timer)
    return membership, heartbeat


def build_consumer_components(
    config: ConsumerConfig,
    network: NetworkParts,
    subscription: SubscriptionState,
    fetch_buffer: FetchBuffer,
    *,
    post_event: Callable[[BackgroundEvent], None],
    on_error: Callable[[KafkaError], None],
    metrics: MetricsRegistry | None = None,
    on_auto_committed: Callable[[dict[TopicPartition, OffsetAndMetadata]], None] | None = None,
) -> ConsumerComponents:
    """Wire the background components of a consumer configured by ``config``.

    ``subscription`` and ``fetch_buffer`` are the objects shared with the application thread.
    The membership talks to the application through ``post_event`` (rebalance callbacks to run,
    its fatal errors); the other managers report errors the application must see to
    ``on_error`` (the consumer turns them into ErrorEvents). ``metrics``: the network thread's
    registry (None: nothing is recorded).
    """
    read_committed = config.isolation_level == "read_committed"
    backoff = network.retry_backoff
    settings = group_settings(config)
    coordinator_metrics: CoordinatorMetrics | None = None
    if metrics is not None and settings is not None:
        coordinator_metrics = CoordinatorMetrics(metrics, lambda: len(subscription.assigned_partitions()))
    coordinator: CoordinatorRequestManager | None = None
    commits: CommitRequestManager | None = None
    membership: MembershipCore | None = None
    heartbeat: GroupHeartbeat | None = None

    def member_info() -> MemberInfo:
        """Who commits: the membership's view (no membership: no generation)."""
        return membership.member_info() if membership is not None else MemberInfo()

    if settings is not None:
        coordinator = CoordinatorRequestManager(
            settings.group_id, RequestState(backoff), network.cluster, on_error
        )
        commits = CommitRequestManager(
            settings.group_id,
            coordinator,
            subscription,
            retry_backoff=backoff,
            auto_commit_interval_ms=config.auto_commit_interval_ms if config.auto_commit else None,
            require_stable=read_committed,
            member_info=member_info,
            consumer_protocol=config.group_protocol == "consumer",
            metrics=coordinator_metrics,
            on_auto_committed=on_auto_committed,
        )
        build_group = GROUP_PROTOCOLS[config.group_protocol]
        membership, heartbeat = build_group(
            GroupParts(config, settings, network, coordinator, subscription, commits, post_event)
        )
        membership.add_poll_listener(heartbeat.reset_poll_timer)
        if coordinator_metrics is not None:
            membership.metrics = coordinator_metrics
    offsets = OffsetsRequestManager(
        subscription,
        network.cluster,
        network.metadata,
        commits,
        read_committed=read_committed,
        retry_backoff=backoff,
        default_api_timeout_ms=config.default_api_timeout_ms,
        on_error=on_error,
        wall_clock_ms=lambda: int(time.time() * 1000),
    )
    fetcher = FetchRequestManager(
        subscription,
        network.cluster,
        network.metadata,
        fetch_buffer,
        fetch_min_bytes=config.fetch_min_bytes,
        fetch_max_bytes=config.fetch_max_bytes,
        fetch_max_wait_ms=config.fetch_max_wait_ms,
        max_partition_fetch_bytes=config.max_partition_fetch_bytes,
        buffer_max_bytes=config.fetch_buffer_max_bytes,
        read_committed=read_committed,
        check_crcs=config.check_crcs,
        client_rack=config.client_rack,
        retry_backoff=backoff,
        use_sessions=config.enable_fetch_sessions,
        metadata_max_age_ms=config.metadata_max_age_ms,
        metrics=None if metrics is None else FetchMetrics(metrics),
        on_error=on_error,
    )
    processor = ApplicationEventProcessor(
        subscription,
        network.metadata,
        commits,
        offsets,
        membership,
        allow_auto_create_topics=config.allow_auto_create_topics,
        metrics=metrics,
    )
    return ConsumerComponents(
        network.metadata, coordinator, commits, membership, heartbeat, offsets, fetcher, processor
    )
