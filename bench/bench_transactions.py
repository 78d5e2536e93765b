"""Transactions per second: transactions v1 against v2 (KIP-890) on Apache Kafka 4.4.

    python bench/bench_transactions.py                    # 300 transactions, 3 rounds, ~2 min
    python bench/bench_transactions.py --transactions 500 --rounds 5 --records 10

Starts two single-node Kafka 4.4 brokers from the jar cache: one formatted by default
(``transaction.version=2``: the producer sends no AddPartitionsToTxn/AddOffsetsToTxn and gets a
new epoch from every EndTxn) and one formatted with ``transaction.version=1`` (AddPartitionsToTxn
and AddOffsetsToTxn round trips). On each, one transactional producer runs ``--transactions``
transactions back to back, in two workloads:

* ``produce``: begin, ``--records`` records to one partition, commit;
* ``read-process-write``: the same plus ``send_offsets_to_transaction`` for a consumer group
  (what an exactly-once pipeline does per transaction).

Rounds alternate between the brokers. Reported per setup: transactions per second (median of
the rounds, min-max), and the process CPU per transaction (both threads of the client; the
brokers are other processes). Each setup warms up with 20 transactions first.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid

from kaflux import AdminClient, GroupMetadata, NewTopic, OffsetAndMetadata, Producer, TopicPartition
from kaflux.devbrokers import KafkaBroker

WARMUP = 20


def run(bootstrap: str, workload: str, transactions: int, records: int) -> tuple[float, float]:
    """One round: returns (transactions per second, CPU seconds per transaction)."""
    suffix = uuid.uuid4().hex[:8]
    topic = f"bench-tx-{suffix}"
    source = TopicPartition(f"bench-in-{suffix}", 0)
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 1, 1), NewTopic(source.topic, 1, 1)], timeout=60.0)
    group = GroupMetadata(f"bench-g-{suffix}")
    with Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"bench-{suffix}", "linger.ms": 0}
    ) as p:
        p.init_transactions(60.0)

        def one(n: int) -> None:
            p.begin_transaction()
            for _ in range(records):
                p.send(topic, b"x" * 100, partition=0)
            if workload == "read-process-write":
                p.send_offsets_to_transaction({source: OffsetAndMetadata(n + 1)}, group)
            p.commit_transaction(60.0)

        for n in range(WARMUP):
            one(n)
        cpu0, t0 = time.process_time(), time.monotonic()
        for n in range(WARMUP, WARMUP + transactions):
            one(n)
        wall, cpu = time.monotonic() - t0, time.process_time() - cpu0
    return transactions / wall, cpu / transactions


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--transactions", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records", type=int, default=1, help="records per transaction")
    args = parser.parse_args()
    brokers = {
        "v2 (transaction.version=2)": KafkaBroker(),
        "v1 (transaction.version=1)": KafkaBroker(features={"transaction.version": 1}),
    }
    try:
        for broker in brokers.values():
            broker.start(240.0)
        results: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for _ in range(args.rounds):
            for workload in ("produce", "read-process-write"):
                for name, broker in brokers.items():
                    r = run(broker.bootstrap_servers, workload, args.transactions, args.records)
                    results.setdefault((workload, name), []).append(r)
                    print(
                        f"{workload:20} {name:28} {r[0]:8.1f} tx/s  {r[1] * 1e3:6.2f} ms CPU/tx", flush=True
                    )
        print()
        print(f"{args.transactions} transactions of {args.records} record(s), {args.rounds} rounds")
        print("| workload | protocol | tx/s (median) | min-max | ms CPU per tx |")
        print("|---|---|---|---|---|")
        for (workload, name), rs in results.items():
            rates = sorted(r[0] for r in rs)
            cpu = statistics.median(r[1] for r in rs)
            print(
                f"| {workload} | {name} | {statistics.median(rates):,.0f} | "
                f"{rates[0]:,.0f}-{rates[-1]:,.0f} | {cpu * 1e3:.2f} |"
            )
    finally:
        for broker in brokers.values():
            broker.cleanup()


if __name__ == "__main__":
    main()
