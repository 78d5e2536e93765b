"""kaflux on librdkafka's mock cluster: three brokers with partition leaders spread over them, so
fetch sessions, leaders and the group coordinator live on different nodes."""

from __future__ import annotations

import time
from collections import defaultdict

import pytest
from confluent_kafka import Producer as PeerProducer

from kaflux import AdminClient, Consumer, OffsetAndMetadata, Producer, TopicPartition
from kaflux.devbrokers.mock_cluster import MockCluster

pytestmark = pytest.mark.integration

PARTITIONS = 4  # the mock creates every topic with 4 partitions
PER_PARTITION = 50


def _create(cluster: MockCluster, topic: str) -> None:
    """The mock has no CreateTopics: producing to a topic creates it."""
    peer = PeerProducer({"bootstrap.servers": cluster.bootstrap_servers})
    peer.produce(topic, b"", partition=0)
    assert peer.flush(10) == 0


def test_connects_at_the_mocks_api_versions_and_sees_three_brokers(mock_cluster: MockCluster) -> None:
    with AdminClient({"bootstrap.servers": mock_cluster.bootstrap_servers}) as admin:
        admin.list_topics(timeout=10)
    assert len(mock_cluster.bootstrap_servers.split(",")) == 3


def test_manual_assignment_over_several_leaders_reads_everything_in_order_and_commits(
    mock_cluster: MockCluster, topic_name: str
) -> None:
    servers = mock_cluster.bootstrap_servers
    # The mock picks each partition's leader at random: 1 topic in 27 has all four on one
    # broker, which does not test what this test is about; take another.
    for attempt in range(5):
        topic = f"{topic_name}-{attempt}"
        _create(mock_cluster, topic)
        with AdminClient({"bootstrap.servers": servers}) as admin:
            leaders = {p.partition: p.leader for p in admin.list_topics(timeout=10)[topic]}
        if len(set(leaders.values())) >= 2:
            break
    assert len(set(leaders.values())) >= 2, f"leaders not spread: {leaders}"
    topic_name = topic
    with Producer({"bootstrap.servers": servers, "linger.ms": 5}) as producer:
        futures = [
            producer.send(topic_name, b"%d-%d" % (p, i), partition=p)
            for i in range(PER_PARTITION)
            for p in range(PARTITIONS)
        ]
        producer.flush(30)
    assert all(f.result(0) is not None for f in futures)
    consumer = Consumer(
        {"bootstrap.servers": servers, "group.id": f"g-{topic_name}", "auto.offset.reset": "earliest"}
    )
    got: dict[int, list[bytes]] = defaultdict(list)
    try:
        tps = [TopicPartition(topic_name, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        deadline = time.monotonic() + 20
        while (
            sum(map(len, got.values())) < PARTITIONS * (PER_PARTITION + 1) - 3 and time.monotonic() < deadline
        ):
            for record in consumer.poll(0.5):
                got[record.partition].append(record.value or b"")
        for p in range(PARTITIONS):
            values = [v for v in got[p] if v]  # partition 0 starts with the creating record
            assert values == [b"%d-%d" % (p, i) for i in range(PER_PARTITION)], f"partition {p}"
        positions = {tp: consumer.position(tp, timeout=10) for tp in tps}
        consumer.commit_sync({tp: OffsetAndMetadata(o) for tp, o in positions.items()}, timeout=10)
        committed = consumer.committed(set(tps), timeout=10)
    finally:
        consumer.close(timeout=5)
    assert {tp: om.offset for tp, om in committed.items() if om is not None} == positions
