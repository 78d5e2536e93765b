"""NetworkClient over real loopback sockets against a tiny in-test Kafka server.

The server thread speaks the Kafka framing with kaflux's generated classes. Time given to the
client is injected (``now_ms`` and the ``clock`` passed to ``poll``); the only real waits are
for socket I/O, each bounded by a deadline.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kaflux.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    MalformedResponseError,
    UnsupportedVersionError,
)
from kaflux.network.backoff import ExponentialBackoff
from kaflux.network.cluster import ClusterMetadata
from kaflux.network.connection import ConnectionState
from kaflux.network.network_client import NetworkClient
from kaflux.network.requests import ClientRequest, ClientResponse
from kaflux.protocol.api import (
    CLIENT_VERSIONS,
    REQUESTS,
    ApiKey,
    request_header_version,
    response_header_version,
)
from kaflux.protocol.messages.api_versions import ApiVersion, ApiVersionsRequest, ApiVersionsResponse
from kaflux.protocol.messages.headers import RequestHeader, ResponseHeader
from kaflux.protocol.messages.metadata import MetadataRequest, MetadataResponse, MetadataResponseBroker
from kaflux.protocol.primitives import Reader, Writer

from support.socket_fake_broker import read_exactly

NODE = -1  # the bootstrap node
REQUEST_TIMEOUT_MS = 30_000
CLOSE = object()  # a handler result: close the connection instead of answering
SILENT = None  # a handler result: never answer

Handler = Callable[[int, Any], Any]


class AndClose:
    """A handler result: send ``answer`` and close the connection in the same write."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer


class Raw:
    """A handler result: send ``make(correlation_id)`` as raw bytes instead of a response."""

    def __init__(self, make: Callable[[int], bytes]) -> None:
        self.make = make


def _all_versions() -> list[ApiVersion]:
    return [
        ApiVersion(api_key=int(k), min_version=lo, max_version=hi) for k, (lo, hi) in CLIENT_VERSIONS.items()
    ]


def default_handler(version: int, request: Any) -> Any:
    if isinstance(request, ApiVersionsRequest):
        return ApiVersionsResponse(api_keys=_all_versions())
    if isinstance(request, MetadataRequest):
        return MetadataResponse(brokers=[MetadataResponseBroker(node_id=7, host="h", port=1)], cluster_id="c")
    raise AssertionError(f"unexpected {type(request).__name__}")


class KafkaServer:
    """One listening socket; serves one connection at a time on a daemon thread."""

    def __init__(self, handler: Handler = default_handler) -> None:
        self.handler = handler
        self.received: list[tuple[int, Any]] = []  # (version, request) in arrival order
        self.request_arrived = threading.Condition()
        self._stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, name="kafka-test-server", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._listener.close()

    def wait_for(self, count: int, timeout_s: float = 5.0) -> None:
        """Wait until ``count`` requests have arrived."""
        with self.request_arrived:
            assert self.request_arrived.wait_for(lambda: len(self.received) >= count, timeout_s), (
                self.received
            )

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(0.05)
                self._serve_connection(conn)

    def _serve_connection(self, conn: socket.socket) -> None:
        while True:
            size = read_exactly(conn, self._stop, 4)
            if size is None:
                return
            body = read_exactly(conn, self._stop, struct.unpack(">i", size)[0])
            if body is None:
                return
            api_key, version = struct.unpack_from(">hh", body)
            reader = Reader(body)
            header = RequestHeader.decode(reader, request_header_version(api_key, version))
            request = REQUESTS[ApiKey(api_key)].decode(reader, version)
            answer = self.handler(version, request)
            with self.request_arrived:
                self.received.append((version, request))
                self.request_arrived.notify_all()
            if answer is CLOSE:
                return
            if answer is None:
                continue
            if isinstance(answer, Raw):
                conn.sendall(answer.make(header.correlation_id))
                continue
            close = isinstance(answer, AndClose)
            if close:
                answer = answer.answer
            response, response_version = answer if isinstance(answer, tuple) else (answer, version)
            w = Writer()
            ResponseHeader(correlation_id=header.correlation_id).encode(
                w, response_header_version(api_key, version)
            )
            response.encode(w, response_version)
            payload = w.getvalue()
            conn.sendall(struct.pack(">i", len(payload)) + payload)
            if close:
                return


