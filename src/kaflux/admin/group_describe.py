"""The admin client's DescribeGroups and ConsumerGroupDescribe requests. [pure]

:class:`DescribeGroupsApi` asks each group's coordinator DescribeGroups first, the API every broker
here offers. A group it reports ``Dead`` with no protocol (absent, or a KIP-848 group, which
DescribeGroups v0-5 shows so) is asked again with ConsumerGroupDescribe where the coordinator
offers it; when that does not know the group either, the DescribeGroups answer stands (Java asks
in the other order, which on Tansu describes a classic group without its members). A
coordinator without DescribeGroups is asked ConsumerGroupDescribe at once.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kaflux.admin.groups import CONSUMER_PROTOCOL_TYPES, GroupApi, group_error
from kaflux.admin.operation import Outcome
from kaflux.admin.results import ConsumerGroupDescription, MemberDescription
from kaflux.consumer.assignors.consumer_protocol import decode_assignment
from kaflux.errors import (
    GroupIdNotFoundError,
    InvalidArgumentError,
    KafkaError,
    ProtocolError,
    UnsupportedVersionError,
)
from kaflux.protocol.framing import RequestMessage
from kaflux.protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
)
from kaflux.protocol.messages.consumer_group_describe import DescribedGroup as NewDescribedGroup
from kaflux.protocol.messages.describe_groups import (
    DescribedGroup,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
)
from kaflux.structs import Node, TopicPartition

__all__ = ["DescribeGroupsApi"]


def _assignment(group: str, data: bytes) -> frozenset[TopicPartition]:
    try:
        return frozenset(decode_assignment(data).partitions)
    except (ProtocolError, UnsupportedVersionError) as exc:
        raise ProtocolError(f"group {group!r}: a member's assignment cannot be read: {exc}") from exc


class DescribeGroupsApi(GroupApi):
    """DescribeGroups, or ConsumerGroupDescribe for KIP-848 groups, to each group's coordinator."""

    def __init__(self, group_ids: Iterable[str]) -> None:
        super().__init__(group_ids)
        #: groups to ask with ConsumerGroupDescribe
        self._new_api: set[str] = set()
        #: DescribeGroups' answer for those, which stands if ConsumerGroupDescribe does not know them
        self._classic: dict[str, ConsumerGroupDescription] = {}

    def build(self, node: Node | None, keys: list[str]) -> list[tuple[RequestMessage[Any], list[str]]]:
        classic = [g for g in keys if g not in self._new_api]
        new = [g for g in keys if g in self._new_api]
        requests: list[tuple[RequestMessage[Any], list[str]]] = []
        if classic:
            requests.append((DescribeGroupsRequest(groups=classic), classic))
        if new:
            requests.append((ConsumerGroupDescribeRequest(group_ids=new), new))
        return requests

    def handle(self, node: Node | None, keys: list[str], body: Any) -> Outcome[str, Any]:
        assert node is not None, "sent to a coordinator"
        if isinstance(body, DescribeGroupsResponse):
            return self._classic_answer(node, keys, body)
        assert isinstance(body, ConsumerGroupDescribeResponse)
        return self._new_answer(node, keys, body)

    def handle_error(
        self, node: Node | None, keys: list[str], request: Any, error: KafkaError
    ) -> Outcome[str, Any] | None:
        if not isinstance(error, UnsupportedVersionError):
            return None
        outcome: Outcome[str, Any] = Outcome()
        for group in keys:
            if isinstance(request, DescribeGroupsRequest):
                self._new_api.add(group)  # no DescribeGroups there: try ConsumerGroupDescribe
                outcome.resend.add(group)
            elif group in self._classic:
                outcome.completed[group] = self._classic[group]
            else:
                outcome.failed[group] = UnsupportedVersionError(
                    f"the coordinator of group {group!r} (broker "
                    f"{node.node_id if node else '?'}) offers neither DescribeGroups nor "
                    "ConsumerGroupDescribe, so it cannot describe groups; use a broker that does"
                )
        return outcome

    def _classic_answer(self, node: Node, keys: list[str], body: DescribeGroupsResponse) -> Outcome[str, Any]:
        outcome: Outcome[str, Any] = Outcome()
        for group in body.groups:
            name = group.group_id
            if name not in keys:
                continue
            if group.error_code == GroupIdNotFoundError.code:
                self._new_api.add(name)  # v6+: "not a classic group"
                outcome.resend.add(name)
            elif group.error_code:
                group_error(outcome, name, group.error_code)
            elif group.protocol_type not in CONSUMER_PROTOCOL_TYPES:
                outcome.failed[name] = InvalidArgumentError(
                    f"group {name!r} is not a consumer group (its protocol type is {group.protocol_type!r})"
                )
            else:
                try:
                    description = self._describe_classic(node, group)
                except ProtocolError as exc:
                    outcome.failed[name] = exc
                    continue
                if group.group_state == "Dead" and not group.protocol_type and not group.members:
                    # Absent, or a KIP-848 group: ask ConsumerGroupDescribe.
                    self._classic[name] = description
                    self._new_api.add(name)
                    outcome.resend.add(name)
                else:
                    outcome.completed[name] = description
        return outcome

    def _describe_classic(self, node: Node, group: DescribedGroup) -> ConsumerGroupDescription:
        members = [
            MemberDescription(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                _assignment(group.group_id, m.member_assignment) if m.member_assignment else frozenset(),
            )
            for m in group.members
        ]
        return ConsumerGroupDescription(
            group.group_id, group.group_state, group.protocol_type, group.protocol_data, node, members
        )

    def _new_answer(
        self, node: Node, keys: list[str], body: ConsumerGroupDescribeResponse
    ) -> Outcome[str, Any]:
        outcome: Outcome[str, Any] = Outcome()
        for group in body.groups:
            name = group.group_id
            if name not in keys:
                continue
            if group.error_code == GroupIdNotFoundError.code and name in self._classic:
                outcome.completed[name] = self._classic[name]  # not a KIP-848 group either
            elif group.error_code:
                group_error(outcome, name, group.error_code, group.error_message or f"group {name!r}")
            else:
                outcome.completed[name] = self._describe_new(node, group)
        return outcome

    def _describe_new(self, node: Node, group: NewDescribedGroup) -> ConsumerGroupDescription:
        members = [
            MemberDescription(
                m.member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                frozenset(
                    TopicPartition(t.topic_name, p)
                    for t in m.assignment.topic_partitions
                    for p in t.partitions
                ),
            )
            for m in group.members
        ]
        return ConsumerGroupDescription(
            group.group_id, group.group_state, "consumer", group.assignor_name, node, members
        )
