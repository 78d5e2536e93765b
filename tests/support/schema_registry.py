"""A wire-compatible Confluent Schema Registry for the tests. [test]

No Schema Registry server can be installed here, so :class:`SchemaRegistryDouble` serves its
REST API (the subset the clients use) on a free loopback port, from memory: the answers are
kaflux's own :class:`~kaflux.schema_registry.mock.InMemorySchemaRegistry` (what ``mock://``
URLs use), served over HTTP:

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
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from kaflux.schema_registry.mock import InMemorySchemaRegistry

_JSON = "application/vnd.schemaregistry.v1+json"


class SchemaRegistryDouble:
    """An in-memory Schema Registry on ``127.0.0.1``; use as a context manager or call
    :meth:`close`."""

    def __init__(
        self,
        users: dict[str, str] | None = None,
        tls: tuple[str, str] | None = None,
        client_ca: str | None = None,
    ) -> None:
        """``tls``: serve HTTPS with this (certificate, key); ``client_ca``: and require a
        client certificate signed by this CA (mutual TLS)."""
        self.users = users
        self.requests: list[tuple[str, str]] = []
        #: the Authorization header of each request (None when absent)
        self.authorizations: list[str | None] = []
        self._lock = threading.Lock()
        #: the registry's state and answers: kaflux's own in-memory registry (mock://)
        self.model = InMemorySchemaRegistry()
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
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            if client_ca is not None:
                context.load_verify_locations(client_ca)
                context.verify_mode = ssl.CERT_REQUIRED
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
            self.url = f"https://127.0.0.1:{self.port}"
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
        with self._lock:
            self.requests.append((method, urlsplit(raw_path).path))
            self.authorizations.append(authorization)
            if self._failures:
                status = self._failures.pop(0)
                return status, {"error_code": status * 100 + 1, "message": "injected server error"}
        if not self._authenticated(authorization):
            return 401, {"error_code": 401, "message": "Unauthorized"}
        return self.model.handle(method, raw_path, body)

    def _authenticated(self, authorization: str | None) -> bool:
        if self.users is None:
            return True
        if authorization and authorization.startswith("Basic "):
            try:
                user, _, password = base64.b64decode(authorization[6:]).decode().partition(":")
            except ValueError:
                user, password = "", ""
            if self.users.get(user) == password and user:
                return True
        return False
