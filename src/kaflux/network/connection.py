"""One non-blocking socket to one broker. [bg: only the network thread touches it]

The connection is a thin I/O shell over :class:`~kaflux.protocol.framing.BrokerProtocol`.
Its life is a state machine (table below). On connect it negotiates API versions with an
ApiVersions request before any other request may be sent; requests sent while it is not yet
READY are refused, so callers must check :meth:`BrokerConnection.is_ready`.
"""

from __future__ import annotations

import enum
import errno
import socket
from typing import Any

from kaflux.errors import (
    KafkaConnectionError,
    KafkaError,
    ProtocolError,
    UnsupportedVersionError,
    error_for_code,
)
from kaflux.protocol.api import ApiKey, negotiate
from kaflux.protocol.framing import (
    DEFAULT_MAX_RESPONSE_BYTES,
    BrokerProtocol,
    InFlightRequest,
    ReceivedResponse,
    RequestMessage,
)
from kaflux.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kaflux.state_machine import StateMachine

_UNSUPPORTED_VERSION = 35
_CLIENT_SOFTWARE_NAME = "kaflux"
_CLIENT_SOFTWARE_VERSION = "0.1.0"


class ConnectionState(enum.Enum):
    """Where a broker connection is in its life."""

    DISCONNECTED = "disconnected"
    CONNECTING = "connecting"
    CHECKING_API_VERSIONS = "checking_api_versions"
    READY = "ready"


_S = ConnectionState
CONNECTION_TRANSITIONS: dict[ConnectionState, frozenset[ConnectionState]] = {
    _S.DISCONNECTED: frozenset({_S.CONNECTING}),
    _S.CONNECTING: frozenset({_S.CHECKING_API_VERSIONS, _S.DISCONNECTED}),
    _S.CHECKING_API_VERSIONS: frozenset({_S.READY, _S.DISCONNECTED}),
    _S.READY: frozenset({_S.DISCONNECTED}),
}

_API_VERSIONS_CONTEXT = object()


