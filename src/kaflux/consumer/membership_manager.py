"""Group membership with the classic protocol, driven by the network thread. [bg]

Theory of operation. The member's life is the :class:`MemberState` machine. Nothing here
blocks or waits: ``poll(now_ms)`` looks at the state and returns the request that moves it
on (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), and response handlers, callback
acknowledgements and commit completions make the transitions.

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
* **Errors.** REBALANCE_IN_PROGRESS rejoins; UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION fence the
  member (partitions lost, rejoin); coordinator errors make the coordinator manager look it
  up again; fatal errors (authorization, fenced instance id, inconsistent protocol...) move to
  FATAL and are raised by ``poll()``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

from kaflux.consumer.assignors import (
    Assignment,
    GroupMember,
    PartitionAssignor,
    RebalanceProtocol,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    rebalance_protocol_for,
)
from kaflux.consumer.commit_request_manager import CommitRequestManager, MemberInfo
from kaflux.consumer.coordinator_request_manager import CoordinatorRequestManager
from kaflux.consumer.events import BackgroundEvent, RebalanceCallbackNeededEvent, complete
from kaflux.consumer.member_state import HEARTBEAT_STATES, MemberState, new_member_state_machine
from kaflux.consumer.subscription_state import SubscriptionState, SubscriptionType
from kaflux.errors import KafkaError, error_for_code
from kaflux.network.backoff import ExponentialBackoff
from kaflux.network.cluster import ClusterMetadata
from kaflux.network.metadata_manager import MetadataManager
from kaflux.network.requests import ClientResponse, PollResult, UnsentRequest
from kaflux.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from kaflux.protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol, JoinGroupResponse
from kaflux.protocol.messages.leave_group import LeaveGroupRequest
from kaflux.protocol.messages.sync_group import (
    SyncGroupRequest,
    SyncGroupRequestAssignment,
    SyncGroupResponse,
)
from kaflux.structs import OffsetAndMetadata, TopicPartition

log = logging.getLogger(__name__)

_M = MemberState
_COORDINATOR_ERRORS = {14, 15, 16}  # load in progress, not available, not coordinator
_REBALANCE_IN_PROGRESS = 27
_ILLEGAL_GENERATION = 22
_UNKNOWN_MEMBER_ID = 25
_MEMBER_ID_REQUIRED = 79
_FENCED_INSTANCE_ID = 82
#: Leaving through v3+ needs the members list; v2 is enough for a dynamic member.
MAX_LEAVE_GROUP_VERSION = 2
#: How long the leader waits for metadata of topics its members subscribe to.
LEADER_METADATA_WAIT_MS = 2000


@dataclass(frozen=True, slots=True)
class GroupMetadata:
    """What ``Consumer.group_metadata()`` returns (for transactional producers)."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


