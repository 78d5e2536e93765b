"""The anchors, side by side on Apache Kafka 4.4: kaflux against the Java client (the reference
implementation of its design), confluent-kafka and aiokafka, on the same broker and topic.

    python bench/bench_anchors.py                                    # 1M records of 100 B, 3 rounds
    python bench/bench_anchors.py --records 10000000 --value-bytes 1024
    python bench/bench_anchors.py --sections consumers --records 200000 --rounds 1   # a quick look

One Apache Kafka 4.4 node (``kaflux.devbrokers.KafkaBroker``, or ``--bootstrap-servers``) holds a
backlog of ``--records`` records (8-byte keys, ``--value-bytes`` values, ``--partitions``
partitions), written once with confluent-kafka. Every run is one child process; within each round
the clients take turns (interleaved), and the tables give the median of the rounds:

* **consumers** read the whole backlog from the beginning (all partitions assigned) and touch
  every value: kaflux ``poll()``, ``poll_arrow()`` (10k records per call) and ``async for``;
  the Java ``KafkaConsumer`` with ``group.protocol=classic`` and ``=consumer`` (the latter is the
  re-architected consumer kaflux follows); confluent-kafka tuned; aiokafka ``getmany()``.
* **producers** write ``--records`` records to a fresh topic: kaflux ``send()`` and
  ``send_arrow()``; the Java ``KafkaProducer`` (idempotent, acks=all, linger 5 ms);
  confluent-kafka idempotent.
* **share consumers** read ``--records`` records of a backlog through a fresh share group
  (``share.auto.offset.reset=earliest``): kaflux ``ShareConsumer`` and Java ``KafkaShareConsumer``.

Figures: records/s, CPU µs per record (process CPU time of every thread, from the first poll or
send to the last record: interpreter and JVM start-up are outside it), and peak RSS. The Java
client runs in ``bench/java/AnchorBench.java`` (compiled here with javac against kafka-clients
4.4): each child first runs the same work once untimed, so the JIT has compiled the hot path, then
the timed round; the JVM's start-up time is printed apart. Python clients get no warm-up round,
except the share consumer: a share group's first member waits for the broker to initialise the
group's partitions (its first heartbeat is answered with no partitions, the next one, 5 s later
by ``group.share.heartbeat.interval.ms``, with them), so that both timed rounds join a group that
has been read from, the kaflux child too first reads the backlog's first half with a member of
its own, untimed. Both untimed rounds' times to their first records are printed apart.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

CONSUMERS = (
    "kaflux-poll",
    "kaflux-arrow-10k",
    "kaflux-async-for",
    "java-classic",
    "java-consumer",
    "confluent-tuned",
    "aiokafka",
)
#: kaflux-callback is send() with a delivery callback and no futures kept, as the Java and confluent
#: children do; kaflux-send keeps every future (10M of them at 10M records: its peak RSS shows them)
PRODUCERS = ("kaflux-callback", "kaflux-send", "kaflux-arrow", "java-producer", "confluent-idempotent")
SHARE = ("kaflux-share", "java-share")
JAVA_SOURCE = HERE / "java" / "AnchorBench.java"


# --- the Java harness ------------------------------------------------------------------------------------


def java_classpath() -> tuple[str, str]:
    """Compile AnchorBench once per source and classpath; returns (its directory, the classpath)."""
    from kaflux.devbrokers.apache_kafka import KAFKA_VERSION, kafka_cache_dir, kafka_classpath

    jars = os.pathsep.join(kafka_classpath(KAFKA_VERSION))
    digest = hashlib.sha256(JAVA_SOURCE.read_bytes() + jars.encode()).hexdigest()[:16]
    out = kafka_cache_dir().parent / "bench-java" / digest
    if not (out / "AnchorBench.class").exists():
        out.mkdir(parents=True, exist_ok=True)
        subprocess.run(["javac", "-d", str(out), "-cp", jars, str(JAVA_SOURCE)], check=True, timeout=300)
    return str(out), jars


def run_java(args: list[str], java: tuple[str, str]) -> dict[str, Any]:
    out, jars = java
    command = ["java", "-Xms512m", "-Xmx2g", "-cp", os.pathsep.join([out, jars]), "AnchorBench", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"java {args[0]} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


# --- Python children (the existing per-client children of the other benchmarks) -------------------------


def run_python(script: str, args: list[str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(HERE / script), *args], capture_output=True, text=True, timeout=1800
    )
    if done.returncode != 0:
        raise SystemExit(f"{script} {args[:2]} failed:\n{done.stderr[-3000:]}")
    for line in reversed(done.stdout.splitlines()):
        line = line.removeprefix("RESULT ")
        if line.startswith("{"):
            result: dict[str, Any] = json.loads(line)
            return result
    raise SystemExit(f"{script} {args[:2]} printed no result:\n{done.stdout[-2000:]}")


def consume(client: str, bootstrap: str, topic: str, records: int, java: tuple[str, str]) -> dict[str, Any]:
    common = ["--bootstrap-servers", bootstrap, "--topic", topic, "--records", str(records)]
    if client.startswith("java-"):
        protocol = client.removeprefix("java-")
        return run_java(["consume", bootstrap, topic, str(records), protocol], java)
    if client == "kaflux-async-for":
        return run_python("bench_aio.py", ["--child", "aio-async-for", *common])
    return run_python("bench_compare.py", ["--child", client, *common])


def produce_run(
    client: str, bootstrap: str, records: int, partitions: int, value_bytes: int, java: tuple[str, str]
) -> dict[str, Any]:
    topic = f"anchors-produce-{client}-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions)
    try:
        if client == "java-producer":
            return run_java(["produce", bootstrap, topic, str(records), str(value_bytes)], java)
        result = run_python(
            "bench_produce.py",
            ["--child", client, "--bootstrap-servers", bootstrap, "--topic", topic, "--records", str(records),
             "--value-bytes", str(value_bytes)],
        )  # fmt: skip
        result["records"] = result.pop("acked")
        return result
    finally:
        delete_topic(bootstrap, topic)


def share_child(bootstrap: str, topic: str, group: str, records: int) -> None:
    """kaflux ShareConsumer, as the Java child: an untimed round (the group's first member) reads
    the backlog's first half, then a new member the timed round of ``records`` records, touching
    every value; print one JSON line."""
    from consume_clients import peak_rss_mib

    t0 = time.perf_counter()
    warmup = share_round(bootstrap, topic, group, records)
    warmup_s = time.perf_counter() - t0
    result = share_round(bootstrap, topic, group, records)
    result.update(
        peak_rss_mib=peak_rss_mib(),
        warmup_s=warmup_s,
        warmup_records=warmup["records"],
        warmup_first_records_s=warmup["first_records_s"],
    )
    print(json.dumps(result))


def share_round(bootstrap: str, topic: str, group: str, records: int) -> dict[str, Any]:
    """One member reads ``records`` records, timed from its subscription to its last record (the
    Java round also counts the consumer's construction, its commit and its close: ``round_s``
    does too)."""
    from consume_clients import cpu_seconds

    from kaflux import ShareConsumer

    start = time.perf_counter()
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    consumer.subscribe([topic])
    seen = value_bytes = 0
    first: float | None = None
    t0, cpu0 = time.perf_counter(), cpu_seconds()
    deadline = time.monotonic() + 600
    while seen < records and time.monotonic() < deadline:
        for record in consumer.poll(1.0):
            value_bytes += len(record.value or b"")
            seen += 1
        if seen and first is None:
            first = time.perf_counter() - t0
    seconds, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
    consumer.commit_sync(30)
    consumer.close()
    round_s = time.perf_counter() - start
    return {"records": seen, "seconds": seconds, "cpu_s": cpu, "first_records_s": first, "round_s": round_s}


def share_run(
    client: str, bootstrap: str, records: int, partitions: int, value_bytes: int, java: tuple[str, str]
) -> dict[str, Any]:
    """A fresh topic holding 2 x ``records`` and a margin: the Java child's warm-up takes the first
    half, and its last poll may hand out up to a batch more than it counts."""
    topic = f"anchors-share-{client}-{uuid.uuid4().hex[:8]}"
    group = f"{topic}-group"
    write_backlog(bootstrap, topic, 2 * records + 10_000, partitions, value_bytes)
    try:
        run_java(["share-earliest", bootstrap, group], java)
        if client == "java-share":
            return run_java(["share", bootstrap, topic, str(records), group], java)
        return run_python(
            "bench_anchors.py",
            ["--share-child", "--bootstrap-servers", bootstrap, "--topic", topic, "--group", group,
             "--records", str(records)],
        )  # fmt: skip
    finally:
        delete_topic(bootstrap, topic)


# --- the parent ------------------------------------------------------------------------------------------


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from kaflux import AdminClient, NewTopic

    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions)], timeout=30)


def delete_topic(bootstrap: str, topic: str) -> None:
    """Free a topic's disk once its round is measured: at 10M records of 1 KiB each producer round
    writes 10 GB, which rounds would otherwise pile up on the broker's disk."""
    from kaflux import AdminClient

    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.delete_topics([topic], timeout=60)


#: the benchmark broker frees deleted topics' segments at once (Kafka's default waits a minute)
BROKER_CONFIG = {"log.segment.delete.delay.ms": 1000}


def write_backlog(bootstrap: str, topic: str, records: int, partitions: int, value_bytes: int) -> None:
    """The consumers' backlog, written with confluent-kafka (independent of the clients measured)."""
    from bench_produce import records_pool
    from confluent_kafka import Producer

    create_topic(bootstrap, topic, partitions)
    _, values = records_pool(min(records, 4096), value_bytes)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "queue.buffering.max.messages": 1_000_000}
    )
    for i in range(records):
        while True:
            try:
                producer.produce(topic, values[i & 4095], b"%08d" % i)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(600) != 0:
        raise SystemExit("backlog not fully produced")


