"""Group-related consumer API: subscribe/assign exclusivity, pattern subscriptions, unsubscribe(),
group_metadata() and enforce_rebalance() (Apache Kafka)."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable

import pytest

from kaflux import Consumer, TopicPartition
from kaflux.devbrokers.brokers import Broker
from kaflux.errors import IllegalStateError

from support.group_helpers import (
    WAIT_S,
    Event,
    RecordingListener,
    ThreadMember,
    create_topic,
    member_config,
    new_group,
    produce,
    stop_all,
    wait_converged,
    wait_until,
)

pytestmark = pytest.mark.integration

PARTITIONS = 4
ALL = frozenset(range(PARTITIONS))


def poll_until(
    consumer: Consumer, condition: Callable[[], object], timeout: float, describe: Callable[[], str]
) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, describe()
        consumer.poll(0.1)


def test_subscribe_and_assign_cannot_be_mixed(kafka: Broker, topic_name: str):
    create_topic(kafka.bootstrap_servers, topic_name, 1)
    tp = TopicPartition(topic_name, 0)
    consumer = Consumer(member_config(kafka.bootstrap_servers, new_group()))
    try:
        consumer.subscribe([topic_name])
        with pytest.raises(IllegalStateError, match=r"mutually exclusive.*unsubscribe") as info:
            consumer.assign([tp])
        assert "assign()" in str(info.value) and "subscribe()" in str(info.value)
        assert consumer.subscription() == {topic_name}  # unchanged

        consumer.unsubscribe()
        consumer.assign([tp])
        with pytest.raises(IllegalStateError, match=r"mutually exclusive.*unsubscribe"):
            consumer.subscribe([topic_name])
        with pytest.raises(IllegalStateError, match=r"mutually exclusive.*unsubscribe"):
            consumer.subscribe(pattern=re.escape(topic_name))
        assert consumer.assignment() == {tp}  # unchanged
    finally:
        consumer.close(10.0)


def test_pattern_subscription_picks_up_a_topic_created_after_subscribing(kafka: Broker, topic_name: str):
    first, later = f"{topic_name}-first", f"{topic_name}-later"
    create_topic(kafka.bootstrap_servers, first, 2)
    config = member_config(kafka.bootstrap_servers, new_group(), metadata_max_age_ms=500)
    consumer = Consumer(config)
    try:
        consumer.subscribe(pattern=re.escape(topic_name) + r"-.*")
        poll_until(
            consumer,
            lambda: {tp.topic for tp in consumer.assignment()} == {first},
            WAIT_S,
            lambda: f"assignment {consumer.assignment()}",
        )
        create_topic(kafka.bootstrap_servers, later, 2)
        produce(kafka.bootstrap_servers, later, {0: [b"later-0"], 1: [b"later-1"]})
        received: list[bytes] = []
        deadline = time.monotonic() + WAIT_S
        while len(received) < 2:
            assert time.monotonic() < deadline, f"got {received}; assignment {consumer.assignment()}"
            received += [r.value for r in consumer.poll(0.1) if r.topic == later]
        assert sorted(received) == [b"later-0", b"later-1"]
        assert consumer.assignment() == {TopicPartition(t, p) for t in (first, later) for p in (0, 1)}
        assert consumer.subscription() == {first, later}
    finally:
        consumer.close(10.0)


def test_unsubscribe_runs_on_partitions_revoked_and_leaves_the_group(kafka: Broker, topic_name: str):
    create_topic(kafka.bootstrap_servers, topic_name, PARTITIONS)
    config = member_config(kafka.bootstrap_servers, new_group(), "range")
    a, b = ThreadMember("A", config, [topic_name]).start(), ThreadMember("B", config, [topic_name]).start()
    try:
        wait_converged([a, b], PARTITIONS)
        owned = a.owned
        events_before = len(a.events)
        called = time.monotonic()
        assignment_after = a.call(lambda c: (c.unsubscribe(), c.assignment())[1])  # type: ignore[func-returns-value]
        returned = time.monotonic()
        assert assignment_after == set()
        new_events = a.events[events_before:]
        assert [(e.kind, e.partitions) for e in new_events] == [("revoked", owned)]
        assert called <= new_events[0].entered and new_events[0].returned <= returned  # inside unsubscribe()
        wait_until(lambda: b.owned == ALL, WAIT_S, lambda: f"B owns {sorted(b.owned)}")
        assert a.events[events_before:] == new_events  # A took no further part
    finally:
        stop_all([a, b])
    a.check()
    b.check()


def subscribed(kafka: Broker, topic: str, group: str) -> tuple[Consumer, list[Event]]:
    """A single member subscribed to a new topic (eager ``range``), logging its listener calls."""
    create_topic(kafka.bootstrap_servers, topic, PARTITIONS)
    events: list[Event] = []
    listener = RecordingListener("A", events.append)
    listener.polling_thread = threading.current_thread()
    consumer = Consumer(member_config(kafka.bootstrap_servers, group, "range"))
    consumer.subscribe([topic], listener=listener)
    return consumer, events


def test_group_metadata_has_generation_and_member_id_after_joining(kafka: Broker, topic_name: str):
    group = new_group()
    consumer, _ = subscribed(kafka, topic_name, group)
    try:
        before = consumer.group_metadata()
        assert (before.generation_id, before.member_id) == (-1, "")
        poll_until(consumer, consumer.assignment, WAIT_S, lambda: "no assignment")
        metadata = consumer.group_metadata()
        assert metadata.group_id == group
        assert metadata.generation_id >= 0  # Tansu counts generations from 0, Kafka from 1
        assert metadata.member_id != ""
        assert metadata.group_instance_id is None
    finally:
        consumer.close(10.0)


def test_group_state_follows_the_member_from_joining_to_stable(kafka: Broker, topic_name: str):
    group = new_group()
    consumer, _ = subscribed(kafka, topic_name, group)
    try:
        before = consumer.group_state()
        assert (before.group_id, before.protocol, before.state) == (group, "classic", "UNJOINED")
        assert before.assignment == frozenset()
        poll_until(consumer, consumer.assignment, WAIT_S, lambda: "no assignment")
        after = consumer.group_state()
        assert (after.state, after.member_id) == ("STABLE", consumer.group_metadata().member_id)
        assert after.generation == consumer.group_metadata().generation_id
        assert after.assignment == frozenset(consumer.assignment())
        assert after.reason == "the subscription changed"
    finally:
        consumer.close(10.0)


def test_enforce_rebalance_starts_a_new_generation(kafka: Broker, topic_name: str):
    consumer, events = subscribed(kafka, topic_name, new_group())
    try:
        poll_until(consumer, consumer.assignment, WAIT_S, lambda: "no assignment")
        first = consumer.group_metadata()
        consumer.enforce_rebalance()
        poll_until(
            consumer,
            lambda: consumer.group_metadata().generation_id > first.generation_id and consumer.assignment(),
            WAIT_S,
            lambda: f"still {consumer.group_metadata()}",
        )
        assert consumer.group_metadata().member_id == first.member_id
        # range is eager: the new generation revoked and assigned everything again
        assert [(e.kind, e.partitions) for e in events] == [
            ("assigned", ALL),
            ("revoked", ALL),
            ("assigned", ALL),
        ]
    finally:
        consumer.close(10.0)


def test_first_poll_after_an_idle_period_starts_the_join_at_once(kafka: Broker, topic_name: str):
    """Regression (fixed in c793e41): poll() queued its PollEvent without waking the network thread,
    so a join requested by subscribe() waited up to 5 s for the thread's next self-timed pass."""
    create_topic(kafka.bootstrap_servers, topic_name, 2)
    consumer = Consumer(member_config(kafka.bootstrap_servers, new_group()))
    try:
        consumer.subscribe([topic_name])
        time.sleep(1.0)  # the scenario: the application does other work before its first poll()
        started = time.monotonic()
        poll_until(consumer, consumer.assignment, WAIT_S, lambda: "no assignment")
        # noida-db completes a join in about 0.4 s
        assert time.monotonic() - started < 2.0
    finally:
        consumer.close(10.0)
