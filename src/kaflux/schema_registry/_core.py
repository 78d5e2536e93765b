"""The Schema Registry client's sans-I/O core, shared by the sync and asyncio clients. [app: no I/O]

Theory of operation. Every client call (register, get a schema by id, ...) is written once here,
as a generator of :class:`HttpCall` descriptions: it yields the REST request it needs, is sent
back the decoded JSON answer (or has the :class:`SchemaRegistryError` thrown into it), and
returns the call's result. Caching lives here too, so a call whose answer is cached yields
nothing. The serializers are written the same way (``yield from core.get_schema(...)``).

A *driver* runs such a generator: :class:`~kaflux.schema_registry.SchemaRegistryClient` with
blocking HTTP (urllib3), :class:`~kaflux.schema_registry.AsyncSchemaRegistryClient` awaiting
HTTP on the event loop (httpx), both with the in-memory registry for ``mock://`` URLs. How one
call is sent, retried and given up on is written once as well, :func:`exchange`: it yields
:class:`Send` (one HTTP attempt, with the time left) and :class:`Sleep` (a backoff), and is
sent back :class:`Answer` or :class:`NoAnswer`. The driver owns the clock and the sockets.
"""

from __future__ import annotations

import base64
import json
import random
import threading
from collections import OrderedDict
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit, urlunsplit

from kaflux.errors import ConfigError, InvalidArgumentError, KafkaError
from kaflux.schema_registry.wire import FramingError, canonical_guid

#: ``timeout``: seconds per call, retries included (a deserializer waits this long at most
#: inside ``poll()`` when the registry does not answer)
DEFAULT_TIMEOUT_S = 10.0
TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})
JSON_TYPE = "application/vnd.schemaregistry.v1+json"
MOCK_SCHEME = "mock"
T = TypeVar("T")
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
        return self.http_status == -1 or self.http_status in TRANSIENT_STATUS

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


# --- configuration ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Config:
    """A client's checked configuration. ``mock_scope`` is set for a ``mock://`` URL."""

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
    mock_scope: str | None = None


