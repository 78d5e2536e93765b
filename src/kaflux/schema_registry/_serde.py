"""What the three formats' (de)serializers share: settings, the subject -> id cache, framing. [app]

Serializer settings take confluent-kafka's names: ``auto.register.schemas`` (default True:
register the schema under its subject on first use), ``use.latest.version`` (write with the
latest schema registered under the subject instead, default False), ``normalize.schemas``
(False), ``subject.name.strategy`` (a function of :mod:`kaflux.schema_registry.subjects`) and
``schema.id.serializer``: ``"prefix"`` (the default: magic byte 0 and the schema id before
the payload) or ``"header"`` (the payload alone, and the schema's GUID in a
``__key_schema_id`` / ``__value_schema_id`` record header; see
:mod:`kaflux.schema_registry.wire`). confluent-kafka's ``prefix_schema_id_serializer`` and
``header_schema_id_serializer`` functions are accepted too, so a configuration can move over
unchanged.

Deserializer setting: ``schema.id.deserializer``: ``"dual"`` (the default: the schema-id
header first, then the payload's prefix) or ``"prefix"`` (the prefix only, headers ignored);
confluent-kafka's ``dual_schema_id_deserializer`` / ``prefix_schema_id_deserializer`` too.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from kaflux.errors import ConfigError
from kaflux.schema_registry._core import RegisteredSchema, RegistryCore, Schema, Steps, T
from kaflux.schema_registry.subjects import SubjectNameStrategy, topic_subject_name_strategy
from kaflux.schema_registry.wire import SchemaIdRead, guid_header, header_name, read_schema_id
from kaflux.serialization import SerializationContext, SerializationError

_SERIALIZER_KEYS = (
    "auto.register.schemas",
    "use.latest.version",
    "normalize.schemas",
    "subject.name.strategy",
    "schema.id.serializer",
)
DESERIALIZER_KEYS = ("schema.id.deserializer",)
_SERIALIZER_FRAMINGS = {
    "prefix": "prefix",
    "header": "header",
    "prefix_schema_id_serializer": "prefix",
    "header_schema_id_serializer": "header",
}
_DESERIALIZER_FRAMINGS = {
    "dual": "dual",
    "prefix": "prefix",
    "dual_schema_id_deserializer": "dual",
    "prefix_schema_id_deserializer": "prefix",
}


def _framing(conf: Mapping[str, object], key: str, default: str, known: Mapping[str, str]) -> str:
    """The framing ``conf[key]`` names: a string, or one of confluent-kafka's functions."""
    value = conf.get(key, default)
    name = getattr(value, "__name__", None) if callable(value) else value
    if isinstance(name, str) and name.lower() in known:
        return known[name.lower()]
    choices = sorted({v for v in known.values()})
    raise ConfigError(
        key,
        f"expected one of {', '.join(repr(c) for c in choices)} (or confluent-kafka's "
        f"{' / '.join(k for k in known if k not in choices)}), got {value!r}",
    )


def use_headers(conf: Mapping[str, object] | None, kind: str) -> bool:
    """A deserializer's ``conf`` checked: whether it reads the schema-id header first (dual,
    the default) or the payload's prefix only."""
    conf = dict(conf or {})
    for key in conf:
        if key not in DESERIALIZER_KEYS:
            raise ConfigError(
                key, f"unknown {kind} deserializer key; known keys: {', '.join(DESERIALIZER_KEYS)}"
            )
    return _framing(conf, "schema.id.deserializer", "dual", _DESERIALIZER_FRAMINGS) == "dual"


def read_id(data: bytes | memoryview, ctx: SerializationContext | None, headers_first: bool) -> SchemaIdRead:
    """Which schema wrote ``data`` (see :func:`kaflux.schema_registry.wire.read_schema_id`)."""
    if ctx is None:
        return read_schema_id(data, None, "value", False)
    return read_schema_id(data, ctx.headers, ctx.field, headers_first)


def writer_schema(core: RegistryCore, read: SchemaIdRead) -> Steps[Schema]:
    """The writer's schema, by id or by GUID (the client caches both)."""
    if read.guid is not None:
        return (yield from core.get_schema_by_guid(read.guid))
    assert read.schema_id is not None
    return (yield from core.get_schema(read.schema_id))


