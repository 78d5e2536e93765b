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

Over TLS (issue 33), ``--security SSL`` (or ``SASL_SSL``, on Tansu) puts a TLS-record relay and
stunnel in front of the proxy (:func:`support.scenarios.start_proxied_broker`), and ``--mode rst``
resets every open TLS connection (RST) ``--cuts`` times spread evenly over ``--over`` seconds,
from the first record on, so connections die mid-write, mid-read and mid-handshake::

    python bench/produce_cuts.py --security SSL --mode rst --runs 20 --records 100000 \
        --value-bytes 400 --cuts 40 --over 2

``--client confluent`` runs the same with confluent-kafka's idempotent producer, for comparison.
After ``flush()`` each run sends one more record and requires it delivered.

Prints one line per run and a ``TOTALS`` line: flush timeouts, failed futures, records lost,
duplicated and out of order, cuts fired, and the producer's CPU seconds. Exit status 1 when any
run timed out, lost, duplicated or reordered a record, or the record sent afterwards failed.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

# The scenarios are test-support code (tests/support), not part of the kaflux package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from kaflux import Producer
from kaflux.errors import KafkaError
from kaflux.protocol.api import ApiKey

from support.certs import generate_certs
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
    after_failed: bool = False
    close_s: float = 0.0


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


def _resetter(pb: ProxiedBroker, cuts: int, over: float, stop: threading.Event, fired: list[int]) -> None:
    """Reset every open TLS connection at the relay ``cuts`` times, evenly over ``over`` seconds."""
    assert pb.relay is not None
    start = time.monotonic()
    for index in range(cuts):
        if stop.wait(max(0.0, start + index * over / cuts - time.monotonic())):
            return
        pb.relay.cut_connections(rst=True)
        fired[0] = index + 1


def _read_back(
    bootstrap: str, topic: str, expected: int, security: dict[str, object] | None = None
) -> dict[int, list[bytes]]:
    from confluent_kafka import Consumer as CKConsumer
    from confluent_kafka import TopicPartition as CKTopicPartition

    consumer = CKConsumer(
        {
            **(security or {}),
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
    pb: ProxiedBroker,
    records: int,
    cuts: int,
    every: float,
    variants: tuple[str, ...] = VARIANTS,
    *,
    mode: str = "frames",
    over: float = 2.0,
    value_bytes: int = 48,
    client: str = "kaflux",
) -> RunResult:
    topic = unique_name("kx-cuts")
    create_topic(pb.bootstrap_servers, topic, PARTITIONS, config=pb.security)
    sent: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    stop = threading.Event()
    fired = [0]
    config = pb.config(**{"linger.ms": 5, "request.timeout.ms": 5000})
    producer = KafluxRun(config) if client == "kaflux" else ConfluentRun(config)
    failed = 0
    timed_out = False
    after_failed = False
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    start = time.monotonic()
    if mode == "rst":
        cutter = threading.Thread(target=_resetter, args=(pb, cuts, over, stop, fired), daemon=True)
    else:
        cutter = threading.Thread(target=_cutter, args=(pb, cuts, every, stop, fired, variants), daemon=True)
    pad = b"x" * max(0, value_bytes - 8)
    close_s = 0.0
    try:
        producer.send(topic, b"warm-up", 0)
        if not producer.flush(30) or producer.failed():
            raise RuntimeError("the warm-up record was not delivered")
        sent[0].append(b"warm-up")
        cutter.start()
        for i in range(records):
            value = b"%07d-" % i + pad
            producer.send(topic, value, i % PARTITIONS)
            sent[i % PARTITIONS].append(value)
        timed_out = not producer.flush(60)
        stop.set()
        cutter.join(5)
        failed = producer.failed()
        # a record sent after the storm is delivered
        producer.send(topic, b"after", 0)
        after_failed = not producer.flush(30) or producer.failed() > failed
        if not after_failed:
            sent[0].append(b"after")
    finally:
        stop.set()
        cutter.join(5)
        closing = time.monotonic()
        producer.close(10)
        close_s = time.monotonic() - closing
        for proxy in pb.proxies():
            proxy.reset()
    seconds = time.monotonic() - start
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)
    got = _read_back(pb.bootstrap_servers, topic, sum(map(len, sent.values())), pb.security)
    lost = duplicated = reordered = 0
    for p in range(PARTITIONS):
        want, have = sent[p], got[p]
        want_set, have_set = set(want), set(have)
        lost += len(want_set - have_set)
        duplicated += len(have) - len(have_set)
        if not lost and not duplicated and have != want:
            reordered += sum(1 for a, b in zip(have, want, strict=False) if a != b)
    return RunResult(
        seconds, timed_out, failed, lost, duplicated, reordered, fired[0], cpu, after_failed, close_s
    )


