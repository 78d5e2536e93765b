"""Produce throughput: kaflux ``send()`` and ``send_arrow()`` side by side with confluent-kafka and
aiokafka, each client in its own process, in interleaved rounds.

    python bench/bench_produce.py                       # embedded Tansu, 1M records, 3 rounds
    python bench/bench_produce.py --records 200000 --rounds 2
    python bench/bench_produce.py --broker noida --clients kaflux-send,confluent
    python bench/bench_produce.py --bootstrap-servers host:9092
    python bench/bench_produce.py --profile kaflux-send --records 200000   # cProfile of one run

Records as in the broker baselines (``../shared/reference/brokers.md``): 8-byte keys (``%08d``)
and 100-byte values from a pool of 4096 random hex strings, keyed partitioning over 6
partitions. Every client runs with its default settings (kaflux: idempotence on, acks=all,
linger.ms=5) and each run writes a fresh topic. What is timed, in the child process, is from
the first send to the last acknowledgement (``flush()``): data preparation, connecting and
metadata are excluded. The clients:

* ``confluent``: ``produce(topic, value, key, on_delivery=callback)``, ``poll(0)`` every 1000
  records (and on BufferError), ``flush()``; the callback counts acknowledgements.
* ``confluent-idempotent``: the same with ``enable.idempotence=true, acks=all``: kaflux's
  default durability, the fair baseline for kaflux's producer.
* ``kaflux-send``: ``send(topic, value, key=key)`` for each record, ``flush()``.
* ``kaflux-callback``: ``send(topic, value, key, callback=callback)`` for each record (the
  callback counts acknowledgements, as confluent's does), ``flush()``.
* ``kaflux-arrow``: ``send_arrow(topic, batch)`` with 10,000-row pyarrow batches (``key``,
  ``value``), built before the clock starts, ``flush()``.
* ``aiokafka``: ``await producer.send(topic, value, key=key)`` for each record (the future of
  the acknowledgement is not awaited one by one), ``await producer.flush()``.

Rounds are interleaved (round 1 runs every client, then round 2 ...), the client order rotating
from round to round; the table shows each client's median and its ratio to confluent-kafka's
median of the same run, with CPU (all threads of the client process, per wall second) and peak
RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
import uuid
from typing import Any

CLIENTS = ("confluent", "confluent-idempotent", "kaflux-send", "kaflux-callback", "kaflux-arrow", "aiokafka")
ARROW_ROWS = 10_000


def records_pool(count: int, value_bytes: int = 100) -> tuple[list[bytes], list[bytes]]:
    """``count`` keys (``%08d``) and their values (a pool of 4096 random hex strings of
    ``value_bytes`` bytes, 100 by default)."""
    rng = random.Random(1)
    pool = [rng.randbytes((value_bytes + 1) // 2).hex().encode()[:value_bytes] for _ in range(4096)]
    return [b"%08d" % i for i in range(count)], [pool[i & 4095] for i in range(count)]


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def peak_rss_mib() -> float:
    """The child's own peak RSS (``VmHWM``), not ``ru_maxrss``, which keeps a forking parent's peak."""
    from consume_clients import peak_rss_mib as own_peak

    return own_peak()


# -- one run per child process --------------------------------------------------------------------


def run_confluent(
    bootstrap: str, topic: str, keys: list[bytes], values: list[bytes], idempotent: bool = False
) -> dict[str, Any]:
    from confluent_kafka import Producer

    config: dict[str, Any] = {"bootstrap.servers": bootstrap}
    if idempotent:  # kaflux's default durability: idempotence on, acks=all
        config |= {"enable.idempotence": True, "acks": "all"}
    producer = Producer(config)
    producer.list_topics(topic, timeout=30)
    acked = [0]
    errors: list[Any] = []

    def delivered(error: Any, message: Any) -> None:
        if error is None:
            acked[0] += 1
        else:
            errors.append(error)

    produce = producer.produce
    poll = producer.poll
    t0, cpu0 = time.perf_counter(), cpu_seconds()
    for i, (key, value) in enumerate(zip(keys, values, strict=True)):
        while True:
            try:
                produce(topic, value, key, on_delivery=delivered)
                break
            except BufferError:
                poll(0.01)
        if i % 1000 == 0:
            poll(0)
    producer.flush(300)
    seconds, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
    return {"acked": acked[0], "errors": len(errors), "seconds": seconds, "cpu_s": cpu}


def run_kaflux_send(bootstrap: str, topic: str, keys: list[bytes], values: list[bytes]) -> dict[str, Any]:
    from kaflux import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    producer.send(topic, b"warm-up").result(30)  # metadata, connection and producer id
    send = producer.send
    t0, cpu0 = time.perf_counter(), cpu_seconds()
    futures = [send(topic, value, key=key) for key, value in zip(keys, values, strict=True)]
    producer.flush(300)
    seconds, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
    errors = sum(1 for f in futures if f.exception(0) is not None)
    producer.close(30)
    return {"acked": len(futures) - errors, "errors": errors, "seconds": seconds, "cpu_s": cpu}


def run_kaflux_callback(bootstrap: str, topic: str, keys: list[bytes], values: list[bytes]) -> dict[str, Any]:
    from kaflux import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    producer.send(topic, b"warm-up").result(30)  # metadata, connection and producer id
    acked = [0]
    errors: list[Any] = []

    def delivered(metadata: Any, error: Any) -> None:
        if error is None:
            acked[0] += 1
        else:
            errors.append(error)

    send = producer.send
    t0, cpu0 = time.perf_counter(), cpu_seconds()
    for key, value in zip(keys, values, strict=True):
        send(topic, value, key, callback=delivered)
    producer.flush(300)
    seconds, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
    producer.close(30)
    return {"acked": acked[0], "errors": len(errors), "seconds": seconds, "cpu_s": cpu}


def run_kaflux_arrow(bootstrap: str, topic: str, keys: list[bytes], values: list[bytes]) -> dict[str, Any]:
    import pyarrow as pa

    from kaflux import Producer

    batches = [
        pa.RecordBatch.from_arrays(
            [
                pa.array(keys[i : i + ARROW_ROWS], pa.binary()),
                pa.array(values[i : i + ARROW_ROWS], pa.binary()),
            ],
            names=["key", "value"],
        )
        for i in range(0, len(keys), ARROW_ROWS)
    ]
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.send(topic, b"warm-up").result(30)
    t0, cpu0 = time.perf_counter(), cpu_seconds()
    futures = [f for batch in batches for f in producer.send_arrow(topic, batch)]
    producer.flush(300)
    seconds, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
    acked = sum(f.result(0).record_count for f in futures if f.exception(0) is None)
    producer.close(30)
    return {"acked": acked, "errors": len(keys) - acked, "seconds": seconds, "cpu_s": cpu}


def run_aiokafka(bootstrap: str, topic: str, keys: list[bytes], values: list[bytes]) -> dict[str, Any]:
    import asyncio

    from aiokafka import AIOKafkaProducer

    async def main() -> dict[str, Any]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await producer.start()
        try:
            await (await producer.send(topic, b"warm-up"))
            t0, cpu0 = time.perf_counter(), cpu_seconds()
            futures = [
                await producer.send(topic, value, key=key) for key, value in zip(keys, values, strict=True)
            ]
            await producer.flush()
            seconds, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
            errors = sum(1 for f in futures if f.exception() is not None)
        finally:
            await producer.stop()
        return {"acked": len(futures) - errors, "errors": errors, "seconds": seconds, "cpu_s": cpu}

    return asyncio.run(main())


RUNNERS = {
    "confluent": run_confluent,
    "confluent-idempotent": lambda *args: run_confluent(*args, idempotent=True),
    "kaflux-send": run_kaflux_send,
    "kaflux-callback": run_kaflux_callback,
    "kaflux-arrow": run_kaflux_arrow,
    "aiokafka": run_aiokafka,
}


def child(
    client: str, bootstrap: str, topic: str, records: int, profile: str | None, value_bytes: int = 100
) -> None:
    keys, values = records_pool(records, value_bytes)
    runner = RUNNERS[client]
    if profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        result = profiler.runcall(runner, bootstrap, topic, keys, values)
        profiler.dump_stats(profile)
        stats = pstats.Stats(profile, stream=sys.stderr)
        stats.sort_stats("tottime").print_stats(25)
    else:
        result = runner(bootstrap, topic, keys, values)
    result["peak_rss_mib"] = peak_rss_mib()
    print("RESULT " + json.dumps(result), flush=True)


# -- the parent -----------------------------------------------------------------------------------


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from kaflux import AdminClient, NewTopic

    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions)], timeout=30)


def run_child(
    client: str, bootstrap: str, records: int, partitions: int, profile: str | None
) -> dict[str, Any]:
    topic = f"bench-produce-{client}-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions)
    command = [
        sys.executable,
        __file__,
        "--child",
        client,
        "--bootstrap-servers",
        bootstrap,
        "--topic",
        topic,
    ]
    command += ["--records", str(records)] + (["--profile-out", profile] if profile else [])
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, env={**os.environ})
    if profile:
        sys.stderr.write(done.stderr)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            result: dict[str, Any] = json.loads(line[len("RESULT ") :])
            result["records_per_s"] = result["acked"] / result["seconds"] if result["seconds"] else 0.0
            return result
    raise SystemExit(f"{client} failed:\n{done.stdout}\n{done.stderr[-3000:]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-servers", help="a cluster to use instead of an embedded broker")
    parser.add_argument("--broker", default="tansu", choices=["tansu", "noida"], help="the embedded broker")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument(
        "--clients", default=",".join(CLIENTS), help=f"comma-separated, from {', '.join(CLIENTS)}"
    )
    parser.add_argument(
        "--profile", metavar="CLIENT", help="one cProfile'd run of CLIENT instead of the rounds"
    )
    parser.add_argument("--json", metavar="FILE", help="also write every run's numbers to FILE")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--profile-out", help=argparse.SUPPRESS)
    parser.add_argument("--value-bytes", type=int, default=100, help="bytes per value (a child's option)")
    args = parser.parse_args()
    if args.child:
        child(
            args.child, args.bootstrap_servers, args.topic, args.records, args.profile_out, args.value_bytes
        )
        return 0
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    unknown = set(clients) - set(CLIENTS)
    if unknown:
        parser.error(f"unknown clients {sorted(unknown)}")

    import contextlib

    from kaflux.devbrokers.kinds import start_broker

    with contextlib.ExitStack() as stack:
        bootstrap = args.bootstrap_servers
        if not bootstrap:
            broker = stack.enter_context(start_broker(args.broker))
            bootstrap = broker.bootstrap_servers
            print(f"embedded {args.broker} at {bootstrap}", flush=True)
        if args.profile:
            result = run_child(
                args.profile, bootstrap, args.records, args.partitions, "/tmp/bench_produce.prof"
            )
            print(json.dumps(result, indent=2))
            return 0
        runs: dict[str, list[dict[str, Any]]] = {c: [] for c in clients}
        for round_no in range(args.rounds):
            order = clients[round_no % len(clients) :] + clients[: round_no % len(clients)]
            for client in order:
                result = run_child(client, bootstrap, args.records, args.partitions, None)
                runs[client].append(result)
                print(
                    f"round {round_no + 1} {client:<21} {result['records_per_s']:>11,.0f} rec/s  "
                    f"cpu {100 * result['cpu_s'] / result['seconds']:>4.0f}%  errors {result['errors']}",
                    flush=True,
                )
    medians = {c: statistics.median(r["records_per_s"] for r in runs[c]) for c in clients}
    base = medians.get("confluent")
    print(f"\n{args.records:,} records x {args.rounds} rounds, {args.partitions} partitions")
    base_idem = medians.get("confluent-idempotent")
    print(
        f"{'client':<21}{'median rec/s':>14}{'vs confluent':>14}{'vs idempotent':>15}{'cpu %':>8}"
        f"{'µs CPU/rec':>12}{'peak RSS MiB':>14}  runs (rec/s)"
    )
    for client in clients:
        cpu = statistics.median(100 * r["cpu_s"] / r["seconds"] for r in runs[client])
        per_record = statistics.median(1e6 * r["cpu_s"] / max(r["acked"], 1) for r in runs[client])
        rss = max(r["peak_rss_mib"] for r in runs[client])
        ratio = f"{medians[client] / base:.2f}x" if base else "-"
        ratio_idem = f"{medians[client] / base_idem:.2f}x" if base_idem else "-"
        each = " / ".join(f"{r['records_per_s']:,.0f}" for r in runs[client])
        print(
            f"{client:<21}{medians[client]:>14,.0f}{ratio:>14}{ratio_idem:>15}{cpu:>8.0f}"
            f"{per_record:>12.2f}{rss:>14.0f}  {each}"
        )
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"records": args.records, "runs": runs, "medians": medians}, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
