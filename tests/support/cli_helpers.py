"""Helpers for the ``kaflux`` command tests: run the installed executable, set up topics. [test]

Tests import this module as ``from support.cli_helpers import ...``.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from support.kafka_helpers import create_topic as create_topic  # re-exported to the tests
from support.kafka_helpers import produce as produce

WAIT_S = 30.0


def kaflux_command() -> list[str]:
    """The installed ``kaflux`` console script next to this Python, else ``python -m kaflux.cli``."""
    script = Path(sys.executable).parent / "kaflux"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "kaflux.cli"]


def cli_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a ``kaflux`` run: no inherited bootstrap servers, no colour."""
    env = {k: v for k, v in os.environ.items() if k != "KAFLUX_BOOTSTRAP_SERVERS"}
    env.update({"NO_COLOR": "1", "COLUMNS": "120", "PYTHONUNBUFFERED": "1"})
    env.update(extra or {})
    return env


def run_kaflux(
    *args: str,
    input: bytes | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 60.0,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``kaflux ARGS`` to its end and return what it did (stdout/stderr as bytes)."""
    return subprocess.run(
        [*kaflux_command(), *args],
        input=input,
        stdin=None if input is not None else subprocess.DEVNULL,
        capture_output=True,
        env=cli_env(env),
        timeout=timeout,
        check=False,
    )


def ok(result: subprocess.CompletedProcess[bytes]) -> str:
    """The stdout of a run that must have succeeded (its stderr in the failure message)."""
    assert result.returncode == 0, (
        f"kaflux {result.args[1:]} exited {result.returncode}: {result.stderr.decode(errors='replace')}"
    )
    return result.stdout.decode()


def json_out(result: subprocess.CompletedProcess[bytes]) -> Any:
    """The JSON document a successful run printed."""
    return json.loads(ok(result))


def json_lines(result: subprocess.CompletedProcess[bytes]) -> list[dict[str, Any]]:
    """The JSON lines a successful run printed."""
    return [json.loads(line) for line in ok(result).splitlines() if line.strip()]


class LineReader:
    """Reads a child's stream on a thread, so a test can wait for lines with a deadline."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self.lines: list[bytes] = []
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream: IO[bytes]) -> None:
        for line in iter(stream.readline, b""):
            self._lines.put(line)
        self._lines.put(None)

    def next_line(self, timeout: float = WAIT_S) -> bytes:
        """The next line; fails at EOF or after ``timeout`` seconds."""
        line = self._lines.get(timeout=timeout)
        assert line is not None, "the stream ended"
        self.lines.append(line)
        return line

    def rest(self, timeout: float = WAIT_S) -> bytes:
        """Everything until the end of the stream (the child must be exiting)."""
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the stream did not end"
        rest = []
        while (line := self._lines.get_nowait()) is not None:
            rest.append(line)
        self.lines.extend(rest)
        return b"".join(rest)