class BrokerConnection:
    """A connection to ``host:port`` for the broker ``node_id``."""

    def __init__(
        self,
        node_id: int,
        host: str,
        port: int,
        *,
        client_id: str,
        send_buffer_bytes: int = 131072,
        receive_buffer_bytes: int = 65536,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        self.node_id = node_id
        self.host = host
        self.port = port
        self._client_id = client_id
        self._send_buffer_bytes = send_buffer_bytes
        self._receive_buffer_bytes = receive_buffer_bytes
        self._machine = StateMachine(f"connection to node {node_id}", _S.DISCONNECTED, CONNECTION_TRANSITIONS)
        self._sock: socket.socket | None = None
        self._protocol = BrokerProtocol(client_id, max_response_bytes=max_response_bytes)
        self._api_versions_version = ApiVersionsRequest.MAX_VERSION
        self.broker_versions: dict[int, tuple[int, int]] = {}
        self.negotiated: dict[ApiKey, int] = {}
        self.connect_started_ms = -1
        self.last_activity_ms = -1
        #: deadline of each in-flight request by correlation id (request.timeout.ms, or the
        #: request's own timeout)
        self._deadlines: dict[int, int] = {}

    # -- state ----------------------------------------------------------------------------

    @property
    def state(self) -> ConnectionState:
        """The connection's current state."""
        return self._machine.state

    def is_ready(self) -> bool:
        """Connected and API versions negotiated: requests may be sent."""
        return self._machine.state is _S.READY

    def is_connected_or_connecting(self) -> bool:
        """Not DISCONNECTED."""
        return self._machine.state is not _S.DISCONNECTED

    def fileno(self) -> int:
        """The socket's file descriptor (only while not DISCONNECTED)."""
        assert self._sock is not None
        return self._sock.fileno()

    def in_flight_count(self) -> int:
        """Requests awaiting a response."""
        return self._protocol.in_flight_count()

    def wants_write(self) -> bool:
        """Whether the selector should wait for writability."""
        return self._machine.state is _S.CONNECTING or self._protocol.has_pending_output()

    def next_deadline_ms(self) -> int | None:
        """The earliest deadline of an in-flight request, or None."""
        return min(self._deadlines.values()) if self._deadlines else None

    def in_flight(self) -> list[InFlightRequest]:
        """Requests awaiting a response, oldest first."""
        return self._protocol.in_flight()

    # -- I/O -------------------------------------------------------------------------------

    def connect(self, now_ms: int) -> None:
        """Start a non-blocking connect. Raises KafkaConnectionError if it fails at once."""
        self._machine.transition_to(_S.CONNECTING)
        self.connect_started_ms = now_ms
        self.last_activity_ms = now_ms
        try:
            infos = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
            family, kind, proto, _, address = infos[0]
            sock = socket.socket(family, kind, proto)
        except OSError as exc:
            self._machine.transition_to(_S.DISCONNECTED)
            raise KafkaConnectionError(
                f"cannot resolve or open a socket to {self.host}:{self.port}: {exc}"
            ) from exc
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self._send_buffer_bytes > 0:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._send_buffer_bytes)
        if self._receive_buffer_bytes > 0:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._receive_buffer_bytes)
        self._sock = sock
        code = sock.connect_ex(address)
        if code not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK):
            self._close_socket()
            self._machine.transition_to(_S.DISCONNECTED)
            raise KafkaConnectionError(
                f"connect to {self.host}:{self.port} failed: {errno.errorcode.get(code, code)}"
            )

    def on_writable(self, now_ms: int) -> None:
        """The socket is writable: finish connecting, or flush queued bytes."""
        assert self._sock is not None
        if self._machine.state is _S.CONNECTING:
            code = self._sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code != 0:
                raise KafkaConnectionError(
                    f"connect to {self.host}:{self.port} failed: {errno.errorcode.get(code, code)}"
                )
            self._machine.transition_to(_S.CHECKING_API_VERSIONS)
            self._send_api_versions(now_ms)
        self._flush(now_ms)

    def _flush(self, now_ms: int) -> None:
        assert self._sock is not None
        while self._protocol.has_pending_output():
            try:
                sent = self._sock.send(self._protocol.pending_output())
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                raise KafkaConnectionError(f"send to {self.host}:{self.port} failed: {exc}") from exc
            self._protocol.output_sent(sent)
            self.last_activity_ms = now_ms

    def on_readable(
        self, now_ms: int, out: list[ReceivedResponse], max_bytes: int = 64 * 1024 * 1024
    ) -> None:
        """Read what is available (up to about ``max_bytes``), appending completed responses
        to ``out`` as they complete.

        Raises KafkaConnectionError (the broker closed, or the socket failed) or ProtocolError
        (a malformed frame) *after* appending every response completed before the failure,
        so a response that arrives in the same read as the connection's close is delivered,
        not lost; requests still in flight then fail with the connection (:meth:`close`).
        The ApiVersions handshake is handled here and never returned.
        """
        assert self._sock is not None
        total = 0
        while total < max_bytes:
            try:
                count = self._sock.recv_into(self._protocol.recv_buffer())
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                raise KafkaConnectionError(f"receive from {self.host}:{self.port} failed: {exc}") from exc
            if count == 0:
                raise KafkaConnectionError(f"broker {self.host}:{self.port} closed the connection")
            total += count
            self.last_activity_ms = now_ms
            for response in self._protocol.data_received(count):
                self._deadlines.pop(response.in_flight.correlation_id, None)
                if response.in_flight.context is _API_VERSIONS_CONTEXT:
                    self._on_api_versions(response.body, now_ms)
                else:
                    out.append(response)

    def send(
        self,
        request: RequestMessage,
        api_version: int,
        context: Any,
        now_ms: int,
        timeout_ms: int,
        *,
        expect_response: bool = True,
    ) -> InFlightRequest:
        """Queue ``request`` and try to write it at once. Only when READY."""
        if self._machine.state is not _S.READY:
            raise KafkaConnectionError(f"connection to node {self.node_id} is not ready")
        in_flight = self._protocol.send_request(
            request, api_version, context, expect_response=expect_response
        )
        if expect_response:
            self._deadlines[in_flight.correlation_id] = now_ms + timeout_ms
        self._flush(now_ms)
        return in_flight

    def close(self) -> list[InFlightRequest]:
        """Close the socket; returns the requests that were in flight (to be failed)."""
        failed = [r for r in self._protocol.fail_all() if r.context is not _API_VERSIONS_CONTEXT]
        self._deadlines.clear()
        self._close_socket()
        if self._machine.state is not _S.DISCONNECTED:
            self._machine.transition_to(_S.DISCONNECTED)
        return failed

    def _close_socket(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    # -- ApiVersions handshake --------------------------------------------------------------

    def _send_api_versions(self, now_ms: int, timeout_ms: int = 30_000) -> None:
        request = ApiVersionsRequest(
            client_software_name=_CLIENT_SOFTWARE_NAME, client_software_version=_CLIENT_SOFTWARE_VERSION
        )
        in_flight = self._protocol.send_request(request, self._api_versions_version, _API_VERSIONS_CONTEXT)
        self._deadlines[in_flight.correlation_id] = now_ms + timeout_ms

    def _on_api_versions(self, response: ApiVersionsResponse, now_ms: int) -> None:
        versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        if response.error_code == _UNSUPPORTED_VERSION and self._api_versions_version > 0:
            # The broker lists what it supports even in this error; retry at its highest.
            broker_max = versions.get(int(ApiKey.API_VERSIONS), (0, 0))[1]
            self._api_versions_version = min(broker_max, self._api_versions_version - 1)
            self._send_api_versions(now_ms)
            return
        if response.error_code != 0:
            raise error_for_code(response.error_code)(f"ApiVersions to node {self.node_id} failed")
        self.broker_versions = versions
        self.negotiated = negotiate(versions)
        self._machine.transition_to(_S.READY)

    def version_for(self, api_key: ApiKey) -> int:
        """The negotiated version of ``api_key``; raises UnsupportedVersionError if none."""
        version = self.negotiated.get(api_key)
        if version is None:
            raise UnsupportedVersionError(
                f"broker node {self.node_id} ({self.host}:{self.port}) supports no version of "
                f"{api_key.name} that kaflux implements"
            )
        return version


def describe_failure(exc: BaseException) -> KafkaError:
    """Translate anything raised by connection I/O into a retriable kaflux error."""
    if isinstance(exc, KafkaError) and not isinstance(exc, ProtocolError):
        return exc
    return KafkaConnectionError(f"connection failed: {exc}")
