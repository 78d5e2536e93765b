"""OIDC client credentials for OAUTHBEARER, without a network: the token request, reading the
endpoint's answer, the config's checks, and the refresh at 80 % of a token's life with backoff
on endpoint errors (injected time). [test]"""

from __future__ import annotations

import base64
import json
import random

import pytest

from kaflux.config import ProducerConfig
from kaflux.errors import ConfigError
from kaflux.network.backoff import ExponentialBackoff
from kaflux.network.oidc import TokenEndpointError, parse_token_response, token_request
from kaflux.network.security import RefreshingTokens

SECRET = "the-client-secret"
BASE = {
    "bootstrap.servers": "127.0.0.1:9092",
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "OAUTHBEARER",
    "sasl.oauthbearer.method": "oidc",
    "sasl.oauthbearer.token.endpoint.url": "https://idp.example/token",
    "sasl.oauthbearer.client.id": "billing app",
    "sasl.oauthbearer.client.secret": SECRET,
    "sasl.oauthbearer.scope": "kafka",
}


def test_the_request_is_a_client_credentials_grant_with_basic_auth() -> None:
    request = token_request(ProducerConfig.from_dict(BASE).oidc_client())
    assert request.url == "https://idp.example/token"
    assert request.body == b"grant_type=client_credentials&scope=kafka"
    scheme, encoded = request.headers["Authorization"].split(" ")
    assert scheme == "Basic"
    assert base64.b64decode(encoded).decode() == f"billing%20app:{SECRET}"
    assert SECRET not in repr(request)


def test_the_expiry_comes_from_expires_in_else_from_the_jwt() -> None:
    assert parse_token_response(b'{"access_token": "t", "expires_in": 60}', 1000.0, "u") == ("t", 1060.0)
    claims = base64.urlsafe_b64encode(json.dumps({"exp": 5000}).encode()).rstrip(b"=").decode()
    jwt = f"h.{claims}.s"
    assert parse_token_response(json.dumps({"access_token": jwt}).encode(), 1000.0, "u") == (jwt, 5000.0)
    with pytest.raises(TokenEndpointError, match="life is unknown"):
        parse_token_response(b'{"access_token": "opaque"}', 0.0, "u")
    with pytest.raises(TokenEndpointError, match="without an access_token"):
        parse_token_response(b'{"error": "x"}', 0.0, "u")


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"sasl.oauthbearer.token.endpoint.url": None}, "sasl.oauthbearer.token.endpoint.url"),
        ({"sasl.oauthbearer.token.endpoint.url": "ftp://x"}, "sasl.oauthbearer.token.endpoint.url"),
        ({"sasl.oauthbearer.client.secret": None}, "sasl.oauthbearer.client.id"),
        ({"oauth_cb": lambda: ("t", 0.0)}, "sasl.oauthbearer.method"),
        ({"sasl.oauthbearer.extensions": "auth=x"}, "sasl.oauthbearer.extensions"),
        ({"sasl.oauthbearer.method": "magic"}, "sasl.oauthbearer.method"),
    ],
)
def test_bad_oidc_settings_are_refused_by_name(change: dict[str, object], key: str) -> None:
    config = {k: v for k, v in {**BASE, **change}.items() if v is not None}
    with pytest.raises(ConfigError) as caught:
        ProducerConfig.from_dict(config)
    assert caught.value.key == key
    assert SECRET not in str(caught.value)


def test_the_jaas_line_gives_the_client_settings() -> None:
    config = {k: v for k, v in BASE.items() if "client" not in k and "scope" not in k}
    config["sasl.jaas.config"] = (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        f'clientId="app" clientSecret="{SECRET}" scope="s1";'
    )
    client = ProducerConfig.from_dict(config).oidc_client()
    assert (client.client_id, client.client_secret, client.scope) == ("app", SECRET, "s1")
    assert SECRET not in repr(client)


class FakeEndpoint:
    """A token source with injected time: each token lives ``lifetime`` seconds; ``down`` fails."""

    def __init__(self, clock: list[float], lifetime: float = 100.0) -> None:
        self.clock = clock
        self.lifetime = lifetime
        self.calls = 0
        self.down = False

    def __call__(self) -> tuple[str, float]:
        self.calls += 1
        if self.down:
            raise TokenEndpointError("the OIDC token endpoint http://idp could not be reached")
        return f"token-{self.calls}", self.clock[0] + self.lifetime


def tokens(clock: list[float], endpoint: FakeEndpoint) -> RefreshingTokens:
    backoff = ExponentialBackoff(1000, 8000, jitter=0.0, rng=random.Random(0))
    return RefreshingTokens(endpoint, lambda: clock[0], backoff)


def test_a_token_is_refreshed_at_80_percent_of_its_life() -> None:
    clock = [1000.0]
    endpoint = FakeEndpoint(clock)
    provider = tokens(clock, endpoint)
    assert provider() == ("token-1", 1100.0)
    clock[0] = 1079.9
    assert provider()[0] == "token-1" and endpoint.calls == 1
    clock[0] = 1080.0
    assert provider() == ("token-2", 1180.0)


def test_a_failed_refresh_keeps_the_valid_token_and_backs_off() -> None:
    clock = [0.0]
    endpoint = FakeEndpoint(clock)
    provider = tokens(clock, endpoint)
    provider()
    endpoint.down = True
    clock[0] = 80.0
    assert provider()[0] == "token-1" and endpoint.calls == 2  # tried, kept the old one
    clock[0] = 80.5
    assert provider()[0] == "token-1" and endpoint.calls == 2  # within the 1 s backoff: no call
    clock[0] = 81.0
    assert provider()[0] == "token-1" and endpoint.calls == 3  # next try; now 2 s backoff
    clock[0] = 82.5
    provider()
    assert endpoint.calls == 3
    endpoint.down = False
    clock[0] = 83.0
    assert provider()[0] == "token-4"


def test_with_no_valid_token_left_the_endpoint_error_is_raised() -> None:
    clock = [0.0]
    endpoint = FakeEndpoint(clock)
    provider = tokens(clock, endpoint)
    provider()
    endpoint.down = True
    clock[0] = 100.0  # expired
    with pytest.raises(TokenEndpointError, match="could not be reached"):
        provider()