class MembershipManager:
    """One consumer's membership in one group."""

    def __init__(
        self,
        group_id: str,
        *,
        group_instance_id: str | None,
        coordinator: CoordinatorRequestManager,
        subscription: SubscriptionState,
        cluster: ClusterMetadata,
        metadata: MetadataManager,
        commits: CommitRequestManager,
        assignors: list[PartitionAssignor],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        heartbeat_interval_ms: int,
        request_timeout_ms: int,
        retry_backoff: ExponentialBackoff,
        client_rack: str,
        auto_commit: bool,
        exclude_internal_topics: bool,
        post_event: Callable[[BackgroundEvent], None],
        on_fatal: Callable[[KafkaError], None],
    ) -> None:
        self.group_id = group_id
        self._instance_id = group_instance_id
        self._coordinator = coordinator
        self._subscription = subscription
        self._cluster = cluster
        self._metadata = metadata
        self._commits = commits
        self._assignors = {a.name: a for a in assignors}
        self._assignor_order = [a.name for a in assignors]
        self.protocol = rebalance_protocol_for(assignors)
        self._session_timeout_ms = session_timeout_ms
        self._rebalance_timeout_ms = rebalance_timeout_ms
        self._heartbeat_interval_ms = heartbeat_interval_ms
        self._request_timeout_ms = request_timeout_ms
        self._backoff = retry_backoff
        self._rack = client_rack or None
        self._auto_commit = auto_commit
        self._exclude_internal = exclude_internal_topics
        self._post_event = post_event
        self._on_fatal = on_fatal
        self._machine = new_member_state_machine(group_id)
        self.member_id = ""
        self.generation = -1
        self._protocol_name: str | None = None
        self._leader_id = ""
        self._join_members: list[tuple[str, str | None, bytes]] = []
        self._joined_at_ms = 0
        self._has_listener = False
        self._join_requested = False
        self._rejoin_reason = ""
        self._in_flight = False
        self._retry_at_ms = 0
        self._attempts = 0
        self._next_heartbeat_ms = 0
        self._heartbeat_in_flight = False
        self._last_poll_ms: int | None = None
        self._next_callback_id = 1
        self._pending_callback: tuple[int, Callable[[], None]] | None = None
        #: partitions handed to the application in the pending revoked/lost callback
        self._pending_release: frozenset[TopicPartition] = frozenset()
        self._revoking: set[TopicPartition] = set()
        self._after_revocation: Callable[[], None] | None = None
        self._commit_future: Future[dict[TopicPartition, OffsetAndMetadata]] | None = None
        self._leave_future: Future[None] | None = None
        self._leave_on_close = False
        self._assigned_counts: dict[str, int] = {}
        self._stale_after_leave = False
        self._leaving_with_generation = False
        self._in_flight_kind = ""
        self._in_flight_seq = 0
        self.group_metadata = GroupMetadata(group_id, group_instance_id=group_instance_id)
        metadata.add_listener(self._on_metadata)

    # -- state ---------------------------------------------------------------------------------

    @property
    def state(self) -> MemberState:
        """The member's current state."""
        return self._machine.state

    def _to(self, target: MemberState) -> None:
        log.debug("group %s member %s: %s -> %s", self.group_id, self.member_id, self.state.name, target.name)
        self._machine.transition_to(target)

    def member_info(self) -> MemberInfo:
        """Who commits: the generation while it is valid (see CommitRequestManager)."""
        if self.state in HEARTBEAT_STATES or (
            self.state is _M.PREPARE_LEAVING and self._leaving_with_generation
        ):
            return MemberInfo(self.generation, self.member_id, self._instance_id)
        rebalancing = self.state in (_M.JOINING, _M.AWAITING_SYNC)
        # A subscribed member outside a generation (stale, fenced, leaving) must not commit as
        # "no member": like Java, such a commit fails on the client.
        excluded = not rebalancing and self.state is not _M.UNJOINED and self._is_group_subscription()
        return MemberInfo(-1, "", self._instance_id, rebalancing=rebalancing, excluded=excluded)

    def _publish_metadata(self) -> None:
        self.group_metadata = GroupMetadata(self.group_id, self.generation, self.member_id, self._instance_id)

    # -- events from the application thread --------------------------------------------------------

    def on_subscription_change(self, has_listener: bool) -> None:
        """subscribe(): (re)join on the next poll with the new topics."""
        self._has_listener = has_listener
        self._update_metadata_topics()
        self.request_rejoin("the subscription changed")

    def on_poll(self, now_ms: int) -> None:
        """The application polled: refresh the poll timer; a stale member rejoins."""
        self._last_poll_ms = now_ms
        if self.state is _M.STALE:
            self._lose_partitions("the member left after max.poll.interval.ms and rejoins", rejoin=True)
        elif self.state is _M.UNJOINED and self._join_requested and self._is_group_subscription():
            self._start_rejoin(now_ms)

    def request_rejoin(self, reason: str) -> None:
        """Rejoin at the next opportunity (enforce_rebalance, subscription or metadata change)."""
        self._join_requested = True
        self._rejoin_reason = reason

    def leave(self, future: Future[None], *, on_close: bool, now_ms: int) -> None:
        """unsubscribe()/close(): revoke everything (with callbacks) and leave the group."""
        if self.state in (_M.UNJOINED, _M.FATAL):
            self._subscription_cleared()
            complete(future, None)
            return
        if self.state in (_M.PREPARE_LEAVING, _M.LEAVING):
            previous = self._leave_future
            if previous is not None:
                previous.add_done_callback(lambda _: complete(future, None))
            else:  # the poll timer is leaving: finish as this leave instead of going STALE
                self._leave_future = future
                self._leave_on_close = on_close
                self._stale_after_leave = False
            return
        self._leave_future = future
        self._leave_on_close = on_close
        self._join_requested = False
        owned = set(self._subscription.assigned_partitions())
        valid = self.state in HEARTBEAT_STATES
        pending = self._pending_callback
        # Partitions already handed to the application in a revoked/lost callback are not
        # handed over again: the leave waits for that callback's acknowledgement instead.
        released = set(self._pending_release) if pending is not None else set()
        self._leaving_with_generation = valid
        self._to(_M.PREPARE_LEAVING)
        self._subscription.mark_pending_revocation(owned)
        remaining = owned - released

        def proceed() -> None:
            if remaining and self._auto_commit and valid:
                self._commit_then(now_ms, lambda: self._leave_callbacks(remaining, valid))
            else:
                self._leave_callbacks(remaining, valid)

        if pending is not None and released:
            self._pending_callback = (pending[0], proceed)
        else:
            self._pending_callback = None
            proceed()

    def _leave_callbacks(self, owned: set[TopicPartition], valid: bool) -> None:
        method = "on_partitions_revoked" if valid else "on_partitions_lost"
        self._callback(method, owned, self._finish_leave_prepare)

    def _finish_leave_prepare(self) -> None:
        self._subscription_cleared()
        self._to(_M.LEAVING)
        if self._leave_on_close and self._instance_id is not None:
            # A static member keeps its place (and partitions) until its session times out.
            self._finish_leave()
        elif not self.member_id or self._coordinator.coordinator_id is None:
            # Never joined, or no coordinator to tell (as Java, the LeaveGroup is skipped and
            # the broker expires the member after its session): nothing to wait for.
            if self.member_id:
                log.info("group %s: coordinator unknown; leaving without a LeaveGroup request", self.group_id)
            self._finish_leave()

    def on_callback_completed(self, callback_id: int, method: str, error: BaseException | None) -> None:
        """The application ran a listener method; continue the rebalance."""
        pending = self._pending_callback
        if pending is None or pending[0] != callback_id:
            return  # a callback of an abandoned rebalance (the member was fenced meanwhile)
        if error is not None:
            log.warning("group %s: %s raised %r; the rebalance continues", self.group_id, method, error)
        self._pending_callback = None
        pending[1]()

    # -- request manager --------------------------------------------------------------------------

    def poll(self, now_ms: int) -> PollResult:
        if self.state is _M.FATAL:
            return PollResult()
        self._check_poll_timer(now_ms)
        if self.state is _M.STABLE and self._join_requested:
            self._start_rejoin(now_ms)
        node = self._coordinator.coordinator_id
        unsent: list[UnsentRequest] = []
        wait = 5000
        leave_now = self.state is _M.LEAVING and self._in_flight and self._in_flight_kind in ("join", "sync")
        if node is not None and (not self._in_flight or leave_now) and now_ms >= self._retry_at_ms:
            request = self._state_request(node, now_ms)
            if request is not None:
                unsent.append(request)
        elif not self._in_flight and now_ms < self._retry_at_ms:
            wait = self._retry_at_ms - now_ms
        if node is not None and self.state in HEARTBEAT_STATES and not self._heartbeat_in_flight:
            if now_ms >= self._next_heartbeat_ms:
                unsent.append(self._heartbeat(node, now_ms))
            wait = min(wait, max(0, self._next_heartbeat_ms - now_ms))
        if self.state in HEARTBEAT_STATES and self._last_poll_ms is not None:
            wait = min(wait, max(0, self._last_poll_ms + self._rebalance_timeout_ms - now_ms))
        if self.state is _M.AWAITING_SYNC:
            wait = min(wait, 50)
        return PollResult(max(0, wait), unsent)

    def poll_on_close(self, now_ms: int) -> PollResult:
        return self.poll(now_ms)

    def _state_request(self, node: int, now_ms: int) -> UnsentRequest | None:
        state = self.state
        if state is _M.JOINING:
            return self._join_request(node)
        if state is _M.AWAITING_SYNC:
            return self._sync_request(node, now_ms)
        if state is _M.LEAVING:
            return self._leave_request(node)
        return None

    def _check_poll_timer(self, now_ms: int) -> None:
        if self._last_poll_ms is None or self.state not in HEARTBEAT_STATES | {_M.JOINING, _M.AWAITING_SYNC}:
            return
        if now_ms - self._last_poll_ms <= self._rebalance_timeout_ms:
            return
        log.warning(
            "group %s: no poll() for more than max.poll.interval.ms=%d; leaving the group. Its "
            "partitions go to other members and this consumer rejoins on its next poll(). Process "
            "records faster, lower max.poll.records or raise max.poll.interval.ms; for long work, "
            "pause the partitions and keep calling poll() (README: 'Long processing').",
            self.group_id,
            self._rebalance_timeout_ms,
        )
        self._pending_callback = None
        self._subscription.mark_pending_revocation(self._subscription.assigned_partitions())
        self._leaving_with_generation = False
        self._to(_M.PREPARE_LEAVING)
        self._to(_M.LEAVING)
        self._leave_future = None
        self._stale_after_leave = True

    # -- joining ----------------------------------------------------------------------------------

    def _is_group_subscription(self) -> bool:
        return self._subscription.subscription_type() in (
            SubscriptionType.AUTO_TOPICS,
            SubscriptionType.AUTO_PATTERN,
        )

    def _start_rejoin(self, now_ms: int) -> None:
        self._join_requested = False
        owned = set(self._subscription.assigned_partitions())
        if self.protocol is RebalanceProtocol.EAGER and owned and self.state is _M.STABLE:
            self._begin_revocation(owned, now_ms, then=lambda: self._to(_M.JOINING))
        else:
            self._to(_M.JOINING)

    def _subscription_metadata(self, assignor: PartitionAssignor) -> bytes:
        topics = tuple(sorted(self._subscription.subscription()))
        owned = tuple(sorted(self._subscription.assigned_partitions()))
        return encode_subscription(
            Subscription(
                topics,
                assignor.subscription_user_data(topics, owned, self.generation),
                owned,
                self.generation,
                self._rack,
            )
        )

    def _join_request(self, node: int) -> UnsentRequest:
        self._join_requested = False
        request = JoinGroupRequest(
            group_id=self.group_id,
            session_timeout_ms=self._session_timeout_ms,
            rebalance_timeout_ms=self._rebalance_timeout_ms,
            member_id=self.member_id,
            group_instance_id=self._instance_id,
            protocol_type="consumer",
            protocols=[
                JoinGroupRequestProtocol(
                    name=name, metadata=self._subscription_metadata(self._assignors[name])
                )
                for name in self._assignor_order
            ],
            reason=self._rejoin_reason or None,
        )
        self._in_flight = True
        self._in_flight_kind = "join"
        self._in_flight_seq += 1
        seq = self._in_flight_seq
        # The coordinator holds a JoinGroup until every member rejoined (up to the rebalance
        # timeout), so it gets that long plus a margin, like Java.
        timeout = max(self._request_timeout_ms, self._rebalance_timeout_ms + 5000)
        return UnsentRequest(request, node, lambda r: self._on_join_response(r, seq), timeout_ms=timeout)

    def _on_join_response(self, response: ClientResponse, seq: int = -1) -> None:
        if seq in (-1, self._in_flight_seq):
            self._in_flight = False
        now_ms = response.received_ms
        if self.state is not _M.JOINING:
            return
        if response.error is not None:
            self._coordinator.mark_unknown(str(response.error))
            self._retry_later(now_ms)
            return
        body: JoinGroupResponse = response.body
        code = body.error_code
        if code == 0:
            self._attempts = 0
            self.member_id = body.member_id
            self.generation = body.generation_id
            self._protocol_name = body.protocol_name
            self._leader_id = body.leader
            self._join_members = [(m.member_id, m.group_instance_id, bytes(m.metadata)) for m in body.members]
            self._joined_at_ms = now_ms
            self._to(_M.AWAITING_SYNC)
            if self._leader_id == self.member_id:
                self._metadata.add_topics(self._members_topics())
            return
        if code == _MEMBER_ID_REQUIRED:
            self.member_id = body.member_id  # KIP-394: join again at once with this id
            return
        if code == _UNKNOWN_MEMBER_ID:
            self.member_id = ""
            return
        if code in _COORDINATOR_ERRORS:
            self._coordinator.mark_unknown(type(error_for_code(code)()).__name__)
            self._retry_later(now_ms)
            return
        if code == _REBALANCE_IN_PROGRESS:
            self._retry_later(now_ms)
            return
        self._fatal(error_for_code(code)(f"JoinGroup for group {self.group_id!r} failed"))

    def _retry_later(self, now_ms: int) -> None:
        self._retry_at_ms = now_ms + self._backoff.backoff_ms(self._attempts)
        self._attempts += 1

    def _members_topics(self) -> set[str]:
        topics: set[str] = set()
        for _, _, metadata in self._join_members:
            try:
                topics.update(decode_subscription(metadata).topics)
            except KafkaError:
                continue
        return topics

    # -- sync ---------------------------------------------------------------------------------------

    def _sync_request(self, node: int, now_ms: int) -> UnsentRequest | None:
        assignments: list[SyncGroupRequestAssignment] = []
        if self._leader_id == self.member_id:
            computed = self._leader_assign(now_ms)
            if computed is None:
                return None  # waiting for metadata of the members' topics
            assignments = computed
        request = SyncGroupRequest(
            group_id=self.group_id,
            generation_id=self.generation,
            member_id=self.member_id,
            group_instance_id=self._instance_id,
            protocol_type="consumer",
            protocol_name=self._protocol_name,
            assignments=assignments,
        )
        self._in_flight = True
        self._in_flight_kind = "sync"
        self._in_flight_seq += 1
        seq = self._in_flight_seq
        return UnsentRequest(request, node, lambda r: self._on_sync_response(r, seq))

    def _leader_assign(self, now_ms: int) -> list[SyncGroupRequestAssignment] | None:
        assignor = self._assignors.get(self._protocol_name or "")
        if assignor is None:
            self._fatal(
                error_for_code(23)(
                    f"the group chose assignor {self._protocol_name!r}, which is not configured"
                )
            )
            return None
        members: dict[str, GroupMember] = {}
        versions: dict[str, int] = {}
        for member_id, instance_id, metadata in self._join_members:
            members[member_id] = GroupMember(member_id, instance_id, decode_subscription(metadata))
            versions[member_id] = (
                int.from_bytes(metadata[:2], "big", signed=True) if len(metadata) >= 2 else 0
            )
        topics = {t for m in members.values() for t in m.subscription.topics}
        counts: dict[str, int] = {}
        for topic in topics:
            partitions = self._cluster.partitions_for(topic)
            if partitions:
                counts[topic] = len(partitions)
        if len(counts) < len(topics) and now_ms - self._joined_at_ms < LEADER_METADATA_WAIT_MS:
            self._metadata.add_topics(topics)
            self._metadata.request_update()
            return None
        result = assignor.assign(counts, members)
        self._assigned_counts = counts
        return [
            SyncGroupRequestAssignment(
                member_id=member_id,
                assignment=encode_assignment(
                    result.get(member_id, Assignment(())), min(3, max(0, versions.get(member_id, 0)))
                ),
            )
            for member_id in members
        ]

    def _on_sync_response(self, response: ClientResponse, seq: int = -1) -> None:
        if seq in (-1, self._in_flight_seq):
            self._in_flight = False
        now_ms = response.received_ms
        if self.state is not _M.AWAITING_SYNC:
            return
        if response.error is not None:
            self._coordinator.mark_unknown(str(response.error))
            self._to(_M.JOINING)
            self._retry_later(now_ms)
            return
        body: SyncGroupResponse = response.body
        code = body.error_code
        if code == 0:
            try:
                assignment = decode_assignment(body.assignment)
            except KafkaError as exc:
                self._fatal(exc)
                return
            self._on_assignment(assignment, now_ms)
            return
        if code in (_UNKNOWN_MEMBER_ID, _ILLEGAL_GENERATION):
            self._fenced(code)
            return
        if code == _REBALANCE_IN_PROGRESS or code in _COORDINATOR_ERRORS:
            if code in _COORDINATOR_ERRORS:
                self._coordinator.mark_unknown(type(error_for_code(code)()).__name__)
            self._to(_M.JOINING)
            self._retry_later(now_ms)
            return
        self._fatal(error_for_code(code)(f"SyncGroup for group {self.group_id!r} failed"))

    def _on_assignment(self, assignment: Assignment, now_ms: int) -> None:
        assignor = self._assignors.get(self._protocol_name or "")
        if assignor is not None:
            assignor.on_assignment(assignment, self.generation)
        self._publish_metadata()
        # Heartbeat at once (as librdkafka does): a restarted static member refreshes the
        # session it inherited without waiting an interval.
        self._next_heartbeat_ms = now_ms
        new = list(dict.fromkeys(assignment.partitions))
        owned = set(self._subscription.assigned_partitions())
        revoked = owned - set(new)
        added = set(new) - owned
        if revoked:
            # Cooperative: give up what moved, then rejoin so it can be reassigned.
            self.request_rejoin("partitions were revoked in a cooperative rebalance")
            self._to(_M.PREPARE_REVOCATION)
            self._begin_revocation(revoked, now_ms, then=lambda: self._begin_assignment(new, added))
        else:
            self._begin_assignment(new, added)

    # -- revocation and assignment ----------------------------------------------------------------------

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
        self._callback("on_partitions_revoked", self._revoking, self._finish_revocation)

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
        if self._leader_id and self._leader_id == self.member_id:
            self._metadata.add_topics(self._members_topics())  # the leader watches every member's topics

        def finish() -> None:
            self._subscription.set_awaiting_callback(added, False)
            self._to(_M.STABLE)

        self._callback("on_partitions_assigned", added, finish, even_if_empty=True)

    def _callback(
        self,
        method: str,
        partitions: set[TopicPartition],
        then: Callable[[], None],
        *,
        even_if_empty: bool = False,
    ) -> None:
        """Ask the application thread to run ``method``; ``then`` runs on its acknowledgement."""
        if not self._has_listener or (not partitions and not even_if_empty):
            then()
            return
        callback_id = self._next_callback_id
        self._next_callback_id += 1
        self._pending_callback = (callback_id, then)
        releasing = method in ("on_partitions_revoked", "on_partitions_lost")
        self._pending_release = frozenset(partitions) if releasing else frozenset()
        self._post_event(RebalanceCallbackNeededEvent(callback_id, method, frozenset(partitions)))

    # -- heartbeat ---------------------------------------------------------------------------------------

    def _heartbeat(self, node: int, now_ms: int) -> UnsentRequest:
        self._heartbeat_in_flight = True
        self._next_heartbeat_ms = now_ms + self._heartbeat_interval_ms
        request = HeartbeatRequest(
            group_id=self.group_id,
            generation_id=self.generation,
            member_id=self.member_id,
            group_instance_id=self._instance_id,
        )
        generation = self.generation
        return UnsentRequest(request, node, lambda r: self._on_heartbeat_response(r, generation))

    def _on_heartbeat_response(self, response: ClientResponse, generation: int) -> None:
        self._heartbeat_in_flight = False
        if response.error is not None:
            self._coordinator.mark_unknown(str(response.error))
            return
        body: HeartbeatResponse = response.body
        code = body.error_code
        if code == 0 or generation != self.generation or self.state not in HEARTBEAT_STATES:
            return
        if code == _REBALANCE_IN_PROGRESS:
            self.request_rejoin("the coordinator started a rebalance")
        elif code in (_UNKNOWN_MEMBER_ID, _ILLEGAL_GENERATION):
            self._fenced(code)
        elif code in _COORDINATOR_ERRORS:
            self._coordinator.mark_unknown(type(error_for_code(code)()).__name__)
        else:
            self._fatal(error_for_code(code)(f"heartbeat in group {self.group_id!r}"))

    # -- fencing, leaving, fatal ---------------------------------------------------------------------------

    def _fenced(self, code: int) -> None:
        if self.state in (_M.LOSING_PARTITIONS, _M.PREPARE_LEAVING, _M.LEAVING, _M.STALE, _M.UNJOINED):
            self.generation = -1  # already giving the partitions up
            return
        log.warning(
            "group %s: member %s was fenced (%s); its partitions are lost",
            self.group_id,
            self.member_id,
            type(error_for_code(code)()).__name__,
        )
        if code == _UNKNOWN_MEMBER_ID:
            self.member_id = ""
        self._lose_partitions("fenced", rejoin=True)

    def _lose_partitions(self, reason: str, *, rejoin: bool) -> None:
        self.generation = -1
        self._publish_metadata()
        self._pending_callback = None
        self._after_revocation = None
        self._commit_future = None
        owned = set(self._subscription.assigned_partitions())
        self._subscription.mark_pending_revocation(owned)
        self._to(_M.LOSING_PARTITIONS)

        def finish() -> None:
            self._subscription.assign_from_subscription([])
            self._to(_M.JOINING)

        self._callback("on_partitions_lost", owned, finish)

    def _leave_request(self, node: int) -> UnsentRequest | None:
        if not self.member_id:
            self._finish_leave()
            return None
        request = LeaveGroupRequest(group_id=self.group_id, member_id=self.member_id)
        self._in_flight = True
        self._in_flight_kind = "leave"
        self._in_flight_seq += 1
        seq = self._in_flight_seq

        def on_response(response: ClientResponse) -> None:
            if seq == self._in_flight_seq:
                self._in_flight = False
            if self.state is _M.LEAVING:
                self._finish_leave()

        return UnsentRequest(request, node, on_response, MAX_LEAVE_GROUP_VERSION)

    def _finish_leave(self) -> None:
        stale, self._stale_after_leave = self._stale_after_leave, False
        if stale:
            if self._instance_id is None:
                self.member_id = ""  # it left: rejoin as a new member (as Java resets it)
            self.generation = -1
            self._publish_metadata()  # outside a generation: poll() wakes us for the rejoin
            self._to(_M.STALE)
            return
        self.member_id = "" if self._instance_id is None or not self._leave_on_close else self.member_id
        self.generation = -1
        self._publish_metadata()
        self._to(_M.UNJOINED)
        future, self._leave_future = self._leave_future, None
        if future is not None:
            complete(future, None)

    def _subscription_cleared(self) -> None:
        if self._is_group_subscription():
            self._subscription.assign_from_subscription([])

    def _fatal(self, error: KafkaError) -> None:
        log.error("group %s: %s", self.group_id, error)
        self._pending_callback = None
        owned = set(self._subscription.assigned_partitions()) if self._is_group_subscription() else set()
        self._subscription.mark_pending_revocation(owned)
        self._to(_M.FATAL)
        self._on_fatal(error)
        future, self._leave_future = self._leave_future, None
        if future is not None:
            complete(future, None)
        self._callback("on_partitions_lost", owned, self._subscription_cleared)

    # -- metadata -----------------------------------------------------------------------------------------

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
        if self._leader_id and self._leader_id == self.member_id and self.state is _M.STABLE:
            for topic in sorted(self._members_topics() | set(self._assigned_counts)):
                partitions = cluster.partitions_for(topic)
                if len(partitions or ()) != self._assigned_counts.get(topic, 0):
                    self.request_rejoin(f"the partition count of {topic!r} changed")
                    break

    def matching_topics(self, pattern: re.Pattern[str], cluster: ClusterMetadata) -> set[str]:
        """Topics in ``cluster`` whose whole name matches ``pattern``."""
        return {
            name
            for name, info in cluster.topics.items()
            if pattern.fullmatch(name) and not (info.is_internal and self._exclude_internal)
        }
