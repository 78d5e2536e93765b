"""SASL client mechanisms and the authentication exchange of one connection. [pure]

:class:`SaslAuthenticator` runs the exchange Kafka uses since KIP-152: a ``SaslHandshake``
request naming the mechanism (v1), then ``SaslAuthenticate`` requests carrying the
mechanism's messages until it is done. It never touches a socket: the connection asks it for
the next request with :meth:`SaslAuthenticator.next_request` and hands it each response with
:meth:`SaslAuthenticator.on_response`. When it is done, :attr:`SaslAuthenticator.session_lifetime_ms`
tells when the broker wants the client to authenticate again (KIP-368; 0: never).

Mechanisms (:class:`SaslMechanism`): PLAIN (RFC 4616), SCRAM-SHA-256 and SCRAM-SHA-512
(RFC 5802, RFC 7677: nonce, salted password, and a check of the server's signature), and
OAUTHBEARER (RFC 7628) with a token from a provider. Every failure raises a subclass of
:class:`~kaflux.errors.AuthenticationError` whose message names the broker, the mechanism and
what to check; no message ever contains a password or a token.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from kaflux.errors import (
    AuthenticationError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
    error_for_code,
)
from kaflux.protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from kaflux.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
#: RFC 7677 asks for at least 4096 iterations; fewer means a weak or tampered server-first message
MIN_SCRAM_ITERATIONS = 4096

#: ``() -> (token, expiry as epoch seconds)``: an OAUTHBEARER token provider (``oauth_cb``)
TokenProvider = Callable[[], tuple[str, float]]


class MechanismError(Exception):
    """A mechanism found the server's message unacceptable (turned into an AuthenticationError
    naming the broker by :class:`SaslAuthenticator`)."""


class SaslMechanism(Protocol):
    """One side of a SASL mechanism: each server challenge in, the next client message out."""

    name: str

    def first_message(self) -> bytes:
        """The client's first message."""
        ...

    def respond(self, challenge: bytes) -> bytes | None:
        """The reply to a server message; None when the exchange is complete."""
        ...


class PlainMechanism:
    """PLAIN (RFC 4616): one message, ``authzid NUL user NUL password``."""

    name = "PLAIN"

    def __init__(self, username: str, password: str) -> None:
        self._username = username
        self._password = password

    def first_message(self) -> bytes:
        return b"\0" + self._username.encode() + b"\0" + self._password.encode()

    def respond(self, challenge: bytes) -> bytes | None:
        return None


