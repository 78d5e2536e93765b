"""Fencing, coordinator errors and fatal errors of the KIP-848 member, in every state they can reach it in."""

from __future__ import annotations

import itertools

import pytest

from kaflux.consumer.member_state import (
    MemberState,
)
from kaflux.errors import (
    GroupAuthorizationFailedError,
    UnsupportedAssignorError,
)
from kaflux.network.cluster import coordinator_node_id
from kaflux.protocol.messages.find_coordinator import FindCoordinatorRequest

from support.fake_consumer_group_coordinator import (
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE,
    FENCED_MEMBER_EPOCH,
    GROUP_AUTHORIZATION_FAILED,
    NOT_COORDINATOR,
    UNKNOWN_MEMBER_ID,
    UNSUPPORTED_ASSIGNOR,
    FakeConsumerGroupCoordinator,
)
from support.fakes import FakeCluster
from support.kip848_membership_rig import (
    ASSIGNED,
    HB,
    HEARTBEAT_MS,
    LOST,
    REVOKED,
    M,
    _name,
    all_of,
    entered,
    member_in,
    moves,
    new_driver,
    owned_in,
    stable_group,
)

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
    assert a.manager.epoch == 0  # type: ignore[attr-defined]
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


# -- heartbeats and coordinator errors ---------------------------------------------------------------------


def test_the_heartbeat_interval_is_the_one_the_coordinator_sends() -> None:
    coordinator = FakeConsumerGroupCoordinator(heartbeat_interval_ms=2_500)
    driver = new_driver(coordinator, topics={"t": 2})
    a = driver.add_member("a")
    driver.settle()
    driver.run(10_000)
    sent = [e.sent_ms for e in driver.heartbeats(a)][2:]
    assert {later - earlier for earlier, later in itertools.pairwise(sent)} == {2_500}
    assert a.heartbeat.interval_ms == 2_500
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
    assert a.heartbeat.interval_ms == HEARTBEAT_MS  # the error's 0 was not taken
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
    assert a.heartbeat.poll(driver.now_ms).unsent == []
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
