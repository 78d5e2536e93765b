"""SASL client mechanisms and the authentication exchange of one connection. [pure]

:class:`SaslAuthenticator` runs the exchange Kafka uses since KIP-152: a ``SaslHandshake``
request naming the mechanism (v1), then ``SaslAuthenticate`` requests carrying the
mechanism's messages until it is done. It never touches a socket: the connection asks it for
the next request with :meth:`SaslAuthenticator.next_request` and hands it each response with
:meth:`SaslAuthenticator.on_response`. When it is done, :attr:`SaslAuthenticator.session_lifetime_ms`
tells when the broker wants the client to authenticate again (KIP-368; 0: never).

Mechanisms (:class:`SaslMechanism`): PLAIN (RFC 4616), SCRAM-SHA-256 and SCRAM-SHA-512
(RFC 5802, RFC 7677: nonce, salted password, and a check of the server's signature),
OAUTHBEARER (RFC 7628) with a token from a provider, and GSSAPI (Kerberos V5, RFC 4752) over a
GSS-API security context that :class:`GssContext` describes (the real one, on the python-gssapi
library, lives in :mod:`kaflux.network.kerberos`; tests use fakes). Every failure raises a subclass of
:class:`~kaflux.errors.AuthenticationError` whose message names the broker, the mechanism and
what to check; no message ever contains a password or a token.
"""

from __future__ import annotations

import base64
import enum
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
from kaflux.network.token_refresh import TokenExpiredError
from kaflux.protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from kaflux.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from kaflux.state_machine import StateMachine

