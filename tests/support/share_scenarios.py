"""Share-group (KIP-932) churn on librdkafka's mock cluster, for ``bench/soak.py``. [test: the
calling thread; :class:`~support.scenarios.KeyedProducer` adds a sending thread; members are child
processes (:mod:`support.share_member`)]

:func:`run_share_churn`: ``kaflux.ShareConsumer`` members (explicit mode: each record is ACCEPTed
after a short "processing" hold, then committed) join, leave and are SIGKILLed while a producer
writes keyed records, and the brokers are stopped (SIGSTOP) and continued. Checks, at the end:

* no loss: every record the producer got acknowledged was delivered to some member and its ACCEPT
  confirmed by the broker (the acknowledgement commit callback without error);
* a member SIGKILLed while holding records (acquired, unacknowledged) does not keep them: each comes
  back to another member, with a higher delivery count;
* no two deliveries of a record carry the same delivery count (each delivery is an acquisition,
  which counts up; poll() may return a copy fetched before an outage after another member got the
  record again with the next count, so the counts are not checked in poll order);
* a delivered record is the one produced there (same key at that partition and offset).

Records delivered more than once are counted (``redeliveries``): share groups are at-least-once.
"""

from __future__ import annotations

import random
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from support.scenarios import WAIT_S, ChurnSchedule, ChurnTarget, KeyedProducer, unique_name, wait_until
from support.share_member import Delivery, ShareMemberProcess

__all__ = ["ShareChurnReport", "run_share_churn"]

Log = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


@dataclass
class ShareChurnReport:
    broker: str
    topic: str
    actions: list[str] = field(default_factory=list)
    produced: int = 0
    acknowledged: int = 0
    send_failures: int = 0
    #: records members' poll() returned, redeliveries included
    consumed: int = 0
    #: records whose ACCEPT the broker confirmed
    accepted: int = 0
    lost: list[str] = field(default_factory=list)
    #: records a member ACCEPTed and was SIGKILLed before the broker's answer came, or whose ACCEPT the
    #: broker's answer did not mention (AcknowledgementOutcomeUnknownError), and that no member got
    #: again: whether the broker took them is unknown (most likely it did); not counted as lost
    in_doubt: list[str] = field(default_factory=list)
    #: deliveries of a record after its first
    redeliveries: int = 0
    #: records whose ACCEPT the broker confirmed more than once (reported, not a failure)
    accepted_twice: int = 0
    #: records a SIGKILLed member held (acquired, unacknowledged) when it died
    held_by_killed: int = 0
    #: from a kill to the last of the victim's records delivered to another member
    redelivery_s: list[float] = field(default_factory=list)
    other_problems: list[str] = field(default_factory=list)
    warnings: int = 0
    elapsed_s: float = 0.0

    def problems(self) -> list[str]:
        found = list(self.other_problems)
        if self.lost:
            found.append(f"{len(self.lost)} acknowledged records were never accepted, e.g. {self.lost[:5]}")
        return found

    def summary(self) -> str:
        worst = max(self.redelivery_s, default=0.0)
        return (
            f"share churn on {self.broker}: {' '.join(self.actions)} in {self.elapsed_s:.1f} s; produced "
            f"{self.produced}, acked {self.acknowledged}, consumed {self.consumed}, accepted "
            f"{self.accepted}, lost {len(self.lost)} (in doubt {len(self.in_doubt)}); "
            f"redeliveries {self.redeliveries} "
            f"({self.held_by_killed} held by killed members, worst back in {worst:.2f} s); "
            f"accepted twice {self.accepted_twice}"
        )


@dataclass
class _Kill:
    member: str
    at: float
    #: (partition, offset) delivered to the member and not yet acknowledged when it died
    held: set[tuple[int, int]]


