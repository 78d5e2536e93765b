"""A SASL front door for a broker that cannot log clients in itself: a test double. [io: a thread per
connection side; any thread: the control API and the log]

No broker here completes a SASL login (Tansu's SCRAM store is empty, noida-db takes any PLAIN password;
see docs/brokers.md). :class:`SaslFrontDoor` listens on 127.0.0.1, authenticates each
client connection itself, the way a Kafka broker does, and then forwards every frame unchanged to one
upstream broker (one upstream connection per client connection). The upstream broker must advertise the
door's port (``TansuBroker(advertised_port=door.port)``), so that clients come back through it.

Per connection, before authentication:

* ApiVersions is forwarded upstream; the answer is patched to advertise SaslHandshake v0-1 and
  SaslAuthenticate v0-2 (the versions the door speaks), whatever the upstream says.
* SaslHandshake picks a mechanism among :attr:`SaslFrontDoor.mechanisms` (default PLAIN, SCRAM-SHA-256,
  SCRAM-SHA-512 and OAUTHBEARER); another one gets UNSUPPORTED_SASL_MECHANISM (33) and the connection is
  closed. After a v1 handshake the tokens come in SaslAuthenticate requests; after v0, as raw
  size-prefixed tokens (Kafka's legacy mode).
* SaslAuthenticate runs the mechanism: PLAIN (RFC 4616), SCRAM-SHA-256/512 (RFC 5802, RFC 7677),
  OAUTHBEARER (RFC 7628, with a pluggable token validator; the default accepts unsecured JWTs,
  ``alg: none``, that name a ``sub`` and have not expired) and, when the door is given a service
  keytab (``gssapi_keytab``), GSSAPI (Kerberos V5, RFC 4752, as Kafka's broker runs it: a GSS-API
  acceptor context, then the security-layer step; see :class:`GssapiServer`). A failed login is answered with
  SASL_AUTHENTICATION_FAILED (58) and an error message, then the connection is closed; a SCRAM failure
  also carries the server-final ``e=invalid-proof`` / ``e=unknown-user``.
* Any other request closes the connection without an answer, as Kafka does.

After a successful login every frame is forwarded, in both directions, untouched; answers go back in
request order (a local SASL answer waits for the upstream answers to earlier requests; a Produce with
``acks=0`` expects no answer). ``session_lifetime_ms`` (KIP-368) is sent in SaslAuthenticate v1+
answers; once a session has expired, any request but SaslHandshake closes the connection. A client
re-authenticates by sending SaslHandshake v1 + SaslAuthenticate again on the open connection, with the
same mechanism and principal, also while forwarded requests are in flight.

Everything is logged, thread-safely, for tests: :meth:`SaslFrontDoor.connections` (one
:class:`ConnectionRecord` each) and :meth:`SaslFrontDoor.logins` (one :class:`LoginRecord` per finished
login attempt: user, mechanism, success, reason, time). :meth:`SaslFrontDoor.wait_for_login` waits,
bounded, for a matching record.

Typical use::

    with SaslFrontDoor({"alice": "alice-secret"}) as door:
        broker = TansuBroker(advertised_port=door.port).start()
        door.set_upstream(broker.port)
        ...  # clients use door.bootstrap_servers with SASL_PLAINTEXT

The SASL server mechanisms (:class:`PlainServer`, :class:`ScramServer`, :class:`OAuthBearerServer`,
:class:`GssapiServer`) are sans-IO (GSSAPI's calls into the Kerberos library are local: the acceptor
needs only its keytab, never the KDC) and can be driven directly.
"""

from __future__ import annotations

import base64
import binascii
import collections
import contextlib
import hashlib
import hmac
import itertools
import json
import os
import re
import secrets
import selectors
import socket
import stringprep
import struct
import threading
import time
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any, Protocol, Self

from kaflux.errors import KafkaError
from kaflux.protocol.api import REQUESTS, ApiKey, request_header_version, response_header_version
from kaflux.protocol.messages.api_versions import ApiVersion, ApiVersionsResponse
from kaflux.protocol.messages.headers import RequestHeader, ResponseHeader
from kaflux.protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from kaflux.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from kaflux.protocol.primitives import Reader, Writer

__all__ = [
    "DEFAULT_MECHANISMS",
    "ConnectionRecord",
    "GssapiServer",
    "InvalidTokenError",
    "LoginRecord",
    "OAuthBearerServer",
    "OAuthToken",
    "PlainServer",
    "SaslFrontDoor",
    "SaslServerMechanism",
    "SaslStep",
    "ScramCredential",
    "ScramServer",
    "gssapi_acceptor_factory",
    "saslprep",
    "unsecured_jwt_validator",
]

_HOST = "127.0.0.1"
_SIZE = struct.Struct(">i")
_REQUEST_HEADER = struct.Struct(">hhi")
_CORRELATION_ID = struct.Struct(">i")
_MAX_FRAME = 100 * 1024 * 1024
_UPSTREAM_CONNECT_TIMEOUT_S = 10.0
_JOIN_TIMEOUT_S = 5.0

# Kafka error codes the door answers with.
_UNSUPPORTED_SASL_MECHANISM = 33
_ILLEGAL_SASL_STATE = 34
_SASL_AUTHENTICATION_FAILED = 58

#: The SASL versions the door implements and advertises in ApiVersions.
_SASL_HANDSHAKE_VERSIONS = (0, 1)
_SASL_AUTHENTICATE_VERSIONS = (0, 2)

DEFAULT_MECHANISMS: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")

