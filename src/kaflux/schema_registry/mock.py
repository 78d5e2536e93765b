"""An in-memory Schema Registry for users' tests: ``mock://`` URLs. [app: no I/O, thread-safe]

``SchemaRegistryClient({"url": "mock://my-scope"})`` (and :class:`AsyncSchemaRegistryClient`)
talk to an :class:`InMemorySchemaRegistry` instead of a server: no network, no thread. Every
client given the same scope in one process shares one registry (as Confluent's Java
``MockSchemaRegistry`` scopes do), so a producer's serializer and a consumer's deserializer
built from the same configuration see the same schemas; :func:`drop_scope` forgets a scope
(call it between tests), :func:`scope` returns one to inspect or seed.

The registry answers the REST API's subset kaflux's clients use, with the real registry's
semantics, through the same client code (caches, subject strategies, framing) as an HTTP
registry:

* register (``POST /subjects/{s}/versions``), look up (``POST /subjects/{s}``), subjects,
  versions, a version or ``latest``, delete a subject (its schemas stay readable by id, as
  after a soft delete);
* schemas by id and by GUID (each schema gets a random GUID, as the registry assigns);
* compatibility levels (``GET``/``PUT /config[/{s}]``) and compatibility tests; Avro schemas
  are checked on registration with a simple rule set: a field the reader has and the writer
  lacks needs a default, and common fields must have the same type. JSON Schema and Protobuf
  registrations are not checked (always compatible).

Like the real registry (and unlike confluent-kafka's Python ``MockSchemaRegistryClient``), one
schema (same type, canonical text and references) has one id across subjects, and errors carry
the registry's own codes: 40401 subject not found, 40402 version not found, 40403 schema not
found, 409 incompatible, 42201 invalid schema, 42203 invalid compatibility level.
"""

from __future__ import annotations

import json
import threading
import uuid
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from kaflux.schema_registry._core import Answer, Send

_LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)


class _HttpError(Exception):
    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def _canonical(schema_type: str, text: str) -> str:
    if schema_type in ("AVRO", "JSON"):
        try:
            return json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
        except ValueError as exc:
            raise _HttpError(422, 42201, f"Invalid schema: {exc}") from exc
    return text.strip()


def _avro_type_name(schema: Any) -> str:
    if isinstance(schema, str):
        return schema
    if isinstance(schema, list):
        return "union[" + ",".join(_avro_type_name(s) for s in schema) + "]"
    if isinstance(schema, dict):
        kind = schema.get("type")
        if kind in ("record", "enum", "fixed"):
            return str(schema.get("name"))
        if isinstance(kind, (dict, list)):
            return _avro_type_name(kind)
        if kind == "array":
            return f"array<{_avro_type_name(schema.get('items'))}>"
        if kind == "map":
            return f"map<{_avro_type_name(schema.get('values'))}>"
        return str(kind)
    return repr(schema)


def _avro_can_read(reader: Any, writer: Any) -> str | None:
    """Why ``reader`` cannot read data written with ``writer`` (None when it can)."""
    if isinstance(reader, dict) and reader.get("type") == "record" and isinstance(writer, dict):
        written = {f["name"]: f for f in writer.get("fields", [])}
        for field in reader.get("fields", []):
            old = written.get(field["name"])
            if old is None:
                if "default" not in field:
                    return f"field {field['name']!r} was added without a default"
                continue
            why = _avro_can_read(field["type"], old["type"])
            if why:
                return f"field {field['name']!r}: {why}"
        return None
    if _avro_type_name(reader) != _avro_type_name(writer):
        return f"type {_avro_type_name(writer)} cannot be read as {_avro_type_name(reader)}"
    return None


