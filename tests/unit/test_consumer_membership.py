"""ConsumerMembershipManager (KIP-848, ``group.protocol=consumer``) against an in-memory
coordinator, on injected time.

Every test builds real members, wired as ``kaflux.Consumer`` wires them, and drives them with
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
import itertools
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kaflux.consumer.member_state import (
    _CONSUMER_ALLOWED_SOURCES,
    CONSUMER_MEMBER_TRANSITIONS,
    MemberState,
)
from kaflux.errors import (
    CommitFailedError,
    GroupAuthorizationFailedError,
    IllegalStateError,
    UnsupportedAssignorError,
)
from kaflux.network.cluster import coordinator_node_id
from kaflux.network.requests import MAX_POLL_TIMEOUT_MS
from kaflux.protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatRequestTopicPartitions,
    ConsumerGroupHeartbeatResponse,
)
from kaflux.protocol.messages.find_coordinator import FindCoordinatorRequest
from kaflux.protocol.messages.metadata import MetadataRequest
from kaflux.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
)
from kaflux.state_machine import StateMachine
from kaflux.structs import TopicPartition

from support.fake_consumer_group_coordinator import (
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE,
    FENCED_MEMBER_EPOCH,
    GROUP_AUTHORIZATION_FAILED,
    INVALID_REQUEST,
    NOT_COORDINATOR,
    STALE_MEMBER_EPOCH,
    UNKNOWN_MEMBER_ID,
    UNRELEASED_INSTANCE_ID,
    UNSUPPORTED_ASSIGNOR,
    UNSUPPORTED_VERSION,
    ConsumerGroupDriver,
    ConsumerGroupState,
    FakeConsumerGroupCoordinator,
)
from support.fake_group_coordinator import DriverBase, Exchange, Member, exclusive_ownership
from support.fakes import FakeCluster, roundtrip

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


@pytest.fixture(autouse=True)
def _forget_drivers() -> Iterator[None]:
    yield
    _DRIVERS.clear()


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


# -- the transition table ----------------------------------------------------------------------------

ALLOWED = {(source, target) for source, targets in CONSUMER_MEMBER_TRANSITIONS.items() for target in targets}


def _name(value: object) -> str:
    return value.name if isinstance(value, enum.Enum) else str(value)


@pytest.mark.parametrize(("source", "target"), list(itertools.product(MemberState, MemberState)), ids=_name)
def test_every_pair_is_allowed_exactly_when_the_consumer_table_says_so(
    source: MemberState, target: MemberState
) -> None:
    machine = StateMachine("member", source, CONSUMER_MEMBER_TRANSITIONS)
    assert machine.can_transition_to(target) is ((source, target) in ALLOWED)
    if (source, target) in ALLOWED:
        machine.transition_to(target)
        assert machine.state is target
    else:
        with pytest.raises(IllegalStateError, match=f"illegal transition {source.name} -> {target.name}"):
            machine.transition_to(target)


def test_the_consumer_table_is_the_inverse_of_its_allowed_sources_and_skips_awaiting_sync() -> None:
    assert set(CONSUMER_MEMBER_TRANSITIONS) == set(MemberState)
    inverse = {(s, t) for t, sources in _CONSUMER_ALLOWED_SOURCES.items() for s in sources}
    assert inverse == ALLOWED
    assert not any(M.AWAITING_SYNC in (s, t) for s, t in ALLOWED)  # classic only
    assert CONSUMER_MEMBER_TRANSITIONS[M.FATAL] == frozenset()


#: pairs of the table no kaflux code path takes (each checked below not to occur):
UNREACHABLE = {
    # leave() in UNJOINED completes at once; the poll timer does not run there
    (M.UNJOINED, M.PREPARE_LEAVING),
    # a stale member rejoins through LOSING_PARTITIONS (on_partitions_lost at the next poll)
    (M.STALE, M.JOINING),
    # a consumer-protocol revocation always has partitions to revoke, so it goes through
    # REVOKING_PARTITIONS (without a listener, too)
    (M.PREPARE_REVOCATION, M.PARTITIONS_REVOKED),
    # PARTITIONS_REVOKED moves on to ASSIGNING_PARTITIONS in the same call: nothing can happen
    # in between
    (M.PARTITIONS_REVOKED, M.LOSING_PARTITIONS),
    (M.PARTITIONS_REVOKED, M.PREPARE_LEAVING),
    (M.PARTITIONS_REVOKED, M.FATAL),
    # the end of a leave always goes through LEAVING
    (M.PREPARE_LEAVING, M.UNJOINED),
    # fatal errors come only in heartbeat answers, and no heartbeat of the current incarnation
    # is in flight in these states (a fence, a leave or the poll timer started a new one)
    (M.UNJOINED, M.FATAL),
    (M.LOSING_PARTITIONS, M.FATAL),
    (M.STALE, M.FATAL),
}


def test_every_transition_of_the_consumer_table_is_exercised_by_a_scenario() -> None:
    """Runs the scenario tests of this module again and collects every transition their
    members made: together they cover the table, but for :data:`UNREACHABLE`."""
    seen: set[tuple[MemberState, MemberState]] = set()
    for scenario, kwargs in SCENARIOS:
        _DRIVERS.clear()
        scenario(**kwargs)
        for driver in _DRIVERS:
            for member in driver.members.values():
                seen.update(moves(member))
    assert UNREACHABLE <= ALLOWED
    assert seen <= ALLOWED
    missing = ALLOWED - UNREACHABLE - seen
    assert not missing, sorted((s.name, t.name) for s, t in missing)
    assert not seen & UNREACHABLE, "reachable after all: remove from UNREACHABLE"


# -- joining ---------------------------------------------------------------------------------------------


def test_a_single_member_joins_with_epoch_0_and_gets_every_partition() -> None:
    driver = new_driver(topics={"t": 6})
    a = driver.add_member("a", max_poll_interval_ms=45_000)
    assert a.state is M.UNJOINED
    driver.settle()

    assert a.states() == [M.JOINING, M.RECONCILING, M.ASSIGNING_PARTITIONS, M.ACKNOWLEDGING, M.STABLE]
    assert a.assignment() == all_of(6)
    assert [(c.method, set(c.partitions)) for c in a.calls] == [(ASSIGNED, all_of(6))]
    known = driver.group().members[a.member_id]
    assert a.manager.generation == known.member_epoch == driver.group().group_epoch == 1
    assert a.manager.group_metadata.member_id == a.member_id
    assert a.manager.group_metadata.generation_id == 1
    # the member id is the client's own (KIP-1082): Uuid.toString() form, 22 characters
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", a.member_id)
    join, ack = driver.heartbeats(a)[:2]
    assert join.version == 1
    assert (join.request.member_id, join.request.member_epoch) == (a.member_id, 0)
    assert join.request.subscribed_topic_names == ["t"]
    assert join.request.subscribed_topic_regex == ""  # names always go with a regex
    assert join.request.rebalance_timeout_ms == 45_000  # max.poll.interval.ms
    assert join.request.topic_partitions == []
    assert join.response.member_epoch == 1
    # the acknowledgement: the assignment in place, at the new epoch, nothing else changed
    assert ack.request.member_epoch == 1
    assert owned_in(ack.request, driver) == all_of(6)
    assert ack.request.subscribed_topic_names is None and ack.request.rebalance_timeout_ms == -1


def test_the_join_starts_at_the_first_poll_after_subscribe() -> None:
    driver = new_driver(topics={"t": 2})
    a = driver.add_member("a")
    a.polling = False
    driver.run(2_000)
    assert a.state is M.UNJOINED
    assert driver.heartbeats(a) == []
    a.polling = True
    driver.settle()
    assert a.assignment() == all_of(2)


def test_partitions_are_not_fetchable_until_on_partitions_assigned_is_acknowledged() -> None:
    driver = new_driver(topics={"t": 3})
    a = driver.add_member("a")
    a.auto_ack = False
    driver.run_until(lambda: a.state is M.ASSIGNING_PARTITIONS)
    driver.run(500)
    assert a.assignment() == all_of(3)
    assert a.fetchable() == set()
    a.ack(ASSIGNED)
    assert a.fetchable() == all_of(3)


# -- two members: incremental, cooperative movement ------------------------------------------------------


def test_two_members_get_disjoint_complete_assignments_revoking_before_assigning() -> None:
    driver, (a,) = stable_group("a")
    driver.observers.append(exclusive_ownership)  # not even assigned to two members at once
    b = driver.add_member("b")
    driver.settle()

    assert a.assignment() == tps(0, 1, 2)
    assert b.assignment() == tps(3, 4, 5)  # exclusive_ownership held after every action
    revoked = a.calls_of(REVOKED)
    assert [set(c.partitions) for c in revoked] == [tps(3, 4, 5)]
    got = [c for c in b.calls_of(ASSIGNED) if c.partitions]
    assert [set(c.partitions) for c in got] == [tps(3, 4, 5)]
    # b was offered a's partitions only once a had run on_partitions_revoked and said so
    assert revoked[0].acknowledged_ms is not None
    assert revoked[0].acknowledged_ms < got[0].requested_ms
    ack = next(e for e in driver.heartbeats(a) if e.sent_ms >= revoked[0].acknowledged_ms)
    assert owned_in(ack.request, driver) == tps(0, 1, 2)
    assert ack.sent_ms < got[0].requested_ms
    # a kept 0-2 throughout and revoked nothing else; b's first target was empty
    assert a.calls_of(LOST) == [] and b.calls_of(REVOKED) == []
    assert moves(a)[5:] == [
        (M.STABLE, M.RECONCILING),
        (M.RECONCILING, M.PREPARE_REVOCATION),
        (M.PREPARE_REVOCATION, M.REVOKING_PARTITIONS),
        (M.REVOKING_PARTITIONS, M.PARTITIONS_REVOKED),
        (M.PARTITIONS_REVOKED, M.ASSIGNING_PARTITIONS),
        (M.ASSIGNING_PARTITIONS, M.ACKNOWLEDGING),
        (M.ACKNOWLEDGING, M.STABLE),
    ]
    # the revocation did not bump a's epoch; the acknowledgement moved it to the target epoch
    group = driver.group()
    assert a.manager.generation == b.manager.generation == group.assignment_epoch == 2


def test_partitions_being_revoked_stop_being_fetched_at_once() -> None:
    driver, (a,) = stable_group("a")
    a.auto_ack = False
    driver.add_member("b")
    driver.run_until(lambda: a.state is M.REVOKING_PARTITIONS)
    assert a.fetchable() == tps(0, 1, 2)
    assert a.assignment() == all_of(6)  # still assigned until the callback ran
    a.ack(REVOKED)
    assert a.assignment() == tps(0, 1, 2)


def test_the_acknowledgement_goes_in_the_next_heartbeat_and_the_member_becomes_stable() -> None:
    driver = new_driver(topics={"t": 4})
    a = driver.add_member("a")
    a.auto_ack = False
    driver.run_until(lambda: a.state is M.ASSIGNING_PARTITIONS)
    driver.run(3 * HEARTBEAT_MS)  # heartbeats go on while the callback runs ...
    beats = len(driver.heartbeats(a))
    assert beats >= 3
    assert all(owned_in(e.request, driver) in (None, set()) for e in driver.heartbeats(a))
    call = a.ack(ASSIGNED)
    assert a.state is M.ACKNOWLEDGING
    driver.step()
    # ... and the acknowledgement goes out at once, not at the next interval
    ack = driver.heartbeats(a)[beats]
    assert ack.sent_ms == call.acknowledged_ms
    assert owned_in(ack.request, driver) == all_of(4)
    assert a.state is M.STABLE
    assert len(driver.heartbeats(a)) == beats + 1
    assert ack.error_code == 0 and ack.response.member_epoch == a.manager.generation


def test_a_target_arriving_mid_reconciliation_is_reconciled_after_the_first_is_acknowledged() -> None:
    driver, (a, b, c) = stable_group("a", "b", "c")
    assert (a.assignment(), b.assignment(), c.assignment()) == (tps(0, 1), tps(2, 3), tps(4, 5))
    a.auto_ack = False
    b.leave()  # a gains 2 (range over a, c)
    driver.run_until(lambda: a.state is M.ASSIGNING_PARTITIONS and len(a.pending_callbacks) == 1)
    first = a.pending_callbacks[0]
    assert set(first.partitions) == tps(2)
    version = a.manager._target_version
    c.leave()  # ... then everything, while a's first on_partitions_assigned still runs
    driver.run_until(lambda: a.manager._target_version > version, timeout_ms=3 * HEARTBEAT_MS)
    assert partitions(driver.heartbeats(a)[-1].response) == list(range(6))
    assert a.state is M.ASSIGNING_PARTITIONS  # the new target waits
    assert len(a.pending_callbacks) == 1
    before = len(a.transitions)
    a.ack(ASSIGNED)
    assert a.state is M.ACKNOWLEDGING
    driver.step()
    ack = driver.heartbeats(a)[-1]
    assert owned_in(ack.request, driver) == tps(0, 1, 2)  # the first target is acknowledged ...
    assert moves(a, before)[:2] == [
        (M.ASSIGNING_PARTITIONS, M.ACKNOWLEDGING),
        (M.ACKNOWLEDGING, M.RECONCILING),
    ]
    a.auto_ack = True
    driver.settle(a)
    # ... then the second is reconciled and acknowledged
    assert [set(e.partitions) for e in a.requested_of(ASSIGNED)][-2:] == [tps(2), tps(3, 4, 5)]
    assert owned_in(driver.heartbeats(a)[-1].request, driver) in (None, all_of(6))
    assert any(owned_in(e.request, driver) == all_of(6) for e in driver.heartbeats(a))
    assert a.assignment() == all_of(6)


def test_a_subscription_change_while_stable_goes_in_the_next_heartbeat_without_rejoining() -> None:
    driver, (a,) = stable_group("a", partitions=2)
    driver.coordinator.cluster.create_topic("u", 2)
    epoch = a.manager.generation
    since = len(driver.heartbeats(a))
    calls = len(a.calls)
    a.subscribe(["t", "u"])
    assert a.state is M.STABLE
    driver.run_until(lambda: len(driver.heartbeats(a)) > since)
    driver.settle()
    beats = driver.heartbeats(a)[since:]
    assert beats[0].request.subscribed_topic_names == ["t", "u"]
    assert beats[0].request.subscribed_topic_regex == ""
    assert beats[0].request.member_epoch == epoch
    assert beats[0].sent_ms - driver.heartbeats(a)[since - 1].sent_ms == HEARTBEAT_MS  # not expedited
    assert all(e.request.member_epoch > 0 for e in beats)  # never rejoined
    assert M.JOINING not in a.states()[5:]
    assert a.assignment() == all_of(2) | all_of(2, "u")
    assert [(c.method, set(c.partitions)) for c in a.calls[calls:]] == [(ASSIGNED, all_of(2, "u"))]
    assert a.manager.generation == epoch + 1
    # later heartbeats no longer carry the names
    assert beats[-1].request.subscribed_topic_names is None


def test_dropping_a_topic_from_the_subscription_revokes_its_partitions() -> None:
    driver = new_driver(topics={"t": 2, "u": 2})
    a = driver.add_member("a", topics=("t", "u"))
    driver.settle()
    since = len(driver.heartbeats(a))
    a.subscribe(["t"])
    driver.run_until(lambda: len(driver.heartbeats(a)) > since)
    driver.settle()
    assert driver.heartbeats(a)[since].request.subscribed_topic_names == ["t"]
    assert a.assignment() == all_of(2)
    assert [set(c.partitions) for c in a.calls_of(REVOKED)] == [all_of(2, "u")]
    assert a.calls_of(LOST) == []


def test_an_unresolved_topic_id_requests_metadata_and_reconciliation_waits() -> None:
    driver, (a,) = stable_group("a", partitions=2)
    since = len(driver.heartbeats(a))
    a.subscribe(["t", "u"])  # "u" does not exist yet
    driver.run_until(lambda: len(driver.heartbeats(a)) > since)
    driver.run(100)
    assert a.state is M.STABLE and a.assignment() == all_of(2)
    requested: list[int] = []
    request_update = a.metadata.request_update
    a.metadata.request_update = lambda: (requested.append(driver.now_ms), request_update())[1]  # type: ignore[method-assign]
    driver.hold(MetadataRequest, a)  # the member's metadata will not know "u" for a while
    driver.coordinator.cluster.create_topic("u", 3)
    driver.run_until(lambda: a.state is M.RECONCILING, timeout_ms=2 * HEARTBEAT_MS)
    arrived = driver.now_ms
    u_id = driver.coordinator.cluster.topics["u"].topic_id
    assert u_id in {t.topic_id for t in driver.heartbeats(a)[-1].response.assignment.topic_partitions}
    driver.run(2 * HEARTBEAT_MS)
    # the target names "u" by an id the member's metadata does not know: it waits ...
    assert a.state is M.RECONCILING
    assert a.assignment() == all_of(2)
    assert len(a.calls) == 1
    assert a.cluster.topic_name(u_id) is None
    # ... having asked for the metadata again
    assert requested and min(requested) >= arrived
    driver.release(MetadataRequest, a)
    driver.settle()
    assert a.assignment() == all_of(2) | all_of(3, "u")
    assert set(a.calls[-1].partitions) == all_of(3, "u")


# -- rebalance callbacks -------------------------------------------------------------------------------


@pytest.mark.parametrize("method", [REVOKED, ASSIGNED])
def test_a_raising_rebalance_callback_still_lets_the_reconciliation_proceed(method: str) -> None:
    """Current kaflux behaviour (both protocols): the error is logged and the reconciliation
    goes on. Java instead leaves the member RECONCILING without acknowledging, until the
    coordinator's rebalance timeout removes it."""
    driver, (a,) = stable_group("a")
    a.callback_errors[method] = RuntimeError("listener failed")
    b = driver.add_member("b")
    driver.settle()
    assert any(c.error is not None for c in a.calls_of(method))
    assert a.assignment() == tps(0, 1, 2) and b.assignment() == tps(3, 4, 5)
    assert a.state is M.STABLE
    assert a.fetchable() == tps(0, 1, 2)


