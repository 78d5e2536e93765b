"""Client telemetry (KIP-714) on Apache Kafka 4.4: a broker with a client-telemetry plugin
(``tests/support/telemetry_plugin``, compiled here with javac) and a client-metrics
subscription made through the admin client; each kaflux client (consumer, producer, admin
client, share consumer) pushes the metrics the subscription names, which the plugin writes to
files named by the pushing client's instance id, read back as OTLP. [test]"""

from __future__ import annotations

import asyncio
import base64
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kaflux import Consumer, Producer, ShareConsumer, TopicPartition
from kaflux.admin import AdminClient, AlterConfigOp, ConfigResource, NewTopic
from kaflux.aio import AsyncAdminClient, AsyncConsumer, AsyncProducer, AsyncShareConsumer
from kaflux.devbrokers.apache_kafka import KAFKA_VERSION, KafkaBroker, kafka_classpath
from kaflux.devbrokers.brokers import BrokerUnavailableError
from kaflux.errors import IllegalStateError

pytestmark = pytest.mark.integration

PLUGIN = Path(__file__).resolve().parents[1] / "support" / "telemetry_plugin" / "KafluxTelemetrySink.java"
WAIT_S = 60.0
EXPECTED_PRODUCER_METRICS = {
    "org.apache.kafka.producer.record.queue.time.avg",
    "org.apache.kafka.producer.record.queue.time.max",
    "org.apache.kafka.producer.node.request.latency.avg",
    "org.apache.kafka.producer.node.request.latency.max",
    "org.apache.kafka.producer.record.send.total",
    "org.apache.kafka.producer.topic.record.send.total",
}


@pytest.fixture(scope="module")
def telemetry_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KafkaBroker, Path]]:
    javac = shutil.which("javac")
    if javac is None:
        pytest.skip("javac is not on PATH")
    classes = tmp_path_factory.mktemp("plugin")
    received = tmp_path_factory.mktemp("received")
    try:
        classpath = ":".join(kafka_classpath(KAFKA_VERSION, None))
    except BrokerUnavailableError as e:
        pytest.skip(f"Apache Kafka is not available: {e}")
    subprocess.run([javac, "-cp", classpath, "-d", str(classes), str(PLUGIN)], check=True, timeout=120)
    config = {"metric.reporters": "KafluxTelemetrySink", "kaflux.telemetry.dir": str(received)}
    broker = KafkaBroker(config=config, extra_classpath=[classes])
    broker.start(timeout=180)
    try:
        yield broker, received
    finally:
        broker.stop()
        broker.cleanup()


def _subscribe(
    broker: KafkaBroker, name: str, metrics: str, client_id: str, topic: str | None = None
) -> None:
    """A client-metrics subscription ``name``: ``metrics`` (prefixes) every second from the
    clients whose client.id is ``client_id``; and ``topic``, created."""
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        if topic is not None:
            admin.create_topics([NewTopic(topic, 1)], timeout=WAIT_S)
        admin.incremental_alter_configs(
            {
                ConfigResource("client_metrics", name): [
                    AlterConfigOp("metrics", metrics),
                    AlterConfigOp("interval.ms", "1000"),
                    AlterConfigOp("match", f"client_id={client_id}"),
                ]
            },
            timeout=WAIT_S,
        )
        # the broker applies the new subscription once it reads it back from its metadata log: a
        # client that asks before gets an empty one and asks again only after 5 minutes
        resource = ConfigResource("client_metrics", name)
        deadline = time.monotonic() + WAIT_S
        while True:
            entries = admin.describe_configs([resource], timeout=WAIT_S)[resource]
            if "metrics" in entries and entries["metrics"].value == metrics:
                break
            assert time.monotonic() < deadline, f"the subscription {name} never showed: {entries}"
            time.sleep(0.1)


