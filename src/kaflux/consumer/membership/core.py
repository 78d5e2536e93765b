"""The protocol-neutral part of a consumer's group membership. [bg, pure: takes now_ms]

Java's ``AbstractMembershipManager``: what the classic and the KIP-848 protocols share, the
member's identity (member id, generation), its :class:`MemberState` machine and assignment
bookkeeping. It builds no request: the protocol's heartbeat request manager does, and reports
outcomes through the methods here. :meth:`~MembershipCore._reconcile` revokes what leaves the
assignment (fetching stops at once, auto-commit commits it, ``on_partitions_revoked`` runs),
then adds what is new (not fetchable until ``on_partitions_assigned`` was acknowledged); the
member waits for each acknowledgement (:mod:`.callbacks`). :meth:`~MembershipCore.fence` loses
the partitions and rejoins; :meth:`~MembershipCore.fail` moves to FATAL and tells the
application; :meth:`~MembershipCore.leave` revokes everything, then waits in LEAVING until the
protocol told the coordinator; the poll timer's leave ends STALE and rejoins at the next poll.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol

from kaflux.consumer.commit_request_manager import MemberInfo
from kaflux.consumer.events import BackgroundEvent, ErrorEvent, complete
from kaflux.consumer.member_state import (
    HEARTBEAT_STATES,
    MEMBER_TRANSITIONS,
    MemberState,
    new_member_state_machine,
)
from kaflux.consumer.membership.callbacks import (
    ON_PARTITIONS_ASSIGNED,
    ON_PARTITIONS_LOST,
    ON_PARTITIONS_REVOKED,
    RebalanceCallbacks,
)
from kaflux.consumer.membership.group import GroupMetadata, GroupSettings, GroupState
from kaflux.consumer.membership.poll_timer import PollTimer
from kaflux.consumer.positions import SubscriptionType
from kaflux.errors import BrokerError, KafkaError
from kaflux.metrics.clients import CoordinatorMetrics
from kaflux.metrics.registry import MetricsRegistry
from kaflux.network.requests import PollResult, RequestManager
from kaflux.structs import OffsetAndMetadata, TopicPartition

if TYPE_CHECKING:
    from kaflux.consumer.commit_request_manager import CommitRequestManager
    from kaflux.consumer.coordinator_request_manager import CoordinatorRequestManager
    from kaflux.consumer.subscription_state import SubscriptionState
    from kaflux.network.cluster import ClusterMetadata
    from kaflux.network.metadata_manager import MetadataManager

log = logging.getLogger(__name__)

_M = MemberState
#: states in which a fencing error changes nothing: the partitions are being given up already
_GIVING_UP = frozenset({_M.LOSING_PARTITIONS, _M.PREPARE_LEAVING, _M.LEAVING, _M.STALE, _M.UNJOINED})
#: subscriptions that make the consumer a group member (not a manual assignment)
_GROUP_SUBSCRIPTIONS = frozenset({SubscriptionType.AUTO_TOPICS, SubscriptionType.AUTO_PATTERN})
#: rebalance metrics: a rebalance starts when the member enters one of these states (as Java:
#: the classic protocol's join, KIP-848's reconciliation), ends when it reaches an assignment
#: (KIP-848: acknowledging it), fails when the member is fenced, fails fatally or misses the
#: poll timeout, and is abandoned (not counted) when the member leaves
_REBALANCE_STARTS = {"classic": frozenset({_M.JOINING}), "consumer": frozenset({_M.RECONCILING})}
_REBALANCE_ENDS = frozenset({_M.STABLE, _M.ACKNOWLEDGING})
_REBALANCE_FAILS = frozenset({_M.FATAL, _M.STALE, _M.LOSING_PARTITIONS})
_REBALANCE_ABANDONS = frozenset({_M.UNJOINED, _M.PREPARE_LEAVING})


@dataclass(slots=True)
class _Leave:
    """A leave under way."""

    #: completed once the member left; None for the poll timer's leave (nobody waits for it)
    future: Future[None] | None
    #: close(): a static member keeps its place in the group
    on_close: bool = False
    #: the member held a valid generation when it started leaving (its commits still count)
    with_generation: bool = False
    #: the poll timer's leave: end STALE (and rejoin on the next poll), not UNJOINED
    stale: bool = False


class HeartbeatRequestManager(RequestManager, Protocol):
    """A group protocol's heartbeat request manager, as the membership core drives it."""

    #: ``max.poll.interval.ms``: fed by every ``poll()`` of the application
    poll_timer: PollTimer


