"""kaflux.opentelemetry on real brokers, with the OpenTelemetry SDK's in-memory exporters: spans
per record following the messaging conventions, W3C trace context that crosses clients
(kaflux to kaflux, confluent-kafka's OpenTelemetry instrumentation to kaflux and back), the
asyncio clients, share consumers (delivery count), uninstrument(), and the metrics bridge.

Every broker test takes the ``broker`` fixture, so that new broker kinds join by its parameters.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from kaflux import Consumer, Producer, ShareConsumer, TopicPartition
from kaflux.aio import AsyncConsumer, AsyncProducer
from kaflux.devbrokers.brokers import Broker

otel_sdk = pytest.importorskip("opentelemetry.sdk")
from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import SpanKind  # noqa: E402

from kaflux.opentelemetry import KafluxInstrumentor, record_context  # noqa: E402

from support.aio_helpers import run  # noqa: E402
from support.kafka_helpers import create_topic  # noqa: E402

pytestmark = pytest.mark.integration

#: a deadline, not a duration: on Tansu a join alone takes half the default 45 s session
WAIT_S = 90.0


@dataclass
class Telemetry:
    spans: InMemorySpanExporter
    tracer_provider: TracerProvider
    metrics: InMemoryMetricReader

    def finished(self, name: str | None = None, kind: SpanKind | None = None) -> list[ReadableSpan]:
        return [
            s
            for s in self.spans.get_finished_spans()
            if (name is None or s.name == name) and (kind is None or s.kind == kind)
        ]


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    """KafluxInstrumentor on in-memory exporters, for this test only."""
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    instrumentor = KafluxInstrumentor()
    instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    try:
        yield Telemetry(exporter, tracer_provider, reader)
    finally:
        instrumentor.uninstrument()
        meter_provider.shutdown()


def _consumer_config(broker: Broker, topic: str) -> dict[str, object]:
    return {
        "bootstrap.servers": broker.bootstrap_servers,
        "group.id": f"g-{topic}",
        "auto.offset.reset": "earliest",
        "client.id": f"c-{topic}",
    }


def _consume(consumer: Consumer, count: int) -> list[Any]:
    got: list[Any] = []
    deadline = time.monotonic() + WAIT_S
    while len(got) < count and time.monotonic() < deadline:
        got += list(consumer.poll(0.5))
    return got


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def test_a_trace_continues_from_kaflux_producer_to_kaflux_consumer(
    broker: Broker, topic_name: str, telemetry: Telemetry
) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 2)
    app = telemetry.tracer_provider.get_tracer("app")
    config = {"bootstrap.servers": broker.bootstrap_servers, "client.id": f"p-{topic_name}"}
    with Producer(config) as producer, app.start_as_current_span("checkout") as checkout:
        producer.send(topic_name, b"one", key=b"k1", partition=1)
        producer.send(topic_name, b"two", key=b"k2", partition=1, headers=[("h", b"v")])
        producer.flush(WAIT_S)
    sends = telemetry.finished(f"send {topic_name}", SpanKind.PRODUCER)
    assert len(sends) == 2
    for offset, span in enumerate(sorted(sends, key=lambda s: _attrs(s)["messaging.kafka.offset"])):
        assert span.parent is not None and span.parent.span_id == checkout.get_span_context().span_id
        assert _attrs(span) == {
            "messaging.system": "kafka",
            "messaging.operation.name": "send",
            "messaging.operation.type": "send",
            "messaging.destination.name": topic_name,
            "messaging.destination.partition.id": "1",
            "messaging.kafka.offset": offset,
            "messaging.client.id": f"p-{topic_name}",
            "messaging.kafka.message.key": f"k{offset + 1}",
        }

    consumer = Consumer(_consumer_config(broker, topic_name))
    consumer.subscribe([topic_name])
    try:
        records = _consume(consumer, 2)
        assert [r.value for r in records] == [b"one", b"two"]
        assert records[1].headers[0] == ("h", b"v")  # the application's header, kept first
        assert all(any(k == "traceparent" for k, _ in r.headers) for r in records)
        context = record_context(records[0])
        assert context is not None
        assert trace.get_current_span(context).get_span_context().trace_id == (
            checkout.get_span_context().trace_id
        )
        consumer.poll(0.1)  # ends the process spans of the poll before
    finally:
        consumer.close(WAIT_S)
    by_offset = {_attrs(s)["messaging.kafka.offset"]: s for s in sends}
    processes = telemetry.finished(f"process {topic_name}", SpanKind.CONSUMER)
    assert len(processes) == 2
    for span in processes:
        attributes = _attrs(span)
        sent = by_offset[attributes["messaging.kafka.offset"]]
        assert span.parent is not None and span.parent.span_id == sent.context.span_id
        assert span.context.trace_id == checkout.get_span_context().trace_id
        assert attributes["messaging.system"] == "kafka"
        assert attributes["messaging.operation.type"] == "process"
        assert attributes["messaging.destination.partition.id"] == "1"
        assert attributes["messaging.consumer.group.name"] == f"g-{topic_name}"
        assert attributes["messaging.client.id"] == f"c-{topic_name}"
    [poll] = [
        s for s in telemetry.finished(f"poll {topic_name}") if _attrs(s)["messaging.batch.message_count"] == 2
    ]
    assert poll.kind == SpanKind.CLIENT
    assert {link.context.span_id for link in poll.links} == {s.context.span_id for s in sends}


CONSUMED = "org.apache.kafka.consumer.fetch.manager.records.consumed.total"


def _points(telemetry: Telemetry) -> dict[str, list[Any]]:
    """Collect once: metric name -> its data points."""
    data = telemetry.metrics.get_metrics_data()
    points: dict[str, list[Any]] = {}
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                points.setdefault(metric.name, []).extend(metric.data.data_points)
    return points


def test_the_metrics_bridge_exports_metrics_under_javas_names(
    broker: Broker, topic_name: str, telemetry: Telemetry
) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 1)
    with Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "bridge-p"}) as producer:
        for i in range(3):
            producer.send(topic_name, b"%d" % i)
        producer.flush(WAIT_S)
        consumer = Consumer(_consumer_config(broker, topic_name))
        consumer.subscribe([topic_name])
        try:
            assert len(_consume(consumer, 3)) == 3
            # the first collection finds the names, a later one reports them
            deadline = time.monotonic() + WAIT_S
            points = _points(telemetry)
            while CONSUMED not in points and time.monotonic() < deadline:
                time.sleep(0.05)
                points = _points(telemetry)
        finally:
            consumer.close(WAIT_S)
    [consumed] = [p for p in points[CONSUMED] if p.attributes == {"client_id": f"c-{topic_name}"}]
    assert consumed.value == 3
    assert any(
        p.attributes == {"client_id": "bridge-p"} and p.value == 3
        for p in points["org.apache.kafka.producer.record.send.total"]
    )
    assert {p.attributes["client_kind"]: p.value for p in points["kaflux.clients"]} == {
        "producer": 1,
        "consumer": 1,
    }


def test_a_trace_started_in_confluent_kafka_continues_in_kaflux_and_back(
    broker: Broker, topic_name: str, telemetry: Telemetry
) -> None:
    ck = pytest.importorskip("confluent_kafka")
    instrumentation = pytest.importorskip("opentelemetry.instrumentation.confluent_kafka")
    create_topic(broker.bootstrap_servers, topic_name, 1)
    confluent = instrumentation.ConfluentKafkaInstrumentor()
    # confluent-kafka producer (instrumented) -> kaflux consumer (instrumented)
    producer = confluent.instrument_producer(
        ck.Producer({"bootstrap.servers": broker.bootstrap_servers}), telemetry.tracer_provider
    )
    producer.produce(topic_name, b"from-confluent")
    assert producer.flush(WAIT_S) == 0
    [confluent_send] = telemetry.finished(f"{topic_name} send")
    consumer = Consumer(_consumer_config(broker, topic_name))
    consumer.subscribe([topic_name])
    try:
        assert [r.value for r in _consume(consumer, 1)] == [b"from-confluent"]
    finally:
        consumer.close(WAIT_S)
    [kaflux_process] = telemetry.finished(f"process {topic_name}")
    assert kaflux_process.parent is not None
    assert kaflux_process.parent.span_id == confluent_send.context.span_id
    assert kaflux_process.context.trace_id == confluent_send.context.trace_id

    # kaflux producer (instrumented) -> confluent-kafka consumer (instrumented): its process
    # span links to the producer's context, as that instrumentation does
    with Producer({"bootstrap.servers": broker.bootstrap_servers}) as kaflux_producer:
        kaflux_producer.send(topic_name, b"from-kaflux").result(WAIT_S)
    [kaflux_send] = telemetry.finished(f"send {topic_name}")
    ck_consumer = confluent.instrument_consumer(
        ck.Consumer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "group.id": f"ck-{uuid.uuid4().hex[:8]}",
                "auto.offset.reset": "earliest",
            }
        ),
        telemetry.tracer_provider,
    )
    try:
        ck_consumer.subscribe([topic_name])
        values: list[bytes] = []
        deadline = time.monotonic() + WAIT_S
        while b"from-kaflux" not in values and time.monotonic() < deadline:
            message = ck_consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
        assert b"from-kaflux" in values
    finally:
        ck_consumer.close()
    linked = [
        s
        for s in telemetry.finished(f"{topic_name} process")
        if any(link.context.span_id == kaflux_send.context.span_id for link in s.links)
    ]
    assert len(linked) == 1
    assert linked[0].links[0].context.trace_id == kaflux_send.context.trace_id


def test_asyncio_clients_are_traced(broker: Broker, topic_name: str, telemetry: Telemetry) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 1)

    async def scenario() -> list[bytes]:
        async with AsyncProducer({"bootstrap.servers": broker.bootstrap_servers}) as producer:
            await (await producer.send(topic_name, b"a"))
        values: list[bytes] = []
        async with AsyncConsumer(_consumer_config(broker, topic_name)) as consumer:
            consumer.subscribe([topic_name])
            deadline = time.monotonic() + WAIT_S
            while not values and time.monotonic() < deadline:
                values += [r.value for r in await consumer.poll(0.5)]
        return values

    assert run(scenario()) == [b"a"]
    [send] = telemetry.finished(f"send {topic_name}")
    [process] = telemetry.finished(f"process {topic_name}")  # ended by close()
    assert process.parent is not None and process.parent.span_id == send.context.span_id


def test_clients_created_after_uninstrument_are_not_traced(broker: Broker, topic_name: str) -> None:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = KafluxInstrumentor()
    instrumentor.instrument(tracer_provider=tracer_provider)
    traced = Producer({"bootstrap.servers": broker.bootstrap_servers})
    instrumentor.uninstrument()
    try:
        with Producer({"bootstrap.servers": broker.bootstrap_servers}) as plain:
            assert "send" not in vars(plain)  # the plain, uninstrumented send
            plain.send(topic_name, b"plain").result(WAIT_S)
        traced.send(topic_name, b"traced").result(WAIT_S)
    finally:
        traced.close(WAIT_S)
    assert len(exporter.get_finished_spans()) == 1


def test_share_consumer_spans_carry_the_delivery_count(telemetry: Telemetry) -> None:
    ck = pytest.importorskip("confluent_kafka")
    from support.share_mock import ShareMockCluster

    topic, group = f"otel-share-{uuid.uuid4().hex[:8]}", f"otel-share-g-{uuid.uuid4().hex[:8]}"
    with ShareMockCluster(auto_offset_reset="earliest") as cluster:
        with Producer({"bootstrap.servers": cluster.bootstrap_servers}) as producer:
            producer.send(topic, b"job", partition=0).result(WAIT_S)
        del ck
        consumer = ShareConsumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group})
        consumer.subscribe([topic])
        try:
            got: list[Any] = []
            deadline = time.monotonic() + WAIT_S
            while not got and time.monotonic() < deadline:
                got += consumer.poll(0.5)
            assert [r.value for r in got] == [b"job"]
        finally:
            consumer.close(WAIT_S)
    [send] = telemetry.finished(f"send {topic}")
    [process] = telemetry.finished(f"process {topic}")
    assert process.parent is not None and process.parent.span_id == send.context.span_id
    assert _attrs(process)["messaging.kafka.delivery_count"] == 1
    assert _attrs(process)["messaging.consumer.group.name"] == group
    assert TopicPartition(topic, 0).partition == int(_attrs(process)["messaging.destination.partition.id"])
