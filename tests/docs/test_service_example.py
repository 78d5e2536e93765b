"""docs/service-example.md: its service, the page's one Python block taken as it is, runs as a
child process against a real broker and the Schema Registry double; Avro orders produced
before and while it runs are handled, SIGTERM stops it with status 0, and the group's
committed offsets cover every order. The trace of each order goes on through the service (its
``handle order`` span is a child of the ``process`` span's parent: the producer's ``send``)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from kaflux import Consumer, Producer, TopicPartition
from kaflux.devbrokers.brokers import Broker

from support.doc_blocks import child_env, fenced_blocks
from support.kafka_helpers import create_topic

pytest.importorskip("opentelemetry.sdk")
pytest.importorskip("fastavro")
from kaflux.schema_registry import SchemaRegistryClient
from kaflux.schema_registry.avro import AvroSerializer

from support.schema_registry import SchemaRegistryDouble

pytestmark = pytest.mark.integration

PAGE = Path(__file__).resolve().parents[2] / "docs" / "service-example.md"
[SERVICE] = [
    b
    for b in fenced_blocks(PAGE.read_text(encoding="utf-8"), "docs/service-example.md")
    if b.language == "python"
]
WAIT_S = 60.0
ORDER_SCHEMA = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "fields": [
            {"name": "id", "type": "int"},
            {"name": "item", "type": "string"},
            {"name": "quantity", "type": "int"},
        ],
    }
)


def _send_orders(bootstrap: str, topic: str, registry: SchemaRegistryDouble, ids: range) -> None:
    serializer = AvroSerializer(SchemaRegistryClient({"url": registry.url}), ORDER_SCHEMA)
    with Producer({"bootstrap.servers": bootstrap}, value_serializer=serializer) as producer:
        for i in ids:
            producer.send(topic, {"id": i, "item": "widget", "quantity": i % 5 + 1})
        producer.flush(WAIT_S)


class Output:
    """The child's stdout lines, read on a thread (so that waiting on them has a deadline)."""

    def __init__(self, child: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._cond = threading.Condition()
        assert child.stdout is not None
        self._thread = threading.Thread(target=self._read, args=(child.stdout,), daemon=True)
        self._thread.start()

    def _read(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()

    def close(self, stream: object) -> None:
        """After the child exited: the rest of its output read, the pipe closed."""
        self._thread.join(WAIT_S)
        stream.close()  # type: ignore[attr-defined]

    def wait_for(self, predicate: object, what: str) -> None:
        deadline = time.monotonic() + WAIT_S
        with self._cond:
            while not predicate(self.lines):  # type: ignore[operator]
                remaining = deadline - time.monotonic()
                assert remaining > 0, f"timed out waiting for {what}; output: {self.lines}"
                self._cond.wait(remaining)


def _committed_records(lines: list[str]) -> int:
    return sum(int(line.split()[2]) for line in lines if line.startswith("orders-service: committed"))


def test_the_service_handles_orders_and_stops_cleanly_on_sigterm(
    broker: Broker, topic_name: str, registry: SchemaRegistryDouble, tmp_path: Path
) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 2)
    group = f"orders-{uuid.uuid4().hex[:8]}"
    _send_orders(broker.bootstrap_servers, topic_name, registry, range(10))
    script = tmp_path / "orders_service.py"
    script.write_text(SERVICE.code, encoding="utf-8")
    env = child_env(
        KAFKA_BOOTSTRAP_SERVERS=broker.bootstrap_servers,
        SCHEMA_REGISTRY_URL=registry.url,
        ORDERS_TOPIC=topic_name,
        ORDERS_GROUP=group,
    )
    stderr = tmp_path / "stderr.txt"
    with stderr.open("w") as err:
        child = subprocess.Popen(
            [sys.executable, str(script)], env=env, stdout=subprocess.PIPE, stderr=err, text=True
        )
        output = Output(child)
        try:
            output.wait_for(lambda lines: _committed_records(lines) >= 10, "the first 10 orders")
            _send_orders(broker.bootstrap_servers, topic_name, registry, range(10, 15))
            output.wait_for(lambda lines: _committed_records(lines) >= 15, "the 5 orders sent while it runs")
            child.send_signal(signal.SIGTERM)
            returncode = child.wait(WAIT_S)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
            output.close(child.stdout)
    log = stderr.read_text()
    assert returncode == 0, log
    assert output.lines[-1] == "orders-service: stopped", output.lines
    assert _committed_records(output.lines) == 15
    assert log.count("INFO:orders-service:order ") == 15
    assert "widget x " in log
    # the spans were flushed at shutdown: a handle span per order, with the trace of its send
    assert log.count('"name": "handle order"') == 15
    assert log.count('"name": "process ') == 15
    # every order's offset is committed: a new member of the group starts after them
    with Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group}) as consumer:
        partitions = [TopicPartition(topic_name, p) for p in range(2)]
        committed = consumer.committed(partitions, WAIT_S)
    # offsets start at 0 in each partition: the committed ones add up to the records written
    # (counted so, not with end_offsets(), which Tansu answers wrongly: docs/brokers.md)
    assert sum(om.offset for om in committed.values() if om is not None) == 15
