"""A Confluent Schema Registry client: REST over urllib3, with caches and retries. [io: HTTP, app thread]

:class:`SchemaRegistryClient` takes confluent-kafka's configuration keys. Every call has one
deadline (``timeout`` seconds): transient failures (connection errors, HTTP 408, 429 and 5xx)
move on to the next URL of ``url`` and, when every URL failed, retry after a jittered backoff
that never passes the deadline. Other 4xx answers raise :class:`SchemaRegistryError` at once.

Ids, GUIDs, schemas and registrations are cached (a registered schema never changes), so a
serializer in its steady state makes no request. No credential (basic auth, bearer token, URL user info,
key password) appears in an error, a log line or ``repr``.
"""

from __future__ import annotations

import base64
import json
import logging
import random
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit, urlunsplit

from kaflux.errors import ConfigError, InvalidArgumentError, KafkaError
from kaflux.schema_registry.wire import FramingError, canonical_guid

log = logging.getLogger(__name__)

#: ``timeout``: seconds per call, retries included (a deserializer waits this long at most
#: inside ``poll()`` when the registry does not answer)
DEFAULT_TIMEOUT_S = 10.0
_TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})
_JSON = "application/vnd.schemaregistry.v1+json"
_K = TypeVar("_K")
_V = TypeVar("_V")


class SchemaRegistryError(KafkaError):
    """The Schema Registry refused a request, or could not be reached before the deadline.

    ``http_status`` is the HTTP status (-1 when no answer came), ``error_code`` the registry's
    own code (e.g. 40401 subject not found, 40403 schema not found, 409 incompatible; -1 when
    none was given).
    """

    def __init__(self, http_status: int, error_code: int, message: str) -> None:
        super().__init__(f"Schema Registry error (HTTP {http_status}, code {error_code}): {message}")
        self.http_status = http_status
        self.error_code = error_code
        self.detail = message

    @property
    def retriable(self) -> bool:  # type: ignore[override]
        return self.http_status == -1 or self.http_status in _TRANSIENT_STATUS

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.http_status, self.error_code, self.detail), self.__dict__)


@dataclass(frozen=True, slots=True)
class SchemaReference:
    """A schema's reference to another registered schema: the name it is imported by (a
    Protobuf file name, an Avro full type name), and the subject and version it lives at."""

    name: str
    subject: str
    version: int


@dataclass(frozen=True, slots=True)
class Schema:
    """A schema's text, type (``AVRO``, ``PROTOBUF`` or ``JSON``) and references."""

    schema_str: str
    schema_type: str = "AVRO"
    references: tuple[SchemaReference, ...] = ()

    def to_request(self) -> dict[str, Any]:
        body: dict[str, Any] = {"schema": self.schema_str}
        if self.schema_type != "AVRO":
            body["schemaType"] = self.schema_type
        if self.references:
            body["references"] = [
                {"name": r.name, "subject": r.subject, "version": r.version} for r in self.references
            ]
        return body

    @classmethod
    def from_response(cls, body: Mapping[str, Any]) -> Schema:
        refs = tuple(
            SchemaReference(str(r["name"]), str(r["subject"]), int(r["version"]))
            for r in body.get("references") or ()
        )
        return cls(str(body["schema"]), str(body.get("schemaType") or "AVRO"), refs)


@dataclass(frozen=True, slots=True)
class RegisteredSchema:
    """A schema as registered under a subject: its id and version (None when not known), and
    its GUID (None from a registry too old to assign GUIDs; header framing needs it)."""

    schema_id: int
    subject: str
    version: int | None
    schema: Schema
    guid: str | None = None


def _guid(answer: Mapping[str, Any]) -> str | None:
    raw = answer.get("guid")
    if raw is None:
        return None
    try:
        return canonical_guid(str(raw))
    except FramingError:
        raise SchemaRegistryError(
            200, -1, f"the registry answered with a malformed schema GUID {str(raw)[:60]!r}"
        ) from None


