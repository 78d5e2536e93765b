"""Produce at full speed while the fault proxy cuts Produce connections, many times in a row.

    python bench/produce_cuts.py --runs 20 --records 50000 --cuts 15

One noida-db broker behind :class:`support.fault_proxy.FaultProxy` for the whole run. Each
run: a new 3-partition topic, an idempotent kaflux Producer (the defaults, ``linger.ms=5``) sends
``--records`` records as fast as it can, round-robin over the partitions, then ``flush(60)``; while
it sends and flushes, a thread arms one cut of a Produce exchange every ``--every`` seconds until
``--cuts`` have fired, rotating over ``--variants`` (by default cut-after-request, cut-mid-request,
cut-before-response and cut-mid-response: the cuts that make the producer retry a batch the
broker may already have written). The topic is then read back with confluent-kafka (an
independent client) and compared with what was sent, partition by partition.

Prints one line per run and a ``TOTALS`` line: flush timeouts, failed futures, records lost,
duplicated and out of order, cuts fired, and the producer's CPU seconds. Exit status 1 when any
run timed out, lost, duplicated or reordered a record.
"""

from __future__ import annotations

import argparse
import resource
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

# The scenarios are test-support code (tests/support), not part of the kaflux package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from kaflux import Producer
from kaflux.errors import KafkaError
from kaflux.protocol.api import ApiKey

from support.scenarios import ProxiedBroker, create_topic, start_proxied_broker, unique_name

PARTITIONS = 3
VARIANTS = ("cut_after_request", "cut_mid_request", "cut_before_response", "cut_mid_response")


@dataclass
class RunResult:
    seconds: float
    flush_timed_out: bool
    failed: int
    lost: int
    duplicated: int
    reordered: int
    cuts: int
    cpu_s: float


def _cutter(
    pb: ProxiedBroker,
    cuts: int,
    every: float,
    stop: threading.Event,
    fired: list[int],
    variants: tuple[str, ...] = VARIANTS,
) -> None:
    done = 0
    index = 0
    while done < cuts and not stop.is_set():
        variant = variants[index % len(variants)]
        index += 1
        fault = getattr(pb.proxy, variant)(ApiKey.PRODUCE, times=1)
        while not stop.is_set() and not fault.wait(1, timeout=0.05):
            pass
        if fault.fired:
            done += 1
            fired[0] = done
        else:
            fault.cancel()
        stop.wait(every)


def _read_back(bootstrap: str, topic: str, expected: int) -> dict[int, list[bytes]]:
    from confluent_kafka import Consumer as CKConsumer
    from confluent_kafka import TopicPartition as CKTopicPartition

    consumer = CKConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique_name("readback"),
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        }
    )
    out: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    try:
        consumer.assign([CKTopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        eof: set[int] = set()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                if len(eof) == PARTITIONS and sum(map(len, out.values())) >= expected:
                    break
                continue
            if message.error():
                if message.error().code() == -191:  # _PARTITION_EOF
                    eof.add(message.partition())
                    if len(eof) == PARTITIONS and sum(map(len, out.values())) >= expected:
                        break
                continue
            eof.discard(message.partition())
            out[message.partition()].append(message.value())
    finally:
        consumer.close()
    return out


def run_once(
    pb: ProxiedBroker, records: int, cuts: int, every: float, variants: tuple[str, ...] = VARIANTS
) -> RunResult:
    topic = unique_name("kx-cuts")
    create_topic(pb.bootstrap_servers, topic, PARTITIONS)
    sent: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    stop = threading.Event()
    fired = [0]
    producer = Producer(
        {"bootstrap.servers": pb.bootstrap_servers, "linger.ms": 5, "request.timeout.ms": 5000}
    )
    failed = 0
    timed_out = False
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    start = time.monotonic()
    cutter = threading.Thread(target=_cutter, args=(pb, cuts, every, stop, fired, variants), daemon=True)
    try:
        producer.send(topic, b"warm-up", partition=0).result(30)
        sent[0].append(b"warm-up")
        cutter.start()
        futures = []
        for i in range(records):
            value = b"%07d-" % i + b"x" * 40
            futures.append(producer.send(topic, value, partition=i % PARTITIONS))
            sent[i % PARTITIONS].append(value)
        try:
            producer.flush(60)
        except KafkaError:  # a flush timeout is what this run measures
            timed_out = True
        failed = sum(1 for f in futures if not f.done() or f.exception(0) is not None)
    finally:
        stop.set()
        cutter.join(5)
        producer.close(10)
        pb.proxy.reset()
    seconds = time.monotonic() - start
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)
    got = _read_back(pb.bootstrap_servers, topic, sum(map(len, sent.values())))
    lost = duplicated = reordered = 0
    for p in range(PARTITIONS):
        want, have = sent[p], got[p]
        want_set, have_set = set(want), set(have)
        lost += len(want_set - have_set)
        duplicated += len(have) - len(have_set)
        if not lost and not duplicated and have != want:
            reordered += sum(1 for a, b in zip(have, want, strict=False) if a != b)
    return RunResult(seconds, timed_out, failed, lost, duplicated, reordered, fired[0], cpu)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--cuts", type=int, default=15)
    parser.add_argument("--every", type=float, default=0.05, help="seconds between arming cuts")
    parser.add_argument(
        "--variants", default=",".join(VARIANTS), help="comma-separated FaultProxy cuts to rotate over"
    )
    args = parser.parse_args()
    pb = start_proxied_broker("noida")
    results: list[RunResult] = []
    try:
        for run in range(1, args.runs + 1):
            r = run_once(pb, args.records, args.cuts, args.every, tuple(args.variants.split(",")))
            results.append(r)
            print(
                f"run {run:2d}: {r.seconds:5.1f} s, cuts {r.cuts:2d}, flush timeout {r.flush_timed_out}, "
                f"failed {r.failed}, lost {r.lost}, duplicated {r.duplicated}, reordered {r.reordered}, "
                f"producer-process CPU {r.cpu_s:.1f} s ({r.cpu_s / args.records * 1e6:.1f} us/record)",
                flush=True,
            )
    finally:
        pb.close()
    bad = [r for r in results if r.flush_timed_out or r.failed or r.lost or r.duplicated or r.reordered]
    print(
        f"TOTALS runs {len(results)}, records/run {args.records}, cuts fired {sum(r.cuts for r in results)}, "
        f"flush timeouts {sum(r.flush_timed_out for r in results)}, failed {sum(r.failed for r in results)}, "
        f"lost {sum(r.lost for r in results)}, duplicated {sum(r.duplicated for r in results)}, "
        f"reordered {sum(r.reordered for r in results)}, bad runs {len(bad)}, "
        f"median run {sorted(r.seconds for r in results)[len(results) // 2]:.1f} s"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
