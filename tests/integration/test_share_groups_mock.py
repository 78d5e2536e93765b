"""Share groups (KIP-932) on Apache Kafka 4.4 and on librdkafka's mock cluster:
``kaflux.ShareConsumer`` with Java's semantics, next to confluent-kafka's own ``ShareConsumer``
(the peer that shows the broker's behaviour). Each test runs on both (``share_cluster``) but the
v1-only RENEW refusal, which only the mock shows. On Kafka each share group gets the mock's
timings as group configs (1 s heartbeats, a 6 s session, a 30 s record lock) and its topic is
created with 4 partitions before the first record.

The mock serves ShareGroupHeartbeat, ShareFetch and ShareAcknowledge v1. A share group starts
at the latest offset, so members join before records are produced. The cluster is started
through librdkafka's C API (``tests/share_mock.py``) with a 1 s heartbeat interval and, for the
SIGKILL test, a 6 s session timeout (45 s by default).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Container, Iterator
from typing import Any

import confluent_kafka
import confluent_kafka.admin
import pytest

from kaflux import AcknowledgeType, AdminClient, ConsumerRecord, NewTopic, ShareConsumer, TopicPartition
from kaflux.admin import AlterConfigOp, ConfigResource
from kaflux.devbrokers.brokers import Broker
from kaflux.errors import (
    IllegalStateError,
    KafkaError,
    RecordDeserializationError,
    UnsupportedVersionError,
    WakeupError,
)

from support.share_mock import ShareMockCluster

pytestmark = pytest.mark.integration

PARTITIONS = 4  # the mock creates every topic with 4 partitions
WAIT_S = 30.0
SESSION_TIMEOUT_MS = 6000
SETTLED_S = 2.5  # the mock's heartbeat interval here is 1 s
_TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def share_mock() -> Iterator[ShareMockCluster]:
    with ShareMockCluster(session_timeout_ms=SESSION_TIMEOUT_MS) as cluster:
        yield cluster


ShareCluster = ShareMockCluster | Broker


@pytest.fixture(params=["kafka", "mock"])
def share_cluster(request: pytest.FixtureRequest) -> ShareCluster:
    """Apache Kafka's session broker, then the share-group mock."""
    found: ShareCluster = request.getfixturevalue("share_mock" if request.param == "mock" else "kafka")
    return found


#: Kafka's share-group configs giving a group the mock's timings (the broker's minimums allow them).
KAFKA_GROUP_CONFIGS = {
    "share.heartbeat.interval.ms": "1000",
    "share.session.timeout.ms": str(SESSION_TIMEOUT_MS),
}


def _prepare(cluster: ShareCluster, feed: Feed, group: str) -> None:
    """Make the topic (4 partitions) and, on Kafka, give the group the mock's timings."""
    if isinstance(cluster, ShareMockCluster):
        feed.create()
        return
    with AdminClient({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(feed.topic, PARTITIONS)], timeout=WAIT_S)
        ops = [AlterConfigOp(k, v, "set") for k, v in KAFKA_GROUP_CONFIGS.items()]
        admin.incremental_alter_configs({ConfigResource("group", group): ops}, timeout=WAIT_S)
    feed.create()


def _names() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"share-topic-{suffix}", f"share-group-{suffix}"


