"""``mock://`` Schema Registry URLs: kaflux's in-memory registry, scoped per process, side by side
with confluent-kafka's ``mock://`` client, and round trips of every serde over it. [test]"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kaflux.errors import ConfigError
from kaflux.schema_registry import (
    AsyncSchemaRegistryClient,
    Schema,
    SchemaRegistryClient,
    SchemaRegistryError,
)
from kaflux.schema_registry.avro import (
    AsyncAvroDeserializer,
    AsyncAvroSerializer,
    AvroDeserializer,
    AvroSerializer,
)
from kaflux.schema_registry.json_schema import (
    AsyncJsonSchemaDeserializer,
    AsyncJsonSchemaSerializer,
    JsonSchemaDeserializer,
    JsonSchemaSerializer,
)
from kaflux.schema_registry.mock import drop_scope, scope
from kaflux.schema_registry.protobuf import (
    AsyncProtobufDeserializer,
    AsyncProtobufSerializer,
    ProtobufDeserializer,
    ProtobufSerializer,
)
from kaflux.serialization import SerializationContext

from support.protos import common_pb2, order_pb2
from support.schema_fixtures import ORDER_JSON_SCHEMA, PAGE_VIEW_STR, USER_V1, USER_V2, page_view

ck = pytest.importorskip("confluent_kafka.schema_registry")


@pytest.fixture
def url() -> Iterator[str]:
    """A fresh mock:// scope for one test, dropped after it."""
    name = f"kx-{uuid.uuid4().hex[:8]}"
    yield f"mock://{name}"
    drop_scope(name)


def _ctx(topic: str = "views") -> SerializationContext:
    return SerializationContext(topic, "value", [])


def test_mock_urls_are_accepted_and_clients_of_one_scope_share_one_registry(url: str) -> None:
    with SchemaRegistryClient({"url": url}) as writer, SchemaRegistryClient({"url": url}) as reader:
        schema_id = writer.register_schema("users-value", Schema(USER_V1))
        assert reader.get_schema(schema_id) == Schema(USER_V1)
        assert reader.get_latest_version("users-value").schema_id == schema_id
    with SchemaRegistryClient({"url": url + "-other"}) as stranger:
        with pytest.raises(SchemaRegistryError) as info:
            stranger.get_schema(schema_id)
        assert info.value.http_status == 404
    drop_scope(url[len("mock://") :] + "-other")


def test_new_client_as_confluent_kafka_spells_it(url: str) -> None:
    with SchemaRegistryClient.new_client({"url": url}) as client:
        client.register_schema("users-value", Schema(USER_V1))

    async def main() -> list[str]:
        async with AsyncSchemaRegistryClient.new_client({"url": url}) as client:
            return await client.get_subjects()

    assert asyncio.run(main()) == ["users-value"]


def test_dropping_a_scope_starts_it_afresh(url: str) -> None:
    with SchemaRegistryClient({"url": url}) as client:
        client.register_schema("users-value", Schema(USER_V1))
    drop_scope(url[len("mock://") :])
    with SchemaRegistryClient({"url": url}) as client:
        assert client.get_subjects() == []


def test_a_mock_url_stands_alone() -> None:
    with pytest.raises(ConfigError, match="mock:// URL stands alone"):
        SchemaRegistryClient({"url": "mock://a,http://127.0.0.1:1"})
    with pytest.raises(ConfigError, match=r"not an http\(s\) or mock:// URL"):
        SchemaRegistryClient({"url": "ftp://registry"})


def test_the_mock_serves_compatibility(url: str) -> None:
    with SchemaRegistryClient({"url": url}) as client:
        client.register_schema("users-value", Schema(USER_V1))
        assert client.get_compatibility() == "BACKWARD"
        assert client.test_compatibility("users-value", Schema(USER_V2))
        incompatible = Schema(
            '{"type": "record", "name": "User", "fields": [{"name": "age", "type": "int"}]}'
        )
        assert not client.test_compatibility("users-value", incompatible)
        with pytest.raises(SchemaRegistryError) as info:
            client.register_schema("users-value", incompatible)
        assert (info.value.http_status, info.value.error_code) == (409, 409)
        assert client.set_compatibility("users-value", "NONE") == "NONE"
        assert client.register_schema("users-value", incompatible) > 0


def _answers(client: Any) -> list[Any]:
    """The answers to one sequence of calls, in comparable form (errors as their HTTP status)."""

    def registered(r: Any) -> tuple[Any, ...]:
        return (r.schema_id, r.subject, r.version, r.schema.schema_str, r.schema.schema_type)

    def status(call: Any) -> Any:
        try:
            return call()
        except Exception as exc:  # both clients' SchemaRegistryError
            return ("error", getattr(exc, "http_status", None) or getattr(exc, "http_status_code", None))

    v1, v2 = ck.Schema(USER_V1, "AVRO"), ck.Schema(USER_V2, "AVRO")
    if isinstance(client, SchemaRegistryClient):
        v1, v2 = Schema(USER_V1), Schema(USER_V2)  # type: ignore[assignment]
    return [
        client.register_schema("users-value", v1),
        client.register_schema("users-value", v1),  # again: the same id, no new version
        client.register_schema("users-value", v2),
        client.get_schema(1).schema_str,
        client.get_schema(2).schema_str,
        registered(client.get_latest_version("users-value")),
        registered(client.get_version("users-value", 1)),
        registered(client.lookup_schema("users-value", v1)),
        sorted(client.get_versions("users-value")),
        client.get_subjects(),
        status(lambda: client.get_schema(99)),
        status(lambda: client.get_latest_version("nobody-value")),
        status(lambda: client.get_version("users-value", 9)),
        status(lambda: client.lookup_schema("nobody-value", v1)),
        sorted(client.delete_subject("users-value")),
        client.get_subjects(),
    ]


