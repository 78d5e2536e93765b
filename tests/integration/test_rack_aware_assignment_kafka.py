"""Rack-aware assignment (KIP-881) in the classic protocol on a three-node Apache Kafka 4.4
cluster whose nodes are in racks rack-1..rack-3: a topic with one replica per partition spread
over the nodes, and three consumers with ``client.rack`` rack-1, rack-2 and rack-3. The leader
reads each partition's replica racks from the metadata and its assignor ("range" or
"cooperative-sticky") gives every consumer exactly the partitions whose replica is in its rack.
Java's consumers (kafka-clients 4.4) get the same assignment, alone and in a group that a kaflux
member leads.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Iterator

import pytest

from kaflux import Consumer, TopicPartition
from kaflux.admin import AdminClient, NewTopic
from kaflux.devbrokers.apache_kafka import KafkaCluster
from kaflux.errors import UnknownTopicOrPartitionError

from support.java_client import JavaMember
from support.kafka_helpers import started_kafka_cluster

pytestmark = pytest.mark.integration

WAIT_S = 120.0
PARTITIONS = 6
RACKS = ("rack-1", "rack-2", "rack-3")


@pytest.fixture(scope="module")
def cluster() -> Iterator[KafkaCluster]:
    """One cluster for the module (three nodes start slowly on a loaded machine)."""
    with started_kafka_cluster(300, racks=RACKS) as kafka:
        yield kafka


def _topic_by_rack(bootstrap: str) -> tuple[str, dict[str, set[TopicPartition]]]:
    """A new topic of PARTITIONS partitions with one replica each, partition ``p`` on node
    ``p % 3 + 1`` (Kafka's own placement need not be even); the partitions on each rack (node
    ``n`` is in ``rack-n``), as the metadata reports them once the moves are done."""
    topic = f"racks-{uuid.uuid4().hex[:8]}"
    wanted = {TopicPartition(topic, p): [p % 3 + 1] for p in range(PARTITIONS)}
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)], timeout=WAIT_S)
        deadline = time.monotonic() + WAIT_S
        moved = False
        while True:  # every node learns of the topic shortly after the controller made it
            try:
                described = admin.describe_topics([topic], timeout=WAIT_S)[topic]
                placed = {TopicPartition(topic, p.partition): p.replicas for p in described.partitions}
                if placed == wanted and all(p.leader == p.replicas[0] for p in described.partitions):
                    break
                if not moved and len(placed) == PARTITIONS:
                    errors = admin.alter_partition_reassignments(dict(wanted), timeout=WAIT_S)
                    assert all(e is None for e in errors.values()), errors
                    moved = True
            except UnknownTopicOrPartitionError:
                pass
            assert time.monotonic() < deadline, "the topic did not appear on the wanted nodes"
            time.sleep(0.2)
    by_rack: dict[str, set[TopicPartition]] = {rack: set() for rack in RACKS}
    for tp, replicas in placed.items():
        by_rack[f"rack-{replicas[0]}"].add(tp)
    return topic, by_rack


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_each_consumer_gets_the_partitions_in_its_rack(cluster: KafkaCluster, assignor: str) -> None:
    bootstrap = cluster.bootstrap_servers
    topic, by_rack = _topic_by_rack(bootstrap)
    group = f"racks-{assignor}-{uuid.uuid4().hex[:6]}"
    consumers = {
        rack: Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.protocol": "classic",
                "partition.assignment.strategy": [assignor],
                "client.rack": rack,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        for rack in RACKS
    }
    try:
        for consumer in consumers.values():
            consumer.subscribe([topic])
        deadline = time.monotonic() + WAIT_S
        stable_since: float | None = None
        while True:
            for consumer in consumers.values():
                consumer.poll(0.1)
            seen = {rack: consumer.assignment() for rack, consumer in consumers.items()}
            if seen == by_rack:
                # a cooperative group may still be finishing its second round: stay a while
                stable_since = stable_since or time.monotonic()
                if time.monotonic() - stable_since > 3.0:
                    break
            else:
                stable_since = None
            assert time.monotonic() < deadline, f"assignment {seen}, expected {by_rack}"
    finally:
        for consumer in consumers.values():
            consumer.close()
    assert seen == by_rack


def _config(bootstrap: str, group: str, assignor: str, rack: str) -> dict[str, object]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": "classic",
        "partition.assignment.strategy": assignor,  # one name: Java takes it too
        "client.rack": rack,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }


def _stop(members: Iterable[JavaMember]) -> None:
    """Close the Java members still running (a dead one already failed the test)."""
    for m in members:
        if m.died() is None:
            m.stop()


def _numbers(partitions: set[TopicPartition]) -> frozenset[int]:
    return frozenset(tp.partition for tp in partitions)


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_java_gets_the_same_assignment_alone_and_under_a_kaflux_leader(
    cluster: KafkaCluster, assignor: str
) -> None:
    bootstrap = cluster.bootstrap_servers
    topic, by_rack = _topic_by_rack(bootstrap)
    expected = {rack: _numbers(parts) for rack, parts in by_rack.items()}

    # Three Java members: Java's leader, Java's assignor.
    group = f"racks-java-{assignor}-{uuid.uuid4().hex[:6]}"
    java = {
        rack: JavaMember(f"java-{rack}", _config(bootstrap, group, assignor, rack), [topic]) for rack in RACKS
    }
    try:
        deadline = time.monotonic() + WAIT_S
        while {rack: m.owned for rack, m in java.items()} != expected:
            for m in java.values():
                assert m.died() is None, m.died()
            assert time.monotonic() < deadline, f"Java: { ({r: sorted(m.owned) for r, m in java.items()}) }"
            time.sleep(0.2)
    finally:
        _stop(java.values())

    # A kaflux member joins first and leads; two Java members join it and follow its assignment.
    group = f"racks-mixed-{assignor}-{uuid.uuid4().hex[:6]}"
    leader = Consumer(_config(bootstrap, group, assignor, RACKS[0]))
    followers: dict[str, JavaMember] = {}
    try:
        leader.subscribe([topic])
        deadline = time.monotonic() + WAIT_S
        while len(leader.assignment()) != PARTITIONS:
            assert time.monotonic() < deadline, f"kaflux alone owns {leader.assignment()}"
            leader.poll(0.1)
        followers = {
            rack: JavaMember(f"java-{rack}", _config(bootstrap, group, assignor, rack), [topic])
            for rack in RACKS[1:]
        }
        deadline = time.monotonic() + WAIT_S
        stable_since: float | None = None
        while True:
            leader.poll(0.1)
            seen = {RACKS[0]: _numbers(leader.assignment())} | {r: m.owned for r, m in followers.items()}
            for m in followers.values():
                assert m.died() is None, m.died()
            if seen == expected:
                stable_since = stable_since or time.monotonic()
                if time.monotonic() - stable_since > 3.0:
                    break
            else:
                stable_since = None
            assert time.monotonic() < deadline, f"mixed group: {seen}, expected {expected}"
    finally:
        _stop(followers.values())
        leader.close()
