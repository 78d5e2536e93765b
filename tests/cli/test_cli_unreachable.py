"""The ``kaflux`` command against an address nobody listens at (issue 18): a WARNING naming it
within 5 s, one line only (throttled), and an error naming it. [test]"""

from __future__ import annotations

import socket
import subprocess
import time

from support.cli_helpers import LineReader, cli_env, kaflux_command

FAST_RETRY = {"reconnect.backoff.ms": 10, "reconnect.backoff.max.ms": 50}


def closed_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"127.0.0.1:{port}"


def test_the_command_warns_within_5_s_and_its_error_names_the_address() -> None:
    closed = closed_address()
    settings = [f"-X{key}={value}" for key, value in FAST_RETRY.items()]
    command = [*kaflux_command(), "topics", "list", "-b", closed, "-X", "default.api.timeout.ms=3000"]
    started = time.monotonic()
    child = subprocess.Popen(
        [*command, *settings],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=cli_env(),
    )
    try:
        assert child.stderr is not None
        stderr = LineReader(child.stderr)
        first = stderr.next_line(timeout=5.0).decode()
        assert time.monotonic() - started < 5.0
        assert "WARNING" in first and f"cannot connect to broker {closed}" in first
        rest = stderr.rest(timeout=30.0).decode()
        assert child.wait(timeout=30.0) == 1
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        assert child.stderr is not None
        child.stderr.close()
    assert f"cannot connect to broker {closed}" not in rest  # throttled: one line
    assert f"no broker reachable at {closed} (" in rest and rest.startswith("kaflux: error:")