#: SCRAM mechanisms and their hash functions. SCRAM-SHA-1 is here for RFC 5802's test vector; Kafka
#: does not offer it and the door does not enable it by default.
_SCRAM_HASHES: dict[str, str] = {"SCRAM-SHA-1": "sha1", "SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
_SCRAM_MIN_ITERATIONS = 4096  # RFC 7677 section 4: at least 4096


# --- SASL server mechanisms (sans-IO) -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SaslStep:
    """The outcome of one client token fed to a server mechanism.

    ``challenge`` goes back to the client. ``complete`` is True once the client is authenticated as
    ``principal``; ``failure`` is set (a short reason such as ``"invalid-proof"``) when the exchange has
    failed. Neither means the mechanism expects another client token. ``expires_at`` (epoch seconds) is
    when the credential stops being valid, for OAUTHBEARER tokens.
    """

    challenge: bytes = b""
    complete: bool = False
    failure: str | None = None
    principal: str | None = None
    expires_at: float | None = None
    #: GSSAPI: the authorization id the client sent, and its unwrapped security-layer reply
    authorization_id: str | None = None
    security_layer: bytes | None = None


class SaslServerMechanism(Protocol):
    """A server side of one SASL mechanism for one login: feed it client tokens with :meth:`step`."""

    @property
    def mechanism(self) -> str: ...

    @property
    def user(self) -> str | None:
        """The user the client claims, once known (also after a failure)."""
        ...

    def step(self, token: bytes) -> SaslStep: ...


class PlainServer:
    """PLAIN (RFC 4616): one message ``[authzid] NUL authcid NUL passwd``, checked against ``users``.

    As in Kafka, an authorization id other than the user name is refused.
    """

    mechanism = "PLAIN"

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self._done = False
        self.user: str | None = None

    def step(self, token: bytes) -> SaslStep:
        if self._done:
            return SaslStep(failure="unexpected-token")
        self._done = True
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            return SaslStep(failure="invalid-encoding")
        parts = text.split("\0")
        if len(parts) != 3:
            return SaslStep(failure="invalid-message")
        authzid, authcid, passwd = parts
        if not authcid or not passwd or len(authcid.encode()) > 255 or len(passwd.encode()) > 255:
            return SaslStep(failure="invalid-message")
        self.user = authcid
        if authzid and authzid != authcid:
            return SaslStep(failure="authorization-id-mismatch")
        expected = self._users.get(authcid)
        if expected is None:
            return SaslStep(failure="unknown-user")
        if not hmac.compare_digest(passwd.encode(), expected.encode()):
            return SaslStep(failure="invalid-password")
        return SaslStep(complete=True, principal=authcid)


def saslprep(text: str) -> str:
    """SASLprep (RFC 4013) of a stored string: map, NFKC-normalize, prohibit, check bidi.

    Raises ValueError for prohibited or unassigned code points and bidi violations.
    """
    if all(0x20 <= ord(ch) < 0x7F for ch in text):
        return text  # printable ASCII is unchanged by every step
    mapped = "".join(
        " " if stringprep.in_table_c12(ch) else ch for ch in text if not stringprep.in_table_b1(ch)
    )
    normalized = unicodedata.normalize("NFKC", mapped)
    prohibited = (
        stringprep.in_table_c12,
        stringprep.in_table_c21,
        stringprep.in_table_c22,
        stringprep.in_table_c3,
        stringprep.in_table_c4,
        stringprep.in_table_c5,
        stringprep.in_table_c6,
        stringprep.in_table_c7,
        stringprep.in_table_c8,
        stringprep.in_table_c9,
        stringprep.in_table_a1,  # unassigned: prohibited in stored strings
    )
    for ch in normalized:
        if any(table(ch) for table in prohibited):
            raise ValueError(f"SASLprep: prohibited character U+{ord(ch):04X}")
    if any(stringprep.in_table_d1(ch) for ch in normalized):
        if any(stringprep.in_table_d2(ch) for ch in normalized):
            raise ValueError("SASLprep: mixes right-to-left and left-to-right characters")
        if not (stringprep.in_table_d1(normalized[0]) and stringprep.in_table_d1(normalized[-1])):
            raise ValueError("SASLprep: right-to-left text must start and end with a right-to-left character")
    return normalized


def _hmac(hash_name: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hash_name).digest()


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What a SCRAM server stores for a user (RFC 5802 section 3): never the password itself."""

    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    @classmethod
    def from_password(
        cls,
        mechanism: str,
        password: str,
        *,
        salt: bytes | None = None,
        iterations: int = _SCRAM_MIN_ITERATIONS,
    ) -> ScramCredential:
        """Derive the credential: SaltedPassword = Hi(Normalize(password), salt, i), and its keys."""
        hash_name = _scram_hash(mechanism)
        if salt is None:
            salt = secrets.token_bytes(16)
        salted = hashlib.pbkdf2_hmac(hash_name, saslprep(password).encode(), salt, iterations)
        client_key = _hmac(hash_name, salted, b"Client Key")
        return cls(
            salt=salt,
            iterations=iterations,
            stored_key=hashlib.new(hash_name, client_key).digest(),
            server_key=_hmac(hash_name, salted, b"Server Key"),
        )


def _scram_hash(mechanism: str) -> str:
    try:
        return _SCRAM_HASHES[mechanism.upper()]
    except KeyError:
        raise ValueError(f"not a SCRAM mechanism: {mechanism!r}") from None


def _default_nonce() -> str:
    # 24 random bytes, base64: printable, never ','.
    return base64.b64encode(secrets.token_bytes(24)).decode("ascii")


_PRINTABLE_NONCE = re.compile(r"[\x21-\x2b\x2d-\x7e]+")  # printable ASCII except ','


class ScramServer:
    """The server side of SCRAM-SHA-1/256/512 (RFC 5802, RFC 7677) without channel binding.

    ``credentials(user)`` returns the user's :class:`ScramCredential` for this mechanism, or None. An
    unknown user gets a made-up salt so the exchange looks the same, and fails at the client-final
    message with ``e=unknown-user``. ``server_nonce`` makes the server's nonce part (tests inject RFC
    test vectors' values).
    """

    def __init__(
        self,
        mechanism: str,
        credentials: Callable[[str], ScramCredential | None],
        *,
        server_nonce: Callable[[], str] = _default_nonce,
    ) -> None:
        self.mechanism = mechanism.upper()
        self._hash = _scram_hash(self.mechanism)
        self._credentials = credentials
        self._server_nonce = server_nonce
        self._state = "client-first"
        self.user: str | None = None
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._credential: ScramCredential | None = None

    def step(self, token: bytes) -> SaslStep:
        state, self._state = self._state, "done"
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            return self._fail("invalid-encoding")
        if state == "client-first":
            return self._client_first(text)
        if state == "client-final":
            return self._client_final(text)
        return SaslStep(failure="unexpected-token")

    def _fail(self, reason: str) -> SaslStep:
        self._state = "done"
        return SaslStep(challenge=f"e={reason}".encode(), failure=reason)

    def _client_first(self, text: str) -> SaslStep:
        # gs2-header: gs2-cbind-flag "," [ authzid ] ","
        parts = text.split(",", 2)
        if len(parts) != 3:
            return self._fail("invalid-encoding")
        cbind, authzid, bare = parts
        if cbind.startswith("p="):
            return self._fail("channel-binding-not-supported")
        if cbind not in ("n", "y"):
            return self._fail("invalid-encoding")
        if authzid and not authzid.startswith("a="):
            return self._fail("invalid-encoding")
        attributes = bare.split(",")
        if attributes[0].startswith("m="):
            return self._fail("extensions-not-supported")
        if len(attributes) < 2 or not attributes[0].startswith("n=") or not attributes[1].startswith("r="):
            return self._fail("invalid-encoding")
        user = _decode_saslname(attributes[0][2:])
        if user is None:
            return self._fail("invalid-username-encoding")
        self.user = user
        if authzid:
            requested = _decode_saslname(authzid[2:])
            if requested != user:  # Kafka allows only the user itself as authorization id
                return self._fail("invalid-username-encoding" if requested is None else "other-error")
        client_nonce = attributes[1][2:]
        if not _PRINTABLE_NONCE.fullmatch(client_nonce):
            return self._fail("invalid-encoding")
        # Further attributes are extensions (e.g. Kafka's tokenauth=true): accepted and ignored.
        credential = self._credentials(user)
        if credential is None:
            self._credential = None
            salt, iterations = secrets.token_bytes(16), _SCRAM_MIN_ITERATIONS
        else:
            self._credential = credential
            salt, iterations = credential.salt, credential.iterations
        server_part = self._server_nonce()
        if not _PRINTABLE_NONCE.fullmatch(server_part):
            raise ValueError(f"server nonce {server_part!r} must be printable ASCII without ','")
        self._gs2_header = f"{cbind},{authzid},"
        self._client_first_bare = bare
        self._nonce = client_nonce + server_part
        self._server_first = f"r={self._nonce},s={base64.b64encode(salt).decode('ascii')},i={iterations}"
        self._state = "client-final"
        return SaslStep(challenge=self._server_first.encode())

    def _client_final(self, text: str) -> SaslStep:
        # client-final-message = channel-binding "," nonce ["," extensions] "," proof
        marker = text.rfind(",p=")
        if marker < 0:
            return self._fail("invalid-encoding")
        without_proof, proof_b64 = text[:marker], text[marker + 3 :]
        attributes = without_proof.split(",")
        if len(attributes) < 2 or not attributes[0].startswith("c=") or not attributes[1].startswith("r="):
            return self._fail("invalid-encoding")
        try:
            channel_binding = base64.b64decode(attributes[0][2:], validate=True)
            proof = base64.b64decode(proof_b64, validate=True)
        except (binascii.Error, ValueError):
            return self._fail("invalid-encoding")
        if channel_binding != self._gs2_header.encode():
            return self._fail("channel-bindings-dont-match")
        if attributes[1][2:] != self._nonce:
            return self._fail("other-error")
        credential = self._credential
        if credential is None:
            return self._fail("unknown-user")
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        client_signature = _hmac(self._hash, credential.stored_key, auth_message)
        if len(proof) != len(client_signature):
            return self._fail("invalid-proof")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(), credential.stored_key):
            return self._fail("invalid-proof")
        server_signature = _hmac(self._hash, credential.server_key, auth_message)
        verifier = "v=" + base64.b64encode(server_signature).decode("ascii")
        return SaslStep(challenge=verifier.encode(), complete=True, principal=self.user)


def _decode_saslname(value: str) -> str | None:
    """RFC 5802 saslname: '=2C' is ',' and '=3D' is '='; any other '=' is invalid (None)."""
    out: list[str] = []
    i = 0
    while i < len(value):
        ch = value[i]
        if ch == "=":
            escape = value[i : i + 3]
            if escape == "=2C":
                out.append(",")
            elif escape == "=3D":
                out.append("=")
            else:
                return None
            i += 3
        elif ch == ",":
            return None
        else:
            out.append(ch)
            i += 1
    return "".join(out) if out else None


@dataclass(frozen=True, slots=True)
class OAuthToken:
    """A token a validator accepted: who it names and when it expires (epoch seconds, or None)."""

    principal: str
    expires_at: float | None = None


class InvalidTokenError(ValueError):
    """Raised by a token validator. ``status`` goes to the client (RFC 7628 section 3.2.2)."""

    def __init__(self, message: str, status: str = "invalid_token") -> None:
        super().__init__(message)
        self.status = status


TokenValidator = Callable[[str, Mapping[str, str]], OAuthToken]
"""``validator(token, extensions) -> OAuthToken``; raises :class:`InvalidTokenError`."""


def _b64url_json(part: str) -> dict[str, Any]:
    try:
        raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        value = json.loads(raw)
    except (binascii.Error, ValueError) as e:
        raise InvalidTokenError(f"token part is not base64url JSON: {e}") from None
    if not isinstance(value, dict):
        raise InvalidTokenError("token part is not a JSON object")
    return value


def unsecured_jwt_validator(
    *, principal_claim: str = "sub", clock: Callable[[], float] = time.time, leeway_s: float = 0.0
) -> TokenValidator:
    """A validator for unsecured JWTs (RFC 7519 section 6), as Kafka's development-only validator.

    The token must be ``base64url(header).base64url(claims).`` with an empty signature, ``alg`` "none",
    a non-empty string ``principal_claim`` and a numeric ``exp`` in the future (``iat``, when present,
    not in the future), judged with ``clock`` and ``leeway_s``.
    """

    def validate(token: str, extensions: Mapping[str, str]) -> OAuthToken:
        parts = token.split(".")
        if len(parts) != 3:
            raise InvalidTokenError("not a JWT: expected three dot-separated parts")
        header, claims = _b64url_json(parts[0]), _b64url_json(parts[1])
        if header.get("alg") != "none" or parts[2]:
            raise InvalidTokenError("not an unsecured JWT: alg must be 'none' with an empty signature")
        now = clock()
        exp = claims.get("exp")
        if not isinstance(exp, int | float) or isinstance(exp, bool):
            raise InvalidTokenError("the token has no numeric 'exp' claim")
        if exp + leeway_s <= now:
            raise InvalidTokenError(f"the token expired {now - exp:.0f} s ago")
        iat = claims.get("iat")
        if iat is not None and (not isinstance(iat, int | float) or iat - leeway_s > now):
            raise InvalidTokenError("the token's 'iat' claim is invalid or in the future")
        principal = claims.get(principal_claim)
        if not isinstance(principal, str) or not principal:
            raise InvalidTokenError(f"the token has no '{principal_claim}' claim")
        return OAuthToken(principal=principal, expires_at=float(exp))

    return validate


_OAUTH_KEY = re.compile(r"[A-Za-z]+")


def _unverified_subject(token: str) -> str | None:
    """The ``sub`` claim of a JWT-shaped token, unchecked (only for the log), or None."""
    parts = token.split(".")
    try:
        sub = _b64url_json(parts[1]).get("sub") if len(parts) == 3 else None
    except InvalidTokenError:
        return None
    return sub if isinstance(sub, str) else None


class OAuthBearerServer:
    """OAUTHBEARER (RFC 7628): ``gs2-header %x01 auth=Bearer <token> %x01 *(key=value %x01) %x01``.

    A bad token is answered with a JSON error challenge; the client must then send a single %x01, and
    the exchange fails (RFC 7628 section 3.2.3). An authorization id in the gs2 header must name the
    token's principal.
    """

    mechanism = "OAUTHBEARER"

    def __init__(self, validator: TokenValidator) -> None:
        self._validator = validator
        self._state = "initial"
        self._failure = ""
        self.user: str | None = None

    def step(self, token: bytes) -> SaslStep:
        state, self._state = self._state, "done"
        if state == "error-sent":
            if token != b"\x01":
                return SaslStep(failure="invalid-message")
            return SaslStep(failure=self._failure)
        if state != "initial":
            return SaslStep(failure="unexpected-token")
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            return SaslStep(failure="invalid-encoding")
        parsed = self._parse(text)
        if isinstance(parsed, str):
            return SaslStep(failure=parsed)
        authzid, pairs = parsed
        auth = pairs.pop("auth", None)
        scheme, _, bearer = (auth or "").partition(" ")
        if scheme.lower() != "bearer" or not bearer.strip():
            return SaslStep(failure="invalid-message")
        try:
            accepted = self._validator(bearer.strip(), pairs)
        except InvalidTokenError as e:
            self.user = _unverified_subject(bearer.strip())
            return self._error(e.status, f"invalid-token: {e}")
        self.user = accepted.principal
        if authzid and authzid != accepted.principal:
            return self._error("invalid_token", "authorization-id-mismatch")
        return SaslStep(complete=True, principal=accepted.principal, expires_at=accepted.expires_at)

    def _error(self, status: str, reason: str) -> SaslStep:
        self._state = "error-sent"
        self._failure = reason
        return SaslStep(challenge=json.dumps({"status": status}).encode())

    @staticmethod
    def _parse(text: str) -> tuple[str, dict[str, str]] | str:
        header, sep, rest = text.partition("\x01")
        if not sep or (not rest.endswith("\x01\x01") and rest != "\x01"):
            return "invalid-message"
        fields = header.split(",")
        if len(fields) != 3 or fields[2] != "" or fields[0] not in ("n", "y"):
            return "channel-binding-not-supported" if fields[0].startswith("p=") else "invalid-message"
        authzid = ""
        if fields[1]:
            if not fields[1].startswith("a="):
                return "invalid-message"
            decoded = _decode_saslname(fields[1][2:])
            if decoded is None:
                return "invalid-message"
            authzid = decoded
        pairs: dict[str, str] = {}
        for kv in rest[:-2].split("\x01") if rest != "\x01" else []:
            key, eq, value = kv.partition("=")
            if not eq or not _OAUTH_KEY.fullmatch(key):
                return "invalid-message"
            pairs[key] = value
        return authzid, pairs


# RFC 4752 section 3.1: the security layers (bit mask) and the largest buffer Kafka's broker offers
# (the JDK's default receive buffer); Kafka configures "auth" only: no integrity, no confidentiality.
_GSS_NO_SECURITY_LAYER = 1
_GSS_OFFERED_LAYERS = _GSS_NO_SECURITY_LAYER
_GSS_MAX_BUFFER = 65536


class GssapiServer:
    """GSSAPI (Kerberos V5, RFC 4752), the server side as Kafka's broker runs it (the JDK's mechanism).

    ``new_acceptor()`` returns a fresh python-gssapi ``SecurityContext(usage="accept")`` holding the
    service keytab's credentials. The client's tokens go to the acceptor until the context is
    established (its last output, the AP-REP of mutual authentication, goes back); the client then
    sends an empty message, and the server answers with its wrapped 4-octet security-layer offer (the
    layers as a bit mask, "no security layer" only, and its largest buffer). The client's wrapped reply
    chooses a layer (it must be "no security layer", offered) and carries an authorization id; as in
    Kafka, the authenticated principal is the Kerberos client principal whatever the authorization id
    says (it is logged). An acceptor or integrity failure fails the login with ``gss-error: <why>``.
    """

    mechanism = "GSSAPI"

    def __init__(self, new_acceptor: Callable[[], Any], gss_error: type[Exception]) -> None:
        self._context = new_acceptor()
        self._gss_error = gss_error
        self._state = "context"
        self.user: str | None = None

    def step(self, token: bytes) -> SaslStep:
        state, self._state = self._state, "done"
        try:
            if state == "context":
                out = self._context.step(token)
                if not self._context.complete:
                    self._state = "context"
                    return SaslStep(challenge=bytes(out or b""))
                self.user = str(self._context.initiator_name)
                if out:  # the AP-REP: the client answers it with an empty message
                    self._state = "offer"
                    return SaslStep(challenge=bytes(out))
                return self._offer()
            if state == "offer":
                return self._offer()
            if state == "reply":
                return self._reply(bytes(self._context.unwrap(token).message))
        except self._gss_error as e:
            return SaslStep(failure=f"gss-error: {_gss_minor(e)}")
        return SaslStep(failure="unexpected-token")

    def _offer(self) -> SaslStep:
        self._state = "reply"
        offer = struct.pack(">I", _GSS_MAX_BUFFER)
        offer = bytes([_GSS_OFFERED_LAYERS]) + offer[1:]
        return SaslStep(challenge=bytes(self._context.wrap(offer, False).message))

    def _reply(self, reply: bytes) -> SaslStep:
        if len(reply) < 4:
            return SaslStep(failure="invalid-security-layer-reply")
        layer = reply[0]
        if layer != _GSS_NO_SECURITY_LAYER or not layer & _GSS_OFFERED_LAYERS:
            return SaslStep(failure=f"security-layer-not-offered: {layer:#04x}")
        try:
            authorization_id = reply[4:].decode("utf-8")
        except UnicodeDecodeError:
            return SaslStep(failure="invalid-encoding")
        return SaslStep(
            complete=True,
            principal=self.user,
            authorization_id=authorization_id,
            security_layer=reply[:4],
        )


def _gss_minor(error: Exception) -> str:
    """The Kerberos library's own words of a python-gssapi error (its minor status)."""
    text = str(error)
    marker = text.rfind("Minor (")
    return text[marker:].split("):", 1)[-1].strip() if marker >= 0 else text


