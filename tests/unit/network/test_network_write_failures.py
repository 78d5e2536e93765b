"""A socket write that fails while a request is being sent completes that request exactly
once, whatever its kind and wherever it falls in a burst (issue 24, D1).

The failure is injected deterministically: the client's sockets are a subclass whose ``send``
raises ``BrokenPipeError`` (EPIPE) when the frame it is asked to write is the n-th request of
the chosen API key. The broker is :mod:`socket_fake_broker`; the
producer case runs the real Producer against it and also watches its
``requests-in-flight`` gauge, which must never go below zero.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from kaflux import Producer, TopicPartition
from kaflux.errors import KafkaConnectionError
from kaflux.network import connection as connection_module
from kaflux.network.backoff import ExponentialBackoff
from kaflux.network.cluster import ClusterMetadata
from kaflux.network.network_client import NetworkClient
from kaflux.network.requests import ClientRequest
from kaflux.protocol.api import ApiKey
from kaflux.protocol.messages.fetch import FetchRequest
from kaflux.protocol.messages.metadata import MetadataRequest
from kaflux.protocol.messages.produce import ProduceRequest

from support.fake_transactions import TxnFakeCluster
from support.socket_fake_broker import SocketFakeBroker

BURST = 5
POSITIONS = {"first": 1, "middle": 3, "last": BURST}


class WritePlan:
    """Which write to fail: the ``nth`` frame (1-based) of ``api_key`` the client writes."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.api_key: int | None = None
        self.nth = 0
        self.seen = 0
        self.failed = 0

    def arm(self, api_key: int, nth: int) -> None:
        with self.lock:
            self.api_key, self.nth, self.seen, self.failed = api_key, nth, 0, 0

    def should_fail(self, data: Any) -> bool:
        if len(data) < 6:
            return False
        (key,) = struct.unpack_from(">h", data, 4)
        with self.lock:
            if self.api_key is None or key != self.api_key:
                return False
            self.seen += 1
            if self.seen != self.nth:
                return False
            self.failed += 1
            return True


PLAN = WritePlan()


class FailingSocket(socket.socket):
    """A client socket whose write of the planned frame fails with EPIPE."""

    def send(self, data: Any, flags: int = 0) -> int:
        if PLAN.should_fail(data):
            del data  # (a traceback must not pin the client's output buffer)
            raise BrokenPipeError(32, "Broken pipe (injected)")
        return super().send(data, flags)


class _SocketModule:
    """The ``socket`` module as ``kaflux.network.connection`` sees it, with FailingSocket."""

    socket = FailingSocket

    def __getattr__(self, name: str) -> Any:
        return getattr(socket, name)


@pytest.fixture
def failing_writes(monkeypatch: pytest.MonkeyPatch) -> WritePlan:
    PLAN.arm(-1, 0)
    monkeypatch.setattr(connection_module, "socket", _SocketModule())
    return PLAN


NODE = -1  # the bootstrap node


@pytest.fixture
def broker() -> Iterator[SocketFakeBroker]:
    cluster = TxnFakeCluster(1)
    cluster.create_topic("cut", 1)
    srv = SocketFakeBroker(cluster)
    yield srv
    srv.close()


def make_client(port: int) -> NetworkClient:
    return NetworkClient(
        ClusterMetadata([("127.0.0.1", port)]),
        client_id="test",
        request_timeout_ms=30_000,
        max_in_flight=BURST,
        reconnect_backoff=ExponentialBackoff(50, 1000, jitter=0.0),
        connection_setup_timeout_ms=10_000,
    )


def connect(client: NetworkClient) -> None:
    client.ready(NODE, 0)
    deadline = time.monotonic() + 5
    while not client.is_ready(NODE):
        assert time.monotonic() < deadline, "not connected in time"
        assert client.poll(20, 0, lambda: 0) == []


def _request(kind: str) -> Any:
    if kind == "produce":
        return ProduceRequest(acks=-1, timeout_ms=1000)
    if kind == "fetch":
        return FetchRequest(max_wait_ms=0)
    return MetadataRequest(topics=None)