def run_share_churn(
    target: ChurnTarget,
    *,
    create: Callable[[str, str, int], None],
    actions: list[str] | None = None,
    duration: float | None = None,
    rng: random.Random | None = None,
    partitions: int = 4,
    initial_members: int = 3,
    max_members: int = 4,
    rate: float = 300.0,
    outage: Callable[[], str] | None = None,
    redelivery_bound_s: float = 45.0,
    log: Log = _quiet,
) -> ShareChurnReport:
    """Share members (child processes) join, leave (close) and are SIGKILLed while a producer
    writes; ``outage()`` takes the brokers away for a while.

    ``actions`` is a list of "join", "leave", "kill" and "outage"; with ``duration`` instead,
    actions are drawn from ``rng`` until that many seconds passed. A kill waits for the victim to
    report a new batch and kills it while it holds that batch unacknowledged; the next action waits
    until the batch came back to another member (up to ``redelivery_bound_s``: the broker's
    acquisition lock, or its share session timeout, bounds it). The share group must start at the
    partitions' beginning (the mock's ``auto_offset_reset="earliest"``), so that no record produced
    before a member's first fetch is skipped.
    """
    if actions is None and duration is None:
        raise ValueError("give actions or duration")
    rng = rng or random.Random()
    started = time.monotonic()
    topic = unique_name("kx-share-churn")
    group = unique_name("kx-share-group")
    report = ShareChurnReport(target.kind, topic)
    create(target.bootstrap_servers, topic, partitions)
    config: dict[str, object] = {"bootstrap.servers": target.bootstrap_servers, "group.id": group}
    everyone: list[ShareMemberProcess] = []
    live: list[ShareMemberProcess] = []
    kills: list[_Kill] = []
    serial = 0

    def spawn() -> ShareMemberProcess:
        nonlocal serial
        member = ShareMemberProcess(f"s{serial}", config, topic, hold_s=0.3)
        serial += 1
        everyone.append(member)
        live.append(member)
        return member

    def join(members: list[ShareMemberProcess], what: str) -> None:
        if not wait_until(lambda: all(m.joined() or not m.alive for m in members), WAIT_S, interval=0.05):
            states = "; ".join(f"{m.name}={m.state}{sorted(m.assignment)}" for m in members)
            report.other_problems.append(f"after {what}: members not STABLE with partitions ({states})")

    def kill() -> str:
        holders = [m for m in live if m.assignment] or live
        victim = rng.choice(holders)
        mark = victim.delivery_count()
        # Kill it as it reports a new batch: it holds that batch for its processing time.
        victim.wait(lambda m: m.delivery_count() > mark or not m.alive, 10.0)
        at = victim.kill()
        live.remove(victim)
        deliveries, accepting, _ = victim.snapshot()
        held = {(d.partition, d.offset) for d in deliveries} - accepting
        kills.append(_Kill(victim.name, at, held))
        report.held_by_killed += len(held)

        def back() -> bool:
            again = {(d.partition, d.offset) for m in everyone for d in m.snapshot()[0] if d.at > at}
            return held <= again

        if wait_until(back, redelivery_bound_s, interval=0.1):
            report.redelivery_s.append(time.monotonic() - at)
        else:
            report.other_problems.append(
                f"kill:{victim.name}: {len(held)} records it held did not come back within "
                f"{redelivery_bound_s} s"
            )
        return f"kill:{victim.name}"

    schedule = ChurnSchedule(
        actions, duration, rng, started=started, outage=outage is not None, max_members=max_members
    )
    producer: KeyedProducer | None = None
    try:
        for _ in range(initial_members):
            spawn()
        join(live, "start")
        log("share churn: joined")
        producer = KeyedProducer(target.bootstrap_servers, topic, rate=rate).start()
        while (action := schedule.next(len(live))) is not None:
            # Let the members read for a moment before each fault.
            mark = sum(m.delivery_count() for m in live)
            wait_until(lambda: sum(m.delivery_count() for m in live) > mark + 50, 10.0)  # noqa: B023
            if action == "join":
                join([spawn()], "join")
                action = f"join:{everyone[-1].name}"
            elif action == "leave":
                victim = rng.choice(live)
                live.remove(victim)
                try:
                    victim.close()
                except TimeoutError as exc:
                    report.other_problems.append(str(exc))
                action = f"leave:{victim.name}"
            elif action == "kill":
                action = kill()
            elif action == "outage" and outage is not None:
                action = outage()
                join(live, action)
            else:
                raise ValueError(f"unknown share churn action {action!r}")
            report.actions.append(action)
            log(f"share churn: {action}")
        report.other_problems.extend(producer.stop())
        _, acked, _ = producer.snapshot()
        wanted = {(a.partition, a.offset) for a in acked.values()}

        def missing() -> set[tuple[int, int]]:
            return wanted - _accepted(everyone)

        wait_until(lambda: not missing(), WAIT_S, interval=0.2)
        log(f"share churn: drained, {len(missing())} missing")
        closing = time.monotonic()
        _close_all(live, report)
        log(f"share churn: closed in {time.monotonic() - closing:.1f} s: {[m.close_s for m in live]}")
    finally:
        if producer is not None and not producer.stopped:
            producer.stop(5.0)
        for m in everyone:
            m.cleanup()
        report.elapsed_s = time.monotonic() - started
    if producer is not None:
        _analyse(report, producer, everyone, kills)
    return report


