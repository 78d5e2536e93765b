"""``max.poll.interval.ms`` (Apache Kafka): a member that stops polling for longer leaves
the group, its partitions go to the other member, its next ``poll()`` reports them lost and it
rejoins; its commits fail while it is out of the group."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from kaflux import Consumer, TopicPartition
from kaflux.consumer.member_state import MemberState
from kaflux.devbrokers.brokers import Broker
from kaflux.errors import CommitFailedError, RebalanceInProgressError

from support.group_helpers import (
    WAIT_S,
    Event,
    RecordingListener,
    ThreadMember,
    create_topic,
    member_config,
    new_group,
    wait_until,
)

pytestmark = pytest.mark.integration

PARTITIONS = 4
ALL = frozenset(range(PARTITIONS))
MAX_POLL_INTERVAL_MS = 3000


@dataclass
class ExpiredMember:
    """Member A (polled by the test, max.poll.interval.ms=3000) stopped polling until member B
    (polling all the time) owned every partition."""

    consumer: Consumer
    listener: RecordingListener
    events: list[Event]
    owned_before: frozenset[int]
    other: ThreadMember


@pytest.fixture
def expired_member(kafka: Broker, topic_name: str) -> Iterator[ExpiredMember]:
    create_topic(kafka.bootstrap_servers, topic_name, PARTITIONS)
    group = new_group()
    b = ThreadMember("B", member_config(kafka.bootstrap_servers, group, "range"), [topic_name]).start()
    events: list[Event] = []
    listener = RecordingListener("A", events.append)
    listener.polling_thread = threading.current_thread()
    a = Consumer(
        member_config(kafka.bootstrap_servers, group, "range", max_poll_interval_ms=MAX_POLL_INTERVAL_MS)
    )
    try:
        a.subscribe([topic_name], listener=listener)
        deadline = time.monotonic() + WAIT_S
        while not (listener.owned and listener.owned | b.owned == ALL and not listener.owned & b.owned):
            assert time.monotonic() < deadline, f"no convergence: A={listener.owned} B={b.owned}"
            a.poll(0.1)
        owned_before = frozenset(listener.owned)
        # A stops polling now. After max.poll.interval.ms it leaves and B takes everything over.
        wait_until(lambda: b.owned == ALL, WAIT_S, lambda: f"B owns {sorted(b.owned)}")
        yield ExpiredMember(a, listener, events, owned_before, b)
    finally:
        b.stop()
        a.close(10.0)
    b.check()


def test_member_that_stops_polling_loses_its_partitions_and_rejoins(expired_member: ExpiredMember):
    a, b, events = expired_member.consumer, expired_member.other, expired_member.events
    assert b.owned == ALL  # the other member took over all partitions meanwhile
    events_before = len(events)

    started = time.monotonic()
    a.poll(6.0)  # the next poll
    returned = time.monotonic()
    lost = [e for e in events[events_before:] if e.kind == "lost"]
    assert [e.partitions for e in lost] == [expired_member.owned_before]
    assert started <= lost[0].entered <= returned
    assert lost[0].on_polling_thread
    # lost, not revoked (an eager rebalance while A and B first converged may have revoked)
    assert [e for e in events[events_before:] if e.kind == "revoked"] == []

    deadline = time.monotonic() + WAIT_S
    owned = expired_member.listener.owned
    while not (owned and owned | b.owned == ALL and not owned & b.owned):  # rejoined
        assert time.monotonic() < deadline, f"A did not rejoin: A={sorted(owned)} B={sorted(b.owned)}"
        a.poll(0.1)
    assert {tp.partition for tp in a.assignment()} == owned


def test_commit_from_a_member_removed_after_max_poll_interval_fails(
    expired_member: ExpiredMember, topic_name: str
):
    partition = TopicPartition(topic_name, min(expired_member.owned_before))
    with pytest.raises((CommitFailedError, RebalanceInProgressError)):
        expired_member.consumer.commit_sync({partition: 1}, timeout=10.0)


# --- a lone member past max.poll.interval.ms (client-side behaviours) ---------------------------------


@contextlib.contextmanager
def lone_expired_member(broker: Broker, topic: str) -> Iterator[tuple[Consumer, list[Event]]]:
    """A single member that joined, then did not poll until it left the group (STALE)."""
    create_topic(broker.bootstrap_servers, topic, 2)
    events: list[Event] = []
    listener = RecordingListener("A", events.append)
    listener.polling_thread = threading.current_thread()
    config = member_config(broker.bootstrap_servers, new_group(), max_poll_interval_ms=MAX_POLL_INTERVAL_MS)
    consumer = Consumer(config)
    try:
        consumer.subscribe([topic], listener=listener)
        deadline = time.monotonic() + WAIT_S
        while not consumer.assignment():
            assert time.monotonic() < deadline, "no assignment"
            consumer.poll(0.1)
        membership = consumer._membership  # test hook: wait until the member has left the group
        assert membership is not None
        wait_until(lambda: membership.state is MemberState.STALE, WAIT_S, lambda: membership.state.name)
        yield consumer, events
    finally:
        consumer.close(10.0)


def test_commit_from_a_lone_member_removed_after_max_poll_interval_fails(kafka: Broker, topic_name: str):
    with lone_expired_member(kafka, topic_name) as (consumer, _):
        with pytest.raises((CommitFailedError, RebalanceInProgressError)):
            consumer.commit_sync({TopicPartition(topic_name, 0): 1}, timeout=10.0)


def test_the_next_poll_after_max_poll_interval_reports_the_partitions_lost(kafka: Broker, topic_name: str):
    with lone_expired_member(kafka, topic_name) as (consumer, events):
        started = time.monotonic()
        consumer.poll(1.0)  # noida answers in milliseconds: a second is plenty
        returned = time.monotonic()
        # (the rejoin may complete within the same poll: an "assigned" may follow)
        assert [(e.kind, e.partitions) for e in events[:2]] == [("assigned", {0, 1}), ("lost", {0, 1})]
        assert started <= events[1].entered <= returned


def test_close_after_polls_of_an_expired_member_reports_the_partitions_lost_once(
    kafka: Broker, topic_name: str
):
    with lone_expired_member(kafka, topic_name) as (consumer, events):
        consumer.poll(0)  # queues the PollEvent that turns the stale member into a losing one
        consumer.close(10.0)
        assert [(e.kind, e.partitions) for e in events] == [("assigned", {0, 1}), ("lost", {0, 1})]


def test_close_of_an_expired_member_reports_the_partitions_lost(kafka: Broker, topic_name: str):
    with lone_expired_member(kafka, topic_name) as (consumer, events):
        consumer.close(10.0)
        assert [(e.kind, e.partitions) for e in events] == [("assigned", {0, 1}), ("lost", {0, 1})]
