"""SASL GSSAPI (pure): the token rounds of the security context, RFC 4752's security-layer
messages byte for byte, and every failure as an AuthenticationError that says what to do, against
a fake GSS-API context; and the GSSAPI settings."""

from __future__ import annotations

import pytest

from kaflux.config import ConsumerConfig, ProducerConfig, parse_jaas_config
from kaflux.errors import AuthenticationError, ConfigError
from kaflux.network.sasl import (
    GssapiMechanism,
    GssError,
    MechanismError,
    SaslAuthenticator,
    SaslCredentials,
)
from kaflux.protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from kaflux.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse

PRINCIPAL = "alice@KAFLUX.TEST"
BROKER = "broker1.example:9092 (node 1)"


class FakeContext:
    """A scripted initiator context: ``rounds`` is what each step receives and returns, and
    whether the context is established after it. Wrapping is visible: ``W(...)`` out, ``S(...)``
    in (a bad wrapper fails the integrity check)."""

    def __init__(self, rounds: list[tuple[bytes | None, bytes | None, bool]], initiator: str = PRINCIPAL):
        self._rounds = list(rounds)
        self.complete = False
        self.initiator = initiator
        self.received: list[bytes | None] = []
        self.wrapped: list[bytes] = []

    def step(self, token: bytes | None) -> bytes | None:
        expected, out, complete = self._rounds.pop(0)
        self.received.append(token)
        if token != expected:
            raise GssError(f"Kerberos: unexpected token {token!r}")
        self.complete = complete
        return out

    def unwrap(self, message: bytes) -> bytes:
        if not (message.startswith(b"S(") and message.endswith(b")")):
            raise GssError("Kerberos: the message's integrity check failed")
        return message[2:-1]

    def wrap(self, payload: bytes) -> bytes:
        self.wrapped.append(payload)
        return b"W(" + payload + b")"


class Factory:
    def __init__(self, *contexts: FakeContext, error: str | None = None) -> None:
        self.contexts = list(contexts)
        self.error = error
        self.calls: list[tuple[str, str]] = []

    def __call__(self, service: str, host: str) -> FakeContext:
        self.calls.append((service, host))
        if self.error is not None:
            raise GssError(self.error)
        return self.contexts.pop(0)


def mutual_context() -> FakeContext:
    """Kerberos with mutual authentication: AP-REQ out, AP-REP in, established, nothing to send."""
    return FakeContext([(None, b"AP-REQ", False), (b"AP-REP", None, True)])


def start(factory: Factory, *, service: str = "kafka", host: str = "broker1.example") -> SaslAuthenticator:
    credentials = SaslCredentials("GSSAPI", gss_context_factory=factory, kerberos_service_name=service)
    auth = SaslAuthenticator(credentials, BROKER, 2, host=host)
    assert auth.next_request() == SaslHandshakeRequest(mechanism="GSSAPI")
    auth.on_response(SaslHandshakeResponse(mechanisms=["GSSAPI"]))
    return auth


def sent(auth: SaslAuthenticator) -> bytes:
    request = auth.next_request()
    assert isinstance(request, SaslAuthenticateRequest)
    return bytes(request.auth_bytes)


def test_a_login_runs_the_context_tokens_then_the_rfc_4752_security_layer_step() -> None:
    context = mutual_context()
    factory = Factory(context)
    auth = start(factory, service="kafka", host="broker1.example")
    assert factory.calls == [("kafka", "broker1.example")]  # the service principal kafka/broker1.example
    assert sent(auth) == b"AP-REQ"
    auth.on_response(SaslAuthenticateResponse(auth_bytes=b"AP-REP"))
    assert context.complete
    assert sent(auth) == b""  # established with no token left: an empty message, as Java sends
    # the broker offers every layer and a 64 KiB buffer; the client picks none, buffer 0, its name
    auth.on_response(SaslAuthenticateResponse(auth_bytes=b"S(\x07\x01\x00\x00)"))
    assert sent(auth) == b"W(\x01\x00\x00\x00alice@KAFLUX.TEST)"
    assert not auth.done
    auth.on_response(SaslAuthenticateResponse(auth_bytes=b"", session_lifetime_ms=30_000))
    assert auth.done and auth.session_lifetime_ms == 30_000
    assert context.received == [None, b"AP-REP"]


def test_a_context_that_needs_more_rounds_gets_them() -> None:
    context = FakeContext([(None, b"t1", False), (b"s1", b"t2", False), (b"s2", b"t3", True)])
    auth = start(Factory(context))
    assert sent(auth) == b"t1"
    auth.on_response(SaslAuthenticateResponse(auth_bytes=b"s1"))
    assert sent(auth) == b"t2"
    auth.on_response(SaslAuthenticateResponse(auth_bytes=b"s2"))
    assert sent(auth) == b"t3"  # established, but its last token still goes out
    auth.on_response(SaslAuthenticateResponse(auth_bytes=b"S(\x01\x00\x00\x00)"))
    assert sent(auth) == b"W(\x01\x00\x00\x00alice@KAFLUX.TEST)"
    auth.on_response(SaslAuthenticateResponse())
    assert auth.done


