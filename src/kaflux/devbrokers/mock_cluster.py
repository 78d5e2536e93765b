"""librdkafka's mock cluster as a test broker: three brokers, KIP-848, OffsetForLeaderEpoch. [io]

librdkafka (inside confluent-kafka, a dev dependency) carries a Kafka-protocol implementation
of its own, written for its tests. A process holding
``confluent_kafka.Producer({"test.mock.num.brokers": 3, "bootstrap.servers": ""})`` serves it on
loopback ports, which ``list_topics()`` reveals. :class:`MockCluster` runs such a process (this
module's ``__main__``), reads the bootstrap string it prints, and stops it by PID; the cluster
dies with the process.

Its limits (see also ``docs/brokers.md``): no CreateTopics (producing to a topic creates it
with 4 partitions, leaders spread over the brokers), no DescribeGroups or ListGroups,
ApiVersions only up to v2, JoinGroup v6 advertised but read in an older layout, and a
ConsumerGroupHeartbeat join with topic names and a null regex aborts the whole process.

Typical use::

    with MockCluster() as cluster:
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, ...})
"""

from __future__ import annotations

import os
import selectors
import subprocess
import sys
import time
from types import TracebackType
from typing import IO, Self

from kaflux.devbrokers.brokers import running_pid, stop_process

__all__ = ["MockCluster", "MockClusterStartError", "MockClusterUnavailableError"]

_READY = "KAFLUX-MOCK-BOOTSTRAP "
_NO_LIBRDKAFKA = "KAFLUX-MOCK-NO-CONFLUENT-KAFKA "


class MockClusterStartError(RuntimeError):
    """The mock cluster process did not print its bootstrap servers in time, or exited."""


class MockClusterUnavailableError(MockClusterStartError, ImportError):
    """confluent-kafka, which carries librdkafka's mock cluster, does not import."""


class MockCluster:
    """A child process serving librdkafka's mock cluster of ``brokers`` brokers on 127.0.0.1."""

    name = "mock"

    def __init__(self, brokers: int = 3) -> None:
        self.brokers = brokers
        self._proc: subprocess.Popen[str] | None = None
        self._bootstrap: str | None = None

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` of every broker, comma-separated (known once started)."""
        if self._bootstrap is None:
            raise RuntimeError("the mock cluster has not been started")
        return self._bootstrap

    @property
    def pid(self) -> int | None:
        """The serving process's PID while it runs."""
        return running_pid(self._proc)

    def is_alive(self) -> bool:
        """Whether the serving process runs."""
        return self.pid is not None

    def start(self, timeout: float | None = None) -> Self:
        """Start the process and wait for its bootstrap servers (``timeout``: 30 s by default).
        No-op if running."""
        if timeout is None:
            timeout = 30.0
        if self.is_alive():
            return self
        proc = subprocess.Popen(
            [sys.executable, "-m", "kaflux.devbrokers.mock_cluster", str(self.brokers)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        self._proc = proc
        assert proc.stdout is not None
        line = _read_line(proc.stdout, time.monotonic() + timeout)
        if line is None or not line.startswith(_READY):
            try:
                status: int | None = proc.wait(timeout=1.0)  # at EOF it is exiting
            except subprocess.TimeoutExpired:
                status = None
            self.stop()
            if line is not None and line.startswith(_NO_LIBRDKAFKA):
                why = line[len(_NO_LIBRDKAFKA) :].strip()
                raise MockClusterUnavailableError(
                    f"librdkafka's mock cluster needs confluent-kafka, which does not import ({why}): "
                    "pip install confluent-kafka"
                )
            if status is not None:
                raise MockClusterStartError(
                    f"the mock cluster process exited (status {status}) before it started"
                )
            if line is not None:
                raise MockClusterStartError(f"the mock cluster process printed {line!r}, not its address")
            raise MockClusterStartError(f"the mock cluster did not start within {timeout:g} s")
        self._bootstrap = line[len(_READY) :].strip()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """End the process (closing its stdin, then SIGTERM, then SIGKILL), by its PID only."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            try:
                assert proc.stdin is not None
                proc.stdin.close()
                proc.wait(timeout=min(2.0, timeout))
            except (OSError, subprocess.TimeoutExpired):
                stop_process(proc, timeout)
        for pipe in (proc.stdin, proc.stdout):  # closed even when the process died by itself
            if pipe is not None and not pipe.closed:
                pipe.close()
        self._proc = None

    def kill(self) -> None:
        """SIGKILL the process (the whole cluster vanishes at once)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
        self.stop()

    cleanup = stop

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _read_line(stream: IO[str], deadline: float) -> str | None:
    """One line from ``stream`` (a pipe), waiting until ``deadline``; None at EOF or timeout."""
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if selector.select(max(0.0, deadline - time.monotonic())):
                return stream.readline() or None
    return None


def _serve(brokers: int) -> None:
    """Run the mock cluster until stdin closes (the parent stopped us or died)."""
    try:
        from confluent_kafka import Producer
    except ImportError as e:
        print(_NO_LIBRDKAFKA + str(e), flush=True)
        sys.exit(3)
    holder = Producer({"test.mock.num.brokers": brokers, "bootstrap.servers": ""})
    metadata = holder.list_topics(timeout=10)
    servers = ",".join(f"{b.host}:{b.port}" for _, b in sorted(metadata.brokers.items()))
    print(_READY + servers, flush=True)
    try:
        sys.stdin.read()
    finally:
        os._exit(0)  # librdkafka's threads: leave at once


if __name__ == "__main__":
    _serve(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
