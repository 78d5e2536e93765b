"""The background network thread shared by the consumer, the producer and the admin client.
[bg: the loop; app: :meth:`NetworkThread.submit`, :meth:`NetworkThread.close`]

Theory of operation. Each client owns one :class:`NetworkThread`. The application thread never
touches a socket: it puts an *application event* on :attr:`NetworkThread.events` with
:meth:`submit` (which also wakes the selector). Each pass of the loop:

1. drains the event queue into the client's :class:`EventProcessor` (which updates request
   managers and completes or chains the event's future);
2. polls every request manager for a :class:`PollResult` and queues its unsent requests;
3. sends what it can and waits for I/O, at most as long as the soonest manager asked;
4. lets the processor fail events whose deadline passed.

Only this module reads the clock; managers get ``now_ms``. On :meth:`close` the loop asks each
manager for its last requests (``poll_on_close``), keeps sending until they are answered or the
close deadline passes, then closes every connection.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, Protocol

from kaflux.errors import KafkaConnectionError, KafkaError
from kaflux.network.clock import monotonic_ms
from kaflux.network.network_client_delegate import NetworkClientDelegate
from kaflux.network.requests import MAX_POLL_TIMEOUT_MS, ClientResponse, RequestManager

log = logging.getLogger(__name__)

#: how soon a pass comes round again after a request manager's poll raised
FAILED_MANAGER_RETRY_MS = 100


class EventProcessor(Protocol):
    """Applies application events on the network thread."""

    def process(self, event: Any, now_ms: int) -> None: ...

    def expire(self, now_ms: int) -> None: ...

    def next_deadline_ms(self) -> int | None: ...

    def fail_all(self, error: Exception) -> None: ...


class NetworkThread(threading.Thread):
    """Runs one client's request managers and network I/O on a daemon thread."""

    def __init__(
        self,
        name: str,
        delegate: NetworkClientDelegate,
        managers: Sequence[RequestManager],
        processor: EventProcessor,
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.events: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.delegate = delegate
        self._managers = list(managers)
        self._processor = processor
        self._close_deadline_ms: int | None = None
        self._closed = threading.Event()
        #: completed when the loop stopped (an event loop awaits it: ``kaflux.aio``)
        self._stopped: Future[None] = Future()
        #: how long the app may wait before the managers need it (for poll timeouts)
        self.max_time_to_wait_ms = MAX_POLL_TIMEOUT_MS
        #: when the current I/O wait ends (0 while the loop is busy); lets producers skip
        #: a wakeup when the loop will come round in time anyway
        self.sleeping_until_ms = 0
        self.loop_count = 0
        self._failed_managers: set[str] = set()
        #: the last error a pass raised, logged with its traceback once (not on every pass)
        self._last_loop_error = ""

    # -- application thread ------------------------------------------------------------------

    def submit(self, event: Any, *, wake: bool = True) -> None:
        """Queue an application event and (unless ``wake=False``: it can wait for the next
        pass) wake the network thread. Never blocks."""
        self.events.put(event)
        if wake:
            self.delegate.client.wakeup()

    def wakeup(self) -> None:
        """Make the loop run a pass now."""
        self.delegate.client.wakeup()

    def wakeup_before(self, due_ms: int) -> None:
        """Make sure the loop runs a pass by ``due_ms``: wake it only if it sleeps past that."""
        if self.sleeping_until_ms > due_ms:
            self.delegate.client.wakeup()

    def close(self, timeout_s: float) -> bool:
        """Let the managers finish (bounded by ``timeout_s``), then stop; True if it stopped."""
        if self.is_alive():
            self.request_close(timeout_s)
            self._closed.wait(max(0.0, timeout_s) + 1.0)
        return not self.is_alive() or self._closed.is_set()

    def request_close(self, timeout_s: float) -> Future[None]:
        """:meth:`close` without the wait: the future completes once the loop stopped (at
        once if it is not running)."""
        if self.is_alive():
            self._close_deadline_ms = monotonic_ms() + int(timeout_s * 1000)
            self.delegate.client.wakeup()
        elif not self._stopped.done():
            self._stopped.set_result(None)
        return self._stopped

    # -- network thread ----------------------------------------------------------------------

    def run(self) -> None:
        try:
            while self._close_deadline_ms is None:
                try:
                    self.run_once()
                except Exception as exc:
                    # A bug in one pass must not kill the client; managers report their own
                    # failures through events. The same error again is not logged again.
                    self._loop_failed(exc)
                    time.sleep(0.01)
            self._run_close()
        finally:
            self._shutdown()

    def run_once(self) -> None:
        """One pass: events, managers, I/O, expiry."""
        now = monotonic_ms()
        self._drain_events(now)
        wait = app_wait = MAX_POLL_TIMEOUT_MS
        for manager in self._managers:
            try:
                result = manager.poll(now)
                app_wait = min(app_wait, manager.maximum_time_to_wait(now))
            except Exception:
                # A bug in one manager must not starve the others, nor the I/O their requests
                # wait for (a group member's leave on close, say); it is tried again soon.
                self._manager_failed(manager)
                wait = min(wait, FAILED_MANAGER_RETRY_MS)
                continue
            self.delegate.add_all(result.unsent, now)
            wait = min(wait, result.time_until_next_poll_ms)
        deadline = self._processor.next_deadline_ms()
        if deadline is not None:
            wait = max(0, min(wait, deadline - now))  # wake in time to fail an overdue event
        self.max_time_to_wait_ms = app_wait
        self.sleeping_until_ms = now + wait
        self.delegate.poll(wait, now, monotonic_ms)
        self.sleeping_until_ms = 0
        self._processor.expire(monotonic_ms())
        self.loop_count += 1

    def _loop_failed(self, exc: Exception) -> None:
        described = f"{type(exc).__name__}: {exc}"
        if described == self._last_loop_error:
            log.debug("%s: error in network loop again: %s", self.name, described)
            return
        self._last_loop_error = described
        log.exception("%s: error in network loop", self.name)

    def _manager_failed(self, manager: RequestManager) -> None:
        name = type(manager).__name__
        if name in self._failed_managers:
            log.debug("%s: %s.poll failed again", self.name, name, exc_info=True)
        else:
            self._failed_managers.add(name)  # one traceback per manager, not one per pass
            log.exception("%s: %s.poll failed; the other managers go on", self.name, name)

    def _drain_events(self, now: int) -> None:
        while True:
            try:
                event = self.events.get_nowait()
            except queue.Empty:
                return
            try:
                self._processor.process(event, now)
            except Exception as exc:
                future = getattr(event, "future", None)
                if isinstance(exc, KafkaError) and future is not None:
                    # A user error (e.g. assign() while subscribed): the caller gets it raised;
                    # no traceback on this thread.
                    log.debug("%s: %s failed: %s", self.name, type(event).__name__, exc)
                else:
                    log.exception("%s: failed to process %s", self.name, type(event).__name__)
                if future is not None and not future.done():
                    future.set_exception(exc)

    def _run_close(self) -> None:
        """Send the managers' last requests and wait for those alone (not for retries of
        metadata or fetches, nor for a broker that cannot be reached), up to the deadline."""
        assert self._close_deadline_ms is not None
        now = monotonic_ms()
        self._drain_events(now)
        outstanding = 0

        def track(handler: Callable[[ClientResponse[Any]], None]) -> Callable[[ClientResponse[Any]], None]:
            def done(response: ClientResponse[Any]) -> None:
                nonlocal outstanding
                outstanding -= 1
                handler(response)

            return done

        for manager in self._managers:
            for unsent in manager.poll_on_close(now).unsent:
                if unsent.expect_response:
                    outstanding += 1
                    unsent.handler = track(unsent.handler)
                self.delegate.add(unsent, now)
        while now < self._close_deadline_ms and outstanding > 0:
            self._drain_events(now)
            self.delegate.poll(min(100, self._close_deadline_ms - now), now, monotonic_ms)
            now = monotonic_ms()
            # Nobody will retry after close: a request whose broker cannot be reached now fails.
            self.delegate.fail_unreachable(now)

    def _shutdown(self) -> None:
        error = KafkaConnectionError("the client was closed")
        try:
            self.delegate.close(error)
            self._drain_events(monotonic_ms())
            self._processor.fail_all(error)
        except Exception:
            log.exception("%s: error while closing", self.name)
        finally:
            self._closed.set()
            if not self._stopped.done():
                self._stopped.set_result(None)
