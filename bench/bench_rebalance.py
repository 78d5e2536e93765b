"""Rebalance cost when a member joins under load: KIP-848 against classic cooperative-sticky.

    python bench/bench_rebalance.py                        # 3 setups, 5 rounds each, ~2 min
    python bench/bench_rebalance.py --rounds 3 --setups kip848-mock-3s,classic-mock --verbose

Member A reads a topic of ``--partitions`` partitions (12) alone, stable and caught up, while
a producer thread (confluent-kafka) writes ``--rate`` records/s (2,000) spread evenly over the
partitions, each value starting with its produce time. Then member B subscribes (t0).
Measured per round:

* **join -> stable**: t0 until B holds a non-empty assignment and A's and B's assignments
  (as their rebalance listeners saw them) are disjoint and cover every partition;
* **kept-partition gap**: for the partitions A owns before and after, the longest time between
  two consecutive deliveries of the same partition to A in that window, against the same
  figure over the ``--steady`` seconds (3) before t0, the baseline; and the worst end-to-end
  latency (delivery minus produce time) of those partitions in both windows;
* **moved-partition pause**: for the partitions that go to B, the longest time from A's last
  delivery of a partition to B's first.

Every member is a process of its own (``--member``, started and stopped by its PID), so the
members share no GIL; times are ``time.monotonic()``, one clock for all processes on Linux.
A new group for every round. Every member uses ``fetch.max.wait.ms=100`` (the mock answers a
Fetch that finds no new data only after that wait) and ``auto.offset.reset=latest``.
Setups (``--setups``):

* ``kip848-mock-3s``: group.protocol=consumer on librdkafka's mock cluster, heartbeat interval
  3 s (the mock's default);
* ``kip848-mock-1s``: the same with the mock's interval set to 1 s, as classic's below;
* ``classic-noida``: group.protocol=classic, partition.assignment.strategy=cooperative-sticky,
  session.timeout.ms=6000, heartbeat.interval.ms=1000, on noida-db. Also
  max.poll.interval.ms=5000: in about half the rounds noida answers the cooperative follow-up
  join only after the rebalance timeout (max.poll.interval.ms), and then lists the leader
  alone, so A takes every partition back and B stays empty. Such rounds are reported, not
  measured;
* ``classic-mock`` (not run by default): the classic setup on the mock, with JoinGroup capped
  at v5 and SyncGroup at v3 (it misreads v6 and v4). The mock holds every join round for
  session.timeout.ms - 1 s, so this measures the mock's timer, not the protocol.

The mock cluster is served by a child process (``--serve-mock``) that drives librdkafka's
mock API through ctypes (the library inside confluent-kafka): that API creates a topic of any
partition count (the mock has no CreateTopics; auto-creation gives 4), sets the KIP-848
heartbeat interval and caps API versions. noida-db is started by ``kaflux.devbrokers.brokers``.
``--verbose`` prints each round's rebalance callbacks; ``--log-dir`` keeps each member's
kaflux debug log.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import itertools
import json
import os
import queue
import statistics
import struct
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import IO, Any

TOPIC = "bench-rebalance"
_MOCK_READY = "BENCH-MOCK-BOOTSTRAP "
#: api key -> the highest version the mock may offer: it advertises JoinGroup v6 and SyncGroup
#: v4 but reads them in older layouts (and is then wedged for every group).
_CLASSIC_GROUP_CAPS = {11: 5, 14: 3}


@dataclass(frozen=True)
class Setup:
    name: str
    broker: str  # "mock" or "noida"
    protocol: str  # "consumer" (KIP-848) or "classic"
    heartbeat_ms: int
    label: str
    config: dict[str, Any] = field(default_factory=dict)


#: every member, every setup: the mock answers a Fetch that finds no new data only after
#: fetch.max.wait.ms, which would blur the gaps measured
COMMON_CONFIG: dict[str, Any] = {"fetch.max.wait.ms": 100, "auto.offset.reset": "latest"}
CLASSIC_CONFIG: dict[str, Any] = {
    "partition.assignment.strategy": "cooperative-sticky",
    "session.timeout.ms": 6000,
}
SETUPS: dict[str, Setup] = {
    s.name: s
    for s in (
        Setup("kip848-mock-3s", "mock", "consumer", 3000, "KIP-848, mock, heartbeat 3 s (mock default)"),
        Setup("kip848-mock-1s", "mock", "consumer", 1000, "KIP-848, mock, heartbeat 1 s"),
        Setup(
            "classic-noida",
            "noida",
            "classic",
            1000,
            "classic coop-sticky, noida-db, heartbeat 1 s, max.poll.interval.ms 5 s",
            # noida holds the joining member's JoinGroup until the rebalance timeout
            # (max.poll.interval.ms, 5 min by default); see the module docstring
            {"max.poll.interval.ms": 5000},
        ),
        Setup("classic-mock", "mock", "classic", 1000, "classic coop-sticky, mock, heartbeat 1 s"),
    )
}
DEFAULT_SETUPS = "kip848-mock-3s,kip848-mock-1s,classic-noida"


# --- the mock cluster, through librdkafka's mock API ------------------------------------------------------


def _librdkafka() -> ctypes.CDLL:
    import confluent_kafka

    libs = os.path.join(os.path.dirname(confluent_kafka.__file__), os.pardir, "confluent_kafka.libs")
    found = sorted(glob.glob(os.path.join(libs, "librdkafka*.so*")))
    lib = ctypes.CDLL(found[0] if found else "librdkafka.so.1")
    vp, cp, i = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
    lib.rd_kafka_conf_new.restype = vp
    lib.rd_kafka_conf_set.argtypes = [vp, cp, cp, cp, ctypes.c_size_t]
    lib.rd_kafka_new.restype = vp
    lib.rd_kafka_new.argtypes = [i, vp, cp, ctypes.c_size_t]
    lib.rd_kafka_handle_mock_cluster.restype = vp
    lib.rd_kafka_handle_mock_cluster.argtypes = [vp]
    lib.rd_kafka_mock_cluster_bootstraps.restype = cp
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [vp]
    lib.rd_kafka_mock_topic_create.argtypes = [vp, cp, i, i]
    lib.rd_kafka_mock_set_group_consumer_heartbeat_interval_ms.argtypes = [vp, i]
    i16 = ctypes.c_int16
    lib.rd_kafka_mock_set_apiversion.argtypes = [vp, i16, i16, i16]
    return lib


def serve_mock(partitions: int, heartbeat_ms: int) -> None:
    """Child process: a 3-broker mock cluster holding TOPIC, until stdin closes."""
    lib = _librdkafka()
    errstr = ctypes.create_string_buffer(512)
    conf = lib.rd_kafka_conf_new()
    if lib.rd_kafka_conf_set(conf, b"test.mock.num.brokers", b"3", errstr, len(errstr)) != 0:
        raise SystemExit(errstr.value.decode())
    conf_set = lib.rd_kafka_conf_set
    conf_set(conf, b"log_level", b"3", errstr, len(errstr))  # no "mock cluster enabled" notice
    handle = lib.rd_kafka_new(0, conf, errstr, len(errstr))  # a producer handle hosts the mock
    if not handle:
        raise SystemExit(errstr.value.decode())
    cluster = lib.rd_kafka_handle_mock_cluster(handle)
    if lib.rd_kafka_mock_topic_create(cluster, TOPIC.encode(), partitions, 3) != 0:
        raise SystemExit("rd_kafka_mock_topic_create failed")
    lib.rd_kafka_mock_set_group_consumer_heartbeat_interval_ms(cluster, heartbeat_ms)
    for key, max_version in _CLASSIC_GROUP_CAPS.items():
        lib.rd_kafka_mock_set_apiversion(cluster, key, 0, max_version)
    print(_MOCK_READY + lib.rd_kafka_mock_cluster_bootstraps(cluster).decode(), flush=True)
    try:
        sys.stdin.read()
    finally:
        os._exit(0)  # librdkafka's threads: leave at once


# --- child processes ------------------------------------------------------------------------------------


class Child:
    """A child process of this script, speaking JSON lines on stdout; stopped by its PID."""

    def __init__(self, args: list[str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stderr = ""
        assert self.proc.stdout is not None and self.proc.stderr is not None
        threading.Thread(target=self._pump, args=(self.proc.stdout,), daemon=True).start()
        threading.Thread(target=self._drain_stderr, args=(self.proc.stderr,), daemon=True).start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.put(line)
        self.lines.put(None)

    def _drain_stderr(self, stream: IO[str]) -> None:
        for line in stream:
            self.stderr = (self.stderr + line)[-4000:]

    def send(self, line: str) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except (OSError, ValueError):
            pass

    def stop(self, timeout: float = 15.0) -> None:
        """Close stdin (the child's cue to finish), then SIGTERM and SIGKILL by PID if needed."""
        from kaflux.devbrokers.brokers import stop_process

        proc = self.proc
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=timeout)
        except (OSError, subprocess.TimeoutExpired):
            stop_process(proc, 5.0)


