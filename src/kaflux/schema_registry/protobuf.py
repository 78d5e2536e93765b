"""Protobuf in Confluent's wire format. [app]

:class:`ProtobufSerializer` registers the message's ``.proto`` file as Confluent's clients do
(the serialized ``FileDescriptorProto``, base64), after registering each file it imports
under the file's name, and references them: the schema, its id and the bytes are the same as
confluent-kafka's ``ProtobufSerializer``. The payload is the magic byte, the schema id, the
message's index path in its file, then the message; with ``schema.id.serializer="header"``
the payload is the bare message and a record header holds the schema's GUID then the index
path, as confluent-kafka's ``header_schema_id_serializer`` writes. :class:`ProtobufDeserializer`
needs only the generated class, and reads either framing.

:class:`AsyncProtobufSerializer` and :class:`AsyncProtobufDeserializer` are the asyncio twins
(``await``-ed; same steps, run by an :class:`~kaflux.schema_registry.AsyncSchemaRegistryClient`).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from typing import Any

from google.protobuf.descriptor import Descriptor, FileDescriptor
from google.protobuf.message import DecodeError, Message

from kaflux.errors import ConfigError
from kaflux.schema_registry._core import RegisteredSchema, RegistryCore, Schema, SchemaReference, Steps
from kaflux.schema_registry._serde import SchemaIdLookup, read_id, use_headers
from kaflux.schema_registry.aio import AsyncSchemaRegistryClient
from kaflux.schema_registry.client import SchemaRegistryClient
from kaflux.schema_registry.wire import decode_message_indexes, encode_message_indexes
from kaflux.serialization import Deserializer, SerializationContext, SerializationError, Serializer

#: ``reference.subject.name.strategy``: the subject an imported file is registered under
ReferenceSubjectStrategy = Callable[[SerializationContext, FileDescriptor], str]


def reference_subject_name_strategy(ctx: SerializationContext, file: FileDescriptor) -> str:
    """The imported file's name, e.g. ``common.proto`` (Confluent's default)."""
    return str(file.name)


def message_indexes(descriptor: Descriptor) -> list[int]:
    """Where ``descriptor`` is in its file: the index of each message on the way down."""
    path: list[int] = []
    current = descriptor
    while current.containing_type is not None:
        parent = current.containing_type
        path.append(list(parent.nested_types).index(current))
        current = parent
    path.append(list(current.file.message_types_by_name.values()).index(current))
    return path[::-1]


def _schema_text(file: FileDescriptor) -> str:
    return base64.standard_b64encode(file.serialized_pb).decode("ascii")


class _ProtobufWriting:
    def __init__(
        self,
        core: RegistryCore,
        message_class: type[Message],
        conf: Mapping[str, object] | None,
    ) -> None:
        conf = dict(conf or {})
        ref_strategy: Any = conf.pop("reference.subject.name.strategy", reference_subject_name_strategy)
        if not callable(ref_strategy):
            raise ConfigError("reference.subject.name.strategy", "expected a function (ctx, file) -> subject")
        self._ref_strategy: ReferenceSubjectStrategy = ref_strategy
        skip = conf.pop("skip.known.types", True)
        self._skip_known = str(skip).lower() == "true"
        self._ids = SchemaIdLookup(core, conf, "Protobuf")
        self._core = core
        self._class = message_class
        descriptor: Descriptor = message_class.DESCRIPTOR
        self._name = descriptor.full_name
        self._prefix_indexes = encode_message_indexes(message_indexes(descriptor))
        self._file = descriptor.file
        self._schema: Schema | None = None

    def _references(
        self, ctx: SerializationContext, file: FileDescriptor
    ) -> Steps[tuple[SchemaReference, ...]]:
        refs: list[SchemaReference] = []
        for dep in file.dependencies:
            if self._skip_known and dep.name.startswith("google/protobuf/"):
                continue
            schema = Schema(_schema_text(dep), "PROTOBUF", (yield from self._references(ctx, dep)))
            subject = self._ref_strategy(ctx, dep)
            if self._ids.auto_register:
                yield from self._core.register_schema_full_response(subject, schema, self._ids.normalize)
            version = (yield from self._core.lookup_schema(subject, schema, self._ids.normalize)).version
            assert version is not None
            refs.append(SchemaReference(dep.name, subject, version))
        return tuple(refs)

    def _checked(self, value: Any, ctx: SerializationContext) -> None:
        if not isinstance(value, self._class):
            raise SerializationError(
                f"{ctx.topic} {ctx.field}: expected a {self._class.__name__}, got {type(value).__name__}"
            )

    def _steps(self, value: Any, ctx: SerializationContext) -> Steps[bytes]:
        schema = self._schema
        if schema is None:
            refs = yield from self._references(ctx, self._file)
            schema = self._schema = Schema(_schema_text(self._file), "PROTOBUF", refs)
        registered = yield from self._ids.registered(self._ids.subject(ctx, self._name), schema)
        return self._encode(value, ctx, registered)

    def _cached(self, ctx: SerializationContext) -> RegisteredSchema | None:
        return None if self._schema is None else self._ids.cached(self._ids.subject(ctx, self._name))

    def _encode(self, value: Any, ctx: SerializationContext, registered: RegisteredSchema) -> bytes:
        payload: bytes = value.SerializeToString()
        return self._ids.frame(registered, payload, ctx, self._prefix_indexes)


class ProtobufSerializer(_ProtobufWriting, Serializer):
    """Serialises instances of ``message_class`` (a generated Protobuf class).

    ``conf``: ``auto.register.schemas``, ``use.latest.version``, ``normalize.schemas``,
    ``subject.name.strategy``, ``reference.subject.name.strategy`` (default: the file name)
    and ``skip.known.types`` (default True: ``google/protobuf/*`` imports are not registered),
    ``schema.id.serializer`` (``"prefix"``, the default, or ``"header"``; see
    :mod:`kaflux.schema_registry._serde`).
    """

    def __init__(
        self,
        client: SchemaRegistryClient,
        message_class: type[Message],
        conf: Mapping[str, object] | None = None,
    ) -> None:
        super().__init__(client.core, message_class, conf)
        self._client = client

    def __call__(self, value: Any, ctx: SerializationContext) -> bytes | None:
        if value is None:
            return None
        self._checked(value, ctx)
        registered = self._cached(ctx)
        if registered is not None:
            return self._encode(value, ctx, registered)
        return self._client.run(self._steps(value, ctx))


class AsyncProtobufSerializer(_ProtobufWriting):
    """:class:`ProtobufSerializer` for asyncio: ``await serializer(message, ctx)``."""

    def __init__(
        self,
        client: AsyncSchemaRegistryClient,
        message_class: type[Message],
        conf: Mapping[str, object] | None = None,
    ) -> None:
        super().__init__(client.core, message_class, conf)
        self._client = client

    async def __call__(self, value: Any, ctx: SerializationContext) -> bytes | None:
        if value is None:
            return None
        self._checked(value, ctx)
        registered = self._cached(ctx)
        if registered is not None:
            return self._encode(value, ctx, registered)
        return await self._client.run(self._steps(value, ctx))


class ProtobufDeserializer(Deserializer):
    """Reads messages of ``message_class`` written by any Schema Registry Protobuf serializer,
    prefix- or header-framed (``conf={"schema.id.deserializer": "prefix"}`` ignores the
    headers)."""

    def __init__(self, message_class: type[Message], conf: Mapping[str, object] | None = None) -> None:
        self._headers_first = use_headers(conf, "Protobuf")
        self._class = message_class

    def __call__(self, data: bytes | None, ctx: SerializationContext | None = None) -> Any:
        if data is None:
            return None
        read = read_id(data, ctx, self._headers_first)
        if read.header is not None:
            decode_message_indexes(read.header, read.end)
            pos = 0
        else:
            _, pos = decode_message_indexes(data, read.end)
        try:
            return self._class.FromString(data[pos:])
        except DecodeError as exc:
            raise SerializationError(f"not a valid {self._class.__name__}: {exc}") from exc


class AsyncProtobufDeserializer:
    """:class:`ProtobufDeserializer` for asyncio: ``await deserializer(data, ctx)`` (it needs
    no registry request: the generated class is the reader's schema)."""

    def __init__(self, message_class: type[Message], conf: Mapping[str, object] | None = None) -> None:
        self._sync = ProtobufDeserializer(message_class, conf)

    async def __call__(self, data: bytes | None, ctx: SerializationContext | None = None) -> Any:
        return self._sync(data, ctx)
