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
"""

from __future__ import annotations

import io
import json
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from fastavro import parse_schema, schemaless_reader, schemaless_writer

from kaflux.schema_registry._serde import SchemaIdLookup, read_id, use_headers
from kaflux.schema_registry.client import Schema, SchemaReference, SchemaRegistryClient
from kaflux.serialization import Deserializer, SerializationContext, SerializationError, Serializer

ParsedSchema = Any


def _named_types(
    client: SchemaRegistryClient, references: tuple[SchemaReference, ...], named: dict[str, Any]
) -> dict[str, Any]:
    """Parse each referenced schema (and what it references) into ``named``."""
    for ref in references:
        if ref.name in named:
            continue
        registered = client.get_version(ref.subject, ref.version)
        _named_types(client, registered.schema.references, named)
        parse_schema(json.loads(registered.schema.schema_str), named_schemas=named)
    return named


def parse_avro(client: SchemaRegistryClient | None, schema: Schema) -> ParsedSchema:
    """``schema`` parsed by fastavro, its references resolved through ``client``."""
    named: dict[str, Any] = {}
    if schema.references:
        if client is None:
            raise ValueError("a schema with references needs a SchemaRegistryClient to resolve them")
        _named_types(client, schema.references, named)
    try:
        return parse_schema(json.loads(schema.schema_str), named_schemas=named)
    except (ValueError, TypeError, KeyError) as exc:  # fastavro's SchemaParseException is a ValueError
        raise ValueError(f"not a valid Avro schema: {exc}") from exc


def _record_name(parsed: ParsedSchema) -> str | None:
    if isinstance(parsed, dict) and parsed.get("type") == "record":
        return str(parsed["name"])
    return None


class AvroSerializer(Serializer):
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
        self._schema = schema = Schema(schema_str, "AVRO") if isinstance(schema_str, str) else schema_str
        self._parsed = parse_avro(client, schema)
        self._name = _record_name(self._parsed)
        self._ids = SchemaIdLookup(client, conf, "Avro")
        self._client = client
        self._to_dict = to_dict
        self._by_id: dict[int, ParsedSchema] = {}
        self._lock = threading.Lock()

    def __call__(self, value: Any, ctx: SerializationContext) -> bytes | None:
        if value is None:
            return None
        registered = self._ids.registered(self._ids.subject(ctx, self._name), self._schema)
        parsed = self._parsed
        if self._ids.use_latest:
            parsed = self._by_id.get(registered.schema_id)
            if parsed is None:
                parsed = parse_avro(self._client, registered.schema)
                with self._lock:
                    self._by_id[registered.schema_id] = parsed
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


class AvroDeserializer(Deserializer):
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
        self._headers_first = use_headers(conf, "Avro")
        self._client = client
        reader = (
            Schema(reader_schema_str, "AVRO") if isinstance(reader_schema_str, str) else reader_schema_str
        )
        self._reader = None if reader is None else parse_avro(client, reader)
        self._from_dict = from_dict
        self._writers: dict[int | bytes | str, ParsedSchema] = {}
        self._lock = threading.Lock()

    def writer_schema(self, schema_id: int | bytes | str) -> ParsedSchema:
        """The parsed writer schema for ``schema_id`` (an id, or a GUID as text or its 16
        bytes; asked of the registry once)."""
        parsed = self._writers.get(schema_id)
        if parsed is None:
            if isinstance(schema_id, int):
                schema = self._client.get_schema(schema_id)
            else:
                guid = str(uuid.UUID(bytes=schema_id)) if isinstance(schema_id, bytes) else schema_id
                schema = self._client.get_schema_by_guid(guid)
            parsed = parse_avro(self._client, schema)
            with self._lock:
                self._writers[schema_id] = parsed
        return parsed

    def __call__(self, data: bytes | None, ctx: SerializationContext | None = None) -> Any:
        if data is None:
            return None
        read = read_id(data, ctx, self._headers_first)
        writer = self._writers.get(read.key)
        if writer is None:
            writer = self.writer_schema(read.key)
        buf = io.BytesIO(data)
        buf.seek(read.payload_start)
        value = schemaless_reader(buf, writer, self._reader)
        if buf.tell() != len(data):
            raise SerializationError(f"{len(data) - buf.tell()} bytes left over after the Avro record")
        if self._from_dict is not None:
            return self._from_dict(value, ctx)
        return value
