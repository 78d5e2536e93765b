"""Group membership with the classic protocol, driven by the network thread. [bg, pure: takes now_ms]

Theory of operation. The member's life is the :class:`MemberState` machine. Nothing here
blocks or waits. :class:`ClassicMembershipManager` extends the protocol-neutral membership
core (states, callbacks, revoke-then-assign, leaving, fencing) with the classic decisions. Its
partner, :class:`~.classic_heartbeat.ClassicHeartbeatRequestManager`, sends JoinGroup,
SyncGroup, Heartbeat and LeaveGroup and reports their outcomes here, seeing this class only as
a :class:`~.contracts.ClassicMembershipContext`; ``consumer/components.py`` builds the two and
registers both with the network thread. The application events reach the membership.

* **Joining.** ``subscribe()`` asks for a join; the next ``poll()`` of the application (a
  PollEvent) starts it. With the eager protocol every owned partition is revoked first; with
  the cooperative one nothing is revoked before joining. The leader runs the assignor named
  by the JoinGroup response and sends everyone's assignment in its SyncGroup.
* **After SyncGroup.** Partitions the member owned but no longer gets are revoked (fetching
  stops at once, auto-commit commits them, then ``on_partitions_revoked`` runs on the
  application thread); the new ones are added and ``on_partitions_assigned`` runs. A
  cooperative member that revoked anything rejoins at once, so the partitions it gave up can
  be assigned in a second rebalance while all others keep being consumed.
* **Callbacks** are requested with a background event and the state machine waits in
  REVOKING_PARTITIONS / ASSIGNING_PARTITIONS / LOSING_PARTITIONS until the application
  thread acknowledges with an application event.
* **Liveness.** Heartbeats go out every ``heartbeat.interval.ms`` from this thread whether or
  not the application polls. If the application does not poll for ``max.poll.interval.ms``
  the member leaves the group (STALE); its partitions are reported lost and it rejoins on the
  next ``poll()``.
* **Racks (KIP-881).** The leader gives its assignor the racks of each partition's replicas
  (replica node ids to broker racks, from the metadata it holds); members send ``client.rack``
  in their subscriptions. When a member sent a rack, the leader rejoins if those racks change,
  as it does when a partition count changes.
* **Errors.** REBALANCE_IN_PROGRESS rejoins; UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION fence the
  member (partitions lost, rejoin); coordinator errors make the coordinator manager look it
  up again; fatal errors (authorization, fenced instance id, inconsistent protocol...) move to
  FATAL and are raised by ``poll()``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kaflux.consumer.assignors import (
    Assignment,
    GroupMember,
    PartitionAssignor,
    PartitionRacks,
    RebalanceProtocol,
    Subscription,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    partition_racks,
    rebalance_protocol_for,
)
from kaflux.consumer.member_state import MemberState
from kaflux.consumer.membership.contracts import JoinedMember
from kaflux.consumer.membership.core import MembershipCore
from kaflux.errors import InconsistentGroupProtocolError, KafkaError

if TYPE_CHECKING:
    from kaflux.consumer.commit_request_manager import CommitRequestManager
    from kaflux.consumer.coordinator_request_manager import CoordinatorRequestManager
    from kaflux.consumer.events import BackgroundEvent
    from kaflux.consumer.membership.group import GroupSettings
    from kaflux.consumer.subscription_state import SubscriptionState
    from kaflux.network.cluster import ClusterMetadata
    from kaflux.network.metadata_manager import MetadataManager
    from kaflux.structs import PartitionInfo

__all__ = ["LEADER_METADATA_WAIT_MS", "ClassicMembershipManager"]

log = logging.getLogger(__name__)

_M = MemberState
#: How long the leader waits for metadata of topics its members subscribe to.
LEADER_METADATA_WAIT_MS = 2000


@dataclass(frozen=True, slots=True)
class _Joined:
    """What the last successful JoinGroup said about the generation."""

    protocol_name: str | None = None
    leader_id: str = ""
    #: every member with its subscription, for the leader only
    members: tuple[JoinedMember, ...] = ()
    joined_at_ms: int = 0


class ClassicMembershipManager(MembershipCore):
    """One consumer's membership in one group, with the classic protocol."""

    def __init__(
        self,
        settings: GroupSettings,
        *,
        coordinator: CoordinatorRequestManager,
        subscription: SubscriptionState,
        cluster: ClusterMetadata,
        metadata: MetadataManager,
        commits: CommitRequestManager,
        assignors: list[PartitionAssignor],
        post_event: Callable[[BackgroundEvent], None],
    ) -> None:
        super().__init__(
            settings,
            coordinator=coordinator,
            subscription=subscription,
            metadata=metadata,
            commits=commits,
            post_event=post_event,
        )
        self._cluster = cluster
        self._assignors = {a.name: a for a in assignors}
        self._assignor_order = [a.name for a in assignors]
        self.protocol = rebalance_protocol_for(assignors)
        self._rack = settings.client_rack or None
        self._joined = _Joined()
        #: partition counts of the topics the leader assigned (a change makes it rejoin)
        self._assigned_counts: dict[str, int] = {}
        #: the replica racks the leader assigned with, when a member sent a rack (KIP-881: a
        #: change makes it rejoin); None when racks played no part
        self._assigned_racks: PartitionRacks | None = None

    # -- joining -----------------------------------------------------------------------------------

    def _start_join(self, now_ms: int) -> None:
        owned = set(self._subscription.assigned_partitions())
        if self.protocol is RebalanceProtocol.EAGER and owned and self.state is _M.STABLE:
            # Eager: everything is revoked before joining.
            self._join_requested = False
            self._cause = self._rejoin_reason or "joining"
            self._begin_revocation(owned, now_ms, then=lambda: self._to(_M.JOINING))
        else:
            super()._start_join(now_ms)

    def join_protocols(self) -> list[tuple[str, bytes]]:
        """The JoinGroup's protocols: each assignor's name and subscription metadata, in order
        of preference."""
        topics = tuple(sorted(self._subscription.subscription()))
        owned = tuple(sorted(self._subscription.assigned_partitions()))
        return [
            (
                name,
                encode_subscription(
                    Subscription(
                        topics,
                        self._assignors[name].subscription_user_data(topics, owned, self.generation),
                        owned,
                        self.generation,
                        self._rack,
                    )
                ),
            )
            for name in self._assignor_order
        ]

    def rejoin_with_member_id(self, member_id: str) -> None:
        """JoinGroup asked to join again at once with ``member_id`` (KIP-394's
        MEMBER_ID_REQUIRED gives one; UNKNOWN_MEMBER_ID takes it away)."""
        self.member_id = member_id

    def on_join_succeeded(
        self,
        *,
        member_id: str,
        generation: int,
        protocol_name: str | None,
        leader_id: str,
        members: list[JoinedMember],
        now_ms: int,
    ) -> None:
        """The member is in ``generation``; it waits for its assignment (SyncGroup)."""
        self.member_id = member_id
        self.generation = generation
        self._joined = _Joined(protocol_name, leader_id, tuple(members), now_ms)
        self._to(_M.AWAITING_SYNC)
        if self.is_leader:
            self._metadata.add_topics(self._members_topics())

    def restart_join(self) -> None:
        """SyncGroup failed but the member may join again (after the retry backoff)."""
        self._to(_M.JOINING)

    @property
    def is_leader(self) -> bool:
        """The member leads the generation: it computes everyone's assignment."""
        return bool(self._joined.leader_id) and self._joined.leader_id == self.member_id

    @property
    def protocol_name(self) -> str | None:
        """The assignor the coordinator chose for the generation."""
        return self._joined.protocol_name

    def _members_topics(self) -> set[str]:
        topics: set[str] = set()
        for _, _, metadata in self._joined.members:
            try:
                topics.update(decode_subscription(metadata).topics)
            except KafkaError:
                continue
        return topics

    # -- the leader ----------------------------------------------------------------------------------

    def leader_assignments(self, now_ms: int) -> list[tuple[str, bytes]] | None:
        """The leader's SyncGroup assignments (member id, encoded assignment); None while it
        waits (at most LEADER_METADATA_WAIT_MS) for metadata of its members' topics, or when
        the chosen assignor is not configured (the member fails)."""
        joined = self._joined
        assignor = self._assignors.get(joined.protocol_name or "")
        if assignor is None:
            self.fail(
                InconsistentGroupProtocolError(
                    f"the group chose assignor {joined.protocol_name!r}, which is not configured"
                )
            )
            return None
        members: dict[str, GroupMember] = {}
        versions: dict[str, int] = {}
        for member_id, instance_id, metadata in joined.members:
            members[member_id] = GroupMember(member_id, instance_id, decode_subscription(metadata))
            versions[member_id] = (
                int.from_bytes(metadata[:2], "big", signed=True) if len(metadata) >= 2 else 0
            )
        topics = {t for m in members.values() for t in m.subscription.topics}
        counts: dict[str, int] = {}
        infos: list[PartitionInfo] = []
        for topic in topics:
            partitions = self._cluster.partitions_for(topic)
            if partitions:
                counts[topic] = len(partitions)
                infos.extend(partitions)
        if len(counts) < len(topics) and now_ms - joined.joined_at_ms < LEADER_METADATA_WAIT_MS:
            self._metadata.add_topics(topics)
            self._metadata.request_update()
            return None
        # KIP-881: the racks of each partition's replicas, for rack-aware assignors.
        racks = partition_racks(infos, self._cluster.brokers)
        result = assignor.assign(counts, members, racks)
        self._assigned_counts = counts
        self._assigned_racks = racks if any(m.subscription.rack_id for m in members.values()) else None
        return [
            (
                member_id,
                encode_assignment(
                    result.get(member_id, Assignment(())), min(3, max(0, versions.get(member_id, 0)))
                ),
            )
            for member_id in members
        ]

    # -- the assignment ---------------------------------------------------------------------------------

    def on_sync_succeeded(self, assignment: Assignment, now_ms: int) -> None:
        """SyncGroup brought the member's assignment: revoke what moved, then assign."""
        assignor = self._assignors.get(self._joined.protocol_name or "")
        if assignor is not None:
            assignor.on_assignment(assignment, self.generation)
        self._publish_metadata()
        if set(self._subscription.assigned_partitions()) - set(assignment.partitions):
            # Cooperative: give up what moved, then rejoin so it can be reassigned.
            self.request_rejoin("partitions were revoked in a cooperative rebalance")
        self._reconcile(assignment.partitions, now_ms)

    def _on_assignment_applied(self) -> None:
        if self.is_leader:
            self._metadata.add_topics(self._members_topics())  # the leader watches every member's topics

    def _on_metadata(self, cluster: ClusterMetadata) -> None:
        super()._on_metadata(cluster)
        if self.is_leader and self.state is _M.STABLE:
            for topic in sorted(self._members_topics() | set(self._assigned_counts)):
                partitions = cluster.partitions_for(topic)
                if len(partitions or ()) != self._assigned_counts.get(topic, 0):
                    self.request_rejoin(f"the partition count of {topic!r} changed")
                    return
            if self._assigned_racks is not None:
                # As Java's leader (KAFKA-14867): new replica racks may allow a more local assignment.
                infos = [i for t in sorted(self._assigned_counts) for i in cluster.partitions_for(t) or ()]
                if partition_racks(infos, cluster.brokers) != self._assigned_racks:
                    self.request_rejoin("the racks of a partition's replicas changed")
