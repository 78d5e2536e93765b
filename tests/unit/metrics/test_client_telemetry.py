"""KIP-714 for every client: the telemetry names of the producer's, the admin client's and the
share consumer's metrics (recorded with injected time into the sensors each client's network
thread records into), the client instance id future and ClientTelemetry's
client_instance_id(timeout), enable.metrics.push on each client's config, and each client's
client_instance_id() as that setting makes it (no broker: Kafka 4.4 gives the ids in
tests/integration/test_telemetry_kafka.py). [test]"""

from __future__ import annotations

import random
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kaflux import AdminClient, Consumer, Producer, ShareConsumer
from kaflux.blocking import run_sync
from kaflux.config import AdminConfig, ConsumerConfig, ProducerConfig, ShareConsumerConfig
from kaflux.errors import ConfigError, IllegalStateError, InvalidArgumentError, UnsupportedVersionError
from kaflux.metrics.clients import NetworkMetrics, ProducerMetrics, ShareMetrics
from kaflux.metrics.registry import MetricsRegistry
from kaflux.metrics.telemetry import select_metrics
from kaflux.network.client_telemetry import ClientTelemetry
from kaflux.network.requests import ClientResponse, UnsentRequest
from kaflux.network.telemetry_manager import TelemetryRequestManager
from kaflux.protocol.messages.get_telemetry_subscriptions import GetTelemetrySubscriptionsResponse


def _pushed(registry: MetricsRegistry, prefix: str, now_ms: int) -> dict[str, list[dict[str, str]]]:
    """Telemetry name -> the attributes of each data point a subscription to ``prefix`` gets."""
    out: dict[str, list[dict[str, str]]] = {}
    for name, attributes, _value, _is_sum in select_metrics(registry.snapshot(now_ms), [prefix]):
        out.setdefault(name, []).append(attributes)
    return out


def test_the_producers_metrics_have_javas_telemetry_names() -> None:
    registry = MetricsRegistry()
    network = NetworkMetrics(registry, "producer", lambda: 1)
    producer = ProducerMetrics(registry, requests_in_flight=lambda: 0, buffer_total_bytes=1024)
    network.request_sent(1, 100)
    network.response_received(1, 7, 107)
    producer.request_sent(3, 100)
    producer.batch_sent("orders", 3, 300, 12, 100)
    producer.request_answered(7, 2, 107)
    pushed = _pushed(registry, "org.apache.kafka.producer.", 110)
    for name in (
        "org.apache.kafka.producer.record.queue.time.avg",
        "org.apache.kafka.producer.record.queue.time.max",
        "org.apache.kafka.producer.produce.throttle.time.avg",
        "org.apache.kafka.producer.produce.throttle.time.max",
        "org.apache.kafka.producer.request.latency.avg",
        "org.apache.kafka.producer.record.send.total",
        "org.apache.kafka.producer.connection.count",
        "org.apache.kafka.producer.request.total",
    ):
        assert pushed[name] == [{}], name
    assert pushed["org.apache.kafka.producer.node.request.latency.avg"] == [{"node_id": "node-1"}]
    assert pushed["org.apache.kafka.producer.node.request.latency.max"] == [{"node_id": "node-1"}]
    assert pushed["org.apache.kafka.producer.topic.record.send.total"] == [{"topic": "orders"}]
    assert all(n.startswith("org.apache.kafka.producer.") for n in pushed)
    # a consumer subscription gets none of them
    assert _pushed(registry, "org.apache.kafka.consumer.", 110) == {}


def test_the_admin_clients_metrics_are_javas_admin_client_names() -> None:
    registry = MetricsRegistry()
    network = NetworkMetrics(registry, "admin-client", lambda: 2)
    network.request_sent(3, 0)
    network.response_received(3, 4, 4)
    pushed = _pushed(registry, "org.apache.kafka.admin.client.", 5)
    assert pushed["org.apache.kafka.admin.client.request.total"] == [{}]
    assert pushed["org.apache.kafka.admin.client.connection.count"] == [{}]
    assert pushed["org.apache.kafka.admin.client.node.request.latency.max"] == [{"node_id": "node-3"}]
    assert all(n.startswith("org.apache.kafka.admin.client.") for n in pushed)


def test_the_share_consumers_metrics_are_consumer_names_as_in_java() -> None:
    registry = MetricsRegistry()
    network = NetworkMetrics(registry, "consumer", lambda: 1)
    share = ShareMetrics(registry)
    network.request_sent(2, 0)
    network.response_received(2, 9, 9)
    share.fetch_sent(0, 0)
    share.fetch_answered(9, 5, 500, 9)
    share.heartbeat_sent(1)
    pushed = _pushed(registry, "org.apache.kafka.consumer.", 10)
    for name in (
        "org.apache.kafka.consumer.share.fetch.manager.fetch.total",
        "org.apache.kafka.consumer.share.fetch.manager.records.consumed.total",
        "org.apache.kafka.consumer.share.fetch.manager.fetch.latency.avg",
        "org.apache.kafka.consumer.share.coordinator.heartbeat.total",
        "org.apache.kafka.consumer.request.total",
    ):
        assert pushed[name] == [{}], name
    assert pushed["org.apache.kafka.consumer.node.request.latency.avg"] == [{"node_id": "node-2"}]
    assert all(n.startswith("org.apache.kafka.consumer.") for n in pushed)


