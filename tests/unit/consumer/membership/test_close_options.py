"""``close()`` with a group membership operation (KIP-1092), for both group protocols.

Each option x static/dynamic member x protocol, against the fake coordinators (injected time):
what the member sends when it closes (LeaveGroup, the leave heartbeat's epoch, or nothing),
whether the coordinator still lists it afterwards, and that the revocation callback and the
auto-commit happen whatever the option, as in Java.
"""

from __future__ import annotations

import pytest

from kaflux.consumer.close_options import GroupMembershipOperation
from kaflux.protocol.messages.leave_group import LeaveGroupRequest
from kaflux.protocol.messages.offset_commit import OffsetCommitRequest

from support import kip848_membership_rig as kip848
from support.classic_membership_rig import EAGER, REVOKED, SESSION_MS, M, all_of, stable_group
from support.fake_group_coordinator import FakeGroupCoordinator, GroupDriver, Member

DEFAULT = GroupMembershipOperation.DEFAULT
LEAVE = GroupMembershipOperation.LEAVE_GROUP
REMAIN = GroupMembershipOperation.REMAIN_IN_GROUP

# -- classic protocol ------------------------------------------------------------------------------

#: (static member, operation) -> whether close() sends a LeaveGroup
CLASSIC_LEAVES = {
    (False, DEFAULT): True,
    (False, LEAVE): True,
    (False, REMAIN): False,
    (True, DEFAULT): False,
    (True, LEAVE): True,
    (True, REMAIN): False,
}


def _classic_pair(static: bool) -> tuple[GroupDriver, list[Member]]:
    driver = GroupDriver(topics={"t": 4})
    a = driver.add_member("a", instance_id="s1" if static else None)
    b = driver.add_member("b", instance_id="s2" if static else None)
    driver.settle()
    return driver, [a, b]


