"""The admin client's consumer-group calls: list, describe and delete groups, read and alter
their committed offsets. [app: public methods of ``AdminClient``, which mixes this class in]

Each method checks its arguments, hands an :class:`~kaflux.admin.operation.AdminOperation` to the
network thread through ``AdminClient._run`` and turns the answer into results.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import TypeVar

from kaflux.admin.group_describe import DescribeGroupsApi
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
