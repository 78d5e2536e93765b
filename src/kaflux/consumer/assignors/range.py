"""The range assignor ("range"), matching Java's ``RangeAssignor``. [pure]

Per topic, the members subscribed to it are sorted (static members by ``group.instance.id`` first,
then the others by member id) and each takes a contiguous range of partitions: with ``n`` partitions
and ``m`` members, every member gets ``n // m`` and the first ``n % m`` members one more. Because
the ranges are computed per topic, the first members get the extra partition of every topic.
Rack-aware assignment (KIP-881) is not implemented: the result is the one Java computes when no
member sends a rack.
"""

from __future__ import annotations

from collections.abc import Mapping

from kaflux.consumer.assignors.base import (
    GroupMember,
    PartitionAssignor,
    RebalanceProtocol,
    member_order_key,
    sorted_partitions,
)
from kaflux.consumer.assignors.consumer_protocol import Assignment
from kaflux.structs import TopicPartition

__all__ = ["RangeAssignor"]


class RangeAssignor(PartitionAssignor):
    """Contiguous partition ranges per topic; Java's default together with cooperative-sticky."""

    name = "range"
    supported_protocols = (RebalanceProtocol.EAGER,)

    def assign(
        self, partitions_per_topic: Mapping[str, int], members: Mapping[str, GroupMember]
    ) -> dict[str, Assignment]:
        members_per_topic: dict[str, list[str]] = {}
        for member_id, member in members.items():
            for topic in dict.fromkeys(member.subscription.topics):
                members_per_topic.setdefault(topic, []).append(member_id)

        assigned: dict[str, list[TopicPartition]] = {member_id: [] for member_id in members}
        for topic, subscribers in members_per_topic.items():
            num_partitions = partitions_per_topic.get(topic, 0)
            if num_partitions <= 0:
                continue
            subscribers.sort(key=lambda member_id: member_order_key(members[member_id]))
            per_member, with_extra = divmod(num_partitions, len(subscribers))
            for i, member_id in enumerate(subscribers):
                start = per_member * i + min(i, with_extra)
                length = per_member + (1 if i < with_extra else 0)
                assigned[member_id].extend(TopicPartition(topic, p) for p in range(start, start + length))
        return {member_id: Assignment(sorted_partitions(parts)) for member_id, parts in assigned.items()}
