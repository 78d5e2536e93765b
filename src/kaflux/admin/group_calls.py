"""The admin client's consumer-group calls: list, describe and delete groups, remove their
members, read and alter their committed offsets. [app: public methods of ``AdminClient``, which
mixes this class in]

Each method checks its arguments, hands an :class:`~kaflux.admin.operation.AdminOperation` to the
network thread through ``AdminClient._run`` and turns the answer into results.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import TypeVar

from kaflux.admin.group_describe import DescribeGroupsApi
from kaflux.admin.group_members import (
    MemberToRemove,
    RemoveMembersApi,
    leave_reason,
    member_errors,
    members_of,
)
from kaflux.admin.groups import (
    DeleteGroupsApi,
    ListGroupsApi,
    OffsetCommitApi,
    OffsetFetchApi,
)
from kaflux.admin.operation import AdminApi, AdminResult
from kaflux.admin.results import ConsumerGroupDescription, ConsumerGroupListing
from kaflux.admin.transactions import OffsetDeleteApi
from kaflux.blocking import Steps, blocking
from kaflux.errors import InvalidArgumentError, KafkaError
from kaflux.structs import OffsetAndMetadata, TopicPartition

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def group_ids_of(group_ids: Iterable[str], what: str) -> list[str]:
    """``group_ids`` checked (no bare string, each a non-empty string) and without repeats."""
    if isinstance(group_ids, (str, bytes)):
        raise InvalidArgumentError(
            f"{what} takes an iterable of group ids, not one string: wrap it in a list"
        )
    groups = list(dict.fromkeys(group_ids))
    for group in groups:
        _check_group_id(group, what)
    return groups


def check_group_id(group: object, what: str) -> None:
    """Raise InvalidArgumentError unless ``group`` is a non-empty string."""
    _check_group_id(group, what)


def _check_group_id(group: object, what: str) -> None:
    if not isinstance(group, str) or not group:
        raise InvalidArgumentError(f"{what}: a group id must be a non-empty string, got {group!r}")


def partitions_of(partitions: Iterable[TopicPartition], what: str) -> list[TopicPartition]:
    """``partitions`` checked to be TopicPartitions."""
    checked = list(partitions)
    for tp in checked:
        if (
            not isinstance(tp, tuple)
            or len(tp) != 2
            or not isinstance(tp[0], str)
            or not isinstance(tp[1], int)
        ):
            raise InvalidArgumentError(f"{what}: expected TopicPartition(topic, partition), got {tp!r}")
    return [TopicPartition(*tp) for tp in checked]


class ConsumerGroupCalls:
    """Consumer-group methods of :class:`~kaflux.admin.client.AdminClient`."""

    def _run(self, what: str, api: AdminApi[K, V], deadline_ms: int) -> Steps[AdminResult[K, V]]:
        raise NotImplementedError  # AdminClient runs it on its network thread

    def _deadline_ms(self, timeout: float | None) -> tuple[float, int]:
        raise NotImplementedError  # AdminClient: (seconds, deadline in monotonic ms)

    @blocking
    def list_consumer_groups(self, timeout: float | None = None) -> Steps[list[ConsumerGroupListing]]:
        """Every consumer group of the cluster, sorted by group id: ListGroups to every broker
        (each lists the groups it coordinates).

        Args:
            timeout: seconds for the whole call; None: ``default.api.timeout.ms``.

        Raises:
            BrokerError: a broker refused (e.g. ``ClusterAuthorizationFailedError``).
            KafkaTimeoutError: some broker did not answer in time (the message names it).
        """
        _, deadline = self._deadline_ms(timeout)
        result = yield from self._run("list_consumer_groups()", ListGroupsApi(), deadline)
        listings: dict[str, ConsumerGroupListing] = {}
        for _, groups in sorted(result.values().items()):
            for listing in groups:
                listings.setdefault(listing.group_id, listing)
        return [listings[g] for g in sorted(listings)]

    @blocking
    def describe_consumer_groups(
        self, group_ids: Iterable[str], timeout: float | None = None
    ) -> Steps[dict[str, ConsumerGroupDescription]]:
        """Describe consumer groups: state, assignor, coordinator and each member with its
        assignment. A group that does not exist is described with state ``Dead`` (as Kafka
        answers; some brokers answer ``Empty``).

        Each group's coordinator is asked DescribeGroups; a KIP-848 group is described with
        ConsumerGroupDescribe where its coordinator offers it.

        Raises:
            InvalidArgumentError: a group id is not a non-empty string, or names a group
                that is not a consumer group.
            BrokerError: a coordinator refused (e.g. ``GroupAuthorizationFailedError``).
            UnsupportedVersionError: a coordinator can describe no groups.
            KafkaTimeoutError: not answered in time.
        """
        groups = group_ids_of(group_ids, "describe_consumer_groups()")
        if not groups:
            return {}
        _, deadline = self._deadline_ms(timeout)
        api = DescribeGroupsApi(groups)
        described = (yield from self._run("describe_consumer_groups()", api, deadline)).values()
        return {g: described[g] for g in groups}

    @blocking
    def delete_consumer_groups(
        self, group_ids: Iterable[str], timeout: float | None = None
    ) -> Steps[dict[str, KafkaError | None]]:
        """Delete consumer groups (DeleteGroups to each group's coordinator), with their
        committed offsets. Returns, per group, None when it was deleted, else the error: e.g.
        ``NonEmptyGroupError`` (the group has active members), ``GroupIdNotFoundError``, or
        ``KafkaTimeoutError`` when its coordinator did not answer in time.

        Raises:
            InvalidArgumentError: a group id is not a non-empty string.
        """
        groups = group_ids_of(group_ids, "delete_consumer_groups()")
        if not groups:
            return {}
        _, deadline = self._deadline_ms(timeout)
        result = yield from self._run("delete_consumer_groups()", DeleteGroupsApi(groups), deadline)
        return {g: result.failed.get(g) for g in groups}

    @blocking
    def remove_members_from_consumer_group(
        self,
        group_id: str,
        members: Iterable[MemberToRemove | str] | None = None,
        *,
        reason: str | None = None,
        timeout: float | None = None,
    ) -> Steps[list[MemberToRemove]]:
        """Remove members from a consumer group (LeaveGroup v3+ to its coordinator, naming
        them), as Java's ``Admin.removeMembersFromConsumerGroup``: the group rebalances at once
        instead of waiting for their sessions to expire. The use case is a static member
        (``group.instance.id``) whose process is gone: a static member leaves no LeaveGroup
        behind when it stops. A member that is still running rejoins on its next heartbeat.

        Args:
            group_id: the group.
            members: :class:`~kaflux.admin.group_members.MemberToRemove` values, or
                ``group.instance.id`` strings; None removes every member (found with
                DescribeGroups first, as Java does).
            reason: appended to the reason the coordinator records (KIP-800, LeaveGroup v5):
                ``member was removed by an admin``.
            timeout: seconds for the whole call; None: ``default.api.timeout.ms``.

        Returns:
            The members removed, in the order given (none when ``members`` is None and the
            group has no members).

        Raises:
            InvalidArgumentError: a bad group id or member, or an empty ``members``.
            UnknownMemberIdError: the group has no such member (the message names it; the other
                members given were removed, as a note on the error lists).
            FencedInstanceIdError: the member id given with a group.instance.id is not the
                member that holds that instance id now.
            UnsupportedVersionError: the coordinator lacks LeaveGroup v3 (or, for
                ``members=None``, DescribeGroups).
            BrokerError: the coordinator refused (e.g. ``GroupAuthorizationFailedError``).
            KafkaTimeoutError: not answered in time.
        """
        what = "remove_members_from_consumer_group()"
        _check_group_id(group_id, what)
        wanted = None if members is None else members_of(members, what)
        text = leave_reason(reason)
        _, deadline = self._deadline_ms(timeout)
        if wanted is None:
            described = (yield from self._run(what, DescribeGroupsApi([group_id]), deadline)).values()
            wanted = [MemberToRemove(m.group_instance_id, m.member_id) for m in described[group_id].members]
            if not wanted:
                return []
        api = RemoveMembersApi(group_id, wanted, text)
        answered = (yield from self._run(what, api, deadline)).values()[group_id]
        results = member_errors(group_id, wanted, answered)
        removed = [m for m, error in results.items() if error is None]
        for error in results.values():
            if error is not None:
                if removed:
                    error.add_note(f"removed from group {group_id!r}: " + ", ".join(map(str, removed)))
                raise error
        return removed

    @blocking
    def list_consumer_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        timeout: float | None = None,
    ) -> Steps[dict[TopicPartition, OffsetAndMetadata]]:
        """The offsets a group committed (OffsetFetch to its coordinator), for ``partitions``
        or, when None, for every partition it committed. Partitions without a committed offset
        are left out; the result is sorted by partition.

        Raises:
            InvalidArgumentError: a bad group id or partition.
            BrokerError: the coordinator refused (e.g. ``GroupAuthorizationFailedError``).
            KafkaTimeoutError: not answered in time.
        """
        what = "list_consumer_group_offsets()"
        _check_group_id(group_id, what)
        wanted = None if partitions is None else partitions_of(partitions, what)
        if wanted == []:
            return {}
        _, deadline = self._deadline_ms(timeout)
        result = yield from self._run(what, OffsetFetchApi(group_id, wanted), deadline)
        offsets: dict[TopicPartition, OffsetAndMetadata] = result.values()[group_id]
        return offsets

    @blocking
    def alter_consumer_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
        timeout: float | None = None,
    ) -> Steps[None]:
        """Set a group's committed offsets (OffsetCommit to its coordinator, as an admin: no
        member id, generation -1). An int is an offset without metadata. Kafka accepts this
        only while the group has no active members: stop its consumers first.

        Raises:
            InvalidArgumentError: a bad group id, partition or offset (it must be >= 0).
            UnknownMemberIdError: the group has active members (Kafka's answer; or another
                error of that family, such as ``RebalanceInProgressError``).
            BrokerError: the coordinator refused otherwise (the message names the partition).
            KafkaTimeoutError: not answered in time.
        """
        what = "alter_consumer_group_offsets()"
        _check_group_id(group_id, what)
        checked: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, value in zip(partitions_of(offsets, what), offsets.values(), strict=True):
            offset = value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(value)
            if isinstance(offset.offset, bool) or not isinstance(offset.offset, int) or offset.offset < 0:
                raise InvalidArgumentError(f"{what}: the offset of {tp} must be an int >= 0, got {value!r}")
            checked[tp] = offset
        if not checked:
            return
        _, deadline = self._deadline_ms(timeout)
        (yield from self._run(what, OffsetCommitApi(group_id, checked), deadline)).values()

    @blocking
    def delete_consumer_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition], timeout: float | None = None
    ) -> Steps[dict[TopicPartition, KafkaError | None]]:
        """Delete a group's committed offsets for ``partitions`` (OffsetDelete to its
        coordinator). Returns, per partition, None when deleted, else the error: Kafka refuses
        a partition the group's members are subscribed to (``GroupSubscribedToTopicError``).

        Raises:
            InvalidArgumentError: a bad group id or partition.
            GroupIdNotFoundError: the group does not exist.
            UnsupportedVersionError: the coordinator does not implement OffsetDelete.
            KafkaTimeoutError: not answered in time.
        """
        what = "delete_consumer_group_offsets()"
        _check_group_id(group_id, what)
        wanted = partitions_of(partitions, what)
        if not wanted:
            return {}
        _, deadline = self._deadline_ms(timeout)
        result: dict[TopicPartition, KafkaError | None] = (
            yield from self._run(what, OffsetDeleteApi(group_id, wanted), deadline)
        ).values()[group_id]
        return result
