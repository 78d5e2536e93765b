"""When to refresh an OAUTHBEARER token, what to do when a refresh fails, and what to say about
it. [pure: every method takes ``now_s``; the shell in :mod:`kaflux.network.security` reads the
clock, asks the token source and logs what this core tells it to]

A token is refreshed once 80 % of its life has passed (as Java's login refresh thread does). A
failed refresh keeps the current token while it is valid and tries again after the backoff,
doubling per failure (``sasl.login.retry.backoff.ms`` up to ``sasl.login.retry.backoff.max.ms``).

Each failure is worth a WARNING naming the source (the token endpoint's URL) and the cause; they
are throttled to one per :data:`WARN_INTERVAL_S` per source, the next one saying how many were
left out. An expired token is never handed out: once it has expired and a refresh failed, asking
for a token raises :class:`TokenExpiredError`, which says when the token expired and why the last
refresh failed (the broker would only have refused it as "wrong credentials"). A token this close
to its expiry (:data:`LOGIN_MARGIN_S`, or the last 20 % of a short token's life) counts as expired:
the broker checks the expiry when the login reaches it, not when the client sends it.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from kaflux.errors import AuthenticationError
from kaflux.network.backoff import ExponentialBackoff

__all__ = ["WARN_INTERVAL_S", "TokenExpiredError", "TokenRefresh"]

#: the shortest gap between two warnings about failed refreshes from one token source
WARN_INTERVAL_S = 30.0
#: refresh once this share of a token's life has passed
REFRESH_AT_LIFE = 0.8
#: a token is not sent in the last this many seconds of its life (nor in the last 20 % of a
#: shorter token's life): a login takes time to reach the broker, which checks the expiry then
LOGIN_MARGIN_S = 1.0


class TokenExpiredError(AuthenticationError):
    """The OAUTHBEARER token expired and a fresh one could not be fetched: the connection does
    not log in with it (the broker would refuse it). The message says why the refresh failed."""


@dataclass(frozen=True, slots=True)
class Failure:
    """One failed refresh: the cause, as the source's error said it, and when (epoch seconds)."""

    cause: str
    at_s: float


def _utc(epoch_s: float) -> str:
    return datetime.datetime.fromtimestamp(epoch_s, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


class TokenRefresh:
    """The refresh state of one token source (``source`` names it in messages, e.g. "the OIDC
    token endpoint https://idp/token"; it must not contain a secret)."""

    def __init__(
        self, source: str, backoff: ExponentialBackoff, *, warn_interval_s: float = WARN_INTERVAL_S
    ) -> None:
        self._source = source
        self._backoff = backoff
        self._warn_interval_s = warn_interval_s
        self._token: tuple[str, float] | None = None
        #: the token is not sent from this instant (its expiry less the login margin)
        self._usable_until_s = 0.0
        self._refresh_at_s = 0.0
        #: consecutive failed refreshes, and the last one
        self.failures = 0
        self.last_failure: Failure | None = None
        #: failures not logged yet (throttled), and when the next warning may be logged
        self._unlogged = 0
        self._next_warn_s = float("-inf")

    def has_token(self) -> bool:
        """Whether the source ever gave a token (expired or not)."""
        return self._token is not None

    def refresh_due(self, now_s: float) -> bool:
        """Whether to ask the source for a token now: there is none, 80 % of its life has
        passed, or the backoff after a failed refresh has elapsed."""
        return self._token is None or now_s >= self._refresh_at_s

    def fetched(self, now_s: float, token: str, expiry_s: float) -> str | None:
        """The source gave ``token`` (expiring at ``expiry_s``); an INFO line to log when it
        follows failed refreshes, else None."""
        recovered = self.failures
        self._token = (token, float(expiry_s))
        life_s = float(expiry_s) - now_s
        self._refresh_at_s = now_s + REFRESH_AT_LIFE * life_s
        self._usable_until_s = float(expiry_s) - min(LOGIN_MARGIN_S, (1 - REFRESH_AT_LIFE) * max(life_s, 0.0))
        self.failures = 0
        self._unlogged = 0
        self._next_warn_s = float("-inf")
        if recovered:
            return f"fetched a new OAUTHBEARER token from {self._source} after {recovered} failed attempts"
        return None

    def failed(self, now_s: float, cause: str) -> str | None:
        """A refresh failed with ``cause`` (the error's text, which names no secret): schedules
        the next attempt; a WARNING line to log, or None while warnings are throttled."""
        self.failures += 1
        self.last_failure = Failure(cause, now_s)
        self._refresh_at_s = now_s + self._backoff.backoff_ms(self.failures - 1) / 1000
        self._unlogged += 1
        if now_s < self._next_warn_s:
            return None
        count, self._unlogged = self._unlogged, 0
        self._next_warn_s = now_s + self._warn_interval_s
        more = f" ({count - 1} more failed since the last warning)" if count > 1 else ""
        if self._token is None:
            state = "there is no token to log in with"
        elif now_s < self._usable_until_s:
            left = self._token[1] - now_s
            state = f"the current token stays in use until it expires in {left:.1f} s"
        elif now_s < self._token[1]:
            left = self._token[1] - now_s
            state = (
                f"the current token expires in {left:.1f} s, too soon to log in with: "
                "connections cannot log in"
            )
        else:
            state = f"the current token expired at {_utc(self._token[1])}: connections cannot log in"
        retry = self._refresh_at_s - now_s
        return (
            f"refreshing the OAUTHBEARER token from {self._source} failed: {cause}; {state}; "
            f"retrying in {retry:.1f} s{more}"
        )

    def token(self, now_s: float) -> tuple[str, float]:
        """The token to log in with, if it is still valid; else :class:`TokenExpiredError`."""
        if self._token is not None and now_s < self._usable_until_s:
            return self._token
        if self._token is None:
            why = self.last_failure.cause if self.last_failure is not None else "none was fetched"
            raise TokenExpiredError(f"no OAUTHBEARER token from {self._source}: {why}")
        expired = self._token[1]
        failure = self.last_failure
        why = (
            f"the last refresh failed: {failure.cause}"
            if failure is not None
            else "it has not been refreshed yet"
        )
        attempts = f" ({self.failures} failed attempts)" if self.failures > 1 else ""
        if now_s >= expired:
            state = f"expired at {_utc(expired)} ({now_s - expired:.0f} s ago)"
        else:  # within the login margin
            state = (
                f"expires at {_utc(expired)}, in {expired - now_s:.1f} s: too soon for a login to "
                "reach the broker in time, so it is treated as expired"
            )
        raise TokenExpiredError(
            f"the OAUTHBEARER token from {self._source} {state} and was not sent; {why}{attempts}. "
            "The refresh is retried with backoff (sasl.login.retry.backoff.ms)"
        )