class MockServer:
    def __init__(self, partitions: int, heartbeat_ms: int) -> None:
        self.child = Child(
            ["--serve-mock", "--partitions", str(partitions), "--heartbeat-ms", str(heartbeat_ms)]
        )
        try:
            line = self.child.lines.get(timeout=30)
        except queue.Empty:
            line = None
        if not line or not line.startswith(_MOCK_READY):
            self.child.stop(2)
            raise SystemExit(f"the mock cluster did not start: {line!r} {self.child.stderr}")
        self.bootstrap_servers = line[len(_MOCK_READY) :].strip()

    def stop(self) -> None:
        self.child.stop(5)


# --- a group member (child process) ---------------------------------------------------------------------


def run_member(setup: Setup, bootstrap: str, group: str) -> None:
    """Child process: subscribe, poll until stdin closes, then report deliveries.

    Prints JSON lines: ``subscribe`` (t0), each rebalance callback, ``first`` (first delivery of
    a partition since it was assigned), and at the end ``data``: per partition the delivery
    times (one per poll that returned records of it) and the worst latency of each."""
    from kaflux import Consumer, ConsumerRebalanceListener, TopicPartition

    log_dir = os.environ.get("BENCH_REBALANCE_LOG_DIR")
    if log_dir:  # kaflux's debug log of this member, for looking into a round
        import logging

        logging.basicConfig(
            filename=os.path.join(log_dir, f"{group}-{os.getpid()}.log"),
            level=logging.DEBUG,
            format="%(created).3f %(threadName)s %(name)s %(message)s",
        )

    def emit(**event: Any) -> None:
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()

    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
    fresh: set[int] = set()  # assigned, nothing delivered yet

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
            emit(ev="revoked", t=time.monotonic(), parts=sorted(tp.partition for tp in partitions))
            fresh.difference_update(tp.partition for tp in partitions)

        def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
            emit(ev="assigned", t=time.monotonic(), parts=sorted(tp.partition for tp in partitions))
            fresh.update(tp.partition for tp in partitions)

        def on_partitions_lost(self, partitions: set[TopicPartition]) -> None:
            emit(ev="lost", t=time.monotonic(), parts=sorted(tp.partition for tp in partitions))
            fresh.difference_update(tp.partition for tp in partitions)

    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": setup.protocol,
        "client.id": f"bench-{os.getpid()}",
        **COMMON_CONFIG,
    }
    if setup.protocol == "classic":
        config |= {**CLASSIC_CONFIG, "heartbeat.interval.ms": setup.heartbeat_ms}
    config |= setup.config
    consumer = Consumer(config)
    deliveries: dict[int, list[tuple[float, float]]] = {}
    unpack = struct.Struct(">d").unpack_from
    emit(ev="subscribe", t=time.monotonic())
    consumer.subscribe([TOPIC], listener=Listener())
    while not stop.is_set():
        records = consumer.poll(0.05)
        now = time.monotonic()
        worst: dict[int, float] = {}
        for record in records:
            latency = now - unpack(record.value)[0]
            p = record.partition
            if latency > worst.get(p, -1.0):
                worst[p] = latency
        for p, latency in worst.items():
            deliveries.setdefault(p, []).append((now, latency))
            if p in fresh:
                fresh.discard(p)
                emit(ev="first", t=now, p=p)
    end = time.monotonic()
    consumer.close(timeout=10)
    emit(ev="data", end=end, deliveries={str(p): d for p, d in deliveries.items()})


