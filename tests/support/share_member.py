"""A kaflux share-group member in a child process, so that fault scenarios can SIGKILL it.
[test: :class:`ShareMemberProcess` in the parent (plus one reader thread per member); in the
child, the main thread polls and a daemon thread reads commands from stdin]

The child (``python -m support.share_member SPEC``) subscribes a :class:`kaflux.ShareConsumer`
(explicit acknowledgement mode) to one topic and loops: poll, report the records, "process" them
for ``hold_s`` seconds (while they stay acquired and unacknowledged), ACCEPT each and
``commit_sync``. It reports on stdout, one JSON object a line, each with ``"ev"``:

* ``ready``: subscribed; ``closed``: the consumer was closed and the child is about to exit;
* ``assignment``: ``state`` and ``partitions`` whenever they change (checked about twice a second);
* ``records``: ``[[partition, offset, key, delivery_count], ...]`` as ``poll()`` returned them,
  with ``at`` (``time.monotonic()``, system-wide on Linux, comparable with the parent's clock);
* ``accepting``: ``{partition: [offsets]}`` acknowledged (ACCEPT) and about to be committed;
* ``acked``: what the acknowledgement commit callback reported: ``offsets`` and ``error`` (None
  when the broker took them), with ``at``;
* ``warning``: a :class:`kaflux.errors.KafkaError` from poll or commit (expected during faults);
  ``fatal``: any other exception (a defect), after which the child closes.

Commands on stdin, one a line: ``close``. End of stdin means ``close``.
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

from kaflux import AcknowledgeType, ShareConsumer, TopicPartition
from kaflux.errors import KafkaError

from support.child_process import ReportingChild, die_with_parent

__all__ = ["Delivery", "ShareMemberProcess"]

_POLL_S = 0.2
_STATE_EVERY_S = 0.5
_COMMIT_TIMEOUT_S = 5.0
_CLOSE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Delivery:
    """One record as a member's ``poll()`` returned it, at ``at`` (time.monotonic())."""

    member: str
    partition: int
    offset: int
    key: str
    count: int
    at: float


@dataclass(frozen=True)
class Acked:
    """Offsets the acknowledgement commit callback reported, ``error`` None when accepted."""

    member: str
    offsets: dict[int, frozenset[int]]
    error: str | None
    at: float


