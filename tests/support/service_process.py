"""The life cycle every server double that runs as a child process shares (stunnel for TLS,
krb5kdc for Kerberos): a work directory, the process stopped by PID, ``with`` support, and
every one still running stopped at interpreter exit. [test]"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import subprocess
import threading
from types import TracebackType
from typing import Self

from kaflux.devbrokers.brokers import make_workdir, read_log, running_pid, stop_process


class ServiceProcess:
    """A server child process a test starts and stops, logging to ``workdir/log_name``.
    Subclasses implement :meth:`start` (launching :attr:`_proc` under :attr:`_lock`, then
    calling :meth:`_started`)."""

    def __init__(self, workdir: str | os.PathLike[str] | None, *, prefix: str, log_name: str) -> None:
        self.workdir, self._owns_workdir = make_workdir(workdir, prefix=prefix)
        self.log_path = self.workdir / log_name
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.RLock()

    def log_tail(self, max_bytes: int = 4000) -> str:
        """The end of the process's log (every start of this object)."""
        return read_log(self.log_path, max_bytes=max_bytes)

    @property
    def pid(self) -> int | None:
        return running_pid(self._proc)

    def is_alive(self) -> bool:
        return running_pid(self._proc) is not None

    def start(self, timeout: float = 30.0) -> Self:
        """Start the process (no-op if running) and return once it serves."""
        raise NotImplementedError

    def _started(self) -> None:
        """The process is up: stop it at interpreter exit if nobody does before."""
        _RUNNING.add(self)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the process (by PID), then SIGKILL it if it has not exited after ``timeout``."""
        with self._lock:
            proc = self._proc
            if proc is None:
                return
            stop_process(proc, timeout)
            self._proc = None
            _RUNNING.discard(self)

    def cleanup(self, timeout: float = 10.0) -> None:
        """Stop the process and delete the work directory if this object created it."""
        self.stop(timeout)
        if self._owns_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.cleanup()


_RUNNING: set[ServiceProcess] = set()


@atexit.register
def _stop_all_at_exit() -> None:
    for service in list(_RUNNING):
        with contextlib.suppress(Exception):  # best effort at interpreter exit
            service.cleanup(timeout=2.0)
