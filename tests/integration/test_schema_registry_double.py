"""The test Schema Registry answers as the real one, proven with confluent-kafka's own
SchemaRegistryClient and serializers. [test]"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("confluent_kafka.schema_registry")
from confluent_kafka.schema_registry import (
    Schema,
    SchemaRegistryClient,
    SchemaRegistryError,
    header_schema_id_serializer,
)
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


def _conf(registry: SchemaRegistryDouble) -> dict[str, str]:
    return {"url": registry.url, "basic.auth.user.info": "alice:s3cret"}


@pytest.fixture
def client(registry: SchemaRegistryDouble) -> Iterator[SchemaRegistryClient]:
    with SchemaRegistryClient(_conf(registry)) as peer:
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


def test_schema_guids_on_registration_lookups_and_by_guid(
    registry: SchemaRegistryDouble, client: SchemaRegistryClient
) -> None:
    registered = client.register_schema_full_response("points-value", Schema(POINT, "AVRO"))
    assert registered.guid is not None
    assert str(uuid.UUID(registered.guid)) == registered.guid  # a canonical UUID
    again = client.register_schema_full_response("other-value", Schema(POINT, "AVRO"))
    assert (again.schema_id, again.guid) == (registered.schema_id, registered.guid)  # one per schema
    assert client.lookup_schema("points-value", Schema(POINT, "AVRO")).guid == registered.guid
    assert client.get_latest_version("points-value").guid == registered.guid
    with SchemaRegistryClient(_conf(registry)) as fresh:  # nothing cached
        assert fresh.get_schema_by_guid(registered.guid).schema_str == POINT
        with pytest.raises(SchemaRegistryError) as info:
            fresh.get_schema_by_guid(str(uuid.uuid4()))
        assert (info.value.http_status_code, info.value.error_code) == (404, 40403)
    assert ("GET", f"/schemas/guids/{registered.guid}") in registry.requests


def _header_round_trip(
    registry: SchemaRegistryDouble, serializer: Any, deserializer_of: Any, value: Any, field: MessageField
) -> tuple[list[tuple[str, str | bytes | None]], bytes, Any]:
    headers: list[tuple[str, str | bytes | None]] = []
    topic = "guids"
    out = serializer(value, SerializationContext(topic, field, headers))
    with SchemaRegistryClient(_conf(registry)) as fresh:  # the reader learns the schema by GUID
        decoded = deserializer_of(fresh)(out, SerializationContext(topic, field, headers))
    return headers, out, decoded


def test_confluent_header_framing_round_trips_all_three_formats_through_guids(
    registry: SchemaRegistryDouble, client: SchemaRegistryClient
) -> None:
    header_conf = {"schema.id.serializer": header_schema_id_serializer}
    headers, out, decoded = _header_round_trip(
        registry, AvroSerializer(client, POINT, conf=header_conf), AvroDeserializer,
        {"x": 100000, "y": -100000}, MessageField.VALUE,
    )  # fmt: skip
    guid = client.get_latest_version("guids-value").guid
    assert guid is not None
    assert headers == [("__value_schema_id", b"\x01" + uuid.UUID(guid).bytes)]
    # no prefix: the bare Avro record (confluent-kafka's reader wants more than 5 bytes even so)
    prefixed = AvroSerializer(client, POINT)(
        {"x": 100000, "y": -100000}, SerializationContext("p", MessageField.VALUE)
    )
    assert out == prefixed[5:] and len(out) == 6
    assert decoded == {"x": 100000, "y": -100000}
    assert ("GET", f"/schemas/guids/{guid}") in registry.requests

    schema = json.dumps({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    headers, out, decoded = _header_round_trip(
        registry, JSONSerializer(schema, client, conf=header_conf),
        lambda c: JSONDeserializer(None, schema_registry_client=c), {"n": 3}, MessageField.KEY,
    )  # fmt: skip
    assert [name for name, _ in headers] == ["__key_schema_id"]
    key_header = headers[0][1]
    assert isinstance(key_header, bytes) and key_header[:1] == b"\x01" and len(key_header) == 17
    assert (json.loads(out), decoded) == ({"n": 3}, {"n": 3})

    order = order_pb2.Order(id=7, customer="c", items=["a"], total=1.5)
    pb_conf = {"use.deprecated.format": False, **header_conf}
    headers, out, decoded = _header_round_trip(
        registry, ProtobufSerializer(order_pb2.Order, client, pb_conf),
        lambda c: ProtobufDeserializer(order_pb2.Order, {"use.deprecated.format": False}), order,
        MessageField.VALUE,
    )  # fmt: skip
    # the message indexes travel in the header after the GUID; the value is the bare message
    pb_header = headers[0][1]
    assert isinstance(pb_header, bytes) and pb_header[:1] == b"\x01" and pb_header[17:] == b"\x00"
    assert out == order.SerializeToString()
    assert decoded == order
