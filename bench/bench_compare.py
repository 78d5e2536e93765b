"""Side by side: kaflux poll() and poll_arrow() against confluent-kafka, aiokafka and
kafka-python on the same backlog, with kaflux's raw fetch ceiling in the same run.

    python bench/bench_compare.py                          # 1M records, 3 rounds, embedded Tansu
    python bench/bench_compare.py --records 200000 --rounds 1      # a quick look
    python bench/bench_compare.py --clients kaflux-poll,confluent-tuned --rounds 5

The backlog (8-byte keys, 100-byte values, 6 partitions; see ``consume_clients.produce``) is
written once to a Tansu broker started by ``kaflux.devbrokers.brokers`` (or to
``--bootstrap-servers``). Every run is one child process that assigns all partitions, reads
the whole backlog from the beginning and touches every value; the clients take turns within
each round (interleaved), so drifting machine load spreads over all of them. Per client it
prints the median (and range) of records/s over the rounds, CPU seconds (all threads, from the
first poll to the last record), CPU µs per record, the CPU efficiency against confluent-kafka
tuned (its CPU per record divided by the client's: 2.0 means half the CPU per record), peak
RSS (the child's high-water mark, imports included) and, for the Arrow rows, peak RSS against
``poll()``'s plus what importing pyarrow alone adds (measured in a child of its own). Wall
clock is broker-bound here; CPU per record is the figure that compares clients. Clients:

* ``kaflux-poll``: ``poll()`` with ``max.poll.records=500``;
* ``kaflux-arrow``: ``poll_arrow()`` with ``max.poll.records=500`` (same limit as poll());
* ``kaflux-arrow-10k``: ``poll_arrow()`` with ``max.poll.records=10000`` (the batch sizes
  Arrow consumers such as the Spark source use);
* ``confluent-tuned``: ``queued.min.messages=1000000``, ``consume(500)``;
  ``confluent-default``: its defaults, ``consume(500)``;
* ``aiokafka``: ``getmany(max_records=500)``; ``kafka-python``: ``poll(max_records=500)``;
* ``raw-fetch``: kaflux's network thread fetching as for ``poll()``, with the responses
  taken off the fetch buffer and counted from batch headers only (no CRC, no decoding):
  the ceiling any kaflux reader can reach against this broker.

``--kaflux-option KEY=VALUE`` (repeatable) adds a setting to every kaflux client, e.g.
``fetch.max.wait.ms=20``: on Tansu a Fetch listing only partitions already read to their end
is held for the whole ``fetch.max.wait.ms`` (500 ms by default), and while it is in flight
the partition still behind cannot be fetched -- the end of the backlog then comes in 500 ms
steps, for the raw fetch as for poll(). The wall-clock figures of the kaflux rows measure
that; the CPU figures do not.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

from consume_clients import READERS, produce

#: client name -> (reader, its configuration)
CLIENTS: dict[str, tuple[str, dict[str, Any]]] = {
    "kaflux-poll": ("kaflux-poll", {"max.poll.records": 500}),
    "kaflux-arrow": ("kaflux-arrow", {"max.poll.records": 500}),
    "kaflux-arrow-10k": ("kaflux-arrow", {"max.poll.records": 10_000}),
    "confluent-tuned": ("confluent-kafka", {"queued.min.messages": 1_000_000}),
    "confluent-default": ("confluent-kafka", {}),
    "aiokafka": ("aiokafka", {}),
    "kafka-python": ("kafka-python", {}),
    "raw-fetch": ("kaflux-raw-fetch", {}),
}
BASELINE = "confluent-tuned"


def run_child(
    client: str, bootstrap: str, topic: str, records: int, kaflux_options: list[str]
) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", client, "--bootstrap-servers", bootstrap, "--topic", topic,
           "--records", str(records)]  # fmt: skip
    for option in kaflux_options:
        cmd += ["--kaflux-option", option]
    done = subprocess.run(cmd, capture_output=True, text=True, env=os.environ, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"{client} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if result["records"] < records:
        print(f"warning: {client} read only {result['records']:,} of {records:,} records", file=sys.stderr)
    return result


#: Peak RSS a child adds by importing pyarrow after kaflux (MiB).
PYARROW_IMPORT_RSS = (
    "import sys; sys.path.insert(0, sys.argv[1]); from consume_clients import peak_rss_mib; "
    "import kaflux.consumer; before = peak_rss_mib(); import pyarrow; print(peak_rss_mib() - before)"
)


def pyarrow_import_mib() -> float:
    """What importing pyarrow adds to a kaflux process's peak RSS (median of 3 children)."""
    here = os.path.dirname(os.path.abspath(__file__))
    runs = [
        float(
            subprocess.run(
                [sys.executable, "-c", PYARROW_IMPORT_RSS, here],
                capture_output=True,
                text=True,
                check=True,
                timeout=120,
            ).stdout
        )
        for _ in range(3)
    ]
    return statistics.median(runs)