# --- the producer thread --------------------------------------------------------------------------------


class SteadyProducer:
    """confluent-kafka producing ``rate`` records/s, round-robin over the partitions, in 5 ms ticks;
    each value starts with its produce time (``time.monotonic()``)."""

    def __init__(self, bootstrap: str, partitions: int, rate: int) -> None:
        from confluent_kafka import Producer

        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 3})
        self._partitions = partitions
        self._rate = rate
        self._stop = threading.Event()
        self.sent = 0
        self.errors = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors += 1

    def _run(self) -> None:
        pad = b"x" * 92
        start = time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - start) * self._rate)
            while self.sent < due:
                value = struct.pack(">d", time.monotonic()) + pad
                try:
                    self._producer.produce(
                        TOPIC, value, partition=self.sent % self._partitions, on_delivery=self._on_delivery
                    )
                except BufferError:
                    break
                self.sent += 1
            self._producer.poll(0)
            time.sleep(0.005)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._producer.flush(10)
        del self._producer  # destroyed now, before its cluster goes away


# --- one round ------------------------------------------------------------------------------------------


@dataclass
class MemberLog:
    child: Child
    events: list[dict[str, Any]] = field(default_factory=list)
    data: dict[str, Any] | None = None
    closed: bool = False

    def drain(self, timeout: float = 0.0) -> None:
        """Take the lines the child printed so far (waiting up to ``timeout`` for the first)."""
        wait = timeout
        while True:
            try:
                line = self.child.lines.get(timeout=wait) if wait > 0 else self.child.lines.get_nowait()
            except queue.Empty:
                return
            wait = 0.0
            if line is None:
                self.closed = True
                return
            event = json.loads(line)
            if event["ev"] == "data":
                self.data = event
            else:
                self.events.append(event)

    def assignment_at(self, t: float) -> set[int]:
        owned: set[int] = set()
        for e in self.events:
            if e["t"] > t:
                break
            if e["ev"] == "assigned":
                owned |= set(e["parts"])
            elif e["ev"] in ("revoked", "lost"):
                owned -= set(e["parts"])
        return owned

    def change_times(self) -> list[float]:
        """When the assignment changed (callbacks with no partitions change nothing)."""
        return [e["t"] for e in self.events if e["ev"] in ("assigned", "revoked", "lost") and e["parts"]]

    def first_time(self, ev: str) -> float | None:
        return next((e["t"] for e in self.events if e["ev"] == ev), None)


