"""``isolation.level`` with transactional data written by confluent-kafka's transactional producer.

Tansu does not send the aborted-transaction list in Fetch responses, so no client can filter aborted
records there; the test asserts that with a confluent-kafka read_committed consumer first, which is
what makes it a strict xfail on Tansu (``broker_defect``).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator

import pytest

from kaflux import AdminClient, Consumer, NewTopic, TopicPartition
from kaflux.devbrokers.brokers import Broker

ck = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.integration

WAIT_S = 15.0
ABORTED_DEFECT = "Fetch responses carry no aborted-transaction list, so aborted records are delivered"
LSO_DEFECT = "ListOffsets LATEST under read_committed answers 0 instead of the last stable offset"

COMMITTED_1 = [b"c1-%d" % i for i in range(5)]
ABORTED = [b"ab-%d" % i for i in range(4)]
COMMITTED_2 = [b"c2-%d" % i for i in range(3)]


def create_topic(broker: Broker, topic: str, partitions: int = 1) -> None:
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(topic, partitions)], timeout=WAIT_S)


@contextlib.contextmanager
def transactional_producer(broker: Broker) -> Iterator:
    """A confluent-kafka transactional producer, closed (aborting an open transaction) on exit."""
    producer = ck.Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "transactional.id": f"kx-tx-{uuid.uuid4().hex}",
            "linger.ms": 5,
        }
    )
    try:
        producer.init_transactions(WAIT_S)
        yield producer
    finally:
        producer.close()


def write_transactions(broker: Broker, topic: str) -> None:
    """Commit COMMITTED_1, abort ABORTED, commit COMMITTED_2, all to partition 0."""
    with transactional_producer(broker) as producer:
        for values, commit in ((COMMITTED_1, True), (ABORTED, False), (COMMITTED_2, True)):
            producer.begin_transaction()
            for v in values:
                producer.produce(topic, value=v, partition=0)
            producer.flush(WAIT_S)
            if commit:
                producer.commit_transaction(WAIT_S)
            else:
                producer.abort_transaction(WAIT_S)


def read_values_until_end(consumer: Consumer, tp: TopicPartition, end: int) -> list:
    """Poll until the position reaches ``end``; return every record returned."""
    deadline = time.monotonic() + WAIT_S
    got: list = []
    while consumer.position(tp, timeout=WAIT_S) < end:
        assert time.monotonic() < deadline, f"position {consumer.position(tp)} did not reach {end}"
        got.extend(consumer.poll(0.5))
    return got


def ck_read_committed_values(broker: Broker, topic: str, expected_count: int) -> list[bytes]:
    consumer = ck.Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": f"kx-ck-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    values: list[bytes] = []
    try:
        consumer.assign([ck.TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + WAIT_S
        while True:
            assert time.monotonic() < deadline, f"confluent read {values} without reaching the end"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == ck.KafkaError._PARTITION_EOF and len(values) >= expected_count:
                    break
                assert msg.error().code() == ck.KafkaError._PARTITION_EOF, msg.error()
                continue
            values.append(msg.value())
    finally:
        consumer.close()
    return values


@pytest.mark.broker_defect("tansu", reason=ABORTED_DEFECT, raises=AssertionError)
def test_read_committed_returns_only_committed_records(broker: Broker, topic_name: str):
    create_topic(broker, topic_name)
    write_transactions(broker, topic_name)
    # The broker's side, as librdkafka sees it (Tansu also delivers ABORTED here).
    assert (
        ck_read_committed_values(broker, topic_name, len(COMMITTED_1 + COMMITTED_2))
        == COMMITTED_1 + COMMITTED_2
    )

    tp = TopicPartition(topic_name, 0)
    # 12 data records and 3 control markers: the log ends at offset 15.
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    try:
        consumer.assign([tp])
        got = read_values_until_end(consumer, tp, 15)
        assert list(consumer.poll(0.3)) == []
    finally:
        consumer.close()
    assert [r.value for r in got] == COMMITTED_1 + COMMITTED_2
    assert [r.offset for r in got] == [0, 1, 2, 3, 4, 11, 12, 13]


def test_read_uncommitted_returns_aborted_records_too(broker: Broker, topic_name: str):
    create_topic(broker, topic_name)
    write_transactions(broker, topic_name)
    tp = TopicPartition(topic_name, 0)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([tp])
        got = read_values_until_end(consumer, tp, 15)
    finally:
        consumer.close()
    # Control markers (offsets 5, 10 and 14) are never returned.
    assert [r.value for r in got] == COMMITTED_1 + ABORTED + COMMITTED_2
    assert [r.offset for r in got] == [0, 1, 2, 3, 4, 6, 7, 8, 9, 11, 12, 13]


def test_read_committed_stops_before_an_open_transaction(broker: Broker, topic_name: str):
    create_topic(broker, topic_name)
    tp = TopicPartition(topic_name, 0)
    committed = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    uncommitted = Consumer({"bootstrap.servers": broker.bootstrap_servers, "auto.offset.reset": "earliest"})
    try:
        with transactional_producer(broker) as producer:
            producer.begin_transaction()
            for v in COMMITTED_1:
                producer.produce(topic_name, value=v, partition=0)
            producer.commit_transaction(WAIT_S)  # offsets 0-4, marker at 5
            producer.begin_transaction()
            for v in COMMITTED_2:
                producer.produce(topic_name, value=v, partition=0)
            producer.flush(WAIT_S)  # offsets 6-8, still open

            committed.assign([tp])
            uncommitted.assign([tp])
            # read_uncommitted sees the open transaction's records ...
            seen: list = []
            deadline = time.monotonic() + WAIT_S
            while len(seen) < 8:
                assert time.monotonic() < deadline, f"read_uncommitted got {len(seen)} of 8 records"
                seen.extend(uncommitted.poll(0.5))
            assert [r.value for r in seen] == COMMITTED_1 + COMMITTED_2
            # ... read_committed stops at the last stable offset (the open transaction's first record).
            got = read_values_until_end(committed, tp, 6)
            assert list(committed.poll(0.5)) == []
            assert committed.position(tp) == 6
            producer.commit_transaction(WAIT_S)  # marker at 9
            got += read_values_until_end(committed, tp, 10)
    finally:
        committed.close()
        uncommitted.close()
    assert [r.value for r in got] == COMMITTED_1 + COMMITTED_2


@pytest.mark.broker_defect("tansu", reason=LSO_DEFECT, raises=AssertionError)
def test_end_offsets_under_read_committed_is_the_last_stable_offset(broker: Broker, topic_name: str):
    create_topic(broker, topic_name)
    tp = TopicPartition(topic_name, 0)
    with transactional_producer(broker) as producer:
        producer.begin_transaction()
        producer.produce(topic_name, value=b"a", partition=0)
        producer.commit_transaction(WAIT_S)  # offset 0, marker at 1
        producer.begin_transaction()
        producer.produce(topic_name, value=b"b", partition=0)
        producer.flush(WAIT_S)  # offset 2, open until the producer closes (aborts)

        proof = ck.Consumer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "group.id": f"kx-ck-{uuid.uuid4().hex}",
                "isolation.level": "read_committed",
            }
        )
        try:
            ck_end = proof.get_watermark_offsets(
                ck.TopicPartition(topic_name, 0), timeout=WAIT_S, cached=False
            )[1]
        finally:
            proof.close()
        assert ck_end == 2  # the broker's answer (0 on Tansu)

        consumer = Consumer(
            {"bootstrap.servers": broker.bootstrap_servers, "isolation.level": "read_committed"}
        )
        plain = Consumer({"bootstrap.servers": broker.bootstrap_servers})
        try:
            assert consumer.end_offsets([tp], timeout=WAIT_S) == {tp: 2}
            assert plain.end_offsets([tp], timeout=WAIT_S) == {tp: 3}
        finally:
            consumer.close()
            plain.close()
