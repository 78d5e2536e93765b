"""OAUTHBEARER tokens from an OIDC provider: the OAuth 2 client credentials grant (RFC 6749 4.4),
as Java's KIP-768 login handler and librdkafka's ``sasl.oauthbearer.method=oidc`` fetch them.
[io: one HTTP POST per token, on whichever thread asks for one]

The first token is fetched when the client is built (on the application thread, so a wrong secret
or an unreachable endpoint fails the constructor, as a Java client's login does); later ones when
a connection logs in or re-authenticates after 80 % of the token's life, on the network thread,
bounded by ``sasl.login.connect.timeout.ms`` / ``sasl.login.read.timeout.ms``. A failed refresh
is logged at WARNING (throttled; :mod:`kaflux.network.token_refresh`), keeps the current token
while it is valid and tries again after ``sasl.login.retry.backoff.ms``, doubling up to
``sasl.login.retry.backoff.max.ms``; an expired token is never sent.

The client secret travels only in the request's Basic ``Authorization`` header: it is never
logged, raised, or shown by ``repr`` (nor is a ``user:password@`` part of the endpoint's URL).
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field

from kaflux.config import OidcClient
from kaflux.errors import AuthenticationError

__all__ = ["ClientCredentialsTokens", "TokenEndpointError", "parse_token_response", "token_request"]

#: the most of an endpoint's error body quoted in an error (it may be long HTML)
_MAX_QUOTED = 200


class TokenEndpointError(AuthenticationError):
    """The OIDC token endpoint could not be reached, or refused to issue a token."""


@dataclass(frozen=True, slots=True)
class TokenRequest:
    """One client credentials request: URL, form body and headers (the secret is in the headers)."""

    url: str
    body: bytes
    headers: dict[str, str] = field(repr=False)


def token_request(client: OidcClient) -> TokenRequest:
    """The POST that asks ``client``'s endpoint for a token (client_secret_basic, RFC 6749 2.3.1). [pure]"""
    form = {"grant_type": "client_credentials"}
    if client.scope:
        form["scope"] = client.scope
    quote = urllib.parse.quote  # RFC 6749 appendix B: form-encode both parts before joining
    basic = f"{quote(client.client_id, safe='')}:{quote(client.client_secret, safe='')}"
    return TokenRequest(
        url=client.token_endpoint_url,
        body=urllib.parse.urlencode(form).encode(),
        headers={
            "Authorization": "Basic " + base64.b64encode(basic.encode()).decode(),
            "Content-Type": "application/x-www-form-urlencoded",
            "Accept": "application/json",
        },
    )


def _jwt_expiry(token: str) -> float | None:
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, UnicodeDecodeError):
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    return float(exp) if isinstance(exp, (int, float)) and not isinstance(exp, bool) else None


def parse_token_response(body: bytes, now_s: float, url: str) -> tuple[str, float]:
    """``(access token, expiry as epoch seconds)`` from a token endpoint's JSON answer: the
    earlier of ``expires_in`` and the JWT's ``exp`` claim (what the broker checks). [pure]"""
    try:
        answer = json.loads(body)
    except ValueError:
        raise TokenEndpointError(
            f"the OIDC token endpoint {url} answered with something that is not JSON"
        ) from None
    token = answer.get("access_token") if isinstance(answer, dict) else None
    if not isinstance(token, str) or not token:
        raise TokenEndpointError(f"the OIDC token endpoint {url} answered without an access_token")
    expires_in = answer.get("expires_in")
    expiry = _jwt_expiry(token)
    if isinstance(expires_in, (int, float)) and not isinstance(expires_in, bool) and expires_in > 0:
        # the broker goes by the JWT's exp claim, whole seconds that may come before now + expires_in
        until = now_s + float(expires_in)
        return token, until if expiry is None else min(until, expiry)
    if expiry is None:
        raise TokenEndpointError(
            f"the OIDC token endpoint {url} gave a token without expires_in or an exp claim: "
            "its life is unknown"
        )
    return token, expiry


def _refusal(url: str, exc: urllib.error.HTTPError) -> TokenEndpointError:
    detail = ""
    try:
        answer = json.loads(exc.read() or b"{}")
        if isinstance(answer, dict):
            detail = " ".join(str(answer.get(k, "")) for k in ("error", "error_description")).strip()
    except (ValueError, OSError):
        pass
    hint = (
        "check sasl.oauthbearer.client.id and sasl.oauthbearer.client.secret"
        if exc.code in (400, 401, 403)
        else "check the endpoint URL and that the provider is healthy"
    )
    said = f" ({detail[:_MAX_QUOTED]})" if detail else ""
    return TokenEndpointError(
        f"the OIDC token endpoint {url} refused to issue a token: HTTP {exc.code}{said}; {hint}"
    )


def shown_url(url: str) -> str:
    """``url`` as messages show it: without a ``user:password@`` part. [pure]"""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


class ClientCredentialsTokens:
    """A token provider (``() -> (token, expiry)``) that asks an OIDC endpoint each time it is
    called; :class:`~kaflux.network.security` caches and refreshes what it returns."""

    def __init__(
        self,
        client: OidcClient,
        *,
        timeout_s: float,
        wall_clock: Callable[[], float],
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._request = token_request(client)
        self._timeout_s = timeout_s
        self._clock = wall_clock
        self._ssl = ssl_context
        #: tokens fetched (for tests and metrics; never the token itself)
        self.fetches = 0

    def __repr__(self) -> str:
        return f"ClientCredentialsTokens(url={shown_url(self._request.url)!r})"

    def describe(self) -> str:
        """The endpoint, as messages name it."""
        return f"the OIDC token endpoint {shown_url(self._request.url)}"

    def __call__(self) -> tuple[str, float]:
        url = shown_url(self._request.url)
        request = urllib.request.Request(
            self._request.url, data=self._request.body, headers=self._request.headers, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=self._timeout_s, context=self._ssl) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            raise _refusal(url, exc) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", exc)
            raise TokenEndpointError(
                f"the OIDC token endpoint {url} could not be reached: {reason}; check "
                "sasl.oauthbearer.token.endpoint.url and that the provider is up"
            ) from None
        self.fetches += 1
        return parse_token_response(body, self._clock(), url)
