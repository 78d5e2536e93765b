"""Checking the timeouts callers pass to blocking calls. [pure]

Every public timeout is in seconds. ``None`` means the call's default; ``float('inf')`` waits as
long as a deadline can be (about a year). NaN, negative numbers and non-numbers raise
:class:`~kaflux.errors.InvalidArgumentError` at once, so a bad timeout can never spin or block.
"""

from __future__ import annotations

import math

from kaflux.errors import InvalidArgumentError

#: the longest wait a timeout stands for (float('inf') is clamped to it)
MAX_TIMEOUT_S = 365 * 86400.0


def timeout_seconds(timeout: float | None, default_s: float, *, name: str = "timeout") -> float:
    """``timeout`` checked and as float seconds; ``default_s`` when it is None."""
    if timeout is None:
        return default_s
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise InvalidArgumentError(f"{name} must be a number of seconds, got {timeout!r}")
    if math.isnan(timeout):
        raise InvalidArgumentError(f"{name} must be a number of seconds, got NaN")
    if timeout < 0:
        raise InvalidArgumentError(f"{name} must not be negative, got {timeout}")
    return min(float(timeout), MAX_TIMEOUT_S)