def gssapi_acceptor_factory(keytab: str | os.PathLike[str]) -> tuple[Callable[[], Any], type[Exception]]:
    """``(new_acceptor, GSSError)``: acceptor contexts for any service principal in ``keytab``
    (imports python-gssapi now; the Kerberos configuration comes from KRB5_CONFIG)."""
    import gssapi
    from gssapi.raw.misc import GSSError

    credentials = gssapi.Credentials(usage="accept", store={"keytab": os.fspath(keytab)})

    def new_acceptor() -> Any:
        return gssapi.SecurityContext(creds=credentials, usage="accept")

    return new_acceptor, GSSError


# --- the log ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LoginRecord:
    """One finished login attempt on the door. ``time`` is epoch seconds."""

    connection_id: int
    user: str | None
    mechanism: str
    success: bool
    reason: str
    time: float
    reauthentication: bool = False
    session_lifetime_ms: int = 0
    #: GSSAPI: the authorization id the client sent, and its security-layer reply's first 4 octets
    authorization_id: str | None = None
    security_layer: bytes | None = None


@dataclass(frozen=True, slots=True)
class ConnectionRecord:
    """One client connection: when it opened and closed, why it closed, who it logged in as."""

    connection_id: int
    peer: tuple[str, int]
    opened_at: float
    closed_at: float | None = None
    close_reason: str = ""
    principal: str | None = None
    client_id: str | None = None
    forwarded_requests: int = 0


