"""Recovery after SIGKILL of a partition leader on a 3-node Apache Kafka 4.4 cluster: kaflux's
idempotent producer beside Apache Kafka's own Java producer, under the same load and fault.

Each round creates a topic (3 partitions, replication 3, ``min.insync.replicas=2``), runs one
producer (``acks=all``, idempotent, 200 records/s round-robin, ``request.timeout.ms=10000``) for
4 s, SIGKILLs the leader of partition 0, restarts it 2 s later, and keeps producing 6 s more.
"Recovered after" is from the kill to the end of the last stretch of more than a second in which
some partition had nothing acknowledged. Rounds alternate kaflux and Java.

    python bench/bench_fault_recovery.py --rounds 2

Needs Java 17 and Apache Kafka's jars (``scripts/bootstrap.sh --test`` resolves them).
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from kaflux import AdminClient, NewTopic
from kaflux.devbrokers.apache_kafka import KafkaCluster

from support.cluster_load import ClusterLoad
from support.java_client import JavaProcess

PARTITIONS = 3
RATE = 200
PRODUCER = {
    "acks": "all",
    "enable.idempotence": "true",
    "linger.ms": "5",
    "request.timeout.ms": "10000",
    "delivery.timeout.ms": "180000",
}


def recovered_after(acks: list[tuple[int, float]], since: float, until: float, gap_s: float = 1.0) -> float:
    end = since
    for p in range(PARTITIONS):
        points = [since, *sorted(t for q, t in acks if q == p and since < t <= until), until]
        for a, b in itertools.pairwise(points):
            if b - a > gap_s and b < until:
                end = max(end, b)
    return end - since


def new_topic(bootstrap: str) -> tuple[str, int]:
    """A fresh topic and the leader of its partition 0."""
    topic = f"bench-faults-{uuid.uuid4().hex[:8]}"
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics(
            [NewTopic(topic, PARTITIONS, replication_factor=3, config={"min.insync.replicas": "2"})],
            timeout=60,
        )
        time.sleep(3)
        (description,) = admin.describe_topics([topic], timeout=30).values()
    return topic, description.partitions[0].leader


def kill_and_restart(cluster: KafkaCluster, node_id: int) -> float:
    node = cluster.node(node_id)
    killed_at = time.monotonic()
    node.kill()
    time.sleep(2.0)
    node.restart(timeout=180)
    return killed_at


def kaflux_round(cluster: KafkaCluster) -> str:
    topic, victim = new_topic(cluster.bootstrap_servers)
    load = ClusterLoad(cluster.bootstrap_servers, topic, PARTITIONS, f"g-{topic}", rate=RATE).start()
    time.sleep(4)
    killed_at = kill_and_restart(cluster, victim)
    time.sleep(6)
    until = time.monotonic()
    acks = load.ack_times()
    outcome = load.finish()
    took = recovered_after(acks, killed_at, until)
    return f"kaflux: killed node {victim}, recovered after {took:.2f} s; {outcome.summary()}"


def java_round(cluster: KafkaCluster) -> str:
    topic, victim = new_topic(cluster.bootstrap_servers)
    spec = {
        "config": {"bootstrap.servers": cluster.bootstrap_servers, **PRODUCER},
        "topic": topic,
        "partitions": PARTITIONS,
        "rate": RATE,
    }
    with JavaProcess("load", spec) as proc:
        assert proc.next_line(60)["event"] == "started"
        time.sleep(4)
        killed_at = kill_and_restart(cluster, victim)
        time.sleep(6)
        until = time.monotonic()
        proc.send("stop")
        out = proc.next_line(120)
    acks = [(int(p), float(at)) for _, p, at in out["acks"]]
    took = recovered_after(acks, killed_at, until)
    failed = out["failed"]
    return f"java:   killed node {victim}, recovered after {took:.2f} s; acked {len(acks)}, failed {failed}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2, help="rounds per client")
    args = parser.parse_args()
    with KafkaCluster(3) as cluster:
        for _ in range(args.rounds):
            print(kaflux_round(cluster), flush=True)
            print(java_round(cluster), flush=True)


if __name__ == "__main__":
    main()
