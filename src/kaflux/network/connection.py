"""One non-blocking socket to one broker. [bg: only the network thread touches it]

The connection is a thin I/O shell over :class:`~kaflux.protocol.framing.BrokerProtocol`.
Its life is a state machine (table below). After the TCP connect it runs the TLS handshake
(security.protocol SSL/SASL_SSL), negotiates API versions with an ApiVersions request, and
authenticates with SASL (SASL_PLAINTEXT/SASL_SSL; :mod:`kaflux.network.sasl`) before any
other request may be sent; requests sent while it is not READY are refused, so callers must
check :meth:`BrokerConnection.is_ready`. When the broker limits the SASL session (KIP-368),
:meth:`BrokerConnection.start_reauthentication` runs the exchange again on the open
connection before the session ends.

Failures of the handshake or the login are classified by their cause, as Java does. A refusal
(the broker's certificate is not trusted, a TLS alert, the broker rejects the login) raises
an :class:`~kaflux.errors.AuthenticationError` subclass naming the broker and what to check;
so does a security.protocol that does not match the listener (a TLS answer to a plaintext
client). A connection lost during the handshake or the login (a reset, an end of stream) is
a disconnect, :class:`HandshakeInterruptedError`: retried with backoff like any other.

:meth:`BrokerConnection.close` is total and idempotent: whatever raised before it, it fails
every request in flight, closes the socket and ends DISCONNECTED, and it never raises.
"""

from __future__ import annotations

import enum
import errno
import logging
import random
import socket
import ssl
from typing import Any

from kaflux.errors import (
    AuthenticationError,
    KafkaConnectionError,
    KafkaError,
    MalformedResponseError,
    ProtocolError,
    ResponseTooLargeError,
    SslAuthenticationError,
    UnsupportedVersionBrokerError,
    UnsupportedVersionError,
    error_for_code,
)
from kaflux.network.sasl import SaslAuthenticator, SaslCredentials
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

log = logging.getLogger(__name__)

_CLIENT_SOFTWARE_NAME = "kaflux"
_CLIENT_SOFTWARE_VERSION = "0.1.0"


class ConnectionState(enum.Enum):
    """Where a broker connection is in its life."""

    DISCONNECTED = "disconnected"
    CONNECTING = "connecting"
    TLS_HANDSHAKE = "tls_handshake"
    CHECKING_API_VERSIONS = "checking_api_versions"
    AUTHENTICATING = "authenticating"
    READY = "ready"


_S = ConnectionState
CONNECTION_TRANSITIONS: dict[ConnectionState, frozenset[ConnectionState]] = {
    _S.DISCONNECTED: frozenset({_S.CONNECTING}),
    _S.CONNECTING: frozenset({_S.TLS_HANDSHAKE, _S.CHECKING_API_VERSIONS, _S.DISCONNECTED}),
    _S.TLS_HANDSHAKE: frozenset({_S.CHECKING_API_VERSIONS, _S.DISCONNECTED}),
    _S.CHECKING_API_VERSIONS: frozenset({_S.AUTHENTICATING, _S.READY, _S.DISCONNECTED}),
    _S.AUTHENTICATING: frozenset({_S.READY, _S.DISCONNECTED}),
    # READY -> AUTHENTICATING: re-authentication before the SASL session ends (KIP-368)
    _S.READY: frozenset({_S.AUTHENTICATING, _S.DISCONNECTED}),
}

_API_VERSIONS_CONTEXT = object()
_SASL_CONTEXT = object()
#: the handshake's own requests, answered inside the connection and never returned
_INTERNAL = (_API_VERSIONS_CONTEXT, _SASL_CONTEXT)
_SASL_HANDSHAKE_KEY = 17
_SASL_AUTHENTICATE_KEY = 36
#: the first bytes of a TLS record (handshake or alert, TLS 1.0-1.3)
_TLS_RECORD_TYPES = (0x15, 0x16)


