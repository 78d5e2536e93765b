"""Removing members from a consumer group: LeaveGroup v3+ to the group's coordinator, naming the
members, as Java's ``Admin.removeMembersFromConsumerGroup`` does. [pure]

:class:`MemberToRemove` names a member by its ``group.instance.id`` (a static member, Java's use
case: one whose process is gone, so that the group rebalances now instead of waiting for its
session to expire) and/or its member id (how "every member" is removed, from a DescribeGroups
answer). :class:`RemoveMembersApi` sends them in one LeaveGroup; the answer has an error per
member (UNKNOWN_MEMBER_ID: no such member; FENCED_INSTANCE_ID: the instance id belongs to another
member id now), which :func:`member_errors` turns into errors that say what to do.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kaflux.admin.groups import GroupApi, group_error
from kaflux.admin.operation import Outcome
from kaflux.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    GroupAuthorizationFailedError,
    InvalidArgumentError,
    KafkaError,
    NotCoordinatorError,
    UnknownMemberIdError,
    UnsupportedVersionError,
    error_for_code,
)
from kaflux.protocol.framing import RequestMessage
from kaflux.protocol.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse, MemberIdentity
from kaflux.structs import Node

__all__ = [
    "LEAVE_GROUP_MEMBERS_MIN_VERSION",
    "MemberToRemove",
    "RemoveMembersApi",
    "leave_reason",
    "member_errors",
    "members_of",
]

#: the first LeaveGroup version that names members (KIP-345)
LEAVE_GROUP_MEMBERS_MIN_VERSION = 3
#: what the coordinator is told (KIP-800), as Java says it; a caller's reason is appended
DEFAULT_REASON = "member was removed by an admin"
#: the coordinator keeps at most this many bytes of a reason
MAX_REASON_BYTES = 255
#: top-level errors about the group or its coordinator, never about one member
_GROUP_ERRORS = frozenset(
    e.code
    for e in (
        NotCoordinatorError,
        CoordinatorNotAvailableError,
        CoordinatorLoadInProgressError,
        GroupAuthorizationFailedError,
    )
)


@dataclass(frozen=True, slots=True)
class MemberToRemove:
    """A member to remove from a consumer group (Java's ``MemberToRemove``): a static member by
    its ``group_instance_id``, or any member by its ``member_id`` (as
    :meth:`~kaflux.AdminClient.describe_consumer_groups` lists it). Given both, they must
    belong together, or the coordinator answers FencedInstanceIdError."""

    group_instance_id: str | None = None
    member_id: str = ""

    def __post_init__(self) -> None:
        if self.group_instance_id is not None and (
            not isinstance(self.group_instance_id, str) or not self.group_instance_id
        ):
            raise InvalidArgumentError(
                f"MemberToRemove: group_instance_id must be a non-empty string or None, got "
                f"{self.group_instance_id!r}"
            )
        if not isinstance(self.member_id, str):
            raise InvalidArgumentError(f"MemberToRemove: member_id must be a string, got {self.member_id!r}")
        if self.group_instance_id is None and not self.member_id:
            raise InvalidArgumentError("MemberToRemove needs a group_instance_id or a member_id")

    def __str__(self) -> str:
        parts = []
        if self.group_instance_id is not None:
            parts.append(f"group.instance.id {self.group_instance_id!r}")
        if self.member_id:
            parts.append(f"member id {self.member_id!r}")
        return "the member with " + " and ".join(parts)


def members_of(members: Iterable[MemberToRemove | str], what: str) -> list[MemberToRemove]:
    """``members`` checked (a str is a ``group.instance.id``), without repeats. Raises
    InvalidArgumentError for a bare string, an empty list or anything else."""
    if isinstance(members, (str, bytes)):
        raise InvalidArgumentError(
            f"{what} takes an iterable of members (MemberToRemove or group.instance.id strings), "
            "not one string: wrap it in a list"
        )
    checked: list[MemberToRemove] = []
    for member in members:
        if isinstance(member, str):
            member = MemberToRemove(member)
        if not isinstance(member, MemberToRemove):
            raise InvalidArgumentError(
                f"{what}: a member is a MemberToRemove or a group.instance.id string, got {member!r}"
            )
        checked.append(member)
    if not checked:
        raise InvalidArgumentError(f"{what}: no members given; pass None to remove every member")
    return list(dict.fromkeys(checked))


def leave_reason(reason: str | None) -> str:
    """The reason sent (KIP-800): Java's default, with the caller's appended; cut to what the
    coordinator keeps."""
    if reason is not None and not isinstance(reason, str):
        raise InvalidArgumentError(f"the reason must be a string or None, got {reason!r}")
    text = f"{DEFAULT_REASON}: {reason}" if reason else DEFAULT_REASON
    return text.encode()[:MAX_REASON_BYTES].decode(errors="ignore")


class RemoveMembersApi(GroupApi):
    """LeaveGroup naming ``members`` to the coordinator of one group; the value is each
    member's error code (0: removed) and the identities the coordinator echoed."""

    def __init__(self, group_id: str, members: list[MemberToRemove], reason: str) -> None:
        super().__init__([group_id])
        self._group = group_id
        self._members = members
        self._reason = reason

    def build(self, node: Node | None, keys: list[str]) -> list[tuple[RequestMessage[Any], list[str]]]:
        identities = [MemberIdentity(m.member_id, m.group_instance_id, self._reason) for m in self._members]
        return [(LeaveGroupRequest(group_id=self._group, members=identities), keys)]

    def min_version(self, request: RequestMessage[Any]) -> int | None:
        return LEAVE_GROUP_MEMBERS_MIN_VERSION

    def handle_error(
        self, node: Node | None, keys: list[str], request: Any, error: KafkaError
    ) -> Outcome[str, Any] | None:
        if not isinstance(error, UnsupportedVersionError):
            return None
        return Outcome(
            failed={
                g: UnsupportedVersionError(
                    f"removing members from group {g!r} needs LeaveGroup v3 or later (Kafka 2.4+), which "
                    f"its coordinator does not offer: {error}"
                )
                for g in keys
            }
        )

    def handle(self, node: Node | None, keys: list[str], body: LeaveGroupResponse) -> Outcome[str, Any]:
        outcome: Outcome[str, Any] = Outcome()
        # Kafka sets the top-level error to the first member's when the group itself is fine:
        # with members in the answer, their own errors tell what happened to each.
        if body.error_code and (not body.members or body.error_code in _GROUP_ERRORS):
            group_error(outcome, self._group, body.error_code)
            return outcome
        # Each member answered is matched by its instance id, else its member id (as sent); a
        # coordinator that echoes other ids is matched by position.
        answered: dict[MemberToRemove, int] = {}
        for position, m in enumerate(body.members):
            match = next(
                (
                    w
                    for w in self._members
                    if w not in answered
                    and (
                        w.group_instance_id == m.group_instance_id
                        if w.group_instance_id is not None
                        else w.member_id == m.member_id
                    )
                ),
                None,
            )
            if match is None and len(body.members) == len(self._members):
                match = self._members[position]
            if match is not None and match not in answered:
                answered[match] = m.error_code
        outcome.completed[self._group] = answered
        return outcome


def member_errors(
    group: str, wanted: list[MemberToRemove], answered: dict[MemberToRemove, int]
) -> dict[MemberToRemove, KafkaError | None]:
    """Each member's outcome (None: removed), with messages that say what to do."""
    results: dict[MemberToRemove, KafkaError | None] = {}
    for member in wanted:
        code = answered.get(member)
        if code is None:
            results[member] = KafkaError(
                f"group {group!r}: the coordinator's answer did not mention {member}; it may or may not "
                "have been removed: check with describe_consumer_groups()"
            )
        elif code == 0:
            results[member] = None
        elif code == UnknownMemberIdError.code:
            results[member] = UnknownMemberIdError(
                f"group {group!r} has no {str(member).removeprefix('the ')}: it left already, or the id is "
                "wrong; describe_consumer_groups() lists the members"
            )
        elif code == FencedInstanceIdError.code:
            results[member] = FencedInstanceIdError(
                f"group {group!r}: {member} was not removed: that group.instance.id belongs to another "
                "member id now; name the member by its group.instance.id alone"
            )
        else:
            results[member] = error_for_code(code)(f"group {group!r}: removing {member}")
    return results