# -- the client instance id ------------------------------------------------------------------------


def _manager() -> TelemetryRequestManager:
    return TelemetryRequestManager(lambda now_ms: {}, {}, rng=random.Random(1), wall_ns=lambda: 0)


def _answer(unsent: UnsentRequest[Any], body: Any, error: BaseException | None = None) -> None:
    unsent.handler(ClientResponse(None, body, error, 0, 0))  # type: ignore[arg-type]


def test_the_instance_id_future_is_done_with_the_first_subscriptions_id() -> None:
    manager = _manager()
    assert not manager.instance_id.done()
    (ask,) = manager.poll(0).unsent
    given = uuid.uuid4()
    _answer(ask, GetTelemetrySubscriptionsResponse(client_instance_id=given, push_interval_ms=100))
    assert manager.instance_id.result(0) == given


def test_the_instance_id_future_is_done_with_none_when_the_broker_has_no_telemetry_apis() -> None:
    manager = _manager()
    (ask,) = manager.poll(0).unsent
    _answer(ask, None, UnsupportedVersionError("no GetTelemetrySubscriptions"))
    assert manager.instance_id.result(0) is None


def test_client_instance_id_waits_for_the_future_and_says_none_when_it_is_not_done() -> None:
    telemetry = ClientTelemetry(True, "p-1", lambda now_ms: {})
    (manager,) = telemetry.managers
    assert isinstance(manager, TelemetryRequestManager)
    assert run_sync(telemetry.client_instance_id(0.05)) is None  # no subscription yet: Java's null
    (ask,) = manager.poll(0).unsent
    given = uuid.uuid4()
    _answer(ask, GetTelemetrySubscriptionsResponse(client_instance_id=given, push_interval_ms=100))
    assert run_sync(telemetry.client_instance_id(0)) == given


def test_client_instance_id_with_push_off_raises_and_adds_no_manager() -> None:
    telemetry = ClientTelemetry(False, "a-1", lambda now_ms: {})
    assert telemetry.managers == [] and not telemetry.enabled
    with pytest.raises(IllegalStateError, match=r"enable\.metrics\.push"):
        run_sync(telemetry.client_instance_id(1.0))


def test_a_negative_timeout_is_refused() -> None:
    telemetry = ClientTelemetry(True, "p-1", lambda now_ms: {})
    with pytest.raises(InvalidArgumentError, match="negative"):
        run_sync(telemetry.client_instance_id(-1))


# -- enable.metrics.push on every client -------------------------------------------------------------


def test_every_client_validates_enable_metrics_push_with_javas_defaults() -> None:
    base = {"bootstrap.servers": "127.0.0.1:9092"}
    assert ConsumerConfig.from_dict(base).enable_metrics_push is True
    assert ProducerConfig.from_dict(base).enable_metrics_push is True
    assert ShareConsumerConfig.from_dict({**base, "group.id": "g"}).enable_metrics_push is True
    assert AdminConfig.from_dict(base).enable_metrics_push is False  # Java's AdminClientConfig default
    assert ProducerConfig.from_dict({**base, "enable.metrics.push": "false"}).enable_metrics_push is False
    assert AdminConfig.from_dict({**base, "enable.metrics.push": True}).enable_metrics_push is True
    with pytest.raises(ConfigError, match=r"enable\.metrics\.push"):
        ProducerConfig.from_dict({**base, "enable.metrics.push": "sometimes"})


# -- every client: enable.metrics.push decides, client_instance_id answers ---------------------------


@pytest.fixture
def unreachable() -> Iterator[str]:
    """A loopback port that refuses connections (bound, not listening)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    yield f"127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


def _client(kind: str, config: dict[str, object]) -> Any:
    if kind == "consumer":
        return Consumer(config)
    if kind == "producer":
        return Producer(config)
    if kind == "admin":
        return AdminClient(config)
    return ShareConsumer({**config, "group.id": "g"})


@pytest.mark.parametrize("kind", ["consumer", "producer", "admin", "share-consumer"])
def test_each_client_has_client_instance_id_as_its_enable_metrics_push_says(
    unreachable: str, kind: str
) -> None:
    with _client(kind, {"bootstrap.servers": unreachable, "enable.metrics.push": True}) as client:
        assert client.client_instance_id(0) is None  # no broker gave one (yet): Java's null
        with pytest.raises(InvalidArgumentError):
            client.client_instance_id(-1.0)
    with pytest.raises(IllegalStateError, match="closed"):
        client.client_instance_id(0)
    with _client(kind, {"bootstrap.servers": unreachable, "enable.metrics.push": False}) as client:
        with pytest.raises(IllegalStateError, match=r"enable\.metrics\.push"):
            client.client_instance_id(0)


def test_the_admin_client_pushes_only_when_asked_as_in_java(unreachable: str) -> None:
    with AdminClient({"bootstrap.servers": unreachable}) as admin:
        with pytest.raises(IllegalStateError, match=r"enable\.metrics\.push"):
            admin.client_instance_id(0)