class ClosedBeforeAnsweringError(KafkaConnectionError):
    """The broker closed a new connection without answering its first request: what a TLS
    listener does to a client that does not speak TLS (several in a row mean exactly that)."""


class HandshakeInterruptedError(KafkaConnectionError):
    """The connection was lost during the TLS handshake (reset, or closed by the broker): a
    disconnect, retried with backoff, not an authentication failure. ``closed_by_broker`` tells
    an orderly end of stream from a reset; ``answered`` whether the broker had sent any byte
    (a plaintext listener sends none: it closes, or resets, on reading a TLS hello)."""

    def __init__(self, message: str, *, closed_by_broker: bool, answered: bool = False) -> None:
        super().__init__(message)
        self.closed_by_broker = closed_by_broker
        self.answered = answered


class SendFailedError(KafkaConnectionError):
    """Writing to the socket failed. Every request queued on the connection, the one being sent
    included, is in flight on a broken connection: it fails with the rest when the connection
    closes (:meth:`BrokerConnection.close`), exactly once."""


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
        ssl_context: ssl.SSLContext | None = None,
        sasl: SaslCredentials | None = None,
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
        #: the cluster's finalized feature levels as this broker reported them (ApiVersions v3+)
        self.finalized_features: dict[str, int] = {}
        self.finalized_features_epoch = -1
        self.connect_started_ms = -1
        self.last_activity_ms = -1
        #: deadline of each in-flight request by correlation id (request.timeout.ms, or the
        #: request's own timeout)
        self._deadlines: dict[int, int] = {}
        self._ssl_context = ssl_context
        self._tls_wants_write = False
        #: whether the broker sent anything on this connection yet (TLS bytes included)
        self.received_any = False
        self._sasl = sasl
        self._authenticator: SaslAuthenticator | None = None
        #: when to authenticate again (KIP-368), or None when the session does not expire
        self.reauthenticate_at_ms: int | None = None
        #: the session is due for renewal: no new requests until it is renewed
        self.reauthentication_requested = False
        #: when connecting, or the current re-authentication, started (the setup timeout runs
        #: from here until READY)
        self.setup_started_ms = -1
        #: bytes written to and read from the socket over the connection object's life (all its
        #: connects; TLS and handshakes included), for the network metrics
        self.bytes_sent = 0
        self.bytes_received = 0

    # -- state ----------------------------------------------------------------------------

    @property
    def state(self) -> ConnectionState:
        """The connection's current state."""
        return self._machine.state

    def is_ready(self) -> bool:
        """Connected, API versions negotiated and authenticated, and no re-authentication is
        waiting for the requests in flight: requests may be sent."""
        return self._machine.state is _S.READY and not self.reauthentication_requested

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
        state = self._machine.state
        if state is _S.CONNECTING:
            return True
        if state is _S.TLS_HANDSHAKE:
            return self._tls_wants_write
        return self._protocol.has_pending_output()

    @property
    def broker(self) -> str:
        """``host:port (node N)``, for messages."""
        return f"{self.host}:{self.port} (node {self.node_id})"

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
        self.connect_started_ms = self.setup_started_ms = now_ms
        self.last_activity_ms = now_ms
        self.received_any = False
        self.reauthenticate_at_ms = None
        self.reauthentication_requested = False
        try:
            infos = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
            family, kind, proto, _, address = infos[0]
            sock = socket.socket(family, kind, proto)
        except OSError as exc:
            self._machine.transition_to(_S.DISCONNECTED)
            raise KafkaConnectionError(
                f"cannot resolve or open a socket to {self.host}:{self.port}: {exc}"
            ) from exc
        self._sock = sock
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._send_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._send_buffer_bytes)
            if self._receive_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._receive_buffer_bytes)
            code = sock.connect_ex(address)
        except OSError as exc:
            self.close()
            raise KafkaConnectionError(f"connect to {self.host}:{self.port} failed: {exc}") from exc
        except BaseException:
            self.close()  # not left CONNECTING with a socket nobody watches
            raise
        if code not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK):
            self.close()
            raise KafkaConnectionError(
                f"connect to {self.host}:{self.port} failed: {errno.errorcode.get(code, code)}"
            )

    def on_writable(self, now_ms: int) -> None:
        """The socket is writable: finish connecting, or flush queued bytes."""
        assert self._sock is not None
        if self._machine.state is _S.CONNECTING:
            try:
                code = self._sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            except OSError as exc:
                raise KafkaConnectionError(f"connect to {self.host}:{self.port} failed: {exc}") from exc
            if code != 0:
                raise KafkaConnectionError(
                    f"connect to {self.host}:{self.port} failed: {errno.errorcode.get(code, code)}"
                )
            if self._ssl_context is not None:
                self._start_tls()
            else:
                self._machine.transition_to(_S.CHECKING_API_VERSIONS)
                self._send_api_versions(now_ms)
        if self._machine.state is _S.TLS_HANDSHAKE:
            self._tls_handshake(now_ms)
            if self._machine.state is _S.TLS_HANDSHAKE:
                return
        self._flush(now_ms)

    # -- TLS -------------------------------------------------------------------------------------

    def _start_tls(self) -> None:
        assert self._sock is not None and self._ssl_context is not None
        server_name = self.host if self._ssl_context.check_hostname else None
        self._sock = self._ssl_context.wrap_socket(
            self._sock, server_hostname=server_name, do_handshake_on_connect=False
        )
        self._machine.transition_to(_S.TLS_HANDSHAKE)

    def _tls_handshake(self, now_ms: int) -> None:
        """One step of the non-blocking TLS handshake; on completion, ApiVersions follows."""
        assert isinstance(self._sock, ssl.SSLSocket)
        if not self.received_any:
            self._peek_for_answer(self._sock)
        try:
            self._sock.do_handshake()
        except ssl.SSLWantReadError:
            # (the handshake reads only after the hello went out; a server answer moves it on)
            self._tls_wants_write = False
            return
        except ssl.SSLWantWriteError:
            self._tls_wants_write = True
            return
        except ssl.SSLCertVerificationError as exc:
            raise SslAuthenticationError(
                f"TLS handshake with broker {self.broker} failed: its certificate was not accepted "
                f"({exc.verify_message}). Check ssl.ca.location (the CA that signed the broker's "
                "certificate) and that the certificate names this host; "
                "ssl.endpoint.identification.algorithm=none skips the host name check"
            ) from None
        except (ssl.SSLEOFError, ssl.SSLZeroReturnError) as exc:
            # The broker closed the connection: a disconnect (a plaintext listener does this to
            # a TLS hello; the network client concludes that only after several in a row).
            raise HandshakeInterruptedError(
                f"broker {self.broker} closed the connection during the TLS handshake ({exc})",
                closed_by_broker=True,
                answered=self.received_any,
            ) from None
        except ssl.SSLSyscallError as exc:
            raise HandshakeInterruptedError(
                f"connection to broker {self.broker} failed during the TLS handshake ({exc})",
                closed_by_broker=False,
                answered=self.received_any,
            ) from None
        except ssl.SSLError as exc:
            # The TLS layer itself refused (an alert, a protocol mismatch): as Java, an
            # authentication failure, not retried.
            raise SslAuthenticationError(
                f"TLS handshake with broker {self.broker} failed ({exc}). If the broker's listener "
                "is not TLS, use security.protocol=PLAINTEXT or SASL_PLAINTEXT; if it wants a client "
                "certificate, set ssl.certificate.location and ssl.key.location"
            ) from None
        except OSError as exc:
            # A reset or a broken pipe on the socket: the network, not the credentials.
            raise HandshakeInterruptedError(
                f"connection to broker {self.broker} lost during the TLS handshake ({exc})",
                closed_by_broker=False,
                answered=self.received_any,
            ) from None
        self.last_activity_ms = now_ms
        self._machine.transition_to(_S.CHECKING_API_VERSIONS)
        self._send_api_versions(now_ms)

    def _peek_for_answer(self, sock: ssl.SSLSocket) -> None:
        """Note whether the broker sent any byte yet, without consuming it (OpenSSL reads it
        next): the TCP socket under the TLS one, peeked."""
        try:
            if socket.socket.recv(sock, 1, socket.MSG_PEEK):
                self.received_any = True
        except OSError:
            pass  # nothing yet, or the connection failed: the handshake step reports that

    def _flush(self, now_ms: int) -> None:
        assert self._sock is not None
        while self._protocol.has_pending_output():
            try:
                # The view is released when the block ends, also when send raises: the frames
                # of ssl.SSLSocket.send, kept by the exception's traceback, still hold it.
                with self._protocol.pending_output() as view:
                    sent = self._sock.send(view)
            except (BlockingIOError, InterruptedError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
                return
            except OSError as exc:
                raise SendFailedError(f"send to {self.broker} failed: {exc}") from exc
            self._protocol.output_sent(sent)
            self.bytes_sent += sent
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
        if self._machine.state is _S.TLS_HANDSHAKE:
            self._tls_handshake(now_ms)
            if self._machine.state is _S.TLS_HANDSHAKE:
                return
            self._flush(now_ms)
        sock = self._sock
        total = 0
        # A TLS socket may hold decrypted bytes the selector cannot see: drain those too.
        while total < max_bytes or (isinstance(sock, ssl.SSLSocket) and sock.pending()):
            try:
                with self._protocol.recv_buffer() as view:
                    count = sock.recv_into(view)
                    if count and not self.received_any:
                        self.received_any = True
                        self._check_not_tls(bytes(view[:2]))
            except (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                break
            except OSError as exc:
                if isinstance(exc, ConnectionResetError) and self._unanswered():
                    raise ClosedBeforeAnsweringError(
                        f"broker {self.broker} reset the connection without answering ApiVersions"
                    ) from exc
                raise KafkaConnectionError(f"receive from {self.broker} failed: {exc}") from exc
            if count == 0:
                if self._unanswered():
                    raise ClosedBeforeAnsweringError(
                        f"broker {self.broker} closed the connection without answering ApiVersions"
                    )
                raise KafkaConnectionError(f"broker {self.broker} closed the connection")
            total += count
            self.bytes_received += count
            self.last_activity_ms = now_ms
            try:
                responses = self._protocol.data_received(count)
            except MalformedResponseError as exc:
                raise MalformedResponseError(
                    f"broker {self.broker}: {exc}", correlation_id=exc.correlation_id
                ) from exc.__cause__
            except ResponseTooLargeError as exc:
                raise ResponseTooLargeError(
                    f"broker {self.broker} sent a response of {exc.size} bytes, above "
                    f"receive.message.max.bytes={exc.limit}; the connection was closed and its "
                    "requests failed. Raise receive.message.max.bytes, or lower fetch.max.bytes "
                    "and max.partition.fetch.bytes if the broker honours them",
                    size=exc.size,
                    limit=exc.limit,
                    broker=self.broker,
                ) from None
            for response in responses:
                self._deadlines.pop(response.in_flight.correlation_id, None)
                context = response.in_flight.context
                if context is _API_VERSIONS_CONTEXT:
                    self._on_api_versions(response.body, now_ms)
                elif context is _SASL_CONTEXT:
                    self._on_sasl_response(response.body, now_ms)
                else:
                    out.append(response)

    def _unanswered(self) -> bool:
        """Nothing received yet on this connection, whose first request was ApiVersions."""
        return self._machine.state is _S.CHECKING_API_VERSIONS and not self.received_any

    def _check_not_tls(self, first: bytes) -> None:
        """A plaintext client's first bytes from the broker look like a TLS record: the
        listener is TLS (otherwise they would be a response size, far below 0x15000000)."""
        if self._ssl_context is None and len(first) >= 2 and first[0] in _TLS_RECORD_TYPES and first[1] == 3:
            raise SslAuthenticationError(
                f"broker {self.broker} answered with TLS, but this client connects without it: set "
                "security.protocol=SSL (or SASL_SSL) and ssl.ca.location"
            )

    def send(
        self,
        request: RequestMessage[Any],
        api_version: int,
        context: Any,
        now_ms: int,
        timeout_ms: int,
        *,
        expect_response: bool = True,
    ) -> InFlightRequest:
        """Queue ``request`` and try to write it at once. Only when READY.

        From the moment it is queued, the request is in flight (if it expects a response): when
        the write fails, this raises :class:`SendFailedError` and the request fails with the
        connection's other requests when the caller closes it, never a second time. Any other
        error (no common version, a request that cannot be encoded) is raised before anything
        is queued."""
        if self._machine.state is not _S.READY:
            raise KafkaConnectionError(f"connection to node {self.node_id} is not ready")
        in_flight = self._protocol.send_request(
            request, api_version, context, expect_response=expect_response
        )
        if expect_response:
            self._deadlines[in_flight.correlation_id] = now_ms + timeout_ms
        try:
            self._flush(now_ms)
        except SendFailedError:
            raise
        except Exception as exc:
            # Queued means in flight: whatever the write raised, the request fails with the
            # connection, once.
            raise SendFailedError(f"send to {self.broker} failed: {exc!r}") from exc
        return in_flight

    def close(self) -> list[InFlightRequest]:
        """Close the socket; returns the requests that were in flight (to be failed).

        Total and idempotent: it never raises, whatever failed before it, and afterwards the
        connection is DISCONNECTED with nothing in flight (a second call returns [])."""
        failed = [r for r in self._protocol.fail_all() if r.context not in _INTERNAL]
        self._deadlines.clear()
        self._authenticator = None
        self._tls_wants_write = False
        self._close_socket()
        if self._machine.state is not _S.DISCONNECTED:
            self._machine.transition_to(_S.DISCONNECTED)
        return failed

    def _close_socket(self) -> None:
        sock, self._sock = self._sock, None
        if sock is None:
            return
        try:
            sock.close()
        except Exception as exc:  # the descriptor is released either way; nothing to retry
            log.debug("closing the socket to %s failed: %r", self.broker, exc)

    # -- ApiVersions handshake --------------------------------------------------------------

    def _send_api_versions(self, now_ms: int, timeout_ms: int = 30_000) -> None:
        request = ApiVersionsRequest(
            client_software_name=_CLIENT_SOFTWARE_NAME, client_software_version=_CLIENT_SOFTWARE_VERSION
        )
        in_flight = self._protocol.send_request(request, self._api_versions_version, _API_VERSIONS_CONTEXT)
        self._deadlines[in_flight.correlation_id] = now_ms + timeout_ms

    def _on_api_versions(self, response: ApiVersionsResponse, now_ms: int) -> None:
        versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        if response.error_code == UnsupportedVersionBrokerError.code and self._api_versions_version > 0:
            # The broker lists what it supports even in this error; retry at its highest.
            broker_max = versions.get(int(ApiKey.API_VERSIONS), (0, 0))[1]
            self._api_versions_version = min(broker_max, self._api_versions_version - 1)
            self._send_api_versions(now_ms)
            return
        if response.error_code != 0:
            raise error_for_code(response.error_code)(f"ApiVersions to node {self.node_id} failed")
        self.broker_versions = versions
        self.negotiated = negotiate(versions)
        self.finalized_features_epoch = response.finalized_features_epoch
        self.finalized_features = {f.name: f.max_version_level for f in response.finalized_features}
        if self._sasl is None:
            self._machine.transition_to(_S.READY)
            return
        self._start_sasl(now_ms)

    # -- SASL ------------------------------------------------------------------------------------

    def _start_sasl(self, now_ms: int) -> None:
        assert self._sasl is not None
        handshake = self.broker_versions.get(_SASL_HANDSHAKE_KEY, (0, -1))[1]
        authenticate = self.broker_versions.get(_SASL_AUTHENTICATE_KEY, (0, -1))[1]
        if handshake < 1 or authenticate < 0:
            raise AuthenticationError(
                f"broker {self.broker} does not offer SASL authentication (SaslHandshake v1 and "
                "SaslAuthenticate, Kafka 1.0+): is it a PLAINTEXT listener? Check security.protocol"
            )
        self._machine.transition_to(_S.AUTHENTICATING)
        self._authenticator = SaslAuthenticator(self._sasl, self.broker, min(2, authenticate), host=self.host)
        self._send_sasl(now_ms)

    def _send_sasl(self, now_ms: int) -> None:
        assert self._authenticator is not None
        request = self._authenticator.next_request()
        if request is None:
            return
        version = (
            1
            if request.API_KEY == _SASL_HANDSHAKE_KEY
            else min(2, self.broker_versions[_SASL_AUTHENTICATE_KEY][1])
        )
        in_flight = self._protocol.send_request(request, version, _SASL_CONTEXT)
        self._deadlines[in_flight.correlation_id] = now_ms + 30_000
        self._flush(now_ms)

    def _on_sasl_response(self, body: Any, now_ms: int) -> None:
        assert self._authenticator is not None
        self._authenticator.on_response(body)  # raises AuthenticationError on failure
        if not self._authenticator.done:
            self._send_sasl(now_ms)
            return
        lifetime = self._authenticator.session_lifetime_ms
        self._authenticator = None
        # As Java: re-authenticate at 85-95 % of the session, so that many connections do not
        # all log in at once.
        self.reauthenticate_at_ms = (
            now_ms + int(lifetime * random.uniform(0.85, 0.95)) if lifetime > 0 else None
        )
        self._machine.transition_to(_S.READY)

    def reauthentication_due(self, now_ms: int) -> bool:
        """Whether the SASL session needs renewing: send nothing new until it is renewed."""
        return self.reauthenticate_at_ms is not None and now_ms >= self.reauthenticate_at_ms

    def start_reauthentication(self, now_ms: int) -> None:
        """Log in again on this connection (KIP-368). Only when READY with nothing in flight."""
        if self._machine.state is not _S.READY or self.in_flight_count():  # pragma: no cover - a bug
            raise KafkaConnectionError(f"connection to {self.broker} cannot re-authenticate now")
        self.setup_started_ms = now_ms
        self.reauthenticate_at_ms = None
        self.reauthentication_requested = False
        self._start_sasl(now_ms)

    def version_for(self, api_key: ApiKey) -> int:
        """The negotiated version of ``api_key``; raises UnsupportedVersionError if none."""
        version = self.negotiated.get(api_key)
        if version is None:
            raise UnsupportedVersionError(
                f"broker node {self.node_id} ({self.host}:{self.port}) supports no version of "
                f"{api_key.name} that kaflux implements"
            )
        return version


def is_unexpected(exc: BaseException) -> bool:
    """Whether ``exc`` is a bug rather than a network or broker failure (neither a kaflux
    error nor an OSError): worth a traceback."""
    return not isinstance(exc, (KafkaError, OSError))


def describe_failure(exc: BaseException) -> KafkaError:
    """Translate anything raised by connection I/O into a kaflux error: retriable, except a
    malformed response (:class:`MalformedResponseError`, the one request it answered fails)."""
    if isinstance(exc, (ResponseTooLargeError, MalformedResponseError)) or (
        isinstance(exc, KafkaError) and not isinstance(exc, ProtocolError)
    ):
        return exc
    return KafkaConnectionError(f"connection failed: {exc}")
