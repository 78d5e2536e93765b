"""The rebalance listener contract (Apache Kafka): callbacks run on the thread that polls, the rebalance
waits for them, and an exception raised in one reaches the caller of ``poll()``."""

from __future__ import annotations

import threading
import time

import pytest

from kaflux import Consumer
from kaflux.consumer.member_state import MemberState
from kaflux.devbrokers.brokers import Broker

from support.group_helpers import (
    WAIT_S,
    Event,
    RecordingListener,
    ThreadMember,
    create_topic,
    member_config,
    new_group,
    stop_all,
    wait_converged,
    wait_until,
)

pytestmark = pytest.mark.integration

PARTITIONS = 6
ALL = frozenset(range(PARTITIONS))


def test_listener_callbacks_run_on_the_polling_thread(kafka: Broker, topic_name: str):
    create_topic(kafka.bootstrap_servers, topic_name, PARTITIONS)
    # range: eager, so enforce_rebalance() revokes everything and assigns it again
    member = ThreadMember("A", member_config(kafka.bootstrap_servers, new_group(), "range"), [topic_name])
    member.start()
    try:
        wait_until(lambda: member.owned == ALL, WAIT_S, lambda: f"A owns {sorted(member.owned)}")
        member.call(lambda c: c.enforce_rebalance())  # callbacks inside poll()
        wait_until(
            lambda: [e.kind for e in member.events] == ["assigned", "revoked", "assigned"],
            WAIT_S,
            lambda: f"events {member.events}",
        )
        member.call(lambda c: c.unsubscribe())  # the revocation runs inside unsubscribe()
    finally:
        member.stop()
    member.check()
    events = member.events
    assert [(e.kind, e.partitions) for e in events] == [
        ("assigned", ALL),
        ("revoked", ALL),
        ("assigned", ALL),
        ("revoked", ALL),
    ]
    assert {e.thread for e in events} == {member.thread.name}
    assert all(e.on_polling_thread for e in events)


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_rebalance_waits_for_a_slow_on_partitions_revoked(kafka: Broker, topic_name: str, strategy: str):
    create_topic(kafka.bootstrap_servers, topic_name, PARTITIONS)
    config = member_config(kafka.bootstrap_servers, new_group(), strategy)
    slow_s = 1.5
    a = ThreadMember("A", config, [topic_name], listener_options={"slow_first_revoke_s": slow_s}).start()
    b = ThreadMember("B", config, [topic_name])
    try:
        wait_until(lambda: a.owned == ALL, WAIT_S, lambda: f"A owns {sorted(a.owned)}")
        b.start()
        wait_converged([a, b], PARTITIONS)
    finally:
        stop_all([a, b])
    a.check()
    b.check()
    (slow,) = [e for e in a.events if e.kind == "revoked"][:1]
    assert slow.returned - slow.entered >= slow_s
    taken: list[Event] = [e for e in b.events if e.kind == "assigned" and e.partitions & slow.partitions]
    assert taken, f"B never got any of {sorted(slow.partitions)}"
    # B is handed A's partitions only after A's on_partitions_revoked returned.
    assert taken[0].entered >= slow.returned, (taken[0], slow)


class ListenerFailure(Exception):
    pass


def poll_for(consumer: Consumer, seconds: float) -> None:
    """Poll for ``seconds`` (in 0.2 s polls); fails the test if nothing was raised by then."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        consumer.poll(0.2)
    raise AssertionError(f"poll() raised nothing within {seconds} s")


def test_an_exception_raised_in_a_listener_reaches_the_caller_of_poll(kafka: Broker, topic_name: str):
    create_topic(kafka.bootstrap_servers, topic_name, PARTITIONS)
    events: list[Event] = []
    listener = RecordingListener(
        "A",
        events.append,
        raise_in={
            "assigned": ListenerFailure("from on_partitions_assigned"),
            "revoked": ListenerFailure("from on_partitions_revoked"),
        },
    )
    consumer = Consumer(member_config(kafka.bootstrap_servers, new_group(), "range"))
    try:
        consumer.subscribe([topic_name], listener=listener)
        with pytest.raises(ListenerFailure, match="from on_partitions_assigned"):
            poll_for(consumer, WAIT_S)
        assert [(e.kind, e.partitions) for e in events] == [("assigned", ALL)]
        consumer.poll(0.2)  # the rebalance went on: the partitions stay assigned
        assert {tp.partition for tp in consumer.assignment()} == ALL

        consumer.enforce_rebalance()
        with pytest.raises(ListenerFailure, match="from on_partitions_revoked"):
            poll_for(consumer, WAIT_S)
        assert [(e.kind, e.partitions) for e in events] == [("assigned", ALL), ("revoked", ALL)]
        deadline = time.monotonic() + WAIT_S
        while len(events) < 3 and time.monotonic() < deadline:  # the rebalance goes on
            consumer.poll(0.2)
        assert [(e.kind, e.partitions) for e in events][2:] == [("assigned", ALL)]
    finally:
        consumer.close(10.0)


def test_close_while_a_revocation_is_pending_runs_on_partitions_revoked_once(kafka: Broker, topic_name: str):
    """The application is busy (not polling) when a rebalance starts, then closes the consumer.
    Client-side behaviour."""
    create_topic(kafka.bootstrap_servers, topic_name, PARTITIONS)
    group = new_group()
    events: list[Event] = []
    listener = RecordingListener("A", events.append)
    listener.polling_thread = threading.current_thread()
    a = Consumer(member_config(kafka.bootstrap_servers, group, "range"))
    b = ThreadMember("B", member_config(kafka.bootstrap_servers, group, "range"), [topic_name])
    try:
        a.subscribe([topic_name], listener=listener)
        deadline = time.monotonic() + WAIT_S
        while not a.assignment():
            assert time.monotonic() < deadline, "no assignment"
            a.poll(0.1)
        b.start()  # the rebalance starts while A does not poll
        membership = a._membership  # test hook: A's revocation callback is waiting for the application
        assert membership is not None
        wait_until(
            lambda: membership.state is MemberState.REVOKING_PARTITIONS, WAIT_S, lambda: membership.state.name
        )
        a.close(10.0)
        assert [(e.kind, e.partitions) for e in events] == [("assigned", ALL), ("revoked", ALL)]
    finally:
        a.close(10.0)
        b.stop()
    b.check()