@dataclass(frozen=True, slots=True)
class _Config:
    urls: tuple[str, ...]
    basic_auth: str | None = field(repr=False)
    bearer: Callable[[], str] | None = field(repr=False)
    bearer_headers: tuple[tuple[str, str], ...]
    ca_location: str | None
    certificate_location: str | None
    key_location: str | None
    key_password: str | None = field(repr=False)
    timeout_s: float
    max_retries: int
    retries_wait_ms: int
    retries_max_wait_ms: int
    cache_capacity: int
    latest_ttl_s: float | None


_KEYS = (
    "url",
    "basic.auth.user.info",
    "basic.auth.credentials.source",
    "bearer.auth.credentials.source",
    "bearer.auth.token",
    "bearer.auth.custom.provider.function",
    "bearer.auth.logical.cluster",
    "bearer.auth.identity.pool.id",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.key.password",
    "timeout",
    "max.retries",
    "retries.wait.ms",
    "retries.max.wait.ms",
    "cache.capacity",
    "cache.latest.ttl.sec",
)


def _number(config: Mapping[str, object], key: str, default: float, low: float) -> float:
    value = config.get(key, default)
    if isinstance(value, bool):
        raise ConfigError(key, f"expected a number, got {value!r}")
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ConfigError(key, f"expected a number, got {value!r}") from None
    if number < low:
        raise ConfigError(key, f"must be at least {low:g}, got {number:g}")
    return number


def _optional_str(config: Mapping[str, object], key: str) -> str | None:
    value = config.get(key)
    if value is None or isinstance(value, str):
        return value
    raise ConfigError(key, f"expected a string, got {type(value).__name__}")


def _parse_config(config: Mapping[str, object]) -> _Config:
    for key in config:
        if key not in _KEYS:
            raise ConfigError(key, f"unknown Schema Registry client key; known keys: {', '.join(_KEYS)}")
    raw_url = config.get("url")
    if not isinstance(raw_url, str) or not raw_url.strip():
        raise ConfigError("url", "give the registry's URL(s), comma-separated, e.g. http://registry:8081")
    urls: list[str] = []
    url_user_info: str | None = None
    for part in raw_url.split(","):
        split = urlsplit(part.strip())
        if split.scheme not in ("http", "https") or not split.hostname:
            raise ConfigError("url", f"not an http(s) URL: {_redact_url(part.strip())}")
        if split.username is not None:
            url_user_info = f"{split.username}:{split.password or ''}"
        netloc = split.hostname if split.port is None else f"{split.hostname}:{split.port}"
        urls.append(urlunsplit((split.scheme, netloc, split.path.rstrip("/"), "", "")))
    source = str(config.get("basic.auth.credentials.source", "URL")).upper()
    if source not in ("URL", "USER_INFO", "SASL_INHERIT"):
        raise ConfigError("basic.auth.credentials.source", f"must be URL or USER_INFO, got {source}")
    user_info = _optional_str(config, "basic.auth.user.info")
    if user_info is not None and ":" not in user_info:
        raise ConfigError("basic.auth.user.info", "expected 'username:password' (the value is not shown)")
    basic = user_info if user_info is not None else url_user_info
    bearer: Callable[[], str] | None = None
    token = _optional_str(config, "bearer.auth.token")
    provider = config.get("bearer.auth.custom.provider.function")
    if token is not None and provider is not None:
        raise ConfigError("bearer.auth.token", "give bearer.auth.token or a token callback, not both")
    if token is not None:
        bearer = lambda: token  # noqa: E731
    elif provider is not None:
        if not callable(provider):
            raise ConfigError("bearer.auth.custom.provider.function", "expected a callable returning a token")
        bearer = provider
    if bearer is not None and basic is not None:
        raise ConfigError("basic.auth.user.info", "give basic auth or a bearer token, not both")
    bearer_headers = tuple(
        (header, value)
        for header, key in (
            ("target-sr-cluster", "bearer.auth.logical.cluster"),
            ("Confluent-Identity-Pool-Id", "bearer.auth.identity.pool.id"),
        )
        if (value := _optional_str(config, key)) is not None
    )
    cert, key_file = (
        _optional_str(config, "ssl.certificate.location"),
        _optional_str(config, "ssl.key.location"),
    )
    if key_file is not None and cert is None:
        raise ConfigError("ssl.key.location", "needs ssl.certificate.location too")
    ttl = config.get("cache.latest.ttl.sec")
    return _Config(
        urls=tuple(urls),
        basic_auth=basic,
        bearer=bearer,
        bearer_headers=bearer_headers,
        ca_location=_optional_str(config, "ssl.ca.location"),
        certificate_location=cert,
        key_location=key_file,
        key_password=_optional_str(config, "ssl.key.password"),
        timeout_s=_number(config, "timeout", DEFAULT_TIMEOUT_S, 0.001),
        max_retries=int(_number(config, "max.retries", 2, 0)),
        retries_wait_ms=int(_number(config, "retries.wait.ms", 1000, 0)),
        retries_max_wait_ms=int(_number(config, "retries.max.wait.ms", 20000, 0)),
        cache_capacity=int(_number(config, "cache.capacity", 1000, 1)),
        latest_ttl_s=None if ttl is None else _number(config, "cache.latest.ttl.sec", 0, 0),
    )


