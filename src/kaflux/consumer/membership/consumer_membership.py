"""Group membership with the KIP-848 consumer protocol. [bg, pure: takes now_ms]

Java's ``ConsumerMembershipManager``: the broker computes every member's assignment and hands
it out in ConsumerGroupHeartbeat responses; the member reconciles towards that *target* and
acknowledges it in its next heartbeat. It shares everything else with the classic member
through :class:`~kaflux.consumer.membership.core.MembershipCore` (the state machine, the
rebalance callbacks, revoke-then-assign, leaving, fencing) and runs on its own state table,
``CONSUMER_MEMBER_TRANSITIONS``:

* **Identity.** The member id is made here once (KIP-1082) and kept for the consumer's life,
  through fencing and rejoining. The *member epoch* plays the classic generation's part.
* **Joining.** ``subscribe()`` and the next ``poll()`` move to JOINING; the heartbeat manager
  sends epoch 0 with every field. A subscription change while in the group needs no rejoin:
  the next heartbeat carries the new topics.
* **Reconciling.** A new target (topic ids and partitions) moves the member to RECONCILING.
  Each pass resolves the ids to names through metadata; then the core revokes what left the
  target (fetching stops, auto-commit commits, ``on_partitions_revoked``) and assigns what is
  new (``on_partitions_assigned``, even for nothing new), and the member moves to
  ACKNOWLEDGING; the heartbeat sent then carries the assignment, and the member is STABLE, or
  RECONCILING again if a newer target came meanwhile. Topic ids that metadata cannot name yet
  do not hold up the rest: the resolvable part is reconciled and acknowledged, and the member
  stays RECONCILING (asking for metadata once per retry backoff) until it can take the rest.
* **Fencing** (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID): ``on_partitions_lost``, then JOINING at
  epoch 0 with the same member id. **Leaving** sends epoch -1 (a static member closing: -2,
  keeping its place until its session expires, unless it closes with LEAVE_GROUP; a dynamic
  member closing with REMAIN_IN_GROUP sends nothing, KIP-1092); the poll timer's leave ends
  STALE.
"""

from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from kaflux.consumer.close_options import GroupMembershipOperation
from kaflux.consumer.commit_request_manager import MemberInfo
from kaflux.consumer.member_state import CONSUMER_HEARTBEAT_STATES, CONSUMER_MEMBER_TRANSITIONS, MemberState
from kaflux.consumer.membership.core import Leave, MembershipCore
from kaflux.consumer.membership.group import GroupSettings
from kaflux.network.backoff import RequestState
from kaflux.network.requests import PollResult
from kaflux.protocol.messages.consumer_group_heartbeat import (
    Assignment,
    ConsumerGroupHeartbeatRequestTopicPartitions,
)
from kaflux.structs import TopicPartition

if TYPE_CHECKING:
    from kaflux.consumer.commit_request_manager import CommitRequestManager
    from kaflux.consumer.coordinator_request_manager import CoordinatorRequestManager
    from kaflux.consumer.events import BackgroundEvent
    from kaflux.consumer.subscription_state import SubscriptionState
    from kaflux.network.backoff import ExponentialBackoff
    from kaflux.network.cluster import ClusterMetadata
    from kaflux.network.metadata_manager import MetadataManager

log = logging.getLogger(__name__)

_M = MemberState
#: the epoch a member leaves with; a static member closing keeps its place with -2
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

#: A target assignment: topic id -> partitions.
Target = dict[uuid.UUID, frozenset[int]]


