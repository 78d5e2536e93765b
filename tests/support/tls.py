"""A TLS terminator in front of a broker: stunnel4 run as a child process, for tests. [io]

No broker here serves TLS (Tansu 0.6.0's ``--cert``/``--key`` cannot be combined; noida-db has none;
see docs/brokers.md). :class:`TlsTerminator` runs Debian's ``stunnel4`` with a
generated configuration: it accepts TLS on 127.0.0.1:``port`` with a server certificate and key, and
forwards the plaintext to 127.0.0.1:``upstream_port``. With ``client_ca`` it asks for a client
certificate, requires one and checks it against that CA (mutual TLS).

stunnel runs in the foreground (no pid file, no syslog, no daemon); its log goes to
``<workdir>/stunnel.log``. Only this process is ever signalled, by PID: :meth:`TlsTerminator.stop` sends
SIGTERM, then SIGKILL after a timeout. ``start()`` returns once stunnel reports that it accepts
connections and the port answers a TCP connect.

For Kafka, the broker must advertise the terminator's port, so that clients reconnect through it:
:func:`start_tansu_behind_tls` starts a Tansu broker that advertises a port, then stunnel on that port,
and retries with another port if some other process took it first.

Typical use::

    broker, tls = start_tansu_behind_tls(cert=certs.server_cert, key=certs.server_key)
    producer = Producer({"bootstrap.servers": tls.bootstrap_servers, "security.protocol": "SSL",
                         "ssl.ca.location": str(certs.ca_cert)})
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Self

from kaflux.devbrokers.brokers import (
    TansuBroker,
    _die_with_parent_prefix,
    kill_process,
    read_log,
)
from kaflux.devbrokers.brokers import (
    free_port as _free_port,
)

from support.service_process import ServiceProcess

__all__ = [
    "TlsStartError",
    "TlsTerminator",
    "TlsUnavailableError",
    "start_tansu_behind_tls",
    "stunnel_binary",
]

_HOST = "127.0.0.1"
_READY_MARKER = "Accepting new connections"
_ADDRESS_IN_USE = "Address already in use"
_PORT_RACE_ATTEMPTS = 5


class TlsUnavailableError(RuntimeError):
    """stunnel4 is not installed (``apt-get install stunnel4``; scripts/bootstrap.sh does it)."""


class TlsStartError(RuntimeError):
    """stunnel exited or did not come up in time; the message ends with the tail of its log.

    ``address_in_use`` tells that its port was taken by another process.
    """

    def __init__(self, message: str, *, address_in_use: bool = False) -> None:
        super().__init__(message)
        self.address_in_use = address_in_use


def stunnel_binary() -> str:
    """Path of stunnel (``$KAFLUX_STUNNEL_BIN``, else stunnel4 or stunnel on PATH)."""
    override = os.environ.get("KAFLUX_STUNNEL_BIN")
    if override:
        return override
    for name in ("stunnel4", "stunnel"):
        path = shutil.which(name)
        if path:
            return path
    raise TlsUnavailableError("stunnel4 is not installed (apt-get install stunnel4)")


class TlsTerminator(ServiceProcess):
    """stunnel4 on 127.0.0.1:``port`` (a free port by default) forwarding to 127.0.0.1:``upstream_port``.

    ``cert``/``key`` are the server certificate and its unencrypted key (PEM). ``client_ca`` turns on
    mutual TLS: clients must present a certificate signed by that CA. ``upstream_port`` may be changed
    before :meth:`start`.
    """

    def __init__(
        self,
        upstream_port: int,
        *,
        cert: str | os.PathLike[str],
        key: str | os.PathLike[str],
        client_ca: str | os.PathLike[str] | None = None,
        port: int | None = None,
        workdir: str | os.PathLike[str] | None = None,
        binary: str | None = None,
    ) -> None:
        self.upstream_port = upstream_port
        self.cert = Path(cert)
        self.key = Path(key)
        self.client_ca = Path(client_ca) if client_ca is not None else None
        self._port = port
        self._port_fixed = port is not None
        self.binary = binary or stunnel_binary()
        super().__init__(workdir, prefix="kaflux-stunnel-", log_name="stunnel.log")
        self.config_path = self.workdir / "stunnel.conf"
        self._log_start = 0

    # --- state ---

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the TLS terminator has not been started yet, so it has no port")
        return self._port

    @property
    def bootstrap_servers(self) -> str:
        return f"{_HOST}:{self.port}"

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.is_alive() else "stopped"
        return f"<TlsTerminator {_HOST}:{self._port or '?'} -> {_HOST}:{self.upstream_port} {state}>"

    # --- life cycle ---

    def start(self, timeout: float = 15.0) -> Self:
        """Start stunnel and wait until it accepts connections. Returns self; no-op if running.

        Without a fixed port, a port taken by another process meanwhile is retried with another one;
        with a fixed port, that raises :class:`TlsStartError` with ``address_in_use`` set.
        """
        with self._lock:
            if self.is_alive():
                return self
            deadline = time.monotonic() + timeout
            attempts = 0
            while True:
                attempts += 1
                if not self._port_fixed and (self._port is None or attempts > 1):
                    self._port = _free_port()
                self._launch(self.port)
                failure = self._wait_ready(deadline)
                if failure is None:
                    self._started()
                    return self
                self._reap()
                in_use = _ADDRESS_IN_USE in self._current_log()
                if in_use and not self._port_fixed and attempts < _PORT_RACE_ATTEMPTS:
                    continue
                raise TlsStartError(
                    f"stunnel on {_HOST}:{self.port} did not start: {failure}.\n"
                    f"config {self.config_path}:\n{self._config(self.port)}\n"
                    f"log {self.log_path} ends with:\n{self.log_tail()}",
                    address_in_use=in_use,
                )

    # --- internals ---

    def _config(self, port: int) -> str:
        lines = [
            "foreground = yes",
            "pid =",
            "syslog = no",
            "debug = info",
            "",
            "[kafka]",
            f"accept = {_HOST}:{port}",
            f"connect = {_HOST}:{self.upstream_port}",
            f"cert = {self.cert}",
            f"key = {self.key}",
            "sslVersionMin = TLSv1.2",
            "TIMEOUTclose = 0",
        ]
        if self.client_ca is not None:
            lines += [f"CAfile = {self.client_ca}", "verifyChain = yes", "requireCert = yes"]
        return "\n".join(lines) + "\n"

    def _launch(self, port: int) -> None:
        self.config_path.write_text(self._config(port))
        with open(self.log_path, "ab") as log:
            self._log_start = log.tell()
            log.write(f"\n=== kaflux: {self.binary} {self.config_path} (port {port})\n".encode())
            log.flush()
            self._proc = subprocess.Popen(
                [*_die_with_parent_prefix(), self.binary, str(self.config_path)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                start_new_session=True,
            )

    def _current_log(self) -> str:
        """stunnel's log since the last start."""
        return read_log(self.log_path, start=self._log_start)

    def _wait_ready(self, deadline: float) -> str | None:
        proc = self._proc
        assert proc is not None
        while True:
            code = proc.poll()
            if code is not None:
                return f"stunnel exited with code {code}"
            if _READY_MARKER in self._current_log():
                try:
                    with socket.create_connection((_HOST, self.port), timeout=1.0):
                        pass
                except OSError:
                    pass
                else:
                    if proc.poll() is None:
                        return None
            if time.monotonic() >= deadline:
                return "it did not accept connections before the deadline"
            time.sleep(0.02)

    def _reap(self) -> None:
        proc = self._proc
        if proc is None:
            return
        kill_process(proc)
        self._proc = None