API_KEYS = {"produce": ApiKey.PRODUCE, "fetch": ApiKey.FETCH, "metadata": ApiKey.METADATA}


@pytest.mark.parametrize("position", list(POSITIONS))
@pytest.mark.parametrize("kind", list(API_KEYS))
def test_a_failed_write_completes_every_request_of_a_burst_exactly_once(
    failing_writes: WritePlan, broker: SocketFakeBroker, kind: str, position: str
) -> None:
    client: NetworkClient = make_client(broker.port)
    try:
        connect(client)
        failing_writes.arm(int(API_KEYS[kind]), POSITIONS[position])
        completions: Counter[int] = Counter()
        errors: dict[int, list[Any]] = {}
        requests: list[ClientRequest] = []
        for index in range(BURST):

            def record(response: Any, index: int = index) -> None:
                completions[index] += 1
                errors.setdefault(index, []).append(response.error)

            request = ClientRequest(NODE, _request(kind), record, 10)
            requests.append(request)
            client.send(request, 10)
            assert client.in_flight_count() >= 0
        assert failing_writes.failed == 1, "the planned write was attempted and failed"
        deadline = time.monotonic() + 5
        while len(completions) < BURST:
            assert time.monotonic() < deadline, f"completions so far: {dict(completions)}"
            for response in client.poll(20, 20, lambda: 20):
                response.request.callback(response)
            assert client.in_flight_count() >= 0
        # a few more rounds: a second completion would show up here
        for _ in range(5):
            for response in client.poll(10, 30, lambda: 30):
                response.request.callback(response)
        assert dict(completions) == dict.fromkeys(range(BURST), 1)
        failed_at = POSITIONS[position] - 1
        assert isinstance(errors[failed_at][0], KafkaConnectionError)
        assert errors[failed_at][0].retriable
        for index in range(failed_at + 1, BURST):
            # sent after the connection broke: refused at once, not lost
            assert isinstance(errors[index][0], KafkaConnectionError)
        assert client.in_flight_count() == 0
    finally:
        client.close()


TP = TopicPartition("cut", 0)


def test_producer_delivers_every_record_once_and_its_in_flight_gauge_never_goes_negative(
    failing_writes: WritePlan,
) -> None:
    # (a fake that checks producer sequences, as a broker does: the requests that were in flight
    # on the broken connection were written, so their retries are duplicates it must drop)
    cluster = TxnFakeCluster(1)
    cluster.create_topic(TP.topic, 1)
    broker = SocketFakeBroker(cluster)
    failing_writes.arm(int(ApiKey.PRODUCE), 3)
    delivered: Counter[int] = Counter()
    failures: list[BaseException] = []
    gauge_readings: list[float] = []
    try:
        with Producer(
            {"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0, "enable.idempotence": True}
        ) as producer:
            futures = []
            for i in range(200):

                def on_delivery(_metadata: Any, error: BaseException | None, i: int = i) -> None:
                    delivered[i] += 1
                    if error is not None:
                        failures.append(error)

                futures.append(producer.send(TP.topic, b"v%d" % i, partition=0, callback=on_delivery))
                if i % 20 == 19:
                    # (rounds of 20 records: at least ten Produce requests, several in flight)
                    gauge_readings.append(_in_flight_gauge(producer))
                    producer.flush(30)
                    gauge_readings.append(_in_flight_gauge(producer))
            producer.flush(30)
            for future in futures:
                future.result(timeout=10)
            gauge_readings.append(_in_flight_gauge(producer))
        assert failing_writes.failed == 1
        assert failures == []
        assert dict(delivered) == dict.fromkeys(range(200), 1)
        assert [v for _, _, v in cluster.records(TP)] == [b"v%d" % i for i in range(200)]
        assert min(gauge_readings) >= 0.0, gauge_readings
        assert gauge_readings[-1] == 0.0
    finally:
        broker.close()


def _in_flight_gauge(producer: Producer) -> float:
    for name, values in producer.metrics().items():
        if "requests-in-flight" in values and "producer" in name:
            return values["requests-in-flight"]
    raise AssertionError(f"no requests-in-flight gauge in {sorted(producer.metrics())}")
