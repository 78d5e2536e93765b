"""The admin client's consumer-group requests: list, describe, delete, read and alter offsets. [pure]

Each class is an :class:`~kaflux.admin.operation.AdminApi` keyed by group id (sent to the group's
coordinator) or, for ListGroups, by broker id (sent to every broker). Error handling follows
Java's admin handlers: a coordinator that moved (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE) is
looked up again, one still loading is asked again after the backoff, anything else fails the
group with its kaflux error class and a message saying what to do.

Describing groups is :mod:`kaflux.admin.group_describe`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kaflux.admin.operation import AdminApi, Lookup, Outcome
from kaflux.admin.results import ConsumerGroupListing, GroupListing
from kaflux.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedMemberEpochError,
    GroupIdNotFoundError,
    IllegalGenerationError,
    KafkaError,
    NonEmptyGroupError,
    NotCoordinatorError,
    RebalanceInProgressError,
    StaleMemberEpochError,
    UnknownMemberIdError,
    UnsupportedVersionError,
    error_for_code,
)
from kaflux.protocol.framing import RequestMessage
from kaflux.protocol.messages.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse
from kaflux.protocol.messages.list_groups import ListGroupsRequest, ListGroupsResponse
from kaflux.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
)
from kaflux.protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
    OffsetFetchResponse,
)
from kaflux.structs import Node, OffsetAndMetadata, TopicPartition

__all__ = [
    "DeleteGroupsApi",
    "ListAllGroupsApi",
    "ListGroupsApi",
    "OffsetCommitApi",
    "OffsetFetchApi",
]

#: the protocol types of consumer groups ("" for groups that only store offsets), as Java filters
CONSUMER_PROTOCOL_TYPES = ("consumer", "")
#: v8 is the newest classic OffsetCommit; v9 is for KIP-848 members (an admin commit is neither)
MAX_OFFSET_COMMIT_VERSION = 8

_MOVED = (NotCoordinatorError.code, CoordinatorNotAvailableError.code)
#: what a coordinator answers an admin commit (no member, no generation) to a group with members
_ACTIVE_GROUP = frozenset(
    e.code
    for e in (
        UnknownMemberIdError,
        IllegalGenerationError,
        RebalanceInProgressError,
        FencedMemberEpochError,
        StaleMemberEpochError,
    )
)


def group_error(outcome: Outcome[str, Any], group: str, code: int, message: str | None = None) -> None:
    """File a group-level error: look the coordinator up again if it moved, retry one that is
    loading, fail the group otherwise."""
    error = error_for_code(code)(message or f"group {group!r}")
    if code in _MOVED:
        outcome.unmapped[group] = error
    elif error.retriable or code == CoordinatorLoadInProgressError.code:
        outcome.retry[group] = error
    else:
        outcome.failed[group] = error


class GroupApi(AdminApi[str, Any]):
    """An api keyed by group id, sent to each group's coordinator."""

    lookup = Lookup.COORDINATOR

    def __init__(self, group_ids: Iterable[str]) -> None:
        self._groups = list(dict.fromkeys(group_ids))

    def keys(self) -> list[str]:
        return self._groups

    def describe(self, key: str) -> str:
        return f"group {key!r}"


class ListGroupsApi(AdminApi[int, list[ConsumerGroupListing]]):
    """ListGroups to every broker; each answers with the consumer groups it coordinates."""

    lookup = Lookup.BROKERS

    def keys(self) -> list[int]:
        return []

    def describe(self, key: int) -> str:
        return f"broker {key}"

    def build(self, node: Node | None, keys: list[int]) -> list[tuple[RequestMessage[Any], list[int]]]:
        return [(ListGroupsRequest(states_filter=[], types_filter=[]), keys)]

    def handle(
        self, node: Node | None, keys: list[int], body: ListGroupsResponse
    ) -> Outcome[int, list[ConsumerGroupListing]]:
        outcome: Outcome[int, list[ConsumerGroupListing]] = Outcome()
        for key in keys:
            if body.error_code:
                error = error_for_code(body.error_code)(f"ListGroups on broker {key}")
                (outcome.retry if error.retriable else outcome.failed)[key] = error
                continue
            outcome.completed[key] = [
                ConsumerGroupListing(g.group_id, g.group_state or None, g.protocol_type, g.group_type or None)
                for g in body.groups
                if g.protocol_type in CONSUMER_PROTOCOL_TYPES
            ]
        return outcome