def _scram_escape(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _scram_attributes(message: str) -> dict[str, str]:
    attributes: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if sep and len(key) == 1:
            attributes.setdefault(key, value)
    return attributes


class ScramMechanism:
    """SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677), client side, without channel binding.

    ``nonce`` is for tests (RFC test vectors); by default a fresh random one is used.
    """

    def __init__(self, name: str, username: str, password: str, *, nonce: str | None = None) -> None:
        if name not in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            raise ValueError(f"not a SCRAM mechanism: {name}")
        self.name = name
        self._hash = "sha256" if name == "SCRAM-SHA-256" else "sha512"
        self._username = username
        self._password = password
        self._nonce = nonce or secrets.token_urlsafe(24)
        self._client_first_bare = f"n={_scram_escape(username)},r={self._nonce}"
        self._server_signature: bytes | None = None
        self._done = False

    def first_message(self) -> bytes:
        return ("n,," + self._client_first_bare).encode()

    def _hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self._hash).digest()

    def respond(self, challenge: bytes) -> bytes | None:
        if self._done:
            return None
        message = challenge.decode("utf-8", errors="replace")
        attributes = _scram_attributes(message)
        if "e" in attributes:
            raise MechanismError(f"the server refused the login: e={attributes['e']}")
        if self._server_signature is None:
            return self._client_final(message, attributes)
        # server-final-message: check that the server knows the password too
        verifier = attributes.get("v")
        if verifier is None or not hmac.compare_digest(base64.b64decode(verifier), self._server_signature):
            raise MechanismError(
                "the server's SCRAM signature is wrong: it does not know this user's credentials "
                "(a misconfigured broker, or not the broker it claims to be)"
            )
        self._done = True
        return None

    def _client_final(self, server_first: str, attributes: dict[str, str]) -> bytes:
        nonce, salt, iterations = attributes.get("r"), attributes.get("s"), attributes.get("i")
        if nonce is None or salt is None or iterations is None or not iterations.isdigit():
            raise MechanismError("the server's first SCRAM message is malformed")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise MechanismError("the server's SCRAM nonce does not extend the client's")
        if int(iterations) < MIN_SCRAM_ITERATIONS:
            raise MechanismError(
                f"the server asks for {iterations} SCRAM iterations, fewer than the minimum "
                f"{MIN_SCRAM_ITERATIONS}"
            )
        salted = hashlib.pbkdf2_hmac(
            self._hash, self._password.encode(), base64.b64decode(salt), int(iterations)
        )
        client_key = self._hmac(salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._client_first_bare},{server_first},{without_proof}".encode()
        signature = self._hmac(stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = self._hmac(self._hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


class OAuthBearerMechanism:
    """OAUTHBEARER (RFC 7628): ``n,,\\x01auth=Bearer <token>\\x01\\x01`` with a provider's token.

    A server that refuses the token answers with a JSON status; the client then sends ``\\x01``
    and the broker fails the exchange.
    """

    name = "OAUTHBEARER"

    def __init__(self, token: str, extensions: Mapping[str, str] | None = None) -> None:
        self._token = token
        self._extensions = dict(extensions or {})
        self._refused: str | None = None

    def first_message(self) -> bytes:
        pairs = "".join(f"{k}={v}\x01" for k, v in self._extensions.items())
        return b"n,,\x01auth=Bearer " + self._token.encode() + b"\x01" + pairs.encode() + b"\x01"

    def respond(self, challenge: bytes) -> bytes | None:
        if not challenge or self._refused is not None:
            return None
        try:
            status = json.loads(challenge)
            self._refused = str(status.get("status", "invalid_token"))
        except (ValueError, AttributeError):
            self._refused = "invalid_token"
        return b"\x01"


def unsecured_jwt(principal: str, now_s: float, lifetime_s: float = 3600.0) -> tuple[str, float]:
    """An unsigned JWT (``alg: none``) for ``principal``, valid for ``lifetime_s``: the
    development mode of OAUTHBEARER (brokers accept it only when configured to)."""

    def part(obj: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj, separators=(",", ":")).encode()).rstrip(b"=").decode()

    expiry = int(now_s + lifetime_s)  # JWT times are whole seconds: report the claim's own value
    claims = {"sub": principal, "iat": int(now_s), "exp": expiry}
    token = part({"alg": "none"}) + "." + part(claims) + "."
    return token, float(expiry)


@dataclass(frozen=True, slots=True)
class SaslCredentials:
    """What a connection needs to log in. ``token_provider`` is used by OAUTHBEARER only."""

    mechanism: str
    username: str = ""
    password: str = ""
    token_provider: TokenProvider | None = None
    #: OAUTHBEARER's SASL extensions (RFC 7628 section 3.1), sent with every token
    extensions: Mapping[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:  # never show the secret parts
        return f"SaslCredentials(mechanism={self.mechanism!r}, username={self.username!r})"

    def new_mechanism(self) -> SaslMechanism:
        """A mechanism object for one exchange."""
        if self.mechanism == "PLAIN":
            return PlainMechanism(self.username, self.password)
        if self.mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            return ScramMechanism(self.mechanism, self.username, self.password)
        if self.mechanism == "OAUTHBEARER":
            if self.token_provider is None:
                raise AuthenticationError("OAUTHBEARER needs a token provider (the oauth_cb setting)")
            try:
                token, _ = self.token_provider()
            except AuthenticationError:
                raise  # e.g. the OIDC token endpoint's refusal, which says what to check
            except Exception as exc:
                raise AuthenticationError(f"the token provider raised {type(exc).__name__}: {exc}") from None
            return OAuthBearerMechanism(token, self.extensions)
        raise UnsupportedSaslMechanismError(f"kaflux does not implement SASL mechanism {self.mechanism!r}")


class SaslAuthenticator:
    """One SASL exchange on one connection (``broker`` names it in errors)."""

    def __init__(self, credentials: SaslCredentials, broker: str, authenticate_version: int) -> None:
        self._credentials = credentials
        self._broker = broker
        self._version = authenticate_version
        self._mechanism: SaslMechanism | None = None
        self._pending: SaslHandshakeRequest | SaslAuthenticateRequest | None = SaslHandshakeRequest(
            mechanism=credentials.mechanism
        )
        self.done = False
        #: from the last SaslAuthenticate response: re-authenticate within this (0: never)
        self.session_lifetime_ms = 0

    def next_request(self) -> SaslHandshakeRequest | SaslAuthenticateRequest | None:
        """The request to send now (None while one is in flight, or when done)."""
        request, self._pending = self._pending, None
        return request

    def _failure(
        self, detail: str, error: type[AuthenticationError] = SaslAuthenticationFailedError
    ) -> Exception:
        what = "sasl.username and sasl.password (or sasl.jaas.config)"
        if self._credentials.mechanism == "OAUTHBEARER":
            what = "the token from oauth_cb (or sasl.oauthbearer.config)"
        return error(
            f"SASL {self._credentials.mechanism} authentication with broker {self._broker} failed: "
            f"{detail}. Check {what}, and that the broker enables this mechanism."
        )

    def on_response(self, response: SaslHandshakeResponse | SaslAuthenticateResponse) -> None:
        """Take the broker's answer; raises AuthenticationError subclasses on failure."""
        if isinstance(response, SaslHandshakeResponse):
            if response.error_code == UnsupportedSaslMechanismError.code:
                raise self._failure(
                    f"the broker does not enable it (it offers {', '.join(response.mechanisms) or 'none'}); "
                    "set sasl.mechanism to one of those",
                    UnsupportedSaslMechanismError,
                )
            if response.error_code != 0:
                raise self._failure(str(error_for_code(response.error_code)()))
            try:
                self._mechanism = self._credentials.new_mechanism()
            except AuthenticationError as exc:
                raise self._failure(str(exc)) from None
            self._pending = SaslAuthenticateRequest(auth_bytes=self._mechanism.first_message())
            return
        assert self._mechanism is not None
        if response.error_code != 0:
            reason = response.error_message or str(error_for_code(response.error_code)())
            raise self._failure(reason)
        try:
            reply = self._mechanism.respond(bytes(response.auth_bytes))
        except MechanismError as exc:
            raise self._failure(str(exc)) from None
        self.session_lifetime_ms = response.session_lifetime_ms if self._version >= 1 else 0
        if reply is None:
            self.done = True
        else:
            self._pending = SaslAuthenticateRequest(auth_bytes=reply)