def test_the_same_calls_get_the_same_answers_as_confluent_kafkas_mock(url: str) -> None:
    peer = ck.SchemaRegistryClient.new_client({"url": url})
    with SchemaRegistryClient({"url": url}) as kaflux_client:
        assert _answers(kaflux_client) == _answers(peer)


def test_where_kaflux_follows_the_real_registry_and_confluent_kafkas_mock_does_not(url: str) -> None:
    """Documented differences: one schema has one id across subjects (the real registry's rule);
    errors carry the registry's specific codes; and confluent-kafka's Python mock gives each
    client its own store, where kaflux's clients of one scope share one (as Confluent's Java
    MockSchemaRegistry scopes do)."""
    peer = ck.SchemaRegistryClient.new_client({"url": url})
    peer_twin = ck.SchemaRegistryClient.new_client({"url": url})
    with SchemaRegistryClient({"url": url}) as client, SchemaRegistryClient({"url": url}) as twin:
        assert client.register_schema("a-value", Schema(USER_V1)) == 1
        assert client.register_schema("b-value", Schema(USER_V1)) == 1
        assert peer.register_schema("a-value", ck.Schema(USER_V1, "AVRO")) == 1
        assert peer.register_schema("b-value", ck.Schema(USER_V1, "AVRO")) == 2
        with pytest.raises(SchemaRegistryError) as info:
            client.get_schema(99)
        assert info.value.error_code == 40403
        with pytest.raises(ck.SchemaRegistryError) as peer_info:
            peer.get_schema(99)
        assert peer_info.value.error_code == 40400
        assert twin.get_schema(1) == Schema(USER_V1)
        with pytest.raises(ck.SchemaRegistryError):
            peer_twin.get_schema(1)


def test_avro_json_and_protobuf_round_trip_over_a_mock_registry(url: str) -> None:
    with SchemaRegistryClient({"url": url}) as writer, SchemaRegistryClient({"url": url}) as reader:
        data = AvroSerializer(writer, PAGE_VIEW_STR)(page_view(1), _ctx())
        assert AvroDeserializer(reader)(data, _ctx()) == page_view(1)
        order = {"id": 7, "items": ["a", "b"]}
        data = JsonSchemaSerializer(writer, ORDER_JSON_SCHEMA)(order, _ctx("orders"))
        assert JsonSchemaDeserializer(reader)(data, _ctx("orders")) == order
        message = order_pb2.Order(id=3, customer="c", ship_to=common_pb2.Address(street="s"))
        data = ProtobufSerializer(writer, order_pb2.Order)(message, _ctx("pb"))
        assert ProtobufDeserializer(order_pb2.Order)(data, _ctx("pb")) == message
        assert set(reader.get_subjects()) == {"views-value", "orders-value", "pb-value", "common.proto"}


def test_the_async_serdes_round_trip_over_a_mock_registry_shared_with_sync_clients(url: str) -> None:
    message = order_pb2.Order(id=3, customer="c", ship_to=common_pb2.Address(street="s"))
    order = {"id": 7, "items": ["a"]}

    async def main() -> list[Any]:
        async with AsyncSchemaRegistryClient({"url": url}) as client:
            return [
                await AsyncAvroSerializer(client, PAGE_VIEW_STR)(page_view(2), _ctx()),
                await AsyncJsonSchemaSerializer(client, ORDER_JSON_SCHEMA)(order, _ctx("orders")),
                await AsyncProtobufSerializer(client, order_pb2.Order)(message, _ctx("pb")),
            ]

    avro, json_data, pb = asyncio.run(main())
    with SchemaRegistryClient({"url": url}) as sync_reader:  # the same scope: the same registry
        assert AvroDeserializer(sync_reader)(avro, _ctx()) == page_view(2)

    async def read() -> list[Any]:
        async with AsyncSchemaRegistryClient({"url": url}) as client:
            return [
                await AsyncAvroDeserializer(client)(avro, _ctx()),
                await AsyncJsonSchemaDeserializer(client)(json_data, _ctx("orders")),
                await AsyncProtobufDeserializer(order_pb2.Order)(pb, _ctx("pb")),
            ]

    assert asyncio.run(read()) == [page_view(2), order, message]


def test_scope_returns_the_registry_clients_of_that_url_use(url: str) -> None:
    with SchemaRegistryClient({"url": url}) as client:
        client.register_schema("users-value", Schema(USER_V1))
    status, answer = scope(url[len("mock://") :]).handle("GET", "/subjects")
    assert (status, answer) == (200, ["users-value"])
