"""Avro in Confluent's wire format, with fastavro. [app]

:class:`AvroSerializer` and :class:`AvroDeserializer` write and read exactly the bytes
confluent-kafka's ``AvroSerializer`` / ``AvroDeserializer`` do: a magic byte, the schema id,
then the record in Avro's binary encoding; or, with ``schema.id.serializer="header"``, the
bare record and the schema's GUID in a record header (read either way by default). Named
types from other subjects (Avro schema references) are resolved through the registry.
Records read with a ``reader_schema_str`` are resolved from the writer's schema (fields
added with a default get the default).
Logical types (decimal, date, time and timestamp millis/micros, uuid) map to Python's
``Decimal``, ``date``, ``time``, ``datetime`` and ``UUID``, as fastavro does.

:class:`AsyncAvroSerializer` and :class:`AsyncAvroDeserializer` are the asyncio twins (their
``__call__`` is a coroutine; they take an :class:`~kaflux.schema_registry.AsyncSchemaRegistryClient`
and never block the loop). Both kinds share one implementation: what needs the registry is
written as steps (:mod:`kaflux.schema_registry._core`), run by the sync or the async client.
"""

from __future__ import annotations

import io
import json
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from fastavro import parse_schema, schemaless_reader, schemaless_writer

from kaflux.schema_registry._core import RegisteredSchema, RegistryCore, Schema, SchemaReference, Steps
from kaflux.schema_registry._serde import SchemaIdLookup, read_id, run_local, use_headers
from kaflux.schema_registry.aio import AsyncSchemaRegistryClient
from kaflux.schema_registry.client import SchemaRegistryClient
from kaflux.schema_registry.wire import SchemaIdRead
from kaflux.serialization import Deserializer, SerializationContext, SerializationError, Serializer

ParsedSchema = Any


def _named_types(
    core: RegistryCore, references: tuple[SchemaReference, ...], named: dict[str, Any]
) -> Steps[None]:
    """Parse each referenced schema (and what it references) into ``named``."""
    for ref in references:
        if ref.name in named:
            continue
        registered = yield from core.get_version(ref.subject, ref.version)
        yield from _named_types(core, registered.schema.references, named)
        parse_schema(json.loads(registered.schema.schema_str), named_schemas=named)


def parse_avro_steps(core: RegistryCore | None, schema: Schema) -> Steps[ParsedSchema]:
    """``schema`` parsed by fastavro, its references resolved through ``core``."""
    named: dict[str, Any] = {}
    if schema.references:
        if core is None:
            raise ValueError("a schema with references needs a SchemaRegistryClient to resolve them")
        yield from _named_types(core, schema.references, named)
    try:
        return parse_schema(json.loads(schema.schema_str), named_schemas=named)
    except (ValueError, TypeError, KeyError) as exc:  # fastavro's SchemaParseException is a ValueError
        raise ValueError(f"not a valid Avro schema: {exc}") from exc


def parse_avro(client: SchemaRegistryClient | None, schema: Schema) -> ParsedSchema:
    """``schema`` parsed by fastavro, its references resolved through ``client``."""
    if client is None:
        return run_local(parse_avro_steps(None, schema))
    return client.run(parse_avro_steps(client.core, schema))


def _record_name(parsed: ParsedSchema) -> str | None:
    if isinstance(parsed, dict) and parsed.get("type") == "record":
        return str(parsed["name"])
    return None


def _as_schema(schema_str: str | Schema) -> Schema:
    return Schema(schema_str, "AVRO") if isinstance(schema_str, str) else schema_str