class InMemorySchemaRegistry:
    """A Schema Registry's state and REST answers, in memory; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._schemas: list[dict[str, Any]] = []  # index = id - 1
        self._ids: dict[tuple[str, str, str], int] = {}
        self._guids: dict[str, int] = {}  # GUID -> schema id
        self._subjects: dict[str, list[int]] = {}  # subject -> schema id per version (1-based)
        self._config: dict[str | None, str] = {None: "BACKWARD"}

    def handle(self, method: str, target: str, body: bytes | None = None) -> tuple[int, Any]:
        """Answer one REST request: ``target`` is the path and query (``/subjects?x=y``),
        ``body`` the JSON request body. Returns the HTTP status and the JSON answer."""
        split = urlsplit(target)
        path = [unquote(p) for p in split.path.strip("/").split("/") if p]
        query = {k: v[-1] for k, v in parse_qs(split.query).items()}
        with self._lock:
            try:
                request = json.loads(body) if body else {}
                return 200, self._route(method.upper(), path, query, request)
            except _HttpError as exc:
                return exc.status, {"error_code": exc.code, "message": exc.message}
            except (ValueError, KeyError, TypeError) as exc:
                return 422, {"error_code": 42201, "message": f"Invalid request: {exc}"}

    def answer(self, send: Send) -> Answer:
        """Answer a client's request (what a ``mock://`` client does instead of HTTP)."""
        status, payload = self.handle(send.call.method, send.call.target, send.data)
        return Answer(status, json.dumps(payload).encode())

    def _route(self, method: str, path: list[str], query: dict[str, str], request: Any) -> Any:
        head = path[0] if path else ""
        n = len(path)
        if head == "subjects":
            if n == 1 and method == "GET":
                return sorted(s for s, versions in self._subjects.items() if versions)
            subject = path[1]
            if n == 2 and method == "POST":
                return self._lookup(subject, request)
            if n == 2 and method == "DELETE":
                versions = self._versions(subject)
                del self._subjects[subject]
                self._config.pop(subject, None)
                return list(range(1, len(versions) + 1))
            if n == 3 and path[2] == "versions" and method == "GET":
                return list(range(1, len(self._versions(subject)) + 1))
            if n == 3 and path[2] == "versions" and method == "POST":
                schema_id = self._register(subject, request)
                return {"id": schema_id, "guid": self._schema(schema_id)["guid"]}
            if n == 4 and path[2] == "versions" and method == "GET":
                return self._version(subject, path[3])
        if head == "schemas":
            if n == 2 and path[1] == "types" and method == "GET":
                return ["AVRO", "JSON", "PROTOBUF"]
            if n >= 3 and path[1] == "ids" and method == "GET":
                schema_id = int(path[2])
                schema = self._schema(schema_id)
                if n == 3:
                    return {**self._schema_body(schema), "guid": schema["guid"]}
                uses = [
                    (s, v + 1)
                    for s, ids in self._subjects.items()
                    for v, i in enumerate(ids)
                    if i == schema_id
                ]
                if path[3] == "versions":
                    return [{"subject": s, "version": v} for s, v in uses]
                if path[3] == "subjects":
                    return sorted({s for s, _ in uses})
            if n == 3 and path[1] == "guids" and method == "GET":
                schema_id = self._guids.get(path[2].lower(), 0)
                if not schema_id:
                    raise _HttpError(404, 40403, f"Schema {path[2]} not found")
                schema = self._schema(schema_id)
                return {**self._schema_body(schema), "guid": schema["guid"]}
        if head == "config":
            subject = path[1] if n == 2 else None  # type: ignore[assignment]
            if method == "GET":
                return {"compatibilityLevel": self._config.get(subject, self._config[None])}
            if method == "PUT":
                level = str(request["compatibility"]).upper()
                if level not in _LEVELS:
                    raise _HttpError(422, 42203, f"Invalid compatibility level {level}")
                self._config[subject] = level
                return {"compatibility": level}
        if head == "compatibility" and n == 5 and method == "POST":
            subject = path[2]
            candidate = self._candidate(request)
            target = self._schema(self._version(subject, path[4])["id"])
            return {"is_compatible": self._incompatibility(candidate, [target]) is None}
        raise _HttpError(404, 404, f"HTTP 404 Not Found: {method} /{'/'.join(path)}")

    # --- the model ----------------------------------------------------------------------------------------

    @staticmethod
    def _candidate(request: dict[str, Any]) -> dict[str, Any]:
        schema_type = str(request.get("schemaType") or "AVRO").upper()
        if schema_type not in ("AVRO", "JSON", "PROTOBUF"):
            raise _HttpError(422, 42201, f"Invalid schema type {schema_type}")
        text = request["schema"]
        if not isinstance(text, str):
            raise _HttpError(422, 42201, "Invalid schema: 'schema' must be a string")
        refs = [
            {"name": r["name"], "subject": r["subject"], "version": int(r["version"])}
            for r in request.get("references") or []
        ]
        canonical = _canonical(schema_type, text)
        return {"schema": text, "schemaType": schema_type, "references": refs, "canonical": canonical}

    @staticmethod
    def _key(schema: dict[str, Any]) -> tuple[str, str, str]:
        return schema["schemaType"], schema["canonical"], json.dumps(schema["references"], sort_keys=True)

    def _schema(self, schema_id: int) -> dict[str, Any]:
        if not 1 <= schema_id <= len(self._schemas):
            raise _HttpError(404, 40403, f"Schema {schema_id} not found")
        return self._schemas[schema_id - 1]

    @staticmethod
    def _schema_body(schema: dict[str, Any]) -> dict[str, Any]:
        body: dict[str, Any] = {"schema": schema["schema"]}
        if schema["schemaType"] != "AVRO":
            body["schemaType"] = schema["schemaType"]
        if schema["references"]:
            body["references"] = schema["references"]
        return body

    def _versions(self, subject: str) -> list[int]:
        versions = self._subjects.get(subject)
        if not versions:
            raise _HttpError(404, 40401, f"Subject '{subject}' not found.")
        return versions

    def _version(self, subject: str, version: str) -> dict[str, Any]:
        versions = self._versions(subject)
        number = len(versions) if version in ("latest", "-1") else int(version)
        if not 1 <= number <= len(versions):
            raise _HttpError(404, 40402, f"Version {version} not found.")
        schema_id = versions[number - 1]
        return {
            "subject": subject,
            "version": number,
            "id": schema_id,
            "guid": self._schema(schema_id)["guid"],
            **self._schema_body(self._schema(schema_id)),
        }

    def _lookup(self, subject: str, request: dict[str, Any]) -> dict[str, Any]:
        versions = self._versions(subject)
        schema_id = self._ids.get(self._key(self._candidate(request)))
        if schema_id is None or schema_id not in versions:
            raise _HttpError(404, 40403, "Schema not found")
        return self._version(subject, str(versions.index(schema_id) + 1))

    def _incompatibility(self, candidate: dict[str, Any], previous: list[dict[str, Any]]) -> str | None:
        if candidate["schemaType"] != "AVRO" or not previous:
            return None
        new = json.loads(candidate["schema"])
        for old_schema in previous:
            old = json.loads(old_schema["schema"])
            why = _avro_can_read(new, old)
            if why:
                return why
        return None

    def _register(self, subject: str, request: dict[str, Any]) -> int:
        candidate = self._candidate(request)
        for ref in candidate["references"]:
            self._version(ref["subject"], str(ref["version"]))
        key = self._key(candidate)
        versions = self._subjects.setdefault(subject, [])
        schema_id = self._ids.get(key)
        if schema_id is not None and schema_id in versions:
            return schema_id
        level = self._config.get(subject, self._config[None])
        if level != "NONE" and versions:
            previous = [
                self._schema(i) for i in (versions if level.endswith("TRANSITIVE") else versions[-1:])
            ]
            why = self._incompatibility(candidate, previous)
            if why:
                raise _HttpError(
                    409,
                    409,
                    f"Schema being registered is incompatible with an earlier schema "
                    f'for subject "{subject}": {why}',
                )
        if schema_id is None:
            candidate["guid"] = guid = str(uuid.uuid4())
            self._schemas.append(candidate)
            schema_id = self._ids[key] = self._guids[guid] = len(self._schemas)
        versions.append(schema_id)
        return schema_id


_SCOPES: dict[str, InMemorySchemaRegistry] = {}
_SCOPES_LOCK = threading.Lock()


def scope(name: str) -> InMemorySchemaRegistry:
    """The registry of scope ``name`` (``mock://name``), created on first use."""
    with _SCOPES_LOCK:
        registry = _SCOPES.get(name)
        if registry is None:
            registry = _SCOPES[name] = InMemorySchemaRegistry()
        return registry


def drop_scope(name: str) -> None:
    """Forget scope ``name``: the next client of ``mock://name`` starts from an empty registry."""
    with _SCOPES_LOCK:
        _SCOPES.pop(name, None)
