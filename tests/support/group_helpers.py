"""Helpers for the consumer-group integration tests (``test_group_*.py``).

* :class:`ThreadMember` runs a kaflux consumer on its own polling thread and records every
  listener call (:class:`Event`) and every record it returns.
* :class:`ProcessMember` runs the same loop in a child process (this file is its script), so that
  a member can be killed with SIGKILL. The child reports events and records as JSON lines.
* Ownership intervals built from the listener logs (``time.monotonic()`` is system-wide on Linux,
  so timestamps from child processes compare with the test's) prove that no partition was owned
  by two members at once: a partition's ownership starts when ``on_partitions_assigned`` is
  entered and ends when ``on_partitions_revoked`` / ``on_partitions_lost`` returns, when the
  member is killed, or never.

Tests import this module as ``from support.group_helpers import ...``.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from kaflux import Consumer, ConsumerRebalanceListener, TopicPartition

from support.kafka_helpers import create_topic as create_topic  # re-exported to the tests
from support.kafka_helpers import produce as produce

_TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: Tansu holds a join for session.timeout.ms / 2: 6 s sessions keep a join at about 3 s.
GROUP_TIMINGS: dict[str, object] = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500}
WAIT_S = 30.0
_POLL_S = 0.1


def wait_until(predicate: Callable[[], object], timeout: float, describe: Callable[[], object] | str) -> None:
    """Wait (bounded) until ``predicate()`` is true; fail with ``describe`` otherwise."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            message = describe() if callable(describe) else describe
            raise AssertionError(f"not within {timeout:.1f} s: {message}")
        time.sleep(0.02)


def member_config(
    bootstrap: str, group: str, strategy: str | None = None, **extra: object
) -> dict[str, object]:
    config: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        **GROUP_TIMINGS,
    }
    if strategy is not None:
        config["partition.assignment.strategy"] = strategy
    config.update({k.replace("_", "."): v for k, v in extra.items()})
    return config


def new_group() -> str:
    return f"kx-group-{uuid.uuid4().hex[:10]}"