class _AvroWriting:
    """What the sync and async Avro serializers share: the steps to the registration and the
    parsed schema, and the encoding."""

    def __init__(
        self,
        core: RegistryCore,
        schema_str: str | Schema,
        conf: Mapping[str, object] | None,
        to_dict: Callable[[Any, SerializationContext], Any] | None,
    ) -> None:
        self._schema = _as_schema(schema_str)
        self._core = core
        self._parsed: ParsedSchema | None = None
        self._name: str | None = None
        self._ids = SchemaIdLookup(core, conf, "Avro")
        self._to_dict = to_dict
        self._by_id: dict[int, ParsedSchema] = {}
        self._lock = threading.Lock()

    def _prepare(self) -> Steps[ParsedSchema]:
        parsed = yield from parse_avro_steps(self._core, self._schema)
        self._name = _record_name(parsed)
        self._parsed = parsed
        return parsed

    def _cached(self, ctx: SerializationContext) -> RegisteredSchema | None:
        if self._parsed is None:
            return None
        return self._ids.cached(self._ids.subject(ctx, self._name))

    def _steps(self, value: Any, ctx: SerializationContext) -> Steps[bytes | None]:
        parsed = self._parsed
        if parsed is None:
            parsed = yield from self._prepare()
        registered = yield from self._ids.registered(self._ids.subject(ctx, self._name), self._schema)
        if self._ids.use_latest:
            parsed = self._by_id.get(registered.schema_id)
            if parsed is None:
                parsed = yield from parse_avro_steps(self._core, registered.schema)
                with self._lock:
                    self._by_id[registered.schema_id] = parsed
        return self._encode(value, ctx, registered, parsed)

    def _encode(
        self, value: Any, ctx: SerializationContext, registered: RegisteredSchema, parsed: ParsedSchema
    ) -> bytes | None:
        if self._to_dict is not None:
            value = self._to_dict(value, ctx)
        out = io.BytesIO()
        if not self._ids.header_framing:
            out.write(b"\x00" + registered.schema_id.to_bytes(4, "big"))
        try:
            schemaless_writer(out, parsed, value)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise SerializationError(
                f"{ctx.topic} {ctx.field}: the value does not match the Avro schema: {exc!r}"
            ) from exc
        if self._ids.header_framing:
            return self._ids.frame(registered, out.getvalue(), ctx)
        return out.getvalue()


class AvroSerializer(_AvroWriting, Serializer):
    """Serialises Python values (dicts for records) with an Avro schema, registering it.

    ``conf``: ``auto.register.schemas``, ``use.latest.version``, ``normalize.schemas``,
    ``subject.name.strategy``, ``schema.id.serializer`` (``"prefix"``, the default, or
    ``"header"``: the schema's GUID goes in the record's headers, which needs the producer's
    context; see :mod:`kaflux.schema_registry._serde`). ``to_dict(obj, ctx)`` turns
    application objects into the dicts Avro writes.
    """

    def __init__(
        self,
        client: SchemaRegistryClient,
        schema_str: str | Schema,
        conf: Mapping[str, object] | None = None,
        to_dict: Callable[[Any, SerializationContext], Any] | None = None,
    ) -> None:
        super().__init__(client.core, schema_str, conf, to_dict)
        self._client = client
        client.run(self._prepare())

    def __call__(self, value: Any, ctx: SerializationContext) -> bytes | None:
        if value is None:
            return None
        registered = self._cached(ctx)
        if registered is not None:
            return self._encode(value, ctx, registered, self._parsed)
        return self._client.run(self._steps(value, ctx))


class AsyncAvroSerializer(_AvroWriting):
    """:class:`AvroSerializer` for asyncio: ``await serializer(value, ctx)``. The schema's
    references, if any, are resolved on the first call (the constructor makes no request)."""

    def __init__(
        self,
        client: AsyncSchemaRegistryClient,
        schema_str: str | Schema,
        conf: Mapping[str, object] | None = None,
        to_dict: Callable[[Any, SerializationContext], Any] | None = None,
    ) -> None:
        super().__init__(client.core, schema_str, conf, to_dict)
        self._client = client
        if not self._schema.references:
            run_local(self._prepare())

    async def __call__(self, value: Any, ctx: SerializationContext) -> bytes | None:
        if value is None:
            return None
        registered = self._cached(ctx)
        if registered is not None:
            return self._encode(value, ctx, registered, self._parsed)
        return await self._client.run(self._steps(value, ctx))


