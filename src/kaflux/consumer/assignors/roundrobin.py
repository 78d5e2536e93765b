"""The round-robin assignor ("roundrobin"), matching Java's ``RoundRobinAssignor``. [pure]

All partitions of all subscribed topics, sorted by topic and partition, are dealt out one by one to
the members in sorted order (static members by ``group.instance.id`` first, then the others by member
id), cycling through the members and skipping any member not subscribed to the partition's topic.
With identical subscriptions the counts differ by at most one.
"""

from __future__ import annotations

from collections.abc import Mapping

from kaflux.consumer.assignors.base import (
    GroupMember,
    PartitionAssignor,
    PartitionRacks,
    RebalanceProtocol,
    java_string_key,
    member_order_key,
    sorted_partitions,
)
from kaflux.consumer.assignors.consumer_protocol import Assignment
from kaflux.structs import TopicPartition

__all__ = ["RoundRobinAssignor"]


class RoundRobinAssignor(PartitionAssignor):
    """Deals all partitions round-robin across the sorted members."""

    name = "roundrobin"
    supported_protocols = (RebalanceProtocol.EAGER,)

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        members: Mapping[str, GroupMember],
        partition_racks: PartitionRacks | None = None,
    ) -> dict[str, Assignment]:
        """The round-robin assignment; ``partition_racks`` is ignored (Java's ``RoundRobinAssignor``
        is not rack-aware)."""
        ring = sorted(members, key=lambda member_id: member_order_key(members[member_id]))
        subscribed = [frozenset(members[member_id].subscription.topics) for member_id in ring]
        assigned: dict[str, list[TopicPartition]] = {member_id: [] for member_id in members}
        all_topics = sorted({t for topics in subscribed for t in topics}, key=java_string_key)

        position = 0  # the member the ring points at
        for topic in all_topics:
            num_partitions = partitions_per_topic.get(topic, 0)
            for partition in range(num_partitions):
                # Some member is subscribed to every topic here, so this finds one within a lap.
                while topic not in subscribed[position]:
                    position = (position + 1) % len(ring)
                assigned[ring[position]].append(TopicPartition(topic, partition))
                position = (position + 1) % len(ring)
        return {member_id: Assignment(sorted_partitions(parts)) for member_id, parts in assigned.items()}