@pytest.fixture
def server() -> Iterator[KafkaServer]:
    srv = KafkaServer()
    yield srv
    srv.close()


def make_client(port: int, *, reconnect: ExponentialBackoff | None = None) -> NetworkClient:
    return NetworkClient(
        ClusterMetadata([("127.0.0.1", port)]),
        client_id="test",
        request_timeout_ms=REQUEST_TIMEOUT_MS,
        max_in_flight=5,
        reconnect_backoff=reconnect or ExponentialBackoff(50, 1000, jitter=0.0),
        connection_setup_timeout_ms=10_000,
    )


@pytest.fixture
def client_factory() -> Iterator[Callable[..., NetworkClient]]:
    clients: list[NetworkClient] = []

    def make(port: int, **kwargs: Any) -> NetworkClient:
        clients.append(make_client(port, **kwargs))
        return clients[-1]

    yield make
    for client in clients:
        client.close()


def poll_until(
    client: NetworkClient,
    done: Callable[[list[ClientResponse]], bool],
    now_ms: int = 0,
    timeout_s: float = 5.0,
) -> list[ClientResponse]:
    """Poll (at a fixed injected time) until ``done(responses so far)``; bounded in real time."""
    deadline = time.monotonic() + timeout_s
    responses: list[ClientResponse] = []
    while not done(responses):
        assert time.monotonic() < deadline, "condition not reached in time"
        responses += client.poll(20, now_ms, lambda: now_ms)
    return responses


def connect(client: NetworkClient, now_ms: int = 0) -> None:
    client.ready(NODE, now_ms)
    poll_until(client, lambda _: client.is_ready(NODE), now_ms)


class Recorder:
    def __init__(self) -> None:
        self.responses: list[ClientResponse] = []

    def __call__(self, response: ClientResponse) -> None:
        self.responses.append(response)


def send_metadata(client: NetworkClient, now_ms: int) -> ClientRequest:
    request = ClientRequest(NODE, MetadataRequest(topics=None), Recorder(), now_ms)
    client.send(request, now_ms)
    return request


def test_connect_negotiates_api_versions(
    server: KafkaServer, client_factory: Callable[..., NetworkClient]
) -> None:
    client = client_factory(server.port)
    assert client.ready(NODE, 0) is False
    connect(client)
    version, request = server.received[0]
    assert isinstance(request, ApiVersionsRequest)
    assert version == ApiVersionsRequest.MAX_VERSION
    assert request.client_software_name == "kaflux"
    assert client.api_version(NODE, ApiKey.METADATA) == CLIENT_VERSIONS[ApiKey.METADATA][1]


def _metadata_v4_only(version: int, request: Any) -> Any:
    """A broker offering Metadata v0-4 and nothing else."""
    if isinstance(request, ApiVersionsRequest):
        return ApiVersionsResponse(api_keys=[ApiVersion(api_key=3, min_version=0, max_version=4)])
    return default_handler(version, request)


def test_negotiation_picks_the_highest_version_both_sides_support(
    client_factory: Callable[..., NetworkClient],
) -> None:
    srv = KafkaServer(_metadata_v4_only)
    try:
        client = client_factory(srv.port)
        connect(client)
        assert client.api_version(NODE, ApiKey.METADATA) == 4
        assert client.api_version(NODE, ApiKey.FETCH) is None
    finally:
        srv.close()


def test_a_request_needing_a_newer_version_than_the_broker_offers_fails_unsent(
    client_factory: Callable[..., NetworkClient],
) -> None:
    srv = KafkaServer(_metadata_v4_only)
    try:
        client = client_factory(srv.port)
        connect(client)
        received = len(srv.received)
        client.send(ClientRequest(NODE, MetadataRequest(topics=None), Recorder(), 100, min_version=5), 100)
        assert client.in_flight_count(NODE) == 0, "not sent"
        (refused,) = poll_until(client, lambda r: len(r) == 1, now_ms=100)
        assert isinstance(refused.error, UnsupportedVersionError)
        assert "METADATA only up to v4; this request needs v5 or later" in str(refused.error)
        assert client.is_ready(NODE), "the connection stays usable"
        client.send(ClientRequest(NODE, MetadataRequest(topics=None), Recorder(), 100, min_version=4), 100)
        (answered,) = poll_until(client, lambda r: len(r) == 1, now_ms=100)
        assert answered.error is None and answered.api_version == 4
        assert len(srv.received) == received + 1, "only the second request reached the broker"
    finally:
        srv.close()


