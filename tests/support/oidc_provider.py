"""A local OIDC token endpoint for the OAUTHBEARER tests: the OAuth 2 client credentials grant
(RFC 6749 4.4) on 127.0.0.1, issuing HS256-signed JWTs, and the validator the SASL front door
uses to verify them. [test]

It is proven with confluent-kafka's own ``sasl.oauthbearer.method=oidc`` client before kaflux is
tested against it (``tests/integration/test_oidc_login.py``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from support.sasl_front_door import InvalidTokenError, OAuthToken, TokenValidator


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def sign_jwt(claims: Mapping[str, Any], key: bytes) -> str:
    """An HS256 JWT of ``claims``."""
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = _b64(json.dumps(dict(claims), separators=(",", ":")).encode())
    signature = hmac.new(key, f"{header}.{body}".encode(), hashlib.sha256).digest()
    return f"{header}.{body}.{_b64(signature)}"


def hs256_validator(key: bytes, *, clock: Callable[[], float] = time.time) -> TokenValidator:
    """A front-door validator that accepts only JWTs signed with ``key`` and not expired."""

    def validate(token: str, extensions: Mapping[str, str]) -> OAuthToken:
        parts = token.split(".")
        if len(parts) != 3:
            raise InvalidTokenError("not a JWT")
        expected = hmac.new(key, f"{parts[0]}.{parts[1]}".encode(), hashlib.sha256).digest()
        if not hmac.compare_digest(expected, _unb64(parts[2])):
            raise InvalidTokenError("bad signature")
        claims = json.loads(_unb64(parts[1]))
        if float(claims.get("exp", 0)) <= clock():
            raise InvalidTokenError("expired")
        return OAuthToken(principal=str(claims["sub"]), expires_at=float(claims["exp"]))

    return validate


@dataclass
class Issued:
    """One token request the endpoint answered or refused."""

    client_id: str | None
    scope: str | None
    status: int


@dataclass
class OidcProvider:
    """The token endpoint. ``clients`` maps client ids to secrets; tokens live ``lifetime_s``.
    ``refuse_with`` (an HTTP status) makes it refuse every request, e.g. 503. ``failure`` makes
    it fail every request another way: ``"timeout"`` (answers only after ``hang_s``, or when
    stopped), ``"bad_json"`` (HTTP 200 with a body that is not JSON). :meth:`go_down` closes
    its port (connection refused), :meth:`come_back` opens it again on the same port."""

    clients: dict[str, str]
    key: bytes = b"kaflux-test-signing-key"
    lifetime_s: float = 3600.0
    refuse_with: int | None = None
    failure: str | None = None
    hang_s: float = 30.0
    clock: Callable[[], float] = time.time
    issued: list[Issued] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None
    _port: int = 0
    _stopping: threading.Event = field(default_factory=threading.Event)

    @property
    def token_url(self) -> str:
        assert self._port
        return f"http://127.0.0.1:{self._port}/oauth2/token"

    def validator(self) -> TokenValidator:
        return hs256_validator(self.key, clock=self.clock)

    def start(self) -> OidcProvider:
        provider = self
        self._stopping.clear()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                form = urllib.parse.parse_qs(self.rfile.read(length).decode())
                if provider.failure == "timeout":
                    provider.issued.append(Issued(None, None, 0))
                    provider._stopping.wait(provider.hang_s)
                    return
                if provider.failure == "bad_json":
                    provider.issued.append(Issued(None, None, 200))
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Content-Length", "15")
                    self.end_headers()
                    self.wfile.write(b"<html>oops</htm")
                    return
                status, answer, client, scope = provider._answer(self.headers.get("Authorization", ""), form)
                provider.issued.append(Issued(client, scope, status))
                body = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", self._port), Handler)
        self._server.daemon_threads = True
        self._port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, name="oidc-provider", daemon=True)
        self._thread.start()
        return self

    def _answer(
        self, authorization: str, form: dict[str, list[str]]
    ) -> tuple[int, dict[str, Any], str | None, str | None]:
        scope = form.get("scope", [None])[0]
        if self.refuse_with is not None:
            return self.refuse_with, {"error": "temporarily_unavailable"}, None, scope
        scheme, _, encoded = authorization.partition(" ")
        if scheme.lower() != "basic":
            return 401, {"error": "invalid_client"}, None, scope
        client_id, _, secret = base64.b64decode(encoded).decode().partition(":")
        client_id, secret = urllib.parse.unquote(client_id), urllib.parse.unquote(secret)
        if form.get("grant_type") != ["client_credentials"]:
            return 400, {"error": "unsupported_grant_type"}, client_id, scope
        if self.clients.get(client_id) != secret:
            return (
                401,
                {"error": "invalid_client", "error_description": "bad client credentials"},
                client_id,
                scope,
            )
        now = self.clock()
        claims = {"sub": client_id, "iat": int(now), "exp": int(now + self.lifetime_s), "scope": scope or ""}
        answer = {
            "access_token": sign_jwt(claims, self.key),
            "token_type": "Bearer",
            "expires_in": int(self.lifetime_s),
        }
        return 200, answer, client_id, scope

    def tokens_issued(self) -> int:
        return sum(1 for i in self.issued if i.status == 200)

    def go_down(self) -> None:
        """Close the port: token requests meet "connection refused"."""
        self.stop()
        self._stopping.clear()

    def come_back(self) -> None:
        """Serve again on the same port (after :meth:`go_down`)."""
        self.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
