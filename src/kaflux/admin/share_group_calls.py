"""The admin client's calls for groups of every type (KIP-1043) and for share groups (KIP-932):
list groups, describe and delete share groups, read, alter and delete their start offsets.
[app: public methods of ``AdminClient``, which mixes this class in]

Each method checks its arguments, hands an :class:`~kaflux.admin.operation.AdminOperation` to the
network thread through ``AdminClient._run`` and turns the answer into results.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import TypeVar

from kaflux.admin.group_calls import check_group_id, group_ids_of, partitions_of
from kaflux.admin.groups import DeleteGroupsApi, ListAllGroupsApi
from kaflux.admin.operation import AdminApi, AdminResult
from kaflux.admin.results import GroupListing
from kaflux.admin.share_groups import (
    AlterShareGroupOffsetsApi,
    DeleteShareGroupOffsetsApi,
    DescribeShareGroupOffsetsApi,
    ShareGroupDescribeApi,
    ShareGroupDescription,
    SharePartitionOffsetInfo,
)
from kaflux.blocking import Steps, blocking
from kaflux.errors import InvalidArgumentError, KafkaError
from kaflux.structs import TopicPartition

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

#: the group types Kafka 4.x knows (ListGroups v5's types filter), as Java's ``GroupType``
GROUP_TYPES = ("classic", "consumer", "share", "streams")


def _names_of(values: Iterable[str] | None, what: str, kind: str) -> list[str]:
    if values is None:
        return []
    if isinstance(values, (str, bytes)):
        raise InvalidArgumentError(f"{what} takes an iterable of {kind}, not one string: wrap it in a list")
    checked = list(dict.fromkeys(values))
    for value in checked:
        if not isinstance(value, str) or not value:
            raise InvalidArgumentError(
                f"{what}: each of the {kind} must be a non-empty string, got {value!r}"
            )
    return checked


class ShareGroupCalls:
    """Methods of :class:`~kaflux.admin.client.AdminClient` for groups of every type and share groups."""

    def _run(self, what: str, api: AdminApi[K, V], deadline_ms: int) -> Steps[AdminResult[K, V]]:
        raise NotImplementedError  # AdminClient runs it on its network thread

    def _deadline_ms(self, timeout: float | None) -> tuple[float, int]:
        raise NotImplementedError  # AdminClient: (seconds, deadline in monotonic ms)

    @blocking
    def list_groups(
        self,
        *,
        types: Iterable[str] | None = None,
        states: Iterable[str] | None = None,
        timeout: float | None = None,
    ) -> Steps[list[GroupListing]]:
        """Every group of the cluster, of every type (consumer, classic, share, streams,
        Connect's...), sorted by group id, as Java's ``Admin.listGroups`` (KIP-1043): ListGroups
        to every broker. Each :class:`~kaflux.admin.results.GroupListing` names the group's type
        and protocol.

        Args:
            types: only groups of these types (``"classic"``, ``"consumer"``, ``"share"``,
                ``"streams"``; case does not matter); None: all. Needs ListGroups v5 (Kafka 4.0).
            states: only groups in these states (``"Stable"``, ``"Empty"``...; case does not
                matter); None: all. Needs ListGroups v4.
            timeout: seconds for the whole call; None: ``default.api.timeout.ms``.

        Raises:
            InvalidArgumentError: a type Kafka does not know, or a filter that is one string.
            UnsupportedVersionError: a filter the broker cannot apply.
            BrokerError: a broker refused (e.g. ``ClusterAuthorizationFailedError``).
            KafkaTimeoutError: some broker did not answer in time (the message names it).
        """
        what = "list_groups()"
        wanted_types = [t.lower() for t in _names_of(types, what, "types")]
        for t in wanted_types:
            if t not in GROUP_TYPES:
                known = ", ".join(GROUP_TYPES)
                raise InvalidArgumentError(f"{what}: unknown group type {t!r}: use one of {known}")
        wanted_states = _names_of(states, what, "states")
        _, deadline = self._deadline_ms(timeout)
        result = yield from self._run(what, ListAllGroupsApi(wanted_types, wanted_states), deadline)
        listings: dict[str, GroupListing] = {}
        for _, groups in sorted(result.values().items()):
            for listing in groups:
                listings.setdefault(listing.group_id, listing)
        return [listings[g] for g in sorted(listings)]

    @blocking
    def describe_share_groups(
        self, group_ids: Iterable[str], timeout: float | None = None
    ) -> Steps[dict[str, ShareGroupDescription]]:
        """Describe share groups (ShareGroupDescribe to each group's coordinator), as Java's
        ``Admin.describeShareGroups``: state, epochs, coordinator and each member with its rack
        and assigned partitions.

        Raises:
            InvalidArgumentError: a group id is not a non-empty string.
            GroupIdNotFoundError: a group does not exist, or is not a share group.
            UnsupportedVersionError: the coordinator has no share groups (before Kafka 4.1).
            BrokerError: a coordinator refused (e.g. ``GroupAuthorizationFailedError``).
            KafkaTimeoutError: not answered in time.
        """
        what = "describe_share_groups()"
        groups = group_ids_of(group_ids, what)
        if not groups:
            return {}
        _, deadline = self._deadline_ms(timeout)
        described = (yield from self._run(what, ShareGroupDescribeApi(groups), deadline)).values()
        return {g: described[g] for g in groups}

    @blocking
    def delete_share_groups(
        self, group_ids: Iterable[str], timeout: float | None = None
    ) -> Steps[dict[str, KafkaError | None]]:
        """Delete share groups with their state (DeleteGroups to each group's coordinator), as
        Java's ``Admin.deleteShareGroups``. Returns, per group, None when it was deleted, else
        the error: e.g. ``NonEmptyGroupError`` (it has members), ``GroupIdNotFoundError``.

        Raises:
            InvalidArgumentError: a group id is not a non-empty string.
        """
        what = "delete_share_groups()"
        groups = group_ids_of(group_ids, what)
        if not groups:
            return {}
        _, deadline = self._deadline_ms(timeout)
        result = yield from self._run(what, DeleteGroupsApi(groups), deadline)
        return {g: result.failed.get(g) for g in groups}

    @blocking
    def list_share_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        timeout: float | None = None,
    ) -> Steps[dict[TopicPartition, SharePartitionOffsetInfo]]:
        """Where a share group is in each partition (DescribeShareGroupOffsets to its
        coordinator), as Java's ``Admin.listShareGroupOffsets``: the start offset, leader epoch
        and lag (KIP-1226) of ``partitions`` or, when None, of every partition the group has
        read. Partitions the group has not started reading are left out; sorted by partition.

        Raises:
            InvalidArgumentError: a bad group id or partition.
            GroupIdNotFoundError: the group does not exist, or is not a share group.
            BrokerError: the coordinator refused (e.g. ``GroupAuthorizationFailedError``).
            KafkaTimeoutError: not answered in time.
        """
        what = "list_share_group_offsets()"
        check_group_id(group_id, what)
        wanted = None if partitions is None else partitions_of(partitions, what)
        if wanted == []:
            return {}
        _, deadline = self._deadline_ms(timeout)
        result = yield from self._run(what, DescribeShareGroupOffsetsApi(group_id, wanted), deadline)
        offsets: dict[TopicPartition, SharePartitionOffsetInfo] = result.values()[group_id]
        return offsets

    @blocking
    def alter_share_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, int], timeout: float | None = None
    ) -> Steps[None]:
        """Set a share group's start offsets (AlterShareGroupOffsets to its coordinator), as
        Java's ``Admin.alterShareGroupOffsets``: its members then read each partition from
        there. Kafka accepts this only while the group has no members.

        Raises:
            InvalidArgumentError: a bad group id, partition or offset (it must be an int >= 0).
            NonEmptyGroupError: the group has members: close its share consumers first.
            BrokerError: the coordinator refused a partition (the message names it).
            KafkaTimeoutError: not answered in time.
        """
        what = "alter_share_group_offsets()"
        check_group_id(group_id, what)
        checked: dict[TopicPartition, int] = {}
        for tp, offset in zip(partitions_of(offsets, what), offsets.values(), strict=True):
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
                raise InvalidArgumentError(f"{what}: the offset of {tp} must be an int >= 0, got {offset!r}")
            checked[tp] = offset
        if not checked:
            return
        _, deadline = self._deadline_ms(timeout)
        api = AlterShareGroupOffsetsApi(group_id, checked)
        results = (yield from self._run(what, api, deadline)).values()
        for error in results[group_id].values():
            if error is not None:
                raise error

    @blocking
    def delete_share_group_offsets(
        self, group_id: str, topics: Iterable[str], timeout: float | None = None
    ) -> Steps[dict[str, KafkaError | None]]:
        """Delete where a share group is in ``topics`` (DeleteShareGroupOffsets to its
        coordinator), as Java's ``Admin.deleteShareGroupOffsets``: the group starts them afresh
        (at ``share.auto.offset.reset``) when it reads them again. Returns, per topic, None when
        deleted, else the error. Kafka accepts this only while the group has no members.

        Raises:
            InvalidArgumentError: a bad group id or topic.
            NonEmptyGroupError: the group has members: close its share consumers first.
            GroupIdNotFoundError: the group does not exist, or is not a share group.
            KafkaTimeoutError: not answered in time.
        """
        what = "delete_share_group_offsets()"
        check_group_id(group_id, what)
        wanted = _names_of(topics, what, "topics")
        if not wanted:
            return {}
        _, deadline = self._deadline_ms(timeout)
        result = yield from self._run(what, DeleteShareGroupOffsetsApi(group_id, wanted), deadline)
        deleted: dict[str, KafkaError | None] = result.values()[group_id]
        return {t: deleted.get(t) for t in wanted}
