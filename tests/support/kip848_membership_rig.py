"""Helpers of the KIP-848 membership tests: drivers, settled groups, a member in any state. [test]

The tests build real members, wired as ``kaflux.Consumer`` wires them, and drive them with
:class:`fake_consumer_group_coordinator.ConsumerGroupDriver` over a
:class:`~fake_consumer_group_coordinator.FakeConsumerGroupCoordinator` that applies Kafka's
rules (member epochs, revoke before reassign, full requests, leave epochs, sessions, OffsetCommit
v9). The driver plays the application thread (PollEvents, rebalance callbacks) and the network
thread (manager polls, requests encoded and decoded at the negotiated version, responses
delivered), ``step_ms`` (10 ms) at a time. Held responses (``driver.hold``) put a member in a
chosen state with a heartbeat in flight, whose answer (an injected error, if any) is then
delivered in that state.
"""

from __future__ import annotations

import enum
from typing import Any

from kaflux.consumer.member_state import (
    MemberState,
)
from kaflux.protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from kaflux.protocol.messages.metadata import MetadataRequest
from kaflux.protocol.messages.offset_commit import (
    OffsetCommitRequest,
)
from kaflux.structs import TopicPartition

from support.fake_consumer_group_coordinator import (
    FENCED_MEMBER_EPOCH,
    ConsumerGroupDriver,
    FakeConsumerGroupCoordinator,
)
from support.fake_group_coordinator import DriverBase, Exchange, Member

M = MemberState
HB = ConsumerGroupHeartbeatRequest
REVOKED = "on_partitions_revoked"
ASSIGNED = "on_partitions_assigned"
LOST = "on_partitions_lost"
#: the fake coordinator's defaults
HEARTBEAT_MS = 1_000
SESSION_MS = 10_000
MAX_POLL_MS = 30_000
#: states that are steps of a reconciliation (Java's RECONCILING)
RECONCILING_STEPS = (
    M.RECONCILING,
    M.PREPARE_REVOCATION,
    M.REVOKING_PARTITIONS,
    M.PARTITIONS_REVOKED,
    M.ASSIGNING_PARTITIONS,
)

#: every driver made by a test, for the table coverage check (emptied after each test)
_DRIVERS: list[ConsumerGroupDriver] = []


def exclusive_fetching(driver: DriverBase) -> None:
    """Observer: no partition is fetchable by two running members (a partition being revoked or
    lost is no longer fetched, so it may be assigned elsewhere meanwhile)."""
    owners: dict[TopicPartition, str] = {}
    for member in driver.active():
        for tp, _, _ in member.subscription.fetchable_partitions(lambda _: False):
            other = owners.setdefault(tp, member.name)
            assert other == member.name, f"at {driver.now_ms} ms {tp} is fetched by {other} and {member.name}"


def new_driver(coordinator: FakeConsumerGroupCoordinator | None = None, **kw: Any) -> ConsumerGroupDriver:
    driver = ConsumerGroupDriver(coordinator, **kw)
    driver.observers.append(exclusive_fetching)
    _DRIVERS.append(driver)
    return driver


def tps(*partitions: int, topic: str = "t") -> set[TopicPartition]:
    return {TopicPartition(topic, p) for p in partitions}


def all_of(count: int, topic: str = "t") -> set[TopicPartition]:
    return tps(*range(count), topic=topic)


def stable_group(
    *names: str, partitions: int = 6, **member_kw: Any
) -> tuple[ConsumerGroupDriver, list[Member]]:
    """A driver with ``names`` joined one after the other, each time settled."""
    driver = new_driver(topics={"t": partitions})
    members = []
    for name in names:
        members.append(driver.add_member(name, **member_kw))
        driver.settle()
    return driver, members


def entered(member: Member, state: MemberState) -> int:
    """When ``member`` last entered ``state``."""
    return max(t for t, _, target in member.transitions if target is state)


def moves(member: Member, since: int = 0) -> list[tuple[MemberState, MemberState]]:
    """The (source, target) transitions of ``member`` from index ``since`` on."""
    return [(source, target) for _, source, target in member.transitions[since:]]


def owned_in(
    request: ConsumerGroupHeartbeatRequest, driver: ConsumerGroupDriver
) -> set[TopicPartition] | None:
    """The partitions a heartbeat says the member owns (None: not sent)."""
    if request.topic_partitions is None:
        return None
    return driver.coordinator.names((t.topic_id, p) for t in request.topic_partitions for p in t.partitions)