class Feed:
    """A confluent-kafka producer; the first record creates the topic (4 partitions)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})

    def send(self, values: list[bytes], partition: int | None = None) -> None:
        for value in values:
            if partition is None:
                self.producer.produce(self.topic, value)
            else:
                self.producer.produce(self.topic, value, partition=partition)
        assert self.producer.flush(10) == 0

    def create(self) -> None:
        self.send([b"create"], partition=0)


def _kaflux(bootstrap: str, group: str, **extra: object) -> ShareConsumer:
    config: dict[str, object] = {"bootstrap.servers": bootstrap, "group.id": group}
    config.update({k.replace("_", "."): v for k, v in extra.items()})
    return ShareConsumer(config)


def _wait_joined(
    *consumers: ShareConsumer,
    partitions: Container[int] = (PARTITIONS,),
    peers: tuple[Any, ...] = (),
    deadline_s: float = WAIT_S,
) -> list[frozenset[TopicPartition]]:
    """Until the group settled: every consumer STABLE with partitions of its own (the mock
    shares a topic's partitions out among the members), a number in ``partitions`` held in all, and
    no change for :data:`SETTLED_S` (a reassignment reaches each member on its next heartbeat).
    ``peers`` (confluent-kafka members) are polled meanwhile. The assignments, in order."""
    deadline = time.monotonic() + deadline_s
    last: list[frozenset[TopicPartition]] = []
    since = time.monotonic()
    while time.monotonic() < deadline:
        for peer in peers:
            assert list(peer.poll(0.02)) == []
        states = []
        for consumer in consumers:
            assert consumer.poll(0.02) == []  # nothing is produced before everybody joined
            states.append(consumer.group_state())
        now = [s.assignment for s in states]
        if now != last:
            last, since = now, time.monotonic()
        held = [tp for a in now for tp in a]
        settled = (
            all(s.state == "STABLE" and s.assignment for s in states)
            and len(held) == len(set(held))
            and len(held) in partitions
        )
        if settled and time.monotonic() - since >= SETTLED_S:
            return now
    raise AssertionError(f"the share group did not settle within {deadline_s} s: {last}")


def _poll_until(
    consumer: ShareConsumer, done: Callable[[list[ConsumerRecord]], bool], timeout: float = WAIT_S
) -> list[ConsumerRecord]:
    got: list[ConsumerRecord] = []
    deadline = time.monotonic() + timeout
    while not done(got):
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {timeout} s; got {[(r.partition, r.offset) for r in got]}")
        got.extend(consumer.poll(0.2))
    return got


def _spread(feed: Feed, prefix: str) -> list[bytes]:
    """Two records to every partition."""
    values = []
    for p in range(PARTITIONS):
        batch = [f"{prefix}-{p}-{i}".encode() for i in range(2)]
        feed.send(batch, partition=p)
        values += batch
    return values


def test_implicit_mixed_group_delivers_every_record_once_with_delivery_count_one(
    share_cluster: ShareCluster,
) -> None:
    topic, group = _names()
    feed = Feed(share_cluster.bootstrap_servers, topic)
    _prepare(share_cluster, feed, group)
    members = [_kaflux(share_cluster.bootstrap_servers, group) for _ in range(2)]
    peer = confluent_kafka.ShareConsumer(
        {"bootstrap.servers": share_cluster.bootstrap_servers, "group.id": group}
    )
    try:
        for m in members:
            m.subscribe([topic])
        peer.subscribe([topic])
        # the peer holds the partitions the two kaflux members do not (it has no group_state())
        _wait_joined(*members, partitions=range(2, PARTITIONS), peers=(peer,))
        received: dict[str, list[tuple[int, int, bytes, int | None]]] = {"a": [], "b": [], "peer": []}

        def poll_all() -> None:
            for name, member in zip(("a", "b"), members, strict=True):
                received[name] += [
                    (r.partition, r.offset, r.value, r.delivery_count) for r in member.poll(0.05)
                ]
            for message in peer.poll(0.05):
                assert message.error() is None, message.error()
                received["peer"].append(
                    (message.partition(), message.offset(), message.value(), message.delivery_count())  # type: ignore[arg-type]
                )

        values = [f"rec-{i}".encode() for i in range(400)]
        for p in range(PARTITIONS):  # spread over every partition, hence over every member
            feed.send(values[p::PARTITIONS], partition=p)
        deadline = time.monotonic() + WAIT_S

        def counted() -> Counter[bytes]:
            return Counter(v for got in received.values() for _, _, v, _ in got if v.startswith(b"rec-"))

        while len(counted()) < len(values):
            assert time.monotonic() < deadline, f"{len(counted())} of {len(values)} records arrived"
            poll_all()
        settle = time.monotonic() + 3.0  # anything delivered twice would show up by now
        while time.monotonic() < settle:
            poll_all()
        counts = counted()
        assert set(counts) == set(values)
        assert max(counts.values()) == 1, [v for v, n in counts.items() if n > 1]
        test_records = [r for got in received.values() for r in got if r[2].startswith(b"rec-")]
        assert {count for *_, count in test_records} == {1}
        assert all(received[n] for n in ("a", "b", "peer")), {n: len(g) for n, g in received.items()}
    finally:
        for m in members:
            m.close(10)
        peer.close()


def test_explicit_release_redelivers_with_the_count_up_and_reject_or_accept_end_a_record(
    share_cluster: ShareCluster,
) -> None:
    topic, group = _names()
    feed = Feed(share_cluster.bootstrap_servers, topic)
    _prepare(share_cluster, feed, group)
    with _kaflux(share_cluster.bootstrap_servers, group, share_acknowledgement_mode="explicit") as consumer:
        consumer.subscribe([topic])
        _wait_joined(consumer)
        feed.send([b"release-me", b"reject-me", b"accept-me"], partition=1)
        first = _poll_until(consumer, lambda got: len(got) >= 3)
        by_value = {r.value: r for r in first}
        assert {r.delivery_count for r in first} == {1}
        consumer.acknowledge(by_value[b"release-me"], AcknowledgeType.RELEASE)
        consumer.acknowledge(by_value[b"reject-me"], AcknowledgeType.REJECT)
        consumer.acknowledge(by_value[b"accept-me"], AcknowledgeType.ACCEPT)
        assert consumer.commit_sync(10) == {TopicPartition(topic, 1): None}
        for expected in (2, 3):
            redelivered = _poll_until(consumer, lambda got: len(got) >= 1)
            assert len(redelivered) == 1, [(r.value, r.offset, r.delivery_count) for r in redelivered]
            (again,) = redelivered
            assert (again.value, again.offset, again.delivery_count) == (
                b"release-me",
                by_value[b"release-me"].offset,
                expected,
            )
            consumer.acknowledge(again, AcknowledgeType.RELEASE if expected == 2 else AcknowledgeType.ACCEPT)
        consumer.commit_sync(10)
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            assert consumer.poll(0.2) == []  # REJECT and ACCEPT ended every record


def test_explicit_poll_with_unacknowledged_records_raises_until_all_are_acknowledged(
    share_cluster: ShareCluster,
) -> None:
    topic, group = _names()
    feed = Feed(share_cluster.bootstrap_servers, topic)
    _prepare(share_cluster, feed, group)
    with _kaflux(share_cluster.bootstrap_servers, group, share_acknowledgement_mode="explicit") as consumer:
        consumer.subscribe([topic])
        _wait_joined(consumer)
        feed.send([b"one", b"two"], partition=2)
        records = _poll_until(consumer, lambda got: len(got) >= 2)
        consumer.acknowledge(records[0])
        with pytest.raises(IllegalStateError, match="1 records of the last poll"):
            consumer.poll(0)
        consumer.acknowledge(records[1], AcknowledgeType.ACCEPT)
        assert consumer.poll(0.5) == []  # polling works again (and sent the acknowledgements)
        feed.send([b"three"], partition=2)
        (three,) = _poll_until(consumer, lambda got: len(got) >= 1)
        assert three.value == b"three"
        consumer.acknowledge(three)


def test_commit_sync_reports_each_partition_and_the_async_callback_runs_on_the_app_thread(
    share_cluster: ShareCluster,
) -> None:
    topic, group = _names()
    feed = Feed(share_cluster.bootstrap_servers, topic)
    _prepare(share_cluster, feed, group)
    with _kaflux(share_cluster.bootstrap_servers, group, share_acknowledgement_mode="explicit") as consumer:
        calls: list[tuple[dict[TopicPartition, set[int]], KafkaError | None, int]] = []
        consumer.set_acknowledgement_commit_callback(
            lambda offsets, error: calls.append((offsets, error, threading.get_ident()))
        )
        consumer.subscribe([topic])
        _wait_joined(consumer)
        values = _spread(feed, "commit")
        # Explicit mode: each poll's records are acknowledged before the next poll, which sends
        # those acknowledgements; so a poll that returns records of two partitions is awaited.
        deadline = time.monotonic() + WAIT_S
        while True:
            assert time.monotonic() < deadline, "no poll() returned records of two partitions"
            batch = consumer.poll(0.2)
            for r in batch:
                consumer.acknowledge(r)
            if len({r.partition for r in batch}) >= 2:
                break
        calls.clear()
        results = consumer.commit_sync(10)
        expected = {TopicPartition(topic, r.partition) for r in batch}
        assert results == dict.fromkeys(expected)
        acknowledged = {tp: offs for offsets, _, _ in calls for tp, offs in offsets.items()}
        assert acknowledged == {
            tp: {r.offset for r in batch if r.partition == tp.partition} for tp in expected
        }  # the callback ran inside commit_sync, on this thread
        assert {thread for *_, thread in calls} == {threading.get_ident()}
        rest_deadline = time.monotonic() + 2.0
        while time.monotonic() < rest_deadline:  # take (and acknowledge) the rest of the records
            for r in consumer.poll(0.1):
                consumer.acknowledge(r)
        assert values
        calls.clear()
        feed.send([b"p3-b"], partition=3)
        (later,) = _poll_until(consumer, lambda got: len(got) >= 1)
        consumer.acknowledge(later, AcknowledgeType.ACCEPT)
        consumer.commit_async()
        deadline = time.monotonic() + WAIT_S
        while not calls:
            assert time.monotonic() < deadline, "the acknowledgement commit callback never ran"
            consumer.poll(0.1)
        assert calls == [({TopicPartition(topic, 3): {later.offset}}, None, threading.get_ident())]


def test_renew_is_refused_with_unsupported_version_by_a_v1_broker(share_mock: ShareMockCluster) -> None:
    topic, group = _names()
    feed = Feed(share_mock.bootstrap_servers, topic)
    feed.create()
    with _kaflux(share_mock.bootstrap_servers, group, share_acknowledgement_mode="explicit") as consumer:
        consumer.subscribe([topic])
        _wait_joined(consumer)
        feed.send([b"slow"], partition=0)
        (record,) = _poll_until(consumer, lambda got: len(got) >= 1)
        consumer.acknowledge(record, AcknowledgeType.RENEW)
        result = consumer.commit_sync(10)[TopicPartition(topic, 0)]  # the acknowledgement fails
        assert isinstance(result, UnsupportedVersionError), result
        assert "RENEW" in str(result) and "ShareAcknowledge v2" in str(result)
        consumer.acknowledge(record, AcknowledgeType.ACCEPT)  # still waiting for a final answer
        assert consumer.commit_sync(10) == {TopicPartition(topic, 0): None}


def test_a_closing_member_gives_its_unacknowledged_records_back_at_once(share_cluster: ShareCluster) -> None:
    topic, group = _names()
    feed = Feed(share_cluster.bootstrap_servers, topic)
    _prepare(share_cluster, feed, group)
    leaver = _kaflux(share_cluster.bootstrap_servers, group, share_acknowledgement_mode="explicit")
    with _kaflux(share_cluster.bootstrap_servers, group) as survivor:
        leaver.subscribe([topic])
        survivor.subscribe([topic])
        _wait_joined(leaver, survivor)
        values = _spread(feed, "held")
        held = _poll_until(leaver, lambda got: len(got) >= 1)  # one fetch's worth, never acknowledged
        own: list[ConsumerRecord] = []
        settle = time.monotonic() + 2.0
        while time.monotonic() < settle:
            own += survivor.poll(0.1)
        assert {r.value for r in own}.isdisjoint({r.value for r in held})
        closed_at = time.monotonic()
        leaver.close(10)
        rest = _poll_until(survivor, lambda got: {r.value for r in own + got} >= set(values), timeout=WAIT_S)
        took = time.monotonic() - closed_at
        came_back = {r.value: r.delivery_count for r in rest}
        assert {v: came_back[v] for v in (r.value for r in held)} == {r.value: 2 for r in held}
        assert took < SESSION_TIMEOUT_MS / 1000 / 2, f"the records came back after {took:.1f} s"


def test_a_sigkilled_members_records_go_to_a_survivor_with_delivery_count_two(
    share_cluster: ShareCluster,
) -> None:
    topic, group = _names()
    feed = Feed(share_cluster.bootstrap_servers, topic)
    _prepare(share_cluster, feed, group)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([_TESTS_DIR, os.environ.get("PYTHONPATH", "")]))
    child = subprocess.Popen(
        [
            sys.executable,
            os.path.join(_TESTS_DIR, "support", "share_child.py"),
            share_cluster.bootstrap_servers,
            group,
            topic,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    lines: list[str] = []

    def read() -> None:
        assert child.stdout is not None
        for line in child.stdout:
            lines.append(line.strip())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + WAIT_S
        while "joined" not in lines:
            assert time.monotonic() < deadline and child.poll() is None, f"the child did not join: {lines}"
            time.sleep(0.05)
        with _kaflux(share_cluster.bootstrap_servers, group) as survivor:
            survivor.subscribe([topic])
            _wait_joined(survivor, partitions=range(1, PARTITIONS))
            values = _spread(feed, "doomed")
            got: list[ConsumerRecord] = []
            deadline = time.monotonic() + WAIT_S
            while len(lines) < 2:  # the child holds at least one record, unacknowledged
                assert time.monotonic() < deadline, f"the child received nothing: {lines}"
                got += survivor.poll(0.1)
            settle = time.monotonic() + 1.0
            while time.monotonic() < settle:
                got += survivor.poll(0.1)
            child.kill()
            child.wait(10)
            reader.join(5)
            held = {(h["partition"], h["offset"]) for h in map(json.loads, lines[1:])}
            assert {json.loads(line)["count"] for line in lines[1:]} == {1}
            got += _poll_until(
                survivor,
                lambda more: {r.value for r in got + more} >= set(values),
                timeout=SESSION_TIMEOUT_MS / 1000 + WAIT_S,
            )
            counts = {(r.partition, r.offset): r.delivery_count for r in got}
            assert {k: counts[k] for k in held} == dict.fromkeys(held, 2)
            twice = [v for v, n in Counter(r.value for r in got).items() if n > 1]
            assert twice == [], [(r.partition, r.offset, r.value, r.delivery_count) for r in got]
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
        reader.join(5)
        if child.stdout is not None:
            child.stdout.close()


def test_lifecycle_wakeup_metrics_group_state_unsubscribe_and_context_manager(
    share_cluster: ShareCluster,
) -> None:
    topic, group = _names()
    feed = Feed(share_cluster.bootstrap_servers, topic)
    _prepare(share_cluster, feed, group)
    with _kaflux(share_cluster.bootstrap_servers, group) as consumer:
        with pytest.raises(IllegalStateError, match="subscribe"):
            consumer.poll(0)
        consumer.subscribe([topic])
        assert consumer.subscription() == {topic}
        _wait_joined(consumer)
        state = consumer.group_state()
        assert (state.protocol, state.state, state.group_id) == ("share", "STABLE", group)
        assert state.generation > 0 and state.member_id
        # wakeup() from another thread ends a blocking poll() at once
        timer = threading.Timer(0.3, consumer.wakeup)
        timer.start()
        started = time.monotonic()
        with pytest.raises(WakeupError):
            consumer.poll(20)
        assert time.monotonic() - started < 5
        timer.join()
        feed.send([b"m1", b"m2"], partition=0)
        _poll_until(consumer, lambda got: len(got) >= 2)
        metrics = consumer.metrics()
        fetch = metrics["consumer-share-fetch-manager-metrics"]
        assert fetch["records-consumed-total"] >= 2 and fetch["fetch-total"] >= 1
        assert fetch["records-consumed-rate"] > 0 and fetch["fetch-rate"] > 0
        assert fetch["fetch-latency-max"] >= fetch["fetch-latency-avg"] > 0  # ShareFetch long-polls
        assert metrics["consumer-share-coordinator-metrics"]["heartbeat-total"] >= 1
        assert metrics["consumer-share-coordinator-metrics"]["heartbeat-rate"] > 0
        assert metrics["kaflux-share-consumer-metrics"]["records-returned"] == 2
        consumer.unsubscribe()
        assert consumer.subscription() == set()
        assert consumer.group_state().state == "UNSUBSCRIBED"
    with pytest.raises(IllegalStateError, match="closed"):
        consumer.poll(0)


def test_explicit_mode_with_a_fetch_split_over_several_polls(share_cluster: ShareCluster) -> None:
    topic, group = _names()
    feed = Feed(share_cluster.bootstrap_servers, topic)
    _prepare(share_cluster, feed, group)
    with _kaflux(
        share_cluster.bootstrap_servers, group, share_acknowledgement_mode="explicit", max_poll_records=2
    ) as consumer:
        consumer.subscribe([topic])
        _wait_joined(consumer)
        values = [f"split-{i}".encode() for i in range(5)]
        feed.send(values, partition=0)
        got: list[ConsumerRecord] = []
        deadline = time.monotonic() + WAIT_S
        while len(got) < len(values):
            assert time.monotonic() < deadline, [r.value for r in got]
            batch = consumer.poll(0.2)  # never raises: only what it returned waits for us
            assert len(batch) <= 2
            for record in batch:
                consumer.acknowledge(record)
            got += batch
        assert [r.value for r in got] == values and {r.delivery_count for r in got} == {1}
        assert consumer.commit_sync(10) in ({}, {TopicPartition(topic, 0): None})
        assert consumer.poll(1.0) == []  # every record accepted: nothing comes back


def test_a_record_that_cannot_be_deserialized_raises_and_is_released(share_cluster: ShareCluster) -> None:
    topic, group = _names()
    feed = Feed(share_cluster.bootstrap_servers, topic)
    _prepare(share_cluster, feed, group)
    failed: list[bytes] = []

    def decode(value: bytes | None) -> str:
        assert value is not None
        if value == b"bad" and not failed:
            failed.append(value)
            raise ValueError("not today")
        return value.decode()

    consumer = ShareConsumer(
        {"bootstrap.servers": share_cluster.bootstrap_servers, "group.id": group}, value_deserializer=decode
    )
    with consumer:
        consumer.subscribe([topic])
        _wait_joined(consumer)
        feed.send([b"ok-1", b"bad", b"ok-2"], partition=3)
        first = _poll_until(consumer, lambda got: len(got) >= 1)
        assert [r.value for r in first] == ["ok-1"]  # the records before the bad one come first
        with pytest.raises(RecordDeserializationError) as caught:
            consumer.poll(5.0)
        assert (caught.value.partition, caught.value.offset) == (3, first[0].offset + 1)
        rest = _poll_until(consumer, lambda got: {r.value for r in got} >= {"ok-2", "bad"})
        counts = {r.value: r.delivery_count for r in rest}
        assert counts == {"ok-2": 1, "bad": 2}  # released, then delivered again


# -- a member takes no more than its share (the mock's manual assignment puts several members on one
# partition, as Kafka's share assignor may) -------------------------------------------------------------

SHARE_POLL_RECORDS = 10
PROCESSING_S = 0.2  # what each member spends on one poll's records


def _member_id(consumer: ShareConsumer) -> str:
    member_id = consumer.group_state().member_id
    assert member_id
    return member_id


def _wait_assigned(consumer: ShareConsumer, expected: set[TopicPartition]) -> None:
    deadline = time.monotonic() + WAIT_S
    while consumer.group_state().assignment != expected:
        assert time.monotonic() < deadline, f"not assigned {expected}: {consumer.group_state().assignment}"
        assert consumer.poll(0.05) == []


def _leaders(bootstrap: str, topic: str) -> dict[int, int]:
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    partitions = admin.list_topics(topic, timeout=10).topics[topic].partitions
    return {p: meta.leader for p, meta in partitions.items()}


def test_two_members_on_one_partitions_backlog_both_make_progress_within_a_poll_interval(
    share_mock: ShareMockCluster,
) -> None:
    topic, group = _names()
    feed = Feed(share_mock.bootstrap_servers, topic)
    feed.create()
    members = [
        _kaflux(share_mock.bootstrap_servers, group, max_poll_records=SHARE_POLL_RECORDS) for _ in range(2)
    ]
    try:
        for m in members:
            m.subscribe([topic])
        _wait_joined(*members)
        for m in members:
            share_mock.assign(group, _member_id(m), topic, [0])
        for m in members:
            _wait_assigned(m, {TopicPartition(topic, 0)})
        feed.send([f"backlog-{i}".encode() for i in range(200)], partition=0)
        counts = [0, 0]
        start = time.monotonic()
        while min(counts) == 0 and time.monotonic() - start < WAIT_S:
            for i, m in enumerate(members):
                got = m.poll(0.05)
                assert len(got) <= SHARE_POLL_RECORDS
                counts[i] += len(got)
                if got:
                    time.sleep(PROCESSING_S)
        took = time.monotonic() - start
        assert min(counts) > 0, counts
        # one member's poll, its processing and the other's poll: both have records by then
        assert took < 4 * PROCESSING_S + 2.0, f"both members had records only after {took:.1f} s: {counts}"
    finally:
        for m in members:
            m.close(10)


def test_a_member_acquires_no_more_than_one_poll_from_several_brokers(share_mock: ShareMockCluster) -> None:
    """A member whose partitions are led by several brokers asks them for max.poll.records
    between them, and asks none while records wait in its buffer: of a backlog of one poll's
    worth per broker, all but one poll's worth is left for the other member while the first one
    processes its poll. (Before, it asked each broker for max.poll.records and held it all.)"""
    topic, group = _names()
    feed = Feed(share_mock.bootstrap_servers, topic)
    feed.create()
    partitions = [0, 1, 2]
    for partition in partitions:  # one partition per broker
        share_mock.set_leader(topic, partition, partition + 1)
    leaders = _leaders(share_mock.bootstrap_servers, topic)
    assert [leaders[p] for p in partitions] == [1, 2, 3], leaders
    tps = {TopicPartition(topic, p) for p in partitions}
    busy, other = (
        _kaflux(share_mock.bootstrap_servers, group, max_poll_records=SHARE_POLL_RECORDS) for _ in range(2)
    )
    try:
        for m in (busy, other):
            m.subscribe([topic])
        _wait_joined(busy, other)
        for m in (busy, other):
            share_mock.assign(group, _member_id(m), topic, [])
        for m in (busy, other):
            _wait_assigned(m, set())
        values = [f"held-{p}-{i}".encode() for p in partitions for i in range(SHARE_POLL_RECORDS)]
        for p in partitions:
            feed.send([v for v in values if v.startswith(f"held-{p}-".encode())], partition=p)
        share_mock.assign(group, _member_id(busy), topic, partitions)
        first = _poll_until(busy, lambda got: len(got) > 0)
        assert len(first) <= SHARE_POLL_RECORDS
        # `busy` now processes its records (it does not poll); `other` joins the partitions
        share_mock.assign(group, _member_id(other), topic, partitions)
        deadline = time.monotonic() + WAIT_S
        got: list[ConsumerRecord] = []
        while other.group_state().assignment != tps:
            assert time.monotonic() < deadline
            got += other.poll(0.05)
        settle = time.monotonic() + 3.0
        while time.monotonic() < settle:
            got += other.poll(0.1)
        assert len(got) >= len(values) - SHARE_POLL_RECORDS, (
            f"the other member got {len(got)} of {len(values)}; the busy one held the rest"
        )
        rest = _poll_until(busy, lambda more: len(first) + len(more) + len(got) >= len(values))
        assert sorted(r.value for r in first + rest + got) == sorted(values)
    finally:
        busy.close(10)
        other.close(10)
