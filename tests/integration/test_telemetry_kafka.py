"""Client telemetry (KIP-714) on Apache Kafka 4.4: a broker with a client-telemetry plugin
(``tests/support/telemetry_plugin``, compiled here with javac) and a client-metrics
subscription made through the admin client; a kaflux consumer pushes the metrics the
subscription names, which the plugin writes to files, read back as OTLP. [test]"""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kaflux import Consumer, TopicPartition
from kaflux.admin import AdminClient, AlterConfigOp, ConfigResource, NewTopic
from kaflux.devbrokers.apache_kafka import KAFKA_VERSION, KafkaBroker, kafka_classpath
from kaflux.devbrokers.brokers import BrokerUnavailableError

pytestmark = pytest.mark.integration

PLUGIN = Path(__file__).resolve().parents[1] / "support" / "telemetry_plugin" / "KafluxTelemetrySink.java"
WAIT_S = 60.0


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


def test_the_broker_receives_the_consumers_subscribed_metrics(
    telemetry_broker: tuple[KafkaBroker, Path],
) -> None:
    metrics_pb2 = pytest.importorskip("opentelemetry.proto.metrics.v1.metrics_pb2")
    broker, received = telemetry_broker
    b = broker.bootstrap_servers
    topic = f"telemetry-{uuid.uuid4().hex[:6]}"
    with AdminClient({"bootstrap.servers": b}) as admin:
        admin.create_topics([NewTopic(topic, 1)], timeout=WAIT_S)
        subscription = ConfigResource("client_metrics", "kaflux-consumers")
        admin.incremental_alter_configs(
            {
                subscription: [
                    AlterConfigOp("metrics", "org.apache.kafka.consumer."),
                    AlterConfigOp("interval.ms", "1000"),
                ]
            },
            timeout=WAIT_S,
        )
    with Consumer({"bootstrap.servers": b, "client.id": "telemetry-test"}) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        deadline = time.monotonic() + WAIT_S
        while not list(received.glob("*.otlp")):
            assert time.monotonic() < deadline, "the broker received no telemetry push"
            consumer.poll(0.5)
    pushes = sorted(received.glob("*.otlp"))
    names: set[str] = set()
    for path in pushes:
        data = metrics_pb2.MetricsData.FromString(path.read_bytes())
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                names.update(m.name for m in sm.metrics)
    print(f"\n{len(pushes)} pushes, {len(names)} metrics, e.g. {sorted(names)[:4]}")
    assert names and all(n.startswith("org.apache.kafka.consumer.") for n in names)
    assert "org.apache.kafka.consumer.node.request.total" in names