#: ListGroups v5 is the first with a types filter (KIP-848), v4 with a states filter (KIP-518)
_TYPES_FILTER_VERSION = 5
_STATES_FILTER_VERSION = 4


class ListAllGroupsApi(AdminApi[int, list[GroupListing]]):
    """ListGroups to every broker for groups of every type (KIP-1043), filtered by type and
    state as Java's ``Admin.listGroups`` does: the filters go to the broker (ListGroups v5 for
    types, v4 for states), which matches them without regard to case."""

    lookup = Lookup.BROKERS

    def __init__(self, types: Iterable[str], states: Iterable[str]) -> None:
        self._types = sorted(set(types))
        self._states = sorted(set(states))

    def keys(self) -> list[int]:
        return []

    def describe(self, key: int) -> str:
        return f"broker {key}"

    def build(self, node: Node | None, keys: list[int]) -> list[tuple[RequestMessage[Any], list[int]]]:
        return [(ListGroupsRequest(states_filter=self._states, types_filter=self._types), keys)]

    def min_version(self, request: RequestMessage[Any]) -> int | None:
        if self._types:
            return _TYPES_FILTER_VERSION
        return _STATES_FILTER_VERSION if self._states else None

    def handle_error(
        self, node: Node | None, keys: list[int], request: Any, error: KafkaError
    ) -> Outcome[int, list[GroupListing]] | None:
        if isinstance(error, UnsupportedVersionError) and (self._types or self._states):
            needs = "types (ListGroups v5, Kafka 4.0)" if self._types else "states (ListGroups v4, Kafka 2.6)"
            return Outcome(
                failed={
                    k: UnsupportedVersionError(f"broker {k} cannot filter groups by {needs}: list without it")
                    for k in keys
                }
            )
        return None

    def handle(
        self, node: Node | None, keys: list[int], body: ListGroupsResponse
    ) -> Outcome[int, list[GroupListing]]:
        outcome: Outcome[int, list[GroupListing]] = Outcome()
        for key in keys:
            if body.error_code:
                error = error_for_code(body.error_code)(f"ListGroups on broker {key}")
                (outcome.retry if error.retriable else outcome.failed)[key] = error
                continue
            outcome.completed[key] = [
                GroupListing(g.group_id, g.group_type or None, g.protocol_type, g.group_state or None)
                for g in body.groups
            ]
        return outcome


class DeleteGroupsApi(GroupApi):
    """DeleteGroups to each group's coordinator; the value of a deleted group is None."""

    def build(self, node: Node | None, keys: list[str]) -> list[tuple[RequestMessage[Any], list[str]]]:
        return [(DeleteGroupsRequest(groups_names=keys), keys)]

    def handle(self, node: Node | None, keys: list[str], body: DeleteGroupsResponse) -> Outcome[str, Any]:
        outcome: Outcome[str, Any] = Outcome()
        for result in body.results:
            group = result.group_id
            if group not in keys:
                continue
            if result.error_code == 0:
                outcome.completed[group] = None
            elif result.error_code == NonEmptyGroupError.code:
                outcome.failed[group] = NonEmptyGroupError(
                    f"group {group!r}: stop its consumers (or wait until their sessions expire), then "
                    "delete it"
                )
            elif result.error_code == GroupIdNotFoundError.code:
                outcome.failed[group] = GroupIdNotFoundError(f"group {group!r} does not exist")
            else:
                group_error(outcome, group, result.error_code)
        return outcome


