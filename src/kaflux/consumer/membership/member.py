"""Who a group member is and which state it is in. [bg, pure: takes now_ms]

The first half of Java's ``AbstractMembershipManager``, shared by both group protocols: the
member's identity (member id, generation or epoch, static instance id), its
:class:`MemberState` machine with every change logged at INFO with its reason and counted in the
rebalance metrics, what it tells others (``group_state()``, the commit identity, the group
metadata for transactions), and which topics its subscription needs from metadata. What the
member *does* (join, reconcile, lose its partitions, leave) is in :mod:`.core`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from kaflux.consumer.close_options import GroupMembershipOperation
from kaflux.consumer.commit_request_manager import MemberInfo
from kaflux.consumer.events import BackgroundEvent
from kaflux.consumer.member_state import (
    HEARTBEAT_STATES,
    MEMBER_TRANSITIONS,
    MemberState,
    new_member_state_machine,
)
from kaflux.consumer.membership.callbacks import (
    RebalanceCallbacks,
)
from kaflux.consumer.membership.group import GroupMetadata, GroupSettings, GroupState
from kaflux.consumer.positions import SubscriptionType
from kaflux.errors import IllegalStateError
from kaflux.metrics.clients import CoordinatorMetrics
from kaflux.metrics.registry import MetricsRegistry
from kaflux.network.requests import PollResult, RequestManager
from kaflux.structs import OffsetAndMetadata, TopicPartition

if TYPE_CHECKING:
    from kaflux.consumer.commit_request_manager import CommitRequestManager
    from kaflux.consumer.membership.contracts import CoordinatorLookup
    from kaflux.consumer.subscription_state import SubscriptionState
    from kaflux.network.cluster import ClusterMetadata
    from kaflux.network.metadata_manager import MetadataManager

log = logging.getLogger(__name__)

_M = MemberState
#: states in which a fencing error changes nothing: the partitions are being given up already
#: subscriptions that make the consumer a group member (not a manual assignment)
_GROUP_SUBSCRIPTIONS = frozenset(
    {SubscriptionType.AUTO_TOPICS, SubscriptionType.AUTO_PATTERN, SubscriptionType.AUTO_PATTERN_RE2J}
)
#: rebalance metrics: a rebalance starts when the member enters one of these states (as Java:
#: the classic protocol's join, KIP-848's reconciliation), ends when it reaches an assignment
#: (KIP-848: acknowledging it), fails when the member is fenced, fails fatally or misses the
#: poll timeout, and is abandoned (not counted) when the member leaves
_REBALANCE_STARTS = {"classic": frozenset({_M.JOINING}), "consumer": frozenset({_M.RECONCILING})}
_REBALANCE_ENDS = frozenset({_M.STABLE, _M.ACKNOWLEDGING})
_REBALANCE_FAILS = frozenset({_M.FATAL, _M.STALE, _M.LOSING_PARTITIONS})
_REBALANCE_ABANDONS = frozenset({_M.UNJOINED, _M.PREPARE_LEAVING})


@dataclass(slots=True)
class Leave:
    """A leave under way."""

    #: completed once the member left; None for the poll timer's leave (nobody waits for it)
    future: Future[None] | None
    #: close(): a static member keeps its place in the group (unless ``membership`` says otherwise)
    on_close: bool = False
    #: close(): what to do about the membership (KIP-1092); unsubscribe() always leaves
    membership: GroupMembershipOperation = GroupMembershipOperation.DEFAULT
    #: the member held a valid generation when it started leaving (its commits still count)
    with_generation: bool = False
    #: the poll timer's leave: end STALE (and rejoin on the next poll), not UNJOINED
    stale: bool = False


class GroupMembership(RequestManager):
    """A consumer's identity and state in one group, whatever the protocol; the base of
    :class:`~.core.MembershipCore`. A request manager that sends nothing: its protocol's
    heartbeat request manager, registered next to it, sends the requests (a membership may
    still do its own work on each pass, as KIP-848's reconciliation). ``commits`` is None for a
    protocol that commits no offsets (share groups), which then cannot auto-commit."""

    #: the protocol's state table (the classic one unless a subclass says otherwise)
    TRANSITIONS: ClassVar[dict[MemberState, frozenset[MemberState]]] = MEMBER_TRANSITIONS
    #: KIP-848 members keep their client-made id for life; a classic member that left (but a
    #: static one closing) rejoins as a new member
    KEEPS_MEMBER_ID: ClassVar[bool] = False
    #: ``group.protocol``, as ``group_state()`` reports it
    PROTOCOL: ClassVar[str] = "classic"

    def __init__(
        self,
        settings: GroupSettings,
        *,
        coordinator: CoordinatorLookup,
        subscription: SubscriptionState,
        metadata: MetadataManager,
        commits: CommitRequestManager | None,
        post_event: Callable[[BackgroundEvent], None],
    ) -> None:
        if settings.auto_commit and commits is None:
            raise IllegalStateError(
                f"group {settings.group_id!r}: auto-commit needs a commit request manager; "
                "a protocol without offset commits must set auto_commit=False"
            )
        self.group_id = settings.group_id
        self._instance_id = settings.group_instance_id
        self._auto_commit = settings.auto_commit
        self._exclude_internal = settings.exclude_internal_topics
        #: ``max.poll.interval.ms``, also the rebalance timeout
        self._rebalance_timeout_ms = settings.rebalance_timeout_ms
        self._coordinator = coordinator
        self._subscription = subscription
        self._metadata = metadata
        self._commits = commits
        self._post_event = post_event
        self._machine = new_member_state_machine(self.group_id, self.TRANSITIONS)
        self.member_id = ""
        self.generation = -1
        self.group_metadata = GroupMetadata(self.group_id, group_instance_id=self._instance_id)
        self.callbacks = RebalanceCallbacks(self.group_id, post_event)
        self._join_requested = False
        self._rejoin_reason = ""
        self._revoking: set[TopicPartition] = set()
        self._after_revocation: Callable[[], None] | None = None
        self._commit_future: Future[dict[TopicPartition, OffsetAndMetadata]] | None = None
        self._leave: Leave | None = None
        #: why the current rebalance or leave started (logged with every state change)
        self._cause = "not joined yet"
        #: consumer-coordinator-metrics (the consumer gives its network thread's registry)
        self.metrics = CoordinatorMetrics(MetricsRegistry())
        #: told of every poll() of the application (the heartbeat's poll timer)
        self._poll_listeners: list[Callable[[int], None]] = []
        metadata.add_listener(self._on_metadata)

    # -- state -----------------------------------------------------------------------------------

    @property
    def state(self) -> MemberState:
        """The member's current state."""
        return self._machine.state

    @property
    def instance_id(self) -> str | None:
        """``group.instance.id``: a static member's id (None for a dynamic member)."""
        return self._instance_id

    @property
    def join_requested(self) -> bool:
        """A (re)join waits for its turn (the next poll, or the end of the current rebalance)."""
        return self._join_requested

    def _to(self, target: MemberState, cause: str | None = None) -> None:
        """Move to ``target``; ``cause`` says why a rebalance or leave started (the steps that
        follow are logged with it), so that every change is logged at INFO with its reason."""
        if cause is not None:
            self._cause = cause
        log.info(
            "group %s member %s: %s -> %s (%s)",
            self.group_id,
            self.member_id,
            self.state.name,
            target.name,
            self._cause,
        )
        previous = self.state
        self._machine.transition_to(target)
        self._record_rebalance(previous, target)

    def _record_rebalance(self, previous: MemberState, target: MemberState) -> None:
        metrics = self.metrics
        if target in _REBALANCE_ENDS:
            metrics.rebalance_ended()
        elif target in _REBALANCE_FAILS:
            metrics.rebalance_failed()
        elif target in _REBALANCE_ABANDONS:
            metrics.rebalance_abandoned()
        elif target in _REBALANCE_STARTS.get(self.PROTOCOL, ()) and previous is not target:
            metrics.rebalance_started()

    def group_state(self) -> GroupState:
        """A snapshot of the membership, for ``Consumer.group_state()``."""
        return GroupState(
            group_id=self.group_id,
            protocol=self.PROTOCOL,
            state=self.state.name,
            generation=self.generation,
            member_id=self.member_id,
            group_instance_id=self._instance_id,
            assignment=frozenset(self._subscription.assigned_partitions()),
            reason=self._cause,
        )

    def member_info(self) -> MemberInfo:
        """Who commits: the generation while it is valid (see CommitRequestManager)."""
        leave = self._leave
        if self._in_generation() or (
            self.state is _M.PREPARE_LEAVING and leave is not None and leave.with_generation
        ):
            return MemberInfo(self.generation, self.member_id, self._instance_id)
        rebalancing = self.state in (_M.JOINING, _M.AWAITING_SYNC)
        # A subscribed member outside a generation (stale, fenced, leaving) must not commit as
        # "no member": like Java, such a commit fails on the client.
        excluded = not rebalancing and self.state is not _M.UNJOINED and self._is_group_subscription()
        return MemberInfo(-1, "", self._instance_id, rebalancing=rebalancing, excluded=excluded)

    def _publish_metadata(self) -> None:
        self.group_metadata = GroupMetadata(self.group_id, self.generation, self.member_id, self._instance_id)

    def _in_generation(self) -> bool:
        """The member holds a valid generation (or epoch): its commits count, it revokes
        rather than loses its partitions when it leaves."""
        return self.state in HEARTBEAT_STATES

    def _remains_in_group(self, leave: Leave | None) -> bool:
        """Whether this leave keeps the member's place in the group (KIP-1092): a close with
        REMAIN_IN_GROUP, or a static member's close with DEFAULT. Unsubscribing always leaves."""
        if leave is None or not leave.on_close:
            return False
        operation = leave.membership
        if operation is GroupMembershipOperation.DEFAULT:
            return self._instance_id is not None
        return operation is GroupMembershipOperation.REMAIN_IN_GROUP

    # -- request manager: nothing to send (the heartbeat request manager sends) -----------------

    def poll(self, now_ms: int) -> PollResult:
        return PollResult()

    def poll_on_close(self, now_ms: int) -> PollResult:
        return PollResult()

    def add_poll_listener(self, listener: Callable[[int], None]) -> None:
        """Call ``listener(now_ms)`` on every ``poll()`` of the application (``components.py``
        registers the heartbeat's poll timer here)."""
        self._poll_listeners.append(listener)

    def request_rejoin(self, reason: str) -> None:
        """Rejoin at the next opportunity (enforce_rebalance, subscription or metadata change)."""
        self._join_requested = True
        self._rejoin_reason = reason

    def take_rejoin_reason(self) -> str:
        """A join is being sent: the request is served; the reason of the last one."""
        self._join_requested = False
        return self._rejoin_reason

    # -- subscription and metadata --------------------------------------------------------------------

    def _subscription_cleared(self) -> None:
        if self._is_group_subscription():
            self._subscription.assign_from_subscription([])

    def _is_group_subscription(self) -> bool:
        return self._subscription.subscription_type() in _GROUP_SUBSCRIPTIONS

    def _update_metadata_topics(self) -> None:
        if self._subscription.subscription_type() in (
            SubscriptionType.AUTO_PATTERN,
            SubscriptionType.AUTO_PATTERN_RE2J,
        ):
            # a RE2J pattern: the coordinator assigns topics by id; their names come from
            # the metadata of every topic (as Java)
            self._metadata.set_topics(None)
        else:
            self._metadata.set_topics(set(self._subscription.subscription()))

    def _on_metadata(self, cluster: ClusterMetadata) -> None:
        pattern = self._subscription.pattern()
        if pattern is not None and self._subscription.subscription_type() is SubscriptionType.AUTO_PATTERN:
            matches = self.matching_topics(pattern, cluster)
            if self._subscription.set_pattern_matches(matches) and self.state is not _M.UNJOINED:
                self.request_rejoin("topics matching the subscribed pattern changed")

    def matching_topics(self, pattern: re.Pattern[str], cluster: ClusterMetadata) -> set[str]:
        """Topics in ``cluster`` whose whole name matches ``pattern``."""
        return {
            name
            for name, info in cluster.topics.items()
            if pattern.fullmatch(name) and not (info.is_internal and self._exclude_internal)
        }
