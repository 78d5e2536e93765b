"""``Consumer.wakeup()``: interrupting the blocking call in progress, or the next one.
[shared: :meth:`WakeupTrigger.wakeup` runs on any thread; the rest on the application thread]

As Java's ``WakeupTrigger``: the application thread registers the future it is about to wait
on; ``wakeup()`` fails that future with :class:`~kaflux.errors.WakeupError` or, when nothing is
being waited on, leaves a request that the next blocking call raises at once. One lock guards
the two, and nothing is called out of while holding it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from kaflux.consumer.events import fail
from kaflux.errors import WakeupError

_MESSAGE = "the consumer was woken up by wakeup()"


class WakeupTrigger:
    """The wakeup request and the future being waited on."""

    def __init__(self, wake_waiters: Callable[[], None]) -> None:
        """``wake_waiters``: cut short a wait for data (``FetchBuffer.wakeup``)."""
        self._lock = threading.Lock()
        self._requested = False
        self._active: Future[Any] | None = None
        self._wake_waiters = wake_waiters

    def wakeup(self) -> None:
        """Fail the future being waited on, or leave a request for the next call. Any thread."""
        with self._lock:
            active = self._active
            if active is None or active.done():
                self._requested, active = True, None
        if active is not None:
            fail(active, WakeupError(_MESSAGE))
        self._wake_waiters()

    def check(self) -> None:
        """Raise WakeupError if a wakeup is pending (and consume it)."""
        if not self._requested:  # read without the lock: a request just made is seen next time
            return
        with self._lock:
            requested, self._requested = self._requested, False
        if requested:
            raise WakeupError(_MESSAGE)

    def activate(self, future: Future[Any]) -> None:
        """About to wait on ``future``: raise a pending wakeup, else let wakeup() fail it."""
        with self._lock:
            requested, self._requested = self._requested, False
            if not requested:
                self._active = future
        if requested:
            raise WakeupError(_MESSAGE)

    def deactivate(self) -> None:
        """The wait is over (whatever its outcome)."""
        with self._lock:
            self._active = None

    def clear(self) -> None:
        """Forget a pending wakeup (at close)."""
        with self._lock:
            self._requested = False
