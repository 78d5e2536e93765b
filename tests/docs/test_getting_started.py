"""docs/getting-started.md, followed as a newcomer would: its broker block starts a development
broker and creates the topic, its producer and consumer blocks run one after the other in one
interpreter (the consumer reads the ten records the producer wrote, then gets Ctrl-C as the page
expects), its Spark block reads the ten records the producer block wrote, and ``kaflux broker
stop`` ends each broker.

Only the install block does not run (tests/docs/test_install.py installs kaflux from the repository
in a fresh venv). The page's blocks are taken as
they are; a change that breaks the tutorial breaks this test."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.doc_blocks import Block, child_env, fenced_blocks

PAGE = Path(__file__).resolve().parents[2] / "docs" / "getting-started.md"
BLOCKS = fenced_blocks(PAGE.read_text(encoding="utf-8"), "docs/getting-started.md")
BASH = [b for b in BLOCKS if b.language == "bash"]
PYTHON = [b for b in BLOCKS if b.language == "python"]
SPARK = [b for b in PYTHON if "SparkSession" in b.code]
CLIENTS = [b for b in PYTHON if b not in SPARK]
BROKER_BLOCK = next(b for b in BASH if "kaflux broker start" in b.code)
RECORD_LINE = re.compile(rb"^(\d+) (\d+) b'customer-7' b'\{\"id\": (\d+)\}'$")

pytestmark = pytest.mark.integration


def test_the_page_is_what_this_test_follows() -> None:
    assert [b.line for b in BASH if "pip install" in b.code and b is not BROKER_BLOCK]
    assert len(CLIENTS) == 2 and "Producer(" in CLIENTS[0].code and "Consumer(" in CLIENTS[1].code
    assert len(SPARK) == 1
    assert "while True:" in CLIENTS[1].code  # why the consumer is stopped with Ctrl-C
    assert "kaflux broker stop" in BROKER_BLOCK.code


@pytest.fixture
def broker_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Run the page's broker block up to its "when done" line (a broker for this test alone);
    its exports, for the rest. Its stop line runs after the test."""
    start, stop = BROKER_BLOCK.code.split("# ... and when done:")
    cwd = tmp_path_factory.mktemp("getting-started")
    script = f"set -euo pipefail\n{start}\necho KAFLUX_BOOTSTRAP_SERVERS=$KAFLUX_BOOTSTRAP_SERVERS\n"
    script += "echo KAFLUX_BROKER_PID=$KAFLUX_BROKER_PID\n"
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=cwd,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    exports = dict(line.split("=", 1) for line in done.stdout.splitlines() if line.startswith("KAFLUX_"))
    assert done.returncode == 0 and len(exports) == 2, done.stdout + done.stderr
    env = child_env(**exports)
    try:
        yield env
    finally:
        stopped = subprocess.run(
            ["bash", "-c", f"set -euo pipefail\n{stop}"],
            cwd=cwd,
            env=env,
            capture_output=True,
            timeout=60,
            check=False,
        )
        if stopped.returncode != 0:  # stop it anyway, then report the page's failure
            subprocess.run(["kill", exports["KAFLUX_BROKER_PID"]], check=False)
            pytest.fail(f"the page's 'kaflux broker stop' failed: {stopped.stderr!r}")


def test_the_producer_then_the_consumer(broker_env: dict[str, str], tmp_path: Path) -> None:
    program = "\n".join(b.code for b in CLIENTS)
    child = subprocess.Popen(
        [sys.executable, "-c", program],
        cwd=tmp_path,
        env=broker_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None
    ids: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while len(ids) < 10 and time.monotonic() < deadline:
            line = child.stdout.readline()
            if not line:
                break
            match = RECORD_LINE.match(line.rstrip(b"\n"))
            assert match, f"unexpected output {line!r}"
            ids.append(int(match[3]))
        child.send_signal(signal.SIGINT)  # the reader's Ctrl-C
        _, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert sorted(ids) == list(range(10)), (ids, err)
    assert err.decode(errors="replace").strip().endswith("KeyboardInterrupt"), err


@pytest.mark.spark
def test_the_spark_job(broker_env: dict[str, str], tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    java = shutil.which("java")
    if java is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java")
    java_home = os.environ.get("JAVA_HOME") or str(Path(os.path.realpath(str(java))).parent.parent)
    # the page runs it in the session of the blocks above: the producer's wrote the ten records
    # and set `bootstrap`
    env = {
        **broker_env,
        "JAVA_HOME": java_home,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    block: Block = SPARK[0]
    done = subprocess.run(
        [sys.executable, "-c", CLIENTS[0].code + "\n" + block.code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")
    rows = re.findall(rb'^\|\{"id": (\d+)\}\s*\|', done.stdout, re.MULTILINE)
    assert sorted(int(r) for r in rows) == list(range(10)), done.stdout.decode(errors="replace")
