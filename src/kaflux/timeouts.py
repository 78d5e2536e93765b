"""Checking the timeouts callers pass to blocking calls, and waiting on an event's future
with one. [app: called by the public API on the application thread; reads no clock]

Every public timeout is in seconds. ``None`` means the call's default; ``float('inf')`` waits as
long as a deadline can be (about a year). NaN, negative numbers and non-numbers raise
:class:`~kaflux.errors.InvalidArgumentError` at once, so a bad timeout can never spin or block.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeoutError
from typing import TypeVar

from kaflux.errors import InvalidArgumentError, KafkaTimeoutError

T = TypeVar("T")

#: the longest wait a timeout stands for (float('inf') is clamped to it)
MAX_TIMEOUT_S = 365 * 86400.0


def timeout_seconds(timeout: float | None, default_s: float, *, name: str = "timeout") -> float:
    """``timeout`` checked and as float seconds; ``default_s`` when it is None."""
    if type(timeout) is float and 0.0 <= timeout <= MAX_TIMEOUT_S:  # the common case (NaN fails it)
        return timeout
    if timeout is None:
        return default_s
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise InvalidArgumentError(f"{name} must be a number of seconds, got {timeout!r}")
    if math.isnan(timeout):
        raise InvalidArgumentError(f"{name} must be a number of seconds, got NaN")
    if timeout < 0:
        raise InvalidArgumentError(f"{name} must not be negative, got {timeout}")
    return min(float(timeout), MAX_TIMEOUT_S)


def await_future(
    future: Future[T], timeout_s: float, what: str, why: Callable[[], str | None] | None = None
) -> T:
    """``future.result(timeout_s)``; if it is still not done then, KafkaTimeoutError saying
    ``what`` did not complete. An error the future holds is raised as it is, a
    KafkaTimeoutError from the network thread (which names the cause) included: it is a
    TimeoutError too, and must not be replaced by this generic one.

    ``why``, when given, explains a timeout (e.g. "no broker reachable at host:port (...)"):
    its text, if any, is added to the KafkaTimeoutError raised."""
    try:
        return future.result(timeout=timeout_s)
    except FutureTimeoutError as exc:
        reason = why() if why is not None else None
        if future.done():
            if reason is None:
                raise
            raise KafkaTimeoutError(explain(str(exc), reason)) from exc
        message = f"{what} did not complete within {timeout_s:g} s"
        raise KafkaTimeoutError(message if reason is None else explain(message, reason)) from None


def explain(message: str, reason: str) -> str:
    """A timeout ``message`` with the ``reason`` it happened and what to check."""
    return f"{message}: {reason}. Check bootstrap.servers and that the brokers are running"