class _AvroReading:
    """What the sync and async Avro deserializers share: the steps to a writer's parsed
    schema, and the decoding."""

    def __init__(
        self,
        core: RegistryCore,
        reader_schema_str: str | Schema | None,
        from_dict: Callable[[Any, SerializationContext | None], Any] | None,
        conf: Mapping[str, object] | None,
    ) -> None:
        self._headers_first = use_headers(conf, "Avro")
        self._core = core
        self._reader_schema = None if reader_schema_str is None else _as_schema(reader_schema_str)
        self._reader: ParsedSchema | None = None
        self._from_dict = from_dict
        self._writers: dict[int | bytes | str, ParsedSchema] = {}
        self._lock = threading.Lock()

    def _prepare(self) -> Steps[None]:
        if self._reader_schema is not None and self._reader is None:
            self._reader = yield from parse_avro_steps(self._core, self._reader_schema)

    def _writer_steps(self, schema_id: int | bytes | str) -> Steps[ParsedSchema]:
        yield from self._prepare()
        parsed = self._writers.get(schema_id)
        if parsed is None:
            if isinstance(schema_id, int):
                schema = yield from self._core.get_schema(schema_id)
            else:
                guid = str(uuid.UUID(bytes=schema_id)) if isinstance(schema_id, bytes) else schema_id
                schema = yield from self._core.get_schema_by_guid(guid)
            parsed = yield from parse_avro_steps(self._core, schema)
            with self._lock:
                self._writers[schema_id] = parsed
        return parsed

    def _decode(
        self, data: bytes, ctx: SerializationContext | None, read: SchemaIdRead, writer: ParsedSchema
    ) -> Any:
        buf = io.BytesIO(data)
        buf.seek(read.payload_start)
        value = schemaless_reader(buf, writer, self._reader)
        if buf.tell() != len(data):
            raise SerializationError(f"{len(data) - buf.tell()} bytes left over after the Avro record")
        if self._from_dict is not None:
            return self._from_dict(value, ctx)
        return value


class AvroDeserializer(_AvroReading, Deserializer):
    """Reads Avro records written by any Schema Registry Avro serializer.

    With ``reader_schema_str`` records are resolved to that schema (Avro schema evolution);
    otherwise each is read with its writer's schema. ``from_dict(dict, ctx)`` turns the
    decoded dict into an application object. The writer's schema is named by the record's
    ``__key_schema_id`` / ``__value_schema_id`` header (a GUID) if it has one, else by the
    payload's prefix; ``conf={"schema.id.deserializer": "prefix"}`` ignores the headers.
    """

    def __init__(
        self,
        client: SchemaRegistryClient,
        reader_schema_str: str | Schema | None = None,
        from_dict: Callable[[Any, SerializationContext | None], Any] | None = None,
        conf: Mapping[str, object] | None = None,
    ) -> None:
        super().__init__(client.core, reader_schema_str, from_dict, conf)
        self._client = client
        client.run(self._prepare())

    def writer_schema(self, schema_id: int | bytes | str) -> ParsedSchema:
        """The parsed writer schema for ``schema_id`` (an id, or a GUID as text or its 16
        bytes; asked of the registry once)."""
        return self._client.run(self._writer_steps(schema_id))

    def __call__(self, data: bytes | None, ctx: SerializationContext | None = None) -> Any:
        if data is None:
            return None
        read = read_id(data, ctx, self._headers_first)
        writer = self._writers.get(read.key)
        if writer is None:
            writer = self._client.run(self._writer_steps(read.key))
        return self._decode(data, ctx, read, writer)


class AsyncAvroDeserializer(_AvroReading):
    """:class:`AvroDeserializer` for asyncio: ``await deserializer(data, ctx)``; give it to
    :class:`~kaflux.aio.AsyncConsumer` as a deserializer. The reader schema's references, if
    any, are resolved on the first call."""

    def __init__(
        self,
        client: AsyncSchemaRegistryClient,
        reader_schema_str: str | Schema | None = None,
        from_dict: Callable[[Any, SerializationContext | None], Any] | None = None,
        conf: Mapping[str, object] | None = None,
    ) -> None:
        super().__init__(client.core, reader_schema_str, from_dict, conf)
        self._client = client

    async def __call__(self, data: bytes | None, ctx: SerializationContext | None = None) -> Any:
        if data is None:
            return None
        read = read_id(data, ctx, self._headers_first)
        writer = self._writers.get(read.key)
        if writer is None:
            writer = await self._client.run(self._writer_steps(read.key))
        return self._decode(data, ctx, read, writer)
