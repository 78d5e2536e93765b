"""OIDC client credentials for OAUTHBEARER, without a network: the token request, reading the
endpoint's answer, the config's checks, and the refresh at 80 % of a token's life with backoff
on endpoint errors (injected time). [test]"""

from __future__ import annotations

import base64
import json
import logging
import random

import pytest

from kaflux.config import ProducerConfig
from kaflux.errors import AuthenticationError, ConfigError
from kaflux.network.backoff import ExponentialBackoff
from kaflux.network.oidc import TokenEndpointError, parse_token_response, shown_url, token_request
from kaflux.network.security import RefreshingTokens
from kaflux.network.token_refresh import TokenExpiredError, TokenRefresh

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


BACKOFF = ExponentialBackoff(1000, 8000, jitter=0.0, rng=random.Random(0))


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
    clock[0] = 100.0  # expired: the error says so, and why the refresh failed
    with pytest.raises(TokenExpiredError, match=r"expired at .* could not be reached"):
        provider()


# -- failed refreshes: logged (throttled), and an expired token is never handed out ------------------


def test_a_failed_refresh_is_logged_at_warning_naming_the_source_and_the_cause(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="kaflux")
    clock = [0.0]
    endpoint = FakeEndpoint(clock)
    provider = tokens(clock, endpoint)
    provider()
    endpoint.down = True
    clock[0] = 80.0
    provider()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "http://idp could not be reached" in warnings[0].getMessage()
    assert "expires in 20.0 s" in warnings[0].getMessage()


def test_warnings_are_throttled_per_source_and_count_the_ones_left_out() -> None:
    refresh = TokenRefresh("the OIDC token endpoint http://idp", BACKOFF, warn_interval_s=30.0)
    assert refresh.fetched(0.0, "t", 1000.0) is None
    first = refresh.failed(800.0, "HTTP 500")
    assert first is not None and "the OIDC token endpoint http://idp failed: HTTP 500" in first
    assert refresh.failed(801.0, "HTTP 500") is None
    assert refresh.failed(803.0, "timed out") is None
    later = refresh.failed(830.0, "connection refused")
    assert later is not None and "connection refused" in later and "(2 more failed since" in later
    assert refresh.failed(831.0, "x") is None
    assert refresh.fetched(832.0, "t2", 2000.0) == (
        "fetched a new OAUTHBEARER token from the OIDC token endpoint http://idp after 5 failed attempts"
    )
    assert refresh.failed(1700.0, "HTTP 503") is not None  # a new run of failures warns at once


def test_the_refresh_is_scheduled_at_80_percent_then_by_the_backoff() -> None:
    refresh = TokenRefresh("src", BACKOFF)
    assert refresh.refresh_due(0.0)  # no token yet
    refresh.fetched(0.0, "t", 100.0)
    assert not refresh.refresh_due(79.9) and refresh.refresh_due(80.0)
    refresh.failed(80.0, "down")
    assert not refresh.refresh_due(80.9) and refresh.refresh_due(81.0)  # 1 s
    refresh.failed(81.0, "down")
    assert not refresh.refresh_due(82.9) and refresh.refresh_due(83.0)  # then 2 s


def test_an_expired_token_is_not_handed_out_even_within_the_backoff() -> None:
    clock = [0.0]
    endpoint = FakeEndpoint(clock)
    backoff = ExponentialBackoff(1000, 60_000, jitter=0.0, rng=random.Random(0))
    provider = RefreshingTokens(endpoint, lambda: clock[0], backoff)
    provider()
    endpoint.down = True
    for t in (80.0, 81.0, 83.0, 87.0, 95.0):  # backoff 1, 2, 4, 8, then 16 s: the next try is at 111
        clock[0] = t
        assert provider()[0] == "token-1"
    calls = endpoint.calls
    clock[0] = 100.5  # expired, and the backoff has not elapsed: no call, and no token either
    with pytest.raises(AuthenticationError) as caught:
        provider()
    assert endpoint.calls == calls
    message = str(caught.value)
    assert "expired" in message and "1970-01-01 00:01:40 UTC" in message
    assert "the last refresh failed: the OIDC token endpoint http://idp could not be reached" in message


def test_an_expired_token_with_a_failed_refresh_raises_naming_expiry_and_cause() -> None:
    refresh = TokenRefresh("the OIDC token endpoint http://idp", BACKOFF)
    refresh.fetched(0.0, "t", 100.0)
    assert refresh.token(98.9) == ("t", 100.0)
    refresh.failed(100.0, "HTTP 500 from the endpoint")
    with pytest.raises(TokenExpiredError) as caught:
        refresh.token(100.0)
    assert "expired at 1970-01-01 00:01:40 UTC" in str(caught.value)
    assert "the last refresh failed: HTTP 500 from the endpoint" in str(caught.value)
    line = refresh.failed(101.0, "x")
    assert line is None  # throttled
    refresh2 = TokenRefresh("src", BACKOFF)
    refresh2.fetched(0.0, "t", 100.0)
    assert "connections cannot log in" in (refresh2.failed(150.0, "down") or "")


def test_a_token_in_its_last_second_is_not_sent_because_the_broker_checks_it_later() -> None:
    """The broker checks the expiry when the login reaches it: a token with 0.5 s left would be
    refused there as wrong credentials, so it is treated as expired here, with the cause."""
    refresh = TokenRefresh("the OIDC token endpoint http://idp", BACKOFF)
    refresh.fetched(0.0, "t", 100.0)
    refresh.failed(80.0, "HTTP 500 from the endpoint")
    assert refresh.token(98.9) == ("t", 100.0)
    with pytest.raises(TokenExpiredError) as caught:
        refresh.token(99.5)
    message = str(caught.value)
    assert "expires at 1970-01-01 00:01:40 UTC, in 0.5 s" in message and "treated as expired" in message
    assert "the last refresh failed: HTTP 500 from the endpoint" in message


def test_a_short_lived_tokens_margin_is_its_last_fifth() -> None:
    """A 3 s token (tests, or a strict provider) keeps 2.4 s of use: the margin is 20 % of its life
    when that is under a second, so the margin never swallows a short token whole."""
    refresh = TokenRefresh("src", BACKOFF)
    refresh.fetched(10.0, "t", 13.0)
    assert refresh.token(12.3) == ("t", 13.0)
    with pytest.raises(TokenExpiredError, match="treated as expired"):
        refresh.token(12.5)


def test_the_first_failure_raises_the_sources_own_error() -> None:
    clock = [0.0]
    endpoint = FakeEndpoint(clock)
    endpoint.down = True
    with pytest.raises(TokenEndpointError, match="could not be reached"):
        tokens(clock, endpoint)()


def test_a_user_and_password_in_the_endpoint_url_are_never_shown() -> None:
    assert shown_url("https://me:pw@idp.example:8443/token?x=1") == "https://idp.example:8443/token?x=1"
    assert shown_url("https://idp.example/token") == "https://idp.example/token"


def test_the_jwts_own_exp_wins_when_it_comes_before_expires_in() -> None:
    claims = base64.urlsafe_b64encode(json.dumps({"exp": 1002}).encode()).rstrip(b"=").decode()
    jwt = f"h.{claims}.s"
    answer = json.dumps({"access_token": jwt, "expires_in": 3}).encode()
    assert parse_token_response(answer, 1000.5, "u") == (jwt, 1002.0)  # the broker checks exp