KEYS = (
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


def redact_url(url: str) -> str:
    """``url`` without its user info."""
    split = urlsplit(url)
    if split.username is None:
        return url
    host = split.hostname or ""
    netloc = host if split.port is None else f"{host}:{split.port}"
    return urlunsplit((split.scheme, netloc, split.path, split.query, split.fragment))


def parse_config(config: Mapping[str, object]) -> Config:
    """``config`` (confluent-kafka's keys) checked; raises ConfigError naming the key."""
    for key in config:
        if key not in KEYS:
            raise ConfigError(key, f"unknown Schema Registry client key; known keys: {', '.join(KEYS)}")
    raw_url = config.get("url")
    if not isinstance(raw_url, str) or not raw_url.strip():
        raise ConfigError("url", "give the registry's URL(s), comma-separated, e.g. http://registry:8081")
    urls: list[str] = []
    url_user_info: str | None = None
    mock_scope: str | None = None
    parts = [part.strip() for part in raw_url.split(",")]
    for part in parts:
        split = urlsplit(part)
        if split.scheme == MOCK_SCHEME:
            if len(parts) > 1:
                raise ConfigError("url", "a mock:// URL stands alone (one in-memory registry per scope)")
            mock_scope = part[len("mock://") :]
            urls.append(part)
            continue
        if split.scheme not in ("http", "https") or not split.hostname:
            raise ConfigError("url", f"not an http(s) or mock:// URL: {redact_url(part)}")
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
    return Config(
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
        mock_scope=mock_scope,
    )


# --- one REST call: sent, retried, given up on ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HttpCall:
    """A REST request a client call needs: ``target`` is the path and query."""

    method: str
    target: str
    body: Mapping[str, Any] | None = None

    @property
    def path(self) -> str:
        return self.target.partition("?")[0]


def _call(method: str, path: str, body: Mapping[str, Any] | None = None, **query: object) -> HttpCall:
    suffix = "&".join(f"{k}={str(v).lower()}" for k, v in query.items() if v is not None)
    return HttpCall(method, path + ("?" + suffix if suffix else ""), body)


@dataclass(frozen=True, slots=True)
class Send:
    """Send ``call`` to ``base`` (a registry URL) and wait at most ``timeout_s`` for the answer."""

    base: str
    call: HttpCall
    data: bytes | None
    headers: Mapping[str, str]
    timeout_s: float


@dataclass(frozen=True, slots=True)
class Sleep:
    """Back off for ``seconds``."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Answer:
    """The registry's answer to a :class:`Send`."""

    status: int
    data: bytes


@dataclass(frozen=True, slots=True)
class NoAnswer:
    """A :class:`Send` got no answer (``reason``: the exception's name, e.g. ReadTimeoutError)."""

    reason: str


Exchange = Generator[Send | Sleep, Answer | NoAnswer | None, Any]


def headers(cfg: Config, has_body: bool) -> dict[str, str]:
    """The request headers (the bearer token is asked of its callback per call)."""
    out = {"Accept": f"{JSON_TYPE}, application/json"}
    if has_body:
        out["Content-Type"] = JSON_TYPE
    if cfg.basic_auth is not None:
        out["Authorization"] = "Basic " + base64.b64encode(cfg.basic_auth.encode()).decode()
    elif cfg.bearer is not None:
        out["Authorization"] = f"Bearer {cfg.bearer()}"
        out.update(cfg.bearer_headers)
    return out


def exchange(cfg: Config, call: HttpCall, now: Callable[[], float]) -> Exchange:
    """Send ``call`` until it is answered or the call's deadline (``timeout``) passes: each
    URL in turn; on a transient failure (no answer, HTTP 408, 429, 5xx) the next URL, and
    after every URL failed, a jittered backoff that never passes the deadline. Returns the
    decoded JSON answer; raises SchemaRegistryError."""
    deadline = now() + cfg.timeout_s
    data = None if call.body is None else json.dumps(call.body).encode()
    head = headers(cfg, data is not None)
    last: SchemaRegistryError | None = None
    for attempt in range(cfg.max_retries + 1):
        for base in cfg.urls:
            remaining = deadline - now()
            if remaining <= 0:
                break
            outcome = yield Send(base, call, data, head, remaining)
            if isinstance(outcome, NoAnswer):
                # the exception's text may name the URL with its user info: the host only
                last = SchemaRegistryError(
                    -1,
                    -1,
                    f"the Schema Registry at {base} did not answer {call.method} {call.path} "
                    f"({outcome.reason}; timeout={cfg.timeout_s:g}s)",
                )
                continue
            assert outcome is not None
            if 200 <= outcome.status < 300:
                return json.loads(outcome.data) if outcome.data else None
            last = error_of(outcome.status, outcome.data, call)
            if outcome.status not in TRANSIENT_STATUS:
                raise last
        remaining = deadline - now()
        if attempt == cfg.max_retries or remaining <= 0:
            break
        cap = min(cfg.retries_max_wait_ms, cfg.retries_wait_ms * 2**attempt) / 1000
        yield Sleep(min(random.uniform(0, cap), max(0.0, remaining)))
    if last is None:
        last = SchemaRegistryError(
            -1, -1, f"{call.method} {call.path}: no answer within timeout={cfg.timeout_s:g}s"
        )
    raise last


def error_of(status: int, data: bytes, call: HttpCall) -> SchemaRegistryError:
    """The error an HTTP error answer means."""
    try:
        answer = json.loads(data)
        code, message = int(answer.get("error_code", -1)), str(answer.get("message", ""))
    except (ValueError, TypeError, AttributeError):
        code, message = -1, data[:200].decode("utf-8", "replace")
    method, path = call.method, call.path
    if status == 401:
        message = (
            f"{message or 'Unauthorized'}: the registry refused the credentials; "
            "check basic.auth.user.info or the bearer token"
        )
    elif status == 403:
        message = f"{message or 'Forbidden'}: the credentials are not allowed {method} {path}"
    return SchemaRegistryError(status, code, f"{method} {path}: {message}")


# --- the client calls, with their caches ------------------------------------------------------------------

#: a client call: yields the REST requests it needs, is sent their decoded answers
Steps = Generator[HttpCall, Any, T]


class Lru(OrderedDict[_K, _V]):
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


class RegistryCore:
    """What every Schema Registry client does, as steps (see the module's docstring); the
    caches, safe to share between threads. ``clock`` (seconds, monotonic) ages the latest
    versions (``cache.latest.ttl.sec``)."""

    def __init__(self, config: Config, clock: Callable[[], float]) -> None:
        self.config = cfg = config
        self._clock = clock
        self._lock = threading.Lock()
        self._by_id: Lru[int, Schema] = Lru(cfg.cache_capacity)
        self._by_guid: Lru[str, Schema] = Lru(cfg.cache_capacity)
        self._registered: Lru[tuple[str, Schema], RegisteredSchema] = Lru(cfg.cache_capacity)
        self._latest: dict[str, tuple[float, RegisteredSchema]] = {}
        self._versions: Lru[tuple[str, int], RegisteredSchema] = Lru(cfg.cache_capacity)

    def cached_schema(self, schema_id: int) -> Schema | None:
        """The schema with this id if it is cached (no request)."""
        with self._lock:
            return self._by_id.get(schema_id)

    def register_schema_full_response(
        self, subject: str, schema: Schema, normalize: bool = False
    ) -> Steps[RegisteredSchema]:
        with self._lock:
            cached = self._registered.get((subject, schema))
        if cached is not None:
            return cached
        answer = yield _call(
            "POST", f"/subjects/{_q(subject)}/versions", schema.to_request(), normalize=normalize
        )
        registered = RegisteredSchema(
            int(answer["id"]), subject, answer.get("version"), schema, _guid(answer)
        )
        self._remember(subject, schema, registered)
        return registered

    def lookup_schema(self, subject: str, schema: Schema, normalize: bool = False) -> Steps[RegisteredSchema]:
        with self._lock:
            cached = self._registered.get((subject, schema))
        if cached is not None and cached.version is not None:
            return cached
        answer = yield _call("POST", f"/subjects/{_q(subject)}", schema.to_request(), normalize=normalize)
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

    def get_schema(self, schema_id: int, fmt: str | None = None) -> Steps[Schema]:
        path = f"/schemas/ids/{int(schema_id)}"
        if fmt is not None:
            return Schema.from_response((yield _call("GET", path, format=fmt)))
        cached = self.cached_schema(schema_id)
        if cached is not None:
            return cached
        answer = yield _call("GET", path)
        schema = Schema.from_response(answer)
        guid = _guid(answer)
        with self._lock:
            self._by_id.put(schema_id, schema)
            if guid is not None:
                self._by_guid.put(guid, schema)
        return schema

    def get_schema_by_guid(self, guid: object, fmt: str | None = None) -> Steps[Schema]:
        try:
            key = canonical_guid(guid)  # type: ignore[arg-type]
        except FramingError as exc:
            raise InvalidArgumentError(str(exc)) from None
        if fmt is not None:
            return Schema.from_response((yield _call("GET", f"/schemas/guids/{key}", format=fmt)))
        with self._lock:
            cached = self._by_guid.get(key)
        if cached is not None:
            return cached
        try:
            answer = yield _call("GET", f"/schemas/guids/{key}")
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

    def get_latest_version(self, subject: str) -> Steps[RegisteredSchema]:
        now = self._clock()
        ttl = self.config.latest_ttl_s
        with self._lock:
            cached = self._latest.get(subject)
        if cached is not None and (ttl is None or now - cached[0] < ttl):
            return cached[1]
        registered = self._registered_from((yield _call("GET", f"/subjects/{_q(subject)}/versions/latest")))
        with self._lock:
            self._latest[subject] = (now, registered)
        return registered

    def get_version(self, subject: str, version: int, fmt: str | None = None) -> Steps[RegisteredSchema]:
        path = f"/subjects/{_q(subject)}/versions/{int(version)}"
        if fmt is not None:
            return self._registered_from((yield _call("GET", path, format=fmt)))
        with self._lock:
            cached = self._versions.get((subject, version))
        if cached is not None:
            return cached
        return self._registered_from((yield _call("GET", path)))

    def get_versions(self, subject: str) -> Steps[list[int]]:
        return [int(v) for v in (yield _call("GET", f"/subjects/{_q(subject)}/versions"))]

    def get_subjects(self) -> Steps[list[str]]:
        return [str(s) for s in (yield _call("GET", "/subjects"))]

    def delete_subject(self, subject: str, permanent: bool = False) -> Steps[list[int]]:
        versions = yield _call("DELETE", f"/subjects/{_q(subject)}", permanent=permanent)
        with self._lock:
            self._latest.pop(subject, None)
            for key in [k for k in self._registered if k[0] == subject]:
                del self._registered[key]
            for vkey in [k for k in self._versions if k[0] == subject]:
                del self._versions[vkey]
        return [int(v) for v in versions]

    def get_compatibility(self, subject: str | None = None) -> Steps[str]:
        path = "/config" if subject is None else f"/config/{_q(subject)}"
        return str((yield _call("GET", path))["compatibilityLevel"])

    def set_compatibility(self, subject: str | None = None, level: str = "BACKWARD") -> Steps[str]:
        path = "/config" if subject is None else f"/config/{_q(subject)}"
        return str((yield _call("PUT", path, {"compatibility": level.upper()}))["compatibility"])

    def test_compatibility(self, subject: str, schema: Schema, version: int | str = "latest") -> Steps[bool]:
        answer = yield _call(
            "POST", f"/compatibility/subjects/{_q(subject)}/versions/{version}", schema.to_request()
        )
        return bool(answer["is_compatible"])

    def clear_latest_caches(self) -> None:
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
