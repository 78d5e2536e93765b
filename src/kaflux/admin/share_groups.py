"""The admin client's share-group requests (KIP-932): describe share groups, read, alter and
delete their start offsets. [pure]

Each class is an :class:`~kaflux.admin.operation.AdminApi` keyed by group id, sent to the group's
coordinator, with Java's error handling (:func:`~kaflux.admin.groups.group_error`: a coordinator
that moved is looked up again, one still loading asked again, anything else fails the group).
Deleting share groups is DeleteGroups (:class:`~kaflux.admin.groups.DeleteGroupsApi`), as Java's
``Admin.deleteShareGroups`` does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kaflux.admin.groups import GroupApi, group_error
from kaflux.admin.operation import Outcome
from kaflux.errors import GroupIdNotFoundError, KafkaError, NonEmptyGroupError, error_for_code
from kaflux.protocol.framing import RequestMessage
from kaflux.protocol.messages.alter_share_group_offsets import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
    AlterShareGroupOffsetsResponse,
)
from kaflux.protocol.messages.delete_share_group_offsets import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequestTopic,
    DeleteShareGroupOffsetsResponse,
)
from kaflux.protocol.messages.describe_share_group_offsets import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
    DescribeShareGroupOffsetsRequestTopic,
    DescribeShareGroupOffsetsResponse,
)
from kaflux.protocol.messages.share_group_describe import (
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
)
from kaflux.structs import Node, TopicPartition

__all__ = [
    "AlterShareGroupOffsetsApi",
    "DeleteShareGroupOffsetsApi",
    "DescribeShareGroupOffsetsApi",
    "ShareGroupDescribeApi",
    "ShareGroupDescription",
    "ShareMemberDescription",
    "SharePartitionOffsetInfo",
]


@dataclass(frozen=True, slots=True)
class ShareMemberDescription:
    """One member of a share group, as Java's ``ShareMemberDescription``: the partitions
    assigned to it, its rack (``client.rack``; None when not set) and member epoch."""

    member_id: str
    client_id: str
    host: str
    rack_id: str | None
    member_epoch: int
    assignment: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class ShareGroupDescription:
    """A share group as its coordinator describes it (ShareGroupDescribe), as Java's
    ``ShareGroupDescription``. ``state`` is the broker's name (``Empty``, ``Stable``, ``Dead``);
    ``group_epoch`` counts the group's changes, ``target_assignment_epoch`` the epoch of the
    assignment its members are moving to."""

    group_id: str
    state: str
    coordinator: Node
    group_epoch: int
    target_assignment_epoch: int
    members: list[ShareMemberDescription]


@dataclass(frozen=True, slots=True)
class SharePartitionOffsetInfo:
    """Where a share group is in one partition, as Java's ``SharePartitionOffsetInfo``: its
    start offset (records before it are all acknowledged), the leader epoch it was read at
    (None: unknown) and the lag (records from the start offset to the end, less those already
    acknowledged beyond it; None when the broker does not report it: before Kafka 4.2,
    DescribeShareGroupOffsets v1, KIP-1226)."""

    start_offset: int
    leader_epoch: int | None
    lag: int | None


class ShareGroupDescribeApi(GroupApi):
    """ShareGroupDescribe to each group's coordinator."""

    def build(self, node: Node | None, keys: list[str]) -> list[tuple[RequestMessage[Any], list[str]]]:
        return [(ShareGroupDescribeRequest(group_ids=keys), keys)]

    def handle(
        self, node: Node | None, keys: list[str], body: ShareGroupDescribeResponse
    ) -> Outcome[str, Any]:
        outcome: Outcome[str, Any] = Outcome()
        for group in body.groups:
            key = group.group_id
            if key not in keys:
                continue
            if group.error_code == GroupIdNotFoundError.code:
                outcome.failed[key] = GroupIdNotFoundError(
                    group.error_message or f"group {key!r} does not exist, or is not a share group"
                )
                continue
            if group.error_code:
                group_error(outcome, key, group.error_code, group.error_message or f"group {key!r}")
                continue
            members = [
                ShareMemberDescription(
                    member_id=m.member_id,
                    client_id=m.client_id,
                    host=m.client_host,
                    rack_id=m.rack_id,
                    member_epoch=m.member_epoch,
                    assignment=frozenset(
                        TopicPartition(t.topic_name, p)
                        for t in m.assignment.topic_partitions
                        for p in t.partitions
                    ),
                )
                for m in group.members
            ]
            assert node is not None  # a coordinator answered
            outcome.completed[key] = ShareGroupDescription(
                group_id=key,
                state=group.group_state,
                coordinator=node,
                group_epoch=group.group_epoch,
                target_assignment_epoch=group.assignment_epoch,
                members=sorted(members, key=lambda m: m.member_id),
            )
        return outcome


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(set(partitions)):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return by_topic