def new_member_id() -> str:
    """A member id made by the client (KIP-1082), in the form of Kafka's ``Uuid.toString()``:
    16 random bytes, URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")


class ConsumerMembershipManager(MembershipCore):
    """One consumer's membership in one group, with the KIP-848 consumer protocol."""

    TRANSITIONS = CONSUMER_MEMBER_TRANSITIONS
    KEEPS_MEMBER_ID = True
    PROTOCOL = "consumer"

    def __init__(
        self,
        settings: GroupSettings,
        *,
        coordinator: CoordinatorRequestManager,
        subscription: SubscriptionState,
        cluster: ClusterMetadata,
        metadata: MetadataManager,
        commits: CommitRequestManager,
        retry_backoff: ExponentialBackoff,
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
        self.member_id = new_member_id()
        self._cluster = cluster
        #: the coordinator's latest target; None until one arrives (after each join)
        self._target: Target | None = None
        #: bumped whenever the target's partitions change
        self._target_version = 0
        #: the target version in place (and to acknowledge); -1: none
        self._current_version = -1
        self._current: Target = {}
        self._reconciling_version = -1
        self._reconciling_target: Target = {}
        #: the subscription changed since the last heartbeat that carried it
        self._subscription_changed = True
        #: a join waits for the subscribed pattern to match a topic
        self._waiting_for_matches = False
        #: bumped on every (re)join and leave: responses to older heartbeats are dropped
        self.incarnation = 0
        #: the incarnation in which a joining heartbeat was sent: the coordinator may know the
        #: member from then on, even before it answers
        self._join_sent = -1
        #: names of assigned topic ids, for a topic that left the metadata while assigned
        self._topic_names: dict[uuid.UUID, str] = {}
        #: metadata is asked for unresolved topic ids at most once per retry backoff
        self._metadata_ask = RequestState(retry_backoff)

    # -- request manager: reconciling (registered before the heartbeat manager) ------------------

    def poll(self, now_ms: int) -> PollResult:
        """Reconcile towards the target on every pass; the heartbeat manager, polled next,
        acknowledges what is in place."""
        self._maybe_reconcile(now_ms)
        return PollResult()

    # -- what the heartbeat carries ---------------------------------------------------------------

    @property
    def epoch(self) -> int:
        """The member epoch to send: 0 until the coordinator gave one in this join."""
        return max(0, self.generation)

    def subscribed_topics(self) -> list[str]:
        """The subscribed topic names (a pattern's: those it matches in the metadata now)."""
        return sorted(self._subscription.subscription())

    def subscribed_regex(self) -> str | None:
        """The SubscriptionPattern the coordinator resolves (KIP-848), else None."""
        return self._subscription.re2j_pattern()

    def take_subscription_change(self) -> bool:
        """Whether the subscription changed since the last heartbeat that carried it."""
        changed, self._subscription_changed = self._subscription_changed, False
        return changed

    def owned_topic_partitions(self) -> list[ConsumerGroupHeartbeatRequestTopicPartitions]:
        """The assignment in place, as the heartbeat acknowledges it."""
        return [
            ConsumerGroupHeartbeatRequestTopicPartitions(topic_id=topic_id, partitions=sorted(partitions))
            for topic_id, partitions in sorted(self._current.items(), key=lambda item: str(item[0]))
        ]

    def leave_epoch(self) -> int:
        """-1, or -2 for a static member closing (it keeps its place until its session
        expires) unless it closes with LEAVE_GROUP (KIP-1092: then -1, it leaves for good)."""
        leave = self._leave
        if (
            self._instance_id is not None
            and leave is not None
            and leave.on_close
            and leave.membership is not GroupMembershipOperation.LEAVE_GROUP
        ):
            return LEAVE_GROUP_STATIC_MEMBER_EPOCH
        return LEAVE_GROUP_MEMBER_EPOCH

    def member_info(self) -> MemberInfo:
        """Who commits: the member epoch while it is valid. A subscribed member without one
        (joining, fenced, stale, leaving) cannot commit, as in Java."""
        leave = self._leave
        if self._in_generation() or (
            self.state is _M.PREPARE_LEAVING and leave is not None and leave.with_generation
        ):
            return MemberInfo(self.generation, self.member_id, self._instance_id)
        excluded = self.state is not _M.UNJOINED and self._is_group_subscription()
        return MemberInfo(-1, "", self._instance_id, excluded=excluded)

    # -- hooks of the core --------------------------------------------------------------------------

    def _in_generation(self) -> bool:
        return (
            self.generation > 0 and self.state in CONSUMER_HEARTBEAT_STATES and self.state is not _M.JOINING
        )

    def _has_joined(self) -> bool:
        # With a join in flight the coordinator may have added the member already: it is told
        # that the member leaves (as Java does from JOINING), else it would keep the member and
        # its partitions until the session expires.
        return self.generation > 0 or self._join_sent == self.incarnation

    def _tells_coordinator_on_leave(self, leave: Leave | None) -> bool:
        # A static member closing says so with epoch -2, whether it closes with DEFAULT or
        # REMAIN_IN_GROUP (as Java); only a dynamic member closing with REMAIN_IN_GROUP sends
        # nothing and stays in the group until its session expires.
        return not (
            self._instance_id is None
            and leave is not None
            and leave.on_close
            and leave.membership is GroupMembershipOperation.REMAIN_IN_GROUP
        )

    def request_rejoin(self, reason: str) -> None:
        """The subscription (or a pattern's matches) changed: a member in the group sends the
        new topics in its next heartbeat; one outside joins on the next poll."""
        self._subscription_changed = True
        super().request_rejoin(reason)

    def maybe_rejoin(self, now_ms: int) -> None:
        if self._join_requested and self.state in CONSUMER_HEARTBEAT_STATES:
            self._join_requested = False  # the heartbeat carries the change; no rejoin

    def _start_join(self, now_ms: int) -> None:
        if self._pattern_unmatched():
            # A pattern is matched on the client, against metadata: joining before it matched
            # anything would send an empty subscription (which librdkafka's mock aborts on, and
            # which gets a real member nothing until its next heartbeat). Join once it matches.
            self._waiting_for_matches = True
            self._metadata.request_update()
            return
        self._waiting_for_matches = False
        self._join_requested = False
        self._subscription_changed = True
        self._forget_assignment()
        self._to(_M.JOINING, self._rejoin_reason or "joining")

    def _pattern_unmatched(self) -> bool:
        return self._subscription.pattern() is not None and not self._subscription.subscription()

    def _on_metadata(self, cluster: ClusterMetadata) -> None:
        super()._on_metadata(cluster)
        if (
            self._waiting_for_matches
            and self._join_requested
            and self.state is _M.UNJOINED
            and self._is_group_subscription()
            and not self._pattern_unmatched()
        ):
            self._start_join(0)  # the poll that asked for the join has passed already

    def _lose_partitions(self, cause: str) -> None:
        self._forget_assignment()
        super()._lose_partitions(cause)

    def leave_on_poll_timeout(self) -> None:
        self.incarnation += 1
        super().leave_on_poll_timeout()

    def finish_leave(self) -> None:
        self._forget_assignment()
        super().finish_leave()

    def _forget_assignment(self) -> None:
        self.incarnation += 1
        self._target = None
        self._current = {}
        self._current_version = -1

    # -- heartbeat outcomes ---------------------------------------------------------------------------

    def on_heartbeat_success(self, epoch: int, assignment: Assignment | None, now_ms: int) -> None:
        """A heartbeat was answered without error: the epoch, and a new target if it carries one
        (``None`` means unchanged, never empty)."""
        if self.state is _M.PREPARE_LEAVING and self.generation > 0:
            # Still heartbeating while the leave's callbacks run: keep the epoch current (the
            # commit and the leave that follow use it), but take no new assignment.
            self.generation = epoch
            self._publish_metadata()
            return
        if self.state not in CONSUMER_HEARTBEAT_STATES:
            return  # leaving, fenced, stale or fatal: the answer changes nothing
        self.generation = epoch
        self._publish_metadata()
        if assignment is not None:
            target = {
                t.topic_id: frozenset(t.partitions) for t in assignment.topic_partitions if t.partitions
            }
            if target != self._target:
                self._target = target
                self._target_version += 1
        if self._needs_reconciling() and self.state in (_M.JOINING, _M.STABLE, _M.ACKNOWLEDGING):
            self._to(_M.RECONCILING, f"new target assignment from the coordinator at epoch {epoch}")

    def _needs_reconciling(self) -> bool:
        # A target only partly in place (topic ids not yet resolved) still needs reconciling.
        return self._target is not None and (
            self._target_version != self._current_version or self._current != self._target
        )

    def on_heartbeat_request_generated(self) -> None:
        """A heartbeat was built: a joining one means the coordinator may know the member from
        now on (even before it answers); one sent while ACKNOWLEDGING acknowledges the
        assignment in place."""
        if self.state is _M.JOINING:
            self._join_sent = self.incarnation
        elif self.state is _M.ACKNOWLEDGING:
            self._to(_M.RECONCILING if self._needs_reconciling() else _M.STABLE)

    # -- reconciling ---------------------------------------------------------------------------------

    def _maybe_reconcile(self, now_ms: int) -> None:
        """Reconcile towards the part of the target whose topic ids metadata resolves (as Java:
        a topic this member cannot resolve yet must not hold up the others); the rest follows
        when metadata names it, and the member stays RECONCILING until then."""
        if self.state is not _M.RECONCILING or self._target is None:
            return
        target = self._target
        ready: Target = {}
        resolved: list[TopicPartition] = []
        for topic_id, partitions in target.items():
            name = self._cluster.topic_name(topic_id) or self._topic_names.get(topic_id)
            if name is None:
                continue
            self._topic_names[topic_id] = name
            ready[topic_id] = partitions
            resolved.extend(TopicPartition(name, p) for p in sorted(partitions))
        if len(ready) < len(target):
            # The metadata of every subscribed topic carries its id: ask again (not on every pass).
            if self._metadata_ask.can_send(now_ms):
                self._metadata.request_update()
                self._metadata_ask.postpone(now_ms, self._metadata_ask.backoff.initial_ms)
            if ready == self._current and self._current_version >= 0:
                return  # what can be resolved is in place already: wait for the rest
        self._topic_names = {i: n for i, n in self._topic_names.items() if i in target}
        self._reconciling_version = self._target_version
        self._reconciling_target = ready
        log.debug("group %s member %s: reconciling towards %s", self.group_id, self.member_id, resolved)
        self._reconcile(resolved, now_ms)

    def _assignment_done(self) -> None:
        self._current = self._reconciling_target
        self._current_version = self._reconciling_version
        self._to(_M.ACKNOWLEDGING)
