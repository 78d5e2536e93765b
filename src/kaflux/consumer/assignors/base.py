"""The partition assignor interface of the classic consumer group protocol. [pure]

The group leader runs an assignor over every member's :class:`Subscription` and the partition counts
of the subscribed topics; each member then receives its :class:`Assignment` through SyncGroup. The
assignor is chosen by name: the broker picks the first name in the leader's
``partition.assignment.strategy`` list that every member supports, so names must be exactly what
Java and librdkafka send ("range", "roundrobin", "sticky", "cooperative-sticky").
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import ClassVar

from kaflux.consumer.assignors.consumer_protocol import Assignment, Subscription
from kaflux.structs import Node, PartitionInfo, TopicPartition

__all__ = [
    "GroupMember",
    "PartitionAssignor",
    "PartitionRacks",
    "RebalanceProtocol",
    "java_string_key",
    "member_order_key",
    "partition_racks",
    "use_rack_aware_assignment",
]

PartitionRacks = Mapping[TopicPartition, frozenset[str]]
"""The racks of each partition's replicas (KIP-881), from the cluster metadata; partitions whose
replicas have no rack may be missing."""


class RebalanceProtocol(enum.IntEnum):
    """How a group hands partitions over during a rebalance (KIP-429).

    EAGER: every member revokes all its partitions before rejoining. COOPERATIVE: members keep their
    partitions while rejoining and revoke only those the new assignment takes away; a partition that
    changes owner is handed over in a second rebalance. Ordered: COOPERATIVE > EAGER, with Java's ids.
    """

    EAGER = 0
    COOPERATIVE = 1


@dataclass(frozen=True, slots=True)
class GroupMember:
    """A member of the group as the leader sees it in the JoinGroup response.

    ``group_instance_id`` is the ``group.instance.id`` of a static member (KIP-345), None for a
    dynamic one.
    """

    member_id: str
    group_instance_id: str | None
    subscription: Subscription


def java_string_key(s: str) -> bytes:
    """A sort key that orders strings as Java's ``String.compareTo`` does (by UTF-16 code unit).

    Python orders by code point; the two differ for characters above U+FFFF against those in
    U+E000..U+FFFF. Assignors that must match Java's results exactly sort with this key.
    """
    return s.encode("utf-16-be", "surrogatepass")


def member_order_key(member: GroupMember) -> tuple[int, bytes]:
    """The order Java's assignors sort members in: static members first, by ``group.instance.id``,
    then dynamic members by member id (``AbstractPartitionAssignor.MemberInfo``)."""
    if member.group_instance_id is not None:
        return (0, java_string_key(member.group_instance_id))
    return (1, java_string_key(member.member_id))


class PartitionAssignor(ABC):
    """Computes the group's assignment on the leader. Subclasses set :attr:`name`.

    Assignors are pure: no I/O and no clock. Stateful ones (the eager sticky assignor) keep what
    :meth:`on_assignment` tells them, so one instance belongs to one consumer.
    """

    name: ClassVar[str]
    """The protocol name sent in JoinGroup; members interoperate when they use the same name."""

    supported_protocols: ClassVar[tuple[RebalanceProtocol, ...]] = (RebalanceProtocol.EAGER,)
    """The rebalance protocols this assignor is correct under."""

    def subscription_user_data(
        self, topics: Collection[str], owned: Collection[TopicPartition], generation: int
    ) -> bytes | None:
        """The ``user_data`` of this member's :class:`Subscription` for this assignor.

        ``topics`` is the subscription, ``owned`` the partitions the member holds at the time of the
        join and ``generation`` the generation they were assigned in (-1 when none). The default
        sends no user data.
        """
        return None

    @abstractmethod
    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        members: Mapping[str, GroupMember],
        partition_racks: PartitionRacks | None = None,
    ) -> dict[str, Assignment]:
        """Assign the partitions of the subscribed topics to ``members`` (keyed by member id).

        ``partitions_per_topic`` gives the partition count of each subscribed topic known to the
        cluster metadata; subscribed topics missing from it are skipped. ``partition_racks`` gives
        the racks of each partition's replicas (see :func:`partition_racks`): rack-aware assignors
        (KIP-881) prefer giving a member whose subscription has a ``rack_id`` partitions with a
        replica in that rack; the others ignore it. The result has an entry for every member id,
        an empty :class:`Assignment` for members that get nothing.
        """

    def on_assignment(self, assignment: Assignment, generation: int) -> None:  # noqa: B027
        """Called on every member with the assignment it received in ``generation``. No-op by default."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def sorted_partitions(partitions: Collection[TopicPartition]) -> tuple[TopicPartition, ...]:
    """``partitions`` ordered by topic (Java string order), then partition number."""
    return tuple(sorted(partitions, key=lambda tp: (java_string_key(tp.topic), tp.partition)))


def partition_racks(
    partitions: Iterable[PartitionInfo], brokers: Mapping[int, Node]
) -> dict[TopicPartition, frozenset[str]]:
    """The racks of the replicas of each of ``partitions``, from the metadata's brokers (a snapshot:
    ``brokers`` maps node ids to nodes). Replicas on brokers that are unknown or have no rack are
    left out, and so are partitions with no rack at all."""
    out: dict[TopicPartition, frozenset[str]] = {}
    for info in partitions:
        racks = frozenset(
            rack
            for node_id in info.replicas
            if (node := brokers.get(node_id)) is not None and (rack := node.rack)
        )
        if racks:
            out[TopicPartition(info.topic, info.partition)] = racks
    return out


def use_rack_aware_assignment(member_racks: Collection[str], partition_racks: PartitionRacks) -> bool:
    """Java's ``AbstractPartitionAssignor.useRackAwareAssignment``: some member's rack holds a
    replica, and the partitions are not all replicated on the same racks (when every partition
    is on every rack, any assignment is rack-local)."""
    all_racks = frozenset().union(*partition_racks.values()) if partition_racks else frozenset()
    if not member_racks or not all_racks.intersection(member_racks):
        return False
    return not all(racks == all_racks for racks in partition_racks.values())
