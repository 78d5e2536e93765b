"""Schema Registry serializers plugged into kaflux's Producer and Consumer on a real broker,
against confluent-kafka's producer and consumer, and bad records surfacing from poll(). [test]"""

from __future__ import annotations

import time
from typing import Any

import pytest

from kaflux import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from kaflux.devbrokers.brokers import Broker
from kaflux.errors import DeserializerUnavailableError, RecordDeserializationError
from kaflux.schema_registry import SchemaRegistryClient
from kaflux.schema_registry.avro import AvroDeserializer, AvroSerializer
from kaflux.serialization import Deserializer, SerializationContext, Serializer

from support.schema_fixtures import PAGE_VIEW_STR, USER_V1, page_view
from support.schema_registry import SchemaRegistryDouble

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.schema_registry import SchemaRegistryClient as CkRegistry  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroDeserializer as CkAvroDeserializer  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroSerializer as CkAvroSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField  # noqa: E402
from confluent_kafka.serialization import SerializationContext as CkContext  # noqa: E402

pytestmark = pytest.mark.integration
WAIT_S = 20.0


def _create(broker: Broker, topic: str) -> None:
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(topic, 1)], timeout=WAIT_S)


def _consumer(broker: Broker, topic: str, **kwargs: Any) -> Consumer:
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap_servers, "auto.offset.reset": "earliest"}, **kwargs
    )
    consumer.assign([TopicPartition(topic, 0)])
    return consumer


def _read(consumer: Consumer, count: int) -> list[Any]:
    values: list[Any] = []
    deadline = time.monotonic() + WAIT_S
    while len(values) < count and time.monotonic() < deadline:
        values.extend(record.value for record in consumer.poll(0.5))
    return values


def test_confluent_kafka_writes_avro_and_kaflux_reads_it_with_no_registry_request_per_record(
    kafka: Broker, registry: SchemaRegistryDouble, topic_name: str
) -> None:
    _create(kafka, topic_name)
    with CkRegistry({"url": registry.url}) as peer:
        serializer = CkAvroSerializer(peer, PAGE_VIEW_STR)
        producer = ck.Producer({"bootstrap.servers": kafka.bootstrap_servers})
        for i in range(300):
            producer.produce(topic_name, serializer(page_view(i), CkContext(topic_name, MessageField.VALUE)))
        assert producer.flush(WAIT_S) == 0
    before = registry.request_count
    with (
        SchemaRegistryClient({"url": registry.url}) as client,
        _consumer(kafka, topic_name, value_deserializer=AvroDeserializer(client)) as consumer,
    ):
        assert _read(consumer, 300) == [page_view(i) for i in range(300)]
    assert registry.request_count == before + 1  # the writer's schema, once


def test_kaflux_writes_avro_and_confluent_kafka_reads_it(
    kafka: Broker, registry: SchemaRegistryDouble, topic_name: str
) -> None:
    _create(kafka, topic_name)
    with SchemaRegistryClient({"url": registry.url}) as client:
        with Producer(
            {"bootstrap.servers": kafka.bootstrap_servers},
            value_serializer=AvroSerializer(client, PAGE_VIEW_STR),
        ) as producer:
            producer.send(topic_name, page_view(0))
            producer.flush(WAIT_S)
            before = registry.request_count
            for i in range(1, 200):
                producer.send(topic_name, page_view(i))
            producer.flush(WAIT_S)
            assert registry.request_count == before  # steady state: no request per record
    with CkRegistry({"url": registry.url}) as peer:
        deserializer = CkAvroDeserializer(peer)
        consumer = ck.Consumer(
            {
                "bootstrap.servers": kafka.bootstrap_servers,
                "group.id": topic_name,
                "auto.offset.reset": "earliest",
            }
        )
        try:
            consumer.assign([ck.TopicPartition(topic_name, 0)])
            values: list[Any] = []
            deadline = time.monotonic() + WAIT_S
            while len(values) < 200 and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    values.append(deserializer(message.value(), CkContext(topic_name, MessageField.VALUE)))
        finally:
            consumer.close()
    assert values == [page_view(i) for i in range(200)]


class _RecordingSerializer(Serializer):
    def __init__(self) -> None:
        self.contexts: list[SerializationContext] = []

    def __call__(self, value: Any, ctx: SerializationContext) -> bytes | None:
        self.contexts.append(ctx)
        return None if value is None else str(value).encode()


class _Recording(Deserializer):
    def __init__(self) -> None:
        self.contexts: list[SerializationContext] = []

    def __call__(self, data: bytes | None, ctx: SerializationContext) -> Any:
        self.contexts.append(ctx)
        return data