def _kafka_uuid(value: uuid.UUID) -> str:
    """A Uuid as Java prints it (the plugin names its files so): URL-safe base64, unpadded."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


def _pushes(received: Path, instance_id: uuid.UUID) -> list[Path]:
    return sorted(received.glob(f"{_kafka_uuid(instance_id)}-*.otlp"))


def _names(pushes: list[Path]) -> set[str]:
    metrics_pb2 = pytest.importorskip("opentelemetry.proto.metrics.v1.metrics_pb2")
    names: set[str] = set()
    for path in pushes:
        data = metrics_pb2.MetricsData.FromString(path.read_bytes())
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                names.update(m.name for m in sm.metrics)
    return names


def _wait_for_pushes(
    received: Path, instance_id: uuid.UUID, what: str, work: Callable[[], object]
) -> list[Path]:
    """Run ``work`` until the plugin received a push from ``instance_id``."""
    deadline = time.monotonic() + WAIT_S
    while not (pushes := _pushes(received, instance_id)):
        assert time.monotonic() < deadline, f"the broker received no telemetry push from the {what}"
        work()
    return pushes


def _instance_id(client: Consumer | Producer | AdminClient | ShareConsumer) -> uuid.UUID:
    instance_id = client.client_instance_id(WAIT_S)
    assert isinstance(instance_id, uuid.UUID) and instance_id.int != 0
    return instance_id


def test_the_broker_receives_the_consumers_subscribed_metrics(
    telemetry_broker: tuple[KafkaBroker, Path],
) -> None:
    broker, received = telemetry_broker
    topic = f"telemetry-{uuid.uuid4().hex[:6]}"
    _subscribe(broker, "kaflux-consumers", "org.apache.kafka.consumer.", "telemetry-consumer", topic)
    config = {"bootstrap.servers": broker.bootstrap_servers, "client.id": "telemetry-consumer"}
    with Consumer(config) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        instance_id = _instance_id(consumer)
        pushes = _wait_for_pushes(received, instance_id, "consumer", lambda: consumer.poll(0.5))
    names = _names(pushes)
    print(f"\nconsumer: {len(pushes)} pushes, {len(names)} metrics, e.g. {sorted(names)[:4]}")
    assert names and all(n.startswith("org.apache.kafka.consumer.") for n in names)
    assert "org.apache.kafka.consumer.node.request.total" in names


def test_the_broker_receives_the_producers_metrics_and_its_terminating_push(
    telemetry_broker: tuple[KafkaBroker, Path],
) -> None:
    broker, received = telemetry_broker
    topic = f"telemetry-p-{uuid.uuid4().hex[:6]}"
    _subscribe(broker, "kaflux-producers", "org.apache.kafka.producer.", "telemetry-producer", topic)
    config = {"bootstrap.servers": broker.bootstrap_servers, "client.id": "telemetry-producer"}
    with Producer(config) as producer:
        instance_id = _instance_id(producer)

        def send() -> None:
            producer.send(topic, b"v")
            producer.flush(WAIT_S)
            time.sleep(0.2)

        send()
        pushes = _wait_for_pushes(received, instance_id, "producer", send)
        # a push taken before the first send was answered (a loaded machine) lacks the send
        # metrics: send on until a push has them
        deadline = time.monotonic() + WAIT_S
        while not _names(pushes) >= EXPECTED_PRODUCER_METRICS and time.monotonic() < deadline:
            send()
            pushes = _pushes(received, instance_id)
    names = _names(pushes)
    print(f"\nproducer: {len(pushes)} pushes, {len(names)} metrics, e.g. {sorted(names)[:4]}")
    assert names and all(n.startswith("org.apache.kafka.producer.") for n in names)
    for expected in sorted(EXPECTED_PRODUCER_METRICS):
        assert expected in names, expected
    # close() pushed once more, marked terminating
    deadline = time.monotonic() + WAIT_S
    while not any(p.name.endswith("-terminating.otlp") for p in _pushes(received, instance_id)):
        assert time.monotonic() < deadline, "the producer's close() sent no terminating push"
        time.sleep(0.1)


def test_the_broker_receives_the_admin_clients_push_with_its_instance_id(
    telemetry_broker: tuple[KafkaBroker, Path],
) -> None:
    broker, received = telemetry_broker
    _subscribe(broker, "kaflux-admins", "org.apache.kafka.admin.client.", "telemetry-admin")
    config = {
        "bootstrap.servers": broker.bootstrap_servers,
        "client.id": "telemetry-admin",
        "enable.metrics.push": True,  # off by default for the admin client, as in Java
    }
    with AdminClient(config) as admin:
        instance_id = _instance_id(admin)
        pushes = _wait_for_pushes(
            received, instance_id, "admin client", lambda: admin.list_topics(timeout=WAIT_S)
        )
    names = _names(pushes)
    print(f"\nadmin: {len(pushes)} pushes, {len(names)} metrics, e.g. {sorted(names)[:4]}")
    assert all(n.startswith("org.apache.kafka.admin.client.") for n in names)


def test_the_broker_receives_the_share_consumers_metrics(
    telemetry_broker: tuple[KafkaBroker, Path],
) -> None:
    broker, received = telemetry_broker
    topic = f"telemetry-s-{uuid.uuid4().hex[:6]}"
    _subscribe(broker, "kaflux-share", "org.apache.kafka.consumer.", "telemetry-share", topic)
    config = {
        "bootstrap.servers": broker.bootstrap_servers,
        "client.id": "telemetry-share",
        "group.id": f"telemetry-share-{uuid.uuid4().hex[:6]}",
    }
    with ShareConsumer(config) as consumer:
        consumer.subscribe([topic])
        instance_id = _instance_id(consumer)
        pushes = _wait_for_pushes(received, instance_id, "share consumer", lambda: consumer.poll(0.5))
        # the share-fetch metrics exist once a ShareFetch was answered: push until they came
        deadline = time.monotonic() + WAIT_S
        while "org.apache.kafka.consumer.share.fetch.manager.fetch.total" not in _names(pushes):
            assert time.monotonic() < deadline, f"no share-fetch metrics pushed: {sorted(_names(pushes))}"
            consumer.poll(0.5)
            pushes = _pushes(received, instance_id)
    names = _names(pushes)
    print(f"\nshare consumer: {len(pushes)} pushes, {len(names)} metrics, e.g. {sorted(names)[:4]}")
    assert all(n.startswith("org.apache.kafka.consumer.") for n in names)
    for expected in (
        "org.apache.kafka.consumer.share.fetch.manager.fetch.total",
        "org.apache.kafka.consumer.share.coordinator.heartbeat.total",
        "org.apache.kafka.consumer.node.request.total",
    ):
        assert expected in names, expected


def test_no_push_with_enable_metrics_push_false(telemetry_broker: tuple[KafkaBroker, Path]) -> None:
    broker, received = telemetry_broker
    topic = f"telemetry-off-{uuid.uuid4().hex[:6]}"
    _subscribe(broker, "kaflux-off", "org.apache.kafka.", "telemetry-off", topic)
    before = set(received.glob("*.otlp"))
    config = {"bootstrap.servers": broker.bootstrap_servers, "client.id": "telemetry-off"}
    with (
        Producer({**config, "enable.metrics.push": False}) as producer,
        Consumer({**config, "enable.metrics.push": "false"}) as consumer,
    ):
        with pytest.raises(IllegalStateError, match=r"enable\.metrics\.push"):
            producer.client_instance_id(1.0)
        consumer.assign([TopicPartition(topic, 0)])
        until = time.monotonic() + 4.0  # four push intervals of the subscription
        while time.monotonic() < until:
            producer.send(topic, b"v")
            producer.flush(WAIT_S)
            consumer.poll(0.5)
    assert set(received.glob("*.otlp")) == before


def test_the_aio_clients_give_the_same_client_instance_id_call(
    telemetry_broker: tuple[KafkaBroker, Path],
) -> None:
    broker, _received = telemetry_broker
    config = {"bootstrap.servers": broker.bootstrap_servers, "client.id": "telemetry-aio"}

    async def main() -> list[uuid.UUID | None]:
        ids: list[uuid.UUID | None] = []
        async with AsyncProducer(config) as producer:
            ids.append(await producer.client_instance_id(WAIT_S))
        async with AsyncAdminClient({**config, "enable.metrics.push": True}) as admin:
            ids.append(await admin.client_instance_id(WAIT_S))
        async with AsyncShareConsumer({**config, "group.id": "telemetry-aio"}) as share:
            ids.append(await share.client_instance_id(WAIT_S))
        async with AsyncConsumer({**config, "enable.metrics.push": False}) as consumer:
            with pytest.raises(IllegalStateError, match=r"enable\.metrics\.push"):
                await consumer.client_instance_id(1.0)
        return ids

    ids = asyncio.run(main())
    # each client is its own telemetry client: a distinct id the broker gave it
    assert all(isinstance(i, uuid.UUID) and i.int != 0 for i in ids) and len(set(ids)) == 3
