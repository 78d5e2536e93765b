"""``AdminClient.describe_producers`` (DescribeProducers, KIP-664) on real brokers.

Apache Kafka answers it in full (the reference: the test of a described idempotent and an open
transactional producer passes there). noida-db offers the API (v0), but it answers every partition with no
producers, whatever an idempotent or transactional producer wrote: kafka-python's
``describe_producers`` gets the same (confluent-kafka has no such call), so the full answer is a
strict xfail there and the request and its errors are checked apart. Tansu and the mock lack the
API: the call fails at once with UnsupportedVersionError.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from kaflux import AdminClient, NewTopic, Producer, TopicPartition
from kaflux.admin import ProducerState
from kaflux.aio import AsyncAdminClient
from kaflux.devbrokers.brokers import Broker
from kaflux.devbrokers.mock_cluster import MockCluster
from kaflux.errors import InvalidArgumentError, UnknownTopicOrPartitionError, UnsupportedVersionError

kafka_admin = pytest.importorskip("kafka.admin")
kafka = pytest.importorskip("kafka")

pytestmark = pytest.mark.integration

WAIT_S = 15.0
NOIDA_DEFECT = "DescribeProducers answers every partition with no active producers"


def peer_producers(bootstrap: str, tp: TopicPartition) -> list[Any]:
    """kafka-python's answer: the producer states of ``tp``."""
    peer = kafka_admin.KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    try:
        answer = peer.describe_producers([kafka.TopicPartition(tp.topic, tp.partition)])
        return list(answer[kafka.TopicPartition(tp.topic, tp.partition)].active_producers)
    finally:
        peer.close()


def create(bootstrap: str, topic: str, partitions: int) -> list[TopicPartition]:
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions)], timeout=WAIT_S)
    return [TopicPartition(topic, p) for p in range(partitions)]


@pytest.mark.parametrize(
    "kind",
    [
        "kafka",
        pytest.param(
            "noida",
            marks=pytest.mark.xfail(
                strict=True, raises=AssertionError, reason=f"noida-db defect: {NOIDA_DEFECT}"
            ),
        ),
    ],
)
def test_an_idempotent_and_an_open_transactional_producer_are_described(
    kind: str, request: pytest.FixtureRequest, topic_name: str
) -> None:
    bootstrap = request.getfixturevalue(kind).bootstrap_servers
    tp, _ = create(bootstrap, topic_name, 2)
    with Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True}) as idempotent:
        for _ in range(3):
            idempotent.send(topic_name, b"i", partition=0)
        idempotent.flush(WAIT_S)
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic_name}-txn"})
    try:
        txn.init_transactions(WAIT_S)
        txn.begin_transaction()
        txn.send(topic_name, b"t", partition=0)  # offset 3, left open
        txn.flush(WAIT_S)
        assert len(peer_producers(bootstrap, tp)) == 2  # the broker's answer (none on noida)
        with AdminClient({"bootstrap.servers": bootstrap}) as admin:
            txn_id = admin.describe_transactions([f"{topic_name}-txn"])[f"{topic_name}-txn"].producer_id
            states = admin.describe_producers([tp], timeout=WAIT_S)[tp]
            by_id = {s.producer_id: s for s in states}
            assert len(by_id) == 2 and txn_id in by_id
            assert by_id[txn_id].current_transaction_start_offset == 3
            [other] = [s for s in states if s.producer_id != txn_id]
            assert (other.last_sequence, other.current_transaction_start_offset) == (2, None)
            txn.commit_transaction(WAIT_S)
            # The coordinator writes the commit marker after EndTxn answers (Kafka does so a moment
            # later): the partition's leader forgets the open transaction once the marker is in.
            deadline = time.monotonic() + WAIT_S
            while True:
                after = {s.producer_id: s for s in admin.describe_producers([tp], timeout=WAIT_S)[tp]}
                if after[txn_id].current_transaction_start_offset is None or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            assert after[txn_id].current_transaction_start_offset is None
    finally:
        txn.close()


@pytest.mark.parametrize("broker", ["kafka", "noida"], indirect=True)
def test_each_partition_is_answered_by_its_leader_or_a_named_broker(broker: Broker, topic_name: str) -> None:
    bootstrap = broker.bootstrap_servers
    tps = create(bootstrap, topic_name, 2)
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        [node] = admin.describe_cluster().nodes
        by_leader = admin.describe_producers(reversed(tps), timeout=WAIT_S)
        by_broker = admin.describe_producers(tps, broker_id=node.node_id, timeout=WAIT_S)
        assert list(by_leader) == list(by_broker) == tps, "every partition, sorted"
        for found in (by_leader, by_broker):
            assert all(isinstance(s, ProducerState) for states in found.values() for s in states)
        with pytest.raises(InvalidArgumentError, match=f"broker {node.node_id + 100} is not in the cluster"):
            admin.describe_producers(tps, broker_id=node.node_id + 100, timeout=WAIT_S)
        start = time.monotonic()
        with pytest.raises(UnknownTopicOrPartitionError, match="does not exist"):
            admin.describe_producers([TopicPartition(f"{topic_name}-none", 0)], timeout=WAIT_S)
        assert time.monotonic() - start < 5, "not retried until the timeout"


def _fails_fast_unsupported(bootstrap: str, tp: TopicPartition) -> None:
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        start = time.monotonic()
        with pytest.raises(UnsupportedVersionError, match="lacks DescribeProducers"):
            admin.describe_producers([tp], timeout=WAIT_S)
        assert time.monotonic() - start < 5, "failed at once, not at the timeout"


def test_tansu_lacks_describe_producers_and_the_call_fails_at_once(tansu: Broker, topic_name: str) -> None:
    [tp] = create(tansu.bootstrap_servers, topic_name, 1)
    _fails_fast_unsupported(tansu.bootstrap_servers, tp)


def test_the_mock_lacks_describe_producers_and_the_call_fails_at_once(
    mock_cluster: MockCluster, topic_name: str
) -> None:
    with Producer({"bootstrap.servers": mock_cluster.bootstrap_servers}) as producer:
        producer.send(topic_name, b"x", partition=0)  # the mock creates the topic
        producer.flush(WAIT_S)
    _fails_fast_unsupported(mock_cluster.bootstrap_servers, TopicPartition(topic_name, 0))


@pytest.mark.parametrize("broker", ["kafka", "noida"], indirect=True)
def test_the_asyncio_client_describes_producers(broker: Broker, topic_name: str) -> None:
    [tp] = create(broker.bootstrap_servers, topic_name, 1)

    async def main() -> dict[TopicPartition, list[ProducerState]]:
        async with AsyncAdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
            found: dict[TopicPartition, list[ProducerState]] = await admin.describe_producers(
                [tp], timeout=WAIT_S
            )
            return found

    assert list(asyncio.run(main())) == [tp]