def test_deserializers_get_the_context_and_plain_callables_still_work(kafka: Broker, topic_name: str) -> None:
    _create(kafka, topic_name)
    value_serializer = _RecordingSerializer()
    with Producer(
        {"bootstrap.servers": kafka.bootstrap_servers},
        key_serializer=str.encode,
        value_serializer=value_serializer,
    ) as producer:
        producer.send(topic_name, "v", key="k", headers=[("h", b"1")])
        producer.flush(WAIT_S)
    assert value_serializer.contexts == [SerializationContext(topic_name, "value", [("h", b"1")])]
    recording = _Recording()
    with _consumer(
        kafka, topic_name, key_deserializer=bytes.decode, value_deserializer=recording
    ) as consumer:
        records: list[Any] = []
        deadline = time.monotonic() + WAIT_S
        while not records and time.monotonic() < deadline:
            records.extend(consumer.poll(0.5))
    assert [(r.key, r.value) for r in records] == [("k", b"v")]
    assert recording.contexts == [SerializationContext(topic_name, "value", [("h", b"1")])]


def test_bad_records_raise_naming_their_offset_and_seek_past_them_continues(
    kafka: Broker, registry: SchemaRegistryDouble, topic_name: str
) -> None:
    _create(kafka, topic_name)
    with SchemaRegistryClient({"url": registry.url}) as client:
        good = AvroSerializer(client, USER_V1)
        ctx = SerializationContext(topic_name, "value")
        first, last = good({"name": "first"}, ctx), good({"name": "last"}, ctx)
        assert first is not None
        bad = [
            b"plain text",
            b"\x00\x00\x00\x03\xe7" + first[5:],
            first[:-2],
        ]  # no magic, unknown id, truncated
        with Producer({"bootstrap.servers": kafka.bootstrap_servers}) as producer:
            for value in [first, *bad, last]:
                producer.send(topic_name, value)
            producer.flush(WAIT_S)
        tp = TopicPartition(topic_name, 0)
        with _consumer(kafka, topic_name, value_deserializer=AvroDeserializer(client)) as consumer:
            assert _read(consumer, 1) == [{"name": "first"}]
            for offset in (1, 2, 3):
                deadline = time.monotonic() + WAIT_S
                with pytest.raises(RecordDeserializationError) as info:
                    while time.monotonic() < deadline:
                        consumer.poll(0.5)
                error = info.value
                assert (error.topic, error.partition, error.offset, error.origin) == (
                    topic_name,
                    0,
                    offset,
                    "value",
                )
                assert f"offset {offset}" in str(error)
                assert consumer.position(tp) == offset  # nothing skipped silently
                with pytest.raises(RecordDeserializationError):  # again, until the application seeks
                    consumer.poll(0.5)
                consumer.seek(tp, offset + 1)
            assert _read(consumer, 1) == [{"name": "last"}]


def test_a_registry_outage_bounds_poll_by_the_registry_timeout_and_loses_no_record(
    tansu: Broker, registry: SchemaRegistryDouble, topic_name: str
) -> None:
    """Issue 33: a hanging registry blocked poll(1.0) for 30 s and then advised seeking past a
    good record. The wait is the client's ``timeout``; the error says the registry did not
    answer and that the record will be read again; after the registry recovers, poll()
    delivers that very record."""
    _create(tansu, topic_name)
    with SchemaRegistryClient({"url": registry.url}) as writer:
        serializer = AvroSerializer(writer, USER_V1)
        config = {"bootstrap.servers": tansu.bootstrap_servers}
        with Producer(config, value_serializer=serializer) as producer:
            for name in ("a", "b", "c"):
                producer.send(topic_name, {"name": name})
            producer.flush(WAIT_S)
    registry_timeout_s = 1.5
    tp = TopicPartition(topic_name, 0)
    with (
        SchemaRegistryClient({"url": registry.url, "timeout": registry_timeout_s}) as reader,
        _consumer(tansu, topic_name, value_deserializer=AvroDeserializer(reader)) as consumer,
    ):
        registry.hang()
        deadline = time.monotonic() + WAIT_S
        with pytest.raises(DeserializerUnavailableError) as info:
            while time.monotonic() < deadline:
                started = time.monotonic()
                assert consumer.poll(1.0) == []
        took = time.monotonic() - started
        assert took < registry_timeout_s + 3.0  # the registry's timeout, plus scheduling slack
        error = info.value
        assert error.retriable
        assert (error.topic, error.partition, error.offset, error.origin) == (topic_name, 0, 0, "value")
        assert f"the Schema Registry at {registry.url} did not answer" in str(error)
        assert "reads it again" in str(error)
        assert "Seek to offset" not in str(error)
        assert consumer.position(tp) == 0  # not skipped
        registry.recover()
        assert _read(consumer, 3) == [{"name": "a"}, {"name": "b"}, {"name": "c"}]