class KafluxRun:
    """An idempotent kaflux Producer; counts futures not resolved or failed."""

    def __init__(self, config: dict[str, object]) -> None:
        self._producer = Producer(config)
        self._futures: list[Future[object]] = []

    def send(self, topic: str, value: bytes, partition: int) -> None:
        self._futures.append(self._producer.send(topic, value, partition=partition))

    def flush(self, timeout: float) -> bool:
        try:
            self._producer.flush(timeout)
        except KafkaError:  # a flush timeout is what this run measures
            return False
        return True

    def failed(self) -> int:
        return sum(1 for f in self._futures if not f.done() or f.exception(0) is not None)

    def close(self, timeout: float) -> None:
        self._producer.close(timeout)


class ConfluentRun:
    """confluent-kafka's idempotent Producer with the same settings; counts delivery reports
    missing or failed."""

    def __init__(self, config: dict[str, object]) -> None:
        from confluent_kafka import Producer as CKProducer

        self._producer = CKProducer({**config, "enable.idempotence": True, "log_level": 3})
        self._sent = 0
        self._ok = 0

    def _report(self, error: object, _message: object) -> None:
        if error is None:
            self._ok += 1

    def send(self, topic: str, value: bytes, partition: int) -> None:
        while True:
            try:
                self._producer.produce(topic, value, partition=partition, on_delivery=self._report)
                break
            except BufferError:  # the local queue is full: serve delivery reports, then retry
                self._producer.poll(0.05)
        self._sent += 1

    def flush(self, timeout: float) -> bool:
        return int(self._producer.flush(timeout)) == 0

    def failed(self) -> int:
        return self._sent - self._ok

    def close(self, timeout: float) -> None:
        self._producer.flush(timeout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--cuts", type=int, default=15)
    parser.add_argument("--every", type=float, default=0.05, help="seconds between arming cuts")
    parser.add_argument(
        "--variants", default=",".join(VARIANTS), help="comma-separated FaultProxy cuts to rotate over"
    )
    parser.add_argument("--security", choices=("PLAINTEXT", "SSL", "SASL_SSL"), default="PLAINTEXT")
    parser.add_argument(
        "--mode",
        choices=("frames", "rst"),
        default=None,
        help="frames: cut Produce exchanges (the proxy); rst: reset every TLS connection (the relay). "
        "Default: frames, or rst over TLS",
    )
    parser.add_argument("--over", type=float, default=2.0, help="rst: seconds the resets are spread over")
    parser.add_argument("--value-bytes", type=int, default=48, help="bytes per record value")
    parser.add_argument("--client", choices=("kaflux", "confluent"), default="kaflux")
    parser.add_argument("--broker", choices=("noida", "tansu"), default=None)
    args = parser.parse_args()
    mode = args.mode or ("frames" if args.security == "PLAINTEXT" else "rst")
    if mode == "rst" and args.security == "PLAINTEXT":
        parser.error("--mode rst needs --security SSL or SASL_SSL (the relay is in front of TLS)")
    broker = args.broker or ("tansu" if args.security == "SASL_SSL" else "noida")
    certs = (
        generate_certs(tempfile.mkdtemp(prefix="kaflux-bench-certs-"))
        if args.security != "PLAINTEXT"
        else None
    )
    pb = start_proxied_broker(broker, security=args.security, certs=certs)
    print(
        f"{args.client} on {broker} over {args.security}, mode {mode}: {args.runs} runs of {args.records} "
        f"records of {args.value_bytes} B, {args.cuts} cuts"
        + (f" over {args.over} s" if mode == "rst" else f" every {args.every} s"),
        flush=True,
    )
    results: list[RunResult] = []
    try:
        for run in range(1, args.runs + 1):
            r = run_once(
                pb,
                args.records,
                args.cuts,
                args.every,
                tuple(args.variants.split(",")),
                mode=mode,
                over=args.over,
                value_bytes=args.value_bytes,
                client=args.client,
            )
            results.append(r)
            print(
                f"run {run:2d}: {r.seconds:5.1f} s, cuts {r.cuts:2d}, flush timeout {r.flush_timed_out}, "
                f"failed {r.failed}, lost {r.lost}, duplicated {r.duplicated}, reordered {r.reordered}, "
                f"record after {'FAILED' if r.after_failed else 'ok'}, close {r.close_s:.2f} s, "
                f"producer-process CPU {r.cpu_s:.1f} s ({r.cpu_s / args.records * 1e6:.1f} us/record)",
                flush=True,
            )
    finally:
        pb.close()
    bad = [
        r
        for r in results
        if r.flush_timed_out or r.failed or r.lost or r.duplicated or r.reordered or r.after_failed
    ]
    print(
        f"TOTALS runs {len(results)}, records/run {args.records}, cuts fired {sum(r.cuts for r in results)}, "
        f"flush timeouts {sum(r.flush_timed_out for r in results)}, failed {sum(r.failed for r in results)}, "
        f"lost {sum(r.lost for r in results)}, duplicated {sum(r.duplicated for r in results)}, "
        f"reordered {sum(r.reordered for r in results)}, "
        f"record-after failures {sum(r.after_failed for r in results)}, bad runs {len(bad)}, "
        f"median run {sorted(r.seconds for r in results)[len(results) // 2]:.1f} s, "
        f"median CPU {sorted(r.cpu_s for r in results)[len(results) // 2] / args.records * 1e6:.1f} us/record"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
