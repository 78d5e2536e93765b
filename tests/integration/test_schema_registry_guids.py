"""Header-framed schema GUIDs on a real broker: records confluent-kafka's producer writes with
``header_schema_id_serializer`` read by kaflux's consumer, records kaflux's Producer and
AsyncProducer write with ``schema.id.serializer=header`` read by confluent-kafka's consumer
with its default deserializers and by kaflux's, keys and values each with their own header,
in Avro, Protobuf and JSON Schema. [test]"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from kaflux import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from kaflux.aio import AsyncProducer
from kaflux.devbrokers.brokers import Broker
from kaflux.schema_registry import SchemaRegistryClient
from kaflux.schema_registry.avro import AvroDeserializer, AvroSerializer
from kaflux.schema_registry.json_schema import JsonSchemaDeserializer, JsonSchemaSerializer
from kaflux.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from kaflux.serialization import Deserializer, Serializer

from support.protos import order_pb2
from support.schema_fixtures import ORDER_JSON_SCHEMA, PAGE_VIEW_STR, USER_V1, page_view
from support.schema_registry import SchemaRegistryDouble

ck = pytest.importorskip("confluent_kafka")
import confluent_kafka.schema_registry as ck_sr  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroDeserializer as CkAvroDeserializer  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroSerializer as CkAvroSerializer  # noqa: E402
from confluent_kafka.schema_registry.json_schema import JSONDeserializer as CkJsonDeserializer  # noqa: E402
from confluent_kafka.schema_registry.json_schema import JSONSerializer as CkJsonSerializer  # noqa: E402
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer as CkProtobufDeserializer  # noqa: E402
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer as CkProtobufSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField  # noqa: E402
from confluent_kafka.serialization import SerializationContext as CkContext  # noqa: E402

pytestmark = pytest.mark.integration
WAIT_S = 20.0
COUNT = 20
HEADER = {"schema.id.serializer": "header"}
CK_HEADER = {"schema.id.serializer": ck_sr.header_schema_id_serializer}
PB_PEER = {"use.deprecated.format": False}
FORMATS = ["avro", "protobuf", "json"]


def _order(i: int) -> order_pb2.Order:
    return order_pb2.Order(id=i + 1, customer=f"c{i}", items=["a", "b"][: i % 3], total=1.5 * i)


def _key(fmt: str, i: int) -> Any:
    """The record key: another schema than the value's, so each field has its own subject."""
    if fmt == "avro":
        return {"name": f"user-{i}"}
    if fmt == "json":
        return {"id": i, "items": [str(i)]}
    return _order(1000 + i)


def _value(fmt: str, i: int) -> Any:
    if fmt == "avro":
        return page_view(i)
    if fmt == "json":
        return {"id": 10_000 + i, "items": ["v"], "note": None}
    return _order(i)


def _kaflux_serializers(fmt: str, client: SchemaRegistryClient) -> tuple[Serializer, Serializer]:
    if fmt == "avro":
        return AvroSerializer(client, USER_V1, HEADER), AvroSerializer(client, PAGE_VIEW_STR, HEADER)
    if fmt == "json":
        return (
            JsonSchemaSerializer(client, ORDER_JSON_SCHEMA, HEADER),
            JsonSchemaSerializer(client, ORDER_JSON_SCHEMA, HEADER),
        )
    return ProtobufSerializer(client, order_pb2.Order, HEADER), ProtobufSerializer(
        client, order_pb2.Order, HEADER
    )


def _kaflux_deserializer(fmt: str, client: SchemaRegistryClient) -> Deserializer:
    if fmt == "avro":
        return AvroDeserializer(client)
    if fmt == "json":
        return JsonSchemaDeserializer(client)
    return ProtobufDeserializer(order_pb2.Order)


def _peer_serializers(fmt: str, peer: Any) -> tuple[Callable[..., bytes], Callable[..., bytes]]:
    if fmt == "avro":
        return CkAvroSerializer(peer, USER_V1, conf=CK_HEADER), CkAvroSerializer(
            peer, PAGE_VIEW_STR, conf=CK_HEADER
        )
    if fmt == "json":
        return (
            CkJsonSerializer(ORDER_JSON_SCHEMA, peer, conf=CK_HEADER),
            CkJsonSerializer(ORDER_JSON_SCHEMA, peer, conf=CK_HEADER),
        )
    conf = {**PB_PEER, **CK_HEADER}
    return CkProtobufSerializer(order_pb2.Order, peer, conf), CkProtobufSerializer(
        order_pb2.Order, peer, conf
    )


def _peer_deserializer(fmt: str, peer: Any) -> Callable[..., Any]:
    if fmt == "avro":
        return CkAvroDeserializer(peer)
    if fmt == "json":
        return CkJsonDeserializer(None, schema_registry_client=peer)
    return CkProtobufDeserializer(order_pb2.Order, PB_PEER)


def _create(broker: Broker, topic: str) -> None:
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(topic, 1)], timeout=WAIT_S)