# --- listener log ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    """One listener call: ``kind`` is assigned / revoked / lost; times are time.monotonic()."""

    member: str
    kind: str
    partitions: frozenset[int]
    entered: float
    returned: float
    thread: str
    on_polling_thread: bool
    owned_after: frozenset[int]

    def to_json(self) -> dict[str, Any]:
        return {
            "ev": self.kind,
            "member": self.member,
            "partitions": sorted(self.partitions),
            "entered": self.entered,
            "returned": self.returned,
            "thread": self.thread,
            "on_polling_thread": self.on_polling_thread,
            "owned_after": sorted(self.owned_after),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Event:
        return cls(
            data["member"],
            data["ev"],
            frozenset(data["partitions"]),
            data["entered"],
            data["returned"],
            data["thread"],
            data["on_polling_thread"],
            frozenset(data["owned_after"]),
        )


@dataclass(frozen=True)
class Received:
    """A record as a member's poll() returned it; ``at`` is when poll() returned."""

    member: str
    partition: int
    offset: int
    value: bytes
    at: float


class RecordingListener(ConsumerRebalanceListener):
    """Logs every call (see :class:`Event`). Optional behaviour: the first non-empty revocation
    takes ``slow_first_revoke_s`` seconds; ``raise_in`` maps a kind (assigned / revoked / lost) to an
    exception raised once, after the call was logged."""

    def __init__(
        self,
        member: str,
        sink: Callable[[Event], None],
        *,
        slow_first_revoke_s: float = 0.0,
        raise_in: dict[str, BaseException] | None = None,
    ) -> None:
        self.member = member
        self.sink = sink
        self.polling_thread: threading.Thread | None = None
        self.owned: set[int] = set()
        self.slow_first_revoke_s = slow_first_revoke_s
        self.raise_in = dict(raise_in or {})

    def _call(
        self, kind: str, partitions: set[TopicPartition], work: Callable[[], None] | None = None
    ) -> None:
        entered = time.monotonic()
        numbers = frozenset(tp.partition for tp in partitions)
        if kind == "assigned":
            self.owned |= numbers
        try:
            if work is not None:
                work()
        finally:
            if kind != "assigned":
                self.owned -= numbers
            current = threading.current_thread()
            self.sink(
                Event(
                    self.member,
                    kind,
                    numbers,
                    entered,
                    time.monotonic(),
                    current.name,
                    current is self.polling_thread,
                    frozenset(self.owned),
                )
            )
        error = self.raise_in.pop(kind, None)
        if error is not None:
            raise error

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        self._call("assigned", partitions)

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        slow = self.slow_first_revoke_s
        if slow and partitions:
            self.slow_first_revoke_s = 0.0
            self._call("revoked", partitions, lambda: time.sleep(slow))  # slow work, e.g. a flush
        else:
            self._call("revoked", partitions)

    def on_partitions_lost(self, partitions: set[TopicPartition]) -> None:
        self._call("lost", partitions)


# --- members ------------------------------------------------------------------------------------------


class Member:
    """What the tests need from a member, wherever it runs."""

    name: str

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._events: list[Event] = []
        self._records: list[Received] = []
        self.ended_at: float | None = None  # killed: ownership ends here

    def _add_event(self, event: Event) -> None:
        with self._lock:
            self._events.append(event)

    def _add_records(self, records: Iterable[Received]) -> None:
        with self._lock:
            self._records.extend(records)

    def died(self) -> str | None:
        """Why this member stopped without being asked to, or None while it is alive."""
        return None

    @property
    def events(self) -> list[Event]:
        with self._lock:
            return list(self._events)

    @property
    def records(self) -> list[Received]:
        with self._lock:
            return list(self._records)

    @property
    def owned(self) -> frozenset[int]:
        """The partitions owned according to the listener log."""
        events = self.events
        return events[-1].owned_after if events else frozenset()

    def _log_peer_callback(self, kind: str, partitions: Iterable[int], on_polling_thread: bool) -> None:
        """Record a peer client's (confluent-kafka's) rebalance callback the way
        :class:`RecordingListener` records a kaflux listener's."""
        now = time.monotonic()
        numbers = frozenset(partitions)
        owned = self.owned | numbers if kind == "assigned" else self.owned - numbers
        thread = threading.current_thread().name
        self._add_event(Event(self.name, kind, numbers, now, now, thread, on_polling_thread, owned))


class ThreadMember(Member):
    """A kaflux consumer subscribed on its own thread, polling every ``poll_s`` seconds."""

    def __init__(
        self,
        name: str,
        config: dict[str, object],
        topics: list[str],
        *,
        poll_s: float = _POLL_S,
        listener_options: dict[str, Any] | None = None,
        commit: bool = False,
    ) -> None:
        super().__init__(name)
        self.config = {"client.id": name, **config}
        self.commit = commit  # commit_sync() after every poll that returned records
        self.topics = topics
        self.poll_s = poll_s
        self.listener = RecordingListener(name, self._add_event, **(listener_options or {}))
        self.consumer: Consumer | None = None
        self.errors: list[BaseException] = []
        self.polls = 0
        self._stop = threading.Event()
        self._calls: queue.SimpleQueue[tuple[Callable[[Consumer], Any], Future[Any]]] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._run, name=f"app-{name}", daemon=True)
        self.listener.polling_thread = self.thread

    def start(self) -> ThreadMember:
        self.thread.start()
        return self

    def _run(self) -> None:
        try:
            consumer = self.consumer = Consumer(self.config)
            consumer.subscribe(self.topics, listener=self.listener)
            while not self._stop.is_set():
                self._run_calls(consumer)
                if not consumer.subscription():  # unsubscribe() was called: poll() would raise
                    self._stop.wait(self.poll_s)
                    continue
                records = consumer.poll(self.poll_s)
                self.polls += 1
                if records:
                    now = time.monotonic()
                    self._add_records(
                        Received(self.name, r.partition, r.offset, r.value or b"", now) for r in records
                    )
                    if self.commit:
                        consumer.commit_sync(timeout=WAIT_S)
            self._run_calls(consumer)
        except BaseException as e:
            self.errors.append(e)
        finally:
            self._stop.set()
            with contextlib.suppress(Exception):
                if self.consumer is not None:
                    self.consumer.close(10.0)
            while True:
                try:
                    _, future = self._calls.get_nowait()
                except queue.Empty:
                    break
                future.set_exception(RuntimeError(f"{self.name} stopped"))

    def _run_calls(self, consumer: Consumer) -> None:
        while True:
            try:
                call, future = self._calls.get_nowait()
            except queue.Empty:
                return
            try:
                future.set_result(call(consumer))
            except BaseException as e:
                future.set_exception(e)

    def call(self, action: Callable[[Consumer], Any], timeout: float = WAIT_S) -> Any:
        """Run ``action(consumer)`` on the polling thread between two polls; return its result."""
        future: Future[Any] = Future()
        self._calls.put((action, future))
        return future.result(timeout)

    def stop(self, timeout: float = WAIT_S) -> None:
        """Stop polling and close the consumer (on its thread)."""
        self.request_stop()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"{self.name} did not stop within {timeout} s"

    def request_stop(self) -> None:
        self._stop.set()

    def check(self) -> None:
        assert self.errors == [], f"{self.name} failed: {self.errors!r}"