class OffsetFetchApi(GroupApi):
    """OffsetFetch of one group's committed offsets (of ``partitions``, or of all when None);
    partitions without a committed offset are left out."""

    def __init__(self, group_id: str, partitions: Iterable[TopicPartition] | None) -> None:
        super().__init__([group_id])
        self._partitions = None if partitions is None else sorted(set(partitions))
        #: ask in the v0-7 layout (the coordinator has no v8)
        self._legacy = False

    def build(self, node: Node | None, keys: list[str]) -> list[tuple[RequestMessage[Any], list[str]]]:
        (group,) = keys
        by_topic: dict[str, list[int]] = {}
        for tp in self._partitions or ():
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        if self._legacy:
            topics = (
                None
                if self._partitions is None
                else [OffsetFetchRequestTopic(name=t, partition_indexes=p) for t, p in by_topic.items()]
            )
            return [(OffsetFetchRequest(group_id=group, topics=topics), keys)]
        # v8+ (a list of groups) first: Tansu answers "all topics" in v2-7 with a malformed response.
        group_topics = (
            None
            if self._partitions is None
            else [OffsetFetchRequestTopics(name=t, partition_indexes=p) for t, p in by_topic.items()]
        )
        request = OffsetFetchRequest(groups=[OffsetFetchRequestGroup(group_id=group, topics=group_topics)])
        return [(request, keys)]

    def handle_error(
        self, node: Node | None, keys: list[str], request: Any, error: KafkaError
    ) -> Outcome[str, Any] | None:
        if isinstance(error, UnsupportedVersionError) and not self._legacy:
            self._legacy = True  # the coordinator has no v8+: ask with one group at the top level
            return Outcome(resend=set(keys))
        return None

    def handle(self, node: Node | None, keys: list[str], body: OffsetFetchResponse) -> Outcome[str, Any]:
        (group,) = keys
        outcome: Outcome[str, Any] = Outcome()
        answer = next((g for g in body.groups if g.group_id == group), None)
        code = body.error_code if answer is None else answer.error_code
        if code:
            group_error(outcome, group, code)
            return outcome
        partitions = (
            [(t.name, p) for t in body.topics for p in t.partitions]
            if answer is None
            else [(t.name, p) for t in answer.topics for p in t.partitions]
        )
        offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        for topic, p in partitions:
            tp = TopicPartition(topic, p.partition_index)
            if p.error_code:
                error = error_for_code(p.error_code)(f"the committed offset of {tp} in group {group!r}")
                (outcome.retry if error.retriable else outcome.failed)[group] = error
                return outcome
            if p.committed_offset >= 0:
                epoch = p.committed_leader_epoch if p.committed_leader_epoch >= 0 else None
                offsets[tp] = OffsetAndMetadata(p.committed_offset, p.metadata or "", epoch)
        outcome.completed[group] = dict(sorted(offsets.items()))
        return outcome


class OffsetCommitApi(GroupApi):
    """OffsetCommit of ``offsets`` for a group, as an admin: no member id, generation -1. A
    coordinator accepts it only while the group has no members."""

    max_version = MAX_OFFSET_COMMIT_VERSION

    def __init__(self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        super().__init__([group_id])
        self._offsets = dict(sorted(offsets.items()))

    def build(self, node: Node | None, keys: list[str]) -> list[tuple[RequestMessage[Any], list[str]]]:
        (group,) = keys
        by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
        for tp, offset in self._offsets.items():
            by_topic.setdefault(tp.topic, []).append(
                OffsetCommitRequestPartition(
                    partition_index=tp.partition,
                    committed_offset=offset.offset,
                    committed_leader_epoch=-1 if offset.leader_epoch is None else offset.leader_epoch,
                    committed_metadata=offset.metadata,
                )
            )
        request = OffsetCommitRequest(
            group_id=group,
            generation_id_or_member_epoch=-1,
            member_id="",
            topics=[OffsetCommitRequestTopic(name=t, partitions=p) for t, p in by_topic.items()],
        )
        return [(request, keys)]

    def handle(self, node: Node | None, keys: list[str], body: OffsetCommitResponse) -> Outcome[str, Any]:
        (group,) = keys
        outcome: Outcome[str, Any] = Outcome()
        for topic in body.topics:
            for p in topic.partitions:
                if not p.error_code:
                    continue
                tp = TopicPartition(topic.name, p.partition_index)
                if p.error_code in _ACTIVE_GROUP:
                    outcome.failed[group] = error_for_code(p.error_code)(
                        f"group {group!r} has active members: its offsets can be altered only while it "
                        "is empty; stop its consumers (or wait until their sessions expire) and try again"
                    )
                else:
                    group_error(outcome, group, p.error_code, f"committing {tp} for group {group!r}")
                return outcome
        outcome.completed[group] = None
        return outcome
