"""AdminClient's cluster and partition calls on real brokers, each result confirmed with
confluent-kafka (librdkafka): describe_cluster and describe_topics across librdkafka's three-broker
mock (partition leaders on different brokers) and on each broker; create_partitions on noida-db
(Tansu does not offer CreatePartitions); delete_records on noida-db, and on Tansu, whose
DeleteRecords is not implemented (strict xfail). Watermarks are checked where ListOffsets LATEST is
right (not on Tansu).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kaflux import AdminClient, NewTopic, Producer, TopicPartition
from kaflux.admin import PartitionDescription
from kaflux.devbrokers.brokers import Broker
from kaflux.devbrokers.mock_cluster import MockCluster
from kaflux.errors import InvalidPartitionsError, UnknownTopicOrPartitionError, UnsupportedVersionError

from support.admin_helpers import admin_on_the_tests_broker, drop_peers, peer  # noqa: F401  (drop_peers: an autouse fixture)

ck = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.integration

WAIT_S = 15.0
DELETE_RECORDS_DEFECT = (
    "DeleteRecords is advertised (v0-2) but not implemented by the memory storage: the broker thread "
    "panics and the connection closes"
)


@pytest.fixture
def admin(request: pytest.FixtureRequest) -> Iterator[AdminClient]:
    with admin_on_the_tests_broker(request) as client:
        yield client


def produce(bootstrap: str, topic: str, counts: dict[int, int]) -> None:
    """``counts[p]`` records to each partition ``p``, all acknowledged."""
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        futures = [producer.send(topic, b"v", partition=p) for p, n in counts.items() for _ in range(n)]
        producer.flush(WAIT_S)
    for future in futures:
        future.result(0)


def ck_watermarks(bootstrap: str, tp: TopicPartition) -> tuple[int, int]:
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "kx-watermarks"})
    try:
        low, high = consumer.get_watermark_offsets(ck.TopicPartition(tp.topic, tp.partition), timeout=WAIT_S)
        return low, high
    finally:
        consumer.close()


def ck_describe_topic(bootstrap: str, topic: str) -> Any:
    """confluent-kafka's describe_topics answer for ``topic``."""
    (future,) = peer(bootstrap).describe_topics(ck.TopicCollection([topic]), request_timeout=WAIT_S).values()
    return future.result(WAIT_S)


# -- describe_cluster ---------------------------------------------------------------------------


def ck_metadata(bootstrap: str, topic: str | None = None) -> Any:
    """confluent-kafka's view from a Metadata request (the mock offers no DescribeCluster, and
    librdkafka's describe_topics does not complete on it)."""
    return peer(bootstrap).list_topics(topic, timeout=WAIT_S)


def test_describe_cluster_on_the_three_broker_mock(mock_cluster: MockCluster, admin: AdminClient) -> None:
    theirs = ck_metadata(mock_cluster.bootstrap_servers)
    ours = admin.describe_cluster(timeout=WAIT_S)
    assert ours.cluster_id == theirs.cluster_id
    assert [(n.node_id, n.host, n.port) for n in ours.nodes] == [
        (b.id, b.host, b.port) for b in sorted(theirs.brokers.values(), key=lambda b: b.id)
    ]
    assert len(ours.nodes) == 3
    # The mock names controller 0, which is none of its brokers (1-3): no controller node.
    assert theirs.controller_id not in theirs.brokers and ours.controller is None


def test_describe_cluster(broker: Broker, admin: AdminClient) -> None:
    theirs = peer(broker.bootstrap_servers).describe_cluster(request_timeout=WAIT_S).result(WAIT_S)
    ours = admin.describe_cluster(timeout=WAIT_S)
    (node,) = ours.nodes
    assert (ours.cluster_id, node.node_id) == (theirs.cluster_id, theirs.nodes[0].id)
    assert ours.controller == node and theirs.controller.id == node.node_id


# -- describe_topics ----------------------------------------------------------------------------


def test_describe_topics_across_the_three_broker_mock(
    mock_cluster: MockCluster, admin: AdminClient, topic_name: str
) -> None:
    # The mock picks each partition's leader at random: 1 topic in 27 has all four on one
    # broker, which does not test what this test is about; take another topic then.
    for attempt in range(5):
        topic = f"{topic_name}-{attempt}"
        produce(mock_cluster.bootstrap_servers, topic, {0: 3, 1: 5, 2: 1})
        theirs = ck_metadata(mock_cluster.bootstrap_servers, topic).topics[topic]
        if len({p.leader for p in theirs.partitions.values()}) > 1:
            break
    ours = admin.describe_topics([topic], timeout=WAIT_S)[topic]
    assert (ours.name, ours.is_internal) == (topic, False)
    assert ours.partitions == [
        PartitionDescription(
            p.id,
            p.leader,
            list(p.replicas),
            list(p.isrs),
            *ck_watermarks(mock_cluster.bootstrap_servers, TopicPartition(topic, p.id)),
        )
        for p in sorted(theirs.partitions.values(), key=lambda p: p.id)
    ]
    assert [p.high_watermark for p in ours.partitions] == [3, 5, 1, 0]
    assert len({p.leader for p in ours.partitions}) > 1, "the leaders are on different brokers"


