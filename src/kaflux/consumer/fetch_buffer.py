"""Fetched data waiting for the application. [shared: the network thread adds, the application
thread takes; one lock and condition guard everything]

Bounded in bytes: the fetch request manager sends no new fetch while :meth:`FetchBuffer.size_bytes`
is at or above ``fetch.buffer.max.bytes``, so memory stays bounded (by that limit plus the
responses already in flight) however large the backlog on the brokers is.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable

from kaflux.consumer.completed_fetch import CompletedFetch
from kaflux.structs import TopicPartition


class FetchBuffer:
    """A queue of :class:`CompletedFetch` plus the one the collector is reading."""

    def __init__(self) -> None:
        #: the lock, and the condition over it to wait for data (``with self._lock`` where no
        #: wait or notify is needed: a Condition's ``with`` costs two Python-level calls)
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._completed: deque[CompletedFetch] = deque()
        self._next_in_line: CompletedFetch | None = None
        #: fetches of paused partitions, kept aside so they do not count as data to wait for
        self._parked: list[CompletedFetch] = []
        self._bytes = 0
        self._woken = False
        #: called (outside the lock) when data arrives or on wakeup: event loops' (:meth:`watch`);
        #: copy-on-write, so that it can be iterated outside the lock
        self._waiters: list[Callable[[], None]] = []

    # -- network thread --------------------------------------------------------------------

    def add(self, fetches: Iterable[CompletedFetch]) -> None:
        """Append fetched partitions and wake a waiting ``poll()``."""
        with self._cond:
            for fetch in fetches:
                self._completed.append(fetch)
                self._bytes += fetch.size_bytes
            self._cond.notify_all()
            waiters = self._waiters
        for waiter in waiters:
            waiter()

    def buffered_partitions(self) -> set[TopicPartition]:
        """Partitions with data not yet consumed (these are not fetched again)."""
        with self._lock:
            parts = {f.tp for f in self._completed} | {f.tp for f in self._parked}
            if self._next_in_line is not None and not self._next_in_line.consumed:
                parts.add(self._next_in_line.tp)
            return parts

    def size_bytes(self) -> int:
        """Bytes of fetched record data held (queued plus the one being read)."""
        with self._lock:
            return self._bytes

    # -- application thread ----------------------------------------------------------------

    def next_in_line(self) -> CompletedFetch | None:
        with self._lock:
            return self._next_in_line

    def set_next_in_line(self, fetch: CompletedFetch | None) -> None:
        """Make ``fetch`` the one being read; the previous one's bytes are released."""
        with self._lock:
            previous = self._next_in_line
            if previous is not None:
                self._bytes -= previous.size_bytes
            self._next_in_line = fetch

    def poll(self) -> CompletedFetch | None:
        """Take the oldest queued fetch. Its bytes stay counted until it is released: the
        caller must pass it to :meth:`set_next_in_line`, :meth:`requeue_front` or
        :meth:`release`."""
        with self._lock:
            if not self._completed:
                return None
            return self._completed.popleft()

    def release(self, fetch: CompletedFetch) -> None:
        """Forget a fetch taken with :meth:`poll` (stale or dropped): free its bytes."""
        with self._lock:
            self._bytes -= fetch.size_bytes

    def take_next_in_line(self) -> CompletedFetch | None:
        """Detach the fetch being read without releasing its bytes (to requeue it)."""
        with self._lock:
            fetch, self._next_in_line = self._next_in_line, None
            return fetch

    def park(self, fetch: CompletedFetch) -> None:
        """Keep a fetch of a paused partition aside (its bytes stay counted)."""
        with self._lock:
            self._parked.append(fetch)

    def parked_partitions(self) -> set[TopicPartition]:
        """Partitions with parked (paused) data."""
        with self._lock:
            return {f.tp for f in self._parked} if self._parked else set()

    def unpark(self, partitions: set[TopicPartition]) -> None:
        """Return parked fetches of ``partitions`` (resumed) to the front of the queue."""
        with self._cond:
            back = [f for f in self._parked if f.tp in partitions]
            self._parked = [f for f in self._parked if f.tp not in partitions]
            self._completed.extendleft(reversed(back))
            if back:
                self._cond.notify_all()
            waiters = self._waiters if back else []
        for waiter in waiters:
            waiter()

    def requeue_front(self, fetch: CompletedFetch) -> None:
        """Put back a fetch taken with :meth:`poll` that cannot be read now (paused)."""
        with self._lock:
            self._completed.appendleft(fetch)

    def is_empty(self) -> bool:
        with self._lock:
            return not self._completed

    def await_not_empty(self, timeout_s: float) -> bool:
        """Wait until data arrives, :meth:`wakeup` is called or ``timeout_s`` passes."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while not self._completed and not self._woken:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            self._woken = False
            return bool(self._completed)

    def wakeup(self) -> None:
        """Cut short an :meth:`await_not_empty`, or an event loop's wait (any thread)."""
        with self._cond:
            self._woken = True
            self._cond.notify_all()
            waiters = self._waiters
        for waiter in waiters:
            waiter()

    # -- waiting on an event loop (``kaflux.blocking.Signal``) --------------------------------

    def await_signal(self, timeout_s: float) -> bool:
        """:meth:`await_not_empty`, as a blocking driver waits on a signal."""
        return self.await_not_empty(timeout_s)

    def watch(self, waiter: Callable[[], None]) -> bool:
        """Call ``waiter`` (on the thread that adds data or wakes) whenever data arrives or
        :meth:`wakeup` is called, until :meth:`unwatch`: how an event loop waits for data with
        no thread of its own (``kaflux.aio``). Returns whether data or a wakeup is there
        already. Consumes the wakeup, as :meth:`await_not_empty` does."""
        with self._cond:
            self._waiters = [*self._waiters, waiter]
            ready = bool(self._completed) or self._woken
            self._woken = False
            return ready

    def unwatch(self, waiter: Callable[[], None]) -> None:
        """Stop calling ``waiter``; a wakeup that came meanwhile is consumed."""
        with self._cond:
            self._waiters = [w for w in self._waiters if w is not waiter]
            self._woken = False

    def retain_all(self, partitions: set[TopicPartition]) -> None:
        """Drop buffered data of partitions not in ``partitions`` (after an assignment change)."""
        with self._lock:
            kept: deque[CompletedFetch] = deque()
            for fetch in self._completed:
                if fetch.tp in partitions:
                    kept.append(fetch)
                else:
                    self._bytes -= fetch.size_bytes
            self._completed = kept
            for fetch in self._parked:
                if fetch.tp not in partitions:
                    self._bytes -= fetch.size_bytes
            self._parked = [f for f in self._parked if f.tp in partitions]
            current = self._next_in_line
            if current is not None and current.tp not in partitions:
                self._bytes -= current.size_bytes
                self._next_in_line = None

    def clear(self) -> None:
        """Drop everything."""
        self.retain_all(set())
