"""A fault-injecting TCP proxy for the Kafka protocol, for tests and the soak run.
[io: the proxy thread; any thread: the control API (:class:`FaultProxy` methods, :class:`Fault`)]

:class:`FaultProxy` listens on 127.0.0.1 and forwards every connection to one upstream broker. It
understands Kafka framing only as far as it needs to: every frame starts with a 4-byte big-endian
size; a request header starts with int16 api_key, int16 api_version, int32 correlation_id; a
response starts with int32 correlation_id. Per connection it remembers which API each correlation
id belongs to, so a fault can act on "the response to the next Fetch".

One daemon thread (``fault-proxy-<port>``) owns every socket: it accepts, connects upstream,
reads whole frames, applies faults and writes. The control API may be called from any thread;
it changes the fault state under a lock and wakes the proxy thread. Faults:

===============================  ===========================================================
``cut_connections()``            close every open connection now (FIN, or RST with ``rst``)
``cut_before_request(k)``        close the connection instead of forwarding a request of API k
``cut_mid_request(k)``           forward part of a request of API k, then close
``cut_after_request(k)``         forward a request of API k, then close (the broker acts on it,
                                 the client never hears back)
``drop_request(k)``              swallow a request of API k; the connection stays open
``cut_before_response(k)``       close instead of forwarding the response to API k
``cut_mid_response(k)``          forward part of the response to API k, then close
``cut_after_response(k)``        forward the response to API k, then close at once (the client
                                 may read both in one go)
``drop_response(k)``             swallow the response to API k; the connection stays open
``replace_response(k, fn)``      send ``fn(frame)`` instead of the response frame (hostile frames)
``stall(upstream, downstream)``  stop forwarding (and reading) in one or both directions
``set_latency(s)``               hold every frame ``s`` seconds before forwarding it
``refuse_connections(mode)``     "close": accept and close at once; "unlisten": stop listening
``reset()``                      clear every fault (open connections stay open)
===============================  ===========================================================

The per-API faults take ``times`` (default 1; ``None`` for every matching frame) and return a
:class:`Fault` whose :meth:`Fault.wait` blocks until it fired. :meth:`FaultProxy.stats` counts
connections, requests and responses per API key.

**TLS.** A proxy in front of a TLS listener sees only TLS records. With ``framing="tls"`` it cuts
the streams into TLS records (5-byte header: content type, version, length) instead of Kafka
frames, and the per-API faults take the record's content type as a pseudo API key:
:data:`TLS_HANDSHAKE` (the hellos, certificates, key exchange), :data:`TLS_APPLICATION_DATA`
(Kafka's bytes, and TLS 1.3's encrypted handshake), :data:`TLS_CHANGE_CIPHER_SPEC`,
:data:`TLS_ALERT`. ``cut_mid_request(TLS_APPLICATION_DATA, min_bytes=8000)`` breaks a large write
halfway; ``cut_mid_response(TLS_HANDSHAKE)`` breaks the server's hello. ``rst_cuts=True`` makes
every cut a reset (RST, SO_LINGER 0) instead of an orderly close (FIN). To cut a Kafka exchange
inside TLS (a SASL login, say), put a Kafka-framed proxy *behind* the TLS terminator; its
``advertised`` address (the client-facing one) is what it writes into Metadata responses.

A broker that cannot advertise the proxy's address (noida-db) is handled with
``rewrite_addresses=True``: the proxy decodes Metadata and FindCoordinator responses with kaflux's
generated classes, replaces the upstream port with its own and re-encodes them, so every client
connection comes back through the proxy.

Typical use::

    with FaultProxy(("127.0.0.1", broker.port)) as proxy:
        producer = Producer({"bootstrap.servers": proxy.bootstrap_servers})
        fault = proxy.cut_after_response(ApiKey.PRODUCE)
        future = producer.send("t", b"v")
        assert fault.wait(timeout=10)

Why this is test-support code and not public (it used to ship as ``kaflux.testing.fault_proxy``):
nothing users run needs it (``kaflux broker start``, the demo and the Spark job use only the
brokers, :mod:`kaflux.devbrokers`); its faults are cut to kaflux's own exactly-once and deadline
tests (which correlation id to break, when), so publishing it would freeze an API shaped by our
tests; and it rewrites responses with kaflux's generated protocol classes, so it is a Kafka
protocol tool to maintain, not a client feature. Applications that want network faults in their
own tests are better served by a general proxy such as Toxiproxy, which works with any client.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import errno
import selectors
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal, Self

from kaflux.errors import KafkaError
from kaflux.protocol.api import ApiKey, response_header_version
from kaflux.protocol.messages.find_coordinator import FindCoordinatorResponse
from kaflux.protocol.messages.headers import ResponseHeader
from kaflux.protocol.messages.metadata import MetadataResponse
from kaflux.protocol.primitives import Reader, Writer

__all__ = [
    "TLS_ALERT",
    "TLS_APPLICATION_DATA",
    "TLS_CHANGE_CIPHER_SPEC",
    "TLS_HANDSHAKE",
    "Fault",
    "FaultProxy",
    "ProxyStats",
    "rewrite_broker_addresses",
]

_HOST = "127.0.0.1"
_SIZE = struct.Struct(">i")
_REQUEST_HEADER = struct.Struct(">hhi")
_CORRELATION_ID = struct.Struct(">i")
_RECV_BYTES = 256 * 1024
#: stop reading from one side while this much is waiting to be written to the other
_HIGH_WATER = 8 * 1024 * 1024
#: a size prefix above this (or negative) means the stream is not Kafka framing: forward it raw
_MAX_FRAME = 1 << 30
_CONTROL_TIMEOUT_S = 10.0
_TLS_HEADER = struct.Struct(">BHH")

#: pseudo API keys of TLS records (minus the record's content type), for ``framing="tls"``
TLS_CHANGE_CIPHER_SPEC = -20
TLS_ALERT = -21
TLS_HANDSHAKE = -22
TLS_APPLICATION_DATA = -23

Point = Literal["request", "response"]
Action = Literal["cut_before", "cut_mid", "cut_after", "drop", "replace"]
Framing = Literal["kafka", "tls"]


# --- public types ---------------------------------------------------------------------------------------


class Fault:
    """A per-API fault armed on a :class:`FaultProxy`; counts how often it fired."""

    def __init__(
        self,
        proxy: FaultProxy,
        name: str,
        point: Point,
        action: Action,
        api_key: int | None,
        times: int | None,
        keep: float | int,
        replacer: Callable[[bytes], bytes] | None,
        min_bytes: int = 0,
    ) -> None:
        self.name = name
        self.point = point
        self.action = action
        self.api_key = api_key
        self._proxy = proxy
        self._remaining = times
        self._keep = keep
        #: act only on frames at least this long (size prefix or TLS header included)
        self.min_bytes = min_bytes
        self._replacer = replacer
        self._fired = 0
        self._fired_at: list[float] = []

    @property
    def fired(self) -> int:
        """How many frames this fault has acted on so far."""
        with self._proxy._cond:
            return self._fired

    @property
    def fired_at(self) -> list[float]:
        """``time.monotonic()`` of each firing."""
        with self._proxy._cond:
            return list(self._fired_at)

    @property
    def exhausted(self) -> bool:
        """Fired as often as it was armed for (never true for ``times=None``)."""
        with self._proxy._cond:
            return self._remaining == 0

    def wait(self, count: int = 1, timeout: float = _CONTROL_TIMEOUT_S) -> bool:
        """Block until the fault fired ``count`` times; False if ``timeout`` seconds passed first."""
        with self._proxy._cond:
            return self._proxy._cond.wait_for(lambda: self._fired >= count, timeout)

    def cancel(self) -> None:
        """Disarm the fault (frames already acted on stay so)."""
        self._proxy._remove_rule(self)

    def __repr__(self) -> str:
        key = "any" if self.api_key is None else _api_name(self.api_key)
        return f"<Fault {self.name} {key} fired={self._fired} remaining={self._remaining}>"

    # proxy thread, under the proxy's lock
    def _take(self, now: float) -> bool:
        if self._remaining == 0:
            return False
        if self._remaining is not None:
            self._remaining -= 1
        self._fired += 1
        self._fired_at.append(now)
        return True


@dataclass(frozen=True)
class ProxyStats:
    """A snapshot of the proxy's counters (since start, or since :meth:`FaultProxy.reset_stats`)."""

    connections_accepted: int = 0
    connections_refused: int = 0
    connections_open: int = 0
    upstream_failures: int = 0
    cuts: int = 0
    requests: dict[int, int] = field(default_factory=dict)
    responses: dict[int, int] = field(default_factory=dict)
    rewritten: int = 0
    rewrite_failures: int = 0
    bytes_upstream: int = 0
    bytes_downstream: int = 0

    def requests_of(self, api_key: int) -> int:
        return self.requests.get(int(api_key), 0)

    def responses_of(self, api_key: int) -> int:
        return self.responses.get(int(api_key), 0)


