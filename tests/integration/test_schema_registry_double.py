"""The test Schema Registry answers as the real one, proven with confluent-kafka's own
SchemaRegistryClient and serializers. [test]"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

pytest.importorskip("confluent_kafka.schema_registry")
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, SchemaRegistryError
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from support.protos import order_pb2
from support.schema_registry import SchemaRegistryDouble

USER = {"alice": "s3cret"}
POINT = json.dumps(
    {
        "type": "record",
        "name": "Point",
        "fields": [{"name": "x", "type": "int"}, {"name": "y", "type": "int"}],
    }
)


@pytest.fixture
def registry() -> Iterator[SchemaRegistryDouble]:
    with SchemaRegistryDouble(users=USER) as double:
        yield double


@pytest.fixture
def client(registry: SchemaRegistryDouble) -> Iterator[SchemaRegistryClient]:
    with SchemaRegistryClient({"url": registry.url, "basic.auth.user.info": "alice:s3cret"}) as peer:
        yield peer


def test_register_lookup_versions_and_config(client: SchemaRegistryClient) -> None:
    schema_id = client.register_schema("points-value", Schema(POINT, "AVRO"))
    assert client.register_schema("other-value", Schema(POINT, "AVRO")) == schema_id  # one id per schema
    assert client.get_schema(schema_id).schema_str == POINT
    assert client.lookup_schema("points-value", Schema(POINT, "AVRO")).version == 1
    latest = client.get_latest_version("points-value")
    assert (latest.schema_id, latest.version, latest.subject) == (schema_id, 1, "points-value")
    assert client.get_version("points-value", 1).schema_id == schema_id
    assert sorted(client.get_subjects()) == ["other-value", "points-value"]
    assert client.get_versions("points-value") == [1]
    assert client.get_compatibility() == "BACKWARD"
    assert client.set_compatibility("points-value", "FULL") == {"compatibility": "FULL"}
    assert client.get_compatibility("points-value") == "FULL"
    evolved = json.loads(POINT)
    evolved["fields"].append({"name": "z", "type": "int", "default": 0})
    assert client.test_compatibility("points-value", Schema(json.dumps(evolved), "AVRO"))
    evolved["fields"][-1].pop("default")
    assert not client.test_compatibility("points-value", Schema(json.dumps(evolved), "AVRO"))
    with pytest.raises(SchemaRegistryError) as info:
        client.register_schema("points-value", Schema(json.dumps(evolved), "AVRO"))
    assert info.value.http_status_code == 409
    assert client.delete_subject("points-value") == [1]
    with pytest.raises(SchemaRegistryError) as info:
        client.get_versions("points-value")
    assert (info.value.http_status_code, info.value.error_code) == (404, 40401)
    with pytest.raises(SchemaRegistryError) as info:
        client.get_schema(999)
    assert info.value.error_code == 40403


def test_wrong_password_is_a_401(registry: SchemaRegistryDouble) -> None:
    with (
        SchemaRegistryClient({"url": registry.url, "basic.auth.user.info": "alice:wrong"}) as bad,
        pytest.raises(SchemaRegistryError) as info,
    ):
        bad.get_subjects()
    assert info.value.http_status_code == 401


def test_confluent_serializers_round_trip_all_three_formats(client: SchemaRegistryClient) -> None:
    ctx = SerializationContext("orders", MessageField.VALUE)
    avro_out = AvroSerializer(client, POINT)({"x": 1, "y": -2}, ctx)
    assert avro_out[:1] == b"\x00"
    assert AvroDeserializer(client)(avro_out, ctx) == {"x": 1, "y": -2}

    schema = json.dumps({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    json_out = JSONSerializer(schema, client)({"n": 3}, SerializationContext("counts", MessageField.VALUE))
    assert JSONDeserializer(None, schema_registry_client=client)(json_out, ctx) == {"n": 3}

    order = order_pb2.Order(id=7, customer="c", items=["a"], total=1.5)
    order.ship_to.city = "Paris"
    pb_ser = ProtobufSerializer(order_pb2.Order, client, {"use.deprecated.format": False})
    pb_out = pb_ser(order, SerializationContext("pb-orders", MessageField.VALUE))
    # the import was registered under its file name and is referenced by the Order schema
    assert "common.proto" in client.get_subjects()
    registered = client.get_latest_version("pb-orders-value")
    assert [r.name for r in registered.schema.references] == ["common.proto"]  # type: ignore[union-attr]
    decoded = ProtobufDeserializer(order_pb2.Order, {"use.deprecated.format": False})(pb_out, ctx)
    assert decoded == order
