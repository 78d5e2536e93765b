"""Acquired records waiting for the application. [shared: the network thread adds, the
application thread takes; one lock and condition guard everything]

A :class:`ShareCompletedFetch` is one partition's part of a ShareFetch answer: the raw record
bytes (a view of the response, not copied) and the offset ranges the broker acquired for this
member, with their delivery counts. The application thread decodes it with the record kernel.

Bounded in bytes: the share-consume manager sends no ShareFetch to a broker while data it
delivered is still here, nor any while :meth:`ShareFetchBuffer.size_bytes` is at or above the
limit.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable

from kaflux.consumer.share.consume_request_manager import ShareCompletedFetch
from kaflux.structs import TopicPartition

__all__ = ["ShareCompletedFetch", "ShareFetchBuffer"]


class ShareFetchBuffer:
    """A queue of :class:`ShareCompletedFetch`, plus the ones the application is reading."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._queued: deque[ShareCompletedFetch] = deque()
        #: taken by the application and not yet released: their nodes are still busy
        self._reading: list[ShareCompletedFetch] = []
        self._bytes = 0
        self._woken = False
        #: event-loop waiters (``kaflux.blocking.Signal``), called on data or a wakeup
        self._waiters: list[Callable[[], None]] = []

    # -- network thread ------------------------------------------------------------------------

    def add(self, fetches: Iterable[ShareCompletedFetch]) -> None:
        """Append fetched partitions and wake a waiting ``poll()``."""
        with self._cond:
            for fetch in fetches:
                self._queued.append(fetch)
                self._bytes += fetch.size_bytes
            self._cond.notify_all()
            waiters = self._waiters
        for waiter in waiters:
            waiter()

    def busy_nodes(self) -> set[int]:
        """Brokers whose delivered data the application has not finished with."""
        with self._cond:
            return {f.node for f in self._queued} | {f.node for f in self._reading}

    def size_bytes(self) -> int:
        """Bytes of record data held."""
        with self._cond:
            return self._bytes

    # -- application thread --------------------------------------------------------------------

    def take(self) -> ShareCompletedFetch | None:
        """The oldest queued fetch; its bytes and node stay counted until :meth:`release`."""
        with self._cond:
            if not self._queued:
                return None
            fetch = self._queued.popleft()
            self._reading.append(fetch)
            return fetch

    def release(self, fetch: ShareCompletedFetch) -> None:
        """The application finished with ``fetch``: its broker may be fetched from again."""
        with self._cond:
            if fetch in self._reading:
                self._reading.remove(fetch)
                self._bytes -= fetch.size_bytes

    def is_empty(self) -> bool:
        with self._cond:
            return not self._queued

    def await_not_empty(self, timeout_s: float) -> bool:
        """Wait until data arrives, :meth:`wakeup` is called or ``timeout_s`` passes."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while not self._queued and not self._woken:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            self._woken = False
            return bool(self._queued)

    def wakeup(self) -> None:
        """Cut short an :meth:`await_not_empty` (any thread)."""
        with self._cond:
            self._woken = True
            self._cond.notify_all()
            waiters = self._waiters
        for waiter in waiters:
            waiter()

    # -- waiting on an event loop (``kaflux.blocking.Signal``) --------------------------------

    def await_signal(self, timeout_s: float) -> bool:
        """:meth:`await_not_empty`, as the blocking driver waits on a signal."""
        return self.await_not_empty(timeout_s)

    def watch(self, waiter: Callable[[], None]) -> bool:
        """Call ``waiter`` (on the thread that adds data or wakes) on each arrival or
        :meth:`wakeup` until :meth:`unwatch` (how ``kaflux.aio`` waits, with no thread of its
        own); whether data or a wakeup is there already. Consumes the wakeup."""
        with self._cond:
            self._waiters = [*self._waiters, waiter]
            ready = bool(self._queued) or self._woken
            self._woken = False
            return ready

    def unwatch(self, waiter: Callable[[], None]) -> None:
        """Stop calling ``waiter``; a wakeup that came meanwhile is consumed."""
        with self._cond:
            self._waiters = [w for w in self._waiters if w is not waiter]
            self._woken = False

    def retain(self, partitions: set[TopicPartition]) -> None:
        """Drop queued data of partitions no longer assigned (the broker took them back)."""
        with self._cond:
            kept: deque[ShareCompletedFetch] = deque()
            for fetch in self._queued:
                if fetch.tp in partitions:
                    kept.append(fetch)
                else:
                    self._bytes -= fetch.size_bytes
            self._queued = kept