def summarize(runs: dict[str, list[dict[str, Any]]], records: int, pyarrow_mib: float = float("nan")) -> None:
    def median(client: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[client])

    base_rate = median(BASELINE, "records_per_s") if BASELINE in runs else float("nan")
    base_cpu = median(BASELINE, "cpu_s") if BASELINE in runs else float("nan")
    poll_rss = median("kaflux-poll", "peak_rss_mib") if "kaflux-poll" in runs else float("nan")
    print(
        "\n| client | rounds | rec/s (median) | rec/s (min-max) | rec/s x confluent tuned | CPU s | "
        "µs CPU/record | CPU efficiency x confluent tuned | peak RSS MiB | RSS / (poll() + pyarrow) | "
        "max buffered MiB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for client, results in runs.items():
        rates = [r["records_per_s"] for r in results]
        rate, cpu = median(client, "records_per_s"), median(client, "cpu_s")
        buffered = median(client, "max_buffered_mib")
        rss = median(client, "peak_rss_mib")
        rss_ratio = f"{rss / (poll_rss + pyarrow_mib):.2f}" if client.startswith("kaflux-arrow") else "-"
        print(
            f"| {client} | {len(results)} | {rate:,.0f} | {min(rates):,.0f}-{max(rates):,.0f} | "
            f"{rate / base_rate:.2f} | {cpu:.2f} | {cpu / records * 1e6:.3f} | {base_cpu / cpu:.2f} | "
            f"{rss:.0f} | {rss_ratio} | {'-' if buffered != buffered else f'{buffered:.1f}'} |"
        )
    if "kaflux-poll" in runs:
        poll_cpu = median("kaflux-poll", "cpu_s")
        arrow = ", ".join(
            f"{client} {median(client, 'cpu_s') / poll_cpu:.2f}x"
            for client in runs
            if client.startswith("kaflux-arrow")
        )
        if arrow:
            print(f"\nCPU per record against poll()'s: {arrow}; pyarrow's import adds {pyarrow_mib:.0f} MiB")
    if "raw-fetch" in runs:
        ceiling = median("raw-fetch", "records_per_s")
        shares = ", ".join(
            f"{client} {median(client, 'records_per_s') / ceiling:.0%}"
            for client in runs
            if client.startswith("kaflux")
        )
        print(f"\nShare of the raw fetch ceiling ({ceiling:,.0f} rec/s): {shares}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-servers", help="use this cluster (the topic must hold the backlog)")
    parser.add_argument("--topic", default="bench-compare")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1, help="untimed raw-fetch reads before the rounds")
    parser.add_argument(
        "--clients", default=",".join(CLIENTS), help=f"comma-separated, of: {', '.join(CLIENTS)}"
    )
    parser.add_argument(
        "--kaflux-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a configuration setting for every kaflux client (repeatable), e.g. fetch.max.wait.ms=20",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        reader, config = CLIENTS[args.child]
        if reader.startswith("kaflux"):
            config = {**config, **dict(option.split("=", 1) for option in args.kaflux_option)}
        measurement = READERS[reader](args.bootstrap_servers, args.topic, args.records, config)
        print(json.dumps(measurement.as_dict()))
        return

    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    unknown = [c for c in clients if c not in CLIENTS]
    if unknown:
        parser.error(f"unknown clients {unknown}; choose from {list(CLIENTS)}")
    from kaflux.devbrokers.kinds import start_broker
    from kaflux.records import KERNEL

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
        print(
            f"{args.records:,} records (8 B keys, 100 B values, {args.partitions} partitions), "
            f"{args.rounds} interleaved rounds, {os.cpu_count()} CPUs, kaflux record kernel: {KERNEL}"
            + (f", kaflux options: {' '.join(args.kaflux_option)}" if args.kaflux_option else "")
        )
        for _ in range(args.warmup):  # untimed: the broker's first read of fresh data is slower
            run_child("raw-fetch", bootstrap, args.topic, args.records, [])
        runs: dict[str, list[dict[str, Any]]] = {c: [] for c in clients}
        for round_no in range(args.rounds):
            for client in clients:
                result = run_child(client, bootstrap, args.topic, args.records, args.kaflux_option)
                runs[client].append(result)
                print(
                    f"round {round_no + 1} {client}: {result['records_per_s']:,.0f} rec/s, "
                    f"{result['cpu_s']:.2f} CPU s, peak RSS {result['peak_rss_mib']:.0f} MiB",
                    file=sys.stderr,
                    flush=True,
                )
        summarize(runs, args.records, pyarrow_import_mib() if any("arrow" in c for c in clients) else 0.0)
    finally:
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    main()
