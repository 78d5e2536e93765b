"""Schema GUIDs: the client's GUID look-ups, and header framing in kaflux's three serializers
and deserializers, against the test registry and confluent-kafka's own (de)serializers. [test]"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any, cast

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
from confluent_kafka.serialization import SerializationError as CkSerializationError

from kaflux.errors import ConfigError, InvalidArgumentError, KafkaError
from kaflux.schema_registry import Schema, SchemaRegistryClient, SchemaRegistryError
from kaflux.schema_registry._core import Steps, T
from kaflux.schema_registry.avro import AvroDeserializer, AvroSerializer
from kaflux.schema_registry.json_schema import JsonSchemaDeserializer, JsonSchemaSerializer
from kaflux.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from kaflux.schema_registry.wire import FramingError, guid_header
from kaflux.serialization import Field, SerializationContext, SerializationError

from support.protos import order_pb2
from support.schema_fixtures import ORDER_JSON_SCHEMA, PAGE_VIEW_STR, USER_V1, page_view
from support.schema_registry import SchemaRegistryDouble

HEADER = {"schema.id.serializer": "header"}
PB_PEER = {"use.deprecated.format": False}


@pytest.fixture
def fresh(registry: SchemaRegistryDouble) -> Iterator[SchemaRegistryClient]:
    """A second client, with nothing cached: a reader that learns schemas from the registry."""
    with SchemaRegistryClient({"url": registry.url, "retries.wait.ms": 1}) as kaflux_client:
        yield kaflux_client


@pytest.fixture
def peer(registry: SchemaRegistryDouble) -> Iterator[ck.SchemaRegistryClient]:
    with ck.SchemaRegistryClient({"url": registry.url}) as peer_client:
        yield peer_client


def _ctx(
    field: Field = "value", headers: list[tuple[str, bytes | None]] | None = None
) -> SerializationContext:
    return SerializationContext("views", field, [] if headers is None else headers)


def _ck_ctx(field: Field, headers: list[tuple[str, bytes | None]]) -> CkContext:
    return CkContext("views", MessageField.KEY if field == "key" else MessageField.VALUE, cast(Any, headers))


# --- the client -------------------------------------------------------------------------------------------


def test_registrations_and_lookups_carry_the_registry_s_guid(
    registry: SchemaRegistryDouble, client: SchemaRegistryClient, peer: ck.SchemaRegistryClient
) -> None:
    registered = client.register_schema_full_response("users-value", Schema(USER_V1))
    assert registered.guid is not None and str(uuid.UUID(registered.guid)) == registered.guid
    assert peer.get_latest_version("users-value").guid == registered.guid  # the peer sees the same
    assert client.lookup_schema("users-value", Schema(USER_V1)).guid == registered.guid
    assert client.get_latest_version("users-value").guid == registered.guid
    assert client.get_version("users-value", 1).guid == registered.guid


def test_get_schema_by_guid_asks_once_then_answers_from_its_cache(
    registry: SchemaRegistryDouble, client: SchemaRegistryClient, fresh: SchemaRegistryClient
) -> None:
    guid = client.register_schema_full_response("users-value", Schema(USER_V1)).guid
    assert guid is not None
    before = registry.request_count
    assert fresh.get_schema_by_guid(guid) == Schema(USER_V1)
    assert fresh.get_schema_by_guid(guid.upper()) == Schema(USER_V1)  # one GUID, however spelt
    assert fresh.get_schema_by_guid(uuid.UUID(guid)) == Schema(USER_V1)
    assert registry.requests[before:] == [("GET", f"/schemas/guids/{guid}")]
    assert client.get_schema_by_guid(guid) == Schema(USER_V1)  # the registration cached it
    assert registry.request_count == before + 1


def test_a_schema_read_by_id_is_cached_by_its_guid_too(
    registry: SchemaRegistryDouble, client: SchemaRegistryClient, fresh: SchemaRegistryClient
) -> None:
    registered = client.register_schema_full_response("users-value", Schema(USER_V1))
    assert fresh.get_schema(registered.schema_id) == Schema(USER_V1)
    before = registry.request_count
    assert registered.guid is not None
    assert fresh.get_schema_by_guid(registered.guid) == Schema(USER_V1)
    assert registry.request_count == before


def test_get_schema_by_guid_retries_a_transient_failure(
    registry: SchemaRegistryDouble, client: SchemaRegistryClient, fresh: SchemaRegistryClient
) -> None:
    guid = client.register_schema_full_response("users-value", Schema(USER_V1)).guid
    assert guid is not None
    registry.fail_next(1)
    before = registry.request_count
    assert fresh.get_schema_by_guid(guid) == Schema(USER_V1)
    assert registry.request_count == before + 2


def test_an_unknown_guid_says_so_and_what_to_check(
    registry: SchemaRegistryDouble, fresh: SchemaRegistryClient
) -> None:
    unknown = str(uuid.uuid4())
    with pytest.raises(SchemaRegistryError) as info:
        fresh.get_schema_by_guid(unknown)
    assert (info.value.http_status, info.value.error_code) == (404, 40403)
    assert f"no schema has GUID {unknown} in this registry" in str(info.value)
    assert "check the url" in str(info.value)
    assert isinstance(info.value, KafkaError) and not info.value.retriable


def test_a_malformed_guid_is_refused_before_any_request(
    registry: SchemaRegistryDouble, fresh: SchemaRegistryClient
) -> None:
    before = registry.request_count
    with pytest.raises(InvalidArgumentError, match="'12345' is not a schema GUID: expected a UUID"):
        fresh.get_schema_by_guid("12345")
    assert registry.request_count == before


# --- serializers: header framing -------------------------------------------------------------------------


def test_avro_header_framing_writes_the_bare_record_and_the_guid_header(
    registry: SchemaRegistryDouble, client: SchemaRegistryClient, fresh: SchemaRegistryClient
) -> None:
    ctx = _ctx("value", [("trace", b"t1")])
    data = AvroSerializer(client, PAGE_VIEW_STR, HEADER)(page_view(1), ctx)
    prefixed = AvroSerializer(client, PAGE_VIEW_STR)(page_view(1), _ctx())
    assert data is not None and prefixed is not None
    assert data == prefixed[5:]  # the same record, without the magic byte and id
    guid = client.get_latest_version("views-value").guid
    assert guid is not None
    assert ctx.headers == [("trace", b"t1"), ("__value_schema_id", guid_header(guid))]
    assert AvroDeserializer(fresh)(data, ctx) == page_view(1)
    assert ("GET", f"/schemas/guids/{guid}") in registry.requests


def test_an_existing_schema_id_header_is_replaced_not_duplicated(client: SchemaRegistryClient) -> None:
    stale = guid_header(uuid.uuid4())
    ctx = _ctx("key", [("__key_schema_id", stale), ("a", b"1")])
    AvroSerializer(client, USER_V1, HEADER)({"name": "n"}, ctx)
    assert ctx.headers is not None
    assert [name for name, _ in ctx.headers] == ["a", "__key_schema_id"]
    assert ctx.headers[1][1] != stale


@pytest.mark.parametrize("headers", [None, (("a", b"1"),)])
def test_header_framing_without_the_producer_s_headers_list_says_what_to_do(
    client: SchemaRegistryClient, headers: Any
) -> None:
    with pytest.raises(
        SerializationError, match=r"header framing \(schema\.id\.serializer='header'\) adds a header"
    ) as info:
        AvroSerializer(client, USER_V1, HEADER)({"name": "n"}, SerializationContext("t", "value", headers))
    assert "Producer" in str(info.value) and "headers=[]" in str(info.value)


def test_header_framing_with_a_registry_that_gives_no_guid_says_use_prefix() -> None:
    class OldRegistry(SchemaRegistryClient):  # a registry from before GUIDs: registrations carry only the id
        def run(self, steps: Steps[T]) -> T:
            try:
                while True:
                    call = next(steps)
                    assert (call.method, call.path) == ("POST", "/subjects/views-value/versions")
                    steps.send({"id": 4})
            except StopIteration as stop:
                result: T = stop.value
                return result

    serializer = JsonSchemaSerializer(OldRegistry({"url": "mock://no-guids"}), ORDER_JSON_SCHEMA, HEADER)
    with pytest.raises(
        SerializationError, match=r"gave no GUID for schema id 4.*schema\.id\.serializer='prefix'"
    ):
        serializer({"id": 1, "items": []}, _ctx())


def test_prefix_framing_stays_the_default_and_adds_no_header(client: SchemaRegistryClient) -> None:
    ctx = _ctx()
    data = AvroSerializer(client, USER_V1)({"name": "n"}, ctx)
    assert data is not None and data[:1] == b"\x00" and ctx.headers == []


def test_json_schema_key_header_framing_round_trips_and_validates_by_guid(
    client: SchemaRegistryClient, fresh: SchemaRegistryClient
) -> None:
    ctx = _ctx("key")
    data = JsonSchemaSerializer(client, ORDER_JSON_SCHEMA, HEADER)({"id": 1, "items": ["a"]}, ctx)
    assert data == b'{"id":1,"items":["a"]}'
    assert ctx.headers is not None and [name for name, _ in ctx.headers] == ["__key_schema_id"]
    assert JsonSchemaDeserializer(fresh)(data, ctx) == {"id": 1, "items": ["a"]}
    with pytest.raises(SerializationError, match=r"does not match its JSON Schema \(GUID [0-9a-f-]{36}\)"):
        JsonSchemaDeserializer(fresh)(b'{"id":"x","items":[]}', ctx)


def test_protobuf_header_framing_puts_the_message_indexes_in_the_header(
    client: SchemaRegistryClient,
) -> None:
    order = order_pb2.Order(id=9, customer="c", items=["x"], total=2.5)
    ctx = _ctx()
    data = ProtobufSerializer(client, order_pb2.Order, HEADER)(order, ctx)
    assert data == order.SerializeToString()
    guid = client.get_latest_version("views-value").guid
    assert guid is not None and ctx.headers == [("__value_schema_id", guid_header(guid, b"\x00"))]
    assert ProtobufDeserializer(order_pb2.Order)(data, ctx) == order


# --- deserializers: dual by default, prefix on request ---------------------------------------------------


def test_deserializers_read_both_framings_by_default_and_only_the_prefix_when_told(
    client: SchemaRegistryClient,
) -> None:
    header_ctx = _ctx()
    header_data = AvroSerializer(client, USER_V1, HEADER)({"name": "n"}, header_ctx)
    prefix_data = AvroSerializer(client, USER_V1)({"name": "n"}, _ctx())
    dual = AvroDeserializer(client)
    assert dual(header_data, header_ctx) == dual(prefix_data, _ctx()) == {"name": "n"}
    assert dual(prefix_data, None) == {"name": "n"}  # no context: the prefix
    prefix_only = AvroDeserializer(client, conf={"schema.id.deserializer": "prefix"})
    assert prefix_only(prefix_data, header_ctx) == {"name": "n"}  # the header is ignored
    with pytest.raises(FramingError, match="unknown magic byte 2 in the record's value"):
        prefix_only(header_data, header_ctx)  # "n" is encoded as length 1 (zigzag 2), then b"n"


def test_framing_settings_take_confluent_kafka_s_names_and_functions(client: SchemaRegistryClient) -> None:
    ctx = _ctx()
    serializer = AvroSerializer(client, USER_V1, {"schema.id.serializer": ck.header_schema_id_serializer})
    serializer({"name": "n"}, ctx)
    assert ctx.headers is not None and ctx.headers[0][0] == "__value_schema_id"
    ProtobufDeserializer(order_pb2.Order, {"schema.id.deserializer": ck.prefix_schema_id_deserializer})
    JsonSchemaDeserializer(client, conf={"schema.id.deserializer": "dual"})
    with pytest.raises(
        ConfigError, match=r"schema\.id\.serializer.*expected one of 'header', 'prefix'.*got 'guid'"
    ):
        AvroSerializer(client, USER_V1, {"schema.id.serializer": "guid"})
    with pytest.raises(ConfigError, match=r"schema\.id\.deserializer.*expected one of 'dual', 'prefix'"):
        AvroDeserializer(client, conf={"schema.id.deserializer": print})
    with pytest.raises(ConfigError, match=r"use\.deprecated\.format.*unknown Protobuf deserializer key"):
        ProtobufDeserializer(order_pb2.Order, {"use.deprecated.format": False})


# --- against confluent-kafka's own header framing --------------------------------------------------------


def test_confluent_kafka_header_framed_records_are_read_by_kaflux_in_all_three_formats(
    peer: ck.SchemaRegistryClient, fresh: SchemaRegistryClient
) -> None:
    conf = {"schema.id.serializer": ck.header_schema_id_serializer}
    headers: list[tuple[str, bytes | None]] = []
    avro = CkAvroSerializer(peer, PAGE_VIEW_STR, conf=conf)(page_view(2), _ck_ctx("value", headers))
    assert AvroDeserializer(fresh)(avro, _ctx("value", headers)) == page_view(2)

    headers = []
    json_data = CkJsonSerializer(ORDER_JSON_SCHEMA, peer, conf=conf)(
        {"id": 3, "items": []}, _ck_ctx("key", headers)
    )
    assert [name for name, _ in headers] == ["__key_schema_id"]
    assert JsonSchemaDeserializer(fresh)(json_data, _ctx("key", headers)) == {"id": 3, "items": []}

    headers = []
    order = order_pb2.Order(id=4, customer="d", items=["z"], total=1.0)
    pb = CkProtobufSerializer(order_pb2.Order, peer, {**PB_PEER, **conf})(order, _ck_ctx("value", headers))
    assert ProtobufDeserializer(order_pb2.Order)(pb, _ctx("value", headers)) == order


def test_kaflux_header_framed_records_are_read_by_confluent_kafka_s_default_deserializers(
    client: SchemaRegistryClient, peer: ck.SchemaRegistryClient
) -> None:
    ctx = _ctx()
    avro = AvroSerializer(client, PAGE_VIEW_STR, HEADER)(page_view(5), ctx)
    assert ctx.headers is not None
    assert CkAvroDeserializer(peer)(avro, _ck_ctx("value", list(ctx.headers))) == page_view(5)

    ctx = _ctx("key")
    json_data = JsonSchemaSerializer(client, ORDER_JSON_SCHEMA, HEADER)({"id": 6, "items": ["q"]}, ctx)
    assert ctx.headers is not None
    theirs = CkJsonDeserializer(None, schema_registry_client=peer)(
        json_data, _ck_ctx("key", list(ctx.headers))
    )
    assert theirs == {"id": 6, "items": ["q"]}

    ctx = _ctx()
    order = order_pb2.Order(id=7, customer="e", items=["w"], total=3.0)
    pb = ProtobufSerializer(client, order_pb2.Order, HEADER)(order, ctx)
    assert ctx.headers is not None
    assert CkProtobufDeserializer(order_pb2.Order, PB_PEER)(pb, _ck_ctx("value", list(ctx.headers))) == order
    assert json.loads(json_data or b"") == {"id": 6, "items": ["q"]}


def test_a_tiny_header_framed_avro_record_reads_in_kaflux_though_confluent_kafka_refuses_it(
    client: SchemaRegistryClient, peer: ck.SchemaRegistryClient
) -> None:
    """confluent-kafka's AvroDeserializer wants more than 5 bytes even when the schema id is in
    the header (a peer quirk the README names); kaflux's reader has no such floor."""
    ctx = _ctx()
    data = AvroSerializer(client, USER_V1, HEADER)({"name": "n"}, ctx)
    assert data == b"\x02n"
    assert AvroDeserializer(client)(data, ctx) == {"name": "n"}
    assert ctx.headers is not None
    with pytest.raises(CkSerializationError, match="6 bytes or more"):
        CkAvroDeserializer(peer)(data, _ck_ctx("value", list(ctx.headers)))
