"""A wire-compatible Confluent Schema Registry for the tests. [test]

No Schema Registry server can be installed here, so :class:`SchemaRegistryDouble` serves its
REST API (the subset the clients use) on a free loopback port, from memory:

* ``POST /subjects/{s}/versions`` (register), ``POST /subjects/{s}`` (look up),
  ``GET /subjects``, ``GET /subjects/{s}/versions``, ``GET /subjects/{s}/versions/{v|latest}``,
  ``DELETE /subjects/{s}``;
* ``GET /schemas/ids/{id}`` (``?format=serialized`` is accepted: schemas are returned as they
  were registered), ``GET /schemas/ids/{id}/versions``, ``/subjects``, ``GET /schemas/types``;
* ``GET /schemas/guids/{guid}``: each schema also has a GUID (a random UUID, as the registry
  assigns), returned with its id by registration, look-up and version answers; the header
  framing of confluent-kafka's serializers carries it;
* ``GET``/``PUT /config`` and ``/config/{s}``; ``POST /compatibility/subjects/{s}/versions/{v}``.

Like the real registry, one schema (same type, same canonical text, same references) gets one
id across subjects, and registering it again under a subject returns its id without a new
version. Avro compatibility (BACKWARD and friends) is checked on registration with a simple
rule set: a field the reader has and the writer lacks needs a default, common fields must have
the same type. Errors carry the registry's ``error_code`` (40401 subject not found, 40402
version not found, 40403 schema not found, 409 incompatible, 42201 invalid schema).

``users`` turns on HTTP basic auth; :attr:`requests` lists every request served
(``(method, path)``), so tests can assert that a steady state makes none;
:meth:`fail_next` answers the next requests with a 5xx to exercise retries; :meth:`hang` makes
it accept requests and not answer them (an outage) until :meth:`recover`.

It was proven first with confluent-kafka's own ``SchemaRegistryClient`` and serializers
(``tests/integration/test_schema_registry_double.py``).
"""

from __future__ import annotations

import base64
import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

_JSON = "application/vnd.schemaregistry.v1+json"
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


class SchemaRegistryDouble:
    """An in-memory Schema Registry on ``127.0.0.1``; use as a context manager or call
    :meth:`close`."""

    def __init__(self, users: dict[str, str] | None = None) -> None:
        self.users = users
        self.requests: list[tuple[str, str]] = []
        #: the Authorization header of each request (None when absent)
        self.authorizations: list[str | None] = []
        self._lock = threading.Lock()
        self._schemas: list[dict[str, Any]] = []  # index = id - 1
        self._ids: dict[tuple[str, str, str], int] = {}
        self._guids: dict[str, int] = {}  # GUID -> schema id
        self._subjects: dict[str, list[int]] = {}  # subject -> schema id per version (1-based)
        self._config: dict[str | None, str] = {None: "BACKWARD"}
        self._failures: list[int] = []
        self._answering = threading.Event()
        self._answering.set()
        double = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _handle(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                double._answering.wait(60)  # hang(): hold the request until recover()
                status, payload = double._serve(method, self.path, self.headers.get("Authorization"), body)
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", _JSON)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up (after a hang)
                    self.close_connection = True

            def do_GET(self) -> None:
                self._handle("GET")

            def do_POST(self) -> None:
                self._handle("POST")

            def do_PUT(self) -> None:
                self._handle("PUT")

            def do_DELETE(self) -> None:
                self._handle("DELETE")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(
            target=lambda: self._server.serve_forever(0.05), name="schema-registry-double", daemon=True
        )
        self._thread.start()

    def __enter__(self) -> SchemaRegistryDouble:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._answering.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self.requests)

    def fail_next(self, count: int, status: int = 503) -> None:
        """Answer the next ``count`` requests with ``status`` (a transient server error)."""
        with self._lock:
            self._failures.extend([status] * count)

    def hang(self) -> None:
        """Accept requests and answer none of them (an outage) until :meth:`recover`."""
        self._answering.clear()

    def recover(self) -> None:
        """Answer again, the held requests included."""
        self._answering.set()

    # --- the REST API -------------------------------------------------------------------------------------

    def _serve(self, method: str, raw_path: str, authorization: str | None, body: bytes) -> tuple[int, Any]:
        split = urlsplit(raw_path)
        path = [unquote(p) for p in split.path.strip("/").split("/") if p]
        query = {k: v[-1] for k, v in parse_qs(split.query).items()}
        with self._lock:
            self.requests.append((method, split.path))
            self.authorizations.append(authorization)
            if self._failures:
                status = self._failures.pop(0)
                return status, {"error_code": status * 100 + 1, "message": "injected server error"}
            try:
                self._authenticate(authorization)
                request = json.loads(body) if body else {}
                return 200, self._route(method, path, query, request)
            except _HttpError as exc:
                return exc.status, {"error_code": exc.code, "message": exc.message}
            except (ValueError, KeyError, TypeError) as exc:
                return 422, {"error_code": 42201, "message": f"Invalid request: {exc}"}

    def _authenticate(self, authorization: str | None) -> None:
        if self.users is None:
            return
        if authorization and authorization.startswith("Basic "):
            try:
                user, _, password = base64.b64decode(authorization[6:]).decode().partition(":")
            except ValueError:
                user, password = "", ""
            if self.users.get(user) == password and user:
                return
        raise _HttpError(401, 401, "Unauthorized")

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