@dataclass
class RoundResult:
    join_to_stable_s: float | None = None
    kept: int = 0
    moved: int = 0
    gap_ms: float | None = None
    baseline_gap_ms: float | None = None
    latency_ms: float | None = None
    baseline_latency_ms: float | None = None
    moved_pause_s: float | None = None
    overlap: bool = False
    idle: bool = False
    problem: str | None = None


def _wait_for(
    logs: list[MemberLog], done: Any, timeout: float, what: str
) -> None:  # done: () -> bool over the logs
    deadline = time.monotonic() + timeout
    while not done():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(what)
        for log in logs:
            log.drain(min(0.02, remaining))
            if log.closed and log.data is None:
                raise RuntimeError(f"a member exited early: {log.child.stderr[-2000:]}")


def run_round(
    setup: Setup,
    bootstrap: str,
    partitions: int,
    steady_s: float,
    settle_s: float,
    timeout_s: float,
    verbose: bool = False,
) -> RoundResult:
    everything = set(range(partitions))
    group = f"bench-rebalance-{setup.name}-{uuid.uuid4().hex[:8]}"
    member_args = ["--member", setup.name, "--bootstrap-servers", bootstrap, "--group", group]
    a = MemberLog(Child(member_args))
    b: MemberLog | None = None
    t_stable: float | None = None
    result = RoundResult()
    try:
        # A alone: everything assigned and every partition delivering.
        def a_ready() -> bool:
            return (
                a.assignment_at(float("inf")) == everything
                and {e["p"] for e in a.events if e["ev"] == "first"} >= everything
            )

        _wait_for([a], a_ready, timeout_s, "member A did not get and read every partition")
        time.sleep(steady_s)
        a.drain()
        b = MemberLog(Child(member_args))
        logs = [a, b]

        def stable_at() -> float | None:
            """The first time after t0 at which both assignments are disjoint and complete."""
            assert b is not None
            t0 = b.first_time("subscribe")
            if t0 is None:
                return None
            for t in sorted([*a.change_times(), *b.change_times()]):
                if t < t0:
                    continue
                owned_a, owned_b = a.assignment_at(t), b.assignment_at(t)
                if owned_b and not owned_a & owned_b and owned_a | owned_b == everything:
                    return t
            return None

        def idle_at() -> float | None:
            """When A took back every partition after revoking some: B is left with none."""
            assert b is not None
            t0 = b.first_time("subscribe")
            revoked = False
            for e in a.events:
                if t0 is None or e["t"] < t0:
                    continue
                revoked = revoked or (e["ev"] == "revoked" and bool(e["parts"]))
                if revoked and e["ev"] == "assigned" and a.assignment_at(e["t"]) == everything:
                    return float(e["t"])
            return None

        try:
            _wait_for(
                logs,
                lambda: stable_at() is not None or idle_at() is not None,
                timeout_s,
                "no stable assignment",
            )
        except TimeoutError:
            result.problem = f"not stable within {timeout_s:.0f} s"
        if stable_at() is None and (t_idle := idle_at()) is not None:
            t0 = b.first_time("subscribe") or t_idle
            result.problem = (
                f"B left with no partitions: A got all back {t_idle - t0:.1f} s after B subscribed"
            )
            result.idle = True
        t_stable = stable_at()
        if t_stable is not None:
            moved_parts = b.assignment_at(t_stable)

            def b_reading() -> bool:
                assert b is not None and t_stable is not None
                firsts = {e["p"] for e in b.events if e["ev"] == "first" and e["t"] >= t_stable}
                return firsts >= moved_parts

            try:
                _wait_for(logs, b_reading, timeout_s, "B did not read its partitions")
            except TimeoutError:
                result.problem = "B did not read every partition it was given"
            time.sleep(settle_s)  # anything moving after "stable" shows up here
        for log in logs:
            log.drain()
    finally:
        stopped = time.monotonic()  # the members' own leaving comes after this
        for log in [a, b]:
            if log is not None:
                log.child.send("stop")
        for log in [a, b]:
            if log is not None:
                log.child.stop()
                while not log.closed:
                    log.drain(1.0)
    assert b is not None
    if verbose:
        t_ref = b.first_time("subscribe") or 0.0
        for name, log in (("A", a), ("B", b)):
            for e in log.events:
                if e["ev"] in ("assigned", "revoked", "lost") and e["t"] >= t_ref - 1:
                    print(f"    {name} {e['t'] - t_ref:+7.3f} s {e['ev']} {e['parts']}", file=sys.stderr)
            if log.child.stderr.strip():
                print(f"    {name} stderr: {log.child.stderr.strip()[-500:]}", file=sys.stderr)
    if t_stable is None:
        return result
    if a.data is None or b.data is None:
        result.problem = "a member reported no data"
        return result
    t0 = b.first_time("subscribe")
    assert t0 is not None
    result.join_to_stable_s = t_stable - t0
    late = [t for t in a.change_times() + b.change_times() if t_stable < t < stopped]
    if late:
        result.problem = f"the assignment changed {late[0] - t_stable:.2f} s after it was stable"
    # partitions owned by both members at some moment (by their callbacks)
    for t in sorted(a.change_times() + b.change_times()):
        if a.assignment_at(t) & b.assignment_at(t):
            result.overlap = True
    before, after = a.assignment_at(t0), a.assignment_at(t_stable)
    kept, moved = before & after, before - after
    result.kept, result.moved = len(kept), len(moved)
    a_deliveries = {int(p): d for p, d in a.data["deliveries"].items()}
    b_deliveries = {int(p): d for p, d in b.data["deliveries"].items()}
    gaps, base_gaps, lat, base_lat = [], [], [], []
    for p in kept:
        times = [t for t, _ in a_deliveries.get(p, [])] + [a.data["end"]]
        for t1, t2 in itertools.pairwise(times):
            if t2 > t0 and t1 < t_stable:
                gaps.append(t2 - t1)
            elif t1 >= t0 - steady_s and t2 <= t0:
                base_gaps.append(t2 - t1)
        for t, latency in a_deliveries.get(p, []):
            if t0 <= t <= t_stable:
                lat.append(latency)
            elif t0 - steady_s <= t < t0:
                base_lat.append(latency)
    result.gap_ms = max(gaps, default=0.0) * 1000
    result.baseline_gap_ms = max(base_gaps, default=0.0) * 1000
    result.latency_ms = max(lat, default=0.0) * 1000
    result.baseline_latency_ms = max(base_lat, default=0.0) * 1000
    pauses = []
    for p in moved:
        last_a = max((t for t, _ in a_deliveries.get(p, []) if t < t_stable), default=None)
        first_b = min((t for t, _ in b_deliveries.get(p, []) if t >= t0), default=None)
        if last_a is not None and first_b is not None:
            pauses.append(first_b - last_a)
        else:
            result.problem = result.problem or f"partition {p} was not read by both members"
    result.moved_pause_s = max(pauses, default=None)
    return result