# --- the door ---------------------------------------------------------------------------------------------


class SaslFrontDoor:
    """A SASL-authenticating Kafka proxy on 127.0.0.1 (see the module docstring).

    ``users`` maps user names to passwords (PLAIN and SCRAM). ``upstream`` is the broker's port (or
    ``(host, port)``) and may be set later with :meth:`set_upstream`, before clients connect.
    ``session_lifetime_ms`` (0: sessions never expire) may be changed at any time and applies to later
    logins; for OAUTHBEARER the session also ends when the token expires, as in Kafka. ``clock`` (seconds,
    monotonic) decides when a session has expired; tests may pass a fake one. ``mechanisms`` may also
    include SCRAM-SHA-1, which Kafka does not offer, and GSSAPI, which needs ``gssapi_keytab``: the keytab
    of the broker's service principals (``kafka/<host>@REALM``; any principal in it is accepted).
    """

    def __init__(
        self,
        users: Mapping[str, str],
        *,
        upstream: int | tuple[str, int] | None = None,
        mechanisms: Iterable[str] = DEFAULT_MECHANISMS,
        scram_iterations: int = _SCRAM_MIN_ITERATIONS,
        session_lifetime_ms: int = 0,
        token_validator: TokenValidator | None = None,
        port: int = 0,
        clock: Callable[[], float] = time.monotonic,
        gssapi_keytab: str | os.PathLike[str] | None = None,
    ) -> None:
        self.users: dict[str, str] = dict(users)
        self.mechanisms: tuple[str, ...] = tuple(m.upper() for m in mechanisms)
        for mechanism in self.mechanisms:
            if mechanism not in ("PLAIN", "OAUTHBEARER", "GSSAPI") and mechanism not in _SCRAM_HASHES:
                raise ValueError(f"the front door does not implement SASL mechanism {mechanism!r}")
        self._gssapi: tuple[Callable[[], Any], type[Exception]] | None = None
        if "GSSAPI" in self.mechanisms:
            if gssapi_keytab is None:
                raise ValueError("GSSAPI needs gssapi_keytab: the keytab of the broker's service principals")
            self._gssapi = gssapi_acceptor_factory(gssapi_keytab)
        if scram_iterations < _SCRAM_MIN_ITERATIONS:
            raise ValueError(f"scram_iterations must be at least {_SCRAM_MIN_ITERATIONS} (RFC 7677)")
        self.session_lifetime_ms = session_lifetime_ms
        self.clock = clock
        self.token_validator: TokenValidator = token_validator or unsecured_jwt_validator()
        self._scram: dict[str, dict[str, ScramCredential]] = {
            m: {
                user: ScramCredential.from_password(m, password, iterations=scram_iterations)
                for user, password in self.users.items()
            }
            for m in self.mechanisms
            if m in _SCRAM_HASHES
        }
        self._upstream: tuple[str, int] | None = None
        if upstream is not None:
            self.set_upstream(upstream)
        self._requested_port = port
        self._listener: socket.socket | None = None
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        self._accept_thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._ids = itertools.count(1)
        self._open: dict[int, _Connection] = {}
        self._connections: dict[int, ConnectionRecord] = {}
        self._logins: list[LoginRecord] = []

    # --- life cycle ---

    def start(self) -> Self:
        """Listen on 127.0.0.1 (a free port unless one was given). Returns self; no-op if running."""
        if self._listener is not None:
            return self
        listener = socket.create_server((_HOST, self._requested_port))
        self._wake_r, self._wake_w = socket.socketpair()
        self._listener = listener
        self._stopping.clear()
        self._accept_thread = threading.Thread(
            target=self._accept_loop, name=f"sasl-front-door-{self.port}", daemon=True
        )
        self._accept_thread.start()
        return self

    def stop(self) -> None:
        """Stop listening and close every connection (both sides). Idempotent."""
        listener = self._listener
        if listener is None:
            return
        self._stopping.set()
        if self._wake_w is not None:
            with contextlib.suppress(OSError):
                self._wake_w.send(b"x")
        if self._accept_thread is not None:
            self._accept_thread.join(_JOIN_TIMEOUT_S)
        listener.close()
        for sock in (self._wake_r, self._wake_w):
            if sock is not None:
                sock.close()
        self._listener = self._wake_r = self._wake_w = None
        with self._lock:
            connections = list(self._open.values())
        for conn in connections:
            conn.close("front door stopped")
        for conn in connections:
            conn.join(_JOIN_TIMEOUT_S)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def set_upstream(self, upstream: int | tuple[str, int]) -> None:
        """Where to forward: a port on 127.0.0.1, or ``(host, port)``. Applies to new connections."""
        self._upstream = (_HOST, upstream) if isinstance(upstream, int) else upstream

    @property
    def upstream(self) -> tuple[str, int] | None:
        return self._upstream

    @property
    def port(self) -> int:
        if self._listener is None:
            raise RuntimeError("the front door has not been started")
        port: int = self._listener.getsockname()[1]
        return port

    @property
    def bootstrap_servers(self) -> str:
        return f"{_HOST}:{self.port}"

    # --- the log ---

    def logins(self, since: int = 0) -> list[LoginRecord]:
        """Login attempts, oldest first, from index ``since`` (see :meth:`log_position`)."""
        with self._lock:
            return self._logins[since:]

    def log_position(self) -> int:
        """The number of login records so far: pass it to :meth:`logins` / :meth:`wait_for_login`."""
        with self._lock:
            return len(self._logins)

    def connections(self) -> list[ConnectionRecord]:
        """Every connection accepted so far, oldest first, open ones with ``closed_at`` None."""
        with self._lock:
            return list(self._connections.values())

    def wait_for_login(
        self,
        *,
        user: str | None = None,
        mechanism: str | None = None,
        success: bool | None = None,
        reauthentication: bool | None = None,
        since: int = 0,
        timeout: float = 10.0,
    ) -> LoginRecord:
        """The first login record from index ``since`` matching every given field.

        Raises TimeoutError when none turns up within ``timeout`` seconds.
        """

        def match(r: LoginRecord) -> bool:
            return (
                (user is None or r.user == user)
                and (mechanism is None or r.mechanism == mechanism.upper())
                and (success is None or r.success == success)
                and (reauthentication is None or r.reauthentication == reauthentication)
            )

        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for record in self._logins[since:]:
                    if match(record):
                        return record
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(
                        f"no login with user={user} mechanism={mechanism} success={success} within "
                        f"{timeout} s; logins: {self._logins[since:]}"
                    )
                self._changed.wait(remaining)

    def wait_for_closed(self, connection_id: int, timeout: float = 10.0) -> ConnectionRecord:
        """Wait until connection ``connection_id`` is closed; its record. Raises TimeoutError."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                record = self._connections.get(connection_id)
                if record is not None and record.closed_at is not None:
                    return record
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"connection {connection_id} still open after {timeout} s")
                self._changed.wait(remaining)

    # --- used by connections ---

    def _new_mechanism(self, mechanism: str) -> SaslServerMechanism:
        if mechanism == "PLAIN":
            return PlainServer(self.users)
        if mechanism == "OAUTHBEARER":
            return OAuthBearerServer(self.token_validator)
        if mechanism == "GSSAPI":
            assert self._gssapi is not None
            return GssapiServer(*self._gssapi)
        store = self._scram[mechanism]
        return ScramServer(mechanism, store.get)

    def _record_login(self, record: LoginRecord) -> None:
        with self._changed:
            self._logins.append(record)
            self._changed.notify_all()

    def _update_connection(self, connection_id: int, **changes: Any) -> None:
        with self._changed:
            record = self._connections.get(connection_id)
            if record is not None:
                self._connections[connection_id] = replace(record, **changes)
            self._changed.notify_all()

    def _closed(self, connection_id: int, reason: str, forwarded: int) -> None:
        with self._changed:
            self._open.pop(connection_id, None)
            record = self._connections.get(connection_id)
            if record is not None:
                self._connections[connection_id] = replace(
                    record, closed_at=time.time(), close_reason=reason, forwarded_requests=forwarded
                )
            self._changed.notify_all()

    # --- accepting ---

    def _accept_loop(self) -> None:
        listener, wake = self._listener, self._wake_r
        assert listener is not None and wake is not None
        with selectors.DefaultSelector() as selector:
            selector.register(listener, selectors.EVENT_READ)
            selector.register(wake, selectors.EVENT_READ)
            while not self._stopping.is_set():
                for key, _ in selector.select():
                    if key.fileobj is wake or self._stopping.is_set():
                        return
                    try:
                        sock, peer = listener.accept()
                    except OSError:
                        continue
                    self._serve(sock, peer)

    def _serve(self, sock: socket.socket, peer: tuple[str, int]) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._changed:
            connection_id = next(self._ids)
            conn = _Connection(self, connection_id, sock)
            self._open[connection_id] = conn
            self._connections[connection_id] = ConnectionRecord(
                connection_id=connection_id, peer=(peer[0], peer[1]), opened_at=time.time()
            )
            self._changed.notify_all()
        conn.start()


@dataclass(slots=True)
class _Slot:
    """A response owed to the client, in request order. ``data`` None: still awaited from upstream."""

    correlation_id: int | None
    data: bytes | None
    api_key: int = -1
    api_version: int = 0
    close_after: str | None = None  # close the connection with this reason once sent


@dataclass(slots=True)
class _Auth:
    mechanism: str = ""
    server: SaslServerMechanism | None = None
    raw_tokens: bool = False  # after SaslHandshake v0: tokens come as raw size-prefixed frames
    principal: str | None = None  # the authenticated principal
    authenticated_mechanism: str = ""
    session_expires: float | None = None  # monotonic
    reauthenticating: bool = False


class _Connection:
    """One client connection: a reader thread per side; responses written in request order."""

    def __init__(self, door: SaslFrontDoor, connection_id: int, sock: socket.socket) -> None:
        self.door = door
        self.id = connection_id
        self.client = sock
        self.upstream: socket.socket | None = None
        self.auth = _Auth()
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._slots: collections.deque[_Slot] = collections.deque()
        self._closed = False
        self._forwarded = 0
        self._client_id_logged = False
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        self._spawn(self._client_loop, f"sasl-door-{self.id}-client")

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def join(self, timeout: float) -> None:
        for thread in list(self._threads):
            if thread is not threading.current_thread():
                thread.join(timeout)

    def close(self, reason: str) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            forwarded = self._forwarded
        for sock in (self.client, self.upstream):
            if sock is None:
                continue
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        self.door._closed(self.id, reason, forwarded)

    # --- client side ---

    def _client_loop(self) -> None:
        reason = "client closed the connection"
        try:
            while True:
                frame = _recv_frame(self.client)
                if frame is None:
                    break
                stop = self._handle(frame)
                if stop is not None:
                    reason = stop
                    if stop.startswith("!"):  # close now, without waiting for owed answers
                        self.close(stop[1:])
                    return
        except (OSError, ValueError, KafkaError) as e:
            reason = f"client side: {type(e).__name__}: {e}"
        self.close(reason)

    def _handle(self, frame: bytes) -> str | None:
        """Act on one client frame; returns a close reason when the reader must stop.

        A reason starting with '!' asks for an immediate close; otherwise a queued answer closes the
        connection once it has been sent.
        """
        auth = self.auth
        if auth.raw_tokens:
            return self._raw_token(frame)
        if len(frame) < _REQUEST_HEADER.size:
            return f"!request of {len(frame)} bytes is too short"
        api_key, api_version, correlation_id = _REQUEST_HEADER.unpack_from(frame)
        if not self._client_id_logged:
            self._client_id_logged = True
            with contextlib.suppress(KafkaError, ValueError):
                header = RequestHeader.decode(Reader(frame), request_header_version(api_key, api_version))
                self.door._update_connection(self.id, client_id=header.client_id)
        if api_key == ApiKey.SASL_HANDSHAKE:
            return self._handshake(frame, api_version, correlation_id)
        if api_key == ApiKey.SASL_AUTHENTICATE:
            return self._authenticate(frame, api_version, correlation_id)
        if auth.session_expires is not None and self.door.clock() >= auth.session_expires:
            return f"!request with API key {api_key} after the session expired (KIP-368)"
        if auth.principal is None and api_key != ApiKey.API_VERSIONS:
            return f"!request with API key {api_key} before authentication"
        self._forward(frame, api_key, api_version, correlation_id)
        return None

    def _handshake(self, frame: bytes, version: int, correlation_id: int) -> str | None:
        auth = self.auth
        reader = Reader(frame)
        RequestHeader.decode(reader, request_header_version(ApiKey.SASL_HANDSHAKE, version))
        request = SaslHandshakeRequest.decode(reader, version)
        mechanism = request.mechanism.upper()
        close: str | None = None
        error = 0
        enabled = list(self.door.mechanisms)
        if auth.server is not None:
            error, close = _ILLEGAL_SASL_STATE, "SaslHandshake during a SASL exchange"
        elif auth.principal is not None:
            if version < 1:
                error, close = _ILLEGAL_SASL_STATE, "re-authentication needs SaslHandshake v1"
            elif mechanism != auth.authenticated_mechanism:
                error, close = _UNSUPPORTED_SASL_MECHANISM, "re-authentication changed the mechanism"
                enabled = [auth.authenticated_mechanism]
            else:
                auth.reauthenticating = True
        elif mechanism not in self.door.mechanisms:
            error, close = _UNSUPPORTED_SASL_MECHANISM, f"unsupported SASL mechanism {request.mechanism!r}"
        if error:
            if close is not None:
                self._log_login(mechanism, None, False, close)
        else:
            auth.mechanism = mechanism
            auth.server = self.door._new_mechanism(mechanism)
            auth.raw_tokens = version == 0
        response = SaslHandshakeResponse(error_code=error, mechanisms=enabled)
        self._reply(correlation_id, ApiKey.SASL_HANDSHAKE, version, response, close)
        return close

    def _authenticate(self, frame: bytes, version: int, correlation_id: int) -> str | None:
        auth = self.auth
        reader = Reader(frame)
        RequestHeader.decode(reader, request_header_version(ApiKey.SASL_AUTHENTICATE, version))
        request = SaslAuthenticateRequest.decode(reader, version)
        server = auth.server
        if server is None:
            close = "SaslAuthenticate without a SaslHandshake"
            response = SaslAuthenticateResponse(error_code=_ILLEGAL_SASL_STATE, error_message=close)
            self._reply(correlation_id, ApiKey.SASL_AUTHENTICATE, version, response, close)
            return close
        step = server.step(request.auth_bytes)
        outcome = self._finish_step(server, step)
        if outcome is None:  # the exchange goes on
            response = SaslAuthenticateResponse(error_message=None, auth_bytes=step.challenge)
            self._reply(correlation_id, ApiKey.SASL_AUTHENTICATE, version, response)
            return None
        success, reason, lifetime_ms = outcome
        if success:
            response = SaslAuthenticateResponse(
                error_message=None, auth_bytes=step.challenge, session_lifetime_ms=lifetime_ms
            )
            self._reply(correlation_id, ApiKey.SASL_AUTHENTICATE, version, response)
            return None
        message = f"Authentication failed: {reason} (SASL mechanism {server.mechanism})"
        response = SaslAuthenticateResponse(
            error_code=_SASL_AUTHENTICATION_FAILED, error_message=message, auth_bytes=step.challenge
        )
        close = f"authentication failed: {reason}"
        self._reply(correlation_id, ApiKey.SASL_AUTHENTICATE, version, response, close)
        return close

    def _raw_token(self, token: bytes) -> str | None:
        """SaslHandshake v0 mode: the frame is a bare SASL token, answered with a bare token."""
        auth = self.auth
        server = auth.server
        assert server is not None
        step = server.step(token)
        outcome = self._finish_step(server, step)
        if outcome is not None and not outcome[0]:
            return f"!authentication failed: {outcome[1]}"  # legacy mode: no error frame, just close
        if outcome is not None:
            auth.raw_tokens = False
        self._queue(_Slot(None, _SIZE.pack(len(step.challenge)) + step.challenge))
        return None

    def _finish_step(self, server: SaslServerMechanism, step: SaslStep) -> tuple[bool, str, int] | None:
        """Book-keeping after a mechanism step: None while the exchange goes on, else
        ``(success, reason, session_lifetime_ms)``; logs the login."""
        auth = self.auth
        if not step.complete and step.failure is None:
            return None
        auth.server = None
        reauth = auth.reauthenticating
        auth.reauthenticating = False
        if step.failure is not None:
            self._log_login(server.mechanism, server.user, False, step.failure, reauth)
            return False, step.failure, 0
        principal = step.principal
        if reauth and principal != auth.principal:
            reason = f"re-authentication changed the principal from {auth.principal!r} to {principal!r}"
            self._log_login(server.mechanism, principal, False, reason, reauth)
            return False, reason, 0
        lifetime_ms = max(0, int(self.door.session_lifetime_ms))
        if lifetime_ms and step.expires_at is not None:
            lifetime_ms = max(1, min(lifetime_ms, int((step.expires_at - time.time()) * 1000)))
        auth.principal = principal
        auth.authenticated_mechanism = server.mechanism
        auth.session_expires = self.door.clock() + lifetime_ms / 1000 if lifetime_ms else None
        self.door._update_connection(self.id, principal=principal)
        self._log_login(server.mechanism, principal, True, "ok", reauth, lifetime_ms, step)
        return True, "ok", lifetime_ms

    def _log_login(
        self,
        mechanism: str,
        user: str | None,
        success: bool,
        reason: str,
        reauth: bool = False,
        lifetime_ms: int = 0,
        step: SaslStep | None = None,
    ) -> None:
        self.door._record_login(
            LoginRecord(
                authorization_id=step.authorization_id if step is not None else None,
                security_layer=step.security_layer if step is not None else None,
                connection_id=self.id,
                user=user,
                mechanism=mechanism,
                success=success,
                reason=reason,
                time=time.time(),
                reauthentication=reauth,
                session_lifetime_ms=lifetime_ms,
            )
        )

    # --- forwarding ---

    def _forward(self, frame: bytes, api_key: int, api_version: int, correlation_id: int) -> None:
        upstream = self._ensure_upstream()
        expects_answer = api_key != ApiKey.PRODUCE or _produce_acks(frame, api_version) != 0
        with self._lock:
            if expects_answer:
                self._slots.append(_Slot(correlation_id, None, api_key, api_version))
            self._forwarded += 1
        upstream.sendall(_SIZE.pack(len(frame)) + frame)

    def _ensure_upstream(self) -> socket.socket:
        if self.upstream is not None:
            return self.upstream
        address = self.door.upstream
        if address is None:
            raise ConnectionError("the front door has no upstream broker (set_upstream was not called)")
        sock = socket.create_connection(address, timeout=_UPSTREAM_CONNECT_TIMEOUT_S)
        sock.settimeout(None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            closed = self._closed
            if not closed:
                self.upstream = sock
        if closed:
            sock.close()
            raise ConnectionError("connection closed while connecting upstream")
        self._spawn(self._upstream_loop, f"sasl-door-{self.id}-upstream")
        return sock

    def _upstream_loop(self) -> None:
        upstream = self.upstream
        assert upstream is not None
        reason = "upstream closed the connection"
        try:
            while True:
                frame = _recv_frame(upstream)
                if frame is None:
                    break
                if len(frame) < _CORRELATION_ID.size:
                    reason = "upstream sent a frame too short for a response"
                    break
                (correlation_id,) = _CORRELATION_ID.unpack_from(frame)
                with self._lock:
                    slot = next(
                        (s for s in self._slots if s.data is None and s.correlation_id == correlation_id),
                        None,
                    )
                if slot is None:
                    reason = f"upstream answered correlation id {correlation_id}, which nobody awaits"
                    break
                if slot.api_key == ApiKey.API_VERSIONS:
                    frame = _patch_api_versions(frame, slot.api_version)
                with self._lock:
                    slot.data = _SIZE.pack(len(frame)) + frame
                self._flush()
        except (OSError, ValueError) as e:
            reason = f"upstream side: {type(e).__name__}: {e}"
        self.close(reason)

    # --- answering in order ---

    def _reply(
        self, correlation_id: int, api_key: int, version: int, response: Any, close_after: str | None = None
    ) -> None:
        w = Writer()
        ResponseHeader(correlation_id=correlation_id).encode(w, response_header_version(api_key, version))
        response.encode(w, version)
        payload = w.getvalue()
        self._queue(_Slot(correlation_id, _SIZE.pack(len(payload)) + payload, close_after=close_after))

    def _queue(self, slot: _Slot) -> None:
        with self._lock:
            self._slots.append(slot)
        self._flush()

    def _flush(self) -> None:
        with self._send_lock:
            while True:
                ready: list[_Slot] = []
                with self._lock:
                    while self._slots and self._slots[0].data is not None:
                        ready.append(self._slots.popleft())
                if not ready:
                    return
                for slot in ready:
                    assert slot.data is not None
                    try:
                        self.client.sendall(slot.data)
                    except OSError as e:
                        self.close(f"writing to the client: {e}")
                        return
                    if slot.close_after is not None:
                        self.close(slot.close_after)
                        return


def _recv_exactly(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:])
        if k == 0:
            return None
        got += k
    return bytes(buf)


def _recv_frame(sock: socket.socket) -> bytes | None:
    """One size-prefixed frame's body, or None at a clean end of stream."""
    try:
        prefix = _recv_exactly(sock, 4)
    except OSError:
        return None
    if prefix is None:
        return None
    (size,) = _SIZE.unpack(prefix)
    if not 0 <= size <= _MAX_FRAME:
        raise ValueError(f"frame size {size} is not plausible Kafka framing")
    body = _recv_exactly(sock, size)
    if body is None:
        raise ConnectionError("connection closed in the middle of a frame")
    return body


