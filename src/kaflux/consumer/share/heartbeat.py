"""ShareGroupHeartbeat for one share group member (KIP-932). [bg, pure: takes now_ms]

Java's ``ShareHeartbeatRequestManager``, which extends ``AbstractHeartbeatRequestManager``: here
:class:`ShareHeartbeatRequestManager` subclasses
:class:`~kaflux.consumer.membership.heartbeat.HeartbeatRequestManagerBase` and sees its
membership only through :class:`~kaflux.consumer.membership.contracts.ShareMembershipContext`.
One request joins (epoch 0), keeps the member in the group, brings its assignment, and leaves
(epoch -1). The base starts each pass (metrics ticked, a FATAL member sends nothing); a share
member runs no poll timer (``POLL_TIMER_STATES`` is empty). Then :meth:`_poll_requests`:

* without a coordinator, waits for one (a LEAVING member leaves without telling it: the
  broker expires it after its session);
* when LEAVING, sends the leave heartbeat (best effort, bounded by the base's leave deadline);
* when JOINING, heartbeats at once; when STABLE, every heartbeat interval the coordinator
  sets. At most one heartbeat is in flight.

The first heartbeat of a join, and any after a failure, carries the subscription; later ones
only when it changed. Errors: the coordinator moved (the base's ``COORDINATOR_MOVED``): look it
up again; it is loading (``COORDINATOR_LOADING``): back off; FENCED_MEMBER_EPOCH and
UNKNOWN_MEMBER_ID (``FENCING_ERRORS``) fence the member (it rejoins at epoch 0); anything else
is fatal. An answer to a heartbeat sent before the member rejoined or left is dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kaflux.consumer.member_state import SHARE_HEARTBEAT_STATES, MemberState
from kaflux.consumer.membership.contracts import CoordinatorLookup, ShareMembershipContext
from kaflux.consumer.membership.epoch_heartbeat import EpochHeartbeatRequestManager
from kaflux.consumer.membership.heartbeat import (
    COORDINATOR_LOADING,
    COORDINATOR_MOVED,
)
from kaflux.errors import (
    FencedMemberEpochError,
    UnknownMemberIdError,
    UnsupportedVersionError,
    error_for_code,
)
from kaflux.network.backoff import ExponentialBackoff
from kaflux.network.requests import (
    MAX_POLL_TIMEOUT_MS,
    ClientResponse,
    PollResult,
    UnsentRequest,
)
from kaflux.protocol.messages.share_group_heartbeat import (
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from kaflux.consumer.membership.group import GroupSettings

__all__ = ["MAX_SHARE_GROUP_HEARTBEAT_VERSION", "ShareHeartbeatRequestManager"]

_S = MemberState
#: v1 is the first stable version (Kafka 4.1), and what librdkafka's mock cluster serves
MAX_SHARE_GROUP_HEARTBEAT_VERSION = 1
#: the member epoch that leaves the group
LEAVE_EPOCH = -1


@dataclass(eq=False, slots=True)
class _Sent:
    incarnation: int


class ShareHeartbeatRequestManager(EpochHeartbeatRequestManager[ShareMembershipContext]):
    """ShareGroupHeartbeat for one share group member."""

    HEARTBEAT_STATES = SHARE_HEARTBEAT_STATES
    #: a share consumer has no max.poll.interval.ms (the config refuses it; the broker's
    #: acquisition lock bounds how long records stay with a member): no poll timer runs
    POLL_TIMER_STATES = frozenset[MemberState]()
    FENCING_ERRORS = (FencedMemberEpochError, UnknownMemberIdError)

    def __init__(
        self,
        membership: ShareMembershipContext,
        coordinator: CoordinatorLookup,
        settings: GroupSettings,
        retry_backoff: ExponentialBackoff,
        *,
        on_heartbeat: Callable[[int], None] | None = None,
    ) -> None:
        super().__init__(membership, coordinator, settings, retry_backoff)
        self._rack = settings.client_rack or None
        self._on_heartbeat = on_heartbeat
        self._in_flight: _Sent | None = None
        self._leave_in_flight = False

    # -- request manager --------------------------------------------------------------------------

    def _poll_requests(self, now_ms: int) -> PollResult:
        membership = self._membership
        state = membership.state
        node = self._coordinator.coordinator_id
        if node is None:
            if state is _S.LEAVING and not self._leave_in_flight:
                membership.finish_leave()
            return PollResult()
        if state is _S.LEAVING:
            if self._leave_in_flight:
                return PollResult()
            return PollResult(MAX_POLL_TIMEOUT_MS, [self._leave_request(node, now_ms)])
        if state not in SHARE_HEARTBEAT_STATES or self._in_flight is not None:
            return PollResult()
        backoff_ms = self._retry.remaining_backoff_ms(now_ms)
        if backoff_ms > 0:
            return PollResult(backoff_ms)
        due = (state is _S.JOINING and self._answered_join != membership.incarnation) or (
            now_ms >= self._next_heartbeat_ms
        )
        if not due:
            return PollResult(self._next_heartbeat_ms - now_ms)
        return PollResult(max(1, self.interval_ms), [self._heartbeat(node, now_ms)])

    # -- requests ---------------------------------------------------------------------------------

    def _heartbeat(self, node: int, now_ms: int) -> UnsentRequest[ShareGroupHeartbeatResponse]:
        membership = self._membership
        full = membership.state is _S.JOINING or self._send_all
        request = ShareGroupHeartbeatRequest(
            group_id=self._group_id, member_id=membership.member_id, member_epoch=membership.epoch
        )
        if membership.state is _S.JOINING:
            membership.on_join_sent()
        if membership.take_subscription_change() or full:
            request.subscribed_topic_names = sorted(membership.subscription())
        if full:
            request.rack_id = self._rack
        self._send_all = False
        self._next_heartbeat_ms = now_ms + self.interval_ms
        sent = self._in_flight = _Sent(membership.incarnation)
        self.heartbeats_sent += 1
        if self._on_heartbeat is not None:
            self._on_heartbeat(now_ms)
        return UnsentRequest(
            request,
            node,
            lambda response: self._on_response(response, sent),
            MAX_SHARE_GROUP_HEARTBEAT_VERSION,
        )

    def _leave_request(self, node: int, now_ms: int) -> UnsentRequest[ShareGroupHeartbeatResponse]:
        membership = self._membership
        request = ShareGroupHeartbeatRequest(
            group_id=self._group_id, member_id=membership.member_id, member_epoch=LEAVE_EPOCH
        )
        self._leave_in_flight = True

        def on_response(response: ClientResponse[ShareGroupHeartbeatResponse]) -> None:
            self._leave_in_flight = False
            self._send_all = True
            membership.finish_leave()

        return UnsentRequest(
            request,
            node,
            on_response,
            MAX_SHARE_GROUP_HEARTBEAT_VERSION,
            deadline_ms=self._leave_deadline_ms(now_ms),
        )

    # -- responses --------------------------------------------------------------------------------

    def _unsupported(self, cause: UnsupportedVersionError) -> UnsupportedVersionError:
        return UnsupportedVersionError(
            f"share group {self._group_id!r}: the cluster does not serve ShareGroupHeartbeat "
            f"v1 or later, so share groups (KIP-932) cannot be used ({cause}); use a "
            "Kafka 4.1+ cluster with share groups enabled"
        )

    def _on_response(self, response: ClientResponse[ShareGroupHeartbeatResponse], sent: _Sent) -> None:
        if self._in_flight is sent:
            self._in_flight = None
        membership = self._membership
        if sent.incarnation != membership.incarnation:
            return  # sent before the member rejoined or left
        now_ms = response.received_ms
        body: ShareGroupHeartbeatResponse | None = self._read_answer(response, now_ms)
        if body is None:
            return
        if body.error_code == 0:
            assignment = None
            if body.assignment is not None:
                assignment = {tp.topic_id: list(tp.partitions) for tp in body.assignment.topic_partitions}
            membership.on_heartbeat_success(body.member_id, body.member_epoch, assignment)
            return
        error = error_for_code(body.error_code)
        detail = f"share group heartbeat of member {membership.member_id!r} in group {self._group_id!r}"
        if body.error_message:
            detail += f": {body.error_message}"
        if issubclass(error, COORDINATOR_MOVED):
            self._coordinator.mark_unknown(error.__name__)
        elif issubclass(error, COORDINATOR_LOADING):
            self._retry.on_failure(now_ms)
        elif issubclass(error, self.FENCING_ERRORS):
            membership.fence(error, forget_member_id=False)  # a share member keeps its id
        else:
            membership.fail(error(detail))
