"""Share groups (KIP-932): does a member take no more than its share? kaflux ``ShareConsumer``
beside confluent-kafka's ``ShareConsumer``, two members of one group on librdkafka's mock cluster,
``max.poll.records=10``, implicit acknowledgement.

    python bench/share_fairness.py              # both scenarios, 3 runs per client
    python bench/share_fairness.py --runs 1

The mock gives each partition to one member; its C API puts both members on the same partitions
here (``tests/support/share_mock.py``), as Kafka's share assignor may.

* ``one-partition``: both members on partition 0, a backlog of 200 records there; the members
  are polled in turn, and each spends 0.2 s on a poll's records ("processing"). Reported: each
  member's records in 4 s, and when each had its first.
* ``three-brokers``: partitions 0-2, led by brokers 1-3, with 10 records each; one member is
  given them and polls until it has records, then processes them (does not poll) while the
  other member is given the same partitions and polls for 3 s. Reported: the first member's
  first poll, and what the other got meanwhile (all but what the first one holds).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

import confluent_kafka

from kaflux import ShareConsumer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from support.share_mock import ShareMockCluster

MAX_POLL_RECORDS = 10
PROCESSING_S = 0.2


def _member(client: str, bootstrap: str, group: str) -> tuple[Any, Callable[[float], int]]:
    config = {"bootstrap.servers": bootstrap, "group.id": group, "max.poll.records": MAX_POLL_RECORDS}
    if client == "kaflux":
        consumer: Any = ShareConsumer(config)
        return consumer, lambda timeout: len(consumer.poll(timeout))
    peer = confluent_kafka.ShareConsumer(config)
    return peer, lambda timeout: sum(1 for m in peer.poll(timeout) if m.error() is None)


def _setup(
    mock: ShareMockCluster, client: str
) -> tuple[str, str, Any, list[tuple[Any, Callable[[float], int]]]]:
    topic, group = f"fair-{uuid.uuid4().hex[:8]}", f"fair-{uuid.uuid4().hex[:8]}"
    producer = confluent_kafka.Producer({"bootstrap.servers": mock.bootstrap_servers, "linger.ms": 2})
    producer.produce(topic, b"create", partition=0)
    producer.flush(10)
    for partition in range(3):
        mock.set_leader(topic, partition, partition + 1)
    members = [_member(client, mock.bootstrap_servers, group) for _ in range(2)]
    for consumer, _ in members:
        consumer.subscribe([topic])
    deadline = time.monotonic() + 30
    while len(mock.members(group)) < 2 and time.monotonic() < deadline:
        for _, poll in members:
            poll(0.05)
    _idle(members, 3.0)  # both joined and settled
    return topic, group, producer, members


def _idle(members: list[tuple[Any, Callable[[float], int]]], seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _, poll in members:
            assert poll(0.05) == 0


def one_partition(mock: ShareMockCluster, client: str) -> dict[str, Any]:
    topic, group, producer, members = _setup(mock, client)
    for member_id in mock.members(group):
        mock.assign(group, member_id, topic, [0])
    _idle(members, 2.5)  # each learns of it on its next heartbeat (1 s)
    for i in range(200):
        producer.produce(topic, f"backlog-{i}".encode(), partition=0)
    producer.flush(10)
    counts, first = [0, 0], [None, None]
    start = time.monotonic()
    while time.monotonic() - start < 4.0:
        for i, (_, poll) in enumerate(members):
            got = poll(0.05)
            if got:
                counts[i] += got
                if first[i] is None:
                    first[i] = round(time.monotonic() - start, 2)
                time.sleep(PROCESSING_S)
    for consumer, _ in members:
        consumer.close()
    return {"counts_in_4s": counts, "first_record_s": first}


def three_brokers(mock: ShareMockCluster, client: str) -> dict[str, Any]:
    topic, group, producer, members = _setup(mock, client)
    ids = mock.members(group)
    for member_id in ids:
        mock.assign(group, member_id, topic, [])
    _idle(members, 2.5)
    for partition in range(3):
        for i in range(MAX_POLL_RECORDS):
            producer.produce(topic, f"held-{partition}-{i}".encode(), partition=partition)
    producer.flush(10)
    mock.assign(group, ids[0], topic, [0, 1, 2])
    busy = first = -1
    deadline = time.monotonic() + 30
    while busy < 0 and time.monotonic() < deadline:
        for i, (_, poll) in enumerate(members):
            got = poll(0.05)
            if got:
                busy, first = i, got
                break
    other_poll = members[1 - busy][1]
    mock.assign(group, ids[1], topic, [0, 1, 2])
    other = 0
    start = time.monotonic()
    while time.monotonic() - start < 3.0 + 1.0:  # 1 s for the heartbeat that brings the assignment
        other += other_poll(0.1)
    for consumer, _ in members:
        consumer.close()
    return {"busy_first_poll": first, "other_in_4s": other, "of": 3 * MAX_POLL_RECORDS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--clients", default="kaflux,confluent-kafka")
    args = parser.parse_args()
    with ShareMockCluster(heartbeat_interval_ms=1000) as mock:
        for scenario in (one_partition, three_brokers):
            for client in args.clients.split(","):
                for run in range(args.runs):
                    result = scenario(mock, client)
                    print(f"{scenario.__name__:14} {client:16} run {run + 1}: {result}", flush=True)


if __name__ == "__main__":
    main()
