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
from typing import Any, Protocol

from kaflux.errors import KafkaError
from kaflux.protocol.framing import RequestMessage

#: The longest the network thread sleeps in one poll when no manager asks for sooner.
MAX_POLL_TIMEOUT_MS = 5000


@dataclass(slots=True)
class ClientRequest:
    """A request to send to one broker, with the callback that receives its outcome."""

    node_id: int
    request: RequestMessage
    callback: Callable[[ClientResponse], None]
    created_ms: int
    expect_response: bool = True
    #: highest version the caller can build (None: whatever both sides support)
    max_version: int | None = None
    #: how long to wait for the response (None: request.timeout.ms)
    timeout_ms: int | None = None


@dataclass(slots=True)
class ClientResponse:
    """The outcome of a :class:`ClientRequest`: a decoded ``body`` or an ``error``."""

    request: ClientRequest
    body: Any
    error: KafkaError | None
    api_version: int
    received_ms: int


@dataclass(slots=True)
class UnsentRequest:
    """A request a manager wants sent. ``node_id=None`` means the least-loaded broker."""

    request: RequestMessage
    node_id: int | None
    handler: Callable[[ClientResponse], None]
    max_version: int | None = None
    expect_response: bool = True
    #: how long to wait for the response once sent (None: request.timeout.ms)
    timeout_ms: int | None = None
    #: the request fails if still unsent by then; the delegate sets now + request.timeout.ms
    #: unless the manager set an earlier one
    deadline_ms: int = -1


@dataclass(slots=True)
class PollResult:
    """What a request manager's ``poll`` returns."""

    time_until_next_poll_ms: int = MAX_POLL_TIMEOUT_MS
    unsent: list[UnsentRequest] = field(default_factory=list)


class RequestManager(Protocol):
    """A source of requests for the network thread. Neither method does I/O or blocks."""

    def poll(self, now_ms: int) -> PollResult:
        """The requests to send now, and how soon to be polled again."""
        ...

    def poll_on_close(self, now_ms: int) -> PollResult:
        """The last requests to send while the client closes (commits, a LeaveGroup...)."""
        ...