def _read_with_kaflux(broker: Broker, topic: str, fmt: str, registry: SchemaRegistryDouble) -> list[Any]:
    """(key, value, header names) of the topic's first COUNT records, read by kaflux with a
    client that has cached nothing (it learns every schema by GUID)."""
    with (
        SchemaRegistryClient({"url": registry.url}) as client,
        Consumer(
            {"bootstrap.servers": broker.bootstrap_servers, "auto.offset.reset": "earliest"},
            key_deserializer=_kaflux_deserializer(fmt, client),
            value_deserializer=_kaflux_deserializer(fmt, client),
        ) as consumer,
    ):
        consumer.assign([TopicPartition(topic, 0)])
        records: list[Any] = []
        deadline = time.monotonic() + WAIT_S
        while len(records) < COUNT and time.monotonic() < deadline:
            records.extend(consumer.poll(0.5))
    return [(r.key, r.value, [name for name, _ in r.headers or ()]) for r in records]


def _guid_requests(registry: SchemaRegistryDouble) -> list[str]:
    return [path for method, path in registry.requests if path.startswith("/schemas/guids/")]


@pytest.mark.parametrize("fmt", FORMATS)
def test_confluent_kafka_header_framed_keys_and_values_are_read_by_kaflux(
    kafka: Broker, registry: SchemaRegistryDouble, topic_name: str, fmt: str
) -> None:
    _create(kafka, topic_name)
    with ck_sr.SchemaRegistryClient({"url": registry.url}) as peer:
        key_ser, value_ser = _peer_serializers(fmt, peer)
        producer = ck.Producer({"bootstrap.servers": kafka.bootstrap_servers})
        for i in range(COUNT):
            headers: list[tuple[str, str | bytes | None]] = [("app", b"x")]
            key = key_ser(_key(fmt, i), CkContext(topic_name, MessageField.KEY, headers))
            value = value_ser(_value(fmt, i), CkContext(topic_name, MessageField.VALUE, headers))
            assert value[:1] != b"\x00" or fmt == "json"  # no prefix (JSON starts with "{")
            producer.produce(topic_name, key=key, value=value, headers=headers)
        assert producer.flush(WAIT_S) == 0
    before = len(_guid_requests(registry))
    records = _read_with_kaflux(kafka, topic_name, fmt, registry)
    assert records == [
        (_key(fmt, i), _value(fmt, i), ["app", "__key_schema_id", "__value_schema_id"]) for i in range(COUNT)
    ]
    if fmt != "protobuf":  # the Protobuf reader needs only the generated class
        assert len(_guid_requests(registry)) - before == (1 if fmt == "json" else 2)  # once per schema


@pytest.mark.parametrize("fmt", FORMATS)
def test_kaflux_producer_header_framing_is_read_by_confluent_kafka_s_default_deserializers(
    kafka: Broker, registry: SchemaRegistryDouble, topic_name: str, fmt: str
) -> None:
    _create(kafka, topic_name)
    with SchemaRegistryClient({"url": registry.url}) as client:
        key_ser, value_ser = _kaflux_serializers(fmt, client)
        with Producer(
            {"bootstrap.servers": kafka.bootstrap_servers}, key_serializer=key_ser, value_serializer=value_ser
        ) as producer:
            for i in range(COUNT):
                producer.send(
                    topic_name, _value(fmt, i), key=_key(fmt, i), headers=[("app", b"x")] if i % 2 else None
                )
            producer.flush(WAIT_S)
    with ck_sr.SchemaRegistryClient({"url": registry.url}) as peer:
        key_de, value_de = _peer_deserializer(fmt, peer), _peer_deserializer(fmt, peer)
        consumer = ck.Consumer(
            {
                "bootstrap.servers": kafka.bootstrap_servers,
                "group.id": topic_name,
                "auto.offset.reset": "earliest",
            }
        )
        got: list[Any] = []
        try:
            consumer.assign([ck.TopicPartition(topic_name, 0)])
            deadline = time.monotonic() + WAIT_S
            while len(got) < COUNT and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is None or message.error() is not None:
                    continue
                headers = message.headers() or []
                got.append(
                    (
                        key_de(message.key(), CkContext(topic_name, MessageField.KEY, headers)),
                        value_de(message.value(), CkContext(topic_name, MessageField.VALUE, headers)),
                        [name for name, _ in headers],
                    )
                )
        finally:
            consumer.close()
    expected_headers = [["app"] if i % 2 else [] for i in range(COUNT)]
    assert got == [
        (_key(fmt, i), _value(fmt, i), [*expected_headers[i], "__key_schema_id", "__value_schema_id"])
        for i in range(COUNT)
    ]


@pytest.mark.parametrize("fmt", FORMATS)
def test_kaflux_async_producer_header_framing_is_read_by_kaflux(
    kafka: Broker, registry: SchemaRegistryDouble, topic_name: str, fmt: str
) -> None:
    _create(kafka, topic_name)

    async def produce() -> None:
        with SchemaRegistryClient({"url": registry.url}) as client:
            key_ser, value_ser = _kaflux_serializers(fmt, client)
            async with AsyncProducer(
                {"bootstrap.servers": kafka.bootstrap_servers},
                key_serializer=key_ser,
                value_serializer=value_ser,
            ) as producer:
                for i in range(COUNT):
                    await producer.send(topic_name, _value(fmt, i), key=_key(fmt, i))
                await producer.flush(WAIT_S)

    asyncio.run(produce())
    records = _read_with_kaflux(kafka, topic_name, fmt, registry)
    assert records == [
        (_key(fmt, i), _value(fmt, i), ["__key_schema_id", "__value_schema_id"]) for i in range(COUNT)
    ]