def rotated(clients: list[str], round_no: int) -> list[str]:
    """The clients in round ``round_no``'s order: each round starts one client later, so that no
    client always runs first (the first run after a broker starts, or after the backlog is
    written, is the slow one)."""
    shift = round_no % len(clients) if clients else 0
    return clients[shift:] + clients[:shift]


def progress(client: str, result: dict[str, Any]) -> None:
    print(f"  {client}: {result['records'] / result['seconds']:,.0f} rec/s", file=sys.stderr)


def table(title: str, runs: dict[str, list[dict[str, Any]]], records: int, anchor: str) -> None:
    def med(client: str, key: str) -> float:
        values = [r[key] for r in runs[client] if r.get(key) is not None]
        return statistics.median(values) if values else float("nan")

    anchor_cpu = med(anchor, "cpu_s") / records * 1e6 if anchor in runs else float("nan")
    print(f"\n### {title}\n")
    print(
        "| client | rounds | rec/s (median) | rec/s (min-max) | µs CPU/record | "
        f"CPU/record x {anchor} | peak RSS MiB |"
    )
    print("|---|---|---|---|---|---|---|")
    for client, results in runs.items():
        rates = [r["records"] / r["seconds"] for r in results if r["seconds"]]
        cpu = med(client, "cpu_s") / max(1, statistics.median(r["records"] for r in results)) * 1e6
        print(
            f"| {client} | {len(results)} | {statistics.median(rates):,.0f} | "
            f"{min(rates):,.0f}-{max(rates):,.0f} | {cpu:.3f} | {cpu / anchor_cpu:.2f} | "
            f"{med(client, 'peak_rss_mib'):.0f} |"
        )
    jvm = [r for c, rs in runs.items() if c.startswith("java") for r in rs if "jvm_startup_s" in r]
    if jvm:
        print(
            f"\nJava: JVM start-up {statistics.median(r['jvm_startup_s'] for r in jvm):.2f} s "
            f"({statistics.median(r['jvm_startup_cpu_s'] for r in jvm):.2f} s CPU) and one untimed "
            f"warm-up round of the same work ({statistics.median(r['warmup_s'] for r in jvm):.1f} s) "
            "before each timed round, both excluded above."
        )


