"""The fault proxy itself (:mod:`support.fault_proxy`), on real brokers.

* With confluent-kafka as the client (independent of kaflux): producing and consuming through the
  proxy with no faults works, on Tansu (which advertises the proxy's port) and on noida-db (whose
  Metadata and FindCoordinator answers the proxy rewrites), and every client connection goes
  through the proxy: the broker's only peers are the proxy's upstream sockets.
* Each fault, seen from a raw socket speaking ApiVersions v0 (so nothing but the proxy decides what
  the client sees).
"""

from __future__ import annotations

import socket
import struct
import time
import uuid
from collections.abc import Iterator

import pytest

from kaflux.protocol.api import ApiKey

from support.fault_helpers import proxied_broker, proxied_tansu
from support.fault_proxy import FaultProxy
from support.scenarios import ProxiedBroker

pytestmark = pytest.mark.integration

__all__ = ["proxied_tansu"]  # a fixture, used by name

WAIT_S = 20.0


@pytest.fixture(scope="module", params=["tansu", "noida"])
def any_proxied(request: pytest.FixtureRequest) -> Iterator[ProxiedBroker]:
    yield from proxied_broker(request.param)


@pytest.fixture
def proxy(proxied_tansu: ProxiedBroker) -> Iterator[FaultProxy]:
    proxied_tansu.proxy.reset()
    yield proxied_tansu.proxy
    proxied_tansu.proxy.reset()
    proxied_tansu.proxy.cut_connections()


# --- confluent-kafka through the proxy ---------------------------------------------------------------------


def broker_peer_ports(broker_port: int) -> set[int]:
    """Remote ports of the established TCP connections accepted on ``broker_port`` (from /proc)."""
    peers = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                lines = f.readlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            fields = line.split()
            local, remote, state = fields[1], fields[2], fields[3]
            if state == "01" and int(local.rsplit(":", 1)[1], 16) == broker_port:
                peers.add(int(remote.rsplit(":", 1)[1], 16))
    return peers


def test_confluent_kafka_produces_and_consumes_through_the_proxy(any_proxied: ProxiedBroker) -> None:
    from confluent_kafka import Consumer as CKConsumer
    from confluent_kafka import Producer as CKProducer
    from confluent_kafka.admin import AdminClient as CKAdmin
    from confluent_kafka.admin import NewTopic as CKNewTopic  # type: ignore[attr-defined]

    pb = any_proxied
    proxy = pb.proxy
    topic = f"kx-proxy-ck-{uuid.uuid4().hex[:8]}"
    bootstrap = pb.bootstrap_servers
    quiet = {"log_level": 3}
    admin = CKAdmin({"bootstrap.servers": bootstrap, **quiet})
    for future in admin.create_topics([CKNewTopic(topic, 3, 1)]).values():
        future.result(WAIT_S)
    metadata = admin.list_topics(timeout=WAIT_S)
    assert {(b.host, b.port) for b in metadata.brokers.values()} == {("127.0.0.1", proxy.port)}

    producer = CKProducer({"bootstrap.servers": bootstrap, "linger.ms": 5, **quiet})
    count = 3000
    delivered: list[object] = []
    for i in range(count):
        producer.produce(
            topic, key=b"k%d" % i, value=b"v%d" % i, on_delivery=lambda e, m: delivered.append(e)
        )
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(WAIT_S) == 0
    assert delivered == [None] * count

    consumer = CKConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"kx-proxy-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            **quiet,
        }
    )
    try:
        consumer.subscribe([topic])
        values: set[bytes | None] = set()
        deadline = time.monotonic() + WAIT_S
        while len(values) < count and time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.5):
                if message.error() is None:
                    values.add(message.value())
        assert values == {b"v%d" % i for i in range(count)}
        # Every connection the clients hold goes through the proxy: the broker's only peers are the
        # proxy's own upstream sockets.
        peers = broker_peer_ports(pb.broker.port)
        upstream = proxy.upstream_local_ports()
        assert peers, "no connection to the broker found in /proc/net/tcp"
        assert peers <= upstream, f"connections that bypass the proxy: {sorted(peers - upstream)}"
    finally:
        consumer.close()
    stats = proxy.stats()
    for key in (ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.METADATA, ApiKey.FIND_COORDINATOR, ApiKey.JOIN_GROUP):
        assert stats.requests_of(key) >= 1, f"no {key.name} request went through the proxy: {stats}"
        assert stats.responses_of(key) >= 1, f"no {key.name} response went through the proxy: {stats}"
    assert stats.connections_accepted >= 3
    if pb.kind == "noida":
        assert stats.rewritten >= 2 and stats.rewrite_failures == 0, stats


