"""A kaflux consumer-group member in a child process, so that fault scenarios can SIGKILL it.
[test: :class:`MemberProcess` in the parent (plus one reader thread per member); in the child, the
main thread polls and a daemon thread reads commands from stdin]

The child (``python -m support.group_member SPEC``) subscribes a :class:`kaflux.Consumer` to
one topic, polls, and after every batch commits what it read with ``commit_sync`` (only partitions
it owns; revoked partitions are committed in ``on_partitions_revoked``). It reports on stdout, one
JSON object a line, each with ``"ev"``:

* ``ready``: subscribed; ``closed``: the consumer was closed and the child is about to exit;
* ``assigned`` / ``revoked`` / ``lost``: a listener call, with ``partitions``, ``entered`` and
  ``returned`` (``time.monotonic()``, which is system-wide on Linux, so the parent can compare it
  with its own clock) and ``generation``. ``assigned`` is reported as the callback is entered, so
  a SIGKILL cannot hide an ownership that started;
* ``records``: ``[[partition, offset, key], ...]`` as ``poll()`` returned them, with ``at``;
* ``commit``: ``offsets`` (``{partition: next offset}``) that ``commit_sync`` confirmed, with ``at``;
* ``warning``: a :class:`kaflux.errors.KafkaError` from poll or commit (expected during faults);
  ``fatal``: any other exception (a defect), after which the child closes.

Commands on stdin, one a line: ``close``, ``pause-commits`` (answered with ``commits-paused`` once
no commit is in flight) and ``resume-commits``. End of stdin means ``close``.
"""

from __future__ import annotations

import json
import queue
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kaflux import Consumer, ConsumerRebalanceListener, TopicPartition
from kaflux.errors import KafkaError

from support.child_process import ReportingChild, die_with_parent

__all__ = ["MemberEvent", "MemberProcess", "Read"]

_POLL_S = 0.1
_COMMIT_TIMEOUT_S = 5.0
_CLOSE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class MemberEvent:
    """A listener call in a member: ``kind`` is assigned / revoked / lost."""

    member: str
    kind: str
    partitions: frozenset[int]
    entered: float
    returned: float
    generation: int


@dataclass(frozen=True)
class Read:
    """One record as a consumer returned it; ``at`` is when poll() returned (time.monotonic())."""

    member: str
    partition: int
    offset: int
    key: str
    at: float


@dataclass(frozen=True)
class Commit:
    """Offsets a member's ``commit_sync`` confirmed, at ``at``."""

    member: str
    offsets: dict[int, int]
    at: float


class MemberProcess(ReportingChild):
    """The parent's handle on one member child process. [test]

    ``config`` is the member's consumer config (``client.id`` defaults to ``name``). Reports are
    parsed by a reader thread into :attr:`events`, :attr:`reads`, :attr:`commits`,
    :attr:`warnings` and :attr:`fatal`.
    """

    def __init__(self, name: str, config: dict[str, object], topic: str) -> None:
        self.events: list[MemberEvent] = []
        self.reads: list[Read] = []
        self.commits: list[Commit] = []
        self.ready = False
        self.commits_paused = False
        self.started_at = time.monotonic()
        spec = {"name": name, "config": {"client.id": name, **config}, "topic": topic}
        super().__init__(name, "support.group_member", spec)

    # -- reports -----------------------------------------------------------------------------------------

    def _apply(self, kind: str, data: dict[str, Any]) -> None:
        if kind in ("assigned", "revoked", "lost"):
            partitions = frozenset(int(p) for p in data["partitions"])
            if kind == "assigned":
                self.events.append(
                    MemberEvent(
                        self.name, kind, partitions, data["entered"], data["entered"], data["generation"]
                    )
                )
            else:
                self.events.append(
                    MemberEvent(
                        self.name, kind, partitions, data["entered"], data["returned"], data["generation"]
                    )
                )
        elif kind == "records":
            at = data["at"]
            self.reads.extend(Read(self.name, p, o, k, at) for p, o, k in data["records"])
        elif kind == "commit":
            self.commits.append(
                Commit(self.name, {int(p): o for p, o in data["offsets"].items()}, data["at"])
            )
        elif kind == "ready":
            self.ready = True
        elif kind == "closed":
            self.closed = True
        elif kind == "commits-paused":
            self.commits_paused = True

    def wait(self, predicate: Callable[[MemberProcess], bool], timeout: float) -> bool:
        """Block until ``predicate(self)`` holds (checked on each report); False after ``timeout``."""
        with self._cond:
            return self._cond.wait_for(lambda: predicate(self), timeout)

    @property
    def owned(self) -> frozenset[int]:
        """The partitions this member owns according to its listener reports."""
        with self._lock:
            owned: set[int] = set()
            for event in self.events:
                if event.kind == "assigned":
                    owned |= event.partitions
                else:
                    owned -= event.partitions
            return frozenset(owned)

    def snapshot(self) -> tuple[list[MemberEvent], list[Read], list[Commit]]:
        with self._lock:
            return list(self.events), list(self.reads), list(self.commits)

    def read_count(self) -> int:
        with self._lock:
            return len(self.reads)

    # -- control -----------------------------------------------------------------------------------------

    def pause_commits(self, timeout: float = 2 * _COMMIT_TIMEOUT_S) -> None:
        """Stop committing; returns once no commit is in flight. Raises TimeoutError."""
        with self._lock:
            self.commits_paused = False
        self._command("pause-commits")
        if not self.wait(lambda m: m.commits_paused or not m.alive, timeout):
            raise TimeoutError(f"{self.name} did not pause its commits within {timeout} s")

    def resume_commits(self) -> None:
        self._command("resume-commits")

    def close(self, timeout: float = _CLOSE_TIMEOUT_S + 10.0) -> None:
        """Ask the child to close its consumer (leaving the group) and wait until it exited."""
        super().close(timeout)

    def kill(self) -> float:
        """SIGKILL the child (by PID); returns the kill time, where its ownership ends."""
        return super().kill()

    def __repr__(self) -> str:
        return f"<MemberProcess {self.name} pid {self.proc.pid} owns {sorted(self.owned)}>"