def share_timings(runs: dict[str, list[dict[str, Any]]]) -> None:
    """Each share client's time to its first records (median): in the untimed round, the fresh
    group's first member; in the timed round, a member joining a group already read from."""
    parts = []
    for client, results in runs.items():
        warm = [r["warmup_first_records_s"] for r in results if r.get("warmup_first_records_s") is not None]
        timed = [r["first_records_s"] for r in results if r.get("first_records_s") is not None]
        if warm and timed:
            parts.append(
                f"{client} {statistics.median(warm):.2f} s (fresh group) and "
                f"{statistics.median(timed):.2f} s (timed round)"
            )
    if parts:
        print(f"\nFirst records after: {'; '.join(parts)}.")
    # The whole timed round, from the consumer's construction to its close (the Java child's
    # "seconds" is that already).
    whole = {
        client: statistics.median(r.get("round_s", r["seconds"]) for r in results)
        for client, results in runs.items()
    }
    if whole:
        print(
            "\nTimed round from construction to close (median): "
            + "; ".join(f"{client} {seconds:.2f} s" for client, seconds in whole.items())
            + "."
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-servers", help="an Apache Kafka cluster to use instead of starting one")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sections", default="consumers,producers,share")
    parser.add_argument("--clients", default="", help="only these clients (comma-separated)")
    parser.add_argument("--share-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--group", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.share_child:
        share_child(args.bootstrap_servers, args.topic, args.group, args.records)
        return 0
    only = {c.strip() for c in args.clients.split(",") if c.strip()}
    sections = {s.strip() for s in args.sections.split(",")}

    from kaflux.devbrokers.apache_kafka import KafkaBroker

    java = java_classpath()
    broker = None
    bootstrap = args.bootstrap_servers
    if bootstrap is None:
        broker = KafkaBroker(config=BROKER_CONFIG, jvm_options=["-Xms1g", "-Xmx2g", "-XX:+UseG1GC"]).start(
            180
        )
        bootstrap = broker.bootstrap_servers
    try:
        print(
            f"Apache Kafka 4.4 at {bootstrap}; {args.records:,} records of {args.value_bytes} B values "
            f"(8 B keys), {args.partitions} partitions, {args.rounds} interleaved rounds, "
            f"{os.cpu_count()} CPUs"
        )
        if "consumers" in sections:
            topic = f"anchors-backlog-{uuid.uuid4().hex[:8]}"
            t0 = time.perf_counter()
            write_backlog(bootstrap, topic, args.records, args.partitions, args.value_bytes)
            print(f"backlog written in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
            clients = [c for c in CONSUMERS if not only or c in only]
            consume(clients[0], bootstrap, topic, args.records, java)  # untimed: warms the broker's cache
            runs: dict[str, list[dict[str, Any]]] = {c: [] for c in clients}
            for round_no in range(args.rounds):
                for client in rotated(clients, round_no):
                    runs[client].append(consume(client, bootstrap, topic, args.records, java))
                    print(
                        f"  {client}: {runs[client][-1]['records'] / runs[client][-1]['seconds']:,.0f} rec/s",
                        file=sys.stderr,
                    )
            table("Consumers", runs, args.records, "java-consumer")
        if "producers" in sections:
            clients = [c for c in PRODUCERS if not only or c in only]
            runs = {c: [] for c in clients}
            for round_no in range(args.rounds):
                for client in rotated(clients, round_no):
                    runs[client].append(
                        produce_run(client, bootstrap, args.records, args.partitions, args.value_bytes, java)
                    )
                    print(
                        f"  {client}: {runs[client][-1]['records'] / runs[client][-1]['seconds']:,.0f} rec/s",
                        file=sys.stderr,
                    )
            table("Producers", runs, args.records, "java-producer")
        if "share" in sections:
            clients = [c for c in SHARE if not only or c in only]
            runs = {c: [] for c in clients}
            for round_no in range(args.rounds):
                for client in rotated(clients, round_no):
                    runs[client].append(
                        share_run(client, bootstrap, args.records, args.partitions, args.value_bytes, java)
                    )
                    print(
                        f"  {client}: {runs[client][-1]['records'] / runs[client][-1]['seconds']:,.0f} rec/s",
                        file=sys.stderr,
                    )
            table("Share consumers", runs, args.records, "java-share")
            share_timings(runs)
    finally:
        if broker is not None:
            broker.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
