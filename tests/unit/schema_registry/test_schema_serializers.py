"""kaflux's Avro, Protobuf and JSON Schema serializers against confluent-kafka's, through one
test registry, in both directions. [test]"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

pytest.importorskip("confluent_kafka.schema_registry")
import confluent_kafka.schema_registry as ck
from confluent_kafka.schema_registry.avro import AvroDeserializer as CkAvroDeserializer
from confluent_kafka.schema_registry.avro import AvroSerializer as CkAvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer as CkJsonDeserializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer as CkJsonSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer as CkProtobufDeserializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer as CkProtobufSerializer
from confluent_kafka.serialization import MessageField
from confluent_kafka.serialization import SerializationContext as CkContext

from kaflux.schema_registry import (
    Schema,
    SchemaReference,
    SchemaRegistryClient,
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
)
from kaflux.schema_registry.avro import AvroDeserializer, AvroSerializer
from kaflux.schema_registry.json_schema import JsonSchemaDeserializer, JsonSchemaSerializer
from kaflux.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from kaflux.schema_registry.wire import FramingError
from kaflux.serialization import SerializationContext, SerializationError

from support.protos import order_pb2
from support.schema_fixtures import ADDRESS, ORDER_JSON_SCHEMA, PAGE_VIEW_STR, USER_V1, USER_V2, page_view
from support.schema_registry import SchemaRegistryDouble

CTX = SerializationContext("views", "value")
CK_CTX = CkContext("views", MessageField.VALUE)


@pytest.fixture
def peer(registry: SchemaRegistryDouble) -> Iterator[ck.SchemaRegistryClient]:
    with ck.SchemaRegistryClient({"url": registry.url}) as peer_client:
        yield peer_client


def test_avro_round_trips_both_ways_with_confluent_kafka_byte_for_byte(
    client: SchemaRegistryClient, peer: ck.SchemaRegistryClient
) -> None:
    ours, theirs = AvroSerializer(client, PAGE_VIEW_STR), CkAvroSerializer(peer, PAGE_VIEW_STR)
    for i in range(12):
        record = page_view(i)
        our_bytes, their_bytes = ours(record, CTX), theirs(record, CK_CTX)
        assert our_bytes == their_bytes  # same schema id, same encoding
        assert CkAvroDeserializer(peer)(our_bytes, CK_CTX) == record
        assert AvroDeserializer(client)(their_bytes, CTX) == record


def test_the_same_schema_gets_the_same_id_from_kaflux_and_confluent_kafka(
    client: SchemaRegistryClient, peer: ck.SchemaRegistryClient
) -> None:
    their_id = peer.register_schema("views-value", ck.Schema(PAGE_VIEW_STR, "AVRO"))
    assert client.register_schema("views-value", Schema(PAGE_VIEW_STR)) == their_id
    assert client.register_schema("other-value", Schema(json.dumps(json.loads(PAGE_VIEW_STR)))) == their_id
    assert client.lookup_schema("views-value", Schema(PAGE_VIEW_STR)).version == 1


def test_avro_schema_evolution_gives_v1_records_the_v2_default(client: SchemaRegistryClient) -> None:
    v1 = AvroSerializer(client, USER_V1)({"name": "ann"}, CTX)
    v2 = AvroSerializer(client, USER_V2)({"name": "bob", "age": 30}, CTX)
    assert v1 is not None and v2 is not None
    assert v1[1:5] != v2[1:5]
    assert client.get_versions("views-value") == [1, 2]
    reader = AvroDeserializer(client, USER_V2)
    assert [reader(v1, CTX), reader(v2, CTX)] == [{"name": "ann", "age": -1}, {"name": "bob", "age": 30}]
    assert AvroDeserializer(client)(v1, CTX) == {"name": "ann"}  # its writer's schema


def test_avro_named_type_references_resolve_through_the_registry(
    client: SchemaRegistryClient, peer: ck.SchemaRegistryClient
) -> None:
    client.register_schema("address", Schema(json.dumps(ADDRESS)))
    person = {
        "type": "record",
        "name": "Person",
        "namespace": "kaflux.test",
        "fields": [{"name": "name", "type": "string"}, {"name": "home", "type": "kaflux.test.Address"}],
    }
    schema = Schema(json.dumps(person), "AVRO", (SchemaReference("kaflux.test.Address", "address", 1),))
    value = {"name": "ann", "home": {"street": "Rue", "zip": 1}}
    data = AvroSerializer(client, schema)(value, CTX)
    assert AvroDeserializer(client)(data, CTX) == value
    assert CkAvroDeserializer(peer)(data, CK_CTX) == value
    assert client.get_latest_version("views-value").schema.references == schema.references


def test_json_schema_round_trips_and_validates_before_sending(
    client: SchemaRegistryClient, peer: ck.SchemaRegistryClient
) -> None:
    order = {"id": 7, "items": ["a", "b"], "note": None}
    ours = JsonSchemaSerializer(client, ORDER_JSON_SCHEMA)(order, CTX)
    theirs = CkJsonSerializer(ORDER_JSON_SCHEMA, peer)(order, CK_CTX)
    assert ours == theirs
    assert CkJsonDeserializer(None, schema_registry_client=peer)(ours, CK_CTX) == order
    assert JsonSchemaDeserializer(client)(theirs, CTX) == order
    with pytest.raises(SerializationError, match="items"):
        JsonSchemaSerializer(client, ORDER_JSON_SCHEMA)({"id": 1, "items": [3]}, CTX)


def test_protobuf_with_an_import_round_trips_both_ways(
    registry: SchemaRegistryDouble, client: SchemaRegistryClient, peer: ck.SchemaRegistryClient
) -> None:
    order = order_pb2.Order(id=9, customer="c", items=["x", "y"], total=2.5, quantities={"x": 2})
    order.ship_to.street, order.ship_to.city = "Main", "Oslo"
    ours = ProtobufSerializer(client, order_pb2.Order)(order, CTX)
    theirs = CkProtobufSerializer(order_pb2.Order, peer, {"use.deprecated.format": False})(order, CK_CTX)
    assert ours == theirs  # same schema id (the import registered and referenced alike), same bytes
    assert sorted(client.get_subjects()) == ["common.proto", "views-value"]
    refs = client.get_latest_version("views-value").schema.references
    assert refs == (SchemaReference("common.proto", "common.proto", 1),)
    assert CkProtobufDeserializer(order_pb2.Order, {"use.deprecated.format": False})(ours, CK_CTX) == order
    assert ProtobufDeserializer(order_pb2.Order)(theirs, CTX) == order


def test_subject_name_strategies(client: SchemaRegistryClient) -> None:
    AvroSerializer(client, USER_V1, {"subject.name.strategy": record_subject_name_strategy})(
        {"name": "a"}, CTX
    )
    AvroSerializer(client, USER_V1, {"subject.name.strategy": topic_record_subject_name_strategy})(
        {"name": "a"}, CTX
    )
    AvroSerializer(client, USER_V1)({"name": "a"}, SerializationContext("views", "key"))
    assert sorted(client.get_subjects()) == ["kaflux.test.User", "views-kaflux.test.User", "views-key"]


def test_without_auto_register_an_unregistered_schema_fails_and_use_latest_writes_the_latest(
    client: SchemaRegistryClient,
) -> None:
    from kaflux.schema_registry import SchemaRegistryError

    with pytest.raises(SchemaRegistryError) as info:
        AvroSerializer(client, USER_V1, {"auto.register.schemas": False})({"name": "a"}, CTX)
    assert info.value.error_code == 40401
    client.register_schema("views-value", Schema(USER_V1))
    v2_id = client.register_schema("views-value", Schema(USER_V2))
    # written with v2, the latest, though the serializer was given v1 (the value has v2's fields)
    data = AvroSerializer(client, USER_V1, {"auto.register.schemas": False, "use.latest.version": True})(
        {"name": "a", "age": 5}, CTX
    )
    assert data is not None and int.from_bytes(data[1:5], "big") == v2_id
    assert AvroDeserializer(client)(data, CTX) == {"name": "a", "age": 5}


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"{}", FramingError),  # no magic byte
        (b"\x00\x00\x00\x03\xe7\x02", Exception),  # unknown id 999
    ],
)
def test_bad_bytes_raise(client: SchemaRegistryClient, data: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        AvroDeserializer(client)(data, CTX)


def test_a_truncated_avro_payload_raises(client: SchemaRegistryClient) -> None:
    data = AvroSerializer(client, PAGE_VIEW_STR)(page_view(3), CTX)
    assert data is not None
    with pytest.raises(Exception):  # noqa: B017 - fastavro's EOF error; the consumer wraps it
        AvroDeserializer(client)(data[:-8], CTX)


def test_steady_state_makes_no_registry_request(
    registry: SchemaRegistryDouble, client: SchemaRegistryClient
) -> None:
    serializer, deserializer = AvroSerializer(client, PAGE_VIEW_STR), AvroDeserializer(client)
    deserializer(serializer(page_view(0), CTX), CTX)
    before = registry.request_count
    for i in range(200):
        assert deserializer(serializer(page_view(i), CTX), CTX) == page_view(i)
    assert registry.request_count == before
