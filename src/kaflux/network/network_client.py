"""The selector loop over all broker connections. [bg: only the network thread calls it,
except :meth:`NetworkClient.wakeup`, which any thread may call]

Responsibilities, mirroring Java's ``NetworkClient``:

* connections per broker, opened on demand, with reconnect backoff (exponential, jittered,
  ``reconnect.backoff.ms`` .. ``reconnect.backoff.max.ms``) and a connection-setup timeout;
* at most ``max.in.flight.requests.per.connection`` requests in flight per broker;
* ``request.timeout.ms``: a request unanswered for that long fails with
  :class:`~kaflux.errors.KafkaTimeoutError` and its connection is closed (the other requests
  on it fail with :class:`~kaflux.errors.KafkaConnectionError`);
* a wakeup socketpair so another thread can cut a blocking :meth:`poll` short.

Every failure reaches the caller as a :class:`ClientResponse` with ``error`` set, all of
them retriable: a request is never lost silently.

No exception leaves a connection half-closed. Whatever step of a connection raises (connect,
TLS handshake, write, read, SASL, re-authentication, even a bug), the connection is taken out
of the selector (by the descriptor it was registered with, which stays known after its socket
is gone), closed, every request on it completes once with an error, and the loop goes on. An
unexpected exception (not a kaflux error) is logged with its traceback once per broker until a
connection to it succeeds again, not on every pass.

With :meth:`NetworkClient.enable_metrics`, it records the bytes each connection wrote and
read (once per send and per I/O event, not per chunk), every request sent and every response
read with its latency, into the network thread's metrics.
"""

from __future__ import annotations

import logging
import selectors
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kaflux.errors import (
    AuthenticationError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    MalformedResponseError,
    ResponseTooLargeError,
    SslAuthenticationError,
    UnsupportedVersionError,
)
from kaflux.network.backoff import ExponentialBackoff
from kaflux.network.cluster import ClusterMetadata
from kaflux.network.connection import (
    BrokerConnection,
    ClosedBeforeAnsweringError,
    ConnectionState,
    HandshakeInterruptedError,
    SendFailedError,
    describe_failure,
    is_unexpected,
)
from kaflux.network.reachability import Reachability
from kaflux.network.requests import ClientRequest, ClientResponse
from kaflux.network.sasl import SaslCredentials
from kaflux.protocol.api import ApiKey
from kaflux.protocol.framing import DEFAULT_MAX_RESPONSE_BYTES, ReceivedResponse

if TYPE_CHECKING:
    from kaflux.metrics.clients import NetworkMetrics

#: new connections in a row closed unanswered before a client concludes the listener speaks the
#: other protocol (TLS for a plaintext client, plaintext for a TLS one)...
UNANSWERED_BEFORE_TLS_VERDICT = 3
#: ...and for at least this long since the first of them: a burst of resets from the network
#: (a proxy or load balancer cutting every connection for a moment) ends sooner, and is retried
UNANSWERED_VERDICT_SPAN_MS = 2_500
#: at most one WARNING per broker this often for responses above receive.message.max.bytes
OVERSIZED_LOG_INTERVAL_MS = 10_000

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _NodeBackoff:
    failures: int = 0
    retry_at_ms: int = 0