def test_without_a_listener_no_callbacks_are_requested() -> None:
    driver, (a,) = stable_group("a", has_listener=False)
    b = driver.add_member("b", has_listener=False)
    driver.settle()
    assert a.requested == [] and b.requested == []
    assert a.assignment() | b.assignment() == all_of(6)
    assert (M.REVOKING_PARTITIONS, M.PARTITIONS_REVOKED) in moves(a)


# -- fencing -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "code", [FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID], ids=["fenced_epoch", "unknown_member"]
)
def test_a_fenced_member_loses_its_partitions_and_rejoins_with_the_same_member_id(code: int) -> None:
    driver, (a,) = stable_group("a", partitions=4)
    a.auto_ack = False
    member_id = a.member_id
    before = len(a.transitions)
    beats = len(driver.heartbeats(a))
    driver.coordinator.inject(HB, code, member_id=member_id)
    driver.run_until(lambda: a.state is M.LOSING_PARTITIONS, timeout_ms=2 * HEARTBEAT_MS)
    assert driver.heartbeats(a)[-1].error_code == code
    assert a.fetchable() == set()
    assert a.manager.epoch == 0
    assert [(e.method, set(e.partitions)) for e in a.pending_callbacks] == [(LOST, all_of(4))]
    driver.run(2 * HEARTBEAT_MS)
    assert a.state is M.LOSING_PARTITIONS  # waits for on_partitions_lost ...
    assert len(driver.heartbeats(a)) == beats + 1  # ... without heartbeats
    a.ack(LOST)
    assert a.state is M.JOINING
    assert a.assignment() == set()
    assert moves(a, before) == [(M.STABLE, M.LOSING_PARTITIONS), (M.LOSING_PARTITIONS, M.JOINING)]
    a.auto_ack = True
    driver.settle()
    rejoin = driver.heartbeats(a)[beats + 1]
    assert rejoin.request.member_epoch == 0
    assert rejoin.request.member_id == member_id == a.member_id  # same id (KIP-1082)
    assert rejoin.request.topic_partitions == [] and rejoin.request.rebalance_timeout_ms > 0
    assert a.assignment() == all_of(4)
    assert a.calls_of(REVOKED) == []


