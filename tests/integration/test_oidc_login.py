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
from kaflux.errors import AuthenticationError

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
