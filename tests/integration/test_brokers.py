"""The broker fixtures themselves: start, stop, kill, restart, and a confluent-kafka round trip."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kaflux.devbrokers import brokers
from kaflux.devbrokers.brokers import (
    Broker,
    BrokerStartError,
    TansuBroker,
)
from kaflux.devbrokers.kinds import BROKER_KINDS, start_broker

pytestmark = pytest.mark.integration

ck = pytest.importorskip("confluent_kafka")
admin_mod = pytest.importorskip("confluent_kafka.admin")

API_VERSIONS, FETCH, METADATA = 18, 1, 3


def _port_refuses(port: int, timeout: float = 5.0) -> bool:
    """True once nothing accepts connections on ``port`` (checked until ``timeout`` seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                pass
        except OSError:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def _pid_gone(pid: int, timeout: float = 5.0) -> bool:
    """True once ``pid`` no longer exists or is a zombie (checked until ``timeout`` seconds).

    A killed broker whose parent is gone may stay a zombie here (PID 1 in a container need not reap),
    and its threads may still be exiting when it turns Z: check its port separately.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except (FileNotFoundError, ProcessLookupError):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def _is_broker_process(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"tansu" in cmdline or b"noida-db" in cmdline


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = admin_mod.AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [admin_mod.NewTopic(topic, num_partitions=partitions, replication_factor=1)], operation_timeout=10
    )
    futures[topic].result(timeout=15)


def _topics(bootstrap: str) -> set[str]:
    admin = admin_mod.AdminClient({"bootstrap.servers": bootstrap})
    return set(admin.list_topics(timeout=10).topics)


# --- life cycle -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", BROKER_KINDS)
def test_start_and_stop(kind: str) -> None:
    started = time.monotonic()
    broker = start_broker(kind, timeout=30)
    try:
        elapsed = time.monotonic() - started
        assert broker.is_alive()
        assert broker.name == kind
        pid = broker.pid
        assert pid is not None
        assert broker.bootstrap_servers == f"127.0.0.1:{broker.port}"
        assert API_VERSIONS in broker.api_versions()
        assert elapsed < 30
        broker.stop(timeout=10)
        assert not broker.is_alive()
        assert broker.pid is None
        assert _pid_gone(pid), f"process {pid} still exists after stop()"
        assert _port_refuses(broker.port)
        broker.stop()  # stopping twice is harmless
    finally:
        broker.cleanup()
    assert not broker.workdir.exists()


def test_context_manager_stops_and_cleans_up() -> None:
    with TansuBroker() as broker:
        pid = broker.pid
        assert pid is not None and broker.log_path.exists()
        assert broker.start() is broker, "start() on a running broker is a no-op"
    assert not broker.is_alive()
    assert pid is not None and _pid_gone(pid)
    assert not broker.workdir.exists()


def test_fixture_broker_answers_api_versions(broker: Broker) -> None:
    versions = broker.api_versions(timeout=5)
    for key in (API_VERSIONS, FETCH, METADATA):
        low, high = versions[key]
        assert 0 <= low <= high
    assert broker.is_alive() and broker.name in BROKER_KINDS


@pytest.mark.parametrize("kind", BROKER_KINDS)
def test_kill_and_restart_on_same_port(kind: str, fresh_broker: Callable[[str], Broker]) -> None:
    broker = fresh_broker(kind)
    port, pid = broker.port, broker.pid
    assert pid is not None
    # An open client connection at the moment of the crash, as in a real failover test.
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        broker.kill()
    assert not broker.is_alive()
    assert _pid_gone(pid)
    assert _port_refuses(port)

    broker.restart(timeout=30)
    assert broker.is_alive()
    assert broker.port == port
    assert broker.pid not in (None, pid)
    assert API_VERSIONS in broker.api_versions()


@pytest.mark.parametrize(("kind", "keeps_data"), [("tansu", False), ("noida", True)])
def test_restart_keeps_data_only_on_noida(
    kind: str, keeps_data: bool, fresh_broker: Callable[[str], Broker], topic_name: str
) -> None:
    broker = fresh_broker(kind)
    _create_topic(broker.bootstrap_servers, topic_name, partitions=1)
    assert topic_name in _topics(broker.bootstrap_servers)
    broker.restart(timeout=30)
    assert (topic_name in _topics(broker.bootstrap_servers)) is keeps_data


def test_stop_escalates_to_sigkill(fresh_tansu: Callable[[], TansuBroker]) -> None:
    broker = fresh_tansu()
    pid = broker.pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)  # a stopped process cannot act on SIGTERM, but SIGKILL still works
    started = time.monotonic()
    broker.stop(timeout=0.5)
    assert time.monotonic() - started < 5
    assert not broker.is_alive()
    assert _pid_gone(pid)


def test_start_failure_reports_the_log() -> None:
    # This build has no SQLite storage, so Tansu exits at once with an error in its log.
    broker = TansuBroker(extra_args=["--storage-engine", "sqlite://kaflux.db"])
    started = time.monotonic()
    try:
        with pytest.raises(BrokerStartError) as info:
            broker.start(timeout=15)
    finally:
        broker.cleanup()
    assert time.monotonic() - started < 15, "a broker that exits must fail fast, not at the deadline"
    text = str(info.value)
    assert "exited" in text and "log" in text
    assert "storage" in text.lower()
    assert not broker.is_alive()


def test_taken_port_fails_at_the_deadline() -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        broker = TansuBroker(port=port)
        started = time.monotonic()
        try:
            with pytest.raises(BrokerStartError, match="Address in use"):
                broker.start(timeout=2)
        finally:
            broker.cleanup()
        assert time.monotonic() - started < 10
        assert not broker.is_alive()


def test_unknown_kind() -> None:
    with pytest.raises(ValueError, match="unknown broker kind"):
        start_broker("zookeeper")


_CHILD = """
import sys
from kaflux.devbrokers import brokers
if sys.argv[1] == "atexit":
    brokers._die_with_parent_prefix = lambda: []  # leave the atexit hook as the only safety net
broker = brokers.TansuBroker().start()
print(broker.pid, broker.port, broker.workdir, flush=True)
if sys.argv[1] == "os_exit":
    import os
    os._exit(0)  # no atexit hooks: only the parent-death signal can stop the broker
"""


@pytest.mark.parametrize("how", ["atexit", "os_exit"])
def test_brokers_do_not_outlive_their_process(how: str) -> None:
    if how == "os_exit" and brokers._die_with_parent_prefix() == []:
        pytest.skip("no setpriv --pdeathsig here")
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_CHILD), how],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    pid_text, port_text, workdir = done.stdout.split()
    pid, port = int(pid_text), int(port_text)
    try:
        assert _pid_gone(pid, timeout=10), f"broker {pid} outlived its parent ({how})"
        assert _port_refuses(port)
    finally:
        if not _pid_gone(pid, timeout=0) and _is_broker_process(pid):
            os.kill(pid, signal.SIGKILL)  # our own grandchild; never leave it behind
        shutil.rmtree(workdir, ignore_errors=True)  # os._exit skipped the child's own clean-up
    if how == "atexit":
        assert not Path(workdir).exists(), "the atexit hook removes the work directory too"


@pytest.mark.broker_defect(
    "tansu", reason="self-test of the broker_defect marker: fails on tansu only", raises=AssertionError
)
def test_broker_defect_marker_applies_to_one_broker(broker: Broker) -> None:
    assert broker.name != "tansu"


# --- a real client against the fixtures -------------------------------------------------------------------


def test_confluent_produce_and_consume_100(broker: Broker, topic_name: str) -> None:
    bootstrap = broker.bootstrap_servers
    _create_topic(bootstrap, topic_name, partitions=3)

    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(100):
        producer.produce(topic_name, key=f"k{i:03d}".encode(), value=f"v{i:03d}".encode(), partition=i % 3)
    assert producer.flush(15) == 0, "not every record was delivered within 15 s"

    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{topic_name}-g",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([ck.TopicPartition(topic_name, p, ck.OFFSET_BEGINNING) for p in range(3)])
        got: dict[bytes, tuple[int, bytes]] = {}
        deadline = time.monotonic() + 30
        while len(got) < 100 and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=100, timeout=1.0):
                assert msg.error() is None, msg.error()
                got[msg.key()] = (msg.partition(), msg.value())
    finally:
        consumer.close()

    assert len(got) == 100
    for i in range(100):
        assert got[f"k{i:03d}".encode()] == (i % 3, f"v{i:03d}".encode())