def test_a_member_whose_session_expired_is_fenced_by_unknown_member_id_and_rejoins() -> None:
    driver, (a, b) = stable_group("a", "b")
    owned = a.assignment()
    requested = len(a.requested)
    driver.coordinator.remove_member("g", a.member_id, driver.now_ms)
    driver.run_until(lambda: a.state is M.LOSING_PARTITIONS, timeout_ms=2 * HEARTBEAT_MS)
    assert driver.heartbeats(a)[-1].error_code == UNKNOWN_MEMBER_ID
    # lost, not revoked: b may own them already
    assert [(e.method, set(e.partitions)) for e in a.requested[requested:]] == [(LOST, owned)]
    driver.settle()
    assert a.member_id in driver.group().members
    assert a.assignment() | b.assignment() == all_of(6)


FENCE_STATES = [
    M.JOINING,
    M.STABLE,
    M.RECONCILING,
    M.PREPARE_REVOCATION,
    M.REVOKING_PARTITIONS,
    M.ASSIGNING_PARTITIONS,
    M.ACKNOWLEDGING,
]


@pytest.mark.parametrize("state", FENCE_STATES, ids=_name)
def test_a_fence_in_any_heartbeating_state_loses_the_partitions_and_rejoins(state: MemberState) -> None:
    driver, a = member_in(state, code=FENCED_MEMBER_EPOCH)
    owned = a.assignment()
    member_id = a.member_id
    requested = len(a.requested)
    before = len(a.transitions)
    driver.release(HB, a)
    driver.step()
    assert moves(a, before)[0] == (state, M.LOSING_PARTITIONS)
    assert a.fetchable() == set()
    # everything it held is lost, including what the abandoned reconciliation was moving
    lost = [e for e in a.requested[requested:] if e.method == LOST]
    assert [set(e.partitions) for e in lost] == ([owned] if owned else [])
    a.auto_ack = True
    driver.release_all()
    driver.settle()
    assert a.member_id == member_id
    assert M.JOINING in a.states()[before:]
    assert any(
        e.request.member_epoch == 0 and e.sent_ms > entered(a, M.LOSING_PARTITIONS)
        for e in driver.heartbeats(a)
    )
    assert a.assignment()