@pytest.mark.parametrize(("static", "operation"), list(CLASSIC_LEAVES), ids=lambda v: getattr(v, "name", v))
def test_classic_close_sends_a_leave_group_only_when_the_option_says_so(
    static: bool, operation: GroupMembershipOperation
) -> None:
    driver, (a, b) = _classic_pair(static)
    owned = a.assignment()
    member_id = a.member_id
    future = a.leave(on_close=True, membership=operation)
    driver.run_until(future.done)
    assert future.result() is None and a.state is M.UNJOINED
    assert [c.method for c in a.calls][-1] == REVOKED  # the callback runs whatever the option
    assert a.calls[-1].partitions == owned
    leaves = a.sent(LeaveGroupRequest)
    a.stopped = True
    if CLASSIC_LEAVES[static, operation]:
        assert len(leaves) == 1 and leaves[0].error_code == 0
        if static:  # it names its group.instance.id, in the members list of v3+
            assert leaves[0].version >= 3
            assert [(m.member_id, m.group_instance_id) for m in leaves[0].request.members] == [
                (member_id, "s1")
            ]
        else:
            assert leaves[0].request.member_id == member_id
        assert member_id not in driver.group().members  # gone at once
        driver.settle(b)
        assert b.assignment() == all_of(4)
    else:
        assert leaves == []
        driver.run(SESSION_MS // 2)
        assert member_id in driver.group().members  # kept until its session expires
        assert b.state is M.STABLE and b.assignment() == all_of(4) - owned
        driver.run_until(lambda: member_id not in driver.group().members, timeout_ms=SESSION_MS)


def test_classic_unsubscribe_of_a_static_member_names_its_instance_id() -> None:
    driver, (a, _b) = _classic_pair(static=True)
    member_id = a.member_id
    driver.run_until(a.leave(on_close=False, membership=REMAIN).done)  # the option is close()'s only
    (leave,) = a.sent(LeaveGroupRequest)
    assert [(m.member_id, m.group_instance_id) for m in leave.request.members] == [(member_id, "s1")]
    assert member_id not in driver.group().members


def test_classic_static_leave_on_a_coordinator_without_leave_group_v3_finishes_without_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    driver = GroupDriver(FakeGroupCoordinator(max_versions={LeaveGroupRequest: 2}), topics={"t": 4})
    a = driver.add_member("a", instance_id="s1")
    driver.settle()
    member_id = a.member_id
    future = a.leave(on_close=True, membership=LEAVE)
    driver.run_until(future.done)
    (leave,) = a.sent(LeaveGroupRequest)
    assert leave.error is not None and "v3" in str(leave.error)  # failed unsent: v2 cannot name it
    assert a.state is M.UNJOINED
    assert member_id in driver.group().members
    assert any(
        "LeaveGroup" in r.getMessage() and "session expires" in r.getMessage() for r in caplog.records
    )  # said, not silent


@pytest.mark.parametrize("operation", [DEFAULT, LEAVE, REMAIN], ids=lambda o: o.name)
def test_classic_close_commits_the_consumed_positions_whatever_the_option(
    operation: GroupMembershipOperation,
) -> None:
    driver, (a, _b) = stable_group("a", "b", partitions=4, assignors=EAGER, auto_commit=True)
    owned = a.assignment()
    for tp in owned:
        a.consume(tp, 5)
    driver.run_until(a.leave(on_close=True, membership=operation).done)
    assert a.sent(OffsetCommitRequest)[-1].error_code == 0
    stored = driver.coordinator.cluster.committed.get("g", {})
    assert {tp: stored[tp].offset for tp in owned if tp in stored} == {tp: 5 for tp in owned}


def test_classic_dynamic_member_remaining_in_the_group_keeps_its_member_id() -> None:
    driver, (a, _b) = _classic_pair(static=False)
    member_id = a.member_id
    driver.run_until(a.leave(on_close=True, membership=REMAIN).done)
    assert a.member_id == member_id  # still the group's member until its session expires
    driver, (c, _d) = _classic_pair(static=False)
    driver.run_until(c.leave(on_close=True, membership=DEFAULT).done)
    assert c.member_id == ""


# -- consumer protocol (KIP-848) ----------------------------------------------------------------------

#: (static member, operation) -> the epoch of the leave heartbeat (None: no heartbeat)
KIP848_LEAVE_EPOCHS = {
    (False, DEFAULT): -1,
    (False, LEAVE): -1,
    (False, REMAIN): None,
    (True, DEFAULT): -2,
    (True, LEAVE): -1,
    (True, REMAIN): -2,
}


@pytest.mark.parametrize(
    ("static", "operation"), list(KIP848_LEAVE_EPOCHS), ids=lambda v: getattr(v, "name", v)
)
def test_kip848_close_sends_the_leave_epoch_the_option_calls_for(
    static: bool, operation: GroupMembershipOperation
) -> None:
    driver = kip848.new_driver(topics={"t": 4})
    a = driver.add_member("a", instance_id="s1" if static else None)
    b = driver.add_member("b", instance_id="s2" if static else None)
    driver.settle()
    owned = a.assignment()
    member_id = a.member_id
    before = len(driver.heartbeats(a))
    future = a.leave(on_close=True, membership=operation)
    driver.run_until(future.done)
    assert future.result() is None and a.state is M.UNJOINED
    assert [c.method for c in a.calls][-1] == REVOKED  # the callback runs whatever the option
    assert set(a.calls[-1].partitions) == owned
    leaves = [e for e in driver.heartbeats(a)[before:] if e.request.member_epoch < 0]
    epoch = KIP848_LEAVE_EPOCHS[static, operation]
    a.stopped = True
    if epoch is None:
        assert leaves == []
    else:
        assert [e.request.member_epoch for e in leaves] == [epoch]
        assert leaves[0].request.instance_id == ("s1" if static else None)
        assert leaves[0].error_code == 0
    if epoch == -1:  # gone at once, its partitions go to b
        assert member_id not in driver.group().members
        driver.settle(b)
        assert b.assignment() == all_of(4)
    else:  # kept (with its partitions) until its session expires
        driver.run(kip848.SESSION_MS // 2)
        assert member_id in driver.group().members
        assert driver.group().members[member_id].assigned
        assert b.state is M.STABLE and b.assignment() == all_of(4) - owned
        driver.run_until(lambda: member_id not in driver.group().members, timeout_ms=kip848.SESSION_MS)
        driver.settle(b)
        assert b.assignment() == all_of(4)


@pytest.mark.parametrize("operation", [DEFAULT, LEAVE, REMAIN], ids=lambda o: o.name)
def test_kip848_close_commits_the_consumed_positions_whatever_the_option(
    operation: GroupMembershipOperation,
) -> None:
    driver, (a, _b) = kip848.stable_group("a", "b", partitions=4, auto_commit=True)
    owned = a.assignment()
    for tp in owned:
        a.consume(tp, 5)
    driver.run_until(a.leave(on_close=True, membership=operation).done)
    commit = a.sent(OffsetCommitRequest)[-1]
    assert commit.error_code == 0 and commit.request.generation_id_or_member_epoch > 0
    stored = driver.coordinator.cluster.committed.get("g", {})
    assert {tp: stored[tp].offset for tp in owned if tp in stored} == {tp: 5 for tp in owned}


def test_kip848_unsubscribe_ignores_the_close_option() -> None:
    driver = kip848.new_driver(topics={"t": 4})
    a = driver.add_member("a")
    driver.settle()
    member_id = a.member_id
    driver.run_until(a.leave(on_close=False, membership=REMAIN).done)
    assert driver.heartbeats(a)[-1].request.member_epoch == -1
    assert member_id not in driver.group().members