# --- the proxy ----------------------------------------------------------------------------------------------


class FaultProxy:
    """A Kafka-aware TCP proxy on 127.0.0.1 that injects faults on command.

    ``upstream`` is the broker's ``(host, port)``; it may be given later with :meth:`set_upstream`
    (connections arriving before that are closed at once). ``port`` fixes the listening port (by
    default a free one is picked by :meth:`start`). ``rewrite_addresses`` makes the proxy replace the
    upstream's address in Metadata and FindCoordinator responses with its own.
    """

    def __init__(
        self,
        upstream: tuple[str, int] | None = None,
        *,
        port: int = 0,
        rewrite_addresses: bool = False,
        name: str = "fault-proxy",
        framing: Framing = "kafka",
        rst_cuts: bool = False,
        advertised: tuple[str, int] | None = None,
    ) -> None:
        if framing not in ("kafka", "tls"):
            raise ValueError(f"unknown framing {framing!r}")
        self._upstream = upstream
        self.framing = framing
        self.rst_cuts = rst_cuts
        #: the address written into Metadata/FindCoordinator responses (default: the proxy's own)
        self.advertised = advertised
        self._requested_port = port
        self._port: int | None = None
        self.rewrite_addresses = rewrite_addresses
        self.name = name
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        # fault state (under the lock)
        self._rules: list[Fault] = []
        self._stall_up = False
        self._stall_down = False
        self._latency_up = 0.0
        self._latency_down = 0.0
        self._refuse: Literal["no", "close", "unlisten"] = "no"
        self._commands: collections.deque[tuple[Callable[[], Any], _Reply]] = collections.deque()
        # counters (under the lock)
        self._counts: collections.Counter[str] = collections.Counter()
        self._requests: collections.Counter[int] = collections.Counter()
        self._responses: collections.Counter[int] = collections.Counter()
        # proxy thread only
        self._selector: selectors.BaseSelector | None = None
        self._listener: socket.socket | None = None
        self._links: set[_Link] = set()
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stopping = False
        self.error: BaseException | None = None

    # -- life cycle ----------------------------------------------------------------------------------

    def start(self) -> Self:
        """Bind the listening socket and start the proxy thread. Returns self."""
        if self._thread is not None:
            return self
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._listen(self._requested_port)
        self._apply_listening()
        self._thread = threading.Thread(target=self._run, name=f"{self.name}-{self.port}", daemon=True)
        self._thread.start()
        return self

    def close(self, timeout: float = _CONTROL_TIMEOUT_S) -> None:
        """Close every connection and the listening socket and stop the thread. Idempotent."""
        thread = self._thread
        if thread is None:
            return
        with self._lock:
            self._stopping = True
        self._wake()
        thread.join(timeout)
        if thread.is_alive():
            raise RuntimeError(f"{self.name} thread did not stop within {timeout} s")
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def is_alive(self) -> bool:
        """The proxy thread runs."""
        return self._thread is not None and self._thread.is_alive()

    @property
    def port(self) -> int:
        """The port the proxy listens on (kept while refusing with "unlisten")."""
        if self._port is None:
            raise RuntimeError("the proxy has not been started")
        return self._port

    @property
    def host(self) -> str:
        return _HOST

    @property
    def bootstrap_servers(self) -> str:
        """``"127.0.0.1:PORT"`` of the proxy, for a client's ``bootstrap.servers``."""
        return f"{_HOST}:{self.port}"

    @property
    def upstream(self) -> tuple[str, int] | None:
        return self._upstream

    def set_upstream(self, host: str, port: int) -> None:
        """Forward new connections to ``host:port`` (open connections keep their broker)."""
        with self._lock:
            self._upstream = (host, port)

    # -- faults ----------------------------------------------------------------------------------------

    def cut_connections(self, *, rst: bool = False) -> int:
        """Close every open connection now; returns how many were closed."""
        return int(self._call(lambda: self._cut_all(rst), 0))

    def cut_before_request(self, api_key: int | None, times: int | None = 1, *, min_bytes: int = 0) -> Fault:
        """Close the connection when a request of ``api_key`` arrives, instead of forwarding it."""
        return self._arm("cut_before_request", "request", "cut_before", api_key, times, min_bytes=min_bytes)

    def cut_mid_request(
        self, api_key: int | None, times: int | None = 1, keep: float | int = 0.5, *, min_bytes: int = 0
    ) -> Fault:
        """Forward the first part of a request of ``api_key`` (``keep``: a fraction or a byte count
        of the frame, size prefix included), then close. ``min_bytes``: only a frame at least that
        long (a large write)."""
        return self._arm(
            "cut_mid_request", "request", "cut_mid", api_key, times, keep=keep, min_bytes=min_bytes
        )

    def cut_after_request(self, api_key: int | None, times: int | None = 1) -> Fault:
        """Forward a request of ``api_key`` to the broker, then close the connection at once."""
        return self._arm("cut_after_request", "request", "cut_after", api_key, times)

    def drop_request(self, api_key: int | None, times: int | None = 1) -> Fault:
        """Swallow a request of ``api_key``; the connection stays open."""
        return self._arm("drop_request", "request", "drop", api_key, times)

    def cut_before_response(self, api_key: int | None, times: int | None = 1) -> Fault:
        """Close the connection instead of forwarding the response to ``api_key``."""
        return self._arm("cut_before_response", "response", "cut_before", api_key, times)

    def cut_mid_response(self, api_key: int | None, times: int | None = 1, keep: float | int = 0.5) -> Fault:
        """Forward the first part of the response to ``api_key`` (``keep``: a fraction or a byte count
        of the frame, size prefix included), then close."""
        return self._arm("cut_mid_response", "response", "cut_mid", api_key, times, keep=keep)

    def cut_after_response(self, api_key: int | None, times: int | None = 1) -> Fault:
        """Forward the response to ``api_key``, then close the connection right after it."""
        return self._arm("cut_after_response", "response", "cut_after", api_key, times)

    def drop_response(self, api_key: int | None, times: int | None = 1) -> Fault:
        """Swallow the response to ``api_key``; the connection stays open."""
        return self._arm("drop_response", "response", "drop", api_key, times)

    def replace_response(
        self, api_key: int | None, replacer: Callable[[bytes], bytes], times: int | None = 1
    ) -> Fault:
        """Send ``replacer(frame)`` (any bytes) instead of the response frame to ``api_key``.

        ``frame`` is the whole response, size prefix included.
        """
        return self._arm("replace_response", "response", "replace", api_key, times, replacer=replacer)

    def stall(self, *, upstream: bool = True, downstream: bool = True) -> None:
        """Stop forwarding requests (``upstream``) and/or responses (``downstream``).

        A stalled direction is not read either, so the sender's socket buffers fill up as with a
        hung peer. Connections stay open; new ones are still accepted. :meth:`unstall` resumes.
        """
        with self._lock:
            self._stall_up = self._stall_up or upstream
            self._stall_down = self._stall_down or downstream
        self._apply_settings()

    def unstall(self) -> None:
        """Resume forwarding in both directions."""
        with self._lock:
            self._stall_up = self._stall_down = False
        self._apply_settings()

    def set_latency(self, seconds: float, *, upstream: bool = True, downstream: bool = True) -> None:
        """Hold each frame ``seconds`` before forwarding it (0 removes the latency)."""
        if seconds < 0:
            raise ValueError("latency must not be negative")
        with self._lock:
            if upstream:
                self._latency_up = seconds
            if downstream:
                self._latency_down = seconds
        self._apply_settings()

    def refuse_connections(self, mode: Literal["close", "unlisten"] = "close") -> None:
        """Refuse new connections: ``close`` accepts and closes each at once; ``unlisten`` closes the
        listening socket (connects fail with ECONNREFUSED). Open connections are left alone."""
        if mode not in ("close", "unlisten"):
            raise ValueError(f"unknown refuse mode {mode!r}")
        with self._lock:
            self._refuse = mode
        self._call(self._apply_listening)

    def accept_connections(self) -> None:
        """Accept new connections again (listening again on the same port if needed)."""
        with self._lock:
            self._refuse = "no"
        self._call(self._apply_listening)

    def reset(self) -> None:
        """Clear every fault: rules, stalls, latency and refusal. Open connections stay open."""
        with self._lock:
            self._rules.clear()
            self._stall_up = self._stall_down = False
            self._latency_up = self._latency_down = 0.0
            self._refuse = "no"
        self._call(self._apply_listening)

    # -- counters --------------------------------------------------------------------------------------

    def stats(self) -> ProxyStats:
        """A snapshot of the counters."""
        with self._lock:
            return self._stats_locked()

    def reset_stats(self) -> None:
        """Zero the counters (``connections_open`` stays accurate)."""
        with self._lock:
            self._counts.clear()
            self._requests.clear()
            self._responses.clear()

    def upstream_local_ports(self) -> set[int]:
        """Local ports of the proxy's open connections to the broker (to check that a client's
        connections all go through the proxy)."""
        ports: set[int] = self._call(self._upstream_ports, set())
        return ports

    def _upstream_ports(self) -> set[int]:
        ports = set()
        for link in self._links:
            with contextlib.suppress(OSError):
                ports.add(int(link.server.getsockname()[1]))
        return ports

    def wait_for(self, predicate: Callable[[ProxyStats], bool], timeout: float = _CONTROL_TIMEOUT_S) -> bool:
        """Block until ``predicate(stats)`` holds; False if ``timeout`` seconds passed first."""
        with self._cond:
            return self._cond.wait_for(lambda: predicate(self._stats_locked()), timeout)

    def _stats_locked(self) -> ProxyStats:
        c = self._counts
        return ProxyStats(
            connections_accepted=c["accepted"],
            connections_refused=c["refused"],
            connections_open=c["open"],
            upstream_failures=c["upstream_failures"],
            cuts=c["cuts"],
            requests=dict(self._requests),
            responses=dict(self._responses),
            rewritten=c["rewritten"],
            rewrite_failures=c["rewrite_failures"],
            bytes_upstream=c["bytes_up"],
            bytes_downstream=c["bytes_down"],
        )

    # -- control plumbing (any thread) ------------------------------------------------------------------

    def _arm(
        self,
        name: str,
        point: Point,
        action: Action,
        api_key: int | None,
        times: int | None,
        *,
        keep: float | int = 0.5,
        replacer: Callable[[bytes], bytes] | None = None,
        min_bytes: int = 0,
    ) -> Fault:
        if times is not None and times < 1:
            raise ValueError("times must be at least 1, or None for always")
        key = None if api_key is None else int(api_key)
        fault = Fault(self, name, point, action, key, times, keep, replacer, min_bytes)
        with self._lock:
            self._rules.append(fault)
        return fault

    def _remove_rule(self, fault: Fault) -> None:
        with self._lock:
            if fault in self._rules:
                self._rules.remove(fault)

    def _call(self, command: Callable[[], Any], default: Any = None) -> Any:
        """Run ``command`` on the proxy thread and return its result (``default`` if not started)."""
        thread = self._thread
        if thread is None:
            return default
        if not thread.is_alive():
            raise RuntimeError(f"{self.name} is not running: {self.error!r}")
        reply = _Reply()
        with self._lock:
            self._commands.append((command, reply))
        self._wake()
        if not reply.done.wait(_CONTROL_TIMEOUT_S):
            raise RuntimeError(f"{self.name} did not run a command within {_CONTROL_TIMEOUT_S} s")
        if reply.error is not None:
            raise reply.error
        return reply.value

    def _apply_settings(self) -> None:
        """Return once the proxy thread works with the settings just changed: a pass that had
        already read them (it may be handling bytes that arrived meanwhile) has ended, as the
        next pass runs its commands before it reads the settings again."""
        self._call(_no_op)

    def _wake(self) -> None:
        if self._wake_w is not None:
            with contextlib.suppress(OSError):  # full: the thread is awake anyway; closed: stopped
                self._wake_w.send(b"x")

    # -- the proxy thread ------------------------------------------------------------------------------

    def _listen(self, port: int) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((_HOST, port))
            sock.listen(128)
        except OSError:
            sock.close()
            raise
        sock.setblocking(False)
        self._port = sock.getsockname()[1]
        self._listener = sock
        assert self._selector is not None
        self._selector.register(sock, selectors.EVENT_READ, self)

    def _apply_listening(self) -> None:
        with self._lock:
            refuse = self._refuse
        if refuse == "unlisten" and self._listener is not None:
            assert self._selector is not None
            self._selector.unregister(self._listener)
            self._listener.close()
            self._listener = None
        elif refuse != "unlisten" and self._listener is None:
            self._listen(self.port)

    def _run(self) -> None:
        try:
            while True:
                with self._lock:
                    if self._stopping:
                        break
                self._run_once()
        except BaseException as exc:
            self.error = exc
            raise
        finally:
            self._shutdown()

    def _run_once(self) -> None:
        assert self._selector is not None
        now = time.monotonic()
        self._run_commands()
        with self._lock:
            settings = _Settings(
                self._stall_up, self._stall_down, self._latency_up, self._latency_down, self._refuse
            )
        timeout: float | None = None
        for link in list(self._links):
            due = link.release_due(now, settings)
            if due is not None:
                timeout = due if timeout is None else min(timeout, due)
            self._after_io(link, settings)
        for link in list(self._links):
            link.update_interest(settings)
        wait = None if timeout is None else max(0.0, timeout - time.monotonic())
        events = self._selector.select(wait)
        for key, mask in events:
            data = key.data
            if data is None:
                self._drain_wake()
            elif data is self:
                self._accept(settings)
            else:
                link, role = data
                if link not in self._links:
                    continue
                try:
                    link.on_event(role, mask, settings)
                except _Close as close:
                    self._close_link(link, rst=close.rst)
                    continue
                self._after_io(link, settings)
        with self._cond:
            self._cond.notify_all()

    def _after_io(self, link: _Link, settings: _Settings) -> None:
        if link not in self._links:
            return
        try:
            link.release_due(time.monotonic(), settings)
            link.flush(settings)
            if link.finished():
                raise _Close(False)
        except _Close as close:
            self._close_link(link, rst=close.rst)

    def _run_commands(self) -> None:
        while True:
            with self._lock:
                if not self._commands:
                    return
                command, reply = self._commands.popleft()
            try:
                reply.value = command()
            except BaseException as exc:
                reply.error = exc
            reply.done.set()

    def _drain_wake(self) -> None:
        assert self._wake_r is not None
        with contextlib.suppress(BlockingIOError):
            while self._wake_r.recv(4096):
                pass

    def _accept(self, settings: _Settings) -> None:
        assert self._listener is not None and self._selector is not None
        while True:
            try:
                client, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return  # e.g. EMFILE; the client will see its connect time out or fail
            with self._lock:
                upstream = self._upstream
                self._counts["accepted"] += 1
            if settings.refuse != "no" or upstream is None:
                with self._lock:
                    self._counts["refused"] += 1
                client.close()
                continue
            client.setblocking(False)
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            server.setblocking(False)
            server.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            code = server.connect_ex(upstream)
            if code not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK):
                with self._lock:
                    self._counts["upstream_failures"] += 1
                server.close()
                client.close()
                continue
            link = _Link(self, client, server, connected=(code == 0))
            self._links.add(link)
            with self._lock:
                self._counts["open"] += 1
            link.update_interest(settings)

    def _close_link(self, link: _Link, *, rst: bool, cut: bool = False) -> None:
        if link not in self._links:
            return
        self._links.discard(link)
        assert self._selector is not None
        for sock in (link.client, link.server):
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._selector.unregister(sock)
            if rst:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            with contextlib.suppress(OSError):
                sock.close()
        with self._lock:
            self._counts["open"] -= 1
            if cut:
                self._counts["cuts"] += 1

    def _cut_all(self, rst: bool) -> int:
        links = list(self._links)
        for link in links:
            self._close_link(link, rst=rst, cut=True)
        return len(links)

    def _shutdown(self) -> None:
        for link in list(self._links):
            self._close_link(link, rst=False)
        if self._selector is not None:
            if self._listener is not None:
                with contextlib.suppress(KeyError, ValueError):
                    self._selector.unregister(self._listener)
                self._listener.close()
                self._listener = None
            self._selector.close()
        for sock in (self._wake_r, self._wake_w):
            if sock is not None:
                sock.close()
        self._wake_w = None
        with self._lock:
            commands, self._commands = list(self._commands), collections.deque()
        for _, reply in commands:
            reply.error = RuntimeError(f"{self.name} stopped")
            reply.done.set()

    # -- frame handling (proxy thread) -------------------------------------------------------------------

    def _match(self, point: Point, api_key: int | None, size: int = 0) -> Fault | None:
        """The first armed fault for this frame, taken (counted as fired); under the lock."""
        now = time.monotonic()
        for fault in self._rules:
            matches = (
                fault.point == point
                and (fault.api_key is None or fault.api_key == api_key)
                and size >= fault.min_bytes
            )
            if matches and fault._take(now):
                if fault._remaining == 0:
                    self._rules.remove(fault)
                return fault
        return None

    def _on_tls_record(self, point: Point, frame: bytes) -> _Decision:
        api_key = -frame[0]
        with self._lock:
            (self._requests if point == "request" else self._responses)[api_key] += 1
            fault = self._match(point, api_key, len(frame))
        return _Decision(frame, fault)

    def _on_request(self, link: _Link, frame: bytes) -> _Decision:
        if self.framing == "tls":
            return self._on_tls_record("request", frame)
        api_key: int | None = None
        if len(frame) >= 4 + _REQUEST_HEADER.size:
            key, version, correlation_id = _REQUEST_HEADER.unpack_from(frame, 4)
            api_key = key
            link.correlations[correlation_id] = (key, version)
        with self._lock:
            if api_key is not None:
                self._requests[api_key] += 1
            fault = self._match("request", api_key, len(frame))
        return _Decision(frame, fault)

    def _on_response(self, link: _Link, frame: bytes) -> _Decision:
        if self.framing == "tls":
            return self._on_tls_record("response", frame)
        api: tuple[int, int] | None = None
        if len(frame) >= 4 + _CORRELATION_ID.size:
            (correlation_id,) = _CORRELATION_ID.unpack_from(frame, 4)
            api = link.correlations.pop(correlation_id, None)
        api_key = api[0] if api is not None else None
        if api is not None and self.rewrite_addresses and api[0] in _ADDRESS_APIS:
            upstream = link.upstream
            try:
                advertised = self.advertised or (_HOST, self.port)
                rewritten = rewrite_broker_addresses(frame, api[0], api[1], {upstream[1]: advertised})
            except (KafkaError, ValueError):
                with self._lock:
                    self._counts["rewrite_failures"] += 1
            else:
                if rewritten != frame:
                    frame = rewritten
                    with self._lock:
                        self._counts["rewritten"] += 1
        with self._lock:
            if api_key is not None:
                self._responses[api_key] += 1
            fault = self._match("response", api_key, len(frame))
        return _Decision(frame, fault)

    def _count_bytes(self, upstream: bool, count: int) -> None:
        with self._lock:
            self._counts["bytes_up" if upstream else "bytes_down"] += count

    def __repr__(self) -> str:
        port = self._port if self._port is not None else "?"
        return f"<FaultProxy {_HOST}:{port} -> {self._upstream}>"


