"""OAUTHBEARER with tokens from an OIDC provider (``sasl.oauthbearer.method=oidc``): a local token
endpoint issues signed JWTs and the SASL front door in front of Tansu verifies them. The double is
first proven with confluent-kafka's own OIDC client; then kaflux's producer, consumer and admin
client log in with it, from the keys or from Java's JAAS line, and the failures (endpoint down,
wrong secret) are clear, quick, and never show the secret."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kaflux import AdminClient, Consumer, Producer, TopicPartition
from kaflux.errors import AuthenticationError, KafkaError

from support.oidc_provider import OidcProvider
from support.security_fixtures import SecureTansu

ck = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.integration

SECRET = "s3cr3t-client-secret-value"
WAIT_S = 20.0


@pytest.fixture
def provider() -> Iterator[OidcProvider]:
    p = OidcProvider(clients={"billing": SECRET}).start()
    yield p
    p.stop()


@pytest.fixture
def door(provider: OidcProvider, make_sasl_tansu: Callable[..., SecureTansu]) -> SecureTansu:
    seen: list[dict[str, str]] = []
    validate = provider.validator()

    def recording(token: str, extensions: Any) -> Any:
        seen.append(dict(extensions))
        return validate(token, extensions)

    double = make_sasl_tansu(mechanisms=["OAUTHBEARER"], token_validator=recording)
    double.extensions_seen = seen  # type: ignore[attr-defined]
    return double


def oidc_config(door: SecureTansu, provider: OidcProvider, **overrides: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": door.bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.token.endpoint.url": provider.token_url,
        "sasl.oauthbearer.client.id": "billing",
        "sasl.oauthbearer.client.secret": SECRET,
        "sasl.oauthbearer.scope": "kafka",
    }
    config.update(overrides)
    return config


def test_the_token_endpoint_double_works_for_confluent_kafka(
    door: SecureTansu, provider: OidcProvider
) -> None:
    producer = ck.Producer(oidc_config(door, provider))
    delivered: list[Any] = []
    producer.produce("oidc-ck", b"v", on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(WAIT_S) == 0
    assert delivered == [None]
    assert provider.tokens_issued() >= 1
    assert provider.issued[0].client_id == "billing" and provider.issued[0].scope == "kafka"


def test_clients_log_in_with_oidc_tokens(door: SecureTansu, provider: OidcProvider, topic_name: str) -> None:
    config = oidc_config(door, provider, **{"sasl.oauthbearer.extensions": "traceId=abc,tenant=t1"})
    with Producer(config) as producer:
        producer.send(topic_name, b"over oidc", partition=0).result(WAIT_S)
    with AdminClient(config) as admin:
        assert topic_name in admin.list_topics()
    consumer = Consumer({**config, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic_name, 0)])
        deadline = time.monotonic() + WAIT_S
        values: list[bytes | None] = []
        while not values and time.monotonic() < deadline:
            values = [r.value for r in consumer.poll(0.5)]
        assert values == [b"over oidc"]
    finally:
        consumer.close()
    # one token per client (each fetched once, at construction): steady state asks for no more
    assert provider.tokens_issued() == 3
    assert {"traceId": "abc", "tenant": "t1"} in door.extensions_seen  # type: ignore[attr-defined]


def test_oidc_from_javas_jaas_line(door: SecureTansu, provider: OidcProvider, topic_name: str) -> None:
    config = oidc_config(door, provider)
    for key in ("sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret", "sasl.oauthbearer.scope"):
        del config[key]
    config["sasl.jaas.config"] = (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        f'clientId="billing" clientSecret="{SECRET}" scope="jaas-scope";'
    )
    with Producer(config) as producer:
        producer.send(topic_name, b"jaas").result(WAIT_S)
    assert provider.issued[-1].scope == "jaas-scope"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_endpoint_fails_the_constructor_naming_it(
    door: SecureTansu, provider: OidcProvider
) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/token"
    started = time.monotonic()
    with pytest.raises(AuthenticationError) as caught:
        Producer(oidc_config(door, provider, **{"sasl.oauthbearer.token.endpoint.url": url}))
    assert time.monotonic() - started < 5
    assert url in str(caught.value) and "could not be reached" in str(caught.value)


def test_a_refusing_endpoint_is_named_and_the_secret_never_shown(
    door: SecureTansu, provider: OidcProvider, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    config = oidc_config(door, provider, **{"sasl.oauthbearer.client.secret": "wrong-" + SECRET})
    started = time.monotonic()
    with pytest.raises(AuthenticationError) as caught:
        Consumer(config)
    assert time.monotonic() - started < 5
    message = str(caught.value)
    assert provider.token_url in message and "HTTP 401" in message and "client.secret" in message
    shown = message + repr(caught.value.__cause__) + caplog.text
    assert SECRET not in shown
    provider.refuse_with = 503
    with pytest.raises(AuthenticationError, match="HTTP 503"):
        AdminClient(oidc_config(door, provider))


def test_the_secret_is_kept_out_of_repr_and_metrics(door: SecureTansu, provider: OidcProvider) -> None:
    from kaflux.config import ProducerConfig

    config = oidc_config(door, provider)
    assert SECRET not in repr(ProducerConfig.from_dict(config))
    with Producer(config) as producer:
        assert SECRET not in repr(producer.metrics())


# -- failed refreshes ---------------------------------------------------------------------------------


def _fail(provider: OidcProvider, how: str) -> None:
    if how == "http-500":
        provider.refuse_with = 500
    elif how == "connection-refused":
        provider.go_down()
    else:
        provider.failure = how  # "timeout" or "bad_json"


@pytest.mark.parametrize(
    ("how", "cause"),
    [
        ("http-500", "HTTP 500"),
        ("timeout", "timed out"),
        ("connection-refused", "could not be reached"),
        ("bad_json", "not JSON"),
    ],
)
def test_a_failed_refresh_is_logged_and_an_expired_token_is_not_used(
    provider: OidcProvider, caplog: pytest.LogCaptureFixture, how: str, cause: str
) -> None:
    """The endpoint double fails refreshes four ways; the refresh logic runs on an injected
    clock (the HTTP requests are real)."""
    from kaflux.config import ProducerConfig
    from kaflux.network.backoff import ExponentialBackoff
    from kaflux.network.oidc import ClientCredentialsTokens
    from kaflux.network.security import RefreshingTokens

    caplog.set_level(logging.DEBUG)
    now = [1_000_000.0]
    provider.lifetime_s = 100.0
    client = ProducerConfig.from_dict(
        {
            "bootstrap.servers": "127.0.0.1:9",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.token.endpoint.url": provider.token_url,
            "sasl.oauthbearer.client.id": "billing",
            "sasl.oauthbearer.client.secret": SECRET,
        }
    ).oidc_client()
    endpoint = ClientCredentialsTokens(client, timeout_s=0.5, wall_clock=lambda: now[0])
    tokens = RefreshingTokens(endpoint, lambda: now[0], ExponentialBackoff(1000, 1000, jitter=0.0))
    first = tokens()
    _fail(provider, how)
    now[0] += 80.0  # time to refresh: it fails, the valid token stays in use
    assert tokens() == first
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert provider.token_url in warnings[0] and cause in warnings[0]
    now[0] += 30.0  # expired (and the backoff elapsed): another refresh fails, the token is not used
    with pytest.raises(AuthenticationError) as caught:
        tokens()
    message = str(caught.value)
    assert "expired" in message and cause in message and provider.token_url in message
    shown = [message, repr(caught.value), repr(tokens), repr(endpoint), caplog.text]
    shown += [r.getMessage() for r in caplog.records]
    assert not [text for text in shown if SECRET in text]


def test_a_short_lived_token_that_cannot_be_refreshed_is_never_sent(
    make_sasl_tansu: Callable[..., SecureTansu],
    provider: OidcProvider,
    topic_name: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Tokens live 3 s and the door ends each session when its token expires; the endpoint
    starts failing after the first token. The client re-authenticates with the token while it
    is valid, then fails with an error naming the expiry and the endpoint's answer, and never
    offers the door the expired token."""
    caplog.set_level(logging.WARNING, logger="kaflux")
    provider.lifetime_s = 3.0
    double = make_sasl_tansu(
        mechanisms=["OAUTHBEARER"], token_validator=provider.validator(), session_lifetime_ms=60_000
    )
    assert double.door is not None
    # a long backoff after a failure, so that a retry cannot come before the token expires
    config = oidc_config(
        double,
        provider,
        **{"sasl.login.retry.backoff.ms": 5000, "sasl.login.retry.backoff.max.ms": 5000},
    )
    with AdminClient(config) as admin:
        admin.list_topics(timeout=WAIT_S)
        provider.refuse_with = 500
        error: AuthenticationError | None = None
        deadline = time.monotonic() + 6.0
        while error is None and time.monotonic() < deadline:
            try:
                admin.list_topics(timeout=1.0)
            except AuthenticationError as exc:
                error = exc
            except KafkaError:
                pass
    assert error is not None, "the expired token did not fail the client"
    assert "expired" in str(error) and "HTTP 500" in str(error), str(error)
    refused = [r for r in double.door.logins() if not r.success]
    assert not [r for r in refused if "expired" in r.reason], refused
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(provider.token_url in w and "HTTP 500" in w for w in warnings), warnings
    assert SECRET not in caplog.text and SECRET not in str(error)
