"""The protocol-neutral part of a consumer's group membership. [bg, pure: takes now_ms]

Java's ``AbstractMembershipManager``: what the classic and the KIP-848 protocols share. The
member's identity and state machine are its base, :class:`~.member.GroupMembership`; this module
holds what the member does with them: joining, the assignment bookkeeping, losing its
partitions, fatal errors and leaving. It builds no request: the protocol's heartbeat request
manager does, and reports outcomes through the methods here. :meth:`~MembershipCore._reconcile`
revokes what leaves the assignment (fetching stops at once, auto-commit commits it,
``on_partitions_revoked`` runs), then adds what is new (not fetchable until
``on_partitions_assigned`` was acknowledged); the member waits for each acknowledgement
(:mod:`.callbacks`). :meth:`~MembershipCore.fence` loses the partitions and rejoins;
:meth:`~MembershipCore.fail` moves to FATAL and tells the application;
:meth:`~MembershipCore.leave` revokes everything, then waits in LEAVING until the protocol told
the coordinator; the poll timer's leave ends STALE and rejoins at the next poll.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from concurrent.futures import Future

from kaflux.consumer.close_options import GroupMembershipOperation
from kaflux.consumer.events import ErrorEvent, complete, fail
from kaflux.consumer.member_state import MemberState
from kaflux.consumer.membership.callbacks import (
    ON_PARTITIONS_ASSIGNED,
    ON_PARTITIONS_LOST,
    ON_PARTITIONS_REVOKED,
)
from kaflux.consumer.membership.member import GroupMembership, Leave
from kaflux.errors import BrokerError, KafkaError, RebalanceInProgressError
from kaflux.structs import OffsetAndMetadata, TopicPartition

__all__ = ["Leave", "MembershipCore"]

log = logging.getLogger(__name__)

_M = MemberState
#: states in which a fencing error changes nothing: the partitions are being given up already
_GIVING_UP = frozenset({_M.LOSING_PARTITIONS, _M.PREPARE_LEAVING, _M.LEAVING, _M.STALE, _M.UNJOINED})


class MembershipCore(GroupMembership):
    """What a member does in its group, whatever the protocol: join, reconcile, lose its
    partitions, fail, leave. A protocol's subclass adds its decisions and its requests."""

    # -- joining ----------------------------------------------------------------------------------

    def on_subscription_change(self, has_listener: bool) -> None:
        """subscribe(): (re)join on the next poll with the new topics."""
        self.callbacks.has_listener = has_listener
        self._update_metadata_topics()
        self.request_rejoin("the subscription changed")

    def on_poll(self, now_ms: int) -> None:
        """The application polled: tell the poll listeners (the heartbeat's poll timer); a stale
        member rejoins, a requested first join starts."""
        for listener in self._poll_listeners:
            listener(now_ms)
        self.metrics.tick(now_ms)
        if self.state is _M.STALE:
            self._lose_partitions("rejoining after leaving on the poll timeout")
        elif self.state is _M.UNJOINED and self._join_requested and self._is_group_subscription():
            self._start_join(now_ms)

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
        self._abandon_commit()
        future: Future[dict[TopicPartition, OffsetAndMetadata]] = Future()
        self._commit_future = future
        state = self.state

        def done(_: Future[dict[TopicPartition, OffsetAndMetadata]]) -> None:
            if self._commit_future is future and self.state is state:
                self._commit_future = None
                then()

        future.add_done_callback(done)
        # As Java, retried for up to the rebalance timeout (max.poll.interval.ms).
        until_ms = now_ms + self._rebalance_timeout_ms
        commits = self._commits
        assert commits is not None, "GroupMembership refuses auto-commit without a commit manager"
        commits.auto_commit_now(now_ms, future, before_revocation_until_ms=until_ms)

    def _abandon_commit(self) -> None:
        """The revocation that commit was for will not go on (the partitions were lost, the
        member failed or left): stop retrying it, so that it cannot commit, later and with a
        newer epoch, positions of partitions that have moved to another member."""
        future, self._commit_future = self._commit_future, None
        if future is not None:
            fail(
                future,
                RebalanceInProgressError("the member gave its partitions up before the commit completed"),
            )

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
        self._abandon_commit()
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
        self._abandon_commit()
        owned = set(self._subscription.assigned_partitions()) if self._is_group_subscription() else set()
        self._subscription.mark_pending_revocation(owned)
        self._to(_M.FATAL, f"fatal: {error}")
        self._post_event(ErrorEvent(error))
        leave, self._leave = self._leave, None
        if leave is not None and leave.future is not None:
            complete(leave.future, None)
        self.callbacks.request(ON_PARTITIONS_LOST, owned, self._subscription_cleared)

    # -- leaving ------------------------------------------------------------------------------------

    def leave(
        self,
        future: Future[None],
        *,
        on_close: bool,
        now_ms: int,
        membership: GroupMembershipOperation = GroupMembershipOperation.DEFAULT,
    ) -> None:
        """unsubscribe()/close(): revoke everything (with callbacks) and leave the group.

        ``membership`` (close() only, KIP-1092) decides whether the coordinator is told; the
        commit (auto-commit) and the callbacks happen whatever it says, as in Java."""
        self.metrics.tick(now_ms)
        if self.state in (_M.UNJOINED, _M.FATAL):
            self._subscription_cleared()
            complete(future, None)
            return
        if self.state in (_M.PREPARE_LEAVING, _M.LEAVING):
            leaving = self._leave = self._leave or Leave(None)
            previous = leaving.future
            if previous is not None:
                previous.add_done_callback(lambda _: complete(future, None))
            else:  # the poll timer is leaving: finish as this leave instead of going STALE
                leaving.future = future
                leaving.on_close = on_close
                leaving.membership = membership
                leaving.stale = False
            return
        self._join_requested = False
        owned = set(self._subscription.assigned_partitions())
        valid = self._in_generation()
        # Partitions already handed to the application in a revoked/lost callback are not
        # handed over again: the leave waits for that callback's acknowledgement instead.
        released = set(self.callbacks.released)
        self._leave = Leave(future, on_close=on_close, membership=membership, with_generation=valid)
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

    def _has_joined(self) -> bool:
        """The coordinator knows this member (there is something to leave)."""
        return bool(self.member_id)

    def _tells_coordinator_on_leave(self, leave: Leave | None) -> bool:
        """Whether leaving sends a request: not when the member remains in the group (a static
        member closing, which keeps its place and partitions until its session times out, or a
        close with REMAIN_IN_GROUP)."""
        return not self._remains_in_group(leave)

    def leave_on_poll_timeout(self) -> None:
        """The poll timer expired: stop fetching and leave at once (no callbacks, no commit);
        the member ends STALE and loses its partitions at the next poll."""
        log.warning(
            "group %s: no poll() for more than max.poll.interval.ms=%d; leaving the group. Its "
            "partitions go to other members and this consumer rejoins on its next poll(). Process "
            "records faster, lower max.poll.records or raise max.poll.interval.ms; for long work, "
            "pause the partitions and keep calling poll() (docs/clients.md: 'Long processing').",
            self.group_id,
            self._rebalance_timeout_ms,
        )
        self.callbacks.cancel()
        self._subscription.mark_pending_revocation(self._subscription.assigned_partitions())
        self._abandon_commit()
        self._leave = Leave(None, stale=True)
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
        if not self.KEEPS_MEMBER_ID and not self._remains_in_group(leave):
            self.member_id = ""
        self.generation = -1
        self._publish_metadata()
        self._to(_M.UNJOINED)
        if leave is not None and leave.future is not None:
            complete(leave.future, None)
