"""close() of a group member (Apache Kafka): the revocation callback runs before the
consumer counts as closed, so the commit-on-revoke pattern keeps its last commit."""

from __future__ import annotations

import pytest

from kaflux import Consumer, ConsumerRebalanceListener, OffsetAndMetadata, TopicPartition
from kaflux.devbrokers.brokers import Broker

from support.group_helpers import WAIT_S, create_topic, member_config, new_group, produce, wait_until

pytestmark = pytest.mark.integration

PARTITIONS = 2
RECORDS = 20


class CommitOnRevoke(ConsumerRebalanceListener):
    """The pattern users are taught: commit what was processed when partitions are revoked."""

    def __init__(self) -> None:
        self.consumer: Consumer | None = None
        self.processed: dict[TopicPartition, int] = {}
        self.errors: list[BaseException] = []

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        pass

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        assert self.consumer is not None
        offsets = {tp: OffsetAndMetadata(o) for tp, o in self.processed.items() if tp in partitions}
        try:
            self.consumer.commit_sync(offsets)
        except BaseException as exc:
            self.errors.append(exc)
            raise


def test_commit_sync_in_on_partitions_revoked_during_close_is_kept(kafka: Broker, topic_name: str) -> None:
    create_topic(kafka.bootstrap_servers, topic_name, PARTITIONS)
    produce(kafka.bootstrap_servers, topic_name, {p: [b"r%d" % i for i in range(RECORDS)] for p in range(2)})
    group = new_group()
    listener = CommitOnRevoke()
    consumer = Consumer(member_config(kafka.bootstrap_servers, group, "range"))
    listener.consumer = consumer
    consumer.subscribe([topic_name], listener=listener)
    read = 0
    try:

        def poll_some() -> bool:
            nonlocal read
            for record in consumer.poll(0.2):
                listener.processed[TopicPartition(record.topic, record.partition)] = record.offset + 1
                read += 1
            return read >= 2 * RECORDS

        wait_until(poll_some, WAIT_S, lambda: f"read {read} of {2 * RECORDS}")
    finally:
        consumer.close()
    assert listener.errors == []
    expected = {TopicPartition(topic_name, p): RECORDS for p in range(PARTITIONS)}
    assert listener.processed == expected
    with Consumer(member_config(kafka.bootstrap_servers, group)) as check:
        committed = check.committed(set(expected), timeout=WAIT_S)
    assert {tp: om.offset for tp, om in committed.items() if om is not None} == expected
