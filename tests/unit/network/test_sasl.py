"""SASL client mechanisms and the authenticator (pure), the security settings, and secrets
never shown: RFC 7677's SCRAM-SHA-256 example, PLAIN, OAUTHBEARER, JAAS lines, redaction."""

from __future__ import annotations

import base64
import json

import pytest

from kaflux.config import ConsumerConfig, ProducerConfig, parse_jaas_config
from kaflux.errors import (
    AuthenticationError,
    ConfigError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
)
from kaflux.network.sasl import (
    OAuthBearerMechanism,
    PlainMechanism,
    SaslAuthenticator,
    SaslCredentials,
    ScramMechanism,
    unsecured_jwt,
)
from kaflux.network.security import sasl_credentials_for
from kaflux.network.token_refresh import TokenExpiredError
from kaflux.protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from kaflux.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse

# RFC 7677, section 3
RFC_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_CLIENT_FINAL = (
    "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_scram_sha_256_matches_rfc_7677() -> None:
    scram = ScramMechanism("SCRAM-SHA-256", "user", "pencil", nonce=RFC_NONCE)
    assert scram.first_message() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert scram.respond(RFC_SERVER_FIRST.encode()) == RFC_CLIENT_FINAL.encode()
    assert scram.respond(RFC_SERVER_FINAL.encode()) is None


@pytest.mark.parametrize(
    ("server_final", "match"),
    [
        ("v=" + base64.b64encode(b"\0" * 32).decode(), "signature is wrong"),
        ("e=invalid-proof", "e=invalid-proof"),
    ],
)
def test_scram_rejects_a_wrong_server_signature_or_an_error(server_final: str, match: str) -> None:
    auth = _authenticator(SaslCredentials("SCRAM-SHA-256", "user", "pencil"))
    mechanism = auth._mechanism
    assert isinstance(mechanism, ScramMechanism)
    server_first = f"r={mechanism._nonce}xyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    auth.on_response(SaslAuthenticateResponse(auth_bytes=server_first.encode()))
    auth.next_request()
    with pytest.raises(SaslAuthenticationFailedError, match=match) as info:
        auth.on_response(SaslAuthenticateResponse(auth_bytes=server_final.encode()))
    assert "broker h:1 (node 0)" in str(info.value)
    assert "pencil" not in str(info.value)


@pytest.mark.parametrize(
    "server_first",
    [
        "r=someone-elses-nonce,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
        "r={nonce}x,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1000",
        "r={nonce}x,i=4096",
    ],
    ids=["foreign-nonce", "too-few-iterations", "no-salt"],
)
def test_scram_rejects_a_bad_server_first_message(server_first: str) -> None:
    scram = ScramMechanism("SCRAM-SHA-512", "user", "pencil", nonce="abc")
    auth = SaslAuthenticator(SaslCredentials("SCRAM-SHA-512", "user", "pencil"), "h:1 (node 0)", 2)
    auth.next_request()
    auth.on_response(SaslHandshakeResponse(mechanisms=["SCRAM-SHA-512"]))
    auth._mechanism = scram
    with pytest.raises(SaslAuthenticationFailedError):
        auth.on_response(SaslAuthenticateResponse(auth_bytes=server_first.format(nonce="abc").encode()))


def test_scram_escapes_the_user_name() -> None:
    assert ScramMechanism("SCRAM-SHA-256", "a=b,c", "p", nonce="n").first_message() == b"n,,n=a=3Db=2Cc,r=n"


def test_plain_sends_one_message() -> None:
    plain = PlainMechanism("alice", "secret")
    assert plain.first_message() == b"\0alice\0secret"
    assert plain.respond(b"") is None


def test_oauthbearer_message_and_refusal() -> None:
    bearer = OAuthBearerMechanism("tok")
    assert bearer.first_message() == b"n,,\x01auth=Bearer tok\x01\x01"
    assert bearer.respond(json.dumps({"status": "invalid_token"}).encode()) == b"\x01"


def test_unsecured_jwt_has_alg_none_and_the_claims() -> None:
    token, expiry = unsecured_jwt("alice", 1000.0, 60)
    header, claims, signature = token.split(".")
    pad = lambda part: part + "=" * (-len(part) % 4)  # noqa: E731
    assert json.loads(base64.urlsafe_b64decode(pad(header))) == {"alg": "none"}
    assert json.loads(base64.urlsafe_b64decode(pad(claims))) == {"sub": "alice", "iat": 1000, "exp": 1060}
    assert signature == "" and expiry == 1060


def _authenticator(credentials: SaslCredentials, version: int = 2) -> SaslAuthenticator:
    auth = SaslAuthenticator(credentials, "h:1 (node 0)", version)
    assert auth.next_request() == SaslHandshakeRequest(mechanism=credentials.mechanism)
    auth.on_response(SaslHandshakeResponse(mechanisms=[credentials.mechanism]))
    first = auth.next_request()
    assert isinstance(first, SaslAuthenticateRequest)
    return auth


def test_the_authenticator_runs_handshake_then_authenticate_and_keeps_the_session_lifetime() -> None:
    auth = _authenticator(SaslCredentials("PLAIN", "alice", "secret"))
    assert auth.next_request() is None  # one in flight
    auth.on_response(SaslAuthenticateResponse(session_lifetime_ms=60_000))
    assert auth.done and auth.session_lifetime_ms == 60_000


def test_an_unsupported_mechanism_names_the_ones_offered() -> None:
    auth = SaslAuthenticator(SaslCredentials("SCRAM-SHA-512", "u", "p"), "h:1 (node 0)", 2)
    auth.next_request()
    with pytest.raises(UnsupportedSaslMechanismError, match="PLAIN, SCRAM-SHA-256"):
        auth.on_response(SaslHandshakeResponse(error_code=33, mechanisms=["PLAIN", "SCRAM-SHA-256"]))


def test_a_refused_login_names_broker_mechanism_and_what_to_check() -> None:
    auth = _authenticator(SaslCredentials("PLAIN", "alice", "wrong-password"))
    with pytest.raises(AuthenticationError) as info:
        auth.on_response(
            SaslAuthenticateResponse(error_code=58, error_message="Invalid username or password")
        )
    text = str(info.value)
    for part in ("h:1 (node 0)", "PLAIN", "Invalid username or password", "sasl.username"):
        assert part in text
    assert "wrong-password" not in text


def test_a_failing_token_provider_is_an_authentication_error() -> None:
    def broken() -> tuple[str, float]:
        raise RuntimeError("identity provider down")

    auth = SaslAuthenticator(SaslCredentials("OAUTHBEARER", token_provider=broken), "h:1 (node 0)", 2)
    auth.next_request()
    with pytest.raises(AuthenticationError, match="identity provider down"):
        auth.on_response(SaslHandshakeResponse(mechanisms=["OAUTHBEARER"]))


def test_an_expired_token_is_not_sent_and_the_error_is_not_wrong_credentials() -> None:
    def expired() -> tuple[str, float]:
        raise TokenExpiredError("the OAUTHBEARER token from oauth_cb expired at ...; HTTP 500")

    auth = SaslAuthenticator(SaslCredentials("OAUTHBEARER", token_provider=expired), "h:1 (node 0)", 2)
    auth.next_request()
    with pytest.raises(TokenExpiredError) as caught:
        auth.on_response(SaslHandshakeResponse(mechanisms=["OAUTHBEARER"]))
    assert auth.next_request() is None  # no SaslAuthenticate: nothing goes to the broker
    assert not isinstance(caught.value, SaslAuthenticationFailedError)
    assert "h:1 (node 0) was not attempted" in str(caught.value) and "HTTP 500" in str(caught.value)
    assert "wrong credentials" not in str(caught.value)


# -- configuration ------------------------------------------------------------------------------

BOOT = {"bootstrap.servers": "h:1"}
JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="p\\"w";'


def test_jaas_config_gives_the_credentials() -> None:
    assert parse_jaas_config(JAAS, "SCRAM-SHA-256") == {"username": "alice", "password": 'p"w'}
    config = ConsumerConfig.from_dict(
        {**BOOT, "security.protocol": "sasl_ssl", "sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config": JAAS}
    )
    credentials = sasl_credentials_for(config)
    assert credentials is not None
    assert (credentials.mechanism, credentials.username, credentials.password) == (
        "SCRAM-SHA-256",
        "alice",
        'p"w',
    )


def test_jaas_config_with_the_wrong_module_is_refused_without_quoting_it() -> None:
    with pytest.raises(ConfigError, match="PlainLoginModule") as info:
        parse_jaas_config(JAAS, "PLAIN")
    assert 'p\\"w' not in str(info.value) and 'p"w' not in str(info.value)


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        # Java's default GSSAPI is accepted (test_sasl_gssapi.py); a keytab needs a principal
        (
            {"security.protocol": "SASL_PLAINTEXT", "sasl.kerberos.keytab": "/k.keytab"},
            "sasl.kerberos.principal",
        ),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, "sasl.username"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"}, "oauth_cb"),
        ({"security.protocol": "SSL", "ssl.truststore.location": "/x.jks"}, "ssl.truststore.type"),
        (
            {"security.protocol": "SSL", "ssl.keystore.location": "/x.p12", "ssl.keystore.type": "PKCS12"},
            "ssl.keystore.type",
        ),
        ({"security.protocol": "SSL", "ssl.certificate.location": "/c.pem"}, "ssl.key.location"),
        ({"security.protocol": "KERBEROS"}, "security.protocol"),
    ],
)
def test_security_settings_are_checked(settings: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        ProducerConfig.from_dict({**BOOT, **settings})
    assert info.value.key == key


def test_security_protocol_is_case_insensitive() -> None:
    assert ConsumerConfig.from_dict({**BOOT, "security.protocol": "Ssl"}).uses_tls


def test_repr_of_a_config_hides_every_secret() -> None:
    config = ConsumerConfig.from_dict(
        {
            **BOOT,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": "hunter2-secret",
            "ssl.key.password": "key-secret",
            "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
            'username="alice" password="jaas-secret";',
        }
    )
    text = repr(config)
    assert "alice" in text
    for secret in ("hunter2-secret", "key-secret", "jaas-secret"):
        assert secret not in text
    assert repr(sasl_credentials_for(config)).count("secret") == 0


def test_a_token_login_sends_scram_s_tokenauth_extension() -> None:
    """KIP-48: a delegation-token login is SCRAM with ``tokenauth=true`` in the client-first
    message (after the nonce, as Kafka's ScramMessages writes it); the mechanism names it."""
    from kaflux.network.sasl import SaslCredentials, ScramMechanism

    plain = ScramMechanism("SCRAM-SHA-256", "token-id", "hmac", nonce="abc")
    token = ScramMechanism("SCRAM-SHA-256", "token-id", "hmac", nonce="abc", extensions={"tokenauth": "true"})
    assert plain.first_message() == b"n,,n=token-id,r=abc"
    assert token.first_message() == b"n,,n=token-id,r=abc,tokenauth=true"
    credentials = SaslCredentials("SCRAM-SHA-512", "token-id", "hmac", extensions={"tokenauth": "true"})
    assert credentials.new_mechanism().first_message().endswith(b",tokenauth=true")