def test_request_gets_its_response(server: KafkaServer, client_factory: Callable[..., NetworkClient]) -> None:
    client = client_factory(server.port)
    connect(client)
    request = send_metadata(client, 100)
    (response,) = poll_until(client, lambda r: len(r) == 1, now_ms=150)
    assert response.request is request
    assert response.error is None
    assert response.body.brokers[0].node_id == 7
    assert response.api_version == client.api_version(NODE, ApiKey.METADATA)
    assert response.received_ms == 150
    assert client.in_flight_count(NODE) == 0


def test_unanswered_request_fails_with_a_timeout_and_closes_the_connection(
    client_factory: Callable[..., NetworkClient],
) -> None:
    srv = KafkaServer(lambda v, r: default_handler(v, r) if isinstance(r, ApiVersionsRequest) else SILENT)
    try:
        client = client_factory(srv.port)
        connect(client)
        request = send_metadata(client, 1_000)
        srv.wait_for(2)
        assert client.poll(0, 1_000 + REQUEST_TIMEOUT_MS - 1, lambda: 1_000 + REQUEST_TIMEOUT_MS - 1) == []
        (response,) = client.poll(0, 1_000 + REQUEST_TIMEOUT_MS, lambda: 1_000 + REQUEST_TIMEOUT_MS)
        assert response.request is request
        assert isinstance(response.error, KafkaTimeoutError)
        assert response.error.retriable
        connection = client.connection(NODE)
        assert connection is not None
        assert connection.state is ConnectionState.DISCONNECTED
        assert client.in_flight_count() == 0
    finally:
        srv.close()


def test_server_closing_the_socket_fails_in_flight_requests_with_a_connection_error(
    client_factory: Callable[..., NetworkClient],
) -> None:
    srv = KafkaServer(lambda v, r: default_handler(v, r) if isinstance(r, ApiVersionsRequest) else CLOSE)
    try:
        client = client_factory(srv.port)
        connect(client)
        first = send_metadata(client, 10)
        second = send_metadata(client, 10)
        responses = poll_until(client, lambda r: len(r) == 2, now_ms=20)
        assert [r.request for r in responses] == [first, second]
        assert all(isinstance(r.error, KafkaConnectionError) and r.error.retriable for r in responses)
        assert not client.is_ready(NODE)
        assert client.connection_failed_recently(NODE, 20)
    finally:
        srv.close()


def test_reconnect_backoff_grows_after_each_failed_connect(
    client_factory: Callable[..., NetworkClient],
) -> None:
    refusing = socket.socket()  # bound but not listening: connects are refused
    refusing.bind(("127.0.0.1", 0))
    try:
        client = client_factory(refusing.getsockname()[1])
        now = 0
        windows = []
        for _ in range(4):
            client.ready(NODE, now)
            poll_until(client, lambda _, t=now: client.connection_failed_recently(NODE, t), now_ms=now)  # type: ignore[misc]
            retry_at = now
            while client.connection_failed_recently(NODE, retry_at):
                retry_at += 1
            windows.append(retry_at - now)
            assert client.ready(NODE, retry_at - 1) is False
            now = retry_at
        assert windows == [50, 100, 200, 400]
    finally:
        refusing.close()


def test_a_request_to_a_node_that_is_not_ready_fails_at_once(
    server: KafkaServer, client_factory: Callable[..., NetworkClient]
) -> None:
    client = client_factory(server.port)
    send_metadata(client, 0)
    (response,) = client.poll(0, 0, lambda: 0)
    assert isinstance(response.error, KafkaConnectionError)