class NetworkClient:
    """Owns the selector and all broker connections of one client."""

    def __init__(
        self,
        cluster: ClusterMetadata,
        *,
        client_id: str,
        request_timeout_ms: int,
        max_in_flight: int,
        reconnect_backoff: ExponentialBackoff,
        connection_setup_timeout_ms: int,
        send_buffer_bytes: int = 131072,
        receive_buffer_bytes: int = 65536,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        ssl_context: ssl.SSLContext | None = None,
        sasl: SaslCredentials | None = None,
    ) -> None:
        self.cluster = cluster
        self._client_id = client_id
        self._request_timeout_ms = request_timeout_ms
        self._max_in_flight = max_in_flight
        self._reconnect_backoff = reconnect_backoff
        self._setup_timeout_ms = connection_setup_timeout_ms
        self._send_buffer_bytes = send_buffer_bytes
        self._receive_buffer_bytes = receive_buffer_bytes
        self._max_response_bytes = max_response_bytes
        self._ssl_context = ssl_context
        self._sasl = sasl
        #: the last authentication failure per broker, until a connection to it succeeds
        self._auth_errors: dict[int, AuthenticationError] = {}
        #: connections in a row that a broker closed before answering ApiVersions
        self._unanswered: dict[int, int] = {}
        #: when each node's current run of unanswered connections began
        self._unanswered_since: dict[int, int] = {}
        #: addresses (host, port) that answered ApiVersions at least once: never a TLS listener
        self._answered_once: set[tuple[str, int]] = set()
        self._selector = selectors.DefaultSelector()
        self._connections: dict[int, BrokerConnection] = {}
        #: the descriptor each connection is registered with in the selector, by node id: known
        #: even when the connection's socket is gone, so it can always be unregistered
        self._registered: dict[int, int] = {}
        #: brokers whose connection failed with an unexpected exception since it was last ready
        #: (its traceback is logged once, not on every pass)
        self._unexpected_logged: set[int] = set()
        #: addresses a TLS connection was established to: a TLS listener, whatever cuts later
        self._tls_established: set[tuple[str, int]] = set()
        self._backoff: dict[int, _NodeBackoff] = {}
        self._completed: list[ClientResponse[Any]] = []
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._closed = False
        self._metrics: NetworkMetrics | None = None
        #: failed addresses and their last errors: logged here, read by timed-out blocking calls
        self.reachability = Reachability(client_id)
        self._reported_ready: set[int] = set()
        #: per broker: when an oversized response was last logged, and how many since then
        self._oversized_logged_ms: dict[int, int] = {}
        self._oversized_unlogged: dict[int, int] = {}
        #: called when a connection to a broker fails (the factory wires a metadata refresh)
        self.on_broker_failure: Callable[[], None] | None = None

    def enable_metrics(self, metrics: NetworkMetrics) -> None:
        """Record network I/O into ``metrics`` (call before the network thread starts)."""
        self._metrics = metrics

    def connection_count(self) -> int:
        """Connections open or opening."""
        return sum(1 for conn in self._connections.values() if conn.is_connected_or_connecting())

    # -- any thread -------------------------------------------------------------------------

    def wakeup(self) -> None:
        """Interrupt a blocked :meth:`poll`. Safe from any thread."""
        try:
            self._wake_w.send(b"\x00")
        except (BlockingIOError, OSError):
            pass  # the pipe is full (a wakeup is already pending) or we are closing

    # -- network thread ---------------------------------------------------------------------

    def connection(self, node_id: int) -> BrokerConnection | None:
        """The connection object for ``node_id`` if one was opened."""
        return self._connections.get(node_id)

    def is_ready(self, node_id: int) -> bool:
        """Connected, versions negotiated, and below the in-flight limit."""
        conn = self._connections.get(node_id)
        return conn is not None and conn.is_ready() and conn.in_flight_count() < self._max_in_flight

    def in_flight_count(self, node_id: int | None = None) -> int:
        """Requests in flight to ``node_id`` (or to all brokers)."""
        if node_id is not None:
            conn = self._connections.get(node_id)
            return conn.in_flight_count() if conn else 0
        return sum(c.in_flight_count() for c in self._connections.values())

    def authentication_error(self, node_id: int) -> AuthenticationError | None:
        """Why the last connection to ``node_id`` failed to authenticate (TLS or SASL), until a
        later connection succeeds; requests to it fail with this instead of waiting."""
        return self._auth_errors.get(node_id)

    def connection_failed_recently(self, node_id: int, now_ms: int) -> bool:
        """Whether ``node_id`` is in reconnect backoff."""
        state = self._backoff.get(node_id)
        return state is not None and state.failures > 0 and now_ms < state.retry_at_ms

    def ready(self, node_id: int, now_ms: int) -> bool:
        """Like :meth:`is_ready`, but starts connecting if the node is idle and not backing off."""
        if self.is_ready(node_id):
            return True
        conn = self._connections.get(node_id)
        if (conn is None or not conn.is_connected_or_connecting()) and not self.connection_failed_recently(
            node_id, now_ms
        ):
            self._initiate_connect(node_id, now_ms)
        return False

    def api_version(self, node_id: int, api_key: ApiKey) -> int | None:
        """The negotiated version of ``api_key`` on a READY connection, else None."""
        conn = self._connections.get(node_id)
        if conn is None or not conn.is_ready():
            return None
        return conn.negotiated.get(api_key)

    def send(self, request: ClientRequest, now_ms: int) -> None:
        """Send on a READY connection (check :meth:`is_ready` first).

        Failures, including "no common API version", complete the request with an error.
        """
        conn = self._connections.get(request.node_id)
        if conn is None or not conn.is_ready():
            self._complete(
                request, None, KafkaConnectionError(f"node {request.node_id} is not ready"), -1, now_ms
            )
            return
        sent_before = conn.bytes_sent
        version = -1
        try:
            version = conn.version_for(ApiKey(request.request.API_KEY))
            if request.max_version is not None:
                version = min(version, request.max_version)
            if request.min_version is not None and version < request.min_version:
                raise UnsupportedVersionError(
                    f"broker {conn.broker} supports "
                    f"{ApiKey(request.request.API_KEY).name} only up to v{version}; this request "
                    f"needs v{request.min_version} or later"
                )
            timeout = request.timeout_ms if request.timeout_ms is not None else self._request_timeout_ms
            conn.send(
                request.request, version, request, now_ms, timeout, expect_response=request.expect_response
            )
        except SendFailedError as exc:
            # The request was queued: if it awaits a response it is in flight, and closing the
            # connection fails it with the others. Completing it here too would complete it twice.
            if exc.__cause__ is not None and is_unexpected(exc.__cause__):
                self._log_unexpected(conn, exc.__cause__, "sending a request")
            self._disconnect(conn, exc, now_ms)
            if not request.expect_response:
                self._complete(request, None, exc, version, now_ms)
            return
        except KafkaError as exc:
            # Raised before anything was queued: the request is nowhere else.
            if isinstance(exc, KafkaConnectionError):
                self._disconnect(conn, exc, now_ms)
            self._complete(request, None, exc, -1, now_ms)
            return
        except Exception as exc:
            # A bug before anything was queued (after, the connection raises SendFailedError):
            # the request fails, the connection goes on.
            self._log_unexpected(conn, exc, "sending a request")
            self._complete(request, None, describe_failure(exc), -1, now_ms)
            return
        metrics = self._metrics
        if metrics is not None:
            metrics.request_sent(request.node_id, now_ms)
            if conn.bytes_sent > sent_before:
                metrics.bytes_sent(request.node_id, conn.bytes_sent - sent_before, now_ms)
        if not request.expect_response:
            self._complete(request, None, None, version, now_ms)

    def poll(self, timeout_ms: int, now_ms: int, clock: Callable[[], int]) -> list[ClientResponse[Any]]:
        """Wait up to ``timeout_ms`` for I/O, do it, and return every completed request.

        ``clock`` reads the current time in ms after the wait (the only clock use here).
        """
        self._maybe_reauthenticate(now_ms)
        self._update_interest(now_ms)
        if self._completed:
            timeout_ms = 0
        timeout_ms = min(timeout_ms, self._next_timeout_ms(now_ms))
        events = self._selector.select(max(0, timeout_ms) / 1000.0)
        now_ms = clock()
        for key, mask in events:
            conn = key.data
            if conn is None:
                self._drain_wakeups()
                continue
            self._handle_io(conn, mask, now_ms)
        self._expire(now_ms)
        completed, self._completed = self._completed, []
        return completed

    def close(self) -> list[ClientResponse[Any]]:
        """Close every connection; returns the in-flight requests, failed with
        KafkaConnectionError."""
        if self._closed:
            return []
        self._closed = True
        for conn in list(self._connections.values()):
            self._disconnect(conn, KafkaConnectionError("client closed"), 0, backoff=False)
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()
        completed, self._completed = self._completed, []
        return completed

    def disconnect(self, node_id: int, now_ms: int) -> None:
        """Close the connection to ``node_id`` (e.g. the coordinator moved)."""
        conn = self._connections.get(node_id)
        if conn is not None and conn.is_connected_or_connecting():
            self._disconnect(
                conn, KafkaConnectionError(f"disconnected from node {node_id}"), now_ms, backoff=False
            )

    # -- internals --------------------------------------------------------------------------

    def _initiate_connect(self, node_id: int, now_ms: int) -> None:
        node = self.cluster.node(node_id)
        if node is None:
            return
        conn = self._connections.get(node_id)
        if conn is None or (conn.host, conn.port) != (node.host, node.port):
            conn = BrokerConnection(
                node_id,
                node.host,
                node.port,
                client_id=self._client_id,
                send_buffer_bytes=self._send_buffer_bytes,
                receive_buffer_bytes=self._receive_buffer_bytes,
                max_response_bytes=self._max_response_bytes,
                ssl_context=self._ssl_context,
                sasl=self._sasl,
            )
            self._connections[node_id] = conn
        try:
            conn.connect(now_ms)
            fd = conn.fileno()
            self._selector.register(fd, selectors.EVENT_WRITE, conn)
        except Exception as exc:
            if is_unexpected(exc):
                self._log_unexpected(conn, exc, "connecting")
            error = describe_failure(exc)
            conn.close()
            self._record_failure(node_id, now_ms)
            self.reachability.failed(f"{conn.host}:{conn.port}", error, now_ms)
            return
        self._registered[node_id] = fd

    def _update_interest(self, now_ms: int) -> None:
        for conn in list(self._connections.values()):
            fd = self._registered.get(conn.node_id)
            try:
                if not conn.is_connected_or_connecting():
                    if fd is not None:  # (cannot happen: a closed connection is unregistered)
                        self._unregister(conn)
                    continue
                if fd is None:
                    raise RuntimeError(f"connection to {conn.broker} is open but not registered")
                mask = selectors.EVENT_READ | (selectors.EVENT_WRITE if conn.wants_write() else 0)
                key = self._selector.get_key(fd)
                if key.events != mask:
                    self._selector.modify(fd, mask, conn)
            except Exception as exc:
                self._log_unexpected(conn, exc, "updating its selector interest")
                self._disconnect(conn, describe_failure(exc), now_ms)

    def _handle_io(self, conn: BrokerConnection, mask: int, now_ms: int) -> None:
        was_ready = conn.is_ready()
        received: list[ReceivedResponse] = []
        sent_before, received_before = conn.bytes_sent, conn.bytes_received
        try:
            if mask & selectors.EVENT_WRITE:
                conn.on_writable(now_ms)
            if mask & selectors.EVENT_READ and conn.is_connected_or_connecting():
                conn.on_readable(now_ms, received)
        except Exception as exc:
            # Complete what arrived before the failure first: a response read together with
            # the connection's close is an answer, not a loss.
            if is_unexpected(exc):
                self._log_unexpected(conn, exc, "doing I/O")
            self._record_io(conn, sent_before, received_before, now_ms)
            self._complete_received(received, now_ms)
            self._disconnect(conn, describe_failure(exc), now_ms)
            return
        self._record_io(conn, sent_before, received_before, now_ms)
        self._complete_received(received, now_ms)
        if conn.is_ready() and not was_ready:
            self.cluster.update_finalized_features(conn.finalized_features, conn.finalized_features_epoch)
            if conn.node_id not in self._reported_ready:
                self._reported_ready.add(conn.node_id)
                self.reachability.ready(f"{conn.host}:{conn.port}")
            self._backoff.pop(conn.node_id, None)
            self._auth_errors.pop(conn.node_id, None)
            self._unanswered.pop(conn.node_id, None)
            self._answered_once.add((conn.host, conn.port))
            self._unexpected_logged.discard(conn.node_id)
            if self._ssl_context is not None:
                self._tls_established.add((conn.host, conn.port))

    def _maybe_reauthenticate(self, now_ms: int) -> None:
        """KIP-368: hold new requests on a connection whose SASL session is due for renewal,
        and renew it once its in-flight requests are answered."""
        for conn in self._connections.values():
            if not conn.is_connected_or_connecting() or not conn.reauthentication_due(now_ms):
                continue
            conn.reauthentication_requested = True
            if conn.in_flight_count() == 0:
                try:
                    conn.start_reauthentication(now_ms)
                except Exception as exc:
                    if is_unexpected(exc):
                        self._log_unexpected(conn, exc, "re-authenticating")
                    self._disconnect(conn, describe_failure(exc), now_ms)

    def _record_io(self, conn: BrokerConnection, sent_before: int, received_before: int, now_ms: int) -> None:
        metrics = self._metrics
        if metrics is None:
            return
        if conn.bytes_sent > sent_before:
            metrics.bytes_sent(conn.node_id, conn.bytes_sent - sent_before, now_ms)
        if conn.bytes_received > received_before:
            metrics.bytes_received(conn.node_id, conn.bytes_received - received_before, now_ms)

    def _complete_received(self, received: list[ReceivedResponse], now_ms: int) -> None:
        metrics = self._metrics
        for response in received:
            request: ClientRequest = response.in_flight.context
            if metrics is not None:
                metrics.response_received(request.node_id, now_ms - request.created_ms, now_ms)
            self._complete(request, response.body, None, response.in_flight.api_version, now_ms)

    def _expire(self, now_ms: int) -> None:
        for conn in list(self._connections.values()):
            if not conn.is_connected_or_connecting():
                continue
            if (
                not conn.is_ready()
                and not conn.reauthentication_requested
                and (now_ms - conn.setup_started_ms > self._setup_timeout_ms)
            ):
                self._disconnect(conn, self._setup_timed_out(conn), now_ms)
                continue
            deadline = conn.next_deadline_ms()
            if deadline is not None and now_ms >= deadline:
                self._disconnect(
                    conn,
                    KafkaTimeoutError(
                        f"no response from node {conn.node_id} ({conn.host}:{conn.port}) within the "
                        f"request timeout (request.timeout.ms={self._request_timeout_ms}); the connection "
                        "was closed"
                    ),
                    now_ms,
                )

    def _next_timeout_ms(self, now_ms: int) -> int:
        deadline = 2**31
        for conn in self._connections.values():
            if not conn.is_connected_or_connecting():
                continue
            if not conn.is_ready() and not conn.reauthentication_requested:
                deadline = min(deadline, conn.setup_started_ms + self._setup_timeout_ms + 1 - now_ms)
            if conn.reauthenticate_at_ms is not None:
                deadline = min(deadline, conn.reauthenticate_at_ms - now_ms)
            request_deadline = conn.next_deadline_ms()
            if request_deadline is not None:
                deadline = min(deadline, request_deadline - now_ms)
        return max(0, deadline)

    def _unregister(self, conn: BrokerConnection) -> None:
        fd = self._registered.pop(conn.node_id, None)
        if fd is None:
            return
        try:
            self._selector.unregister(fd)
        except (KeyError, ValueError, OSError):
            pass  # not registered (any more): nothing to undo

    def _log_unexpected(self, conn: BrokerConnection, exc: BaseException, doing: str) -> None:
        """An exception that is not a kaflux error (a bug) failed the connection: a traceback
        once per broker until it is ready again, DEBUG after that."""
        if conn.node_id in self._unexpected_logged:
            log.debug("%s: %s failed again while %s: %r", self._client_id, conn.broker, doing, exc)
            return
        self._unexpected_logged.add(conn.node_id)
        log.error(
            "%s: unexpected error while %s on the connection to %s; the connection is closed, its "
            "requests fail and are retried",
            self._client_id,
            doing,
            conn.broker,
            exc_info=exc,
        )

    def _disconnect(
        self, conn: BrokerConnection, error: KafkaError, now_ms: int, *, backoff: bool = True
    ) -> None:
        """Unregister and close ``conn`` and fail its requests. Total: a connection's failures
        all end here, whatever state it was left in."""
        self._unregister(conn)
        established = conn.node_id in self._reported_ready
        if established:
            self._reported_ready.discard(conn.node_id)
            self.reachability.closed(f"{conn.host}:{conn.port}")
        failed = conn.close()
        # A malformed response fails the request it answered; the others on the connection
        # were not answered and are retried, as after any lost connection.
        malformed = error if isinstance(error, MalformedResponseError) else None
        if malformed is not None:
            error = KafkaConnectionError(f"connection closed after a malformed response: {malformed}")
        if isinstance(error, ResponseTooLargeError):
            self._log_oversized(conn.node_id, error, now_ms)
        if (
            isinstance(error, ClosedBeforeAnsweringError)
            and self._ssl_context is None
            and (conn.host, conn.port) not in self._answered_once
        ):
            error = self._maybe_tls_listener(conn, error, now_ms)
        if isinstance(error, HandshakeInterruptedError):
            if error.answered or (conn.host, conn.port) in self._tls_established:
                self._unanswered.pop(conn.node_id, None)  # a TLS listener: no longer "in a row"
            else:
                error = self._maybe_plaintext_listener(conn, error, now_ms)
        if isinstance(error, AuthenticationError):
            self._auth_errors[conn.node_id] = error
        if backoff:
            self._record_failure(conn.node_id, now_ms)
            if not isinstance(error, ResponseTooLargeError):  # reachable, and logged above
                self.reachability.failed(f"{conn.host}:{conn.port}", error, now_ms, established=established)
        for in_flight in failed:
            request: ClientRequest = in_flight.context
            own = (
                malformed
                if malformed is not None and in_flight.correlation_id == malformed.correlation_id
                else error
            )
            self._complete(request, None, own, in_flight.api_version, now_ms)

    def _log_oversized(self, node_id: int, error: ResponseTooLargeError, now_ms: int) -> None:
        """WARNING about a response above receive.message.max.bytes, at most once per broker per
        :data:`OVERSIZED_LOG_INTERVAL_MS` (a consumer meets the same one on every fetch)."""
        last = self._oversized_logged_ms.get(node_id)
        if last is not None and now_ms - last < OVERSIZED_LOG_INTERVAL_MS:
            self._oversized_unlogged[node_id] = self._oversized_unlogged.get(node_id, 0) + 1
            return
        self._oversized_logged_ms[node_id] = now_ms
        suppressed = self._oversized_unlogged.pop(node_id, 0)
        log.warning(
            "%s: %s%s",
            self._client_id,
            error,
            f" ({suppressed} more since the last warning)" if suppressed else "",
        )

    def _setup_timed_out(self, conn: BrokerConnection) -> KafkaError:
        limit = f"socket.connection.setup.timeout.ms={self._setup_timeout_ms}"
        if (
            conn.state is ConnectionState.TLS_HANDSHAKE
            and not conn.received_any
            and (conn.host, conn.port) not in self._tls_established
        ):
            # Typically a plaintext listener, waiting for the rest of what it read as a huge
            # request (Kafka itself closes the connection at once instead). Not once a TLS
            # connection to the address was established: then it is a slow or stalled network.
            return SslAuthenticationError(
                f"broker {conn.broker} did not complete the TLS handshake within {limit}. If its "
                "listener is PLAINTEXT, use security.protocol=PLAINTEXT (or SASL_PLAINTEXT)"
            )
        return KafkaTimeoutError(f"connection to {conn.broker} not established within {limit}")

    def _unanswered_run(self, node_id: int, now_ms: int) -> bool:
        """Count one more connection closed unanswered; whether the run is now long enough, in
        number and in time, to be the listener and not a burst of network resets."""
        count = self._unanswered.get(node_id, 0) + 1
        self._unanswered[node_id] = count
        if count == 1:
            self._unanswered_since[node_id] = now_ms
        since = self._unanswered_since.get(node_id, now_ms)
        return count >= UNANSWERED_BEFORE_TLS_VERDICT and now_ms - since >= UNANSWERED_VERDICT_SPAN_MS

    def _maybe_tls_listener(self, conn: BrokerConnection, error: KafkaError, now_ms: int) -> KafkaError:
        """A broker that closes three new plaintext connections in a row, over at least
        :data:`UNANSWERED_VERDICT_SPAN_MS`, before answering ApiVersions is a TLS listener (it
        took the request for a bad TLS hello).

        Only for an address that never answered: one that did speaks plaintext, and closing new
        connections unanswered is what a proxy or load balancer in front of a restarting broker
        does. Calling that an authentication error would fail sends that a retry would deliver.
        """
        if not self._unanswered_run(conn.node_id, now_ms):
            return error
        count = self._unanswered[conn.node_id]
        return SslAuthenticationError(
            f"broker {conn.broker} closed {count} connections in a row without answering ApiVersions: "
            "its listener is most likely TLS. Set security.protocol=SSL (or SASL_SSL) and ssl.ca.location"
        )

    def _maybe_plaintext_listener(self, conn: BrokerConnection, error: KafkaError, now_ms: int) -> KafkaError:
        """A broker that ends three TLS handshakes in a row, over at least
        :data:`UNANSWERED_VERDICT_SPAN_MS`, by closing or resetting the connection without
        sending a byte is most likely a plaintext listener (a shorter run is a burst of network
        resets, retried): Kafka closes a
        connection whose first bytes, a TLS hello, read as an absurd request size (with the
        rest of the hello unread, the close is a reset). Only before any TLS connection to that
        address was established: after that, a cut handshake is the network, retried."""
        if not self._unanswered_run(conn.node_id, now_ms):
            return error
        count = self._unanswered[conn.node_id]
        return SslAuthenticationError(
            f"broker {conn.broker} closed {count} TLS handshakes in a row: its listener is most likely "
            "not TLS. Use security.protocol=PLAINTEXT (or SASL_PLAINTEXT), or the broker's TLS port"
        )

    def _record_failure(self, node_id: int, now_ms: int) -> None:
        if node_id >= 0 and self.on_broker_failure is not None:
            # a broker may be gone: refresh the metadata (Java's NetworkClient does on every
            # disconnect), which also finds out when no known broker is left (rebootstrap)
            self.on_broker_failure()
        state = self._backoff.setdefault(node_id, _NodeBackoff())
        state.retry_at_ms = now_ms + self._reconnect_backoff.backoff_ms(state.failures)
        state.failures += 1

    def _complete(
        self, request: ClientRequest, body: Any, error: KafkaError | None, version: int, now_ms: int
    ) -> None:
        self._completed.append(ClientResponse(request, body, error, version, now_ms))

    def _drain_wakeups(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, OSError):
            pass
