"""Apache Kafka's own Java clients (kafka-clients 4.4) in the interop tests.

``tests/support/java/KafluxJavaHarness.java`` is compiled with ``javac`` against
:func:`kaflux.devbrokers.apache_kafka.kafka_classpath` the first time a test needs it, into
``<kafka jar cache>/../java-harness/<hash>`` where the hash covers the source, the classpath and the
``javac`` version: it compiles once, and again only when one of those changes. A missing JDK or
jar cache skips the test (CI fails on a skip unless marked otherwise; see tests/conftest.py).

The harness runs one client per JVM and speaks JSON lines (bytes as base64, see the Java file):

* :func:`java_produce` / :class:`JavaProducer`: a ``KafkaProducer`` (transactions included);
* :func:`java_consume`: a ``KafkaConsumer`` reading until it has ``max`` records;
* :class:`JavaMember`: a group member (a :class:`support.group_helpers.Member`, so the ownership
  checks of the group tests apply to it), committing after each poll;
* :class:`JavaShareMember`: a ``KafkaShareConsumer`` accepting every record it gets;
* :func:`java_admin`: ``Admin`` calls, one JSON answer per call.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import hashlib
import json
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import pytest

from kaflux.devbrokers.apache_kafka import kafka_cache_dir, kafka_classpath
from kaflux.devbrokers.brokers import BrokerUnavailableError

from support.group_helpers import Event, Member, Received

_SOURCE = Path(__file__).parent / "java" / "KafluxJavaHarness.java"
_MAIN = "KafluxJavaHarness"
# A client JVM needs little: small heap, quick start (C1 only), one GC thread.
_JVM_OPTIONS = (
    "-Xms32m",
    "-Xmx256m",
    "-XX:TieredStopAtLevel=1",
    "-XX:+UseSerialGC",
    "-Xshare:auto",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
)
WAIT_S = 60.0
_compile_lock = threading.Lock()


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def unb64(text: str | None) -> bytes | None:
    """Bytes from the harness's base64 (None stays None)."""
    return None if text is None else base64.b64decode(text)


def _die_with_parent() -> None:
    with contextlib.suppress(Exception):  # Linux: SIGKILL the JVM if pytest dies
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def harness_classpath() -> list[str]:
    """The classpath that runs the harness, compiling it first if this source was never compiled."""
    javac = shutil.which("javac")
    java = shutil.which("java")
    if javac is None or java is None:
        pytest.skip("the Java interop tests need a JDK 17 (javac and java on PATH)")
    try:
        jars = kafka_classpath()
    except BrokerUnavailableError as e:
        pytest.skip(f"kafka-clients is not available: {e}")
    version = subprocess.run([javac, "-version"], capture_output=True, text=True, check=False)
    digest = hashlib.sha256()
    digest.update(_SOURCE.read_bytes())
    digest.update(os.pathsep.join(jars).encode())
    digest.update((version.stdout + version.stderr).encode())
    target = kafka_cache_dir().parent / "java-harness" / digest.hexdigest()[:20]
    with _compile_lock:
        if not (target / f"{_MAIN}.class").is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix="compiling-", dir=target.parent))
            result = subprocess.run(
                [javac, "-nowarn", "-d", str(staging), "-cp", os.pathsep.join(jars), str(_SOURCE)],
                capture_output=True,
                text=True,
                check=False,
                timeout=300,
            )
            if result.returncode != 0:
                shutil.rmtree(staging, ignore_errors=True)
                raise AssertionError(f"javac failed on {_SOURCE}:\n{result.stdout}{result.stderr}")
            try:
                staging.rename(target)  # atomic; another process may have won the race
            except OSError:
                shutil.rmtree(staging, ignore_errors=True)
    return [str(target), *jars]