def test_wakeup_from_another_thread_ends_a_blocked_poll(
    server: KafkaServer, client_factory: Callable[..., NetworkClient]
) -> None:
    client = client_factory(server.port)
    entered = threading.Event()
    elapsed: list[float] = []

    def clock() -> int:
        return 0

    def blocked_poll() -> None:
        entered.set()
        start = time.monotonic()
        client.poll(10_000, 0, clock)
        elapsed.append(time.monotonic() - start)

    thread = threading.Thread(target=blocked_poll, daemon=True)
    thread.start()
    assert entered.wait(5)
    client.wakeup()
    thread.join(5)
    assert not thread.is_alive(), "poll(10_000) was not woken up"
    assert elapsed[0] < 5


def test_api_versions_falls_back_when_the_broker_answers_unsupported_version(
    client_factory: Callable[..., NetworkClient],
) -> None:
    def broker_knowing_v2(version: int, request: Any) -> Any:
        if isinstance(request, ApiVersionsRequest) and version > 2:
            # A broker answers an ApiVersions version it does not know in the v0 format.
            versions = [
                ApiVersion(api_key=18, min_version=0, max_version=2),
                ApiVersion(api_key=3, min_version=0, max_version=9),
            ]
            return ApiVersionsResponse(error_code=35, api_keys=versions), 0
        if isinstance(request, ApiVersionsRequest):
            return ApiVersionsResponse(api_keys=[ApiVersion(api_key=3, min_version=0, max_version=9)])
        return default_handler(version, request)

    srv = KafkaServer(broker_knowing_v2)
    try:
        client = client_factory(srv.port)
        connect(client)
        assert [v for v, r in srv.received if isinstance(r, ApiVersionsRequest)] == [4, 2]
        assert client.api_version(NODE, ApiKey.METADATA) == 9
    finally:
        srv.close()


def test_api_versions_error_in_the_requested_layout_is_read_too(
    client_factory: Callable[..., NetworkClient],
) -> None:
    """librdkafka's mock cluster answers ApiVersions v4 with UNSUPPORTED_VERSION in the v4 layout
    (others use v0's): read the requested layout first, as Java does, then retry at its max."""

    def mock_like(version: int, request: Any) -> Any:
        if isinstance(request, ApiVersionsRequest) and version > 2:
            versions = [ApiVersion(api_key=18, min_version=0, max_version=2)]
            return ApiVersionsResponse(error_code=35, api_keys=versions)  # in the requested layout
        if isinstance(request, ApiVersionsRequest):
            return ApiVersionsResponse(api_keys=[ApiVersion(api_key=3, min_version=0, max_version=9)])
        return default_handler(version, request)

    srv = KafkaServer(mock_like)
    try:
        client = client_factory(srv.port)
        connect(client)
        assert [v for v, r in srv.received if isinstance(r, ApiVersionsRequest)] == [4, 2]
        assert client.api_version(NODE, ApiKey.METADATA) == 9
    finally:
        srv.close()


def test_in_flight_limit_makes_the_node_not_ready(server: KafkaServer) -> None:
    client = NetworkClient(
        ClusterMetadata([("127.0.0.1", server.port)]),
        client_id="test",
        request_timeout_ms=REQUEST_TIMEOUT_MS,
        max_in_flight=1,
        reconnect_backoff=ExponentialBackoff(50, 1000, jitter=0.0),
        connection_setup_timeout_ms=10_000,
    )
    try:
        connect(client)
        send_metadata(client, 0)
        assert not client.is_ready(NODE)
        poll_until(client, lambda r: len(r) == 1)
        assert client.is_ready(NODE)
    finally:
        client.close()


def test_close_fails_in_flight_requests(server: KafkaServer) -> None:
    client = make_client(server.port)
    connect(client)
    request = send_metadata(client, 0)
    (response,) = client.close()
    assert response.request is request
    assert isinstance(response.error, KafkaConnectionError)


def _versions_then(answer: Callable[[int, Any], Any]) -> Handler:
    def handler(version: int, request: Any) -> Any:
        if isinstance(request, ApiVersionsRequest):
            return default_handler(version, request)
        return answer(version, request)

    return handler