class MembershipCore(RequestManager):
    """One consumer's membership in one group, whatever the protocol. A protocol's subclass is
    the request manager the network thread polls for the group."""

    #: the protocol's state table (the classic one unless a subclass says otherwise)
    TRANSITIONS: ClassVar[dict[MemberState, frozenset[MemberState]]] = MEMBER_TRANSITIONS
    #: KIP-848 members keep their client-made id for life; a classic member that left (but a
    #: static one closing) rejoins as a new member
    KEEPS_MEMBER_ID: ClassVar[bool] = False
    #: ``group.protocol``, as ``group_state()`` reports it
    PROTOCOL: ClassVar[str] = "classic"
    #: the protocol's heartbeat request manager, made by the subclass
    heartbeat: HeartbeatRequestManager

    def __init__(
        self,
        settings: GroupSettings,
        *,
        coordinator: CoordinatorRequestManager,
        subscription: SubscriptionState,
        metadata: MetadataManager,
        commits: CommitRequestManager,
        post_event: Callable[[BackgroundEvent], None],
    ) -> None:
        self.group_id = settings.group_id
        self._instance_id = settings.group_instance_id
        self._auto_commit = settings.auto_commit
        self._exclude_internal = settings.exclude_internal_topics
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
        self._leave: _Leave | None = None
        #: why the current rebalance or leave started (logged with every state change)
        self._cause = "not joined yet"
        #: consumer-coordinator-metrics (the consumer gives its network thread's registry)
        self.metrics = CoordinatorMetrics(MetricsRegistry())
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

    # -- joining ----------------------------------------------------------------------------------

    def on_subscription_change(self, has_listener: bool) -> None:
        """subscribe(): (re)join on the next poll with the new topics."""
        self.callbacks.has_listener = has_listener
        self._update_metadata_topics()
        self.request_rejoin("the subscription changed")

    # -- request manager: the protocol's heartbeat request manager's requests -------------------

    def poll(self, now_ms: int) -> PollResult:
        return self.heartbeat.poll(now_ms)

    def poll_on_close(self, now_ms: int) -> PollResult:
        return self.heartbeat.poll_on_close(now_ms)

    def maximum_time_to_wait(self, now_ms: int) -> int:
        return self.heartbeat.maximum_time_to_wait(now_ms)

    def on_poll(self, now_ms: int) -> None:
        """The application polled: reset the poll timer; a stale member rejoins, a requested
        first join starts."""
        self.heartbeat.poll_timer.reset(now_ms)
        self.metrics.tick(now_ms)
        if self.state is _M.STALE:
            self._lose_partitions("rejoining after leaving on the poll timeout")
        elif self.state is _M.UNJOINED and self._join_requested and self._is_group_subscription():
            self._start_join(now_ms)

    def request_rejoin(self, reason: str) -> None:
        """Rejoin at the next opportunity (enforce_rebalance, subscription or metadata change)."""
        self._join_requested = True
        self._rejoin_reason = reason

    def take_rejoin_reason(self) -> str:
        """A join is being sent: the request is served; the reason of the last one."""
        self._join_requested = False
        return self._rejoin_reason

    def maybe_rejoin(self, now_ms: int) -> None:
        """Start a rejoin requested while the member was stable."""
        self.metrics.tick(now_ms)
        if self.state is _M.STABLE and self._join_requested:
            self._start_join(now_ms)

    def _start_join(self, now_ms: int) -> None:
        """Join; a protocol that revokes before joining overrides this."""
        self._join_requested = False
        self._to(_M.JOINING, self._rejoin_reason or "joining")

    # -- reconciling --------------------------------------------------------------------------------

    def on_callback_completed(self, callback_id: int, method: str, error: BaseException | None) -> None:
        """The application ran a listener method; continue the rebalance."""
        self.callbacks.acknowledge(callback_id, method, error)

    def _reconcile(self, target: Iterable[TopicPartition], now_ms: int) -> None:
        """Move the assignment to ``target``: revoke what goes, then assign what is new."""
        self.metrics.tick(now_ms)
        new = list(dict.fromkeys(target))
        owned = set(self._subscription.assigned_partitions())
        revoked = owned - set(new)
        added = set(new) - owned
        if revoked:
            self._begin_revocation(revoked, now_ms, then=lambda: self._begin_assignment(new, added))
        else:
            self._begin_assignment(new, added)

    def _begin_revocation(
        self, partitions: set[TopicPartition], now_ms: int, then: Callable[[], None]
    ) -> None:
        if self.state is not _M.PREPARE_REVOCATION:
            self._to(_M.PREPARE_REVOCATION)
        self._revoking = set(partitions)
        self._after_revocation = then
        self._subscription.mark_pending_revocation(partitions)
        if self._auto_commit:
            self._commit_then(now_ms, self._revoke_callback)
        else:
            self._revoke_callback()

    def _commit_then(self, now_ms: int, then: Callable[[], None]) -> None:
        """Commit consumed positions (auto-commit), then continue, whatever the outcome."""
        future: Future[dict[TopicPartition, OffsetAndMetadata]] = Future()
        self._commit_future = future
        state = self.state

        def done(_: Future[dict[TopicPartition, OffsetAndMetadata]]) -> None:
            if self._commit_future is future and self.state is state:
                self._commit_future = None
                then()

        future.add_done_callback(done)
        self._commits.auto_commit_now(now_ms, future)

    def _revoke_callback(self) -> None:
        if self._revoking:
            self._to(_M.REVOKING_PARTITIONS)
        self.callbacks.request(ON_PARTITIONS_REVOKED, self._revoking, self._finish_revocation)

    def _finish_revocation(self) -> None:
        remaining = [tp for tp in self._subscription.assigned_partitions() if tp not in self._revoking]
        self._subscription.assign_from_subscription(remaining)
        self._revoking = set()
        self._to(_M.PARTITIONS_REVOKED)
        then, self._after_revocation = self._after_revocation, None
        if then is not None:
            then()

    def _begin_assignment(self, partitions: list[TopicPartition], added: set[TopicPartition]) -> None:
        self._to(_M.ASSIGNING_PARTITIONS)
        self._subscription.assign_from_subscription(partitions)
        self._subscription.set_awaiting_callback(added, True)
        self._update_metadata_topics()
        self._on_assignment_applied()

        def finish() -> None:
            self._subscription.set_awaiting_callback(added, False)
            self._assignment_done()

        self.callbacks.request(ON_PARTITIONS_ASSIGNED, added, finish, even_if_empty=True)

    def _assignment_done(self) -> None:
        """``on_partitions_assigned`` was acknowledged: the member is stable (the KIP-848
        member acknowledges its assignment to the coordinator first)."""
        self._to(_M.STABLE)

    def _on_assignment_applied(self) -> None:
        """The new assignment is in place (its callback not yet acknowledged); a hook."""

    # -- fenced, fatal ------------------------------------------------------------------------------

    def fence(self, error: type[BrokerError], *, forget_member_id: bool) -> None:
        """The coordinator no longer knows this member or generation: the partitions are lost
        (``on_partitions_lost``), then the member joins again (without its id if told to)."""
        if self.state in _GIVING_UP:
            self.generation = -1  # already giving the partitions up
            return
        log.warning(
            "group %s: member %s was fenced (%s); its partitions are lost",
            self.group_id,
            self.member_id,
            error.__name__,
        )
        if forget_member_id:
            self.member_id = ""
        self._lose_partitions(f"fenced by the coordinator: {error.__name__}")

    def _lose_partitions(self, cause: str) -> None:
        self.generation = -1
        self._publish_metadata()
        self.callbacks.cancel()
        self._after_revocation = None
        self._commit_future = None
        owned = set(self._subscription.assigned_partitions())
        self._subscription.mark_pending_revocation(owned)
        self._to(_M.LOSING_PARTITIONS, cause)

        def finish() -> None:
            self._subscription.assign_from_subscription([])
            self._to(_M.JOINING)

        self.callbacks.request(ON_PARTITIONS_LOST, owned, finish)

    def fail(self, error: KafkaError) -> None:
        """A non-recoverable group error: FATAL, the error goes to the application (raised by
        ``poll()``) and the partitions are lost."""
        log.error("group %s: %s", self.group_id, error)
        self.callbacks.cancel()
        owned = set(self._subscription.assigned_partitions()) if self._is_group_subscription() else set()
        self._subscription.mark_pending_revocation(owned)
        self._to(_M.FATAL, f"fatal: {error}")
        self._post_event(ErrorEvent(error))
        leave, self._leave = self._leave, None
        if leave is not None and leave.future is not None:
            complete(leave.future, None)
        self.callbacks.request(ON_PARTITIONS_LOST, owned, self._subscription_cleared)

    # -- leaving ------------------------------------------------------------------------------------

    def leave(self, future: Future[None], *, on_close: bool, now_ms: int) -> None:
        """unsubscribe()/close(): revoke everything (with callbacks) and leave the group."""
        self.metrics.tick(now_ms)
        if self.state in (_M.UNJOINED, _M.FATAL):
            self._subscription_cleared()
            complete(future, None)
            return
        if self.state in (_M.PREPARE_LEAVING, _M.LEAVING):
            leaving = self._leave = self._leave or _Leave(None)
            previous = leaving.future
            if previous is not None:
                previous.add_done_callback(lambda _: complete(future, None))
            else:  # the poll timer is leaving: finish as this leave instead of going STALE
                leaving.future = future
                leaving.on_close = on_close
                leaving.stale = False
            return
        self._join_requested = False
        owned = set(self._subscription.assigned_partitions())
        valid = self._in_generation()
        # Partitions already handed to the application in a revoked/lost callback are not
        # handed over again: the leave waits for that callback's acknowledgement instead.
        released = set(self.callbacks.released)
        self._leave = _Leave(future, on_close=on_close, with_generation=valid)
        self._to(_M.PREPARE_LEAVING, "close()" if on_close else "unsubscribe()")
        self._subscription.mark_pending_revocation(owned)
        remaining = owned - released

        def proceed() -> None:
            if remaining and self._auto_commit and valid:
                self._commit_then(now_ms, lambda: self._leave_callbacks(remaining, valid))
            else:
                self._leave_callbacks(remaining, valid)

        if released:  # a revoked/lost callback is pending: the leave goes on from its end
            self.callbacks.replace_continuation(proceed)
        else:
            self.callbacks.cancel()
            proceed()

    def _leave_callbacks(self, owned: set[TopicPartition], valid: bool) -> None:
        method = ON_PARTITIONS_REVOKED if valid else ON_PARTITIONS_LOST
        self.callbacks.request(method, owned, self._finish_leave_prepare)

    def _finish_leave_prepare(self) -> None:
        self._subscription_cleared()
        self._to(_M.LEAVING)
        if not self._tells_coordinator_on_leave(self._leave):
            self.finish_leave()
        elif not self._has_joined() or self._coordinator.coordinator_id is None:
            # Never joined, or no coordinator to tell (as Java, the leave request is skipped and
            # the broker expires the member after its session): nothing to wait for.
            if self.member_id:
                log.info("group %s: coordinator unknown; leaving without a LeaveGroup request", self.group_id)
            self.finish_leave()

    def _in_generation(self) -> bool:
        """The member holds a valid generation (or epoch): its commits count, it revokes
        rather than loses its partitions when it leaves."""
        return self.state in HEARTBEAT_STATES

    def _has_joined(self) -> bool:
        """The coordinator knows this member (there is something to leave)."""
        return bool(self.member_id)

    def _tells_coordinator_on_leave(self, leave: _Leave | None) -> bool:
        """Whether leaving sends a request: not for a static member closing, which keeps its
        place (and partitions) until its session times out."""
        return not (leave is not None and leave.on_close and self._instance_id is not None)

    def leave_on_poll_timeout(self) -> None:
        """The poll timer expired: stop fetching and leave at once (no callbacks, no commit);
        the member ends STALE and loses its partitions at the next poll."""
        log.warning(
            "group %s: no poll() for more than max.poll.interval.ms=%d; leaving the group. Its "
            "partitions go to other members and this consumer rejoins on its next poll(). Process "
            "records faster, lower max.poll.records or raise max.poll.interval.ms; for long work, "
            "pause the partitions and keep calling poll() (README: 'Long processing').",
            self.group_id,
            self.heartbeat.poll_timer.interval_ms,
        )
        self.callbacks.cancel()
        self._subscription.mark_pending_revocation(self._subscription.assigned_partitions())
        self._leave = _Leave(None, stale=True)
        self._to(_M.PREPARE_LEAVING, "no poll() within max.poll.interval.ms")
        self._to(_M.LEAVING)

    def finish_leave(self) -> None:
        """The coordinator was told (or need not be): the member is out of the group."""
        leave, self._leave = self._leave, None
        if leave is not None and leave.stale:
            if self._instance_id is None and not self.KEEPS_MEMBER_ID:
                self.member_id = ""  # it left: rejoin as a new member (as Java resets it)
            self.generation = -1
            self._publish_metadata()  # outside a generation: poll() wakes us for the rejoin
            self._to(_M.STALE)
            return
        on_close = leave is not None and leave.on_close
        if not self.KEEPS_MEMBER_ID and (self._instance_id is None or not on_close):
            self.member_id = ""
        self.generation = -1
        self._publish_metadata()
        self._to(_M.UNJOINED)
        if leave is not None and leave.future is not None:
            complete(leave.future, None)

    def _subscription_cleared(self) -> None:
        if self._is_group_subscription():
            self._subscription.assign_from_subscription([])

    # -- subscription and metadata --------------------------------------------------------------------

    def _is_group_subscription(self) -> bool:
        return self._subscription.subscription_type() in _GROUP_SUBSCRIPTIONS

    def _update_metadata_topics(self) -> None:
        if self._subscription.subscription_type() is SubscriptionType.AUTO_PATTERN:
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