def test_leave_while_losing_partitions_completes_without_a_leave_heartbeat() -> None:
    driver, a = member_in(M.LOSING_PARTITIONS)
    beats = len(driver.heartbeats(a))
    future = a.leave()
    assert a.state is M.PREPARE_LEAVING
    a.auto_ack = True
    driver.run_until(future.done)
    assert a.state is M.UNJOINED
    assert len(driver.heartbeats(a)) == beats  # epoch 0: nothing to leave
    assert [c.method for c in a.calls] == [ASSIGNED, LOST]


# -- the poll timer --------------------------------------------------------------------------------------


def test_poll_timer_expiry_sends_a_leave_heartbeat_then_the_next_poll_loses_and_rejoins() -> None:
    driver, (a, b) = stable_group("a", "b", max_poll_interval_ms=5_000)
    owned = a.assignment()
    member_id = a.member_id
    a.polling = False
    last_poll = driver.now_ms - driver.step_ms
    driver.run_until(lambda: a.state is M.STALE, timeout_ms=10_000)

    assert a.states()[-3:] == [M.PREPARE_LEAVING, M.LEAVING, M.STALE]
    leave = driver.heartbeats(a)[-1]
    assert last_poll + 5_000 < leave.sent_ms <= last_poll + 5_000 + 2 * driver.step_ms
    assert leave.request.member_epoch == -1
    assert leave.request.member_id == member_id
    # every optional field null, as librdkafka leaves
    assert leave.request.subscribed_topic_names is None and leave.request.subscribed_topic_regex is None
    assert leave.request.topic_partitions is None and leave.request.rebalance_timeout_ms == -1
    assert leave.error_code == 0
    assert member_id not in driver.group().members
    assert a.fetchable() == set()
    assert a.requested_of(LOST) == []  # on_partitions_lost runs on the application's next poll
    driver.settle(b)
    assert b.assignment() == all_of(6)

    driver.run(3_000)
    assert a.state is M.STALE
    assert driver.heartbeats(a)[-1] is leave  # no heartbeats while stale
    a.polling = True
    driver.step()
    assert [(c.method, set(c.partitions)) for c in a.calls_of(LOST)] == [(LOST, owned)]
    driver.settle()
    rejoin = next(e for e in driver.heartbeats(a) if e.sent_ms > leave.sent_ms)
    assert (rejoin.request.member_id, rejoin.request.member_epoch) == (member_id, 0)
    assert (M.STALE, M.LOSING_PARTITIONS) in moves(a)
    assert a.assignment() | b.assignment() == all_of(6)
    assert a.assignment() and b.assignment()


def test_a_member_that_keeps_polling_stays_in_the_group() -> None:
    driver, (a,) = stable_group("a", max_poll_interval_ms=3_000)
    driver.run(10_000)
    assert a.state is M.STABLE
    assert all(e.request.member_epoch > 0 for e in driver.heartbeats(a)[1:])


def test_a_crashed_member_is_expired_after_the_session_timeout() -> None:
    driver, (a, b) = stable_group("a", "b")
    b.stopped = True
    crashed_at = driver.now_ms
    driver.run_until(lambda: b.member_id not in driver.group().members, timeout_ms=2 * SESSION_MS)
    assert SESSION_MS - HEARTBEAT_MS <= driver.now_ms - crashed_at <= SESSION_MS + driver.step_ms
    driver.settle(a)
    assert a.assignment() == all_of(6)


def test_unsubscribe_while_stale_completes_without_a_leave_heartbeat() -> None:
    driver, a = member_in(M.STALE)
    beats = len(driver.heartbeats(a))
    future = a.leave()
    driver.run_until(future.done, timeout_ms=1_000)
    assert a.state is M.UNJOINED
    assert len(driver.heartbeats(a)) == beats
    assert [set(c.partitions) for c in a.calls_of(LOST)] == [all_of(6)]
    assert a.assignment() == set()


# -- leaving -----------------------------------------------------------------------------------------------


def test_unsubscribe_revokes_then_sends_a_leave_heartbeat_with_epoch_minus_1() -> None:
    driver, (a, b) = stable_group("a", "b")
    owned = a.assignment()
    member_id = a.member_id
    a.auto_ack = False
    future = a.leave()
    assert a.state is M.PREPARE_LEAVING
    assert a.fetchable() == set()
    driver.run(500)
    assert not future.done()
    assert all(e.request.member_epoch != -1 for e in driver.heartbeats(a))  # not before the callback
    call = a.ack(REVOKED)
    assert set(call.partitions) == owned
    assert a.state is M.LEAVING
    driver.run_until(future.done)
    assert future.result() is None
    assert a.state is M.UNJOINED
    leave = driver.heartbeats(a)[-1]
    assert leave.request.member_epoch == -1 and leave.sent_ms >= (call.acknowledged_ms or 0)
    assert leave.error_code == 0
    assert member_id not in driver.group().members
    assert a.member_id == member_id  # kept for life (KIP-1082)
    assert a.assignment() == set()
    driver.settle(b)
    assert b.assignment() == all_of(6)


LEAVE_STATES = {
    # state: (the coordinator is told, the callback that gives the partitions up)
    M.JOINING: (True, None),
    M.STABLE: (True, REVOKED),
    M.RECONCILING: (True, REVOKED),
    M.PREPARE_REVOCATION: (True, REVOKED),
    M.REVOKING_PARTITIONS: (True, REVOKED),
    M.ASSIGNING_PARTITIONS: (True, REVOKED),
    M.ACKNOWLEDGING: (True, REVOKED),
    M.LOSING_PARTITIONS: (False, LOST),
    M.STALE: (False, LOST),
    M.UNJOINED: (False, None),
}


@pytest.mark.parametrize("state", list(LEAVE_STATES), ids=_name)
def test_unsubscribe_in_any_state_completes_and_tells_the_coordinator_if_it_knows_the_member(
    state: MemberState,
) -> None:
    told, method = LEAVE_STATES[state]
    driver, a = member_in(state)
    owned = a.assignment()
    member_id = a.member_id
    before = len(a.transitions)
    requested = len(a.requested)
    pending = [e for e in a.pending_callbacks if e.method in (REVOKED, LOST)]
    beats = len(driver.heartbeats(a))
    future = a.leave()
    a.auto_ack = True
    driver.release_all()
    driver.run_until(future.done, timeout_ms=3 * HEARTBEAT_MS)
    assert future.exception() is None
    assert a.state is M.UNJOINED
    if state is not M.UNJOINED:
        assert moves(a, before)[0] == (state, M.PREPARE_LEAVING)
    leaves = [e for e in driver.heartbeats(a)[beats:] if e.request.member_epoch == -1]
    assert len(leaves) == (1 if told else 0)
    if told:
        assert member_id not in driver.group().members
    # the callback pending at the leave (if any) hands over its partitions, the leave the rest
    released = pending + [e for e in a.requested[requested:] if e.method in (REVOKED, LOST)]
    assert set().union(*(set(e.partitions) for e in released)) == owned
    assert {e.method for e in released} == ({method} if owned else set())
    assert a.assignment() == set()
    assert a.member_id == member_id


def test_subscribing_again_after_unsubscribe_rejoins_with_the_same_member_id() -> None:
    driver, (a,) = stable_group("a", partitions=2)
    member_id = a.member_id
    driver.run_until(a.leave().done)
    assert member_id not in driver.group().members
    beats = len(driver.heartbeats(a))
    a.subscribe(["t"])
    driver.settle()
    rejoin = driver.heartbeats(a)[beats]
    assert (rejoin.request.member_id, rejoin.request.member_epoch) == (member_id, 0)
    assert rejoin.request.subscribed_topic_names == ["t"] and rejoin.request.topic_partitions == []
    assert a.assignment() == all_of(2)
    assert a.manager.generation == driver.group().members[member_id].member_epoch > 1


