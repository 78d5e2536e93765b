"""Three kaflux members per assignment strategy converge to a complete, disjoint assignment, and
records produced after convergence are each consumed exactly once (on Tansu and on noida-db)."""

from __future__ import annotations

import collections
import time

import pytest

from kaflux.devbrokers.brokers import Broker

from support.group_helpers import (
    WAIT_S,
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

PARTITIONS = 6
STRATEGIES = ["range", "roundrobin", "sticky", "cooperative-sticky"]


def layout_problems(strategy: str, owned: list[frozenset[int]]) -> list[str]:
    """What is wrong with the shape of a 6-partition, 3-member assignment for this strategy."""
    problems = [f"{sorted(o)} is not 2 partitions" for o in owned if len(o) != 2]
    if strategy == "range":  # consecutive blocks
        problems += [f"{sorted(o)} is not a range" for o in owned if max(o) - min(o) != len(o) - 1]
    if strategy == "roundrobin":  # dealt in turn: p and p + 3
        problems += [f"{sorted(o)} is not dealt round robin" for o in owned if len({p % 3 for p in o}) != 1]
    return problems


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_three_members_converge_and_consume_each_record_exactly_once(
    broker: Broker, topic_name: str, strategy: str
):
    create_topic(broker.bootstrap_servers, topic_name, PARTITIONS)
    config = member_config(broker.bootstrap_servers, new_group(), strategy)
    members = [ThreadMember(f"m{i}", config, [topic_name]).start() for i in range(3)]
    try:
        wait_converged(members, PARTITIONS)
        owned = {m.name: m.owned for m in members}
        assert layout_problems(strategy, list(owned.values())) == []
        events_at_convergence = {m.name: len(m.events) for m in members}

        per_partition = 50
        values = {p: [b"%d-%d" % (p, i) for i in range(per_partition)] for p in range(PARTITIONS)}
        produce(broker.bootstrap_servers, topic_name, values)
        expected = {v for vs in values.values() for v in vs}
        wait_until(
            lambda: sum(len(m.records) for m in members) >= len(expected),
            WAIT_S,
            lambda: f"consumed {sum(len(m.records) for m in members)} of {len(expected)}",
        )
        deadline = time.monotonic() + 1.0  # a duplicate delivered late would show up here
        polls = {m.name: m.polls for m in members}
        wait_until(
            lambda: time.monotonic() >= deadline and all(m.polls >= polls[m.name] + 2 for m in members),
            WAIT_S,
            "the members stopped polling",
        )

        # No rebalance happened between convergence and the end: the comparison is meaningful.
        assert {m.name: len(m.events) for m in members} == events_at_convergence
        received = [r for m in members for r in m.records]
        counts = collections.Counter(r.value for r in received)
        assert set(counts) == expected
        assert [v for v, n in counts.items() if n != 1] == []
        # Each record came from the member that owned its partition.
        assert [(r.member, r.partition) for r in received if r.partition not in owned[r.member]] == []
    finally:
        stop_all(members)
    for m in members:
        m.check()
