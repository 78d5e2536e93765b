"""``AdminClient.list_offsets`` on real brokers, each answer checked against confluent-kafka's
``AdminClient.list_offsets`` asking the same broker.

noida-db answers every spec correctly. Tansu's ListOffsets defects (LATEST is the last batch's base
offset + 1; a time always answers 0; max_timestamp closes the connection) are strict xfails, each
shown with confluent-kafka first. librdkafka's mock cluster (3 brokers) shows the fan-out to
each leader; it answers -1 for every time and for max_timestamp, with either client.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from kaflux import AdminClient, NewTopic, Producer, TopicPartition
from kaflux.admin import ListOffsetsResultInfo, OffsetSpec
from kaflux.aio import AsyncAdminClient
from kaflux.devbrokers.brokers import Broker
from kaflux.devbrokers.mock_cluster import MockCluster
from kaflux.errors import UnknownTopicOrPartitionError

ck = pytest.importorskip("confluent_kafka")
ck_admin = pytest.importorskip("confluent_kafka.admin")

pytestmark = pytest.mark.integration

WAIT_S = 15.0
LATEST_DEFECT = "ListOffsets LATEST returns the last batch's base offset + 1, not the high watermark"
TIMESTAMP_DEFECT = "ListOffsets by timestamp always answers offset 0 with timestamp 'now'"
MAX_TIMESTAMP_DEFECT = "ListOffsets with max_timestamp (-3) closes the connection, though it offers v0-9"
#: partition 0's records: two batches, timestamps out of order; the highest is offset 1
STAMPS = [10, 50, 20, 40, 30, 25]


def _ck(bootstrap: str) -> Any:
    return ck_admin.AdminClient({"bootstrap.servers": bootstrap})


def ck_list_offsets(
    bootstrap: str, specs: dict[TopicPartition, Any], **options: Any
) -> dict[TopicPartition, Any]:
    """confluent-kafka's answer to the same question (or its error, as the value)."""
    peer = _ck(bootstrap)
    futures = peer.list_offsets(
        {ck.TopicPartition(tp.topic, tp.partition): spec for tp, spec in specs.items()},
        request_timeout=WAIT_S,
        **options,
    )
    answers: dict[TopicPartition, Any] = {}
    for ck_tp, future in futures.items():
        try:
            answers[TopicPartition(ck_tp.topic, ck_tp.partition)] = future.result(WAIT_S)
        except ck.KafkaException as exc:
            answers[TopicPartition(ck_tp.topic, ck_tp.partition)] = exc
    return answers


def offsets_of(answers: dict[TopicPartition, Any]) -> dict[TopicPartition, Any]:
    return {tp: getattr(a, "offset", a) for tp, a in answers.items()}


def fill(bootstrap: str, topic: str, *, create: bool = True) -> int:
    """Partition 0 gets records with timestamps base + STAMPS in two batches (3 + 3),
    partition 1 two records, partition 2 none. Returns base."""
    if create:
        with AdminClient({"bootstrap.servers": bootstrap}) as admin:
            admin.create_topics([NewTopic(topic, 3)], timeout=WAIT_S)
    base = int(time.time() * 1000) - 100_000
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 10_000}) as producer:
        for half in (STAMPS[:3], STAMPS[3:]):
            for stamp in half:
                producer.send(topic, b"v", partition=0, timestamp=base + stamp)
            producer.flush(WAIT_S)
        producer.send(topic, b"a", partition=1)
        producer.send(topic, b"b", partition=1)
        producer.flush(WAIT_S)
    return base


@pytest.mark.broker_defect("tansu", reason=LATEST_DEFECT, raises=AssertionError)
def test_earliest_and_latest(broker: Broker, topic_name: str) -> None:
    fill(broker.bootstrap_servers, topic_name)
    tps = [TopicPartition(topic_name, p) for p in range(3)]
    expected = {tps[0]: 6, tps[1]: 2, tps[2]: 0}
    assert (
        offsets_of(
            ck_list_offsets(broker.bootstrap_servers, dict.fromkeys(tps, ck_admin.OffsetSpec.latest()))
        )
        == expected
    )
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        latest = admin.list_offsets(dict.fromkeys(tps, OffsetSpec.latest()), timeout=WAIT_S)
        earliest = admin.list_offsets(dict.fromkeys(tps, OffsetSpec.earliest()), timeout=WAIT_S)
    assert {tp: i.offset for tp, i in latest.items()} == expected
    assert list(latest) == tps, "sorted by partition"
    assert {tp: i.offset for tp, i in earliest.items()} == dict.fromkeys(tps, 0)


