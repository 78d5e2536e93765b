"""Exponential backoff with jitter, as Kafka's clients compute it. [pure]"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field


@dataclass(slots=True)
class ExponentialBackoff:
    """``initial_ms * multiplier**attempts``, capped at ``max_ms``, randomized by ±``jitter``.

    ``rng`` can be replaced by a seeded ``random.Random`` to make tests deterministic.
    """

    initial_ms: int
    max_ms: int
    multiplier: float = 2.0
    jitter: float = 0.2
    rng: random.Random = field(default_factory=random.Random)

    def backoff_ms(self, attempts: int) -> int:
        """The delay before retry number ``attempts + 1`` (``attempts`` failures so far)."""
        if self.initial_ms <= 0 or self.max_ms <= 0:
            return 0
        exponent = min(attempts, 64)
        term = min(float(self.max_ms), self.initial_ms * math.pow(self.multiplier, exponent))
        if self.jitter > 0:
            term *= self.rng.uniform(1.0 - self.jitter, 1.0 + self.jitter)
        return min(int(term), self.max_ms)  # the maximum is a maximum, jitter included


@dataclass(slots=True)
class RequestState:
    """The retry bookkeeping of one request (or one kind of request): every request manager
    uses it, so backoff works the same everywhere.

    Mirrors Java's ``RequestState``: at most one in flight; after a failure the next attempt
    waits ``retry.backoff.ms * 2^n`` (capped, jittered, drawn once at the failure) from the
    failure; a success resets the backoff.
    """

    backoff: ExponentialBackoff
    in_flight: bool = False
    attempts: int = 0
    last_sent_ms: int = -1
    last_failed_ms: int = -1
    #: when a retry is allowed (0: now)
    retry_at_ms: int = 0

    def can_send(self, now_ms: int) -> bool:
        """Nothing in flight and the backoff since the last failure has elapsed."""
        return not self.in_flight and now_ms >= self.retry_at_ms

    def remaining_backoff_ms(self, now_ms: int) -> int:
        """Milliseconds until a retry is allowed (0 when allowed now)."""
        return max(0, self.retry_at_ms - now_ms)

    def on_send(self, now_ms: int) -> None:
        """A request of this kind was handed to the network."""
        self.in_flight = True
        self.last_sent_ms = now_ms

    def on_success(self) -> None:
        """The request succeeded: reset the backoff."""
        self.in_flight = False
        self.attempts = 0
        self.last_failed_ms = -1
        self.retry_at_ms = 0

    def on_failure(self, now_ms: int, *, delay_ms: int | None = None) -> None:
        """The request failed: retry after the grown backoff (or after ``delay_ms``)."""
        self.in_flight = False
        wait = self.backoff.backoff_ms(self.attempts) if delay_ms is None else delay_ms
        self.attempts += 1
        self.last_failed_ms = now_ms
        self.retry_at_ms = now_ms + wait

    def postpone(self, now_ms: int, delay_ms: int) -> None:
        """Wait ``delay_ms`` before the next attempt without counting a failure (e.g. no
        broker to send to yet)."""
        self.retry_at_ms = now_ms + delay_ms

    def reset(self) -> None:
        """Forget failures and in-flight state (e.g. after the target changed)."""
        self.in_flight = False
        self.attempts = 0
        self.last_failed_ms = -1
        self.retry_at_ms = 0
