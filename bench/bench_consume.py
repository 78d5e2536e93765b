"""Consume a 1M-record backlog with kaflux and report throughput and peak RSS.

Shows that memory is bounded by ``fetch.buffer.max.bytes``: each setting runs in its own
process, which reports its own peak RSS (sampled during consumption) next to the RSS it had before
consuming.

    python bench/bench_consume.py                      # embedded Tansu, 1M records
    python bench/bench_consume.py --records 200000 --buffers 1,64
    python bench/bench_consume.py --bootstrap-servers host:9092 --topic existing-topic

The backlog is produced with confluent-kafka (fast, and independent of kaflux): 8-byte keys,
100-byte values from a pool of 4096 random hex strings, as in the broker baselines. For
kaflux against the other clients side by side, see ``bench_compare.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

from consume_clients import READERS, MiB, current_rss_mib, produce


def consume(
    bootstrap: str, topic: str, records: int, buffer_mib: float, max_poll_records: int, slow_ms: float
) -> dict[str, float]:
    """Runs in the child process."""
    from kaflux import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "fetch.buffer.max.bytes": int(buffer_mib * MiB),
            "max.poll.records": max_poll_records,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    partitions = consumer.partitions_for(topic, timeout=30)
    consumer.assign([TopicPartition(topic, p.partition) for p in partitions])
    rss_before = current_rss_mib()
    peak_rss = rss_before
    seen = 0
    value_bytes = 0
    max_buffered = 0
    start = time.perf_counter()
    first = None
    deadline = time.monotonic() + 300
    while seen < records and time.monotonic() < deadline:
        batch = consumer.poll(1.0)
        if batch and first is None:
            first = time.perf_counter()
        for record in batch:
            value_bytes += len(record.value)
            seen += 1
        if slow_ms:
            time.sleep(slow_ms / 1000)  # a slow application: lets the fetch buffer fill up
        buffered = consumer.metrics()["kaflux-consumer-metrics"]["fetch-buffer-bytes"]
        max_buffered = max(max_buffered, int(buffered))
        peak_rss = max(peak_rss, current_rss_mib())
    end = time.perf_counter()
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    consumer.close(5)
    return {
        "records": seen,
        "seconds": end - start,
        "records_per_s": seen / (end - start),
        "records_per_s_from_first": seen / (end - (first or start)),
        "mb_per_s": value_bytes / 1e6 / (end - start),
        "cpu_s": cpu.ru_utime + cpu.ru_stime,
        "rss_before_mib": rss_before,
        "peak_rss_mib": peak_rss,
        "max_buffered_mib": max_buffered / MiB,
    }


def consume_peer(client: str, bootstrap: str, topic: str, records: int) -> dict[str, float]:
    """The same backlog read by a peer client (assign all partitions, from the beginning;
    see ``consume_clients``)."""
    if client not in ("confluent-kafka", "aiokafka", "kafka-python"):
        raise SystemExit(f"unknown client {client!r}")
    m = READERS[client](bootstrap, topic, records, {})
    return {
        "records": m.records,
        "seconds": m.seconds,
        "records_per_s": m.records_per_s,
        "records_per_s_from_first": m.records_per_s,
        "mb_per_s": m.value_bytes / 1e6 / m.seconds,
        "cpu_s": m.cpu_s,
        "rss_before_mib": m.rss_before_mib,
        "peak_rss_mib": m.peak_rss_mib,
        "max_buffered_mib": float("nan"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-servers")
    parser.add_argument("--topic", default="bench-backlog")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--buffers", default="1,8,64", help="fetch.buffer.max.bytes values in MiB")
    parser.add_argument("--max-poll-records", type=int, default=500)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument(
        "--slow-ms", type=float, default=0.0, help="sleep after each poll (a slow application)"
    )
    parser.add_argument(
        "--peers", default="", help="also run these clients: confluent-kafka,aiokafka,kafka-python"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--peer-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peer_child:
        print(json.dumps(consume_peer(args.peer_child, args.bootstrap_servers, args.topic, args.records)))
        return
    if args.child:
        result = consume(
            args.bootstrap_servers,
            args.topic,
            args.records,
            float(args.child),
            args.max_poll_records,
            args.slow_ms,
        )
        print(json.dumps(result))
        return

    from kaflux.devbrokers.kinds import start_broker

    broker = None
    bootstrap = args.bootstrap_servers
    if bootstrap is None:
        broker = start_broker("tansu")
        bootstrap = broker.bootstrap_servers
    try:
        if broker is not None:
            t0 = time.perf_counter()
            produce(bootstrap, args.topic, args.records, args.partitions)
            print(f"produced {args.records:,} records in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        print(f"slow-ms={args.slow_ms}, max.poll.records={args.max_poll_records}")
        print(
            "| client | fetch.buffer.max.bytes | records | rec/s | rec/s from first record | MB/s (values) "
            "| CPU s | RSS at start MiB | peak RSS MiB | max buffered MiB |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
        common = ["--bootstrap-servers", bootstrap, "--topic", args.topic, "--records", str(args.records),
                  "--max-poll-records", str(args.max_poll_records), "--slow-ms", str(args.slow_ms),
                  "--partitions", str(args.partitions)]  # fmt: skip
        runs = [("kaflux", ["--child", b], f"{float(b):g} MiB") for b in args.buffers.split(",")]
        runs += [(peer, ["--peer-child", peer], "-") for peer in args.peers.split(",") if peer]
        for _ in range(args.runs):
            for client, flag, buffer_label in runs:
                cmd = [sys.executable, __file__, *flag, *common]
                out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=os.environ).stdout
                r = json.loads(out.strip().splitlines()[-1])
                print(
                    f"| {client} | {buffer_label} | {r['records']:,} | {r['records_per_s']:,.0f} | "
                    f"{r['records_per_s_from_first']:,.0f} | {r['mb_per_s']:.1f} | {r['cpu_s']:.1f} | "
                    f"{r['rss_before_mib']:.0f} | {r['peak_rss_mib']:.0f} | {r['max_buffered_mib']:.1f} |",
                    flush=True,
                )
    finally:
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    main()
