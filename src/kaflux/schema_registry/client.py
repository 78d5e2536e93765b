"""A Confluent Schema Registry client: REST over urllib3, with caches and retries. [io: HTTP, app thread]

:class:`SchemaRegistryClient` takes confluent-kafka's configuration keys. Every call has one
deadline (``timeout`` seconds, default 10): transient failures (no answer, HTTP 408, 429 and
5xx) move on to the next URL of ``url`` and, when every URL failed, retry after a jittered
backoff that never passes the deadline. Other 4xx answers raise :class:`SchemaRegistryError`
at once. A ``mock://scope`` URL talks to the in-memory registry of that scope instead
(:mod:`kaflux.schema_registry.mock`), for tests.

Ids, GUIDs, schemas and registrations are cached (a registered schema never changes), so a
serializer in its steady state makes no request. No credential (basic auth, bearer token, URL user info,
key password) appears in an error, a log line or ``repr``.

The calls, their caches and retries are written once in :mod:`kaflux.schema_registry._core`
(sans I/O); this module only sends HTTP and sleeps. :class:`AsyncSchemaRegistryClient` runs the
same core on an event loop.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping
from typing import Any

from kaflux.schema_registry._core import (
    DEFAULT_TIMEOUT_S,
    TRANSIENT_STATUS,
    Answer,
    HttpCall,
    NoAnswer,
    RegisteredSchema,
    RegistryCore,
    Schema,
    SchemaReference,
    SchemaRegistryError,
    Send,
    Sleep,
    Steps,
    T,
    exchange,
    parse_config,
)
from kaflux.schema_registry.mock import scope as mock_scope

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "RegisteredSchema",
    "Schema",
    "SchemaReference",
    "SchemaRegistryClient",
    "SchemaRegistryError",
]

log = logging.getLogger(__name__)


def log_answer(send: Send, outcome: Answer | NoAnswer) -> None:
    """Warn of a transient failure (the core retries it)."""
    if isinstance(outcome, NoAnswer):
        log.warning(
            "Schema Registry %s %s at %s failed: %s",
            send.call.method,
            send.call.path,
            send.base,
            outcome.reason,
        )
    elif outcome.status in TRANSIENT_STATUS:
        log.warning(
            "Schema Registry %s %s at %s: HTTP %d, will retry",
            send.call.method,
            send.call.path,
            send.base,
            outcome.status,
        )


class SchemaRegistryClient:
    """A Schema Registry client, safe to share between threads.

    Example::

        registry = SchemaRegistryClient({"url": "https://registry:8081",
                                         "basic.auth.user.info": "user:password"})
        serializer = AvroSerializer(registry, schema_str)

    Keys (confluent-kafka's names): ``url`` (several comma-separated, tried in turn; or one
    ``mock://scope``: the in-memory registry of that scope, see
    :mod:`kaflux.schema_registry.mock`), ``basic.auth.user.info`` (``user:password``; by
    default the URL's user info), ``bearer.auth.token`` or
    ``bearer.auth.custom.provider.function`` (a callable returning the token),
    ``bearer.auth.logical.cluster``, ``bearer.auth.identity.pool.id``, ``ssl.ca.location``,
    ``ssl.certificate.location``, ``ssl.key.location``, ``ssl.key.password``, ``timeout``
    (seconds per call, retries included; default 10: a deserializer inside ``poll()`` waits
    at most this long for a registry that does not answer), ``max.retries`` (2),
    ``retries.wait.ms`` (1000), ``retries.max.wait.ms`` (20000), ``cache.capacity`` (1000),
    ``cache.latest.ttl.sec`` (latest versions are cached this long; default: until
    :meth:`clear_latest_caches`).

    Raises:
        ConfigError: an unknown key or an invalid value (a credential is never shown).
    """

    def __init__(self, config: Mapping[str, object]) -> None:
        cfg = parse_config(config)
        self._core = RegistryCore(cfg, time.monotonic)
        self._mock = None if cfg.mock_scope is None else mock_scope(cfg.mock_scope)
        self._http: Any = None
        if self._mock is None:
            import urllib3  # the schema-registry extra

            pool_args: dict[str, Any] = {"maxsize": 8, "retries": False}
            if cfg.ca_location is not None:
                pool_args["ca_certs"] = cfg.ca_location
            if cfg.certificate_location is not None:
                pool_args["cert_file"] = cfg.certificate_location
                pool_args["key_file"] = cfg.key_location
                if cfg.key_password is not None:
                    pool_args["key_password"] = cfg.key_password
            self._http = urllib3.PoolManager(**pool_args)
            self._urllib3 = urllib3
        self._closed = False

    @classmethod
    def new_client(cls, config: Mapping[str, object]) -> SchemaRegistryClient:
        """``cls(config)``: confluent-kafka's constructor for ``mock://`` URLs, kept so code
        moving over runs unchanged (kaflux's constructor takes ``mock://`` URLs itself)."""
        return cls(config)

    def __repr__(self) -> str:
        return f"SchemaRegistryClient(url={','.join(self._core.config.urls)!r})"

    def __enter__(self) -> SchemaRegistryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the HTTP connections."""
        self._closed = True
        if self._http is not None:
            self._http.clear()

    @property
    def core(self) -> RegistryCore:
        """The calls and caches this client runs (shared with kaflux's serializers)."""
        return self._core

    # --- calls --------------------------------------------------------------------------------------------

    def register_schema(self, subject: str, schema: Schema, normalize: bool = False) -> int:
        """Register ``schema`` under ``subject`` (a no-op answer if it already is); its id."""
        return self.register_schema_full_response(subject, schema, normalize).schema_id

    def register_schema_full_response(
        self, subject: str, schema: Schema, normalize: bool = False
    ) -> RegisteredSchema:
        """Register ``schema`` under ``subject``; its id and GUID (version None: the registry's
        answer to a registration carries only those)."""
        return self.run(self._core.register_schema_full_response(subject, schema, normalize))

    def lookup_schema(self, subject: str, schema: Schema, normalize: bool = False) -> RegisteredSchema:
        """The registration of ``schema`` under ``subject``; raises SchemaRegistryError
        (40401/40403) when it is not registered there."""
        return self.run(self._core.lookup_schema(subject, schema, normalize))

    def get_schema(self, schema_id: int, fmt: str | None = None) -> Schema:
        """The schema with this id (cached: ids never change). ``fmt="serialized"`` asks for a
        Protobuf schema as a base64 ``FileDescriptorProto`` (not cached)."""
        return self.run(self._core.get_schema(schema_id, fmt))

    def get_schema_by_guid(self, guid: str | uuid.UUID, fmt: str | None = None) -> Schema:
        """The schema with this GUID (``GET /schemas/guids/{guid}``; cached: a GUID names one
        schema forever). Header-framed records name their writer's schema so.

        Raises:
            InvalidArgumentError: ``guid`` is not a UUID.
            SchemaRegistryError: the registry has no schema with this GUID (HTTP 404, code
                40403), or could not be reached before the deadline.
        """
        return self.run(self._core.get_schema_by_guid(guid, fmt))

    def get_latest_version(self, subject: str) -> RegisteredSchema:
        """The latest version under ``subject`` (cached for ``cache.latest.ttl.sec``)."""
        return self.run(self._core.get_latest_version(subject))

    def get_version(self, subject: str, version: int, fmt: str | None = None) -> RegisteredSchema:
        """Version ``version`` of ``subject`` (``fmt`` as in :meth:`get_schema`)."""
        return self.run(self._core.get_version(subject, version, fmt))

    def get_versions(self, subject: str) -> list[int]:
        """The version numbers under ``subject``."""
        return self.run(self._core.get_versions(subject))

    def get_subjects(self) -> list[str]:
        """Every subject."""
        return self.run(self._core.get_subjects())

    def delete_subject(self, subject: str, permanent: bool = False) -> list[int]:
        """Delete ``subject`` (soft, or hard with ``permanent``); the versions it had."""
        return self.run(self._core.delete_subject(subject, permanent))

    def get_compatibility(self, subject: str | None = None) -> str:
        """The compatibility level of ``subject`` (or the global one)."""
        return self.run(self._core.get_compatibility(subject))

    def set_compatibility(self, subject: str | None = None, level: str = "BACKWARD") -> str:
        """Set the compatibility level of ``subject`` (or the global one); the level set."""
        return self.run(self._core.set_compatibility(subject, level))

    def test_compatibility(self, subject: str, schema: Schema, version: int | str = "latest") -> bool:
        """Whether ``schema`` is compatible with ``version`` of ``subject`` under its level."""
        return self.run(self._core.test_compatibility(subject, schema, version))

    def clear_latest_caches(self) -> None:
        """Forget the cached latest versions (the next call asks the registry)."""
        self._core.clear_latest_caches()

    # --- the driver ---------------------------------------------------------------------------------------

    def run(self, steps: Steps[T]) -> T:
        """Run ``steps`` (see :mod:`kaflux.schema_registry._core`), blocking on each request."""
        try:
            call = next(steps)
            while True:
                try:
                    answer = self._exchange(call)
                except SchemaRegistryError as exc:
                    call = steps.throw(exc)
                else:
                    call = steps.send(answer)
        except StopIteration as stop:
            result: T = stop.value
            return result

    def _exchange(self, call: HttpCall) -> Any:
        if self._closed:
            raise SchemaRegistryError(-1, -1, "the client is closed")
        steps = exchange(self._core.config, call, time.monotonic)
        try:
            step = next(steps)
            while True:
                if isinstance(step, Sleep):
                    time.sleep(step.seconds)
                    step = steps.send(None)
                else:
                    step = steps.send(self._send(step))
        except StopIteration as stop:
            return stop.value

    def _send(self, send: Send) -> Answer | NoAnswer:
        if self._mock is not None:
            return self._mock.answer(send)
        urllib3 = self._urllib3
        outcome: Answer | NoAnswer
        try:
            response = self._http.request(
                send.call.method,
                send.base + send.call.target,
                body=send.data,
                headers=dict(send.headers),
                timeout=urllib3.Timeout(total=send.timeout_s),
                retries=False,
                redirect=False,
            )
            outcome = Answer(response.status, response.data)
        except urllib3.exceptions.HTTPError as exc:
            outcome = NoAnswer(type(exc).__name__)
        log_answer(send, outcome)
        return outcome