# --- internals ----------------------------------------------------------------------------------------------

_ADDRESS_APIS = frozenset({int(ApiKey.METADATA), int(ApiKey.FIND_COORDINATOR)})


def _no_op() -> None:
    """A command that only marks a pass of the proxy thread (see FaultProxy._apply_settings)."""


@dataclass
class _Reply:
    done: threading.Event = field(default_factory=threading.Event)
    value: Any = None
    error: BaseException | None = None


@dataclass(frozen=True)
class _Settings:
    stall_up: bool
    stall_down: bool
    latency_up: float
    latency_down: float
    refuse: str


@dataclass
class _Decision:
    frame: bytes
    fault: Fault | None


class _Close(Exception):
    """Close this link (raised inside the proxy thread)."""

    def __init__(self, rst: bool) -> None:
        super().__init__()
        self.rst = rst


class _Pipe:
    """One direction of a link: bytes read from ``src``, cut into frames, queued for ``dst``."""

    def __init__(self, upstream: bool, framing: Framing = "kafka") -> None:
        self.upstream = upstream  # client -> broker (requests)
        self.framing = framing
        self.inbuf = bytearray()
        self.raw = False  # not Kafka framing: forward bytes as they come
        self.pending: collections.deque[tuple[float, bytes, bool]] = collections.deque()
        self.pending_bytes = 0
        self.outbuf = bytearray()
        self.src_eof = False
        self.close_when_flushed = False

    def buffered(self) -> int:
        return self.pending_bytes + len(self.outbuf)

    def frames(self) -> Iterable[tuple[bytes, bool]]:
        """Complete frames in ``inbuf`` (removed from it), each with whether it is a Kafka frame.

        Once a size prefix is implausible the stream is forwarded raw from there on.
        """
        buf = self.inbuf
        start = 0
        if self.framing == "tls":
            while len(buf) - start >= _TLS_HEADER.size:
                _, _, length = _TLS_HEADER.unpack_from(buf, start)
                end = start + _TLS_HEADER.size + length
                if len(buf) < end:
                    break
                yield bytes(buf[start:end]), True
                start = end
            del buf[:start]
            return
        while not self.raw and len(buf) - start >= 4:
            (size,) = _SIZE.unpack_from(buf, start)
            if size < 0 or size > _MAX_FRAME:
                self.raw = True
                break
            end = start + 4 + size
            if len(buf) < end:
                break
            yield bytes(buf[start:end]), True
            start = end
        if self.raw and len(buf) > start:
            yield bytes(buf[start:]), False
            start = len(buf)
        del buf[:start]


