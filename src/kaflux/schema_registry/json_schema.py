"""JSON Schema in Confluent's wire format. [app]

:class:`JsonSchemaSerializer` validates each value against its schema before it is sent
(nothing invalid reaches the topic), then writes the magic byte, the schema id and the value
as compact UTF-8 JSON, as confluent-kafka's ``JSONSerializer`` does (or, with
``schema.id.serializer="header"``, the bare JSON and the schema's GUID in a record header).
:class:`JsonSchemaDeserializer` reads the writer's schema by id or GUID and validates what it
reads.

:class:`AsyncJsonSchemaSerializer` and :class:`AsyncJsonSchemaDeserializer` are the asyncio twins
(confluent-kafka's ``AsyncJSONSerializer`` / ``AsyncJSONDeserializer``; the sync names
``JSONSerializer`` / ``JSONDeserializer`` and the async ones are aliases here), sharing the
steps that need the registry with the sync classes.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

import jsonschema

from kaflux.schema_registry._core import RegisteredSchema, RegistryCore, Schema, Steps
from kaflux.schema_registry._serde import SchemaIdLookup, read_id, use_headers, writer_schema
from kaflux.schema_registry.aio import AsyncSchemaRegistryClient
from kaflux.schema_registry.client import SchemaRegistryClient
from kaflux.schema_registry.wire import SchemaIdRead
from kaflux.serialization import Deserializer, SerializationContext, SerializationError, Serializer


def _validator(schema_str: str) -> Any:
    schema = json.loads(schema_str)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


class _JsonWriting:
    def __init__(
        self,
        core: RegistryCore,
        schema_str: str | Schema,
        conf: Mapping[str, object] | None,
        to_dict: Callable[[Any, SerializationContext], Any] | None,
    ) -> None:
        self._schema = schema = Schema(schema_str, "JSON") if isinstance(schema_str, str) else schema_str
        try:
            self._validator = _validator(schema.schema_str)
        except (ValueError, jsonschema.SchemaError) as exc:
            raise ValueError(f"not a valid JSON Schema: {exc}") from exc
        title = json.loads(schema.schema_str).get("title")
        self._name = str(title) if title else None
        self._ids = SchemaIdLookup(core, conf, "JSON Schema")
        self._to_dict = to_dict

    def _checked(self, value: Any, ctx: SerializationContext) -> Any:
        if self._to_dict is not None:
            value = self._to_dict(value, ctx)
        error = jsonschema.exceptions.best_match(self._validator.iter_errors(value))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "(root)"
            raise SerializationError(
                f"{ctx.topic} {ctx.field} does not match its JSON Schema at {where}: {error.message}"
            )
        return value

    def _steps(self, value: Any, ctx: SerializationContext) -> Steps[bytes]:
        registered = yield from self._ids.registered(self._ids.subject(ctx, self._name), self._schema)
        return self._encode(value, ctx, registered)

    def _encode(self, value: Any, ctx: SerializationContext, registered: RegisteredSchema) -> bytes:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        return self._ids.frame(registered, text.encode(), ctx)


class JsonSchemaSerializer(_JsonWriting, Serializer):
    """Validates values against ``schema_str`` and serialises them as JSON.

    ``conf``: ``auto.register.schemas``, ``use.latest.version``, ``normalize.schemas``,
    ``subject.name.strategy`` (the schema's ``title`` is its record name),
    ``schema.id.serializer`` (``"prefix"``, the default, or ``"header"``; see
    :mod:`kaflux.schema_registry._serde`).
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

    def __call__(self, value: Any, ctx: SerializationContext) -> bytes | None:
        if value is None:
            return None
        value = self._checked(value, ctx)
        registered = self._ids.cached(self._ids.subject(ctx, self._name))
        if registered is not None:
            return self._encode(value, ctx, registered)
        return self._client.run(self._steps(value, ctx))


class AsyncJsonSchemaSerializer(_JsonWriting):
    """:class:`JsonSchemaSerializer` for asyncio: ``await serializer(value, ctx)``."""

    def __init__(
        self,
        client: AsyncSchemaRegistryClient,
        schema_str: str | Schema,
        conf: Mapping[str, object] | None = None,
        to_dict: Callable[[Any, SerializationContext], Any] | None = None,
    ) -> None:
        super().__init__(client.core, schema_str, conf, to_dict)
        self._client = client

    async def __call__(self, value: Any, ctx: SerializationContext) -> bytes | None:
        if value is None:
            return None
        value = self._checked(value, ctx)
        registered = self._ids.cached(self._ids.subject(ctx, self._name))
        if registered is not None:
            return self._encode(value, ctx, registered)
        return await self._client.run(self._steps(value, ctx))


class _JsonReading:
    def __init__(
        self,
        core: RegistryCore,
        validate: bool,
        from_dict: Callable[[Any, SerializationContext | None], Any] | None,
        conf: Mapping[str, object] | None,
    ) -> None:
        self._headers_first = use_headers(conf, "JSON Schema")
        self._core = core
        self._validate = validate
        self._from_dict = from_dict
        self._validators: dict[int | bytes, Any] = {}
        self._lock = threading.Lock()

    def _validator_steps(self, read: SchemaIdRead) -> Steps[Any]:
        validator = self._validators.get(read.key)
        if validator is None:
            validator = _validator((yield from writer_schema(self._core, read)).schema_str)
            with self._lock:
                self._validators[read.key] = validator
        return validator

    def _decode(
        self, value: Any, ctx: SerializationContext | None, read: SchemaIdRead, validator: Any
    ) -> Any:
        if validator is not None:
            error = jsonschema.exceptions.best_match(validator.iter_errors(value))
            if error is not None:
                which = f"id {read.schema_id}" if read.guid is None else f"GUID {read.guid}"
                raise SerializationError(
                    f"the value does not match its JSON Schema ({which}): {error.message}"
                )
        if self._from_dict is not None:
            return self._from_dict(value, ctx)
        return value


class JsonSchemaDeserializer(_JsonReading, Deserializer):
    """Reads JSON values written by any Schema Registry JSON Schema serializer, validating
    each against its writer's schema (``validate=False`` skips that). The schema is named by
    the record's schema-id header (a GUID) if it has one, else by the payload's prefix;
    ``conf={"schema.id.deserializer": "prefix"}`` ignores the headers."""

    def __init__(
        self,
        client: SchemaRegistryClient,
        validate: bool = True,
        from_dict: Callable[[Any, SerializationContext | None], Any] | None = None,
        conf: Mapping[str, object] | None = None,
    ) -> None:
        super().__init__(client.core, validate, from_dict, conf)
        self._client = client

    def __call__(self, data: bytes | None, ctx: SerializationContext | None = None) -> Any:
        if data is None:
            return None
        read = read_id(data, ctx, self._headers_first)
        value = json.loads(data[read.payload_start :])
        validator = None
        if self._validate:
            validator = self._validators.get(read.key)
            if validator is None:
                validator = self._client.run(self._validator_steps(read))
        return self._decode(value, ctx, read, validator)


class AsyncJsonSchemaDeserializer(_JsonReading):
    """:class:`JsonSchemaDeserializer` for asyncio: ``await deserializer(data, ctx)``."""

    def __init__(
        self,
        client: AsyncSchemaRegistryClient,
        validate: bool = True,
        from_dict: Callable[[Any, SerializationContext | None], Any] | None = None,
        conf: Mapping[str, object] | None = None,
    ) -> None:
        super().__init__(client.core, validate, from_dict, conf)
        self._client = client

    async def __call__(self, data: bytes | None, ctx: SerializationContext | None = None) -> Any:
        if data is None:
            return None
        read = read_id(data, ctx, self._headers_first)
        value = json.loads(data[read.payload_start :])
        validator = None
        if self._validate:
            validator = self._validators.get(read.key)
            if validator is None:
                validator = await self._client.run(self._validator_steps(read))
        return self._decode(value, ctx, read, validator)


#: confluent-kafka's names
JSONSerializer = JsonSchemaSerializer
JSONDeserializer = JsonSchemaDeserializer
AsyncJSONSerializer = AsyncJsonSchemaSerializer
AsyncJSONDeserializer = AsyncJsonSchemaDeserializer