class JavaProcess:
    """One harness JVM: JSON lines out (collected by a reader thread), text lines in."""

    def __init__(self, mode: str, spec: Mapping[str, Any]) -> None:
        java = shutil.which("java")
        assert java is not None
        classpath = harness_classpath()
        self.mode = mode
        self.stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [java, *_JVM_OPTIONS, "-cp", os.pathsep.join(classpath), _MAIN, mode, json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            preexec_fn=_die_with_parent,
        )
        self.lines: queue.SimpleQueue[dict[str, Any] | None] = queue.SimpleQueue()
        self.errors: list[str] = []
        self._reader = threading.Thread(target=self._read, name=f"java-{mode}-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                data = json.loads(raw)
            except ValueError:
                self.errors.append(f"not JSON: {raw!r}")
                continue
            if "error" in data:
                self.errors.append(data["error"])
            self.handle(data)
        self.lines.put(None)

    def handle(self, data: dict[str, Any]) -> None:
        """Called on the reader thread for each line; by default queued for :meth:`next_line`."""
        self.lines.put(data)

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def next_line(self, timeout: float = WAIT_S) -> dict[str, Any]:
        """The next JSON line; fails (with the JVM's stderr) if it exits or is silent too long."""
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(
                f"Java {self.mode} said nothing for {timeout} s:\n{self.stderr_tail()}"
            ) from None
        if line is None:
            self.lines.put(None)  # stay at end of stream
            raise AssertionError(
                f"Java {self.mode} exited (rc={self.proc.poll()}): {self.errors}\n{self.stderr_tail()}"
            )
        if "error" in line:
            raise AssertionError(f"Java {self.mode} failed: {line['error']}\n{self.stderr_tail()}")
        return line

    def stderr_tail(self, max_bytes: int = 6000) -> str:
        with contextlib.suppress(ValueError, OSError):
            self.stderr.seek(0)
            return self.stderr.read().decode(errors="replace")[-max_bytes:]
        return ""

    def close_stdin(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(BrokenPipeError, OSError):
                self.proc.stdin.close()

    def wait(self, timeout: float = WAIT_S) -> int:
        """Wait for the JVM to exit; fails if it does not in time or exits non-zero."""
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"Java {self.mode} did not exit within {timeout} s:\n{self.stderr_tail()}"
            ) from None
        self._reader.join(timeout)
        assert rc == 0, f"Java {self.mode} exited with {rc}: {self.errors}\n{self.stderr_tail()}"
        return rc

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def close(self) -> None:
        self.close_stdin()
        if self.proc.poll() is None:
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()
        self._reader.join(5)
        with contextlib.suppress(OSError):
            if self.proc.stdout is not None:
                self.proc.stdout.close()
        self.stderr.close()

    def __enter__(self) -> JavaProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()
        self.close()


# --- producing ----------------------------------------------------------------------------------


def send_line(
    key: bytes | None,
    value: bytes | None,
    *,
    partition: int | None = None,
    headers: Sequence[tuple[str, bytes | None]] = (),
    timestamp: int | None = None,
) -> str:
    return json.dumps(
        {
            "op": "send",
            "partition": partition,
            "key": _b64(key),
            "value": _b64(value),
            "headers": [[k, _b64(v)] for k, v in headers],
            "timestamp": timestamp,
        }
    )


class JavaProducer(JavaProcess):
    """A ``KafkaProducer`` (``config`` as Java takes it); :meth:`op` runs begin/commit/abort/flush."""

    def __init__(self, bootstrap: str, topic: str, config: Mapping[str, object] | None = None) -> None:
        super().__init__(
            "produce", {"topic": topic, "config": {"bootstrap.servers": bootstrap, **(config or {})}}
        )

    def send_record(self, key: bytes | None, value: bytes | None, **kwargs: Any) -> None:
        self.send(send_line(key, value, **kwargs))

    def op(self, name: str, timeout: float = WAIT_S) -> list[tuple[int, int]]:
        """Run ``name``; return the (partition, offset) of every send so far ((-1, -1): failed)."""
        self.send(json.dumps({"op": name}))
        line = self.next_line(timeout)
        assert line.get("ok") == name, line
        return [(p, o) for p, o in line["acks"]]

    def try_op(self, name: str, timeout: float = WAIT_S, **fields: Any) -> tuple[str, str] | None:
        """Run ``name`` (with ``fields``, e.g. ``group`` and ``offsets=[[topic, partition,
        offset]]`` for ``send_offsets``); return the Java exception's class and message, or None."""
        self.send(json.dumps({"op": name, "catch": True, **fields}))
        line = self.next_line(timeout)
        assert line.get("ok") == name, line
        return (line["error"], line["message"]) if "error" in line else None

    def finish(self, timeout: float = WAIT_S) -> None:
        """Close stdin: the producer flushes, closes and the JVM exits."""
        self.close_stdin()
        assert self.next_line(timeout).get("ok") == "closed"
        self.wait(timeout)


def java_consume(
    bootstrap: str,
    *,
    max_records: int,
    assign: Iterable[tuple[str, int]] | None = None,
    topics: Iterable[str] | None = None,
    config: Mapping[str, object] | None = None,
    timeout: float = WAIT_S,
) -> list[dict[str, Any]]:
    """Read with a ``KafkaConsumer`` until ``max_records`` arrived (or ``timeout``); the records
    as the harness printed them (``key``/``value``/header values base64, see :func:`unb64`)."""
    spec: dict[str, Any] = {
        "config": {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest", **(config or {})},
        "max": max_records,
        "timeout_ms": int(timeout * 1000),
    }
    if assign is not None:
        spec["assign"] = [[t, p] for t, p in assign]
    else:
        spec["topics"] = list(topics or ())
    with JavaProcess("consume", spec) as proc:
        records = []
        while True:
            line = proc.next_line(timeout + 30)
            if line.get("event") == "done":
                break
            records.append(line)
        proc.wait()
    return records


def java_admin(
    bootstrap: str, ops: Sequence[Mapping[str, Any]], timeout: float = WAIT_S
) -> list[dict[str, Any]]:
    """Run Admin calls (see ``runAdmin`` in the Java file); one answer per op."""
    spec = {
        "config": {"bootstrap.servers": bootstrap, "default.api.timeout.ms": int(timeout * 1000)},
        "ops": ops,
    }
    with JavaProcess("admin", spec) as proc:
        answers = [proc.next_line(timeout + 30) for _ in ops]
        proc.wait()
    return answers


# --- group members ------------------------------------------------------------------------------


_ASSIGNORS = {
    "range": "org.apache.kafka.clients.consumer.RangeAssignor",
    "roundrobin": "org.apache.kafka.clients.consumer.RoundRobinAssignor",
    "sticky": "org.apache.kafka.clients.consumer.StickyAssignor",
    "cooperative-sticky": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
}


def java_config(config: Mapping[str, object]) -> dict[str, str]:
    """A kaflux config as Java takes it: strings, booleans in lower case, and assignors by class
    name (Java's ``partition.assignment.strategy`` names classes, kaflux's names strategies)."""
    out: dict[str, str] = {}
    for key, value in config.items():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        if key == "partition.assignment.strategy":
            text = ",".join(_ASSIGNORS.get(s.strip(), s.strip()) for s in text.split(","))
        out[key] = text
    return out


class JavaMember(Member):
    """A Java ``KafkaConsumer`` in a group, as a :class:`Member`: its listener calls become
    :class:`Event`\\ s and its records :class:`Received` (value bytes), on the test's clock."""

    def __init__(
        self, name: str, config: Mapping[str, object], topics: list[str], mode: str = "member"
    ) -> None:
        super().__init__(name)
        self.subscribed = threading.Event()
        self.closed = threading.Event()
        self.ack_errors: list[str] = []
        member = self

        class _Proc(JavaProcess):
            def handle(self, data: dict[str, Any]) -> None:
                member._on_line(data)
                super().handle(data)

        self.proc = _Proc(mode, {"config": java_config({"client.id": name, **config}), "topics": topics})

    def _on_line(self, data: dict[str, Any]) -> None:
        kind = data.get("event")
        if kind in ("assigned", "revoked", "lost"):
            self._add_event(
                Event(
                    self.name,
                    kind,
                    frozenset(data["partitions"]),
                    data["entered"],
                    data["returned"],
                    "java-poll",
                    True,
                    frozenset(data["owned_after"]),
                )
            )
        elif kind == "records":
            at = data["at"]
            self._add_records(
                Received(self.name, r[0], r[1], unb64(r[2]) or b"", at) for r in data["records"]
            )
            self.ack_errors.extend(data.get("ack_errors", ()))
        elif kind == "subscribed":
            self.subscribed.set()
        elif kind == "closed":
            self.closed.set()

    def died(self) -> str | None:
        if self.proc.proc.poll() is not None and not self.closed.is_set():
            return f"Java member {self.name} exited: {self.proc.errors}\n{self.proc.stderr_tail()}"
        return None

    def stop(self, timeout: float = WAIT_S) -> None:
        """Ask the member to close its consumer (revoking, committing) and exit."""
        assert self.died() is None, self.died()
        with contextlib.suppress(BrokenPipeError, OSError):
            self.proc.send("stop")
        assert self.closed.wait(timeout), (
            f"{self.name} did not close within {timeout} s:\n{self.proc.stderr_tail()}"
        )
        self.proc.wait(timeout)
        self.proc.close()
        self.ended_at = time.monotonic()

    def cleanup(self) -> None:
        self.proc.kill()
        self.proc.close()


class JavaShareMember(JavaMember):
    """A Java ``KafkaShareConsumer`` that accepts every record it is given (implicit mode)."""

    def __init__(self, name: str, config: Mapping[str, object], topics: list[str]) -> None:
        super().__init__(name, config, topics, mode="share")


def wait_for(predicate: Callable[[], object], timeout: float, what: Callable[[], str] | str) -> None:
    """Wait (bounded, polling) until ``predicate()`` holds; fail saying ``what`` otherwise."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f} s: {what() if callable(what) else what}")
        time.sleep(0.05)
