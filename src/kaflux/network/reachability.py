"""Which broker addresses a client could not reach, and why. [shared: the network thread
records, the application thread reads :meth:`Reachability.unreachable` when a blocking call
times out; one lock, held for a few dictionary operations]

A failed connection is logged at WARNING at once, naming the address and the cause, as Java
("Connection to node -1 (host:port) could not be established") and librdkafka ("Connect to
ipv4#host:port failed: Connection refused") do. Later failures of the same address are
throttled: at most one line per address every :data:`WARN_INTERVAL_MS`, saying how many
attempts failed meanwhile. The first successful connection after failures is logged at INFO.

While no connection is ready and at least one address failed, :meth:`Reachability.unreachable`
describes every address tried with its last error; blocking calls that time out add it to
their error, so "timed out" says "no broker reachable at 127.0.0.1:9092 (connect ... failed:
ECONNREFUSED)" instead of blaming a topic or a group.

kaflux keeps Java's semantics here: a blocking call waits its own timeout (brokers may come
up meanwhile), it does not fail fast when every broker is down the way librdkafka's
"all brokers down" error does. The WARNING lines and the error's text are what tell the user.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

log = logging.getLogger("kaflux.network")

#: the shortest gap between two warnings about the same address, once it keeps failing
WARN_INTERVAL_MS = 10_000


@dataclass(slots=True)
class _Address:
    last_error: str = ""
    failures: int = 0
    #: failures since the last warning line
    unreported: int = 0
    next_warn_ms: int = -1


class Reachability:
    """Per-address connection failures of one client."""

    def __init__(self, client_id: str, warn_interval_ms: int = WARN_INTERVAL_MS) -> None:
        self._client_id = client_id
        self._warn_interval_ms = warn_interval_ms
        self._lock = threading.Lock()
        self._failing: dict[str, _Address] = {}
        #: ready connections per address (coordinator connections share a broker's address)
        self._ready: dict[str, int] = {}

    # -- network thread ------------------------------------------------------------------------

    def failed(self, address: str, error: BaseException, now_ms: int, *, established: bool = False) -> None:
        """A connection to ``address`` failed with ``error`` (``established``: a ready one broke)."""
        with self._lock:
            state = self._failing.setdefault(address, _Address())
            state.last_error = str(error)
            state.failures += 1
            state.unreported += 1
            if now_ms < state.next_warn_ms:
                return
            count, state.unreported = state.unreported, 0
            state.next_warn_ms = now_ms + self._warn_interval_ms
        more = f" ({count} failed attempts since the last warning)" if count > 1 else ""
        what = "lost the connection to" if established else "cannot connect to"
        client = self._client_id
        log.warning("%s: %s broker %s: %s; retrying with backoff%s", client, what, address, error, more)

    def ready(self, address: str) -> None:
        """A connection to ``address`` became ready."""
        with self._lock:
            self._ready[address] = self._ready.get(address, 0) + 1
            state = self._failing.pop(address, None)
        if state is not None:
            client, failures = self._client_id, state.failures
            log.info("%s: connected to broker %s after %d failed attempts", client, address, failures)

    def closed(self, address: str) -> None:
        """A ready connection to ``address`` was closed."""
        with self._lock:
            left = self._ready.get(address, 0) - 1
            if left > 0:
                self._ready[address] = left
            else:
                self._ready.pop(address, None)

    # -- any thread ----------------------------------------------------------------------------

    def unreachable(self) -> str | None:
        """ "no broker reachable at A (last error), B (...)" while no connection is ready and
        some address failed; None otherwise."""
        with self._lock:
            if self._ready or not self._failing:
                return None
            tried = [f"{address} ({state.last_error})" for address, state in self._failing.items()]
        return "no broker reachable at " + ", ".join(tried)