# --- each fault, seen from a raw socket --------------------------------------------------------------------


class RawClient:
    """A socket that sends ApiVersions v0 requests and reads raw frames."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)

    def send_api_versions(self, correlation_id: int) -> None:
        client_id = b"raw"
        body = struct.pack(">hhih", ApiKey.API_VERSIONS, 0, correlation_id, len(client_id)) + client_id
        self.sock.sendall(struct.pack(">i", len(body)) + body)

    def read_all(self, timeout: float) -> bytes:
        """Everything until EOF, or what came before ``timeout`` seconds passed."""
        data = b""
        deadline = time.monotonic() + timeout
        while (remaining := deadline - time.monotonic()) > 0:
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                return data + b"<EOF>"
            data += chunk
        return data

    def read_frame(self, timeout: float = WAIT_S) -> bytes:
        self.sock.settimeout(timeout)
        header = self._exactly(4)
        (size,) = struct.unpack(">i", header)
        return header + self._exactly(size)

    def _exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError(f"EOF after {len(data)} of {n} bytes")
            data += chunk
        return data

    def close(self) -> None:
        self.sock.close()


def correlation_of(frame: bytes) -> int:
    return int(struct.unpack_from(">i", frame, 4)[0])


@pytest.fixture
def raw(proxy: FaultProxy) -> Iterator[RawClient]:
    client = RawClient(proxy.port)
    yield client
    client.close()


def test_no_fault_answers_in_order_and_counts(proxy: FaultProxy, raw: RawClient) -> None:
    before = proxy.stats()
    for cid in (7, 8, 9):
        raw.send_api_versions(cid)
    assert [correlation_of(raw.read_frame()) for _ in range(3)] == [7, 8, 9]
    after = proxy.stats()
    assert after.requests_of(ApiKey.API_VERSIONS) - before.requests_of(ApiKey.API_VERSIONS) == 3
    assert after.responses_of(ApiKey.API_VERSIONS) - before.responses_of(ApiKey.API_VERSIONS) == 3


def test_cut_after_response_delivers_the_response_then_closes(proxy: FaultProxy, raw: RawClient) -> None:
    fault = proxy.cut_after_response(ApiKey.API_VERSIONS)
    raw.send_api_versions(1)
    data = raw.read_all(WAIT_S)
    assert data.endswith(b"<EOF>")
    frame = data[: -len(b"<EOF>")]
    assert len(frame) == 4 + struct.unpack(">i", frame[:4])[0] and correlation_of(frame) == 1
    assert fault.fired == 1 and fault.exhausted


def test_cut_mid_response_delivers_part_of_the_frame(proxy: FaultProxy, raw: RawClient) -> None:
    proxy.cut_mid_response(ApiKey.API_VERSIONS, keep=10)
    raw.send_api_versions(1)
    data = raw.read_all(WAIT_S)
    assert len(data) == 10 + len(b"<EOF>") and data.endswith(b"<EOF>")


@pytest.mark.parametrize("fault_name", ["cut_before_response", "cut_before_request", "cut_after_request"])
def test_cuts_without_a_response(proxy: FaultProxy, raw: RawClient, fault_name: str) -> None:
    fault = getattr(proxy, fault_name)(ApiKey.API_VERSIONS)
    before = proxy.stats().responses_of(ApiKey.API_VERSIONS)
    raw.send_api_versions(1)
    assert raw.read_all(WAIT_S) == b"<EOF>"
    assert fault.wait(timeout=1.0)
    if fault_name == "cut_before_response":
        assert proxy.stats().responses_of(ApiKey.API_VERSIONS) == before + 1  # the broker did answer


def test_drop_response_keeps_the_connection_open(proxy: FaultProxy, raw: RawClient) -> None:
    fault = proxy.drop_response(ApiKey.API_VERSIONS)
    raw.send_api_versions(1)
    raw.send_api_versions(2)
    assert correlation_of(raw.read_frame()) == 2  # the answer to 1 was swallowed
    assert fault.fired == 1


def test_drop_request_keeps_the_connection_open(proxy: FaultProxy, raw: RawClient) -> None:
    proxy.drop_request(ApiKey.API_VERSIONS)
    raw.send_api_versions(1)
    raw.send_api_versions(2)
    assert correlation_of(raw.read_frame()) == 2


def test_replace_response(proxy: FaultProxy, raw: RawClient) -> None:
    proxy.replace_response(ApiKey.API_VERSIONS, lambda frame: b"\x00\x00\x00\x02hi")
    raw.send_api_versions(1)
    raw.send_api_versions(2)
    assert raw.read_frame() == b"\x00\x00\x00\x02hi"
    assert correlation_of(raw.read_frame()) == 2


def test_times_none_fires_on_every_match_until_reset(proxy: FaultProxy) -> None:
    fault = proxy.cut_before_request(ApiKey.API_VERSIONS, times=None)
    for _ in range(3):
        client = RawClient(proxy.port)
        client.send_api_versions(1)
        assert client.read_all(WAIT_S) == b"<EOF>"
        client.close()
    assert fault.fired == 3 and not fault.exhausted
    proxy.reset()
    client = RawClient(proxy.port)
    client.send_api_versions(1)
    assert correlation_of(client.read_frame()) == 1
    client.close()


@pytest.mark.parametrize("direction", ["upstream", "downstream", "both"])
def test_stall_holds_frames_until_unstalled(proxy: FaultProxy, raw: RawClient, direction: str) -> None:
    proxy.stall(upstream=direction != "downstream", downstream=direction != "upstream")
    raw.send_api_versions(1)
    assert raw.read_all(0.5) == b""  # nothing comes while stalled (and the connection stays open)
    proxy.unstall()
    assert correlation_of(raw.read_frame()) == 1


def test_latency_delays_each_direction(proxy: FaultProxy, raw: RawClient) -> None:
    proxy.set_latency(0.2)
    started = time.monotonic()
    raw.send_api_versions(1)
    raw.read_frame()
    elapsed = time.monotonic() - started
    assert 0.4 <= elapsed < 5.0, elapsed
    proxy.set_latency(0)
    started = time.monotonic()
    raw.send_api_versions(2)
    raw.read_frame()
    assert time.monotonic() - started < 0.4


def test_cut_connections_closes_every_open_connection(proxy: FaultProxy) -> None:
    clients = [RawClient(proxy.port) for _ in range(3)]
    for c in clients:
        c.send_api_versions(1)
        c.read_frame()
    assert proxy.stats().connections_open >= 3
    assert proxy.cut_connections() >= 3
    for c in clients:
        assert c.read_all(WAIT_S) == b"<EOF>"
        c.close()
    assert proxy.wait_for(lambda s: s.connections_open == 0, WAIT_S)


def test_refuse_by_closing_and_by_not_listening(proxy: FaultProxy) -> None:
    proxy.refuse_connections("close")
    refused = proxy.stats().connections_refused
    client = RawClient(proxy.port)
    assert client.read_all(WAIT_S) == b"<EOF>"
    client.close()
    assert proxy.stats().connections_refused == refused + 1

    proxy.refuse_connections("unlisten")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", proxy.port), timeout=WAIT_S).close()

    proxy.accept_connections()
    client = RawClient(proxy.port)
    client.send_api_versions(3)
    assert correlation_of(client.read_frame()) == 3
    client.close()


def test_a_dead_upstream_closes_new_connections() -> None:
    proxy = FaultProxy(("127.0.0.1", _closed_port())).start()
    try:
        client = RawClient(proxy.port)
        assert client.read_all(WAIT_S) == b"<EOF>"
        client.close()
        assert proxy.wait_for(lambda s: s.upstream_failures == 1, WAIT_S)
    finally:
        proxy.close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port