MECHANISMS = ("GSSAPI", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
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

    def __init__(
        self,
        name: str,
        username: str,
        password: str,
        *,
        nonce: str | None = None,
        extensions: Mapping[str, str] | None = None,
    ) -> None:
        if name not in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            raise ValueError(f"not a SCRAM mechanism: {name}")
        self.name = name
        self._hash = "sha256" if name == "SCRAM-SHA-256" else "sha512"
        self._username = username
        self._password = password
        self._nonce = nonce or secrets.token_urlsafe(24)
        # SCRAM extensions (RFC 5802 section 5.1, as Kafka's ScramMessages): tokenauth=true logs
        # in with a delegation token (KIP-48)
        extra = "".join(f",{key}={value}" for key, value in (extensions or {}).items())
        self._client_first_bare = f"n={_scram_escape(username)},r={self._nonce}{extra}"
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


class GssError(Exception):
    """A GSS-API call failed; the message says what happened and what to do (the shell that
    talks to the Kerberos library words it)."""


class GssContext(Protocol):
    """The initiator side of one GSS-API (Kerberos V5) security context, with mutual
    authentication: what :class:`GssapiMechanism` needs of the library. Methods raise GssError."""

    @property
    def complete(self) -> bool:
        """Whether the context is established."""
        ...

    @property
    def initiator(self) -> str:
        """The client's principal (e.g. ``alice@EXAMPLE.COM``)."""
        ...

    def step(self, token: bytes | None) -> bytes | None:
        """``gss_init_sec_context``: the server's token in (None at first), the next token out
        (None when there is none to send)."""
        ...

    def unwrap(self, message: bytes) -> bytes:
        """``gss_unwrap``: the payload of a server message (its integrity checked)."""
        ...

    def wrap(self, payload: bytes) -> bytes:
        """``gss_wrap`` with integrity only, no confidentiality (``conf_req_flag`` false)."""
        ...


#: ``(service name, broker host) -> context``: a new security context for the hostbased
#: service ``service@host`` (Kerberos principal ``service/host@REALM``)
GssContextFactory = Callable[[str, str], GssContext]

#: RFC 4752 section 3.1 security layers (the first octet of the security-layer messages)
GSS_NO_SECURITY_LAYER = 1
GSS_INTEGRITY_LAYER = 2
GSS_CONFIDENTIALITY_LAYER = 4


class GssapiStep(enum.Enum):
    """Where a GSSAPI exchange is (see :class:`GssapiMechanism`)."""

    START = "start"  # before the first token
    CONTEXT = "context"  # security-context tokens go back and forth
    SECURITY_LAYER = "security-layer"  # established: the broker's security-layer offer is next
    SENT = "sent"  # the client's security-layer reply is out: the broker's last answer is next
    DONE = "done"


#: the moves of a GSSAPI exchange (a context may be established by its first token already)
GSSAPI_TRANSITIONS: dict[GssapiStep, frozenset[GssapiStep]] = {
    GssapiStep.START: frozenset({GssapiStep.CONTEXT, GssapiStep.SECURITY_LAYER}),
    GssapiStep.CONTEXT: frozenset({GssapiStep.CONTEXT, GssapiStep.SECURITY_LAYER}),
    GssapiStep.SECURITY_LAYER: frozenset({GssapiStep.SENT}),
    GssapiStep.SENT: frozenset({GssapiStep.DONE}),
    GssapiStep.DONE: frozenset(),
}


class GssapiMechanism:
    """GSSAPI (Kerberos V5, RFC 4752) as Kafka's Java client runs it.

    First the security context: tokens from ``init_sec_context`` for the broker's service
    principal ``service/host@REALM`` go out, the broker's tokens come back, until the context is
    established (with mutual authentication the broker proves itself too). A last client step
    that yields no token sends an empty message. Then the security-layer step (RFC 4752 section
    3.1): the broker sends a wrapped 4-octet message (the layers it supports as a bit mask, then
    its largest buffer as a 3-octet big-endian number); the client answers with a wrapped message
    choosing "no security layer" (1) with a largest buffer of 0, followed by its authorization id
    (its own principal, as Java sends it). Kafka never uses the integrity or confidentiality
    layers (TLS protects the connection: SASL_SSL). The broker's last answer is empty. The
    steps are :data:`GSSAPI_TRANSITIONS`.
    """

    name = "GSSAPI"

    def __init__(self, service_name: str, host: str, new_context: GssContextFactory) -> None:
        self._service_name = service_name
        self._host = host
        self._new_context = new_context
        self._context: GssContext | None = None
        self._step = StateMachine("GSSAPI exchange", GssapiStep.START, GSSAPI_TRANSITIONS)

    def _context_step(self, context: GssContext, token: bytes | None) -> bytes:
        out = context.step(token)
        self._step.transition_to(GssapiStep.SECURITY_LAYER if context.complete else GssapiStep.CONTEXT)
        return out or b""

    def first_message(self) -> bytes:
        try:
            self._context = self._new_context(self._service_name, self._host)
            return self._context_step(self._context, None)
        except GssError as exc:
            raise MechanismError(str(exc)) from None

    def respond(self, challenge: bytes) -> bytes | None:
        context = self._context
        step = self._step.state
        if context is None or step is GssapiStep.DONE:
            raise MechanismError(f"the broker sent a GSSAPI message out of turn ({step.value})")
        try:
            if step is GssapiStep.CONTEXT:
                return self._context_step(context, challenge)
            if step is GssapiStep.SECURITY_LAYER:
                reply = self.security_layer_reply(context.unwrap(challenge), context.initiator)
                self._step.transition_to(GssapiStep.SENT)
                return context.wrap(reply)
        except GssError as exc:
            raise MechanismError(str(exc)) from None
        self._step.transition_to(GssapiStep.DONE)
        if challenge:
            raise MechanismError("the broker sent a message after the GSSAPI exchange had ended")
        return None

    @staticmethod
    def security_layer_reply(offer: bytes, authorization_id: str) -> bytes:
        """The client's RFC 4752 answer to the server's (unwrapped) security-layer offer:
        ``[1][0, 0, 0]`` (no security layer, no buffer) and the UTF-8 authorization id."""
        if len(offer) != 4:
            raise MechanismError(
                f"the broker's GSSAPI security-layer message has {len(offer)} octets instead of 4 "
                "(RFC 4752): is it a Kafka broker?"
            )
        if not offer[0] & GSS_NO_SECURITY_LAYER:
            raise MechanismError(
                f"the broker offers only SASL security layers (bit mask {offer[0]:#04x}) and not "
                "'no security layer', which Kafka clients need (use SASL_SSL to protect the connection)"
            )
        return bytes([GSS_NO_SECURITY_LAYER, 0, 0, 0]) + authorization_id.encode()


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
    """What a connection needs to log in. ``token_provider`` is used by OAUTHBEARER only;
    ``gss_context_factory`` and ``kerberos_service_name`` by GSSAPI only."""

    mechanism: str
    username: str = ""
    password: str = ""
    token_provider: TokenProvider | None = None
    #: OAUTHBEARER's SASL extensions (RFC 7628 section 3.1), sent with every token; SCRAM's
    #: (``tokenauth=true``: a delegation-token login)
    extensions: Mapping[str, str] = field(default_factory=dict)
    gss_context_factory: GssContextFactory | None = None
    kerberos_service_name: str = "kafka"

    def __repr__(self) -> str:  # never show the secret parts
        return f"SaslCredentials(mechanism={self.mechanism!r}, username={self.username!r})"

    def new_mechanism(self, host: str = "") -> SaslMechanism:
        """A mechanism object for one exchange with the broker at ``host``."""
        if self.mechanism == "GSSAPI":
            if self.gss_context_factory is None:
                raise AuthenticationError("GSSAPI needs Kerberos credentials (a GSS context factory)")
            return GssapiMechanism(self.kerberos_service_name, host, self.gss_context_factory)
        if self.mechanism == "PLAIN":
            return PlainMechanism(self.username, self.password)
        if self.mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            return ScramMechanism(self.mechanism, self.username, self.password, extensions=self.extensions)
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
    """One SASL exchange on one connection (``broker`` names it in errors; ``host`` is the host
    name the client connected to, which GSSAPI names the broker's service principal after)."""

    def __init__(
        self, credentials: SaslCredentials, broker: str, authenticate_version: int, *, host: str = ""
    ) -> None:
        self._credentials = credentials
        self._broker = broker
        self._host = host
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
        elif self._credentials.mechanism == "GSSAPI":
            what = "the Kerberos login (kinit, or sasl.kerberos.keytab and sasl.kerberos.principal)"
        elif self._credentials.extensions.get("tokenauth") == "true":
            return error(
                f"SASL {self._credentials.mechanism} login with a delegation token (tokenauth) to broker "
                f"{self._broker} failed: {detail}. The token may have expired or been expired, or the "
                "token id (user name) and base64 HMAC (password) do not match: create or renew a token "
                "(AdminClient.create_delegation_token / renew_delegation_token) and log in with it."
            )
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
                self._mechanism = self._credentials.new_mechanism(self._host)
                first = self._mechanism.first_message()
            except TokenExpiredError as exc:
                # not the broker's refusal, nor wrong credentials: no valid token to send
                raise TokenExpiredError(
                    f"SASL OAUTHBEARER authentication with broker {self._broker} was not attempted: {exc}"
                ) from None
            except (AuthenticationError, MechanismError) as exc:
                raise self._failure(str(exc)) from None
            self._pending = SaslAuthenticateRequest(auth_bytes=first)
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
