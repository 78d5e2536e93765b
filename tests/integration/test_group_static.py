"""Static membership (``group.instance.id``, Apache Kafka): a static member closed and restarted within
``session.timeout.ms`` gets its partitions back and the other members see no rebalance.

(The timings were chosen for Tansu, where the test ran first; they hold on Kafka too, which
rejoins faster.) On Tansu a join is held for session.timeout.ms / 2 and a SyncGroup for about 3 s, so the
restarted member is back about session/2 + 3 s after it re-subscribed. Tansu does not refresh the
member's session on the rejoin itself: the restarted member must heartbeat before the old
session (counted from the old consumer's last heartbeat) runs out. A 12 s session with 0.5 s
heartbeats leaves about 2 s of margin.
"""

from __future__ import annotations

import time

import pytest

from kaflux.devbrokers.brokers import Broker

from support.group_helpers import (
    WAIT_S,
    ThreadMember,
    create_topic,
    describe,
    member_config,
    new_group,
    produce,
    stop_all,
    wait_converged,
    wait_until,
)

pytestmark = pytest.mark.integration

PARTITIONS = 6
SESSION_MS = 12000
HEARTBEAT_MS = 500


def test_restarted_static_member_gets_its_partitions_back_without_a_rebalance(kafka: Broker, topic_name: str):
    # range is eager: any rebalance would revoke every partition of every member
    strategy = "range"
    create_topic(kafka.bootstrap_servers, topic_name, PARTITIONS)
    group = new_group()

    def static(instance: str) -> ThreadMember:
        config = member_config(
            kafka.bootstrap_servers,
            group,
            strategy,
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=HEARTBEAT_MS,
            group_instance_id=instance,
        )
        return ThreadMember(instance, config, [topic_name])

    a, b, c = static("A"), static("B"), static("C")
    members = [a, b, c]
    for m in members:
        m.start()
    try:
        wait_converged(members, PARTITIONS, timeout=WAIT_S + SESSION_MS / 1000)
        # Let the group run steadily for a few heartbeats before the restart.
        converged_at = time.monotonic()
        wait_until(lambda: time.monotonic() - converged_at > 4 * HEARTBEAT_MS / 1000, WAIT_S, "")
        owned_by = {m.name: m.owned for m in members}
        events_before = {m.name: len(m.events) for m in (a, b)}

        c.stop()  # a static member leaves no LeaveGroup behind: its place is kept
        closed_at = time.monotonic()
        restarted = static("C").start()
        members = [a, b, restarted]
        wait_until(
            lambda: restarted.owned,
            WAIT_S,
            lambda: f"the restarted member got nothing: {describe(members)}",
        )
        assert time.monotonic() - closed_at < SESSION_MS / 1000, "the restart took longer than the session"
        assert restarted.owned == owned_by["C"]

        # The old session would have expired by now had the restart not taken its place; the group
        # still works with the same owners: every member consumes what is produced to its partitions.
        wait_until(lambda: time.monotonic() > closed_at + SESSION_MS / 1000 + 1.0, WAIT_S, "")
        values = {p: [b"after-restart-%d" % p] for p in range(PARTITIONS)}
        produce(kafka.bootstrap_servers, topic_name, values)
        wait_until(
            lambda: all(
                {r.value for r in m.records} >= {values[p][0] for p in owned_by[name]}
                for name, m in (("A", a), ("B", b), ("C", restarted))
            ),
            WAIT_S,
            lambda: f"records not consumed by their owners: {describe(members)}",
        )
        assert {m.name: m.events[events_before[m.name] :] for m in (a, b)} == {"A": [], "B": []}
        assert [(e.kind, e.partitions) for e in restarted.events] == [("assigned", owned_by["C"])]
    finally:
        stop_all(members)
    for m in members:
        m.check()
