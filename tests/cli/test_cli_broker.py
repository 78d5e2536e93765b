"""``kaflux broker start``: an embedded broker for as long as the command runs."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time

import pytest

from kaflux import AdminClient

from support.cli_helpers import WAIT_S, LineReader, cli_env, json_out, kaflux_command, run_kaflux

pytestmark = pytest.mark.integration


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # a zombie until its parent (the command, now gone) is reaped by init
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] == "Z"


def test_broker_start_serves_until_sigterm_then_stops_the_broker() -> None:
    with subprocess.Popen(
        [*kaflux_command(), "broker", "start", "--kind", "noida"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(),
    ) as child:
        try:
            assert child.stdout is not None and child.stderr is not None
            stdout, stderr = LineReader(child.stdout), LineReader(child.stderr)
            bootstrap = stdout.next_line().decode().strip()
            note = stderr.next_line().decode()
            assert re.fullmatch(r"127\.0\.0\.1:\d+", bootstrap), bootstrap
            found = re.search(r"\(pid (\d+)\)", note)
            assert found is not None, note
            broker_pid = int(found[1])

            topic = "kx-broker-start"
            with AdminClient({"bootstrap.servers": bootstrap}) as admin:
                admin.create_topics([topic], timeout=WAIT_S)
            listed = json_out(run_kaflux("topics", "list", "--format", "json", "-b", bootstrap))
            assert topic in {t["name"] for t in listed}

            child.send_signal(signal.SIGTERM)
            # SIGTERM is an interrupt, as Ctrl-C: every command then exits 130
            assert child.wait(timeout=WAIT_S) == 130, stderr.rest().decode()
            assert stdout.rest() == b""
            assert b"Traceback" not in stderr.rest()
        finally:
            if child.poll() is None:
                child.kill()
    deadline = time.monotonic() + WAIT_S
    while not _gone(broker_pid):
        assert time.monotonic() < deadline, f"broker pid {broker_pid} still runs"
        time.sleep(0.05)
