"""The classic group protocol's requests and responses. [bg, pure: takes now_ms]

Java keeps a heartbeat request manager per group protocol; this is the classic protocol's.
Each ``poll(now_ms)`` looks at the membership's state and returns what moves it on:

* JOINING: a JoinGroup (its timeout covers the coordinator holding it for the rebalance
  timeout); AWAITING_SYNC: a SyncGroup, carrying everyone's assignment from the leader;
  LEAVING: a LeaveGroup (a static member's names its ``group.instance.id``, v3+). One of them
  is in flight at a time (:class:`RequestKind` says which), except that a LeaveGroup does not
  wait for a JoinGroup or SyncGroup the coordinator holds.
  Retriable failures back off (``retry.backoff.ms``, exponential) through a RequestState.
* Every ``heartbeat.interval.ms`` while the member holds a generation, a Heartbeat, whether or
  not the application polls; at once after a SyncGroup.
* The poll timer (``max.poll.interval.ms``): once it expires the member leaves the group.

It sees its membership (:class:`~.classic_membership.ClassicMembershipManager`) only as a
:class:`~.contracts.ClassicMembershipContext`; the poll timer, the leave's send deadline and the
coordinator-error classes are the shared :class:`~.heartbeat.HeartbeatRequestManagerBase`'s.
Responses go to the membership, their errors classified by their classes in
:mod:`kaflux.errors`:

* REBALANCE_IN_PROGRESS rejoins; UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION fence the member
  (partitions lost, rejoin); a JoinGroup rejoins at once with MEMBER_ID_REQUIRED's member id
  (KIP-394), or without its id after UNKNOWN_MEMBER_ID.
* Coordinator errors (not coordinator, not available, loading) and lost connections make the
  coordinator manager look the coordinator up again.
* Anything else (authorization, fenced instance id, inconsistent protocol...) is fatal.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kaflux.consumer.assignors import decode_assignment
from kaflux.consumer.member_state import HEARTBEAT_STATES, MemberState
from kaflux.consumer.membership.contracts import ClassicMembershipContext
from kaflux.consumer.membership.heartbeat import COORDINATOR_ERRORS, HeartbeatRequestManagerBase
from kaflux.errors import (
    BrokerError,
    IllegalGenerationError,
    KafkaError,
    MemberIdRequiredError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    error_for_code,
)
from kaflux.network.backoff import ExponentialBackoff, RequestState
from kaflux.network.requests import MAX_POLL_TIMEOUT_MS, ClientResponse, PollResult, UnsentRequest
from kaflux.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from kaflux.protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol, JoinGroupResponse
from kaflux.protocol.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse, MemberIdentity
from kaflux.protocol.messages.sync_group import (
    SyncGroupRequest,
    SyncGroupRequestAssignment,
    SyncGroupResponse,
)

if TYPE_CHECKING:
    from kaflux.consumer.coordinator_request_manager import CoordinatorRequestManager
    from kaflux.consumer.membership.group import GroupSettings

log = logging.getLogger(__name__)

_M = MemberState
#: Leaving through v3+ needs the members list; v2 is enough for a dynamic member.
MAX_LEAVE_GROUP_VERSION = 2
#: A static member leaves naming its group.instance.id, in the members list of v3+.
STATIC_LEAVE_GROUP_MIN_VERSION = 3
MAX_STATIC_LEAVE_GROUP_VERSION = 5
#: The coordinator holds a JoinGroup up to the rebalance timeout; the request gets this more.
JOIN_GROUP_TIMEOUT_MARGIN_MS = 5000
#: The member id or generation is no longer valid: the member is fenced.
FENCING_ERRORS: tuple[type[BrokerError], ...] = (UnknownMemberIdError, IllegalGenerationError)
#: While the leader waits for metadata, how often to check again.
_AWAITING_SYNC_POLL_MS = 50


class RequestKind(enum.Enum):
    """The classic protocol's requests."""

    JOIN_GROUP = "JoinGroup"
    SYNC_GROUP = "SyncGroup"
    HEARTBEAT = "Heartbeat"
    LEAVE_GROUP = "LeaveGroup"


#: Requests the coordinator may hold for a long time (until the group's rebalance completes).
_HELD_BY_COORDINATOR = frozenset({RequestKind.JOIN_GROUP, RequestKind.SYNC_GROUP})


