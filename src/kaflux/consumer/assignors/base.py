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
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import ClassVar

from kaflux.consumer.assignors.consumer_protocol import Assignment, Subscription
from kaflux.structs import TopicPartition

__all__ = [
    "GroupMember",
    "PartitionAssignor",
    "RebalanceProtocol",
    "java_string_key",
    "member_order_key",
]


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
        self, partitions_per_topic: Mapping[str, int], members: Mapping[str, GroupMember]
    ) -> dict[str, Assignment]:
        """Assign the partitions of the subscribed topics to ``members`` (keyed by member id).

        ``partitions_per_topic`` gives the partition count of each subscribed topic known to the
        cluster metadata; subscribed topics missing from it are skipped. The result has an entry
        for every member id, an empty :class:`Assignment` for members that get nothing.
        """

    def on_assignment(self, assignment: Assignment, generation: int) -> None:  # noqa: B027
        """Called on every member with the assignment it received in ``generation``. No-op by default."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def sorted_partitions(partitions: Collection[TopicPartition]) -> tuple[TopicPartition, ...]:
    """``partitions`` ordered by topic (Java string order), then partition number."""
    return tuple(sorted(partitions, key=lambda tp: (java_string_key(tp.topic), tp.partition)))
