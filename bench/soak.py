"""Soak run: group churn and broker kill/restart, alternating, for a set time, then totals.

    python bench/soak.py --duration 600 --seed 1

Two brokers run behind fault proxies (:func:`support.scenarios.start_proxied_broker`) for the
whole run. Rounds alternate until ``--duration`` seconds have passed:

* churn, on Tansu: consumer-group members (child processes) join, leave and are SIGKILLed at random
  while a producer writes (:func:`~support.scenarios.run_group_churn`); the assignment
  strategy alternates between cooperative-sticky and range;
* kill, on noida-db: the broker is killed with SIGKILL mid-stream and restarted on the same port
  again and again while a producer writes and a member reads and commits
  (:func:`~support.scenarios.run_kill_restart`).

Each round prints a summary line; the run ends with one ``TOTALS`` line (records produced,
acknowledged, consumed and lost, duplicates, rebalances, restarts, worst recovery time). "lost" counts
acknowledged records that kaflux failed to deliver; noida-db's own loss of the last acknowledged
records on SIGKILL is reported apart, as ``broker_lost``. The exit status is 1 when any acknowledged
record was lost, a partition was owned by two members at once, or any other guarantee failed (each
is printed), else 0.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

# The scenarios are test-support code (tests/support), not part of the kaflux package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.scenarios import (
    ChurnReport,
    KillRestartReport,
    ProxiedBroker,
    run_group_churn,
    run_kill_restart,
    start_proxied_broker,
)


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
    overlaps: int = 0
    worst_recovery_s: float = 0.0
    worst_convergence_s: float = 0.0
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

    def line(self, elapsed: float) -> str:
        return (
            f"TOTALS elapsed_s={elapsed:.1f} rounds={self.rounds} produced={self.produced} "
            f"acknowledged={self.acknowledged} consumed={self.consumed} lost={self.lost} "
            f"broker_lost={self.broker_lost} duplicates={self.duplicates} rebalances={self.rebalances} "
            f"restarts={self.restarts} member_kills={self.member_kills} overlaps={self.overlaps} "
            f"worst_recovery_s={self.worst_recovery_s:.2f} "
            f"worst_convergence_s={self.worst_convergence_s:.2f} problems={len(self.problems)}"
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
    parser.add_argument("--verbose", action="store_true", help="print every churn action and restart")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    rng = random.Random(seed)
    round_s = args.round_seconds or min(120.0, max(30.0, args.duration / 4))
    print(f"soak: duration {args.duration:.0f} s, rounds of {round_s:.0f} s, seed {seed}", flush=True)

    def log(message: str) -> None:
        if args.verbose:
            print(f"  {message}", flush=True)

    started = time.monotonic()
    totals = Totals()
    tansu: ProxiedBroker | None = None
    noida: ProxiedBroker | None = None
    try:
        tansu = start_proxied_broker("tansu")
        noida = start_proxied_broker("noida")
        strategies = ["cooperative-sticky", "range"]
        while True:
            remaining = args.duration - (time.monotonic() - started)
            if remaining <= 0:
                break
            if totals.rounds % 2 == 0:
                strategy = strategies[(totals.rounds // 2) % 2]
                churn = run_group_churn(
                    tansu, duration=min(round_s, remaining), rng=rng, strategy=strategy, log=log
                )
                totals.add_churn(churn)
                print(f"[{time.monotonic() - started:6.1f} s] {churn.summary()} ({strategy})", flush=True)
            else:
                kill = run_kill_restart(noida, duration=min(round_s, remaining), rng=rng, log=log)
                totals.add_kill(kill)
                print(f"[{time.monotonic() - started:6.1f} s] {kill.summary()}", flush=True)
    finally:
        for pb in (tansu, noida):
            if pb is not None:
                pb.close()
    for problem in totals.problems:
        print(f"PROBLEM {problem}")
    print(totals.line(time.monotonic() - started), flush=True)
    failed = totals.lost > 0 or totals.overlaps > 0 or bool(totals.problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
