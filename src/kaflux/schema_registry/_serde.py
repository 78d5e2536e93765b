"""What the three formats' serializers share: their settings and the subject -> id cache. [app]

Settings take confluent-kafka's names: ``auto.register.schemas`` (default True: register the
schema under its subject on first use), ``use.latest.version`` (write with the latest schema
registered under the subject instead, default False), ``normalize.schemas`` (False) and
``subject.name.strategy`` (a function of :mod:`kaflux.schema_registry.subjects`).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from kaflux.errors import ConfigError
from kaflux.schema_registry.client import RegisteredSchema, Schema, SchemaRegistryClient
from kaflux.schema_registry.subjects import SubjectNameStrategy, topic_subject_name_strategy
from kaflux.serialization import SerializationContext

_SERIALIZER_KEYS = (
    "auto.register.schemas",
    "use.latest.version",
    "normalize.schemas",
    "subject.name.strategy",
)


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

    def __init__(self, client: SchemaRegistryClient, conf: Mapping[str, object] | None, kind: str) -> None:
        conf = dict(conf or {})
        for key in conf:
            if key not in _SERIALIZER_KEYS:
                raise ConfigError(
                    key, f"unknown {kind} serializer key; known keys: {', '.join(_SERIALIZER_KEYS)}"
                )
        self.client = client
        self.auto_register = _flag(conf, "auto.register.schemas", True)
        self.use_latest = _flag(conf, "use.latest.version", False)
        self.normalize = _flag(conf, "normalize.schemas", False)
        if self.use_latest and self.auto_register:
            raise ConfigError("use.latest.version", "cannot be combined with auto.register.schemas=true")
        strategy: Any = conf.get("subject.name.strategy", topic_subject_name_strategy)
        if not callable(strategy):
            raise ConfigError("subject.name.strategy", "expected a function (ctx, record_name) -> subject")
        self.strategy: SubjectNameStrategy = strategy
        self._ids: dict[str, RegisteredSchema] = {}
        self._lock = threading.Lock()

    def subject(self, ctx: SerializationContext, record_name: str | None) -> str:
        return self.strategy(ctx, record_name)

    def registered(self, subject: str, schema: Schema) -> RegisteredSchema:
        """The registration to write ``subject``'s records with (the latest version with
        use.latest.version; the client caches it)."""
        if self.use_latest:
            return self.client.get_latest_version(subject)
        found = self._ids.get(subject)
        if found is not None:
            return found
        if self.auto_register:
            found = self.client.register_schema_full_response(subject, schema, self.normalize)
        else:
            found = self.client.lookup_schema(subject, schema, self.normalize)
        with self._lock:
            self._ids[subject] = found
        return found