class ShareMemberProcess(ReportingChild):
    """The parent's handle on one share member child process. [test]"""

    def __init__(self, name: str, config: dict[str, object], topic: str, hold_s: float = 0.1) -> None:
        self.deliveries: list[Delivery] = []
        self.accepting: set[tuple[int, int]] = set()
        self.acked: list[Acked] = []
        self.state = ""
        self.assignment: frozenset[int] = frozenset()
        #: how long the child's ShareConsumer.close() took
        self.close_s: float | None = None
        spec = {"name": name, "config": {"client.id": name, **config}, "topic": topic, "hold_s": hold_s}
        super().__init__(name, "support.share_member", spec)

    def _apply(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "records":
            at = data["at"]
            self.deliveries.extend(Delivery(self.name, p, o, k, n, at) for p, o, k, n in data["records"])
        elif kind == "accepting":
            self.accepting.update((int(p), o) for p, offsets in data["offsets"].items() for o in offsets)
        elif kind == "acked":
            offsets = {int(p): frozenset(o) for p, o in data["offsets"].items()}
            self.acked.append(Acked(self.name, offsets, data["error"], data["at"]))
        elif kind == "assignment":
            self.state = data["state"]
            self.assignment = frozenset(data["partitions"])
        elif kind == "closed":
            self.closed = True
            self.close_s = data["close_s"]

    def wait(self, predicate: Callable[[ShareMemberProcess], bool], timeout: float) -> bool:
        """Block until ``predicate(self)`` holds (checked on each report); False after ``timeout``."""
        with self._cond:
            return self._cond.wait_for(lambda: predicate(self), timeout)

    def joined(self) -> bool:
        with self._lock:
            return self.state == "STABLE" and bool(self.assignment)

    def delivery_count(self) -> int:
        with self._lock:
            return len(self.deliveries)

    def snapshot(self) -> tuple[list[Delivery], set[tuple[int, int]], list[Acked]]:
        with self._lock:
            return list(self.deliveries), set(self.accepting), list(self.acked)

    def close(self, timeout: float = _CLOSE_TIMEOUT_S + 10.0) -> None:
        """Ask the child to close its consumer (leaving the group) and wait until it exited."""
        super().close(timeout)

    def __repr__(self) -> str:
        return f"<ShareMemberProcess {self.name} pid {self.proc.pid} holds {sorted(self.assignment)}>"


# --- the child ----------------------------------------------------------------------------------------------


class _Child:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.topic: str = spec["topic"]
        self.hold_s: float = spec["hold_s"]
        self._out_lock = threading.Lock()
        self.commands: queue.SimpleQueue[str] = queue.SimpleQueue()
        self.consumer = ShareConsumer({**spec["config"], "share.acknowledgement.mode": "explicit"})
        self.consumer.set_acknowledgement_commit_callback(self._acked)
        self._state: tuple[str, list[int]] | None = None
        self._state_at = 0.0

    def emit(self, data: dict[str, Any]) -> None:
        line = json.dumps(data) + "\n"
        with self._out_lock:
            sys.stdout.write(line)
            sys.stdout.flush()

    def _acked(self, offsets: dict[TopicPartition, set[int]], error: KafkaError | None) -> None:
        self.emit(
            {
                "ev": "acked",
                "offsets": {tp.partition: sorted(o) for tp, o in offsets.items()},
                "error": None if error is None else repr(error),
                "at": time.monotonic(),
            }
        )

    def _report_state(self) -> None:
        now = time.monotonic()
        if now - self._state_at < _STATE_EVERY_S:
            return
        self._state_at = now
        try:
            group = self.consumer.group_state(2.0)
        except KafkaError as exc:
            self.emit({"ev": "warning", "error": f"group_state: {exc!r}"})
            return
        state = (group.state, sorted(tp.partition for tp in group.assignment))
        if state != self._state:
            self._state = state
            self.emit({"ev": "assignment", "state": state[0], "partitions": state[1]})

    def _closing(self) -> bool:
        try:
            return self.commands.get_nowait() == "close"
        except queue.Empty:
            return False

    def run(self) -> None:
        def read_commands() -> None:
            for line in sys.stdin:
                self.commands.put(line.strip())
            self.commands.put("close")  # the parent went away

        threading.Thread(target=read_commands, name="commands", daemon=True).start()
        try:
            self.consumer.subscribe([self.topic])
            self.emit({"ev": "ready"})
            while not self._closing():
                self._report_state()
                try:
                    records = self.consumer.poll(_POLL_S)
                except KafkaError as exc:
                    self.emit({"ev": "warning", "error": f"poll: {exc!r}"})
                    continue
                if not records:
                    continue
                batch = [[r.partition, r.offset, (r.key or b"").decode(), r.delivery_count] for r in records]
                self.emit({"ev": "records", "at": time.monotonic(), "records": batch})
                time.sleep(self.hold_s)  # processing: the records stay acquired, unacknowledged
                accepting: dict[int, list[int]] = {}
                for r in records:
                    self.consumer.acknowledge(r, AcknowledgeType.ACCEPT)
                    accepting.setdefault(r.partition, []).append(r.offset)
                self.emit({"ev": "accepting", "offsets": accepting})
                try:
                    self.consumer.commit_sync(_COMMIT_TIMEOUT_S)
                except KafkaError as exc:
                    self.emit({"ev": "warning", "error": f"commit: {exc!r}"})
        except BaseException as exc:
            self.emit({"ev": "fatal", "error": repr(exc)})
        finally:
            closing = time.monotonic()
            try:
                self.consumer.close(_CLOSE_TIMEOUT_S)
            except BaseException as exc:
                self.emit({"ev": "fatal", "error": f"close: {exc!r}"})
            self.emit({"ev": "closed", "close_s": time.monotonic() - closing})


def main(argv: list[str]) -> None:
    die_with_parent()
    _Child(json.loads(argv[0])).run()


if __name__ == "__main__":
    main(sys.argv[1:])
