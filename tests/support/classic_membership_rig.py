"""Helpers of the classic membership tests: a settled group, partitions, timings. [test]

Every test builds real memberships and heartbeat managers, wired as ``kaflux.Consumer`` wires
them, and drives them with :class:`fake_group_coordinator.GroupDriver`: the driver plays the
application thread (PollEvents, rebalance callbacks) and the network thread (manager polls,
requests encoded and decoded at the negotiated version, responses delivered), ``step_ms``
(10 ms) at a time.
"""

from __future__ import annotations

from typing import Any

from kaflux.consumer.member_state import MemberState
from kaflux.structs import TopicPartition

from support.fake_group_coordinator import (
    GroupDriver,
    Member,
)

M = MemberState
REVOKED = "on_partitions_revoked"
ASSIGNED = "on_partitions_assigned"
LOST = "on_partitions_lost"
HEARTBEAT_MS = 1_000
SESSION_MS = 10_000
MAX_POLL_MS = 30_000
EAGER = ("range",)
COOPERATIVE = ("cooperative-sticky",)
#: states in which an eager member must hold nothing fetchable: from the start of the
#: revocation until its new assignment is acknowledged
EAGER_NOTHING_FETCHABLE = {
    M.PREPARE_REVOCATION,
    M.REVOKING_PARTITIONS,
    M.PARTITIONS_REVOKED,
    M.JOINING,
    M.AWAITING_SYNC,
}


def tps(*partitions: int, topic: str = "t") -> set[TopicPartition]:
    return {TopicPartition(topic, p) for p in partitions}


def all_of(count: int, topic: str = "t") -> set[TopicPartition]:
    return tps(*range(count), topic=topic)


def stable_group(
    *names: str, partitions: int = 6, assignors: tuple[str, ...] = EAGER, **member_kw: Any
) -> tuple[GroupDriver, list[Member]]:
    """A driver with ``names`` joined one after the other and settled."""
    driver = GroupDriver(topics={"t": partitions})
    members = []
    for name in names:
        members.append(driver.add_member(name, assignors=assignors, **member_kw))
        driver.settle()
    return driver, members


def sent_between(member: Member, api: type, start: int, end: int) -> list[int]:
    return [e.sent_ms for e in member.sent(api) if start <= e.sent_ms <= end]


def entered(member: Member, state: MemberState) -> int:
    """When ``member`` last entered ``state``."""
    return max(t for t, _, target in member.transitions if target is state)


def record_fetchable(
    driver: GroupDriver, member: Member
) -> list[tuple[int, MemberState, frozenset[TopicPartition]]]:
    """After every action of the driver: (time, state, fetchable partitions) of ``member``."""
    seen: list[tuple[int, MemberState, frozenset[TopicPartition]]] = []
    driver.observers.append(lambda d: seen.append((d.now_ms, member.state, frozenset(member.fetchable()))))
    return seen