@pytest.mark.parametrize(
    ("offer", "reply"),
    [
        (b"\x01\x00\x00\x00", b"\x01\x00\x00\x00" + PRINCIPAL.encode()),  # only "no security layer"
        (b"\x07\xff\xff\xff", b"\x01\x00\x00\x00" + PRINCIPAL.encode()),  # all three, 16 MiB - 1
        (b"\x05\x00\x10\x00", b"\x01\x00\x00\x00" + PRINCIPAL.encode()),
    ],
)
def test_the_security_layer_reply_is_exactly_rfc_4752s(offer: bytes, reply: bytes) -> None:
    # RFC 4752 section 3.1: octet 1 the chosen layer (1: none), octets 2-4 the largest buffer the
    # client can receive (0 without a layer), then the UTF-8 authorization id
    assert GssapiMechanism.security_layer_reply(offer, PRINCIPAL) == reply


def test_a_non_ascii_authorization_id_is_utf_8() -> None:
    reply = GssapiMechanism.security_layer_reply(b"\x01\x00\x00\x00", "jörg@KAFLUX.TEST")
    assert reply == b"\x01\x00\x00\x00j\xc3\xb6rg@KAFLUX.TEST"


@pytest.mark.parametrize(
    ("offer", "match"),
    [
        (b"\x06\x00\x10\x00", "offers only SASL security layers"),
        (b"\x01\x00\x10", "3 octets instead of 4"),
        (b"\x01\x00\x10\x00\x00", "5 octets instead of 4"),
    ],
)
def test_a_bad_security_layer_offer_is_refused(offer: bytes, match: str) -> None:
    with pytest.raises(MechanismError, match=match):
        GssapiMechanism.security_layer_reply(offer, PRINCIPAL)


def _established(auth: SaslAuthenticator) -> None:
    sent(auth)
    auth.on_response(SaslAuthenticateResponse(auth_bytes=b"AP-REP"))
    sent(auth)


def test_an_offer_without_no_security_layer_fails_the_login_naming_the_broker() -> None:
    auth = start(Factory(mutual_context()))
    _established(auth)
    with pytest.raises(AuthenticationError) as info:
        auth.on_response(SaslAuthenticateResponse(auth_bytes=b"S(\x04\x00\x10\x00)"))
    text = str(info.value)
    assert BROKER in text and "GSSAPI" in text and "offers only SASL security layers" in text


def test_an_offer_whose_integrity_check_fails_fails_the_login() -> None:
    auth = start(Factory(mutual_context()))
    _established(auth)
    with pytest.raises(AuthenticationError, match="integrity check failed"):
        auth.on_response(SaslAuthenticateResponse(auth_bytes=b"\x01\x00\x10\x00"))


def test_a_bad_server_token_fails_the_login() -> None:
    auth = start(Factory(mutual_context()))
    sent(auth)
    with pytest.raises(AuthenticationError, match="unexpected token"):
        auth.on_response(SaslAuthenticateResponse(auth_bytes=b"not an AP-REP"))


def test_a_message_after_the_end_fails_the_login() -> None:
    auth = start(Factory(mutual_context()))
    _established(auth)
    auth.on_response(SaslAuthenticateResponse(auth_bytes=b"S(\x01\x00\x00\x00)"))
    sent(auth)
    with pytest.raises(AuthenticationError, match="after the GSSAPI exchange had ended"):
        auth.on_response(SaslAuthenticateResponse(auth_bytes=b"more"))


def test_a_context_that_cannot_start_fails_at_the_handshake_and_says_what_to_do() -> None:
    factory = Factory(error="Kerberos: Server kafka/broker1.example@R not found in Kerberos database")
    credentials = SaslCredentials("GSSAPI", gss_context_factory=factory)
    auth = SaslAuthenticator(credentials, BROKER, 2, host="broker1.example")
    auth.next_request()
    with pytest.raises(AuthenticationError) as info:
        auth.on_response(SaslHandshakeResponse(mechanisms=["GSSAPI"]))
    text = str(info.value)
    for part in (BROKER, "GSSAPI", "not found in Kerberos database", "kinit", "sasl.kerberos.keytab"):
        assert part in text
    assert "kafka/broker1.example" in text  # the principal the KDC was asked for


def test_the_broker_refusing_the_login_is_an_authentication_error() -> None:
    auth = start(Factory(mutual_context()))
    sent(auth)
    with pytest.raises(AuthenticationError, match="Authentication failed: GSS"):
        auth.on_response(SaslAuthenticateResponse(error_code=58, error_message="Authentication failed: GSS"))