class ProcessMember(Member):
    """A kaflux consumer in a child process (this file run as a script).

    ``close()`` asks it to close its consumer and exit; ``kill()`` sends SIGKILL.
    """

    def __init__(self, name: str, config: dict[str, object], topics: list[str]) -> None:
        super().__init__(name)
        spec = {"name": name, "config": {"client.id": name, **config}, "topics": topics}
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in cleanup()
        # The child runs this file as a script: give it the tests directory, which holds the
        # helpers this module imports (pytest's ``pythonpath`` setting reaches only this process).
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [_TESTS_DIR, env.get("PYTHONPATH")]))
        self.proc = subprocess.Popen(
            [sys.executable, __file__, json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env=env,
        )
        self.ready = threading.Event()
        self.closed = threading.Event()
        self.problems: list[str] = []
        self._reader = threading.Thread(target=self._read, name=f"reader-{name}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                data = json.loads(line)
            except ValueError:
                self.problems.append(f"bad line {line!r}")
                continue
            kind = data["ev"]
            if kind in ("assigned", "revoked", "lost"):
                self._add_event(Event.from_json(data))
            elif kind == "records":
                at = data["at"]
                self._add_records(
                    Received(self.name, p, o, bytes.fromhex(v), at) for p, o, v in data["records"]
                )
            elif kind == "subscribed":
                self.ready.set()
            elif kind == "closed":
                self.closed.set()
            elif kind == "error":
                self.problems.append(data["error"])

    def close(self, timeout: float = WAIT_S) -> None:
        """Ask the child to close its consumer (revoking its partitions) and wait until it exited."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"close\n")
        self.proc.stdin.flush()
        assert self.closed.wait(timeout), f"{self.name} did not close within {timeout} s"
        self.proc.wait(timeout)
        self._reader.join(timeout)

    def kill(self) -> float:
        """SIGKILL the child; returns the time it was killed (its ownership ends there)."""
        self.ended_at = time.monotonic()
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(WAIT_S)
        self._reader.join(WAIT_S)
        return self.ended_at

    def cleanup(self) -> None:
        """Kill the child if it still runs (by its PID) and release its pipes."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(WAIT_S)
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(Exception):
                if stream is not None:
                    stream.close()
        self.stderr.close()

    def stderr_tail(self, limit: int = 4000) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")[-limit:]

    def check(self) -> None:
        assert self.problems == [], f"{self.name} reported: {self.problems!r}\n{self.stderr_tail()}"

    def died(self) -> str | None:
        if self.ended_at is not None or self.closed.is_set() or self.proc.poll() is None:
            return None
        return f"{self.name} exited with {self.proc.returncode} unasked:\n{self.stderr_tail()}"


def stop_all(members: Iterable[ThreadMember], timeout: float = WAIT_S) -> None:
    """Stop (and close) members concurrently: closing one after another would make each close
    wait for the rebalance the previous one started."""
    members = list(members)
    for m in members:
        m.request_stop()
    for m in members:
        m.stop(timeout)


# --- group-wide checks -----------------------------------------------------------------------------------


def describe(members: Iterable[Member]) -> str:
    return "; ".join(f"{m.name}={sorted(m.owned)}" for m in members)


def converged(members: Sequence[Member], partitions: int) -> bool:
    """Every member owns something, nobody shares a partition, and all partitions are owned."""
    owned = [m.owned for m in members]
    union: set[int] = set().union(*owned)
    return all(owned) and sum(len(o) for o in owned) == len(union) and union == set(range(partitions))


def wait_converged(members: Sequence[Member], partitions: int, timeout: float = WAIT_S) -> None:
    def done() -> bool:
        dead = [d for m in members if (d := m.died()) is not None]
        assert not dead, "; ".join(dead)  # a crashed member will never converge: say why at once
        return converged(members, partitions)

    wait_until(done, timeout, lambda: f"no complete, disjoint assignment: {describe(members)}")


@dataclass
class Interval:
    member: str
    start: float
    end: float


@dataclass
class Ownership:
    """Per partition, the intervals during which each member owned it."""

    intervals: dict[int, list[Interval]] = field(default_factory=dict)

    @classmethod
    def of(cls, members: Iterable[Member]) -> Ownership:
        result = cls()
        for member in members:
            started: dict[int, float] = {}
            for event in sorted(member.events, key=lambda e: e.entered):
                for p in event.partitions:
                    if event.kind == "assigned":
                        assert p not in started, f"{member.name} was assigned partition {p} twice"
                        started[p] = event.entered
                    else:
                        assert p in started, f"{member.name} lost/revoked partition {p} it did not own"
                        result.intervals.setdefault(p, []).append(
                            Interval(member.name, started.pop(p), event.returned)
                        )
            end = member.ended_at if member.ended_at is not None else float("inf")
            for p, start in started.items():
                result.intervals.setdefault(p, []).append(Interval(member.name, start, end))
        return result

    def overlaps(self) -> list[str]:
        """Descriptions of every moment two members owned the same partition."""
        problems = []
        for p, intervals in sorted(self.intervals.items()):
            ordered = sorted(intervals, key=lambda i: i.start)
            for earlier_index, earlier in enumerate(ordered):
                for later in ordered[earlier_index + 1 :]:
                    if later.start < earlier.end:
                        problems.append(
                            f"partition {p}: {later.member} owned it from {later.start:.3f} while "
                            f"{earlier.member} owned it {earlier.start:.3f}..{earlier.end:.3f}"
                        )
        return problems


# --- child process -------------------------------------------------------------------------------------


def _die_with_parent() -> None:
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _child_main(spec_json: str) -> None:
    _die_with_parent()
    spec = json.loads(spec_json)
    out_lock = threading.Lock()

    def emit(data: dict[str, Any]) -> None:
        line = json.dumps(data) + "\n"
        with out_lock:
            sys.stdout.write(line)
            sys.stdout.flush()

    commands: queue.SimpleQueue[str] = queue.SimpleQueue()

    def read_commands() -> None:
        for line in sys.stdin:
            commands.put(line.strip())
        commands.put("close")  # the parent went away

    threading.Thread(target=read_commands, daemon=True).start()
    listener = RecordingListener(spec["name"], lambda e: emit(e.to_json()))
    listener.polling_thread = threading.current_thread()
    consumer = Consumer(spec["config"])
    try:
        consumer.subscribe(spec["topics"], listener=listener)
        emit({"ev": "subscribed"})
        while True:
            try:
                command = commands.get_nowait()
            except queue.Empty:
                command = ""
            if command == "close":
                break
            records = consumer.poll(_POLL_S)
            if records:
                emit(
                    {
                        "ev": "records",
                        "at": time.monotonic(),
                        "records": [[r.partition, r.offset, (r.value or b"").hex()] for r in records],
                    }
                )
    except BaseException as e:
        emit({"ev": "error", "error": repr(e)})
    finally:
        consumer.close(10.0)
        emit({"ev": "closed"})


if __name__ == "__main__":
    _child_main(sys.argv[1])
