"""What every group protocol's heartbeat request manager shares. [bg, pure: takes now_ms]

Java's ``AbstractHeartbeatRequestManager``. A protocol's heartbeat manager subclasses
:class:`HeartbeatRequestManagerBase` and writes only its requests (``_poll_requests``) and what
their answers mean; the base holds the rest:

* the poll timer (``max.poll.interval.ms``): reset by each ``poll()`` of the application
  (:meth:`~HeartbeatRequestManagerBase.reset_poll_timer`), checked on every pass in the states
  where it runs; once it expired the member leaves the group;
* every pass's start: the membership's metrics are ticked, a FATAL member sends nothing, the
  poll timer is checked, a requested rejoin starts;
* how long the application may stay away (``maximum_time_to_wait``): until the next heartbeat,
  and not at all once the poll timer ran out;
* the leave request's send deadline (:data:`LEAVE_SEND_TIMEOUT_MS`): leaving is best effort;
* the coordinator-error classes every protocol sorts its errors by.

It sees its membership only through :mod:`.contracts`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar

from kaflux.consumer.member_state import MemberState
from kaflux.consumer.membership.contracts import CoordinatorLookup, MembershipContext
from kaflux.consumer.membership.poll_timer import PollTimer
from kaflux.errors import (
    BrokerError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    NotCoordinatorError,
)
from kaflux.network.requests import MAX_POLL_TIMEOUT_MS, PollResult, RequestManager

if TYPE_CHECKING:
    from kaflux.consumer.membership.group import GroupSettings

__all__ = [
    "COORDINATOR_ERRORS",
    "COORDINATOR_LOADING",
    "COORDINATOR_MOVED",
    "LEAVE_SEND_TIMEOUT_MS",
    "HeartbeatRequestManagerBase",
]

#: the coordinator moved or is gone: look it up again
COORDINATOR_MOVED: tuple[type[BrokerError], ...] = (NotCoordinatorError, CoordinatorNotAvailableError)
#: the coordinator is loading the group's state: try again after a backoff
COORDINATOR_LOADING: tuple[type[BrokerError], ...] = (CoordinatorLoadInProgressError,)
#: every coordinator error
COORDINATOR_ERRORS: tuple[type[BrokerError], ...] = (*COORDINATOR_MOVED, *COORDINATOR_LOADING)
#: how long a leave request may wait for a connection to the coordinator before the member
#: leaves without it (the broker expires it after its session)
LEAVE_SEND_TIMEOUT_MS = 1000

C = TypeVar("C", bound=MembershipContext)


class HeartbeatRequestManagerBase(RequestManager, Generic[C]):
    """One group member's heartbeat request manager; ``C`` is what it sees of its membership."""

    #: states in which heartbeats go out (the application must come back before the next)
    HEARTBEAT_STATES: ClassVar[frozenset[MemberState]]
    #: states in which the poll timer runs
    POLL_TIMER_STATES: ClassVar[frozenset[MemberState]]
    #: errors meaning the coordinator no longer knows the member or its generation
    FENCING_ERRORS: ClassVar[tuple[type[BrokerError], ...]]

    def __init__(self, membership: C, coordinator: CoordinatorLookup, settings: GroupSettings) -> None:
        self._membership = membership
        self._coordinator = coordinator
        self._group_id = settings.group_id
        self._rebalance_timeout_ms = settings.rebalance_timeout_ms
        #: ``max.poll.interval.ms``: fed by every ``poll()`` of the application
        self.poll_timer = PollTimer(settings.rebalance_timeout_ms)
        self._next_heartbeat_ms = 0

    def reset_poll_timer(self, now_ms: int) -> None:
        """The application polled at ``now_ms``."""
        self.poll_timer.reset(now_ms)

    # -- request manager ---------------------------------------------------------------------------

    def poll(self, now_ms: int) -> PollResult:
        membership = self._membership
        membership.metrics.tick(now_ms)
        if membership.state is MemberState.FATAL:
            return PollResult()
        self._check_poll_timer(now_ms)
        membership.maybe_rejoin(now_ms)
        return self._poll_requests(now_ms)

    def poll_on_close(self, now_ms: int) -> PollResult:
        return self.poll(now_ms)

    def maximum_time_to_wait(self, now_ms: int) -> int:
        """A member must come back to ``poll()`` in time for its next heartbeat (each poll feeds
        the poll timer), and at once when the poll timer has run out, as in Java."""
        state = self._membership.state
        if state not in self.HEARTBEAT_STATES:
            return MAX_POLL_TIMEOUT_MS
        if state in self.POLL_TIMER_STATES and self.poll_timer.is_expired(now_ms):
            return 0
        return max(0, min(MAX_POLL_TIMEOUT_MS, self._next_heartbeat_ms - now_ms))

    def _poll_requests(self, now_ms: int) -> PollResult:
        """The protocol's requests for this pass (the member is not FATAL)."""
        raise NotImplementedError

    # -- the poll timer and leaving -------------------------------------------------------------------

    def _check_poll_timer(self, now_ms: int) -> None:
        if self._membership.state not in self.POLL_TIMER_STATES or not self.poll_timer.is_expired(now_ms):
            return
        self._on_poll_timer_expired()
        self._membership.leave_on_poll_timeout()

    def _on_poll_timer_expired(self) -> None:
        """The member is about to leave on the poll timeout; a hook."""

    @staticmethod
    def _leave_deadline_ms(now_ms: int) -> int:
        """Leaving is best effort, as in Java: when no connection to the coordinator can be
        made soon, the member leaves without the request rather than holding close() for
        request.timeout.ms."""
        return now_ms + LEAVE_SEND_TIMEOUT_MS
