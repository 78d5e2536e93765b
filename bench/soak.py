"""Soak run: group churn (classic, KIP-848 and share-group members) and broker kill/restart, then
totals.

    python bench/soak.py --duration 600 --seed 1

Two brokers run behind fault proxies (:func:`support.scenarios.start_proxied_broker`), and
librdkafka's mock cluster (3 brokers, the only one here with KIP-848 and share groups) in two child
processes (one with short share-group timings, :data:`SHARE_LOCK_S`), for the whole run. Rounds take
turns, in this order, until ``--duration`` seconds have passed (or ``--rounds`` rounds ran):

* churn, on Tansu: classic consumer-group members (child processes) join, leave and are SIGKILLed at
  random while a producer writes (:func:`~support.scenarios.run_group_churn`); the
  assignment strategy alternates between cooperative-sticky and range;
* kill, on noida-db: the broker is killed with SIGKILL mid-stream and restarted on the same port
  again and again while a producer writes and a classic member reads and commits
  (:func:`~support.scenarios.run_kill_restart`);
* KIP-848 churn, on the mock cluster: the same with ``group.protocol=consumer`` members, plus
  outages: the mock cluster's process is stopped (SIGSTOP) for 3-8 s and continued, so every broker
  hangs mid-stream and comes back (its storage is in memory: a real restart would lose the log).
  Rounds shorter than 40 s (the CI run) take a fixed outage, kill and join instead;
* share churn, on the mock cluster: ``kaflux.ShareConsumer`` members (KIP-932, explicit mode: each
  record ACCEPTed after a short processing hold) join, leave and are SIGKILLed while holding records,
  and the mock is stopped for 3-8 s, while a producer writes keyed records
  (:func:`~support.share_scenarios.run_share_churn`). A killed member's records must come back to
  another member with a higher delivery count once their acquisition lock expired and the
  victim's partitions moved (within :data:`SHARE_REDELIVERY_BOUND_S`); every
  acknowledged record must be accepted by some member; redeliveries are counted as duplicates
  (share groups are at-least-once). Rounds shorter than 40 s take a fixed kill, outage and join.

With ``--security SSL`` the Tansu and noida-db rounds run over TLS: each broker sits behind the TLS
rig (a TLS-record relay, stunnel, then the fault proxy; see :func:`~support.scenarios.start_proxied_broker`),
so every member, producer and probe speaks TLS, and SIGKILLs and outages break TLS connections. The
mock cluster rounds stay plaintext (its three brokers advertise their own ports).

Each round prints a summary line; the run ends with one ``TOTALS`` line (records produced,
acknowledged, consumed and lost, duplicates, rebalances, restarts, worst recovery time, share rounds and
the worst redelivery of a killed share member's records). "lost" counts
acknowledged records that kaflux failed to deliver; noida-db's own loss of the last acknowledged
records on SIGKILL is reported apart, as ``broker_lost``. The exit status is 1 when any acknowledged
record was lost, a partition was owned by two members at once, or any other guarantee failed (each
is printed), else 0.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

# The scenarios are test-support code (tests/support), not part of the kaflux package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from kaflux.devbrokers.mock_cluster import MockCluster

from support.certs import generate_certs
from support.scenarios import (
    ChurnReport,
    KillRestartReport,
    ProxiedBroker,
    run_group_churn,
    run_kill_restart,
    start_proxied_broker,
)
from support.share_mock import ShareMockCluster
from support.share_scenarios import ShareChurnReport, run_share_churn

#: the mock cluster creates a topic, with this many partitions, when something produces to it
MOCK_PARTITIONS = 4


#: the share rounds' acquisition lock: a SIGKILLed member's records are released once it expires (the
#: mock's timer checks locks every second), before the member's 6 s share session ends
SHARE_LOCK_S = 4.0
SHARE_SESSION_S = 6.0
#: how long after a kill the victim's records may take to reach another member: the mock gives each
#: partition to one member, so they are fetched again once the victim's session ended and its
#: partitions moved (about 7 s: the session, the 1 s heartbeat), plus room for a loaded machine
SHARE_REDELIVERY_BOUND_S = SHARE_SESSION_S + 9.0


def share_mock_cluster() -> ShareMockCluster:
    """The share rounds' mock (its own process): short sessions and locks, and a new share group
    starts at the partitions' beginning (so no record is skipped before a member's first fetch)."""
    return ShareMockCluster(
        session_timeout_ms=int(SHARE_SESSION_S * 1000),
        heartbeat_interval_ms=1000,
        record_lock_duration_ms=int(SHARE_LOCK_S * 1000),
        auto_offset_reset="earliest",
    )


class MockTarget:
    """The mock cluster as a churn target."""

    def __init__(self, cluster: MockCluster | ShareMockCluster, kind: str = "mock cluster (KIP-848)") -> None:
        self.cluster = cluster
        self.kind = kind

    @property
    def bootstrap_servers(self) -> str:
        return self.cluster.bootstrap_servers

    def create(self, bootstrap: str, topic: str, partitions: int) -> None:
        """The mock has no CreateTopics: producing creates the topic (MOCK_PARTITIONS partitions)."""
        from confluent_kafka import Producer as CKProducer

        assert partitions == MOCK_PARTITIONS
        producer = CKProducer({"bootstrap.servers": bootstrap})
        producer.produce(topic, b"topic-created")
        if producer.flush(30) != 0:
            raise RuntimeError(f"could not create {topic} on the mock cluster")

    def outage(self, rng: random.Random) -> str:
        """Stop every broker (the mock's process, by its PID) for 3-8 s, then let it go on."""
        pid = self.cluster.pid
        if pid is None:
            raise RuntimeError("the mock cluster is not running")
        seconds = rng.uniform(3.0, 8.0)
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(seconds)
        finally:
            os.kill(pid, signal.SIGCONT)
        return f"outage:{seconds:.1f}s"


@dataclass
class Totals:
    rounds: int = 0
    produced: int = 0
    acknowledged: int = 0
    consumed: int = 0
    lost: int = 0
    broker_lost: int = 0
    duplicates: int = 0
    rebalances: int = 0
    restarts: int = 0
    member_kills: int = 0
    outages: int = 0
    kip848_rounds: int = 0
    share_rounds: int = 0
    overlaps: int = 0
    worst_recovery_s: float = 0.0
    worst_convergence_s: float = 0.0
    worst_redelivery_s: float = 0.0
    problems: list[str] = field(default_factory=list)

    def add_churn(self, r: ChurnReport) -> None:
        self.rounds += 1
        self.produced += r.produced
        self.acknowledged += r.acknowledged
        self.consumed += r.consumed
        self.lost += len(r.lost)
        self.duplicates += r.duplicates_uncommitted + len(r.duplicates_unexplained)
        self.rebalances += r.rebalances
        self.member_kills += sum(1 for a in r.actions if a.startswith("kill"))
        self.outages += sum(1 for a in r.actions if a.startswith("outage"))
        self.overlaps += len(r.overlaps)
        self.worst_convergence_s = max(self.worst_convergence_s, *r.convergence_s, 0.0)
        self.problems += [f"churn round {self.rounds}: {p}" for p in r.problems()]

    def add_kill(self, r: KillRestartReport) -> None:
        self.rounds += 1
        self.produced += r.produced
        self.acknowledged += r.acknowledged
        self.consumed += r.consumed
        self.lost += len(r.client_lost)
        self.broker_lost += r.broker_lost
        self.duplicates += (
            r.duplicates_uncommitted + r.duplicates_broker_rewind + len(r.duplicates_unexplained)
        )
        self.restarts += len(r.restarts)
        self.worst_recovery_s = max(self.worst_recovery_s, r.worst_recovery_s)
        self.problems += [f"kill round {self.rounds}: {p}" for p in r.problems()]

    def add_share(self, r: ShareChurnReport) -> None:
        self.rounds += 1
        self.share_rounds += 1
        self.produced += r.produced
        self.acknowledged += r.acknowledged
        self.consumed += r.consumed
        self.lost += len(r.lost)
        self.duplicates += r.redeliveries
        self.member_kills += sum(1 for a in r.actions if a.startswith("kill"))
        self.outages += sum(1 for a in r.actions if a.startswith("outage"))
        self.worst_redelivery_s = max(self.worst_redelivery_s, *r.redelivery_s, 0.0)
        self.problems += [f"share round {self.rounds}: {p}" for p in r.problems()]

    def line(self, elapsed: float) -> str:
        return (
            f"TOTALS elapsed_s={elapsed:.1f} rounds={self.rounds} produced={self.produced} "
            f"acknowledged={self.acknowledged} consumed={self.consumed} lost={self.lost} "
            f"broker_lost={self.broker_lost} duplicates={self.duplicates} rebalances={self.rebalances} "
            f"restarts={self.restarts} member_kills={self.member_kills} outages={self.outages} "
            f"kip848_rounds={self.kip848_rounds} share_rounds={self.share_rounds} overlaps={self.overlaps} "
            f"worst_recovery_s={self.worst_recovery_s:.2f} "
            f"worst_convergence_s={self.worst_convergence_s:.2f} "
            f"worst_redelivery_s={self.worst_redelivery_s:.2f} problems={len(self.problems)}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=600.0, help="seconds to run (default 600)")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: a random one)")
    parser.add_argument(
        "--round-seconds",
        type=float,
        default=None,
        help="length of one round (default: a quarter of the duration, 30 to 120 s)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="stop after this many rounds, even before --duration passed (default: no limit)",
    )
    parser.add_argument("--verbose", action="store_true", help="print every churn action and restart")
    parser.add_argument(
        "--security",
        choices=("PLAINTEXT", "SSL"),
        default="PLAINTEXT",
        help="SSL: the Tansu and noida-db rounds run over TLS (relay -> stunnel -> proxy -> broker)",
    )
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    rng = random.Random(seed)
    round_s = args.round_seconds or min(120.0, max(30.0, args.duration / 4))
    print(
        f"soak: duration {args.duration:.0f} s, rounds of {round_s:.0f} s, seed {seed}, {args.security}",
        flush=True,
    )

    def log(message: str) -> None:
        if args.verbose:
            print(f"  {message}", flush=True)

    started = time.monotonic()
    totals = Totals()
    tansu: ProxiedBroker | None = None
    noida: ProxiedBroker | None = None
    mock: MockCluster | None = None
    share_mock: ShareMockCluster | None = None
    try:
        certs = (
            generate_certs(tempfile.mkdtemp(prefix="kaflux-soak-certs-"))
            if args.security != "PLAINTEXT"
            else None
        )
        tansu = start_proxied_broker("tansu", security=args.security, certs=certs)
        noida = start_proxied_broker("noida", security=args.security, certs=certs)
        mock = MockCluster(brokers=3).start()
        target = MockTarget(mock)
        share_mock = share_mock_cluster().start()
        share_target = MockTarget(share_mock, "mock cluster (share groups)")
        strategies = ["cooperative-sticky", "range"]
        while True:
            remaining = args.duration - (time.monotonic() - started)
            if remaining <= 0 or (args.rounds is not None and totals.rounds >= args.rounds):
                break
            if totals.rounds % 4 == 0:
                strategy = strategies[(totals.rounds // 4) % 2]
                churn = run_group_churn(
                    tansu, duration=min(round_s, remaining), rng=rng, strategy=strategy, log=log
                )
                totals.add_churn(churn)
                print(f"[{time.monotonic() - started:6.1f} s] {churn.summary()} ({strategy})", flush=True)
            elif totals.rounds % 4 == 3:
                # A short round (the CI run) takes a fixed kill, outage, join: each fault once.
                fixed = ["kill", "outage", "join"] if round_s < 40 else None
                share = run_share_churn(
                    share_target,
                    create=share_target.create,
                    actions=fixed,
                    duration=None if fixed else min(round_s, remaining),
                    rng=rng,
                    partitions=MOCK_PARTITIONS,
                    outage=lambda: share_target.outage(rng),
                    redelivery_bound_s=SHARE_REDELIVERY_BOUND_S,
                    log=log,
                )
                totals.add_share(share)
                print(f"[{time.monotonic() - started:6.1f} s] {share.summary()}", flush=True)
            elif totals.rounds % 4 == 2:
                # A short round (the CI run) takes a fixed outage, kill, join: each fault once.
                fixed = ["outage", "kill", "join"] if round_s < 40 else None
                churn = run_group_churn(
                    target,
                    actions=fixed,
                    duration=None if fixed else min(round_s, remaining),
                    rng=rng,
                    partitions=MOCK_PARTITIONS,
                    group_protocol="consumer",
                    create=target.create,
                    outage=lambda: target.outage(rng),
                    converge_bound_s=60.0,
                    log=log,
                )
                totals.add_churn(churn)
                totals.kip848_rounds += 1
                print(
                    f"[{time.monotonic() - started:6.1f} s] {churn.summary()} (group.protocol=consumer)",
                    flush=True,
                )
            else:
                kill = run_kill_restart(noida, duration=min(round_s, remaining), rng=rng, log=log)
                totals.add_kill(kill)
                print(f"[{time.monotonic() - started:6.1f} s] {kill.summary()}", flush=True)
    finally:
        for pb in (tansu, noida):
            if pb is not None:
                pb.close()
        if mock is not None:
            mock.stop()
        if share_mock is not None:
            share_mock.stop()
    for problem in totals.problems:
        print(f"PROBLEM {problem}")
    print(totals.line(time.monotonic() - started), flush=True)
    failed = totals.lost > 0 or totals.overlaps > 0 or bool(totals.problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
