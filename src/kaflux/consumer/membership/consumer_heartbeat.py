"""The KIP-848 consumer protocol's ConsumerGroupHeartbeat requests. [bg, pure: takes now_ms]

Java's ``ConsumerHeartbeatRequestManager``. One request does everything: joining (epoch 0),
staying in the group, receiving the target assignment, acknowledging it and leaving (epoch -1,
or -2 for a static member closing without LEAVE_GROUP; a dynamic member closing with
REMAIN_IN_GROUP sends none, KIP-1092). Each ``poll(now_ms)``:

* checks the poll timer (``max.poll.interval.ms``): once it expired the member leaves;
* sends a heartbeat at once when joining (until the first answer of this join), when
  acknowledging an assignment, or when leaving; otherwise every heartbeat interval, which the
  coordinator sets in its answers, also while the leave's callbacks run (PREPARE_LEAVING with a
  valid epoch). At most one heartbeat is in flight, but a leave does not wait.
* builds the request with every field when joining or after any failure, and otherwise only
  what changed: the subscription when it changed, the owned partitions when acknowledging.
  The subscribed names always go with a regex (``""`` when subscribing by name): real brokers
  take that, and librdkafka's mock cluster aborts on names without one.

Errors are classified by their classes in :mod:`kaflux.errors`: coordinator errors look the
coordinator up again; COORDINATOR_LOAD_IN_PROGRESS backs off; FENCED_MEMBER_EPOCH and
UNKNOWN_MEMBER_ID fence the member (partitions lost, rejoin at epoch 0); anything else
(authorization, unsupported version or assignor, fenced instance id...) is fatal. A response
to a heartbeat sent before the member rejoined or left is dropped.

It sees its membership (:class:`~.consumer_membership.ConsumerMembershipManager`) only as a
:class:`~.contracts.ConsumerMembershipContext`; the poll timer, the leave's send deadline and
the coordinator-error classes are the shared :class:`~.heartbeat.HeartbeatRequestManagerBase`'s.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kaflux.consumer.member_state import CONSUMER_HEARTBEAT_STATES, MemberState
from kaflux.consumer.membership.contracts import ConsumerMembershipContext
from kaflux.consumer.membership.epoch_heartbeat import EpochHeartbeatRequestManager
from kaflux.consumer.membership.heartbeat import (
    COORDINATOR_LOADING,
    COORDINATOR_MOVED,
)
from kaflux.errors import (
    BrokerError,
    FencedMemberEpochError,
    InvalidRegularExpressionError,
    UnknownMemberIdError,
    UnsupportedVersionError,
    error_for_code,
)
from kaflux.network.backoff import ExponentialBackoff
from kaflux.network.requests import MAX_POLL_TIMEOUT_MS, ClientResponse, PollResult, UnsentRequest
from kaflux.protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)

if TYPE_CHECKING:
    from kaflux.consumer.coordinator_request_manager import CoordinatorRequestManager
    from kaflux.consumer.membership.group import GroupSettings

log = logging.getLogger(__name__)

_M = MemberState
#: v1 (Kafka 4.0) carries the subscribed regex; the mock cluster serves only v1.
MAX_CONSUMER_GROUP_HEARTBEAT_VERSION = 1
#: the member epoch or id is no longer valid: the member is fenced
FENCING_ERRORS: tuple[type[BrokerError], ...] = (FencedMemberEpochError, UnknownMemberIdError)


@dataclass(eq=False, slots=True)
class _Sent:
    """A heartbeat in flight, with the member incarnation it was sent in."""

    incarnation: int
    leave: bool = False


class ConsumerHeartbeatRequestManager(EpochHeartbeatRequestManager[ConsumerMembershipContext]):
    """ConsumerGroupHeartbeat for one KIP-848 group member."""

    HEARTBEAT_STATES = CONSUMER_HEARTBEAT_STATES
    POLL_TIMER_STATES = CONSUMER_HEARTBEAT_STATES
    FENCING_ERRORS = FENCING_ERRORS

    def __init__(
        self,
        membership: ConsumerMembershipContext,
        coordinator: CoordinatorRequestManager,
        settings: GroupSettings,
        retry_backoff: ExponentialBackoff,
        remote_assignor: str | None,
    ) -> None:
        super().__init__(membership, coordinator, settings, retry_backoff)
        self._rack = settings.client_rack or None
        self._remote_assignor = remote_assignor
        self._in_flight: _Sent | None = None
        self._leave_in_flight: _Sent | None = None

    # -- request manager ---------------------------------------------------------------------------

    def _poll_requests(self, now_ms: int) -> PollResult:
        membership = self._membership
        node = self._coordinator.coordinator_id
        state = membership.state
        if node is None:
            if state is _M.LEAVING and self._leave_in_flight is None:
                # No coordinator to tell: leave without the request (the broker expires us).
                membership.finish_leave()
            return PollResult()
        if state is _M.LEAVING:
            if self._leave_in_flight is not None:
                return PollResult()
            return PollResult(MAX_POLL_TIMEOUT_MS, [self._leave_request(node, now_ms)])
        if not self._heartbeats_in(state) or self._in_flight is not None:
            return PollResult()  # the response (or a state change) brings the next pass
        backoff_ms = self._retry.remaining_backoff_ms(now_ms)
        if backoff_ms > 0:
            return PollResult(backoff_ms)
        due = (
            state is _M.ACKNOWLEDGING
            or (state is _M.JOINING and self._answered_join != membership.incarnation)
            or now_ms >= self._next_heartbeat_ms
        )
        if not due:
            return PollResult(self._next_heartbeat_ms - now_ms)
        return PollResult(max(1, self.interval_ms), [self._heartbeat(node, now_ms)])

    def _heartbeats_in(self, state: MemberState) -> bool:
        """The heartbeat states, and PREPARE_LEAVING while the member keeps a valid epoch (as
        Java): a slow ``on_partitions_revoked`` in unsubscribe() or close() must not let its
        session expire before the leave heartbeat goes."""
        return state in CONSUMER_HEARTBEAT_STATES or (
            state is _M.PREPARE_LEAVING and self._membership.epoch > 0
        )

    def _on_poll_timer_expired(self) -> None:
        self._in_flight = None  # its answer belongs to the member that is leaving

    # -- requests -----------------------------------------------------------------------------------

    def _heartbeat(self, node: int, now_ms: int) -> UnsentRequest[ConsumerGroupHeartbeatResponse]:
        membership = self._membership
        state = membership.state
        joining = state is _M.JOINING
        full = joining or self._send_all
        request = ConsumerGroupHeartbeatRequest(
            group_id=self._group_id,
            member_id=membership.member_id,
            member_epoch=membership.epoch,
            instance_id=membership.instance_id,
        )
        if membership.take_subscription_change() or full:
            request.subscribed_topic_names = membership.subscribed_topics()
            # The SubscriptionPattern for the coordinator to resolve, else an empty regex with the
            # names, as librdkafka sends (its mock cluster aborts on names without a regex; Kafka
            # takes an empty one as "no regex").
            request.subscribed_topic_regex = membership.subscribed_regex() or ""
        if full:
            request.rebalance_timeout_ms = self._rebalance_timeout_ms
            request.server_assignor = self._remote_assignor
            request.rack_id = self._rack
            request.topic_partitions = [] if joining else membership.owned_topic_partitions()
        elif state is _M.ACKNOWLEDGING:
            request.topic_partitions = membership.owned_topic_partitions()
        self._send_all = False
        self._next_heartbeat_ms = now_ms + self.interval_ms
        sent = self._in_flight = _Sent(membership.incarnation)
        self.heartbeats_sent += 1
        membership.metrics.heartbeat_sent(now_ms)
        membership.on_heartbeat_request_generated()
        return UnsentRequest(
            request,
            node,
            lambda response: self._on_response(response, sent),
            MAX_CONSUMER_GROUP_HEARTBEAT_VERSION,
        )

    def _leave_request(self, node: int, now_ms: int) -> UnsentRequest[ConsumerGroupHeartbeatResponse]:
        membership = self._membership
        # Every optional field null, as librdkafka leaves (the mock aborts on an empty
        # subscription without a regex).
        request = ConsumerGroupHeartbeatRequest(
            group_id=self._group_id,
            member_id=membership.member_id,
            member_epoch=membership.leave_epoch(),
            instance_id=membership.instance_id,
        )
        sent = self._leave_in_flight = _Sent(membership.incarnation, leave=True)

        def on_response(response: ClientResponse[ConsumerGroupHeartbeatResponse]) -> None:
            if self._leave_in_flight is sent:
                self._leave_in_flight = None
            self._send_all = True
            if membership.state is _M.LEAVING:
                membership.finish_leave()

        # Best effort: see _leave_deadline_ms.
        return UnsentRequest(
            request,
            node,
            on_response,
            MAX_CONSUMER_GROUP_HEARTBEAT_VERSION,
            deadline_ms=self._leave_deadline_ms(now_ms),
        )

    # -- responses ----------------------------------------------------------------------------------

    def _unsupported(self, cause: UnsupportedVersionError) -> UnsupportedVersionError:
        return UnsupportedVersionError(
            f"group {self._group_id!r}: the coordinator does not support ConsumerGroupHeartbeat, "
            f"so the consumer group protocol (KIP-848) cannot be used ({cause}); set "
            "group.protocol=classic"
        )

    def _on_response(self, response: ClientResponse[ConsumerGroupHeartbeatResponse], sent: _Sent) -> None:
        if self._in_flight is sent:
            self._in_flight = None
        membership = self._membership
        if response.error is None:
            membership.metrics.heartbeat_answered(
                response.received_ms - response.request.created_ms, response.received_ms
            )
        else:
            membership.metrics.tick(response.received_ms)
        if sent.incarnation != membership.incarnation:
            return  # sent before the member rejoined or left: its answer is out of date
        now_ms = response.received_ms
        body: ConsumerGroupHeartbeatResponse | None = self._read_answer(response, now_ms)
        if body is None:
            return
        if body.error_code == 0:
            membership.on_heartbeat_success(body.member_epoch, body.assignment, now_ms)
            return
        error = error_for_code(body.error_code)
        detail = f"heartbeat of member {membership.member_id!r} in group {self._group_id!r}"
        if body.error_message:
            detail += f": {body.error_message}"
        if issubclass(error, COORDINATOR_MOVED):
            self._coordinator.mark_unknown(error.__name__)
        elif issubclass(error, COORDINATOR_LOADING):
            self._retry.on_failure(now_ms)
        elif issubclass(error, FENCING_ERRORS):
            membership.fence(error, forget_member_id=False)
        elif issubclass(error, UnsupportedVersionError):
            membership.fail(
                error(
                    f"{detail}: the cluster does not support the consumer group protocol (KIP-848); "
                    "set group.protocol=classic"
                )
            )
        elif issubclass(error, InvalidRegularExpressionError):
            membership.fail(
                error(
                    f"{detail}: the coordinator refused the subscribed pattern "
                    f"{membership.subscribed_regex()!r}; a SubscriptionPattern is in RE2J syntax "
                    "(no lookarounds or backreferences); subscribe again with a valid one"
                )
            )
        else:
            membership.fail(error(detail))