def held_heartbeat(driver: ConsumerGroupDriver, member: Member) -> Exchange | None:
    return next((e for e in driver.heartbeats(member) if e.held and not e.done), None)


def member_in(
    state: MemberState, *, code: int | None = None, **member_kw: Any
) -> tuple[ConsumerGroupDriver, Member]:
    """A member ``a`` (of group "g" on topic "t" with 6 partitions) in ``state``.

    In the states a member heartbeats in, a heartbeat of ``a`` is in flight with its response
    held (answered with error ``code`` if given): ``driver.release_all()`` delivers it in
    ``state``. PREPARE_LEAVING and LEAVING are reached by unsubscribing with such a heartbeat in
    flight (LEAVING without a listener; its leave heartbeat is held too)."""
    driver = new_driver(topics={"t": 6})

    def hold_next_heartbeat(a: Member) -> None:
        if code is not None:
            driver.coordinator.inject(HB, code, member_id=a.member_id)
        driver.hold(HB, a)
        driver.run_until(lambda: held_heartbeat(driver, a) is not None, timeout_ms=3 * HEARTBEAT_MS)
        if state is not M.LEAVING:
            driver.unhold(HB, a)

    if state in (M.JOINING, M.UNJOINED):
        a = driver.add_member("a", **member_kw)
        if state is M.UNJOINED:
            a.polling = False
        else:
            hold_next_heartbeat(a)
    elif state in (M.ASSIGNING_PARTITIONS, M.ACKNOWLEDGING):
        a = driver.add_member("a", **member_kw)
        a.auto_ack = False
        driver.run_until(lambda: a.state is M.ASSIGNING_PARTITIONS)
        hold_next_heartbeat(a)
        if state is M.ACKNOWLEDGING:
            a.ack(ASSIGNED)
    elif state is M.RECONCILING:
        a = driver.add_member("a", **member_kw)
        driver.settle()
        # The coordinator assigns "u" before the member's metadata knows it.
        driver.hold(MetadataRequest, a)
        driver.coordinator.cluster.create_topic("u", 2)
        a.subscribe(["t", "u"])
        driver.run_until(lambda: a.state is M.RECONCILING)
        hold_next_heartbeat(a)
    elif state in (M.PREPARE_REVOCATION, M.REVOKING_PARTITIONS):
        a = driver.add_member("a", auto_commit=state is M.PREPARE_REVOCATION, **member_kw)
        driver.settle()
        if state is M.PREPARE_REVOCATION:
            for tp in a.assignment():
                a.consume(tp, 3)
            driver.hold(OffsetCommitRequest, a)  # the commit before the revocation waits
        else:
            a.auto_ack = False  # on_partitions_revoked waits
        driver.add_member("b")
        driver.run_until(lambda: a.state is state)
        hold_next_heartbeat(a)
    elif state is M.LOSING_PARTITIONS:
        a = driver.add_member("a", **member_kw)
        driver.settle()
        a.auto_ack = False
        driver.coordinator.inject(HB, FENCED_MEMBER_EPOCH, member_id=a.member_id)
        driver.run_until(lambda: a.state is M.LOSING_PARTITIONS, timeout_ms=3 * HEARTBEAT_MS)
    elif state is M.STALE:
        a = driver.add_member("a", max_poll_interval_ms=3_000, **member_kw)
        driver.settle()
        a.polling = False
        driver.run_until(lambda: a.state is M.STALE, timeout_ms=10_000)
    elif state in (M.STABLE, M.PREPARE_LEAVING, M.LEAVING):
        a = driver.add_member("a", has_listener=state is not M.LEAVING, **member_kw)
        driver.settle()
        a.auto_ack = state is not M.PREPARE_LEAVING
        hold_next_heartbeat(a)
        if state is not M.STABLE:
            a.leave()
    else:
        raise AssertionError(f"no set-up for {state.name}")
    assert a.state is state, (state, a.states())
    return driver, a


def _name(value: object) -> str:
    return value.name if isinstance(value, enum.Enum) else str(value)


def partitions(response: ConsumerGroupHeartbeatResponse) -> list[int] | None:
    """The partition numbers a heartbeat response assigns (None: the assignment is unchanged)."""
    if response.assignment is None:
        return None
    return sorted(p for t in response.assignment.topic_partitions for p in t.partitions)


def forget_drivers() -> None:
    """Forget the drivers made so far (``conftest.py`` does after every test)."""
    _DRIVERS.clear()