class _Link:
    """A client connection and its upstream connection. [proxy thread]"""

    def __init__(self, proxy: FaultProxy, client: socket.socket, server: socket.socket, *, connected: bool):
        self.proxy = proxy
        self.client = client
        self.server = server
        self.connected = connected
        self.upstream: tuple[str, int] = server.getpeername() if connected else proxy.upstream or ("", 0)
        self.up = _Pipe(upstream=True, framing=proxy.framing)
        self.down = _Pipe(upstream=False, framing=proxy.framing)
        self.correlations: dict[int, tuple[int, int]] = {}
        self.closing = False  # a cut is pending: read nothing more, flush, then close
        self.registered: dict[str, int] = {}

    def _sock(self, role: str) -> socket.socket:
        return self.client if role == "client" else self.server

    def update_interest(self, s: _Settings) -> None:
        selector = self.proxy._selector
        assert selector is not None
        up, down = self.up, self.down
        client = 0
        server = 0
        if self.connected:
            if not (self.closing or up.src_eof or s.stall_up or up.buffered() > _HIGH_WATER):
                client |= selectors.EVENT_READ
            if not (self.closing or down.src_eof or s.stall_down or down.buffered() > _HIGH_WATER):
                server |= selectors.EVENT_READ
            if down.outbuf and not s.stall_down:
                client |= selectors.EVENT_WRITE
            if up.outbuf and not s.stall_up:
                server |= selectors.EVENT_WRITE
        else:
            server = selectors.EVENT_WRITE
        for role, mask in (("client", client), ("server", server)):
            if self.registered.get(role) != mask:
                sock = self._sock(role)
                if mask:
                    if self.registered.get(role):
                        selector.modify(sock, mask, (self, role))
                    else:
                        selector.register(sock, mask, (self, role))
                elif self.registered.get(role):
                    selector.unregister(sock)
                self.registered[role] = mask

    def on_event(self, role: str, mask: int, s: _Settings) -> None:
        if role == "server" and not self.connected:
            if not mask & selectors.EVENT_WRITE:
                return
            code = self.server.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code != 0:
                with self.proxy._lock:
                    self.proxy._counts["upstream_failures"] += 1
                raise _Close(False)
            self.connected = True
            with contextlib.suppress(OSError):
                self.upstream = self.server.getpeername()
            return
        if mask & selectors.EVENT_WRITE:
            self.flush(s)
        if mask & selectors.EVENT_READ:
            self._read(self.up if role == "client" else self.down, self._sock(role), s)

    def _read(self, pipe: _Pipe, sock: socket.socket, s: _Settings) -> None:
        if self.closing or pipe.src_eof:
            return
        try:
            data = sock.recv(_RECV_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""  # reset by the peer: treat as end of stream
        latency = s.latency_up if pipe.upstream else s.latency_down
        now = time.monotonic()
        if not data:
            pipe.src_eof = True
            if pipe.inbuf:  # a frame cut short by the peer: forward what came, as the peer sent it
                self._queue(pipe, now + latency, bytes(pipe.inbuf), False)
                pipe.inbuf.clear()
            return
        self.proxy._count_bytes(pipe.upstream, len(data))
        pipe.inbuf += data
        for frame, is_frame in list(pipe.frames()):
            if not is_frame:
                self._queue(pipe, now + latency, frame, False)
                continue
            decision = (
                self.proxy._on_request(self, frame) if pipe.upstream else self.proxy._on_response(self, frame)
            )
            fault = decision.fault
            frame = decision.frame
            if fault is None:
                self._queue(pipe, now + latency, frame, False)
                continue
            action = fault.action
            if action == "cut_before":
                self._cut()
            elif action == "cut_mid":
                keep = fault._keep
                count = int(len(frame) * keep) if isinstance(keep, float) else int(keep)
                count = max(1, min(len(frame) - 1, count))
                self._queue(pipe, now + latency, frame[:count], True)
                return
            elif action == "cut_after":
                self._queue(pipe, now + latency, frame, True)
                return
            elif action == "drop":
                continue
            elif action == "replace":
                assert fault._replacer is not None
                self._queue(pipe, now + latency, fault._replacer(frame), False)

    def _cut(self) -> None:
        with self.proxy._lock:
            self.proxy._counts["cuts"] += 1
        raise _Close(self.proxy.rst_cuts)

    def _queue(self, pipe: _Pipe, release: float, data: bytes, then_close: bool) -> None:
        pipe.pending.append((release, data, then_close))
        pipe.pending_bytes += len(data)
        if then_close:
            self.closing = True  # nothing more is read from either side

    def release_due(self, now: float, s: _Settings) -> float | None:
        """Move due frames to the output buffers; returns the next release time, if any."""
        soonest: float | None = None
        for pipe, stalled in ((self.up, s.stall_up), (self.down, s.stall_down)):
            while pipe.pending and not stalled and not pipe.close_when_flushed:
                release, data, then_close = pipe.pending[0]
                if release > now:
                    soonest = release if soonest is None else min(soonest, release)
                    break
                pipe.pending.popleft()
                pipe.pending_bytes -= len(data)
                pipe.outbuf += data
                if then_close:
                    pipe.close_when_flushed = True
        return soonest

    def flush(self, s: _Settings) -> None:
        if not self.connected:
            return
        for pipe, sock, stalled in (
            (self.up, self.server, s.stall_up),
            (self.down, self.client, s.stall_down),
        ):
            while pipe.outbuf and not stalled:
                try:
                    sent = sock.send(pipe.outbuf)
                except (BlockingIOError, InterruptedError):
                    break
                except OSError:
                    raise _Close(False) from None
                del pipe.outbuf[:sent]
            if pipe.close_when_flushed and not pipe.outbuf:
                self._cut()

    def finished(self) -> bool:
        """A side ended and everything it sent has been forwarded."""
        return any(p.src_eof and not p.pending and not p.outbuf for p in (self.up, self.down))


def rewrite_broker_addresses(
    frame: bytes, api_key: int, api_version: int, ports: dict[int, tuple[str, int]]
) -> bytes:
    """Re-encode a Metadata or FindCoordinator response frame with broker addresses replaced.

    ``ports`` maps a broker port to the ``(host, port)`` to advertise instead. Returns ``frame``
    itself when nothing matched. Raises KafkaError when the frame cannot be decoded or encoded.
    """
    header_version = response_header_version(api_key, api_version)
    reader = Reader(memoryview(frame)[4:])
    header = ResponseHeader.decode(reader, header_version)
    changed = False
    body: MetadataResponse | FindCoordinatorResponse
    if api_key == ApiKey.METADATA:
        body = MetadataResponse.decode(reader, api_version)
        for broker in body.brokers:
            if broker.port in ports:
                broker.host, broker.port = ports[broker.port]
                changed = True
    elif api_key == ApiKey.FIND_COORDINATOR:
        body = FindCoordinatorResponse.decode(reader, api_version)
        if body.port in ports:
            body.host, body.port = ports[body.port]
            changed = True
        for coordinator in body.coordinators:
            if coordinator.port in ports:
                coordinator.host, coordinator.port = ports[coordinator.port]
                changed = True
    else:
        raise ValueError(f"api key {api_key} carries no broker addresses")
    if not changed:
        return frame
    writer = Writer()
    header.encode(writer, header_version)
    body.encode(writer, api_version)
    payload = writer.getvalue()
    return _SIZE.pack(len(payload)) + payload


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"api {api_key}"


def main(argv: list[str] | None = None) -> None:
    """``python -m support.fault_proxy --upstream 127.0.0.1:9092``: a plain proxy (no faults)."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--upstream", required=True, help="HOST:PORT of the broker")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default: a free one)")
    parser.add_argument("--rewrite-addresses", action="store_true", help="advertise the proxy in metadata")
    args = parser.parse_args(argv)
    host, _, port = args.upstream.rpartition(":")
    with FaultProxy((host, int(port)), port=args.port, rewrite_addresses=args.rewrite_addresses) as proxy:
        print(f"listening on {proxy.bootstrap_servers}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while proxy.is_alive():
                time.sleep(1.0)


if __name__ == "__main__":
    main()
