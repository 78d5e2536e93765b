"""The consumer's single-user guard. [app: every public method but wakeup() and metrics()]

A consumer is not safe for concurrent use (as Java's): the guard remembers which thread is
using it and refuses another with :class:`~kaflux.errors.ConcurrentAccessError` at once. It is
reentrant (a rebalance listener running inside ``poll()`` may call the consumer), and a
blocking call holds it across its waits, under the sync driver or on an event loop.
"""

from __future__ import annotations

import threading
from types import TracebackType

from kaflux.errors import ConcurrentAccessError

_NO_THREAD = -1


class SingleThreadGuard:
    """Reentrant ownership by one thread at a time; a context manager."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner = _NO_THREAD
        self._depth = 0

    def acquire(self) -> None:
        """Become (or stay) the owner; ConcurrentAccessError if another thread is."""
        me = threading.get_ident()
        with self._lock:
            if self._owner not in (_NO_THREAD, me):
                raise ConcurrentAccessError(
                    "this Consumer is being used by another thread; a consumer is not safe for "
                    "concurrent use (only wakeup() may be called from other threads)"
                )
            self._owner = me
            self._depth += 1

    def release(self) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth == 0:
                self._owner = _NO_THREAD

    def __enter__(self) -> None:
        self.acquire()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()
