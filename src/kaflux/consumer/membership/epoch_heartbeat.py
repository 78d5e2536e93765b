"""The heartbeat of the broker-driven protocols (KIP-848 consumer groups, KIP-932 share
groups): one request carries the member's epoch, the broker sets the interval and the
assignment. What both heartbeats do alike with an answer lives here, as Java's
``AbstractHeartbeatRequestManager`` keeps it for its consumer and share heartbeats.
[bg, pure: takes now_ms]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from kaflux.consumer.member_state import MemberState
from kaflux.consumer.membership.contracts import CoordinatorLookup, EpochMembershipContext
from kaflux.consumer.membership.heartbeat import HeartbeatRequestManagerBase
from kaflux.errors import KafkaConnectionError, UnsupportedVersionError
from kaflux.network.backoff import ExponentialBackoff, RequestState
from kaflux.network.requests import ClientResponse

if TYPE_CHECKING:
    from kaflux.consumer.membership.group import GroupSettings

__all__ = ["EpochHeartbeatRequestManager"]

E = TypeVar("E", bound=EpochMembershipContext)


class EpochHeartbeatRequestManager(HeartbeatRequestManagerBase[E]):
    """A heartbeat whose answers carry an error code, an interval and the member's epoch."""

    def __init__(
        self,
        membership: E,
        coordinator: CoordinatorLookup,
        settings: GroupSettings,
        retry_backoff: ExponentialBackoff,
    ) -> None:
        super().__init__(membership, coordinator, settings)
        self._retry = RequestState(retry_backoff)
        #: set by the coordinator's answers (0: none yet, heartbeat at once)
        self.interval_ms = 0
        #: the next heartbeat carries every field (joining, or after a failure)
        self._send_all = True
        #: the incarnation whose join the coordinator answered (joining heartbeats then wait
        #: for the interval, as librdkafka's do, instead of repeating at once)
        self._answered_join = -1
        self.heartbeats_sent = 0

    def _unsupported(self, cause: UnsupportedVersionError) -> UnsupportedVersionError:
        """The error that fails the member when the cluster does not serve this heartbeat."""
        raise NotImplementedError

    def _read_answer(self, response: ClientResponse[Any], now_ms: int) -> Any | None:
        """The answer's body, for the protocol to act on; None when it was handled here: an
        unsupported API fails the member, a lost request backs off (looking the coordinator up
        again after a lost connection). A body with an error code asks for a full heartbeat at
        once (after any backoff); one without takes the broker's interval and notes an answered
        join."""
        membership = self._membership
        if isinstance(response.error, UnsupportedVersionError):
            membership.fail(self._unsupported(response.error))
            return None
        if response.error is not None:
            self._send_all = True
            self._retry.on_failure(now_ms)
            if isinstance(response.error, KafkaConnectionError):
                self._coordinator.mark_unknown(str(response.error))
            return None
        body = response.body
        if body.error_code:
            self._send_all = True
            self._next_heartbeat_ms = now_ms
            return body
        self._retry.on_success()
        interval = body.heartbeat_interval_ms
        if interval > 0 and interval != self.interval_ms:
            self._next_heartbeat_ms += interval - self.interval_ms
            self.interval_ms = interval
        if membership.state is MemberState.JOINING:
            self._answered_join = membership.incarnation
        return body