def test_leave_during_a_revocation_waits_for_its_callback_then_revokes_the_rest_and_leaves() -> None:
    driver, a = member_in(M.REVOKING_PARTITIONS)
    b = driver.members["b"]
    first = a.pending_callbacks[0]
    assert (first.method, set(first.partitions)) == (REVOKED, tps(3, 4, 5))
    future = a.leave()
    driver.release_all()
    driver.run(2 * HEARTBEAT_MS)
    assert a.state is M.PREPARE_LEAVING and not future.done()
    assert all(e.request.member_epoch != -1 for e in driver.heartbeats(a))
    a.ack(REVOKED)  # the pending revocation ends ...
    assert [set(e.partitions) for e in a.pending_callbacks] == [tps(0, 1, 2)]  # ... the rest goes
    call = a.ack(REVOKED)
    driver.run_until(future.done)
    leave = driver.heartbeats(a)[-1]
    assert leave.request.member_epoch == -1 and leave.sent_ms >= (call.acknowledged_ms or 0)
    assert a.state is M.UNJOINED
    driver.settle(b)
    assert b.assignment() == all_of(6)


def test_unsubscribe_with_the_join_in_flight_tells_the_coordinator() -> None:
    """The coordinator may have added the member before it answered: the member sends its
    leave (as Java does from JOINING), so the others need not wait for its session to expire."""
    driver, (a,) = stable_group("a")
    b = driver.add_member("b")
    driver.hold(HB, b)
    driver.run_until(lambda: held_heartbeat(driver, b) is not None)
    assert b.state is M.JOINING and b.member_id in driver.group().members
    driver.unhold(HB, b)
    future = b.leave()
    driver.run_until(future.done, timeout_ms=HEARTBEAT_MS)
    leave = driver.heartbeats(b)[-1]
    assert (leave.request.member_id, leave.request.member_epoch) == (b.member_id, -1)
    assert b.member_id not in driver.group().members
    driver.release_all()  # the join's answer comes after the leave: ignored
    driver.run(100)
    assert b.state is M.UNJOINED and b.assignment() == set()
    b.stopped = True
    took = driver.settle(a)
    assert took < SESSION_MS // 2
    assert a.assignment() == all_of(6)


def test_heartbeats_go_on_while_the_leave_revocation_callback_runs() -> None:
    """PREPARE_LEAVING with a valid epoch heartbeats (Java does): a slow on_partitions_revoked
    in unsubscribe()/close() does not let the member's session expire; an epoch the coordinator
    moves meanwhile is taken, so the commit and the leave that follow use it."""
    coordinator = FakeConsumerGroupCoordinator(heartbeat_interval_ms=300, session_timeout_ms=2_000)
    driver = new_driver(coordinator, topics={"t": 6})
    a, b, c = (driver.add_member(name, auto_commit=True) for name in "abc")
    driver.settle()
    a.auto_ack = False
    for tp in a.assignment():
        a.consume(tp, 4)
    future = a.leave()
    assert a.state is M.PREPARE_LEAVING
    b.leave()  # the coordinator moves a to a new epoch meanwhile (a gains b's partitions)
    driver.run(3 * 2_000)
    assert a.member_id in driver.group().members  # its session did not expire
    beats = [e for e in driver.heartbeats(a) if e.sent_ms >= entered(a, M.PREPARE_LEAVING)]
    assert len(beats) >= 3 * 2_000 // 300 - 1
    assert all(e.error_code == 0 for e in beats)
    assert a.manager.generation == driver.group().members[a.member_id].member_epoch
    a.ack(REVOKED)
    driver.run_until(future.done)
    commit = a.sent(OffsetCommitRequest)[-1]
    assert commit.error_code == 0  # committed at the current epoch
    assert driver.heartbeats(a)[-1].request.member_epoch == -1
    assert driver.heartbeats(a)[-1].error_code == 0
    assert a.member_id not in driver.group().members
    driver.settle(c)
    assert c.assignment() == all_of(6)