def test_earliest_and_latest_agree_with_confluent_kafka(broker: Broker, topic_name: str) -> None:
    """Whatever the broker answers (wrong on Tansu), kaflux reports what librdkafka reports."""
    fill(broker.bootstrap_servers, topic_name)
    tps = [TopicPartition(topic_name, p) for p in range(3)]
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        for ours_spec, theirs_spec in (
            (OffsetSpec.earliest(), ck_admin.OffsetSpec.earliest()),
            (OffsetSpec.latest(), ck_admin.OffsetSpec.latest()),
        ):
            ours = admin.list_offsets(dict.fromkeys(tps, ours_spec), timeout=WAIT_S)
            theirs = ck_list_offsets(broker.bootstrap_servers, dict.fromkeys(tps, theirs_spec))
            assert {tp: i.offset for tp, i in ours.items()} == offsets_of(theirs)


@pytest.mark.broker_defect("tansu", reason=TIMESTAMP_DEFECT, raises=AssertionError)
def test_for_timestamp(broker: Broker, topic_name: str) -> None:
    base = fill(broker.bootstrap_servers, topic_name)
    tp = TopicPartition(topic_name, 0)
    theirs = [
        ck_list_offsets(broker.bootstrap_servers, {tp: ck_admin.OffsetSpec.for_timestamp(base + at)})[tp]
        for at in (22, 45, 1_000)
    ]
    assert [getattr(a, "offset", a) for a in theirs] == [1, 1, -1]  # the broker's answer (wrong on Tansu)
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        ours = [
            admin.list_offsets({tp: OffsetSpec.for_timestamp(base + at)}, timeout=WAIT_S)[tp]
            for at in (22, 45, 1_000)
        ]
        before = admin.list_offsets({tp: OffsetSpec.for_timestamp(base)}, timeout=WAIT_S)[tp]
    assert [(i.offset, i.timestamp) for i in ours] == [(1, base + 50), (1, base + 50), (-1, -1)]
    assert [i.offset for i in ours] == [a.offset for a in theirs]
    assert (before.offset, before.timestamp) == (0, base + 10)


@pytest.mark.broker_defect("tansu", reason=MAX_TIMESTAMP_DEFECT, raises=AssertionError)
def test_max_timestamp(broker: Broker, topic_name: str) -> None:
    base = fill(broker.bootstrap_servers, topic_name)
    tps = [TopicPartition(topic_name, p) for p in (0, 2)]
    theirs = ck_list_offsets(
        broker.bootstrap_servers, dict.fromkeys(tps, ck_admin.OffsetSpec.max_timestamp())
    )
    assert offsets_of(theirs) == {tps[0]: 1, tps[1]: -1}  # the broker's answer (wrong on Tansu)
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        ours = admin.list_offsets(dict.fromkeys(tps, OffsetSpec.max_timestamp()), timeout=5.0)
    assert (ours[tps[0]].offset, ours[tps[0]].timestamp) == (1, base + 50)
    assert ours[tps[1]].offset == -1, "an empty partition has no such record"