def test_every_login_gets_a_new_context_for_re_authentication() -> None:
    first, second = mutual_context(), mutual_context()
    factory = Factory(first, second)
    credentials = SaslCredentials("GSSAPI", gss_context_factory=factory)
    for _ in range(2):  # the login, then the re-authentication (KIP-368): a new exchange each
        auth = SaslAuthenticator(credentials, BROKER, 2, host="b")
        auth.next_request()
        auth.on_response(SaslHandshakeResponse(mechanisms=["GSSAPI"]))
        _established(auth)
        auth.on_response(SaslAuthenticateResponse(auth_bytes=b"S(\x01\x00\x00\x00)"))
        sent(auth)
        auth.on_response(SaslAuthenticateResponse())
        assert auth.done
    assert factory.calls == [("kafka", "b"), ("kafka", "b")]
    assert first.wrapped == second.wrapped == [b"\x01\x00\x00\x00alice@KAFLUX.TEST"]


def test_gssapi_credentials_without_a_context_factory_fail_clearly() -> None:
    auth = SaslAuthenticator(SaslCredentials("GSSAPI"), BROKER, 2, host="b")
    auth.next_request()
    with pytest.raises(AuthenticationError, match="Kerberos credentials"):
        auth.on_response(SaslHandshakeResponse(mechanisms=["GSSAPI"]))


# -- configuration ------------------------------------------------------------------------------

BOOT = {"bootstrap.servers": "h:1"}
PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="a";'


def test_gssapi_is_java_s_default_mechanism_and_is_accepted() -> None:
    config = ProducerConfig.from_dict({**BOOT, "security.protocol": "SASL_PLAINTEXT"})
    assert config.sasl_mechanism == "gssapi"
    login = config.kerberos_login()
    assert (login.service_name, login.principal, login.keytab) == ("kafka", None, None)


def test_the_kerberos_keys_are_read() -> None:
    config = ConsumerConfig.from_dict(
        {
            **BOOT,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "GSSAPI",
            "sasl.kerberos.service.name": "kafka-prod",
            "sasl.kerberos.principal": "alice@EXAMPLE.COM",
            "sasl.kerberos.keytab": "/etc/security/alice.keytab",
        }
    )
    login = config.kerberos_login()
    assert (login.service_name, login.principal, login.keytab) == (
        "kafka-prod",
        "alice@EXAMPLE.COM",
        "/etc/security/alice.keytab",
    )


def test_java_s_krb5_login_module_line_gives_keytab_principal_and_service() -> None:
    jaas = (
        "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
        'keyTab="/etc/security/alice.keytab" principal="alice@EXAMPLE.COM" serviceName="kafka-x";'
    )
    config = ProducerConfig.from_dict(
        {**BOOT, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI", "sasl.jaas.config": jaas}
    )
    login = config.kerberos_login()
    assert (login.service_name, login.principal, login.keytab) == (
        "kafka-x",
        "alice@EXAMPLE.COM",
        "/etc/security/alice.keytab",
    )
    assert parse_jaas_config(jaas, "GSSAPI")["useKeyTab"] == "true"


def test_a_ticket_cache_jaas_line_uses_the_cache() -> None:
    jaas = "com.sun.security.auth.module.Krb5LoginModule required useTicketCache=true;"
    config = ProducerConfig.from_dict(
        {**BOOT, "security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": jaas}
    )
    login = config.kerberos_login()
    assert login.keytab is None and login.ticket_cache is None  # the default cache


def test_a_jaas_line_may_name_the_ticket_cache() -> None:
    jaas = 'com.sun.security.auth.module.Krb5LoginModule required useTicketCache=true ticketCache="/tmp/cc";'
    config = ProducerConfig.from_dict(
        {**BOOT, "security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": jaas}
    )
    assert config.kerberos_login().ticket_cache == "/tmp/cc"


@pytest.mark.parametrize(
    ("settings", "key", "match"),
    [
        ({"sasl.kerberos.keytab": "/k.keytab"}, "sasl.kerberos.principal", "needs the principal"),
        ({"sasl.kerberos.service.name": "kafka/host"}, "sasl.kerberos.service.name", "without '/'"),
        ({"sasl.kerberos.service.name": ""}, "sasl.kerberos.service.name", "service name alone"),
        (
            {"sasl.kerberos.keytabs": "/k.keytab"},
            "sasl.kerberos.keytabs",
            "did you mean 'sasl.kerberos.keytab'",
        ),
        (
            {"sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;"},
            "sasl.jaas.config",
            "needs keyTab",
        ),
        (
            {"sasl.jaas.config": PLAIN_JAAS},
            "sasl.jaas.config",
            "Krb5LoginModule",
        ),
    ],
)
def test_bad_kerberos_settings_are_refused_by_name(settings: dict[str, object], key: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as info:
        ProducerConfig.from_dict({**BOOT, "security.protocol": "SASL_PLAINTEXT", **settings})
    assert info.value.key == key