# --- the child ----------------------------------------------------------------------------------------------


class _Child(ConsumerRebalanceListener):
    def __init__(self, spec: dict[str, Any]) -> None:
        self.name: str = spec["name"]
        self.topic: str = spec["topic"]
        self._out_lock = threading.Lock()
        self.commands: queue.SimpleQueue[str] = queue.SimpleQueue()
        self.consumer = Consumer(spec["config"])
        self.owned: set[int] = set()
        self.pending: dict[int, int] = {}  # partition -> next offset read but not committed
        self.commits_allowed = True

    def emit(self, data: dict[str, Any]) -> None:
        line = json.dumps(data) + "\n"
        with self._out_lock:
            sys.stdout.write(line)
            sys.stdout.flush()

    def _generation(self) -> int:
        try:
            return self.consumer.group_metadata().generation_id
        except KafkaError:
            return -1

    # listener (runs inside poll, on the main thread)

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        numbers = sorted(tp.partition for tp in partitions)
        self.owned |= set(numbers)
        now = time.monotonic()
        self.emit({"ev": "assigned", "partitions": numbers, "entered": now, "generation": self._generation()})

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        entered = time.monotonic()
        numbers = {tp.partition for tp in partitions}
        self._commit(numbers)
        self._drop(numbers, "revoked", entered)

    def on_partitions_lost(self, partitions: set[TopicPartition]) -> None:
        self._drop({tp.partition for tp in partitions}, "lost", time.monotonic())

    def _drop(self, numbers: set[int], kind: str, entered: float) -> None:
        self.owned -= numbers
        for p in numbers:
            self.pending.pop(p, None)
        self.emit(
            {
                "ev": kind,
                "partitions": sorted(numbers),
                "entered": entered,
                "returned": time.monotonic(),
                "generation": self._generation(),
            }
        )

    def _commit(self, numbers: set[int] | None = None) -> None:
        if not self.commits_allowed:
            return
        offsets = {
            p: o for p, o in self.pending.items() if p in self.owned and (numbers is None or p in numbers)
        }
        if not offsets:
            return
        try:
            self.consumer.commit_sync(
                {TopicPartition(self.topic, p): o for p, o in offsets.items()}, timeout=_COMMIT_TIMEOUT_S
            )
        except KafkaError as exc:
            self.emit({"ev": "warning", "error": f"commit {offsets}: {exc!r}"})
            return
        self.emit({"ev": "commit", "offsets": offsets, "at": time.monotonic()})
        for p, o in offsets.items():
            if self.pending.get(p) == o:
                del self.pending[p]

    def _handle_commands(self) -> bool:
        """Apply queued commands; True when the child should close."""
        while True:
            try:
                command = self.commands.get_nowait()
            except queue.Empty:
                return False
            if command == "close":
                return True
            if command == "pause-commits":
                self.commits_allowed = False
                self.emit({"ev": "commits-paused"})
            elif command == "resume-commits":
                self.commits_allowed = True

    def run(self) -> None:
        def read_commands() -> None:
            for line in sys.stdin:
                self.commands.put(line.strip())
            self.commands.put("close")  # the parent went away

        threading.Thread(target=read_commands, name="commands", daemon=True).start()
        try:
            self.consumer.subscribe([self.topic], listener=self)
            self.emit({"ev": "ready"})
            while not self._handle_commands():
                try:
                    records = self.consumer.poll(_POLL_S)
                except KafkaError as exc:
                    self.emit({"ev": "warning", "error": f"poll: {exc!r}"})
                    continue
                if records:
                    batch = [[r.partition, r.offset, (r.key or b"").decode()] for r in records]
                    self.emit({"ev": "records", "at": time.monotonic(), "records": batch})
                    for r in records:
                        if r.partition in self.owned:
                            self.pending[r.partition] = r.offset + 1
                self._commit()
        except BaseException as exc:
            self.emit({"ev": "fatal", "error": repr(exc)})
        finally:
            try:
                self.consumer.close(_CLOSE_TIMEOUT_S)
            except BaseException as exc:
                self.emit({"ev": "fatal", "error": f"close: {exc!r}"})
            self.emit({"ev": "closed"})


def main(argv: list[str]) -> None:
    die_with_parent()
    _Child(json.loads(argv[0])).run()


if __name__ == "__main__":
    main(sys.argv[1:])