def start_tansu_behind_tls(
    *,
    cert: str | os.PathLike[str],
    key: str | os.PathLike[str],
    client_ca: str | os.PathLike[str] | None = None,
    upstream_port: int | None = None,
    broker_args: Iterable[str] = (),
    timeout: float = 30.0,
) -> tuple[TansuBroker, TlsTerminator]:
    """Start Tansu advertising a TLS port, and stunnel on that port; returns both, running.

    stunnel forwards to Tansu, or to ``upstream_port`` when given (e.g. a SASL front door that
    forwards to Tansu in turn: set its upstream to the returned broker's port). ``broker_args`` are
    extra Tansu arguments. If the chosen port is taken before stunnel binds it, Tansu is restarted
    advertising another one. On failure nothing is left running.
    """
    broker = TansuBroker(advertised_port=_free_port(), extra_args=broker_args)
    deadline = time.monotonic() + timeout
    try:
        broker.start(timeout)
        for attempt in range(1, _PORT_RACE_ATTEMPTS + 1):
            assert broker.advertised_port is not None
            terminator = TlsTerminator(
                upstream_port if upstream_port is not None else broker.port,
                cert=cert,
                key=key,
                client_ca=client_ca,
                port=broker.advertised_port,
            )
            try:
                terminator.start(max(1.0, deadline - time.monotonic()))
            except TlsStartError as e:
                terminator.cleanup()
                if not e.address_in_use or attempt == _PORT_RACE_ATTEMPTS:
                    raise
                broker.stop()
                broker.advertised_port = _free_port()
                broker.start(max(1.0, deadline - time.monotonic()))
                continue
            return broker, terminator
        raise AssertionError("unreachable")
    except BaseException:
        broker.cleanup()
        raise