@dataclass(eq=False, slots=True)
class InFlight:
    """One request sent and not answered yet; compared by identity, so a late response to an
    older request does not end a newer one."""

    kind: RequestKind


class ClassicHeartbeatRequestManager(HeartbeatRequestManagerBase[ClassicMembershipContext]):
    """JoinGroup, SyncGroup, Heartbeat and LeaveGroup for one classic group member."""

    HEARTBEAT_STATES = HEARTBEAT_STATES
    #: the member is in the group or joining it
    POLL_TIMER_STATES = HEARTBEAT_STATES | {_M.JOINING, _M.AWAITING_SYNC}
    FENCING_ERRORS = FENCING_ERRORS

    def __init__(
        self,
        membership: ClassicMembershipContext,
        coordinator: CoordinatorRequestManager,
        settings: GroupSettings,
        retry_backoff: ExponentialBackoff,
    ) -> None:
        super().__init__(membership, coordinator, settings)
        self._session_timeout_ms = settings.session_timeout_ms
        self._heartbeat_interval_ms = settings.heartbeat_interval_ms
        self._request_timeout_ms = settings.request_timeout_ms
        #: the backoff of JoinGroup/SyncGroup retries (reset by a successful join)
        self._retry = RequestState(retry_backoff)
        #: the JoinGroup, SyncGroup or LeaveGroup in flight
        self._in_flight: InFlight | None = None
        self._heartbeat_in_flight: InFlight | None = None

    @property
    def in_flight(self) -> RequestKind | None:
        """The JoinGroup, SyncGroup or LeaveGroup waiting for its response, if any."""
        return None if self._in_flight is None else self._in_flight.kind

    def _send(self, kind: RequestKind) -> InFlight:
        sent = InFlight(kind)
        if kind is RequestKind.HEARTBEAT:
            self._heartbeat_in_flight = sent
        else:
            self._in_flight = sent
        return sent

    def _answered(self, sent: InFlight) -> None:
        if self._in_flight is sent:
            self._in_flight = None
        elif self._heartbeat_in_flight is sent:
            self._heartbeat_in_flight = None

    # -- request manager ---------------------------------------------------------------------------

    def _poll_requests(self, now_ms: int) -> PollResult:
        membership = self._membership
        node = self._coordinator.coordinator_id
        unsent: list[UnsentRequest[Any]] = []
        wait = MAX_POLL_TIMEOUT_MS
        in_flight = self.in_flight
        if node is None and membership.state is _M.LEAVING and in_flight is None:
            # The coordinator was lost while leaving: as when it is unknown at the start of the
            # leave, the member leaves without a LeaveGroup (the broker expires it).
            membership.finish_leave()
            return PollResult(wait)
        # A LeaveGroup need not wait for a JoinGroup or SyncGroup the coordinator is holding.
        leave_now = membership.state is _M.LEAVING and in_flight in _HELD_BY_COORDINATOR
        backoff_ms = self._retry.remaining_backoff_ms(now_ms)
        if node is not None and (in_flight is None or leave_now) and backoff_ms == 0:
            request = self._state_request(node, now_ms)
            if request is not None:
                unsent.append(request)
        elif in_flight is None and backoff_ms > 0:
            wait = backoff_ms
        if node is not None and membership.state in HEARTBEAT_STATES and self._heartbeat_in_flight is None:
            if now_ms >= self._next_heartbeat_ms:
                unsent.append(self._heartbeat(node, now_ms))
            wait = min(wait, max(0, self._next_heartbeat_ms - now_ms))
        remaining = self.poll_timer.remaining_ms(now_ms)
        if membership.state in HEARTBEAT_STATES and remaining is not None:
            wait = min(wait, remaining)
        if membership.state is _M.AWAITING_SYNC:
            wait = min(wait, _AWAITING_SYNC_POLL_MS)
        return PollResult(max(0, wait), unsent)

    def _state_request(self, node: int, now_ms: int) -> UnsentRequest[Any] | None:
        state = self._membership.state
        if state is _M.JOINING:
            return self._join_request(node)
        if state is _M.AWAITING_SYNC:
            return self._sync_request(node, now_ms)
        if state is _M.LEAVING:
            return self._leave_request(node, now_ms)
        return None

    # -- JoinGroup ------------------------------------------------------------------------------------

    def _join_request(self, node: int) -> UnsentRequest[JoinGroupResponse]:
        membership = self._membership
        reason = membership.take_rejoin_reason()
        request = JoinGroupRequest(
            group_id=self._group_id,
            session_timeout_ms=self._session_timeout_ms,
            rebalance_timeout_ms=self._rebalance_timeout_ms,
            member_id=membership.member_id,
            group_instance_id=membership.instance_id,
            protocol_type="consumer",
            protocols=[
                JoinGroupRequestProtocol(name=name, metadata=metadata)
                for name, metadata in membership.join_protocols()
            ],
            reason=reason or None,
        )
        sent = self._send(RequestKind.JOIN_GROUP)
        # The coordinator holds a JoinGroup until every member rejoined (up to the rebalance
        # timeout), so it gets that long plus a margin, like Java.
        timeout = max(self._request_timeout_ms, self._rebalance_timeout_ms + JOIN_GROUP_TIMEOUT_MARGIN_MS)
        return UnsentRequest(request, node, lambda r: self._on_join_response(r, sent), timeout_ms=timeout)

    def _on_join_response(self, response: ClientResponse[JoinGroupResponse], sent: InFlight) -> None:
        self._answered(sent)
        membership = self._membership
        membership.metrics.tick(response.received_ms)
        if membership.state is not _M.JOINING:
            return
        if response.error is not None:
            self._coordinator.mark_unknown(str(response.error))
            self._retry.on_failure(response.received_ms)
            return
        body = response.body
        if body.error_code == 0:
            self._retry.on_success()
            membership.on_join_succeeded(
                member_id=body.member_id,
                generation=body.generation_id,
                protocol_name=body.protocol_name,
                leader_id=body.leader,
                members=[(m.member_id, m.group_instance_id, bytes(m.metadata)) for m in body.members],
                now_ms=response.received_ms,
            )
            return
        error = error_for_code(body.error_code)
        if issubclass(error, MemberIdRequiredError):
            membership.rejoin_with_member_id(body.member_id)  # KIP-394: join again at once with it
        elif issubclass(error, UnknownMemberIdError):
            membership.rejoin_with_member_id("")
        elif issubclass(error, COORDINATOR_ERRORS):
            self._coordinator.mark_unknown(error.__name__)
            self._retry.on_failure(response.received_ms)
        elif issubclass(error, RebalanceInProgressError):
            self._retry.on_failure(response.received_ms)
        else:
            membership.fail(error(f"JoinGroup for group {self._group_id!r} failed"))

    # -- SyncGroup ------------------------------------------------------------------------------------

    def _sync_request(self, node: int, now_ms: int) -> UnsentRequest[SyncGroupResponse] | None:
        membership = self._membership
        assignments: list[SyncGroupRequestAssignment] = []
        if membership.is_leader:
            computed = membership.leader_assignments(now_ms)
            if computed is None:
                return None  # waiting for metadata of the members' topics (or failed)
            assignments = [SyncGroupRequestAssignment(member_id=m, assignment=a) for m, a in computed]
        request = SyncGroupRequest(
            group_id=self._group_id,
            generation_id=membership.generation,
            member_id=membership.member_id,
            group_instance_id=membership.instance_id,
            protocol_type="consumer",
            protocol_name=membership.protocol_name,
            assignments=assignments,
        )
        sent = self._send(RequestKind.SYNC_GROUP)
        return UnsentRequest(request, node, lambda r: self._on_sync_response(r, sent))

    def _on_sync_response(self, response: ClientResponse[SyncGroupResponse], sent: InFlight) -> None:
        self._answered(sent)
        membership = self._membership
        membership.metrics.tick(response.received_ms)
        now_ms = response.received_ms
        if membership.state is not _M.AWAITING_SYNC:
            return
        if response.error is not None:
            self._coordinator.mark_unknown(str(response.error))
            membership.restart_join()
            self._retry.on_failure(now_ms)
            return
        body = response.body
        if body.error_code == 0:
            self._retry.on_success()
            try:
                assignment = decode_assignment(body.assignment)
            except KafkaError as exc:
                membership.fail(exc)
                return
            # Heartbeat at once (as librdkafka does): a restarted static member refreshes the
            # session it inherited without waiting an interval.
            self._next_heartbeat_ms = now_ms
            membership.on_sync_succeeded(assignment, now_ms)
            return
        error = error_for_code(body.error_code)
        if issubclass(error, FENCING_ERRORS):
            membership.fence(error, forget_member_id=issubclass(error, UnknownMemberIdError))
        elif issubclass(error, (RebalanceInProgressError, *COORDINATOR_ERRORS)):
            if issubclass(error, COORDINATOR_ERRORS):
                self._coordinator.mark_unknown(error.__name__)
            membership.restart_join()
            self._retry.on_failure(now_ms)
        else:
            membership.fail(error(f"SyncGroup for group {self._group_id!r} failed"))

    # -- Heartbeat ------------------------------------------------------------------------------------

    def _heartbeat(self, node: int, now_ms: int) -> UnsentRequest[HeartbeatResponse]:
        membership = self._membership
        sent = self._send(RequestKind.HEARTBEAT)
        self._next_heartbeat_ms = now_ms + self._heartbeat_interval_ms
        membership.metrics.heartbeat_sent(now_ms)
        request = HeartbeatRequest(
            group_id=self._group_id,
            generation_id=membership.generation,
            member_id=membership.member_id,
            group_instance_id=membership.instance_id,
        )
        generation = membership.generation
        return UnsentRequest(request, node, lambda r: self._on_heartbeat_response(r, sent, generation))

    def _on_heartbeat_response(
        self, response: ClientResponse[HeartbeatResponse], sent: InFlight, generation: int
    ) -> None:
        self._answered(sent)
        membership = self._membership
        if response.error is not None:
            membership.metrics.tick(response.received_ms)
            self._coordinator.mark_unknown(str(response.error))
            return
        membership.metrics.heartbeat_answered(
            response.received_ms - response.request.created_ms, response.received_ms
        )
        body = response.body
        code = body.error_code
        if code == 0 or generation != membership.generation or membership.state not in HEARTBEAT_STATES:
            return
        error = error_for_code(code)
        if issubclass(error, RebalanceInProgressError):
            membership.request_rejoin("the coordinator started a rebalance")
        elif issubclass(error, FENCING_ERRORS):
            membership.fence(error, forget_member_id=issubclass(error, UnknownMemberIdError))
        elif issubclass(error, COORDINATOR_ERRORS):
            self._coordinator.mark_unknown(error.__name__)
        else:
            membership.fail(error(f"heartbeat in group {self._group_id!r}"))

    # -- LeaveGroup -----------------------------------------------------------------------------------

    def _leave_request(self, node: int, now_ms: int) -> UnsentRequest[LeaveGroupResponse] | None:
        membership = self._membership
        if not membership.member_id:
            membership.finish_leave()
            return None
        instance_id = membership.instance_id
        min_version: int | None = None
        max_version = MAX_LEAVE_GROUP_VERSION
        if instance_id is None:
            request = LeaveGroupRequest(group_id=self._group_id, member_id=membership.member_id)
        else:
            # A static member leaving (unsubscribe(), close() with LEAVE_GROUP) names its
            # group.instance.id, as Java does (KIP-345/KIP-1092): that needs v3+.
            request = LeaveGroupRequest(
                group_id=self._group_id,
                members=[MemberIdentity(member_id=membership.member_id, group_instance_id=instance_id)],
            )
            min_version, max_version = STATIC_LEAVE_GROUP_MIN_VERSION, MAX_STATIC_LEAVE_GROUP_VERSION
        sent = self._send(RequestKind.LEAVE_GROUP)

        def on_response(response: ClientResponse[LeaveGroupResponse]) -> None:
            self._answered(sent)
            if response.error is not None:
                log.warning(
                    "group %s: the LeaveGroup of member %s failed (%s); the coordinator drops the "
                    "member when its session expires",
                    self._group_id,
                    membership.member_id,
                    response.error,
                )
            if membership.state is _M.LEAVING:
                membership.finish_leave()

        # Best effort: see _leave_deadline_ms.
        return UnsentRequest(
            request,
            node,
            on_response,
            max_version,
            deadline_ms=self._leave_deadline_ms(now_ms),
            min_version=min_version,
        )
