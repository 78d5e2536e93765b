"""``AdminClient.remove_members_from_consumer_group``: MemberToRemove and the checks of the call,
and RemoveMembersApi through AdminRequestManager against a fake coordinator with injected time:
LeaveGroup v3+ naming the members, each member's answer, a coordinator that moved, one without
LeaveGroup v3. [test]"""

from __future__ import annotations

from typing import Any

import pytest

from kaflux import AdminClient
from kaflux.admin import MemberToRemove
from kaflux.admin.group_members import RemoveMembersApi, leave_reason, member_errors, members_of
from kaflux.errors import (
    FencedInstanceIdError,
    GroupAuthorizationFailedError,
    InvalidArgumentError,
    KafkaError,
    UnknownMemberIdError,
    UnsupportedVersionError,
)
from kaflux.protocol.api import CLIENT_VERSIONS, ApiKey
from kaflux.protocol.messages.find_coordinator import FindCoordinatorRequest
from kaflux.protocol.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse, MemberResponse

from support.admin_rig import AdminRig
from support.fakes import BACKOFF_MS, NOT_COORDINATOR, FakeCluster

FENCED_INSTANCE_ID = 82
UNKNOWN_MEMBER_ID = 25
GROUP = "g"


class LeaveFakeCluster(FakeCluster):
    """A FakeCluster whose coordinator answers LeaveGroup v3+ as Kafka does: a member named by
    instance id alone is found by it; an instance id with another member id is fenced; the
    top-level error is the first member's error."""

    def __init__(self, brokers: int = 2, **kwargs: Any) -> None:
        super().__init__(brokers, **kwargs)
        #: member id -> instance id (None: dynamic)
        self.members: dict[str, str | None] = {"m-a": "A", "m-b": "B", "m-dyn": None}
        self.coordinators[GROUP] = 1
        #: the next LeaveGroup answers echo these member ids instead of the ones sent
        self.echo_ids: list[str] | None = None

    def handle(self, broker_id: int, request: Any, version: int) -> Any:
        if not isinstance(request, LeaveGroupRequest) or broker_id in self.stopped:
            return super().handle(broker_id, request, version)
        self.handled.append((broker_id, request, version))
        error = self._fault(LeaveGroupRequest, None, broker_id)
        if not error and self.coordinator_for(request.group_id) != broker_id:
            error = NOT_COORDINATOR
        if error:
            return LeaveGroupResponse(error_code=error, members=[])
        answers = []
        for position, m in enumerate(request.members):
            by_instance = {i: mid for mid, i in self.members.items() if i is not None}
            if m.group_instance_id is not None and m.group_instance_id in by_instance:
                current = by_instance[m.group_instance_id]
                code = FENCED_INSTANCE_ID if m.member_id and m.member_id != current else 0
                target = current
            else:
                code = 0 if m.group_instance_id is None and m.member_id in self.members else UNKNOWN_MEMBER_ID
                target = m.member_id
            if code == 0:
                del self.members[target]
            echoed = self.echo_ids[position] if self.echo_ids else m.member_id
            answers.append(MemberResponse(echoed, m.group_instance_id if not self.echo_ids else "", code))
        top = next((a.error_code for a in answers if a.error_code), 0)
        return LeaveGroupResponse(error_code=top, members=answers)


def removed(fake: LeaveFakeCluster, members: list[MemberToRemove], reason: str = "r") -> Any:
    rig = AdminRig(fake)
    result = rig.run(RemoveMembersApi(GROUP, members, reason))
    return rig, result


# -- the checks -------------------------------------------------------------------------------------


def test_a_member_to_remove_needs_an_instance_id_or_a_member_id() -> None:
    with pytest.raises(InvalidArgumentError, match="needs a group_instance_id or a member_id"):
        MemberToRemove()
    with pytest.raises(InvalidArgumentError, match="non-empty string or None"):
        MemberToRemove("")
    with pytest.raises(InvalidArgumentError, match="member_id must be a string"):
        MemberToRemove("A", member_id=None)  # type: ignore[arg-type]
    assert str(MemberToRemove("A", "m-a")) == "the member with group.instance.id 'A' and member id 'm-a'"


def test_members_are_checked_and_strings_are_instance_ids() -> None:
    assert members_of(["A", MemberToRemove(member_id="m"), "A"], "f()") == [
        MemberToRemove("A"),
        MemberToRemove(member_id="m"),
    ]
    with pytest.raises(InvalidArgumentError, match="not one string"):
        members_of("A", "f()")
    with pytest.raises(InvalidArgumentError, match="no members given; pass None"):
        members_of([], "f()")
    with pytest.raises(InvalidArgumentError, match=r"MemberToRemove or a group\.instance\.id string"):
        members_of([7], "f()")  # type: ignore[list-item]