def _produce_acks(frame: bytes, version: int) -> int | None:
    """The ``acks`` of a Produce request frame (None when it cannot be read)."""
    try:
        reader = Reader(frame)
        RequestHeader.decode(reader, request_header_version(ApiKey.PRODUCE, version))
        if version >= 3:
            flexible_from = REQUESTS[ApiKey.PRODUCE].FLEXIBLE_VERSION
            if flexible_from is not None and version >= flexible_from:
                reader.compact_nullable_string()
            else:
                reader.nullable_string()
        return reader.int16()
    except (KafkaError, ValueError):
        return None


def _patch_api_versions(frame: bytes, version: int) -> bytes:
    """Make an upstream ApiVersions answer list the SASL versions the door speaks.

    Error answers (e.g. UNSUPPORTED_VERSION, which is encoded as v0) and versions kaflux cannot decode
    pass through unchanged.
    """
    if len(frame) < 6 or struct.unpack_from(">h", frame, 4)[0] != 0:
        return frame
    if not ApiVersionsResponse.MIN_VERSION <= version <= ApiVersionsResponse.MAX_VERSION:
        return frame
    try:
        reader = Reader(frame)
        header = ResponseHeader.decode(reader, response_header_version(ApiKey.API_VERSIONS, version))
        response = ApiVersionsResponse.decode(reader, version)
    except KafkaError:
        return frame
    wanted = {
        int(ApiKey.SASL_HANDSHAKE): _SASL_HANDSHAKE_VERSIONS,
        int(ApiKey.SASL_AUTHENTICATE): _SASL_AUTHENTICATE_VERSIONS,
    }
    keys = [k for k in response.api_keys if k.api_key not in wanted]
    keys += [ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in wanted.items()]
    response.api_keys = sorted(keys, key=lambda k: k.api_key)
    w = Writer()
    header.encode(w, response_header_version(ApiKey.API_VERSIONS, version))
    response.encode(w, version)
    return w.getvalue()
