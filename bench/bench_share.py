"""Share groups (KIP-932), side by side: kaflux ``ShareConsumer`` against confluent-kafka's
``ShareConsumer`` on librdkafka's mock cluster.

    python bench/bench_share.py                         # 1M records, 3 rounds
    python bench/bench_share.py --records 100000 --rounds 1     # a quick look

A share group starts at the latest offset, so there is no backlog to read: each run is one child
process whose consumer (implicit acknowledgement mode, defaults otherwise) joins a fresh share
group on a fresh topic (4 partitions, the mock's) and says it is ready; the parent tells it to go
and produces the records (8-byte keys, 100-byte values, with confluent-kafka) at ``--pace``
records/s; the child reads until it has every record, touching every value, and reports its wall
time and CPU time (all threads) from "go" to the last record. confluent-kafka has no
group_state(): its child polls probe records, produced until one arrives, to know it fetches.
The clients take turns within each round. The mock cluster is started through
``tests/share_mock.py`` with a 5-minute record lock, so that nothing is redelivered.

Why a pace: the mock's ShareFetch costs time in proportion to the records waiting in the
partition (a fetch takes ~200 ms with 100k records waiting, ~3 ms with a few thousand), so a
1M burst would take the mock tens of minutes to hand out, whichever client asks. At a pace both
clients keep up with, rec/s is the pace and the comparison is the CPU per record.
``--pace 0`` produces everything before "go" (a burst): then rec/s is the mock's drain rate.
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

_TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests")
CLIENTS = ("kaflux", "confluent-kafka")
WAIT_S = 60.0


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# --- the child: one consumer --------------------------------------------------------------------------


def child(client: str, bootstrap: str, topic: str, group: str, records: int) -> None:
    if client == "kaflux":
        from kaflux import ShareConsumer

        consumer: Any = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
        consumer.subscribe([topic])
        deadline = time.monotonic() + WAIT_S
        while True:
            consumer.poll(0.1)
            state = consumer.group_state()
            if state.state == "STABLE" and len(state.assignment) == 4:
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"kaflux did not join: {state}")
        print("ready", flush=True)

        def poll() -> list[Any]:
            return consumer.poll(0.5)

        def value(record: Any) -> bytes:
            return record.value  # type: ignore[no-any-return]

    else:
        import confluent_kafka

        consumer = confluent_kafka.ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
        consumer.subscribe([topic])
        print("probing", flush=True)
        deadline = time.monotonic() + WAIT_S
        while not any(m.error() is None and m.value() == b"probe" for m in consumer.poll(0.2)):
            if time.monotonic() > deadline:
                raise SystemExit("confluent-kafka never received a probe")
        print("ready", flush=True)

        def poll() -> list[Any]:
            return list(consumer.poll(0.5))

        def value(record: Any) -> bytes:
            return record.value()  # type: ignore[no-any-return]

    sys.stdin.readline()  # "go": the records are all produced
    start, cpu0 = time.monotonic(), cpu_seconds()
    count = probes = value_bytes = 0
    last = start
    while count < records and time.monotonic() - last < 20.0:
        batch = poll()
        for record in batch:
            v = value(record)
            if v == b"probe":
                probes += 1
                continue
            count += 1
            value_bytes += len(v)
        if batch:
            last = time.monotonic()
    seconds, cpu = time.monotonic() - start, cpu_seconds() - cpu0
    consumer.close()
    print(
        json.dumps({"records": count, "seconds": seconds, "cpu_s": cpu, "value_bytes": value_bytes}),
        flush=True,
    )


# --- the parent ------------------------------------------------------------------------------------------


def produce(bootstrap: str, topic: str, records: int, pace: int) -> None:
    from confluent_kafka import Producer

    rng = random.Random(1)
    pool = [rng.randbytes(50).hex().encode() for _ in range(4096)]
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "queue.buffering.max.messages": 1_000_000}
    )
    start = time.monotonic()
    for i in range(records):
        if pace and i % 1000 == 0:
            ahead = start + i / pace - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
            producer.poll(0)
        while True:
            try:
                producer.produce(topic, pool[i & 4095], b"%08d" % i)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10000 == 0:
            producer.poll(0)
    if producer.flush(300) != 0:
        raise SystemExit("not every record was produced")


def run(client: str, bootstrap: str, records: int, pace: int) -> dict[str, Any]:
    from confluent_kafka import Producer

    suffix = uuid.uuid4().hex[:8]
    topic, group = f"bench-share-{suffix}", f"bench-share-group-{suffix}"
    probe = Producer({"bootstrap.servers": bootstrap})
    probe.produce(topic, b"create", partition=0)  # the mock creates the topic (4 partitions)
    probe.flush(10)
    proc = subprocess.Popen(
        [sys.executable, __file__, "--child", client, "--bootstrap-servers", bootstrap, "--topic", topic,
         "--group", group, "--records", str(records)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    line = proc.stdout.readline().strip()
    if line == "probing":
        import threading

        ready = threading.Event()

        def probing() -> None:
            while not ready.is_set():
                probe.produce(topic, b"probe")
                probe.flush(10)
                time.sleep(0.2)

        prober = threading.Thread(target=probing, daemon=True)
        prober.start()
        line = proc.stdout.readline().strip()
        ready.set()
        prober.join()
    if line != "ready":
        proc.kill()
        raise SystemExit(f"{client}: the child did not get ready ({line!r})")
    started = time.monotonic()
    if pace:
        proc.stdin.write("go\n")
        proc.stdin.flush()
    produce(bootstrap, topic, records, pace)
    produced_s = time.monotonic() - started
    if not pace:
        proc.stdin.write("go\n")
        proc.stdin.flush()
    out = proc.stdout.readline()
    proc.wait(60)
    result: dict[str, Any] = json.loads(out)
    result["produce_s"] = produced_s
    if result["records"] < records:
        print(f"warning: {client} read only {result['records']:,} of {records:,}", file=sys.stderr)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pace", type=int, default=40_000, help="records/s produced (0: all before reading)")
    parser.add_argument("--child")
    parser.add_argument("--bootstrap-servers")
    parser.add_argument("--topic")
    parser.add_argument("--group")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.bootstrap_servers, args.topic, args.group, args.records)
        return
    sys.path.insert(0, _TESTS)
    import kaflux.records

    from support.share_mock import ShareMockCluster

    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in CLIENTS}
    with ShareMockCluster(record_lock_duration_ms=300_000) as cluster:
        for round_no in range(args.rounds):
            for client in CLIENTS if round_no % 2 == 0 else reversed(CLIENTS):
                result = run(client, cluster.bootstrap_servers, args.records, args.pace)
                runs[client].append(result)
                rate = result["records"] / result["seconds"]
                print(
                    f"round {round_no + 1} {client}: {rate:,.0f} rec/s, {result['cpu_s']:.2f} s CPU",
                    file=sys.stderr,
                )
    pace = f"produced at {args.pace:,} rec/s" if args.pace else "produced before reading"
    kernel = kaflux.records.KERNEL
    print(f"\n{args.records:,} records {pace}, {args.rounds} rounds, kaflux record kernel: {kernel}\n")
    print("| client | rec/s (median) | min-max | CPU s (median) | µs CPU/record |")
    print("|---|---|---|---|---|")
    for client, results in runs.items():
        rates = [r["records"] / r["seconds"] for r in results]
        cpu = statistics.median(r["cpu_s"] for r in results)
        print(
            f"| {client} `ShareConsumer` | {statistics.median(rates):,.0f} "
            f"| {min(rates):,.0f}-{max(rates):,.0f} | {cpu:.2f} | {cpu / args.records * 1e6:.2f} |"
        )


if __name__ == "__main__":
    main()