def test_the_reason_is_javas_with_the_callers_appended_and_cut_to_255_bytes() -> None:
    assert leave_reason(None) == "member was removed by an admin"
    assert leave_reason("host lost") == "member was removed by an admin: host lost"
    assert len(leave_reason("é" * 300).encode()) <= 255
    with pytest.raises(InvalidArgumentError, match="reason must be a string"):
        leave_reason(5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda a: a.remove_members_from_consumer_group("", ["A"]), "non-empty string"),
        (lambda a: a.remove_members_from_consumer_group("g", "A"), "not one string"),
        (lambda a: a.remove_members_from_consumer_group("g", []), "no members given"),
        (lambda a: a.remove_members_from_consumer_group("g", ["A"], reason=b"x"), "reason must be"),
    ],
)
def test_the_call_refuses_bad_input_before_any_request(call: Any, message: str) -> None:
    with (
        AdminClient({"bootstrap.servers": "127.0.0.1:9"}) as admin,
        pytest.raises(InvalidArgumentError, match=message),
    ):
        call(admin)


# -- LeaveGroup to the coordinator -------------------------------------------------------------------


def test_members_are_named_in_one_leave_group_to_the_coordinator() -> None:
    fake = LeaveFakeCluster()
    rig, result = removed(fake, [MemberToRemove("A"), MemberToRemove(member_id="m-dyn")], reason="why")
    assert result.values() == {GROUP: {MemberToRemove("A"): 0, MemberToRemove(member_id="m-dyn"): 0}}
    [(broker, request)] = rig.sent(LeaveGroupRequest)
    assert broker == 1 and request.group_id == GROUP
    assert [(m.member_id, m.group_instance_id, m.reason) for m in request.members] == [
        ("", "A", "why"),
        ("m-dyn", None, "why"),
    ]
    assert [v for _, r, v in fake.handled if isinstance(r, LeaveGroupRequest)] == [
        CLIENT_VERSIONS[ApiKey.LEAVE_GROUP][1]
    ]
    assert fake.members == {"m-b": "B"}


def test_each_member_gets_its_own_answer_though_kafka_copies_the_first_error_to_the_top() -> None:
    fake = LeaveFakeCluster()
    wanted = [MemberToRemove("ghost"), MemberToRemove("B"), MemberToRemove("A", member_id="m-b")]
    _, result = removed(fake, wanted)
    answered = result.values()[GROUP]
    assert answered == {wanted[0]: UNKNOWN_MEMBER_ID, wanted[1]: 0, wanted[2]: FENCED_INSTANCE_ID}
    errors = member_errors(GROUP, wanted, answered)
    assert isinstance(errors[wanted[0]], UnknownMemberIdError)
    assert "group 'g' has no member with group.instance.id 'ghost'" in str(errors[wanted[0]])
    assert errors[wanted[1]] is None
    assert isinstance(errors[wanted[2]], FencedInstanceIdError)
    assert "belongs to another member id now" in str(errors[wanted[2]])


def test_answers_that_echo_other_ids_are_matched_by_position() -> None:
    fake = LeaveFakeCluster()
    fake.echo_ids = ["m-a", "x"]  # noida echoes the member ids and an empty instance id
    wanted = [MemberToRemove("A"), MemberToRemove("ghost")]
    _, result = removed(fake, wanted)
    assert result.values()[GROUP] == {wanted[0]: 0, wanted[1]: UNKNOWN_MEMBER_ID}


def test_a_member_the_answer_does_not_mention_is_reported_as_unknown_outcome() -> None:
    error = member_errors(GROUP, [MemberToRemove("A")], {})[MemberToRemove("A")]
    assert type(error) is KafkaError and "may or may not have been removed" in str(error)


def test_a_coordinator_that_moved_is_looked_up_again() -> None:
    fake = LeaveFakeCluster()
    fake.coordinators[GROUP] = 0
    fake.inject(LeaveGroupRequest, NOT_COORDINATOR, node=0)
    rig = AdminRig(fake)
    op = rig.submit(RemoveMembersApi(GROUP, [MemberToRemove("A")], "r"))
    for _ in range(100):
        if op.future.done():
            break
        rig.side.net.run([rig.manager, rig.side.metadata], rig.now)
        if rig.sent(LeaveGroupRequest):
            fake.coordinators[GROUP] = 1  # it moved after the first LeaveGroup
        rig.now += BACKOFF_MS
    assert op.future.result(0).values() == {GROUP: {MemberToRemove("A"): 0}}
    assert [b for b, _ in rig.sent(LeaveGroupRequest)] == [0, 1]
    assert len(rig.sent(FindCoordinatorRequest)) == 2


def test_a_group_error_fails_the_call() -> None:
    fake = LeaveFakeCluster()
    fake.inject(LeaveGroupRequest, 30)  # GROUP_AUTHORIZATION_FAILED
    rig, result = removed(fake, [MemberToRemove("A")])
    assert isinstance(result.failed[GROUP], GroupAuthorizationFailedError)
    assert rig.now < 1 + 2 * BACKOFF_MS, "not retried"


def test_a_coordinator_without_leave_group_v3_fails_unsent_naming_the_need() -> None:
    versions = dict(CLIENT_VERSIONS)
    versions[ApiKey.LEAVE_GROUP] = (0, 2)
    fake = LeaveFakeCluster(api_versions=versions)
    rig, result = removed(fake, [MemberToRemove("A")])
    error = result.failed[GROUP]
    assert isinstance(error, UnsupportedVersionError)
    assert "needs LeaveGroup v3 or later" in str(error) and "only up to v2" in str(error)
    assert not rig.sent(LeaveGroupRequest)
    assert fake.members["m-a"] == "A"
