"""``kaflux broker start --kind kafka``: Apache Kafka from an unpacked distribution or the jar cache."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from kaflux.devbrokers.apache_kafka import KAFKA_VERSION, kafka_classpath
from kaflux.devbrokers.brokers import BrokerUnavailableError

from support.cli_helpers import WAIT_S, json_out, run_kaflux

pytestmark = pytest.mark.integration


def _distribution(tmp_path: Path) -> Path:
    """A directory laid out as an unpacked Apache Kafka distribution: libs/ holds the jars."""
    try:
        jars = kafka_classpath(KAFKA_VERSION)
    except BrokerUnavailableError as e:
        pytest.skip(f"Apache Kafka's jars are not here: {e}")
    home = tmp_path / f"kafka_2.13-{KAFKA_VERSION}"
    (home / "libs").mkdir(parents=True)
    for jar in jars:
        (home / "libs" / os.path.basename(jar)).symlink_to(jar)
    return home


def log_path(started: subprocess.CompletedProcess[bytes]) -> str:
    found = re.search(r"log (\S+)\)", started.stderr.decode())
    assert found is not None
    return found[1]


def test_kind_kafka_with_a_distribution_runs_apache_kafka_until_stopped(tmp_path: Path) -> None:
    home = _distribution(tmp_path)
    started = run_kaflux(
        "broker", "start", "--kind", "kafka", "--kafka-home", str(home), "--env", timeout=200
    )
    assert started.returncode == 0, started.stderr.decode()
    exports = dict(re.findall(r"export (\w+)=(\S+)", started.stdout.decode()))
    bootstrap, pid = exports["KAFLUX_BOOTSTRAP_SERVERS"], int(exports["KAFLUX_BROKER_PID"])
    try:
        # The broker says the version it logged at start: the distribution's jars, Kafka 4.4.
        assert (
            f"kafka broker (Apache Kafka {KAFKA_VERSION}) running at" in Path(log_path(started)).read_text()
        )
        created = run_kaflux("topics", "create", "kx-cli-kafka", "--partitions", "2", "-b", bootstrap)
        assert created.returncode == 0, created.stderr.decode()
        listed = json_out(run_kaflux("topics", "list", "--format", "json", "-b", bootstrap))
        assert "kx-cli-kafka" in {t["name"] for t in listed}
    finally:
        stopped = run_kaflux("broker", "stop", "--pid", str(pid), timeout=WAIT_S)
        if stopped.returncode != 0:
            os.kill(pid, signal.SIGKILL)
    assert stopped.returncode == 0, stopped.stderr.decode()


def test_kind_kafka_without_jars_says_how_to_get_them(tmp_path: Path) -> None:
    env = {"KAFLUX_KAFKA_CACHE": str(tmp_path / "empty-cache"), "KAFLUX_KAFKA_HOME": ""}
    done = run_kaflux("broker", "start", "--kind", "kafka", env=env)
    assert done.returncode != 0
    message = done.stderr.decode()
    assert "Apache Kafka 4.4.0 is not available here" in message
    assert "python -m kaflux.devbrokers resolve 4.4.0" in message and "--kafka-home" in message
    assert "Traceback" not in message


def test_kafka_home_that_is_not_a_distribution_is_refused(tmp_path: Path) -> None:
    done = run_kaflux("broker", "start", "--kind", "kafka", "--kafka-home", str(tmp_path))
    assert done.returncode != 0
    assert "is not an Apache Kafka distribution: it has no libs/*.jar" in done.stderr.decode()
    assert "Traceback" not in done.stderr.decode()


def test_kafka_home_is_only_for_kind_kafka(tmp_path: Path) -> None:
    done = run_kaflux("broker", "start", "--kind", "noida", "--kafka-home", str(tmp_path))
    assert done.returncode == 2 and "--kafka-home applies to --kind kafka only" in done.stderr.decode()