@pytest.mark.parametrize("broker", ["kafka", "noida"], indirect=True)
def test_read_committed_latest_stops_at_the_open_transaction(broker: Broker, topic_name: str) -> None:
    bootstrap = broker.bootstrap_servers
    fill(bootstrap, topic_name)
    tp = TopicPartition(topic_name, 1)  # 2 records, then a transaction left open
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic_name}-txn"})
    try:
        producer.init_transactions(WAIT_S)
        producer.begin_transaction()
        for _ in range(3):
            producer.send(topic_name, b"t", partition=1)
        producer.flush(WAIT_S)
        with AdminClient({"bootstrap.servers": bootstrap}) as admin:
            spec = {tp: OffsetSpec.latest()}
            committed = admin.list_offsets(spec, isolation_level="read_committed", timeout=WAIT_S)[tp]
            uncommitted = admin.list_offsets(spec, timeout=WAIT_S)[tp]
            theirs = ck_list_offsets(
                bootstrap,
                {tp: ck_admin.OffsetSpec.latest()},
                isolation_level=ck.IsolationLevel.READ_COMMITTED,
            )[tp]
            assert (committed.offset, uncommitted.offset) == (2, 5)
            assert theirs.offset == 2
            producer.commit_transaction(WAIT_S)
            # The commit marker is written after EndTxn answers (on Kafka a moment later).
            deadline = time.monotonic() + WAIT_S
            while True:
                after = admin.list_offsets(spec, isolation_level="read_committed", timeout=WAIT_S)[tp]
                if after.offset != committed.offset or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
        assert after.offset == 6, "after the commit marker"
    finally:
        producer.close()


@pytest.mark.parametrize("broker", ["kafka", "noida"], indirect=True)
def test_an_unknown_topic_fails_at_once_saying_what_to_do(broker: Broker, topic_name: str) -> None:
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        start = time.monotonic()
        with pytest.raises(UnknownTopicOrPartitionError, match="create it first, or check its name"):
            admin.list_offsets({TopicPartition(topic_name, 0): OffsetSpec.latest()}, timeout=WAIT_S)
        assert time.monotonic() - start < 5, "not retried until the timeout"


def test_each_partition_is_asked_of_its_leader_on_the_three_broker_mock(
    mock_cluster: MockCluster, topic_name: str
) -> None:
    bootstrap = mock_cluster.bootstrap_servers
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        for attempt in range(5):  # the mock places leaders at random: find a topic they spread over
            topic = f"{topic_name}-{attempt}"
            fill(bootstrap, topic, create=False)  # the mock creates the topic with 4 partitions
            leaders = {p.partition: p.leader for p in admin.describe_topics([topic])[topic].partitions}
            if len(set(leaders.values())) > 1:
                break
        assert len(set(leaders.values())) > 1, f"partition leaders not spread over brokers: {leaders}"
        tps = [TopicPartition(topic, p) for p in range(4)]
        latest = admin.list_offsets(dict.fromkeys(tps, OffsetSpec.latest()), timeout=WAIT_S)
        earliest = admin.list_offsets(dict.fromkeys(tps, OffsetSpec.earliest()), timeout=WAIT_S)
        mixed = admin.list_offsets({tps[0]: OffsetSpec.max_timestamp(), tps[1]: OffsetSpec.for_timestamp(0)})
    theirs = ck_list_offsets(bootstrap, dict.fromkeys(tps, ck_admin.OffsetSpec.latest()))
    assert (
        {tp: i.offset for tp, i in latest.items()}
        == offsets_of(theirs)
        == {tps[0]: 6, tps[1]: 2, tps[2]: 0, tps[3]: 0}
    )
    assert {tp: i.offset for tp, i in earliest.items()} == dict.fromkeys(tps, 0)
    # The mock looks up no time, nor the highest timestamp: -1, as confluent-kafka gets.
    their_mixed = ck_list_offsets(
        bootstrap, {tps[0]: ck_admin.OffsetSpec.max_timestamp(), tps[1]: ck_admin.OffsetSpec.for_timestamp(0)}
    )
    assert {tp: i.offset for tp, i in mixed.items()} == offsets_of(their_mixed) == {tps[0]: -1, tps[1]: -1}


@pytest.mark.parametrize("broker", ["kafka", "noida"], indirect=True)
def test_the_asyncio_client_lists_offsets(broker: Broker, topic_name: str) -> None:
    fill(broker.bootstrap_servers, topic_name)
    tp = TopicPartition(topic_name, 0)

    async def main() -> ListOffsetsResultInfo:
        async with AsyncAdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
            found: dict[TopicPartition, ListOffsetsResultInfo] = await admin.list_offsets(
                {tp: OffsetSpec.latest()}, timeout=WAIT_S
            )
            return found[tp]

    assert asyncio.run(main()).offset == 6