def _close_all(members: list[ShareMemberProcess], report: ShareChurnReport) -> None:
    """Close members concurrently (each close leaves the group and waits for the broker)."""

    def close(m: ShareMemberProcess) -> None:
        try:
            m.close()
        except TimeoutError as exc:
            report.other_problems.append(str(exc))

    threads = [threading.Thread(target=close, args=(m,), daemon=True) for m in members]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S)


def _accepted(members: list[ShareMemberProcess]) -> set[tuple[int, int]]:
    return {
        (p, o)
        for m in members
        for a in m.snapshot()[2]
        if a.error is None
        for p, offsets in a.offsets.items()
        for o in offsets
    }


def _analyse(
    report: ShareChurnReport, producer: KeyedProducer, members: list[ShareMemberProcess], kills: list[_Kill]
) -> None:
    sent_at, acked, failed = producer.snapshot()
    report.produced = len(sent_at)
    report.acknowledged = len(acked)
    report.send_failures = len(failed)
    deliveries: list[Delivery] = sorted(
        (d for m in members for d in m.snapshot()[0]), key=lambda d: (d.at, d.count)
    )
    report.consumed = len(deliveries)
    report.warnings = sum(len(m.warnings) for m in members)
    for m in members:
        if m.fatal:
            report.other_problems.append(f"{m.name} failed: {m.fatal} {m.stderr_tail()}")
        if m.bad_lines:
            report.other_problems.append(f"{m.name} wrote bad report lines: {m.bad_lines[:3]}")
    accept_counts: dict[tuple[int, int], int] = defaultdict(int)
    for m in members:
        for a in m.snapshot()[2]:
            if a.error is None:
                for p, offsets in a.offsets.items():
                    for o in offsets:
                        accept_counts[(p, o)] += 1
    report.accepted = len(accept_counts)
    report.accepted_twice = sum(1 for n in accept_counts.values() if n > 1)
    produced_at = {(a.partition, a.offset): key for key, a in acked.items()}
    doubtful: set[tuple[int, int]] = set()
    for k in kills:
        member = next(m for m in members if m.name == k.member)
        _, accepting, acked_by_it = member.snapshot()
        answered = {(p, o) for a in acked_by_it for p, offsets in a.offsets.items() for o in offsets}
        doubtful |= accepting - answered
    for m in members:  # the broker answered without a word on them
        for a in m.snapshot()[2]:
            if a.error is not None and a.error.startswith("AcknowledgementOutcomeUnknownError"):
                doubtful |= {(p, o) for p, offsets in a.offsets.items() for o in offsets}
    unaccepted = sorted(k for k, a in acked.items() if (a.partition, a.offset) not in accept_counts)
    report.in_doubt = [k for k in unaccepted if (acked[k].partition, acked[k].offset) in doubtful]
    report.lost = [k for k in unaccepted if (acked[k].partition, acked[k].offset) not in doubtful]
    by_record: dict[tuple[int, int], list[Delivery]] = defaultdict(list)
    for d in deliveries:
        by_record[(d.partition, d.offset)].append(d)
    wrong_key: list[str] = []
    same_count: list[str] = []
    for (p, o), ds in by_record.items():
        report.redeliveries += len(ds) - 1
        key = produced_at.get((p, o))
        if key is not None and any(d.key != key for d in ds):
            wrong_key.append(f"p{p}@{o}: produced {key}, delivered {sorted({d.key for d in ds})}")
        # Each delivery is an acquisition, which counts up: two with one count are one acquisition
        # handed out twice. (Ordered by when poll() returned them, the counts need not rise: a copy
        # fetched before an outage may reach the application after the broker, its lock expired,
        # gave the record to another member with the next count.)
        counts = [d.count for d in ds]
        if len(set(counts)) != len(counts):
            same_count.append(
                f"p{p}@{o}: " + ", ".join(f"{d.member} count {d.count} at {d.at:.3f}" for d in ds)
            )
    if wrong_key:
        report.other_problems.append(f"records delivered with another key than produced: {wrong_key[:5]}")
    if same_count:
        report.other_problems.append(
            f"{len(same_count)} records delivered twice with one delivery count: {same_count[:5]}"
        )
    for k in kills:
        for p, o in k.held:
            earlier = max((d.count for d in by_record[(p, o)] if d.member == k.member), default=0)
            later = [d.count for d in by_record[(p, o)] if d.at > k.at and d.member != k.member]
            if later and max(later) <= earlier:
                report.other_problems.append(
                    f"p{p}@{o} held by the killed {k.member} (count {earlier}) came back with counts "
                    f"{sorted(later)}, none above"
                )
