"""The parent's side of a test child process that reports JSON lines on stdout. [test: the
parent, plus one reader thread per child]

:class:`ReportingChild` starts ``python -m MODULE SPEC`` with the tests directory on its path,
parses each stdout line (a JSON object with ``"ev"``) on a reader thread into the subclass's
state (:meth:`ReportingChild._apply`, under :attr:`ReportingChild._cond`), and closes, kills
(by PID) and cleans up the child. The group and share members of the fault scenarios
(``support.group_member``, ``support.share_member``) are its subclasses.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import IO, Any

_TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class ReportingChild:
    """A child process reporting JSON lines, and the state its reports built. [test]

    Subclasses set up the state their :meth:`_apply` fills before calling ``__init__``, which
    starts the child and its reader thread. Every report is applied, and waiters notified, under
    :attr:`_cond` (an RLock's condition: predicates given to :meth:`wait_until` may take it again).
    """

    def __init__(self, name: str, module: str, spec: dict[str, Any]) -> None:
        self.name = name
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - closed in cleanup()
        # The child imports its module from ``support``: give it the tests directory (pytest's
        # ``pythonpath`` setting reaches only this process).
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [_TESTS_DIR, env.get("PYTHONPATH")]))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
        )
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self.warnings: list[str] = []
        self.fatal: list[str] = []
        self.bad_lines: list[str] = []
        self.closed = False
        self.ended_at: float | None = None  # when it was killed or closed
        self._reader = threading.Thread(target=self._read, name=f"{module}-reader-{name}", daemon=True)
        self._reader.start()

    # -- reports --------------------------------------------------------------------------------------

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                data = json.loads(line)
                kind = data["ev"]
            except (ValueError, KeyError, TypeError):
                with self._cond:
                    self.bad_lines.append(line.decode(errors="replace"))
                continue
            with self._cond:
                if kind == "warning":
                    self.warnings.append(data["error"])
                elif kind == "fatal":
                    self.fatal.append(data["error"])
                else:
                    self._apply(kind, data)
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def _apply(self, kind: str, data: dict[str, Any]) -> None:
        """Take one report (other than ``warning`` and ``fatal``) into the subclass's state."""
        raise NotImplementedError

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    # -- control --------------------------------------------------------------------------------------

    def _command(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command.encode() + b"\n")
        self.proc.stdin.flush()

    def close(self, timeout: float) -> None:
        """Send ``close`` and wait until the child exited. Raises TimeoutError."""
        with contextlib.suppress(BrokenPipeError):
            self._command("close")
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"{self.name} did not exit within {timeout} s of close") from None
        self._reader.join(timeout)
        self.ended_at = time.monotonic()

    def kill(self) -> float:
        """SIGKILL the child (by PID); returns the kill time."""
        self.ended_at = time.monotonic()
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30.0)
        self._reader.join(30.0)
        return self.ended_at

    def cleanup(self) -> None:
        """Kill the child if it still runs and release its pipes."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30.0)
            if self.ended_at is None:
                self.ended_at = time.monotonic()
        self._reader.join(30.0)
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()
        self._stderr.close()

    def stderr_tail(self, limit: int = 3000) -> str:
        with contextlib.suppress(ValueError, OSError):
            self._stderr.seek(0)
            return self._stderr.read().decode(errors="replace")[-limit:]
        return ""


def die_with_parent() -> None:
    """In the child: have Linux SIGKILL it when the parent dies (a crashed test leaves no orphan)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
