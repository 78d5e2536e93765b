"""The demo job: produce a realistic event stream and read it back. [app]

``python -m kaflux.demo`` starts an embedded broker (Tansu) on a free loopback port unless
``--bootstrap-servers`` names a cluster, creates a topic, produces JSON page-view events
with :class:`kaflux.Producer`, reads them back with :class:`kaflux.Consumer` (manual
assignment, commits in a consumer group) and prints a summary.

``python -m kaflux.demo --exactly-once`` (embedded noida-db, which implements transactions)
then runs an exactly-once consume-transform-produce loop over those events: a consumer group
member reads them, a transactional producer writes one enriched event per input and commits the
consumed offsets in the same transaction (``send_offsets_to_transaction``); one transaction is
deliberately aborted on the way. A ``read_committed`` consumer downstream then finds exactly one
output per input, none from the aborted transaction.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import sys
import time
from collections import Counter
from collections.abc import Iterator

from kaflux import AdminClient, Consumer, NewTopic, OffsetAndMetadata, Producer, TopicPartition
from kaflux.devbrokers.kinds import start_broker
from kaflux.errors import KafkaTimeoutError, TransactionAbortableError

PAGES = ["/", "/search", "/product/1", "/product/2", "/product/3", "/cart", "/checkout", "/help"]
COUNTRIES = ["DE", "FR", "IN", "US", "BR", "JP", "NG", "GB"]


def page_views(count: int, seed: int = 7) -> Iterator[tuple[bytes, bytes]]:
    """``count`` page-view events as (user key, JSON value)."""
    rng = random.Random(seed)
    start_ms = 1_790_000_000_000
    for i in range(count):
        user = f"user-{rng.randrange(500):04d}"
        event = {
            "user": user,
            "page": rng.choice(PAGES),
            "country": rng.choice(COUNTRIES),
            "ts": start_ms + i * 37,
            "duration_ms": rng.randrange(50, 30_000),
        }
        yield user.encode(), json.dumps(event, separators=(",", ":")).encode()


@contextlib.contextmanager
def cluster(bootstrap: str | None, kind: str = "tansu") -> Iterator[str]:
    """Yield bootstrap servers: the given cluster, or an embedded broker for the duration."""
    if bootstrap:
        yield bootstrap
        return
    print(f"starting an embedded {kind} broker on 127.0.0.1 ...", flush=True)
    with start_broker(kind) as broker:
        print(f"broker up at {broker.bootstrap_servers} (pid {broker.pid})", flush=True)
        yield broker.bootstrap_servers


def run(bootstrap: str, topic: str, records: int, partitions: int, compression: str) -> int:
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions)], exist_ok=True, timeout=30)

    t0 = time.monotonic()
    with Producer(
        {"bootstrap.servers": bootstrap, "compression.type": compression, "linger.ms": 10}
    ) as producer:
        futures = [producer.send(topic, value, key=key) for key, value in page_views(records)]
        producer.flush(60)
    failures = sum(1 for f in futures if f.exception() is not None)
    produce_s = time.monotonic() - t0
    print(f"produced {records - failures:,} page views to {topic!r} in {produce_s:.2f} s ({compression})")

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kaflux-demo",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        },
        value_deserializer=lambda v: json.loads(v) if v is not None else None,
    )
    pages: Counter[str] = Counter()
    countries: Counter[str] = Counter()
    per_partition: Counter[int] = Counter()
    seen = 0
    t0 = time.monotonic()
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + 60
        while seen < records - failures and time.monotonic() < deadline:
            for record in consumer.poll(1.0):
                pages[record.value["page"]] += 1
                countries[record.value["country"]] += 1
                per_partition[record.partition] += 1
                seen += 1
        consumer.commit_sync(timeout=30)
    finally:
        consumer.close(10)
    consume_s = time.monotonic() - t0

    print(f"read back {seen:,} events in {consume_s:.2f} s ({seen / max(consume_s, 1e-9):,.0f} records/s)\n")
    print(f"{'page':<14}{'views':>8}   {'country':<8}{'views':>8}")
    for (page, n), (country, m) in zip(pages.most_common(8), countries.most_common(8), strict=False):
        print(f"{page:<14}{n:>8,}   {country:<8}{m:>8,}")
    print("\nrecords per partition: " + ", ".join(f"{p}: {n:,}" for p, n in sorted(per_partition.items())))
    ok = seen == records - failures and failures == 0
    print("\nresult: " + ("OK, every event produced was read back" if ok else "MISMATCH"))
    return 0 if ok else 1


def _rewind(consumer: Consumer) -> None:
    """Go back to the group's committed offsets (the input of an aborted transaction is read
    again)."""
    for tp, committed in consumer.committed(consumer.assignment(), timeout=30).items():
        if committed is None:
            consumer.seek_to_beginning([tp])
        else:
            consumer.seek(tp, committed)


def exactly_once(bootstrap: str, source: str, records: int, partitions: int) -> int:
    """Consume ``source``, write one enriched event per input to ``<source>-enriched``, commit
    outputs and consumed offsets in one transaction per poll; abort one on purpose."""
    sink = f"{source}-enriched"
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(sink, partitions)], exist_ok=True, timeout=30)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kaflux-demo-enricher",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "max.poll.records": 2000,
        }
    )
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "kaflux-demo-enricher-1"})
    committed = aborted = transactions = 0
    t0 = time.monotonic()
    try:
        producer.init_transactions(30)
        consumer.subscribe([source])
        deadline = time.monotonic() + 120
        while committed < records and time.monotonic() < deadline:
            batch = consumer.poll(1.0)
            if not batch:
                continue
            producer.begin_transaction()
            try:
                for record in batch:
                    event = json.loads(record.value)
                    event["slow"] = event["duration_ms"] > 10_000
                    producer.send(sink, json.dumps(event, separators=(",", ":")).encode(), key=record.key)
                if aborted == 0 and transactions == 1:
                    # As if the process had failed here: none of this transaction is visible.
                    raise TransactionAbortableError("the demo aborts its second transaction on purpose")
                positions = {tp: OffsetAndMetadata(consumer.position(tp)) for tp in consumer.assignment()}
                producer.send_offsets_to_transaction(positions, consumer.group_metadata(), 30)
                producer.commit_transaction(30)
                committed += len(batch)
                transactions += 1
            except (TransactionAbortableError, KafkaTimeoutError) as error:
                producer.abort_transaction(30)
                aborted += len(batch)
                print(f"aborted a transaction of {len(batch):,} events ({error})")
                _rewind(consumer)
    finally:
        producer.close(30)
        consumer.close(10)
    eos_s = time.monotonic() - t0
    print(
        f"exactly once: {committed:,} events enriched in {transactions} transactions in {eos_s:.2f} s "
        f"({aborted:,} events of an aborted transaction read again)"
    )

    reader = Consumer(
        {"bootstrap.servers": bootstrap, "isolation.level": "read_committed", "auto.offset.reset": "earliest"}
    )
    outputs: Counter[bytes | None] = Counter()
    try:
        tps = [TopicPartition(sink, p) for p in range(partitions)]
        reader.assign(tps)
        ends = reader.end_offsets(tps, timeout=30)
        deadline = time.monotonic() + 60
        while any(reader.position(tp, timeout=30) < ends[tp] for tp in tps) and time.monotonic() < deadline:
            for record in reader.poll(1.0):
                outputs[record.value] += 1
    finally:
        reader.close(10)
    seen = sum(outputs.values())
    duplicates = sum(n - 1 for n in outputs.values() if n > 1)
    ok = seen == records and duplicates == 0
    print(f"read_committed downstream: {seen:,} enriched events, {duplicates} duplicates")
    print("\nresult: " + ("OK, exactly one output per input" if ok else "MISMATCH"))
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kaflux.demo",
        description="The demo job: produce a realistic event stream and read it back.",
    )
    parser.add_argument(
        "--bootstrap-servers",
        default=os.environ.get("KAFLUX_BOOTSTRAP_SERVERS") or None,
        help="a Kafka cluster to use instead of the embedded broker (default: $KAFLUX_BOOTSTRAP_SERVERS)",
    )
    parser.add_argument("--topic", default="page-views")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--compression", default="lz4", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    parser.add_argument(
        "--exactly-once",
        action="store_true",
        help="then run an exactly-once consume-transform-produce loop (embedded broker: noida-db)",
    )
    args = parser.parse_args(argv)
    kind = "noida" if args.exactly_once else "tansu"
    with cluster(args.bootstrap_servers, kind) as bootstrap:
        status = run(bootstrap, args.topic, args.records, args.partitions, args.compression)
        if args.exactly_once and status == 0:
            print()
            status = exactly_once(bootstrap, args.topic, args.records, args.partitions)
        return status


if __name__ == "__main__":
    sys.exit(main())