def _redact_url(url: str) -> str:
    """``url`` without its user info."""
    split = urlsplit(url)
    if split.username is None:
        return url
    host = split.hostname or ""
    netloc = host if split.port is None else f"{host}:{split.port}"
    return urlunsplit((split.scheme, netloc, split.path, split.query, split.fragment))


class _Lru(OrderedDict[_K, _V]):
    def __init__(self, capacity: int) -> None:
        super().__init__()
        self.capacity = capacity

    def put(self, key: _K, value: _V) -> None:
        self[key] = value
        self.move_to_end(key)
        if len(self) > self.capacity:
            self.popitem(last=False)


def _q(segment: str) -> str:
    return quote(segment, safe="")


class SchemaRegistryClient:
    """A Schema Registry client, safe to share between threads.

    Example::

        registry = SchemaRegistryClient({"url": "https://registry:8081",
                                         "basic.auth.user.info": "user:password"})
        serializer = AvroSerializer(registry, schema_str)

    Keys (confluent-kafka's names): ``url`` (several comma-separated, tried in turn),
    ``basic.auth.user.info`` (``user:password``; by default the URL's user info),
    ``bearer.auth.token`` or ``bearer.auth.custom.provider.function`` (a callable returning the
    token), ``bearer.auth.logical.cluster``, ``bearer.auth.identity.pool.id``,
    ``ssl.ca.location``, ``ssl.certificate.location``, ``ssl.key.location``,
    ``ssl.key.password``, ``timeout`` (seconds per call, retries included; default 10),
    ``max.retries`` (2), ``retries.wait.ms`` (1000), ``retries.max.wait.ms`` (20000),
    ``cache.capacity`` (1000), ``cache.latest.ttl.sec`` (latest versions are cached this long;
    default: until :meth:`clear_latest_caches`).

    Raises:
        ConfigError: an unknown key or an invalid value (a credential is never shown).
    """

    def __init__(self, config: Mapping[str, object]) -> None:
        import urllib3  # the schema-registry extra

        self._config = cfg = _parse_config(config)
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
        self._lock = threading.Lock()
        self._by_id: _Lru[int, Schema] = _Lru(cfg.cache_capacity)
        self._by_guid: _Lru[str, Schema] = _Lru(cfg.cache_capacity)
        self._registered: _Lru[tuple[str, Schema], RegisteredSchema] = _Lru(cfg.cache_capacity)
        self._latest: dict[str, tuple[float, RegisteredSchema]] = {}
        self._versions: _Lru[tuple[str, int], RegisteredSchema] = _Lru(cfg.cache_capacity)
        self._closed = False

    def __repr__(self) -> str:
        return f"SchemaRegistryClient(url={','.join(self._config.urls)!r})"

    def __enter__(self) -> SchemaRegistryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the HTTP connections."""
        self._closed = True
        self._http.clear()

    # --- calls --------------------------------------------------------------------------------------------

    def register_schema(self, subject: str, schema: Schema, normalize: bool = False) -> int:
        """Register ``schema`` under ``subject`` (a no-op answer if it already is); its id."""
        return self.register_schema_full_response(subject, schema, normalize).schema_id

    def register_schema_full_response(
        self, subject: str, schema: Schema, normalize: bool = False
    ) -> RegisteredSchema:
        """Register ``schema`` under ``subject``; its id and GUID (version None: the registry's
        answer to a registration carries only those)."""
        with self._lock:
            cached = self._registered.get((subject, schema))
        if cached is not None:
            return cached
        answer = self._request(
            "POST", f"/subjects/{_q(subject)}/versions", schema.to_request(), {"normalize": normalize}
        )
        registered = RegisteredSchema(
            int(answer["id"]), subject, answer.get("version"), schema, _guid(answer)
        )
        self._remember(subject, schema, registered)
        return registered

    def lookup_schema(self, subject: str, schema: Schema, normalize: bool = False) -> RegisteredSchema:
        """The registration of ``schema`` under ``subject``; raises SchemaRegistryError
        (40401/40403) when it is not registered there."""
        with self._lock:
            cached = self._registered.get((subject, schema))
        if cached is not None and cached.version is not None:
            return cached
        answer = self._request(
            "POST", f"/subjects/{_q(subject)}", schema.to_request(), {"normalize": normalize}
        )
        registered = RegisteredSchema(
            int(answer["id"]), subject, int(answer["version"]), schema, _guid(answer)
        )
        self._remember(subject, schema, registered)
        return registered

    def _remember(self, subject: str, schema: Schema, registered: RegisteredSchema) -> None:
        with self._lock:
            self._registered.put((subject, schema), registered)
            self._by_id.setdefault(registered.schema_id, schema)
            if registered.guid is not None:
                self._by_guid.setdefault(registered.guid, schema)

    def get_schema(self, schema_id: int, fmt: str | None = None) -> Schema:
        """The schema with this id (cached: ids never change). ``fmt="serialized"`` asks for a
        Protobuf schema as a base64 ``FileDescriptorProto`` (not cached)."""
        if fmt is not None:
            return Schema.from_response(
                self._request("GET", f"/schemas/ids/{int(schema_id)}", None, {"format": fmt})
            )
        with self._lock:
            cached = self._by_id.get(schema_id)
        if cached is not None:
            return cached
        answer = self._request("GET", f"/schemas/ids/{int(schema_id)}")
        schema = Schema.from_response(answer)
        guid = _guid(answer)
        with self._lock:
            self._by_id.put(schema_id, schema)
            if guid is not None:
                self._by_guid.put(guid, schema)
        return schema

    def get_schema_by_guid(self, guid: str | uuid.UUID, fmt: str | None = None) -> Schema:
        """The schema with this GUID (``GET /schemas/guids/{guid}``; cached: a GUID names one
        schema forever). Header-framed records name their writer's schema so.

        Raises:
            InvalidArgumentError: ``guid`` is not a UUID.
            SchemaRegistryError: the registry has no schema with this GUID (HTTP 404, code
                40403), or could not be reached before the deadline.
        """
        try:
            key = canonical_guid(guid)
        except FramingError as exc:
            raise InvalidArgumentError(str(exc)) from None
        if fmt is not None:
            return Schema.from_response(self._request("GET", f"/schemas/guids/{key}", None, {"format": fmt}))
        with self._lock:
            cached = self._by_guid.get(key)
        if cached is not None:
            return cached
        try:
            answer = self._request("GET", f"/schemas/guids/{key}")
        except SchemaRegistryError as exc:
            if exc.http_status != 404:
                raise
            raise SchemaRegistryError(
                exc.http_status,
                exc.error_code,
                f"{exc.detail}: no schema has GUID {key} in this registry; was the record written "
                "against another Schema Registry (check the url)?",
            ) from None
        schema = Schema.from_response(answer)
        with self._lock:
            self._by_guid.put(key, schema)
        return schema

    def get_latest_version(self, subject: str) -> RegisteredSchema:
        """The latest version under ``subject`` (cached for ``cache.latest.ttl.sec``)."""
        now = time.monotonic()
        ttl = self._config.latest_ttl_s
        with self._lock:
            cached = self._latest.get(subject)
        if cached is not None and (ttl is None or now - cached[0] < ttl):
            return cached[1]
        registered = self._registered_from(self._request("GET", f"/subjects/{_q(subject)}/versions/latest"))
        with self._lock:
            self._latest[subject] = (now, registered)
        return registered

    def get_version(self, subject: str, version: int, fmt: str | None = None) -> RegisteredSchema:
        """Version ``version`` of ``subject`` (``fmt`` as in :meth:`get_schema`)."""
        if fmt is not None:
            return self._registered_from(
                self._request(
                    "GET", f"/subjects/{_q(subject)}/versions/{int(version)}", None, {"format": fmt}
                )
            )
        with self._lock:
            cached = self._versions.get((subject, version))
        if cached is not None:
            return cached
        registered = self._registered_from(
            self._request("GET", f"/subjects/{_q(subject)}/versions/{int(version)}")
        )
        return registered

    def get_versions(self, subject: str) -> list[int]:
        """The version numbers under ``subject``."""
        return [int(v) for v in self._request("GET", f"/subjects/{_q(subject)}/versions")]

    def get_subjects(self) -> list[str]:
        """Every subject."""
        return [str(s) for s in self._request("GET", "/subjects")]

    def delete_subject(self, subject: str, permanent: bool = False) -> list[int]:
        """Delete ``subject`` (soft, or hard with ``permanent``); the versions it had."""
        versions = self._request("DELETE", f"/subjects/{_q(subject)}", None, {"permanent": permanent})
        with self._lock:
            self._latest.pop(subject, None)
            for key in [k for k in self._registered if k[0] == subject]:
                del self._registered[key]
            for vkey in [k for k in self._versions if k[0] == subject]:
                del self._versions[vkey]
        return [int(v) for v in versions]

    def get_compatibility(self, subject: str | None = None) -> str:
        """The compatibility level of ``subject`` (or the global one)."""
        path = "/config" if subject is None else f"/config/{_q(subject)}"
        return str(self._request("GET", path)["compatibilityLevel"])

    def set_compatibility(self, subject: str | None = None, level: str = "BACKWARD") -> str:
        """Set the compatibility level of ``subject`` (or the global one); the level set."""
        path = "/config" if subject is None else f"/config/{_q(subject)}"
        return str(self._request("PUT", path, {"compatibility": level.upper()})["compatibility"])

    def test_compatibility(self, subject: str, schema: Schema, version: int | str = "latest") -> bool:
        """Whether ``schema`` is compatible with ``version`` of ``subject`` under its level."""
        answer = self._request(
            "POST", f"/compatibility/subjects/{_q(subject)}/versions/{version}", schema.to_request()
        )
        return bool(answer["is_compatible"])

    def clear_latest_caches(self) -> None:
        """Forget the cached latest versions (the next call asks the registry)."""
        with self._lock:
            self._latest.clear()

    def _registered_from(self, answer: Mapping[str, Any]) -> RegisteredSchema:
        schema = Schema.from_response(answer)
        registered = RegisteredSchema(
            int(answer["id"]), str(answer["subject"]), int(answer["version"]), schema, _guid(answer)
        )
        with self._lock:
            self._by_id.put(registered.schema_id, schema)
            if registered.guid is not None:
                self._by_guid.put(registered.guid, schema)
            self._versions.put((registered.subject, int(answer["version"])), registered)
        return registered

    # --- HTTP ---------------------------------------------------------------------------------------------

    def _headers(self, has_body: bool) -> dict[str, str]:
        cfg = self._config
        headers = {"Accept": f"{_JSON}, application/json"}
        if has_body:
            headers["Content-Type"] = _JSON
        if cfg.basic_auth is not None:
            headers["Authorization"] = "Basic " + base64.b64encode(cfg.basic_auth.encode()).decode()
        elif cfg.bearer is not None:
            headers["Authorization"] = f"Bearer {cfg.bearer()}"
            headers.update(cfg.bearer_headers)
        return headers

    def _request(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        query: Mapping[str, object] | None = None,
    ) -> Any:
        if self._closed:
            raise SchemaRegistryError(-1, -1, "the client is closed")
        cfg = self._config
        urllib3 = self._urllib3
        deadline = time.monotonic() + cfg.timeout_s
        data = None if body is None else json.dumps(body).encode()
        headers = self._headers(data is not None)
        suffix = ""
        if query:
            suffix = "?" + "&".join(f"{k}={str(v).lower()}" for k, v in query.items())
        last: SchemaRegistryError | None = None
        for attempt in range(cfg.max_retries + 1):
            for base in cfg.urls:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                try:
                    response = self._http.request(
                        method,
                        base + path + suffix,
                        body=data,
                        headers=headers,
                        timeout=urllib3.Timeout(total=remaining),
                        retries=False,
                        redirect=False,
                    )
                except urllib3.exceptions.HTTPError as exc:
                    # the exception's text may name the URL; show the host only
                    last = SchemaRegistryError(
                        -1,
                        -1,
                        f"the Schema Registry at {base} did not answer {method} {path} "
                        f"({type(exc).__name__}; timeout={cfg.timeout_s:g}s)",
                    )
                    log.warning(
                        "Schema Registry %s %s at %s failed: %s", method, path, base, type(exc).__name__
                    )
                    continue
                status = response.status
                if 200 <= status < 300:
                    return json.loads(response.data) if response.data else None
                last = self._error(status, response.data, method, path)
                if status not in _TRANSIENT_STATUS:
                    raise last
                log.warning("Schema Registry %s %s at %s: HTTP %d, will retry", method, path, base, status)
            remaining = deadline - time.monotonic()
            if attempt == cfg.max_retries or remaining <= 0:
                break
            cap = min(cfg.retries_max_wait_ms, cfg.retries_wait_ms * 2**attempt) / 1000
            time.sleep(min(random.uniform(0, cap), max(0.0, remaining)))
        if last is None:
            last = SchemaRegistryError(
                -1, -1, f"{method} {path}: no answer within timeout={cfg.timeout_s:g}s"
            )
        raise last

    @staticmethod
    def _error(status: int, data: bytes, method: str, path: str) -> SchemaRegistryError:
        try:
            answer = json.loads(data)
            code, message = int(answer.get("error_code", -1)), str(answer.get("message", ""))
        except (ValueError, TypeError, AttributeError):
            code, message = -1, data[:200].decode("utf-8", "replace")
        if status == 401:
            message = (
                f"{message or 'Unauthorized'}: the registry refused the credentials; "
                "check basic.auth.user.info or the bearer token"
            )
        elif status == 403:
            message = f"{message or 'Forbidden'}: the credentials are not allowed {method} {path}"
        return SchemaRegistryError(status, code, f"{method} {path}: {message}")
