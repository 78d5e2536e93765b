"""The contract between request managers and the network layer, without any I/O. [pure]

Request managers never send anything: their ``poll(now_ms)`` returns a :class:`PollResult` of
:class:`UnsentRequest` objects; the network thread hands them to the network layer, which
completes each exactly once with a :class:`ClientResponse` (a decoded body or an error) by
calling the request's handler on the network thread. Everything here is plain data, so the
managers that use it stay free of sockets, selectors and clocks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from kaflux.errors import IllegalStateError, KafkaError
from kaflux.protocol.framing import RequestMessage

#: The longest the network thread sleeps in one poll when no manager asks for sooner.
MAX_POLL_TIMEOUT_MS = 5000


#: the response type of a request, as its generated class declares it
R = TypeVar("R")


@dataclass(slots=True)
class ClientRequest:
    """A request to send to one broker, with the callback that receives its outcome.
    The network layer's own record; managers deal in :class:`UnsentRequest`."""

    node_id: int
    request: RequestMessage[Any]
    callback: Callable[[ClientResponse[Any]], None]
    created_ms: int
    expect_response: bool = True
    #: highest version the caller can build (None: whatever both sides support)
    max_version: int | None = None
    #: how long to wait for the response (None: request.timeout.ms)
    timeout_ms: int | None = None
    #: lowest version that carries the request's meaning (Java's oldest allowed version): a
    #: broker offering only older ones fails the request with UnsupportedVersionError unsent
    min_version: int | None = None


class ClientResponse(Generic[R]):
    """The outcome of a :class:`ClientRequest`: a decoded :attr:`body` or an :attr:`error`."""

    __slots__ = ("_body", "api_version", "error", "received_ms", "request")

    def __init__(
        self,
        request: ClientRequest,
        body: R | None,
        error: KafkaError | None,
        api_version: int,
        received_ms: int,
    ) -> None:
        self.request = request
        self._body = body
        self.error = error
        self.api_version = api_version
        self.received_ms = received_ms

    @property
    def body(self) -> R:
        """The decoded response. Raises IllegalStateError when there is none: the request
        failed (read :attr:`error` first) or expected no response."""
        body = self._body
        if body is None:
            raise IllegalStateError(
                f"no response body to read: the request failed with {self.error!r}"
                if self.error is not None
                else "no response body to read: the request expected no response"
            )
        return body

    def __repr__(self) -> str:
        return f"ClientResponse(body={self._body!r}, error={self.error!r}, api_version={self.api_version})"


@dataclass(slots=True)
class UnsentRequest(Generic[R]):
    """A request a manager wants sent. ``node_id=None`` means the least-loaded broker. The
    handler takes responses of the request's own response type (checked by mypy)."""

    request: RequestMessage[R]
    node_id: int | None
    handler: Callable[[ClientResponse[R]], None]
    max_version: int | None = None
    expect_response: bool = True
    #: how long to wait for the response once sent (None: request.timeout.ms)
    timeout_ms: int | None = None
    #: the request fails if still unsent by then; the delegate sets now + request.timeout.ms
    #: unless the manager set an earlier one
    deadline_ms: int = -1
    #: lowest version that carries the request's meaning (see :class:`ClientRequest`)
    min_version: int | None = None
    #: fail at once (KafkaConnectionError, retriable) when connecting to ``node_id`` failed,
    #: instead of waiting up to request.timeout.ms for it to come back: for a request to a
    #: coordinator, whose manager then finds the coordinator again (a dead broker's successor)
    fail_on_connection_failure: bool = False


@dataclass(slots=True)
class PollResult:
    """What a request manager's ``poll`` returns."""

    time_until_next_poll_ms: int = MAX_POLL_TIMEOUT_MS
    unsent: list[UnsentRequest[Any]] = field(default_factory=list)


class RequestManager(Protocol):
    """A source of requests for the network thread. No method does I/O or blocks. Managers
    subclass this explicitly, to inherit the default :meth:`maximum_time_to_wait`."""

    def poll(self, now_ms: int) -> PollResult:
        """The requests to send now, and how soon to be polled again."""
        ...

    def poll_on_close(self, now_ms: int) -> PollResult:
        """The last requests to send while the client closes (commits, a LeaveGroup...)."""
        ...

    def maximum_time_to_wait(self, now_ms: int) -> int:
        """How long the application thread may stay blocked in ``poll()`` before this manager
        needs it back (a heartbeat manager: to feed the poll timer before the next heartbeat).
        Most managers never need it sooner than the longest poll slice."""
        return MAX_POLL_TIMEOUT_MS
