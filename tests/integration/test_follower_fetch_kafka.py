"""Follower fetching (KIP-392) on a three-node Apache Kafka 4.4 cluster whose nodes are in racks
rack-1..rack-3 with the rack-aware replica selector: a consumer with ``client.rack=rack-2``
reads partitions led by nodes 1 and 3 from node 2, its rack's replica, as the per-node metrics
(``consumer-node-metrics``) show; a consumer without a rack reads them from their leaders.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from kaflux import Consumer, Producer, TopicPartition
from kaflux.admin import AdminClient, NewTopic
from kaflux.devbrokers.apache_kafka import KafkaCluster
from kaflux.errors import UnknownTopicOrPartitionError

from support.kafka_helpers import started_kafka_cluster

pytestmark = pytest.mark.integration

WAIT_S = 90.0
RECORDS = 300
VALUE = b"x" * 1000


@pytest.fixture(scope="module")
def cluster() -> Iterator[KafkaCluster]:
    with started_kafka_cluster(240) as kafka:
        yield kafka


def _node_metric(metrics: dict[str, dict[str, float]], node: int, name: str) -> float:
    for group, values in metrics.items():
        if group.startswith("consumer-node-metrics") and f"node-{node}" in group:
            return values.get(name, 0.0)
    return 0.0


def _read_all(
    bootstrap: str, partitions: list[TopicPartition], rack: str | None
) -> dict[str, dict[str, float]]:
    config: dict[str, object] = {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}
    if rack is not None:
        config["client.rack"] = rack
    with Consumer(config) as consumer:
        consumer.assign(partitions)
        got = 0
        deadline = time.monotonic() + WAIT_S
        while got < RECORDS * len(partitions) // 3:
            assert time.monotonic() < deadline, f"read {got} records only"
            got += len(consumer.poll(0.5))
        return consumer.metrics()


def test_a_rack_2_consumer_fetches_from_node_2(cluster: KafkaCluster) -> None:
    b = cluster.bootstrap_servers
    topic = f"follower-{uuid.uuid4().hex[:8]}"
    with AdminClient({"bootstrap.servers": b}) as admin:
        admin.create_topics([NewTopic(topic, 3, 3)], timeout=WAIT_S)
        deadline = time.monotonic() + WAIT_S
        while True:  # every node learns of the topic shortly after the controller made it
            try:
                described = admin.describe_topics([topic], timeout=WAIT_S)[topic]
                break
            except UnknownTopicOrPartitionError:
                assert time.monotonic() < deadline, "the topic did not appear"
                time.sleep(0.2)
    led_elsewhere = [TopicPartition(topic, p.partition) for p in described.partitions if p.leader != 2]
    assert led_elsewhere, "every partition is led by node 2"
    with Producer({"bootstrap.servers": b, "acks": "all"}) as producer:
        for i in range(RECORDS):
            producer.send(topic, VALUE, partition=i % 3)
        producer.flush(WAIT_S)
    # each partition (RECORDS // 3 records) is replicated to all three nodes (acks=all)

    racked = _read_all(b, led_elsewhere, "rack-2")
    plain = _read_all(b, led_elsewhere, None)
    from_2 = _node_metric(racked, 2, "incoming-byte-total")
    plain_from_2 = _node_metric(plain, 2, "incoming-byte-total")
    wanted = len(VALUE) * RECORDS // 3 * len(led_elsewhere)
    print(
        f"\nbytes from node 2: rack-2 consumer {from_2:.0f}, no rack {plain_from_2:.0f}; "
        f"records' bytes {wanted}; "
        + ", ".join(
            f"node {n}: {_node_metric(racked, n, 'incoming-byte-total'):.0f} / "
            f"{_node_metric(plain, n, 'incoming-byte-total'):.0f}"
            for n in (1, 2, 3)
        )
    )
    assert from_2 >= wanted  # the records came from node 2, the rack-2 replica
    assert plain_from_2 < wanted / 10  # without a rack, from the leaders