def _uuid(ck_uuid: Any) -> uuid.UUID | None:
    value = (ck_uuid.get_most_significant_bits() % 2**64) << 64 | ck_uuid.get_least_significant_bits() % 2**64
    return uuid.UUID(int=value) if value else None


def test_describe_topics(broker: Broker, admin: AdminClient, topic_name: str) -> None:
    admin.create_topics([NewTopic(topic_name, 2)], timeout=WAIT_S)
    with Producer({"bootstrap.servers": broker.bootstrap_servers}) as producer:
        for _ in range(3):  # one record per batch: Tansu's ListOffsets LATEST is right then
            producer.send(topic_name, b"v", partition=1).result(WAIT_S)
    theirs = ck_describe_topic(broker.bootstrap_servers, topic_name)
    ours = admin.describe_topics([topic_name], timeout=WAIT_S)[topic_name]
    assert ours.topic_id == _uuid(theirs.topic_id)  # noida reports no topic ids
    expected = []
    for p in sorted(theirs.partitions, key=lambda p: p.id):
        low, high = ck_watermarks(broker.bootstrap_servers, TopicPartition(topic_name, p.id))
        expected.append(
            PartitionDescription(
                p.id, p.leader.id, [r.id for r in p.replicas], [r.id for r in p.isr], low, high
            )
        )
    assert ours.partitions == expected
    assert [(p.low_watermark, p.high_watermark) for p in ours.partitions] == [(0, 0), (0, 3)]
    with pytest.raises(UnknownTopicOrPartitionError, match=f"topic '{topic_name}-nope' does not exist"):
        admin.describe_topics([topic_name, f"{topic_name}-nope"], timeout=WAIT_S)


# -- create_partitions --------------------------------------------------------------------------


@pytest.mark.parametrize("broker", ["kafka", "noida"], indirect=True)
def test_create_partitions(broker: Broker, admin: AdminClient, topic_name: str) -> None:
    admin.create_topics([NewTopic(topic_name, 2)], timeout=WAIT_S)
    admin.create_partitions({topic_name: 5}, timeout=WAIT_S)
    # Kafka answers once its controller committed the change; its broker's metadata cache, which
    # describes topics, gets it soon after
    deadline = time.monotonic() + WAIT_S
    while True:
        theirs = len(ck_describe_topic(broker.bootstrap_servers, topic_name).partitions)
        ours = len(admin.describe_topics([topic_name], timeout=WAIT_S)[topic_name].partitions)
        if theirs == ours == 5:
            break
        assert time.monotonic() < deadline, f"confluent-kafka describes {theirs} partitions, kaflux {ours}"
        time.sleep(0.1)
    with pytest.raises(InvalidPartitionsError, match="must exceed the current count"):
        admin.create_partitions({topic_name: 3}, timeout=WAIT_S)
    with pytest.raises(UnknownTopicOrPartitionError, match="create it first"):
        admin.create_partitions({f"{topic_name}-nope": 3}, timeout=WAIT_S)


def test_create_partitions_is_not_offered_by_tansu(
    tansu: Broker, admin: AdminClient, topic_name: str
) -> None:
    admin.create_topics([NewTopic(topic_name, 1)], timeout=WAIT_S)
    with pytest.raises(UnsupportedVersionError, match="CREATE_PARTITIONS"):
        admin.create_partitions({topic_name: 2}, timeout=WAIT_S)


# -- delete_records -----------------------------------------------------------------------------


@pytest.mark.broker_defect("tansu", reason=DELETE_RECORDS_DEFECT, raises=ck.KafkaException)
def test_delete_records_moves_the_low_watermark(broker: Broker, admin: AdminClient, topic_name: str) -> None:
    admin.create_topics([NewTopic(topic_name, 2)], timeout=WAIT_S)
    produce(broker.bootstrap_servers, topic_name, {0: 10, 1: 4})
    tp0, tp1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
    # The broker's behaviour, seen by librdkafka.
    (future,) = (
        peer(broker.bootstrap_servers)
        .delete_records([ck.TopicPartition(topic_name, 1, 1)], request_timeout=5, operation_timeout=5)
        .values()
    )
    assert future.result(10).low_watermark == 1

    assert admin.delete_records({tp0: 4, tp1: -1}, timeout=5) == {tp0: 4, tp1: 4}
    assert ck_watermarks(broker.bootstrap_servers, tp0) == (4, 10)
    assert ck_watermarks(broker.bootstrap_servers, tp1) == (4, 4)
    described = admin.describe_topics([topic_name], timeout=WAIT_S)[topic_name]
    assert [(p.low_watermark, p.high_watermark) for p in described.partitions] == [(4, 10), (4, 4)]
    with pytest.raises(UnknownTopicOrPartitionError, match=f"{topic_name}-7 does not exist"):
        admin.delete_records({TopicPartition(topic_name, 7): 0}, timeout=WAIT_S)