class DescribeShareGroupOffsetsApi(GroupApi):
    """DescribeShareGroupOffsets of one group (of ``partitions``, or of every partition it has
    read when None). Partitions the group has not started reading (start offset -1) are left out,
    as Java leaves them out of ``listShareGroupOffsets``' map."""

    def __init__(self, group_id: str, partitions: Iterable[TopicPartition] | None) -> None:
        super().__init__([group_id])
        self._partitions = None if partitions is None else sorted(set(partitions))

    def build(self, node: Node | None, keys: list[str]) -> list[tuple[RequestMessage[Any], list[str]]]:
        (group,) = keys
        topics = (
            None
            if self._partitions is None
            else [
                DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=p)
                for t, p in _by_topic(self._partitions).items()
            ]
        )
        request = DescribeShareGroupOffsetsRequest(
            groups=[DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=topics)]
        )
        return [(request, keys)]

    def handle(
        self, node: Node | None, keys: list[str], body: DescribeShareGroupOffsetsResponse
    ) -> Outcome[str, Any]:
        (group,) = keys
        outcome: Outcome[str, Any] = Outcome()
        answer = next((g for g in body.groups if g.group_id == group), None)
        if answer is None:
            return outcome  # not answered: retried after the backoff
        if answer.error_code:
            group_error(outcome, group, answer.error_code, answer.error_message or f"group {group!r}")
            return outcome
        offsets: dict[TopicPartition, SharePartitionOffsetInfo] = {}
        for topic in answer.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.topic_name, p.partition_index)
                if p.error_code:
                    error = error_for_code(p.error_code)(
                        p.error_message or f"the start offset of {tp} in share group {group!r}"
                    )
                    (outcome.retry if error.retriable else outcome.failed)[group] = error
                    return outcome
                if p.start_offset < 0:
                    continue
                offsets[tp] = SharePartitionOffsetInfo(
                    start_offset=p.start_offset,
                    leader_epoch=p.leader_epoch if p.leader_epoch >= 0 else None,
                    lag=p.lag if p.lag >= 0 else None,
                )
        outcome.completed[group] = dict(sorted(offsets.items()))
        return outcome


def _non_empty(group: str, what: str) -> NonEmptyGroupError:
    return NonEmptyGroupError(
        f"share group {group!r} has active members: its offsets can be {what} only while it is "
        "empty; close its share consumers (or wait until their sessions expire) and try again"
    )


class AlterShareGroupOffsetsApi(GroupApi):
    """AlterShareGroupOffsets: set one group's start offsets. The value is, per partition, None
    when set, else the error."""

    def __init__(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        super().__init__([group_id])
        self._offsets = dict(sorted(offsets.items()))

    def build(self, node: Node | None, keys: list[str]) -> list[tuple[RequestMessage[Any], list[str]]]:
        (group,) = keys
        by_topic: dict[str, list[AlterShareGroupOffsetsRequestPartition]] = {}
        for tp, offset in self._offsets.items():
            by_topic.setdefault(tp.topic, []).append(
                AlterShareGroupOffsetsRequestPartition(partition_index=tp.partition, start_offset=offset)
            )
        request = AlterShareGroupOffsetsRequest(
            group_id=group,
            topics=[
                AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=p) for t, p in by_topic.items()
            ],
        )
        return [(request, keys)]

    def handle(
        self, node: Node | None, keys: list[str], body: AlterShareGroupOffsetsResponse
    ) -> Outcome[str, Any]:
        (group,) = keys
        outcome: Outcome[str, Any] = Outcome()
        if body.error_code == NonEmptyGroupError.code:
            outcome.failed[group] = _non_empty(group, "altered")
            return outcome
        if body.error_code:
            group_error(outcome, group, body.error_code, body.error_message or f"share group {group!r}")
            return outcome
        results: dict[TopicPartition, KafkaError | None] = {tp: None for tp in self._offsets}
        for topic in body.responses:
            for p in topic.partitions:
                tp = TopicPartition(topic.topic_name, p.partition_index)
                if p.error_code:
                    results[tp] = error_for_code(p.error_code)(
                        p.error_message or f"setting the start offset of {tp} in share group {group!r}"
                    )
        outcome.completed[group] = results
        return outcome


class DeleteShareGroupOffsetsApi(GroupApi):
    """DeleteShareGroupOffsets: forget where one group is in some topics. The value is, per
    topic, None when deleted, else the error."""

    def __init__(self, group_id: str, topics: Iterable[str]) -> None:
        super().__init__([group_id])
        self._topics = sorted(set(topics))

    def build(self, node: Node | None, keys: list[str]) -> list[tuple[RequestMessage[Any], list[str]]]:
        (group,) = keys
        request = DeleteShareGroupOffsetsRequest(
            group_id=group, topics=[DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in self._topics]
        )
        return [(request, keys)]

    def handle(
        self, node: Node | None, keys: list[str], body: DeleteShareGroupOffsetsResponse
    ) -> Outcome[str, Any]:
        (group,) = keys
        outcome: Outcome[str, Any] = Outcome()
        if body.error_code == NonEmptyGroupError.code:
            outcome.failed[group] = _non_empty(group, "deleted")
            return outcome
        if body.error_code:
            group_error(outcome, group, body.error_code, body.error_message or f"share group {group!r}")
            return outcome
        results: dict[str, KafkaError | None] = {t: None for t in self._topics}
        for topic in body.responses:
            if topic.error_code:
                results[topic.topic_name] = error_for_code(topic.error_code)(
                    topic.error_message
                    or f"deleting the offsets of topic {topic.topic_name!r} in share group {group!r}"
                )
        outcome.completed[group] = results
        return outcome