def test_a_static_member_closing_leaves_with_epoch_minus_2_and_keeps_its_partitions() -> None:
    driver = new_driver(topics={"t": 4})
    a = driver.add_member("a", instance_id="s1")
    b = driver.add_member("b", instance_id="s2")
    driver.settle()
    owned = a.assignment()
    member_id = a.member_id
    future = a.leave(on_close=True)
    driver.run_until(future.done)
    assert [c.method for c in a.calls][-1] == REVOKED
    leave = driver.heartbeats(a)[-1]
    assert (leave.request.member_epoch, leave.request.instance_id) == (-2, "s1")
    assert leave.error_code == 0 and leave.response.member_epoch == -2
    a.stopped = True
    driver.run(SESSION_MS // 2)
    # its place and partitions are kept until its session expires: b gets nothing more
    assert driver.group().members[member_id].assigned
    assert b.assignment() == all_of(4) - owned
    assert b.state is M.STABLE
    driver.run_until(lambda: member_id not in driver.group().members, timeout_ms=SESSION_MS)
    driver.settle(b)
    assert b.assignment() == all_of(4)


def test_a_static_member_restarting_after_close_gets_its_partitions_back() -> None:
    driver = new_driver(topics={"t": 4})
    a = driver.add_member("a", instance_id="s1")
    b = driver.add_member("b", instance_id="s2")
    driver.settle()
    owned, other = a.assignment(), b.assignment()
    driver.run_until(a.leave(on_close=True).done)
    a.stopped = True
    b_calls = len(b.calls)
    a2 = driver.add_member("a2", instance_id="s1")
    driver.settle(a2, b)
    assert a2.member_id != a.member_id
    assert a2.assignment() == owned
    assert b.assignment() == other and len(b.calls) == b_calls  # b never noticed
    # while the old instance is active, a second one with the same id is refused
    a3 = driver.add_member("a3", instance_id="s1")
    driver.run_until(lambda: a3.state is M.FATAL, timeout_ms=2 * HEARTBEAT_MS)
    assert driver.heartbeats(a3)[-1].error_code == UNRELEASED_INSTANCE_ID


def test_a_static_member_unsubscribing_leaves_with_epoch_minus_1() -> None:
    driver = new_driver(topics={"t": 4})
    a = driver.add_member("a", instance_id="s1")
    b = driver.add_member("b", instance_id="s2")
    driver.settle()
    member_id = a.member_id
    driver.run_until(a.leave(on_close=False).done)
    assert driver.heartbeats(a)[-1].request.member_epoch == -1
    assert member_id not in driver.group().members
    driver.settle(b)
    assert b.assignment() == all_of(4)


# -- heartbeats and coordinator errors ---------------------------------------------------------------------


def test_the_heartbeat_interval_is_the_one_the_coordinator_sends() -> None:
    coordinator = FakeConsumerGroupCoordinator(heartbeat_interval_ms=2_500)
    driver = new_driver(coordinator, topics={"t": 2})
    a = driver.add_member("a")
    driver.settle()
    driver.run(10_000)
    sent = [e.sent_ms for e in driver.heartbeats(a)][2:]
    assert {later - earlier for earlier, later in itertools.pairwise(sent)} == {2_500}
    assert a.manager.heartbeat.interval_ms == 2_500
    coordinator.heartbeat_interval_ms = 700
    driver.run(5_000)
    sent = [e.sent_ms for e in driver.heartbeats(a)]
    assert {later - earlier for earlier, later in itertools.pairwise(sent[-4:])} == {700}


@pytest.mark.parametrize(
    "code", [NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE], ids=["not_coordinator", "unavailable"]
)
def test_coordinator_errors_make_the_member_find_the_coordinator_again(code: int) -> None:
    driver, (a,) = stable_group("a")
    epoch = a.manager.generation
    finds = len(a.sent(FindCoordinatorRequest))
    beats = len(driver.heartbeats(a))
    driver.coordinator.inject(HB, code, member_id=a.member_id)
    driver.run_until(lambda: a.coordinator.coordinator is None, timeout_ms=2 * HEARTBEAT_MS)
    assert driver.heartbeats(a)[-1].error_code == code
    driver.run(3 * HEARTBEAT_MS)
    assert len(a.sent(FindCoordinatorRequest)) == finds + 1
    assert a.coordinator.coordinator is not None
    after = driver.heartbeats(a)[beats + 1]
    # the first heartbeat after an error is a full one, at the same epoch: no rejoin
    assert after.request.member_epoch == epoch
    assert after.request.rebalance_timeout_ms > 0 and after.request.subscribed_topic_names == ["t"]
    assert owned_in(after.request, driver) == all_of(6)
    assert after.error_code == 0 and after.response.assignment is not None
    assert a.state is M.STABLE and a.manager.generation == epoch
    assert a.manager.heartbeat.interval_ms == HEARTBEAT_MS  # the error's 0 was not taken
    assert M.JOINING not in a.states()[1:]
    assert len(a.calls) == 1  # nothing revoked, lost or assigned again


def test_a_moved_coordinator_is_found_and_used() -> None:
    coordinator = FakeConsumerGroupCoordinator(FakeCluster(brokers=2))
    driver = new_driver(coordinator, topics={"t": 4})
    a = driver.add_member("a")
    driver.settle()
    assert {e.unsent.node_id for e in driver.heartbeats(a)} == {coordinator_node_id(0)}
    coordinator.cluster.coordinators["g"] = 1
    driver.run(3 * HEARTBEAT_MS)
    assert a.state is M.STABLE
    assert driver.heartbeats(a)[-1].unsent.node_id == coordinator_node_id(1)
    assert driver.heartbeats(a)[-1].error_code == 0


def test_coordinator_load_in_progress_backs_off_and_retries() -> None:
    driver, (a,) = stable_group("a")
    driver.coordinator.inject(HB, COORDINATOR_LOAD_IN_PROGRESS, member_id=a.member_id)
    driver.run_until(lambda: driver.heartbeats(a)[-1].error_code == COORDINATOR_LOAD_IN_PROGRESS)
    failed = driver.heartbeats(a)[-1]
    driver.run(500)
    retry = driver.heartbeats(a)[-1]
    assert retry is not failed
    assert retry.sent_ms - (failed.delivered_ms or 0) >= 100  # retry.backoff.ms
    assert retry.error_code == 0 and a.state is M.STABLE


FATAL_STATES = [*FENCE_STATES, M.PREPARE_LEAVING, M.LEAVING]


@pytest.mark.parametrize("state", FATAL_STATES, ids=_name)
def test_a_fatal_error_in_any_state_fails_the_member_and_reaches_the_application(state: MemberState) -> None:
    driver, a = member_in(state, code=GROUP_AUTHORIZATION_FAILED)
    owned = a.assignment()
    before = len(a.transitions)
    requested = len(a.requested)
    driver.release(HB, a)
    driver.step()
    assert moves(a, before)[0] == (state, M.FATAL)
    assert len(a.fatal) == 1 and isinstance(a.fatal[0], GroupAuthorizationFailedError)
    assert a.errors == a.fatal  # an ErrorEvent: poll() raises it
    lost = [e for e in a.requested[requested:] if e.method == LOST]
    assert [set(e.partitions) for e in lost] == ([owned] if owned else [])
    assert a.fetchable() == set()
    a.auto_ack = True
    driver.release_all()
    driver.run(2_000)
    assert a.assignment() == set()
    if a.leave_future is not None:
        assert a.leave_future.done()
    sent = len(driver.heartbeats(a))
    driver.run(5 * HEARTBEAT_MS)
    assert len(driver.heartbeats(a)) == sent  # no more heartbeats
    assert a.manager.poll(driver.now_ms).unsent == []
    assert a.state is M.FATAL


def test_an_unsupported_server_assignor_is_fatal() -> None:
    driver = new_driver(topics={"t": 2})
    a = driver.add_member("a", remote_assignor="bogus")
    driver.run(1_000)
    assert a.state is M.FATAL
    assert driver.heartbeats(a)[0].request.server_assignor == "bogus"
    assert driver.heartbeats(a)[0].error_code == UNSUPPORTED_ASSIGNOR
    assert len(a.fatal) == 1 and isinstance(a.fatal[0], UnsupportedAssignorError)
    assert a.errors == a.fatal
    assert a.requested == []  # it owned nothing


def test_the_server_assignor_is_sent_when_set() -> None:
    coordinator = FakeConsumerGroupCoordinator()
    driver = new_driver(coordinator, topics={"t": 4})
    a = driver.add_member("a", remote_assignor="uniform")
    driver.settle()
    assert driver.heartbeats(a)[0].request.server_assignor == "uniform"
    assert driver.group().members[a.member_id].server_assignor == "uniform"


# -- late answers and waiting -------------------------------------------------------------------------------


@pytest.mark.parametrize("late", ["fenced", "revocation"])
def test_a_late_answer_to_a_heartbeat_sent_before_the_member_left_and_rejoined_is_ignored(late: str) -> None:
    """The poll timer's leave drops the heartbeat in flight; its answer, delivered after the
    member rejoined, must change nothing (Java could apply it while JOINING)."""
    driver, (a,) = stable_group("a", max_poll_interval_ms=3_000)
    if late == "fenced":
        driver.coordinator.inject(HB, FENCED_MEMBER_EPOCH, member_id=a.member_id)
    else:
        driver.add_member("b", subscribe=False)  # answered later: "revoke 3-5" at the old epoch
    driver.hold(HB, a)
    if late == "revocation":
        driver.members["b"].subscribe(["t"])
        driver.run_until(lambda: driver.group().group_epoch == 2)
    driver.run_until(lambda: held_heartbeat(driver, a) is not None, timeout_ms=2 * HEARTBEAT_MS)
    stale = held_heartbeat(driver, a)
    assert stale is not None
    driver.unhold(HB, a)
    old_epoch = stale.request.member_epoch
    a.polling = False
    driver.run_until(lambda: a.state is M.STALE, timeout_ms=5_000)
    a.polling = True
    driver.settle()
    epoch, owned, calls = a.manager.generation, a.assignment(), len(a.calls)
    assert epoch != old_epoch
    before = len(a.transitions)
    beats = len(driver.heartbeats(a))
    stale.held = False
    driver.step()
    assert stale.done and stale.response is not None
    assert stale.error_code == (FENCED_MEMBER_EPOCH if late == "fenced" else 0)
    driver.run(3 * HEARTBEAT_MS)
    assert a.transitions[before:] == []
    assert a.manager.generation == epoch and a.assignment() == owned
    assert len(a.calls) == calls
    assert all(e.error_code == 0 for e in driver.heartbeats(a)[beats:])


def test_maximum_time_to_wait_is_the_time_to_the_next_heartbeat_and_zero_once_the_poll_timer_expired() -> (
    None
):
    driver, (a,) = stable_group("a", max_poll_interval_ms=60_000)
    now = driver.now_ms
    beat = driver.heartbeats(a)[-1].sent_ms
    assert a.manager.maximum_time_to_wait(now) == max(0, beat + HEARTBEAT_MS - now)
    assert 0 < a.manager.maximum_time_to_wait(now) <= HEARTBEAT_MS
    a.manager.heartbeat.poll_timer.reset(now - 60_001)  # the application stopped polling a while ago
    assert a.manager.maximum_time_to_wait(now) == 0
    a.manager.heartbeat.poll_timer.reset(now)
    future = a.leave()
    driver.run_until(future.done, timeout_ms=10_000)
    assert a.manager.maximum_time_to_wait(driver.now_ms) == MAX_POLL_TIMEOUT_MS


def test_maximum_time_to_wait_follows_the_coordinator_interval() -> None:
    coordinator = FakeConsumerGroupCoordinator(heartbeat_interval_ms=4_000)
    driver = new_driver(coordinator, topics={"t": 2})
    a = driver.add_member("a")
    assert a.manager.maximum_time_to_wait(driver.now_ms) == MAX_POLL_TIMEOUT_MS  # not in a group
    driver.settle()
    driver.run(1_000)
    beat = driver.heartbeats(a)[-1].sent_ms
    assert a.manager.maximum_time_to_wait(driver.now_ms) == beat + 4_000 - driver.now_ms > HEARTBEAT_MS


def test_a_topic_the_member_cannot_resolve_yet_does_not_hold_up_the_rest_of_its_target() -> None:
    """As Java: the member reconciles the part of its target whose topic ids metadata resolves.
    Here a subscribes to a new topic "u" its metadata does not know yet while b joins: a must
    still give b its share of "t", and take "u" once metadata names it."""
    driver, (a,) = stable_group("a")
    driver.hold(MetadataRequest, a)  # a's metadata stays as it is: no "u"
    driver.coordinator.cluster.create_topic("u", 2)
    a.subscribe(["t", "u"])
    driver.run_until(lambda: a.state is M.RECONCILING, timeout_ms=3 * HEARTBEAT_MS)  # target: all
    b = driver.add_member("b")  # the next target moves half of "t" to b
    driver.run_until(lambda: len(b.assignment()) == 3, timeout_ms=20 * HEARTBEAT_MS)
    assert a.assignment() == all_of(6) - b.assignment()  # revoked its share of "t" meanwhile
    assert a.state is M.RECONCILING  # still waiting for "u"
    driver.release(MetadataRequest, a)
    driver.settle()
    assert a.assignment() == (all_of(6) - b.assignment()) | all_of(2, topic="u")
    assert a.state is M.STABLE


# -- commits ---------------------------------------------------------------------------------------------


def test_a_commit_while_stable_carries_the_member_epoch_at_offset_commit_v9() -> None:
    driver, (a,) = stable_group("a", partitions=2)
    future = a.commit({TopicPartition("t", 0): 5})
    driver.run_until(future.done)
    assert future.exception() is None
    commit = a.sent(OffsetCommitRequest)[-1]
    assert commit.version == 9
    assert commit.request.generation_id_or_member_epoch == a.manager.generation == 1
    assert commit.request.member_id == a.member_id
    assert driver.coordinator.cluster.committed["g"][TopicPartition("t", 0)].offset == 5


def test_auto_commit_commits_before_the_revocation_with_the_member_epoch() -> None:
    driver, (a,) = stable_group("a", auto_commit=True)
    for tp in a.assignment():
        a.consume(tp, 7)
    epoch = a.manager.generation
    driver.add_member("b")
    driver.settle()
    revoke = a.calls_of(REVOKED)[0]
    commit = next(e for e in a.sent(OffsetCommitRequest) if e.sent_ms >= entered(a, M.PREPARE_REVOCATION))
    assert commit.state is M.PREPARE_REVOCATION
    assert commit.version == 9
    assert commit.request.generation_id_or_member_epoch == epoch
    assert commit.request.member_id == a.member_id
    assert commit.error_code == 0
    assert commit.delivered_ms is not None and commit.delivered_ms <= revoke.requested_ms
    stored = driver.coordinator.cluster.committed["g"]
    assert {tp: stored[tp].offset for tp in all_of(6)} == {tp: 7 for tp in all_of(6)}


def test_a_commit_with_a_stale_member_epoch_fails_with_commit_failed() -> None:
    driver, (a, c) = stable_group("a", "c")
    # The coordinator moves a to a new epoch (c leaves, a gains partitions) in an answer a
    # does not get yet.
    driver.hold(HB, a)
    driver.run_until(c.leave().done)
    driver.run_until(lambda: driver.group().members[a.member_id].member_epoch > a.manager.generation)
    assert a.state is M.STABLE
    future = a.commit({TopicPartition("t", 0): 5})
    driver.run_until(future.done, timeout_ms=1_000)
    assert isinstance(future.exception(), CommitFailedError)
    commit = a.sent(OffsetCommitRequest)[-1]
    assert commit.request.generation_id_or_member_epoch == a.manager.generation
    assert commit.error_code == STALE_MEMBER_EPOCH
    assert a.state is M.STABLE  # a commit error does not fence
    driver.release(HB, a)
    driver.settle(a)
    retried = a.commit({TopicPartition("t", 0): 5})
    driver.run_until(retried.done, timeout_ms=1_000)
    assert retried.exception() is None


def test_a_commit_before_revocation_is_abandoned_when_the_member_is_fenced() -> None:
    """The commit made before a revocation is retried for up to max.poll.interval.ms; once the
    member lost its partitions, it must stop: later, with a newer epoch, it could commit the
    positions of partitions another member now owns."""
    driver, a = member_in(M.PREPARE_REVOCATION, code=FENCED_MEMBER_EPOCH)  # its commit is held
    assert a.commits.has_pending()
    revoked_before = len(a.calls_of(REVOKED))
    driver.release(HB, a)  # the held heartbeat answers FENCED_MEMBER_EPOCH
    driver.run_until(lambda: a.state is M.LOSING_PARTITIONS, timeout_ms=3 * HEARTBEAT_MS)
    driver.step()
    assert not a.commits.has_pending()  # its response is still held, but nobody waits for it
    sent = len(a.sent(OffsetCommitRequest))
    driver.release(OffsetCommitRequest, a)
    driver.settle(a)
    assert len(a.calls_of(REVOKED)) == revoked_before  # the abandoned revocation did not go on
    assert len(a.sent(OffsetCommitRequest)) == sent  # and its commit was never sent again


def test_a_commit_while_fenced_fails_on_the_client() -> None:
    driver, a = member_in(M.LOSING_PARTITIONS)
    commits = len(a.sent(OffsetCommitRequest))
    future = a.commit({TopicPartition("t", 0): 5})
    driver.run_until(future.done, timeout_ms=1_000)
    assert isinstance(future.exception(), CommitFailedError)
    assert len(a.sent(OffsetCommitRequest)) == commits  # refused before sending


# -- the fake coordinator itself ----------------------------------------------------------------------------


def call(coordinator: FakeConsumerGroupCoordinator, request: Any, now_ms: int = 0) -> Any:
    """Send ``request`` to broker 0 at the newest version; its response."""
    answers: list[Any] = []
    version = type(request).MAX_VERSION
    coordinator.handle(0, roundtrip(request, version), version, now_ms, answers.append)
    return roundtrip(answers[0], version, type(request).RESPONSE)


def join(member_id: str, topics: list[str] | None = None, **kw: Any) -> ConsumerGroupHeartbeatRequest:
    return ConsumerGroupHeartbeatRequest(
        group_id="g",
        member_id=member_id,
        member_epoch=0,
        rebalance_timeout_ms=5_000,
        subscribed_topic_names=topics if topics is not None else ["t"],
        subscribed_topic_regex="",
        topic_partitions=[],
        **kw,
    )


def partitions(response: ConsumerGroupHeartbeatResponse) -> list[int] | None:
    if response.assignment is None:
        return None
    return sorted(p for t in response.assignment.topic_partitions for p in t.partitions)


def test_the_coordinator_moves_partitions_only_after_their_revocation_is_acknowledged() -> None:
    coordinator = FakeConsumerGroupCoordinator()
    coordinator.cluster.create_topic("t", 4)
    topic_id = coordinator.cluster.topics["t"].topic_id
    x = call(coordinator, join("x"))
    assert (x.error_code, x.member_epoch, partitions(x)) == (0, 1, [0, 1, 2, 3])
    y = call(coordinator, join("y"))
    assert (y.member_epoch, partitions(y)) == (2, [])  # 2 and 3 are still x's
    x = call(coordinator, ConsumerGroupHeartbeatRequest(group_id="g", member_id="x", member_epoch=1))
    assert (x.member_epoch, partitions(x)) == (1, [0, 1])  # revoke 2, 3; same epoch
    y = call(coordinator, ConsumerGroupHeartbeatRequest(group_id="g", member_id="y", member_epoch=2))
    assert y.assignment is None  # unchanged: still nothing free
    ack = [ConsumerGroupHeartbeatRequestTopicPartitions(topic_id=topic_id, partitions=[0, 1])]
    x = call(
        coordinator,
        ConsumerGroupHeartbeatRequest(group_id="g", member_id="x", member_epoch=1, topic_partitions=ack),
    )
    assert (x.member_epoch, x.assignment) == (2, None)
    y = call(coordinator, ConsumerGroupHeartbeatRequest(group_id="g", member_id="y", member_epoch=2))
    assert (y.member_epoch, partitions(y)) == (2, [2, 3])
    assert coordinator.group("g").state is ConsumerGroupState.STABLE


def test_the_coordinator_checks_epochs_members_and_requests_as_kafka_does() -> None:
    coordinator = FakeConsumerGroupCoordinator()
    coordinator.cluster.create_topic("t", 2)
    assert call(coordinator, join("x")).member_epoch == 1
    beat = ConsumerGroupHeartbeatRequest(group_id="g", member_id="x", member_epoch=2)
    assert call(coordinator, beat).error_code == FENCED_MEMBER_EPOCH  # higher
    beat.member_epoch = 1
    assert call(coordinator, beat).error_code == 0
    beat.member_id = "nobody"
    assert call(coordinator, beat).error_code == UNKNOWN_MEMBER_ID
    no_timeout = join("z")
    no_timeout.rebalance_timeout_ms = -1
    assert call(coordinator, no_timeout).error_code == INVALID_REQUEST
    owning = join("z")
    owning.topic_partitions = [ConsumerGroupHeartbeatRequestTopicPartitions(partitions=[0])]
    assert call(coordinator, owning).error_code == INVALID_REQUEST
    assert call(coordinator, join("")).error_code == INVALID_REQUEST  # v1: the client names itself
    assert call(coordinator, join("z", server_assignor="bogus")).error_code == UNSUPPORTED_ASSIGNOR
    # a full request always gets the assignment
    assert partitions(call(coordinator, join("x"))) == [0, 1]
    leave = ConsumerGroupHeartbeatRequest(group_id="g", member_id="x", member_epoch=-1)
    assert call(coordinator, leave).member_epoch == -1
    assert "x" not in coordinator.group("g").members
    assert call(coordinator, leave).error_code == UNKNOWN_MEMBER_ID


def test_the_coordinator_validates_commits_by_member_epoch() -> None:
    coordinator = FakeConsumerGroupCoordinator()
    coordinator.cluster.create_topic("t", 1)

    def commit(epoch: int, member_id: str, version: int = 9) -> int:
        request = OffsetCommitRequest(
            group_id="g",
            generation_id_or_member_epoch=epoch,
            member_id=member_id,
            topics=[
                OffsetCommitRequestTopic(
                    name="t", partitions=[OffsetCommitRequestPartition(partition_index=0)]
                )
            ],
        )
        answers: list[OffsetCommitResponse] = []
        coordinator.handle(0, roundtrip(request, version), version, 0, answers.append)
        return answers[0].topics[0].partitions[0].error_code

    assert commit(-1, "") == 0  # no members: anyone may commit
    assert call(coordinator, join("x")).member_epoch == 1
    assert commit(1, "x") == 0
    assert commit(0, "x") == STALE_MEMBER_EPOCH
    assert commit(2, "x") == STALE_MEMBER_EPOCH  # equality, not "at most"
    assert commit(1, "y") == UNKNOWN_MEMBER_ID
    assert commit(-1, "") == UNKNOWN_MEMBER_ID
    assert commit(1, "x", version=8) == UNSUPPORTED_VERSION


# -- the scenarios whose transitions must cover the table ----------------------------------------------------

SCENARIOS: list[tuple[Callable[..., None], dict[str, Any]]] = [
    (test_a_single_member_joins_with_epoch_0_and_gets_every_partition, {}),
    (test_two_members_get_disjoint_complete_assignments_revoking_before_assigning, {}),
    (test_a_target_arriving_mid_reconciliation_is_reconciled_after_the_first_is_acknowledged, {}),
    (test_poll_timer_expiry_sends_a_leave_heartbeat_then_the_next_poll_loses_and_rejoins, {}),
    *(
        (test_a_fence_in_any_heartbeating_state_loses_the_partitions_and_rejoins, {"state": s})
        for s in FENCE_STATES
    ),
    *(
        (test_a_fatal_error_in_any_state_fails_the_member_and_reaches_the_application, {"state": s})
        for s in FATAL_STATES
    ),
    *(
        (
            test_unsubscribe_in_any_state_completes_and_tells_the_coordinator_if_it_knows_the_member,
            {"state": s},
        )
        for s in LEAVE_STATES
    ),
]


# -- observability ---------------------------------------------------------------------------------


def test_group_state_reports_the_epoch_member_id_assignment_and_reason() -> None:
    _, (_, b) = stable_group("a", "b", partitions=4)
    state = b.manager.group_state()
    assert (state.protocol, state.state, state.member_id) == ("consumer", "STABLE", b.member_id)
    assert state.generation == b.manager.epoch > 0
    assert state.assignment == frozenset(b.assignment()) and state.assignment
    assert state.reason.startswith("new target assignment from the coordinator at epoch")


def test_group_state_names_a_fence_as_the_reason() -> None:
    driver, (a,) = stable_group("a", partitions=4)
    a.auto_ack = False
    driver.coordinator.inject(HB, 110, member_id=a.member_id)
    driver.run_until(lambda: a.state is M.LOSING_PARTITIONS, timeout_ms=2 * HEARTBEAT_MS)
    state = a.manager.group_state()
    assert (state.state, state.reason) == (
        "LOSING_PARTITIONS",
        "fenced by the coordinator: FencedMemberEpochError",
    )


def test_every_state_change_is_logged_at_info_with_its_reason(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("INFO", logger="kaflux.consumer.membership"):
        driver, (a,) = stable_group("a", partitions=4)
        a.leave()
        driver.run_until(lambda: a.state is M.UNJOINED, timeout_ms=4 * HEARTBEAT_MS)
    changes = [
        r.getMessage()
        for r in caplog.records
        if r.levelname == "INFO"
        and r.name.startswith("kaflux.consumer.membership")
        and " -> " in r.getMessage()
    ]
    states = [M.UNJOINED, *a.states()]
    moved = list(itertools.pairwise(states))
    assert len(changes) == len(moved), changes
    assert all(f"{s.name} -> {t.name}" in line for line, (s, t) in zip(changes, moved, strict=True))
    assert "(unsubscribe())" in changes[-1]