def test_a_response_arriving_with_the_close_is_delivered_and_the_rest_fail(
    client_factory: Callable[..., NetworkClient],
) -> None:
    """A broker that answers and then crashes: the answer arrives in the same read as the close.
    The answered request gets its response; the one behind it fails; none is lost."""
    answered = 0

    def answer_first_then_crash(version: int, request: Any) -> Any:
        nonlocal answered
        answered += 1
        return AndClose(default_handler(version, request)) if answered == 1 else SILENT

    srv = KafkaServer(_versions_then(answer_first_then_crash))
    try:
        client = client_factory(srv.port)
        connect(client)
        first = send_metadata(client, 10)
        responses = poll_until(client, lambda r: len(r) == 1, now_ms=20)
        assert responses[0].request is first
        assert responses[0].error is None
        assert responses[0].body.brokers[0].node_id == 7
        assert client.in_flight_count() == 0
        # The close is seen no later than the next read: the node is then not ready.
        poll_until(client, lambda _: not client.is_ready(NODE), now_ms=20)
    finally:
        srv.close()


#: an empty tagged-field section ends the (flexible) response header; then three bytes where
#: Metadata's 4-byte throttle time should be
_UNDECODABLE_BODY = b"\x00\xff\xff\xff"


def _frame(correlation_id: int, body: bytes) -> bytes:
    payload = struct.pack(">i", correlation_id) + body
    return struct.pack(">i", len(payload)) + payload


@pytest.mark.parametrize(
    ("raw", "error_class", "retriable"),
    [
        # a frame that answers no request in flight: the stream is suspect, the request retried
        pytest.param(
            lambda cid: _frame(cid + 999, b"\x00" * 16), KafkaConnectionError, True, id="wrong-correlation-id"
        ),
        # the request's own answer, undecodable: a retry would get it again, so it fails at once
        pytest.param(
            lambda cid: _frame(cid, _UNDECODABLE_BODY), MalformedResponseError, False, id="undecodable-body"
        ),
    ],
)
def test_a_bad_response_fails_its_request_instead_of_dropping_it(
    client_factory: Callable[..., NetworkClient],
    raw: Callable[[int], bytes],
    error_class: type[KafkaError],
    retriable: bool,
) -> None:
    srv = KafkaServer(_versions_then(lambda v, r: Raw(raw)))
    try:
        client = client_factory(srv.port)
        connect(client)
        request = send_metadata(client, 10)
        (response,) = poll_until(client, lambda r: len(r) == 1, now_ms=20)
        assert response.request is request
        assert type(response.error) is error_class
        assert response.error.retriable is retriable
        assert client.in_flight_count() == 0
    finally:
        srv.close()


def test_a_malformed_answer_fails_its_request_and_the_others_on_the_connection_are_retriable(
    client_factory: Callable[..., NetworkClient],
) -> None:
    answered = 0

    def malformed_then_silent(version: int, request: Any) -> Any:
        nonlocal answered
        answered += 1
        return Raw(lambda cid: _frame(cid, _UNDECODABLE_BODY)) if answered == 1 else SILENT

    srv = KafkaServer(_versions_then(malformed_then_silent))
    try:
        client = client_factory(srv.port)
        connect(client)
        first, second = send_metadata(client, 10), send_metadata(client, 10)
        responses = poll_until(client, lambda r: len(r) == 2, now_ms=20)
        by_request = {id(r.request): r.error for r in responses}
        malformed, other = by_request[id(first)], by_request[id(second)]
        assert isinstance(malformed, MalformedResponseError) and not malformed.retriable
        assert "METADATA" in str(malformed) and "could not be decoded" in str(malformed)
        assert f"127.0.0.1:{srv.port}" in str(malformed)
        assert isinstance(other, KafkaConnectionError) and other.retriable
        assert not client.is_ready(NODE)
    finally:
        srv.close()


def test_a_huge_length_prefix_is_refused_before_anything_is_allocated(
    client_factory: Callable[..., NetworkClient],
) -> None:
    hostile = struct.pack(">i", 496 * 1024 * 1024) + b"\x00" * 64
    srv = KafkaServer(_versions_then(lambda v, r: Raw(lambda _: hostile)))
    try:
        client = client_factory(srv.port)
        connect(client)
        request = send_metadata(client, 10)
        (response,) = poll_until(client, lambda r: len(r) == 1, now_ms=20)
        assert response.request is request
        assert isinstance(response.error, KafkaConnectionError)
        assert "receive.message.max.bytes" in str(response.error)
    finally:
        srv.close()
