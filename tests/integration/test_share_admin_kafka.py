"""Share groups on Apache Kafka 4.4, complete (issue 29): the admin client's share-group calls
(list groups of every type, describe share groups, list / alter / delete their start offsets,
delete them), the share consumer's acquisition lock timeout (KIP-1222) and RENEW
acknowledgements (ShareAcknowledge v2), and the same calls through ``kaflux.aio``.

Each test's group reads from the earliest offset (``share.auto.offset.reset``, a group
config): at ``latest``, Kafka fixes a share partition's start offset when the partition is first
fetched, not when it is assigned, so records produced right after the member saw its assignment
were sometimes skipped under load (about one run in fifty, then nothing to read).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest

from kaflux import AcknowledgeType, AdminClient, ConsumerRecord, Producer, ShareConsumer, TopicPartition
from kaflux.admin import NewTopic, SharePartitionOffsetInfo
from kaflux.aio import AsyncAdminClient
from kaflux.devbrokers.brokers import Broker
from kaflux.errors import GroupIdNotFoundError, InvalidArgumentError, NonEmptyGroupError

from support.kafka_helpers import set_group_configs

pytestmark = pytest.mark.integration

WAIT_S = 60.0
PARTITIONS = 2
LOCK_MS = 5000  # the group's record lock duration here (group.share.record.lock.duration.ms)
T = TypeVar("T")


def _wait_for(what: str, check: Callable[[], T | None], timeout: float = WAIT_S) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


@pytest.fixture
def admin(kafka: Broker) -> Iterator[AdminClient]:
    with AdminClient({"bootstrap.servers": kafka.bootstrap_servers}) as client:
        yield client


def _topic(admin: AdminClient, partitions: int = PARTITIONS) -> str:
    name = f"share-admin-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(name, partitions)], timeout=WAIT_S)
    return name


def _group(admin: AdminClient, name: str) -> str:
    """A share group id, with a short record lock and reading from the earliest offset (group
    configs, KIP-932), both in force before its first member joins."""
    configs = {"share.record.lock.duration.ms": str(LOCK_MS), "share.auto.offset.reset": "earliest"}
    set_group_configs(admin, name, configs)
    return name


def _produce(kafka: Broker, topic: str, count: int) -> None:
    with Producer({"bootstrap.servers": kafka.bootstrap_servers}) as producer:
        for i in range(count):
            producer.send(topic, f"v{i}".encode(), partition=i % PARTITIONS)
        producer.flush(WAIT_S)


def _joined(consumer: ShareConsumer, topic: str) -> None:
    def assigned() -> bool:
        consumer.poll(0.2)
        return {tp.topic for tp in consumer.group_state().assignment} == {topic}

    _wait_for("the share consumer's assignment", assigned)


def test_share_group_admin_calls_on_kafka(kafka: Broker, admin: AdminClient) -> None:
    topic = _topic(admin)
    group = _group(admin, f"share-admin-group-{uuid.uuid4().hex[:8]}")
    config = {"bootstrap.servers": kafka.bootstrap_servers, "group.id": group, "client.id": "sharer"}
    with ShareConsumer({**config, "share.acknowledgement.mode": "explicit"}) as consumer:
        consumer.subscribe([topic])
        _joined(consumer, topic)
        _produce(kafka, topic, 10)
        got: list[int] = []

        def read() -> bool:
            for record in consumer.poll(0.5):
                consumer.acknowledge(record, AcknowledgeType.ACCEPT)
                got.append(record.offset)
            return len(got) >= 10

        _wait_for("10 records", read)
        assert all(error is None for error in consumer.commit_sync(WAIT_S).values())
        assert consumer.acquisition_lock_timeout() == LOCK_MS / 1000

        listed = {g.group_id: g for g in admin.list_groups(timeout=WAIT_S)}
        assert listed[group].group_type == "share"
        assert listed[group].protocol == "share"
        only_share = {g.group_id for g in admin.list_groups(types=["share"], timeout=WAIT_S)}
        assert group in only_share
        assert all(g.group_type == "share" for g in admin.list_groups(types=["SHARE"], timeout=WAIT_S))
        assert group not in {g.group_id for g in admin.list_groups(types=["consumer"], timeout=WAIT_S)}
        assert group not in {g.group_id for g in admin.list_consumer_groups(timeout=WAIT_S)}

        described = admin.describe_share_groups([group], timeout=WAIT_S)[group]
        assert described.state == "Stable"
        (member,) = described.members
        assert member.client_id == "sharer"
        assert member.assignment == {TopicPartition(topic, p) for p in range(PARTITIONS)}
        assert described.group_epoch >= 1

        with pytest.raises(NonEmptyGroupError, match="close its share consumers"):
            admin.alter_share_group_offsets(group, {TopicPartition(topic, 0): 0}, timeout=WAIT_S)

    def all_acknowledged() -> dict[TopicPartition, SharePartitionOffsetInfo] | None:
        found = admin.list_share_group_offsets(group, timeout=WAIT_S)
        return found if len(found) == PARTITIONS and all(i.lag == 0 for i in found.values()) else None

    # Kafka persists a start offset lazily; the lag (KIP-1226) shows every record acknowledged
    offsets = _wait_for("no lag once the 10 records are acknowledged", all_acknowledged)
    assert set(offsets) == {TopicPartition(topic, p) for p in range(PARTITIONS)}
    assert all(0 <= info.start_offset <= 5 and info.leader_epoch == 0 for info in offsets.values())

    admin.alter_share_group_offsets(group, {TopicPartition(topic, 0): 0}, timeout=WAIT_S)
    again = admin.list_share_group_offsets(group, [TopicPartition(topic, 0)], timeout=WAIT_S)
    assert again[TopicPartition(topic, 0)].start_offset == 0
    assert again[TopicPartition(topic, 0)].lag == 5

    assert admin.delete_share_group_offsets(group, [topic], timeout=WAIT_S) == {topic: None}
    assert admin.list_share_group_offsets(group, timeout=WAIT_S) == {}

    assert admin.delete_share_groups([group], timeout=WAIT_S) == {group: None}
    with pytest.raises(GroupIdNotFoundError):
        admin.describe_share_groups([group], timeout=WAIT_S)


def test_describe_share_groups_refuses_a_consumer_group(kafka: Broker, admin: AdminClient) -> None:
    missing = f"no-such-share-group-{uuid.uuid4().hex[:8]}"
    with pytest.raises(GroupIdNotFoundError):
        admin.describe_share_groups([missing], timeout=WAIT_S)
    with pytest.raises(InvalidArgumentError, match="unknown group type"):
        admin.list_groups(types=["queue"])
    with pytest.raises(InvalidArgumentError, match="wrap it in a list"):
        admin.list_groups(types="share")


def test_renew_keeps_a_record_from_being_redelivered(kafka: Broker, admin: AdminClient) -> None:
    """RENEW (ShareAcknowledge v2, KIP-1222) restarts a record's acquisition lock: held past
    the lock duration by renewing, it is not delivered to the other member, and is accepted."""
    topic = _topic(admin, partitions=1)  # both members are assigned its one partition
    group = _group(admin, f"share-renew-{uuid.uuid4().hex[:8]}")
    config = {
        "bootstrap.servers": kafka.bootstrap_servers,
        "group.id": group,
        "share.acknowledgement.mode": "explicit",
    }
    with ShareConsumer(config) as holder, ShareConsumer(config) as other:
        holder.subscribe([topic])
        _joined(holder, topic)
        with Producer({"bootstrap.servers": kafka.bootstrap_servers}) as producer:
            producer.send(topic, b"held").result(WAIT_S)
        held = _wait_for("the record", lambda: holder.poll(0.5))
        (record,) = held
        other.subscribe([topic])  # joins while the holder keeps renewing
        tp = TopicPartition(topic, record.partition)
        # renew until the other member has held the partition for two lock durations (its join
        # may take seconds on a loaded machine): time enough to get the record had it been let go
        join_deadline = time.monotonic() + WAIT_S
        other_assigned_at: float | None = None
        stolen: list[ConsumerRecord] = []
        while other_assigned_at is None or time.monotonic() < other_assigned_at + 2 * LOCK_MS / 1000:
            holder.acknowledge(record, AcknowledgeType.RENEW)
            assert holder.commit_sync(WAIT_S) == {tp: None}
            for got in other.poll(0.5):
                stolen.append(got)
                other.acknowledge(got, AcknowledgeType.RELEASE)
            if other_assigned_at is None and other.group_state().assignment == {tp}:
                other_assigned_at = time.monotonic()
            assert other_assigned_at is not None or time.monotonic() < join_deadline, (
                "the other member must be able to get the record: it was never assigned the partition"
            )
        assert other.group_state().assignment == {tp}, "the other member must be able to get the record"
        assert stolen == [], "a renewed record was delivered to another member"
        holder.acknowledge(record, AcknowledgeType.ACCEPT)
        assert holder.commit_sync(WAIT_S) == {TopicPartition(topic, record.partition): None}


def test_share_admin_calls_through_aio(kafka: Broker) -> None:
    async def main() -> None:
        async with AsyncAdminClient({"bootstrap.servers": kafka.bootstrap_servers}) as admin:
            groups = await admin.list_groups(types=["share"], timeout=WAIT_S)
            assert all(g.group_type == "share" for g in groups)
            with pytest.raises(GroupIdNotFoundError):
                await admin.describe_share_groups([f"absent-{uuid.uuid4().hex[:8]}"], timeout=WAIT_S)

    asyncio.run(main())
