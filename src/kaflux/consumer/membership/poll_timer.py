"""The poll timer: how long the application may go without calling ``poll()``. [pure]

``max.poll.interval.ms`` bounds the time between two ``poll()`` calls of the application. Each
``poll()`` sends a PollEvent, which resets the timer; the heartbeat request manager asks the
timer on every pass whether it expired, and then makes the member leave the group (it rejoins
on the next ``poll()``). Like Java's ``Timer`` in its heartbeat request manager, but pure: the
caller passes the time.
"""

from __future__ import annotations


class PollTimer:
    """Expires ``interval_ms`` after the last :meth:`reset`; never before the first one."""

    __slots__ = ("_last_poll_ms", "interval_ms")

    def __init__(self, interval_ms: int) -> None:
        self.interval_ms = interval_ms
        self._last_poll_ms: int | None = None

    @property
    def last_poll_ms(self) -> int | None:
        """When the application last polled (None: not yet)."""
        return self._last_poll_ms

    def reset(self, now_ms: int) -> None:
        """The application polled at ``now_ms``."""
        self._last_poll_ms = now_ms

    def is_expired(self, now_ms: int) -> bool:
        """More than ``interval_ms`` passed since the last poll."""
        return self._last_poll_ms is not None and now_ms - self._last_poll_ms > self.interval_ms

    def remaining_ms(self, now_ms: int) -> int | None:
        """Milliseconds until the timer runs out (0 once it did), or None before the first poll."""
        if self._last_poll_ms is None:
            return None
        return max(0, self._last_poll_ms + self.interval_ms - now_ms)
