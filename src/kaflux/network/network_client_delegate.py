"""The unsent-request queue between request managers and the network client. [bg]

Request managers never send anything: their ``poll(now_ms)`` returns a :class:`PollResult`
of :class:`UnsentRequest` objects. The network thread adds them here; each loop this delegate
sends those whose broker is ready (connecting to it if needed), fails those that could not
be sent within ``request.timeout.ms`` (or, if they ask for it, as soon as connecting to their
broker failed: a request to a coordinator), polls the network client and hands every outcome to
the request's handler. Handlers run on the network thread.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from kaflux.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from kaflux.network.network_client import NetworkClient
from kaflux.network.requests import ClientRequest, ClientResponse, UnsentRequest

log = logging.getLogger(__name__)


class NetworkClientDelegate:
    """Queues unsent requests, sends them when their broker is ready, dispatches responses."""

    def __init__(self, client: NetworkClient, request_timeout_ms: int, *, rebootstrap: bool = False) -> None:
        self.client = client
        self._request_timeout_ms = request_timeout_ms
        #: metadata.recovery.strategy=rebootstrap: when no known broker can be reached, start
        #: again from bootstrap.servers (KIP-899)
        self._rebootstrap = rebootstrap
        self._unsent: deque[UnsentRequest[Any]] = deque()

    def add(self, request: UnsentRequest[Any], now_ms: int) -> None:
        """Queue ``request``; it gets ``request.timeout.ms`` (or its own earlier deadline) to be sent."""
        default = now_ms + self._request_timeout_ms
        request.deadline_ms = default if request.deadline_ms < 0 else min(default, request.deadline_ms)
        self._unsent.append(request)

    def add_all(self, requests: Iterable[UnsentRequest[Any]], now_ms: int) -> None:
        """Queue several requests."""
        for request in requests:
            self.add(request, now_ms)

    def has_unsent(self) -> bool:
        """Whether requests are waiting to be sent."""
        return bool(self._unsent)

    def poll(self, timeout_ms: int, now_ms: int, clock: Callable[[], int]) -> None:
        """Send what can be sent, wait for I/O up to ``timeout_ms``, run response handlers."""
        self._try_send(now_ms)
        if self._unsent:
            # Unsent requests wait on a connection: come back soon to retry them, and in time
            # to fail one whose deadline passes.
            first_deadline = min(u.deadline_ms for u in self._unsent)
            timeout_ms = max(0, min(timeout_ms, 50, first_deadline - now_ms))
        responses = self.client.poll(timeout_ms, now_ms, clock)
        now_ms = clock()
        self._try_send(now_ms)
        for response in responses:
            self._dispatch(response)
        self._fail_expired(now_ms)

    def _try_send(self, now_ms: int) -> None:
        pending = len(self._unsent)
        for _ in range(pending):
            unsent = self._unsent.popleft()
            node_id = unsent.node_id if unsent.node_id is not None else self.least_loaded_node(now_ms)
            if node_id is None or not self.client.ready(node_id, now_ms):
                refused = self._authentication_error(unsent.node_id)
                if refused is not None:
                    # Retrying a login that failed will not help: fail at once (as Java does).
                    self._fail_unsent(unsent, refused, now_ms)
                elif (
                    unsent.fail_on_connection_failure
                    and node_id is not None
                    and self.client.connection_failed_recently(node_id, now_ms)
                ):
                    # its manager looks for another node rather than wait for this one
                    error = KafkaConnectionError(
                        f"{type(unsent.request).__name__} was not sent: connecting to node {node_id} failed"
                    )
                    self._fail_unsent(unsent, error, now_ms)
                else:
                    self._unsent.append(unsent)
                continue
            self.client.send(
                ClientRequest(
                    node_id=node_id,
                    request=unsent.request,
                    callback=unsent.handler,
                    created_ms=now_ms,
                    expect_response=unsent.expect_response,
                    max_version=unsent.max_version,
                    timeout_ms=unsent.timeout_ms,
                    min_version=unsent.min_version,
                ),
                now_ms,
            )

    def _authentication_error(self, node_id: int | None) -> KafkaError | None:
        """The authentication failure of ``node_id``, or (for a request any broker may serve)
        the first one when every known broker refused the client."""
        if node_id is not None:
            return self.client.authentication_error(node_id)
        errors = [self.client.authentication_error(n) for n in self.client.cluster.known_node_ids()]
        if errors and all(e is not None for e in errors):
            return errors[0]
        return None

    def fail_unreachable(self, now_ms: int) -> None:
        """Fail at once every unsent request whose broker (any broker, for a node-agnostic
        one) is in reconnect backoff after a failed connection. Used at close, when no
        manager will retry and waiting for request.timeout.ms would only delay the close."""
        nodes = self.client.cluster.known_node_ids()
        pending = len(self._unsent)
        for _ in range(pending):
            unsent = self._unsent.popleft()
            targets = nodes if unsent.node_id is None else [unsent.node_id]
            if not all(self.client.connection_failed_recently(n, now_ms) for n in targets):
                self._unsent.append(unsent)
                continue
            target = "any broker" if unsent.node_id is None else f"node {unsent.node_id}"
            error = KafkaConnectionError(
                f"{type(unsent.request).__name__} could not be sent at close: {target} cannot be reached"
            )
            self._fail_unsent(unsent, error, now_ms)

    def _fail_unsent(self, unsent: UnsentRequest[Any], error: KafkaError, now_ms: int) -> None:
        request = ClientRequest(
            node_id=unsent.node_id if unsent.node_id is not None else -1,
            request=unsent.request,
            callback=unsent.handler,
            created_ms=now_ms,
        )
        self._dispatch(ClientResponse(request, None, error, -1, now_ms))

    def _fail_expired(self, now_ms: int) -> None:
        pending = len(self._unsent)
        for _ in range(pending):
            unsent = self._unsent.popleft()
            if now_ms < unsent.deadline_ms:
                self._unsent.append(unsent)
                continue
            target = "any broker" if unsent.node_id is None else f"node {unsent.node_id}"
            error = KafkaTimeoutError(
                f"{type(unsent.request).__name__} could not be sent to {target} within "
                f"request.timeout.ms={self._request_timeout_ms}: no connection could be made"
            )
            self._fail_unsent(unsent, error, now_ms)

    def _dispatch(self, response: ClientResponse[Any]) -> None:
        try:
            response.request.callback(response)
        except Exception:
            # A handler bug must not kill the network thread; managers report their own
            # errors to the application through events.
            log.exception("response handler for %s failed", type(response.request.request).__name__)

    def least_loaded_node(self, now_ms: int) -> int | None:
        """A broker to send a node-agnostic request to: ready with the fewest in flight,
        else one that is connecting, else one not in reconnect backoff (connect to it). When
        none of the known brokers is any of these, with metadata.recovery.strategy=rebootstrap,
        the brokers are forgotten and the bootstrap addresses are tried again (KIP-899)."""
        node = self._least_loaded(now_ms)
        cluster = self.client.cluster
        if node is None and self._rebootstrap and cluster.brokers:
            log.warning(
                "none of the known brokers %s can be reached: rebootstrapping from %s "
                "(metadata.recovery.strategy=rebootstrap)",
                sorted(f"{n.host}:{n.port}" for n in cluster.brokers.values()),
                ",".join(f"{h}:{p}" for h, p in cluster.bootstrap),
            )
            cluster.rebootstrap()
            node = self._least_loaded(now_ms)
        return node

    def _least_loaded(self, now_ms: int) -> int | None:
        nodes = self.client.cluster.known_node_ids()
        best: int | None = None
        best_load = 2**31
        for node_id in nodes:
            if self.client.is_ready(node_id):
                load = self.client.in_flight_count(node_id)
                if load < best_load:
                    best, best_load = node_id, load
        if best is not None:
            return best
        for node_id in nodes:
            conn = self.client.connection(node_id)
            if conn is not None and conn.is_connected_or_connecting():
                return node_id
        for node_id in nodes:
            if not self.client.connection_failed_recently(node_id, now_ms):
                return node_id
        return None

    def close(self, error: KafkaError) -> None:
        """Fail every unsent request with ``error``, close all connections and fail what was
        in flight."""
        self.fail_all_unsent(error)
        for response in self.client.close():
            self._dispatch(response)

    def fail_all_unsent(self, error: KafkaError) -> None:
        """At close: fail every request that was never sent with ``error``."""
        while self._unsent:
            self._fail_unsent(self._unsent.popleft(), error, 0)