def run_local(steps: Steps[T]) -> T:
    """The result of ``steps`` that need no request (e.g. a schema without references)."""
    try:
        call = next(steps)
    except StopIteration as stop:
        result: T = stop.value
        return result
    steps.close()
    raise ValueError(f"needs a Schema Registry client ({call.method} {call.path})")


def _flag(conf: Mapping[str, object], key: str, default: bool) -> bool:
    value = conf.get(key, default)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ConfigError(key, f"expected a boolean, got {value!r}")


class SchemaIdLookup:
    """The schema id to frame records of each subject with: registered (or looked up) once
    per subject, then from memory."""

    def __init__(self, core: RegistryCore, conf: Mapping[str, object] | None, kind: str) -> None:
        conf = dict(conf or {})
        for key in conf:
            if key not in _SERIALIZER_KEYS:
                raise ConfigError(
                    key, f"unknown {kind} serializer key; known keys: {', '.join(_SERIALIZER_KEYS)}"
                )
        self.core = core
        self.auto_register = _flag(conf, "auto.register.schemas", True)
        self.use_latest = _flag(conf, "use.latest.version", False)
        self.normalize = _flag(conf, "normalize.schemas", False)
        if self.use_latest and self.auto_register:
            raise ConfigError("use.latest.version", "cannot be combined with auto.register.schemas=true")
        strategy: Any = conf.get("subject.name.strategy", topic_subject_name_strategy)
        if not callable(strategy):
            raise ConfigError("subject.name.strategy", "expected a function (ctx, record_name) -> subject")
        self.strategy: SubjectNameStrategy = strategy
        self.header_framing = (
            _framing(conf, "schema.id.serializer", "prefix", _SERIALIZER_FRAMINGS) == "header"
        )
        self._ids: dict[str, RegisteredSchema] = {}
        self._headers: dict[tuple[str, bytes], bytes] = {}  # (GUID, indexes) -> header value
        self._lock = threading.Lock()

    def subject(self, ctx: SerializationContext, record_name: str | None) -> str:
        return self.strategy(ctx, record_name)

    def cached(self, subject: str) -> RegisteredSchema | None:
        """The registration ``subject``'s records are written with, if known without a
        request (never with use.latest.version: the latest version may change)."""
        return None if self.use_latest else self._ids.get(subject)

    def registered(self, subject: str, schema: Schema) -> Steps[RegisteredSchema]:
        """The registration to write ``subject``'s records with (the latest version with
        use.latest.version; the client caches it)."""
        if self.use_latest:
            return (yield from self.core.get_latest_version(subject))
        found = self._ids.get(subject)
        if found is not None:
            return found
        if self.auto_register:
            found = yield from self.core.register_schema_full_response(subject, schema, self.normalize)
        else:
            found = yield from self.core.lookup_schema(subject, schema, self.normalize)
        with self._lock:
            self._ids[subject] = found
        return found

    def frame(
        self,
        registered: RegisteredSchema,
        payload: bytes,
        ctx: SerializationContext,
        message_indexes: bytes = b"",
    ) -> bytes:
        """``payload`` framed as configured: prefixed with the schema id (and a Protobuf
        message's indexes), or bare with the schema's GUID (and the indexes) added to the
        record's headers as ``__key_schema_id`` / ``__value_schema_id``, replacing any header
        of that name already there."""
        if not self.header_framing:
            return b"\x00" + registered.schema_id.to_bytes(4, "big") + message_indexes + payload
        if registered.guid is None:
            raise SerializationError(
                f"{ctx.topic} {ctx.field}: the Schema Registry gave no GUID for schema id "
                f"{registered.schema_id} (a registry too old for header framing); "
                "use schema.id.serializer='prefix'"
            )
        headers = ctx.headers
        if not isinstance(headers, list):
            raise SerializationError(
                f"{ctx.topic} {ctx.field}: header framing (schema.id.serializer='header') adds a "
                "header to the record, and this SerializationContext carries no list of headers: "
                "give the serializer to kaflux's Producer / AsyncProducer (send() passes one), or "
                "call it with SerializationContext(topic, field, headers=[]) and send those headers "
                "with the record"
            )
        name = header_name(ctx.field)
        value = self._headers.get((registered.guid, message_indexes))
        if value is None:
            value = guid_header(registered.guid, message_indexes)
            with self._lock:
                self._headers[(registered.guid, message_indexes)] = value
        if any(h[0] == name for h in headers):
            headers[:] = [h for h in headers if h[0] != name]
        headers.append((name, value))
        return payload