# --- the whole run --------------------------------------------------------------------------------------


def _fmt(values: list[float], scale: str) -> str:
    if not values:
        return "-"
    med, top = statistics.median(values), max(values)
    return f"{med:.2f} / {top:.2f}" if scale == "s" else f"{med:,.0f} / {top:,.0f}"


def run_setup(setup: Setup, args: argparse.Namespace) -> list[RoundResult]:
    from kaflux import AdminClient, NewTopic
    from kaflux.devbrokers.kinds import start_broker

    mock: MockServer | None = None
    broker = None
    producer: SteadyProducer | None = None
    results: list[RoundResult] = []
    try:
        if setup.broker == "mock":
            mock = MockServer(args.partitions, setup.heartbeat_ms if setup.protocol == "consumer" else 3000)
            bootstrap = mock.bootstrap_servers
        else:
            broker = start_broker(setup.broker)
            bootstrap = broker.bootstrap_servers
            with AdminClient({"bootstrap.servers": bootstrap}) as admin:
                admin.create_topics([NewTopic(TOPIC, args.partitions)], timeout=15)
        producer = SteadyProducer(bootstrap, args.partitions, args.rate)
        time.sleep(1.0)
        for round_no in range(args.rounds):
            r = run_round(
                setup, bootstrap, args.partitions, args.steady, args.settle, args.timeout, args.verbose
            )
            results.append(r)
            print(
                f"{setup.name} round {round_no + 1}: join->stable "
                f"{'-' if r.join_to_stable_s is None else f'{r.join_to_stable_s:.2f} s'}, "
                f"kept {r.kept} moved {r.moved}, kept gap {r.gap_ms or 0:.0f} ms "
                f"(baseline {r.baseline_gap_ms or 0:.0f} ms), kept latency {r.latency_ms or 0:.0f} ms "
                f"(baseline {r.baseline_latency_ms or 0:.0f} ms), moved pause "
                f"{'-' if r.moved_pause_s is None else f'{r.moved_pause_s:.2f} s'}"
                + (" OVERLAP" if r.overlap else "")
                + (f" PROBLEM: {r.problem}" if r.problem else ""),
                file=sys.stderr,
                flush=True,
            )
    finally:
        if producer is not None:
            producer.stop()
            if producer.errors:
                print(f"{setup.name}: {producer.errors} produce errors", file=sys.stderr)
        if mock is not None:
            mock.stop()
        if broker is not None:
            broker.cleanup()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds per setup (default 5)")
    parser.add_argument("--setups", default=DEFAULT_SETUPS, help=f"comma-separated, of: {', '.join(SETUPS)}")
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--rate", type=int, default=2000, help="records/s produced (default 2000)")
    parser.add_argument("--steady", type=float, default=3.0, help="seconds of A alone before B joins")
    parser.add_argument("--settle", type=float, default=1.0, help="seconds watched after stable")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds allowed per wait")
    parser.add_argument("--verbose", action="store_true", help="print each round's rebalance callbacks")
    parser.add_argument("--log-dir", help="write each member's kaflux debug log into this directory")
    parser.add_argument("--serve-mock", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--heartbeat-ms", type=int, default=3000, help=argparse.SUPPRESS)
    parser.add_argument("--member", help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap-servers", help=argparse.SUPPRESS)
    parser.add_argument("--group", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_mock:
        serve_mock(args.partitions, args.heartbeat_ms)
        return
    if args.member:
        run_member(SETUPS[args.member], args.bootstrap_servers, args.group)
        return
    names = [s.strip() for s in args.setups.split(",") if s.strip()]
    unknown = [n for n in names if n not in SETUPS]
    if unknown:
        parser.error(f"unknown setups {unknown}; choose from {list(SETUPS)}")
    if args.log_dir:
        os.makedirs(args.log_dir, exist_ok=True)
        os.environ["BENCH_REBALANCE_LOG_DIR"] = os.path.abspath(args.log_dir)
    started = time.monotonic()
    all_results = {name: run_setup(SETUPS[name], args) for name in names}
    print(
        f"\n{args.partitions} partitions, {args.rate:,} rec/s produced, {args.rounds} rounds per setup, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}, "
        f"{time.monotonic() - started:.0f} s in all. Median / max over the rounds.\n"
    )
    print(
        "| setup | rounds stable | join -> stable s | kept partitions: longest gap ms, rebalance | "
        "same, steady baseline | kept: worst latency ms, rebalance | same, baseline | "
        "moved partitions: pause s | kept / moved |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    notes: list[str] = []
    for name, results in all_results.items():
        ok = [r for r in results if r.join_to_stable_s is not None]

        def col(attr: str, rs: list[RoundResult] = ok) -> list[float]:
            return [v for r in rs if (v := getattr(r, attr)) is not None]

        kept_moved = sorted({f"{r.kept} / {r.moved}" for r in ok})
        print(
            f"| {SETUPS[name].label} | {len(ok)} of {len(results)} | {_fmt(col('join_to_stable_s'), 's')} | "
            f"{_fmt(col('gap_ms'), 'ms')} | {_fmt(col('baseline_gap_ms'), 'ms')} | "
            f"{_fmt(col('latency_ms'), 'ms')} | {_fmt(col('baseline_latency_ms'), 'ms')} | "
            f"{_fmt(col('moved_pause_s'), 's')} | {', '.join(kept_moved)} |"
        )
        for i, r in enumerate(results, 1):
            if r.problem or r.overlap:
                overlap = "a partition owned by both members at once; " if r.overlap else ""
                notes.append(f"{name} round {i}: {overlap}{r.problem or ''}")
    if notes:
        print()
        for note in notes:
            print(f"* {note}")


if __name__ == "__main__":
    main()
