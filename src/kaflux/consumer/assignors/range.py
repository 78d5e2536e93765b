"""The range assignor ("range"), matching Java's ``RangeAssignor``. [pure]

Per topic, the members subscribed to it are sorted (static members by ``group.instance.id`` first,
then the others by member id) and each takes a contiguous range of partitions: with ``n`` partitions
and ``m`` members, every member gets ``n // m`` and the first ``n % m`` members one more. Because
the ranges are computed per topic, the first members get the extra partition of every topic.

Rack-aware assignment (KIP-881), as Java's: when members send their ``client.rack`` and
``partition_racks`` gives the racks of each partition's replicas, a topic whose members' racks
match some replica racks (and whose partitions are not all on every rack) is assigned in two
passes: first each member, in order, takes the unassigned partitions with a replica in its rack
(up to its share), then the usual ranges fill the shares from what is left. Topics with the same
members and partition count are kept co-partitioned: partition ``p`` of all of them goes to one
member whose rack has a replica of each. Without racks the result is the plain range one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kaflux.consumer.assignors.base import (
    GroupMember,
    PartitionAssignor,
    PartitionRacks,
    RebalanceProtocol,
    member_order_key,
    sorted_partitions,
    use_rack_aware_assignment,
)
from kaflux.consumer.assignors.consumer_protocol import Assignment
from kaflux.structs import TopicPartition

__all__ = ["RangeAssignor", "use_rack_aware_assignment"]


class _TopicState:
    """One topic's assignment in progress: its members in order with their counts, its
    unassigned partitions in order, and the shares (Java's ``TopicAssignmentState``)."""

    def __init__(
        self,
        topic: str,
        num_partitions: int,
        consumers: list[str],
        member_racks: Mapping[str, str],
        partition_racks: Mapping[TopicPartition, frozenset[str]],
    ) -> None:
        self.topic = topic
        self.consumers = dict.fromkeys(consumers, 0)
        self.unassigned = [TopicPartition(topic, p) for p in range(num_partitions)]
        self.member_racks = {c: member_racks[c] for c in consumers if c in member_racks}
        self.partition_racks = {tp: partition_racks.get(tp, frozenset()) for tp in self.unassigned}
        self.rack_aware = use_rack_aware_assignment(set(self.member_racks.values()), self.partition_racks)
        self.per_consumer, self.with_extra = divmod(num_partitions, len(consumers))

    def racks_match(self, consumer: str, tp: TopicPartition) -> bool:
        rack = self.member_racks.get(consumer)
        return rack is None or rack in self.partition_racks.get(tp, frozenset())

    def max_assignable(self, consumer: str) -> int:
        extra = 1 if self.with_extra > 0 else 0
        return max(0, self.per_consumer + extra - self.consumers[consumer])

    def assign(
        self, consumer: str, partitions: list[TopicPartition], out: dict[str, list[TopicPartition]]
    ) -> None:
        self.consumers[consumer] += len(partitions)
        if self.consumers[consumer] > self.per_consumer:
            self.with_extra -= 1
        taken = set(partitions)
        self.unassigned = [tp for tp in self.unassigned if tp not in taken]
        out[consumer].extend(partitions)

    def assign_ranges(
        self, may_assign: Callable[[str, TopicPartition], bool], out: dict[str, list[TopicPartition]]
    ) -> None:
        for consumer in self.consumers:
            if not self.unassigned:
                return
            limit = self.max_assignable(consumer)
            chosen = [tp for tp in self.unassigned if may_assign(consumer, tp)][:limit]
            if chosen:
                self.assign(consumer, chosen, out)


class RangeAssignor(PartitionAssignor):
    """Contiguous partition ranges per topic; Java's default together with cooperative-sticky."""

    name = "range"
    supported_protocols = (RebalanceProtocol.EAGER,)

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        members: Mapping[str, GroupMember],
        partition_racks: PartitionRacks | None = None,
    ) -> dict[str, Assignment]:
        """The range assignment; ``partition_racks`` (the racks of each partition's replicas,
        from the cluster metadata) makes it rack-aware (KIP-881) where members sent racks."""
        members_per_topic: dict[str, list[str]] = {}
        for member_id, member in members.items():
            for topic in dict.fromkeys(member.subscription.topics):
                members_per_topic.setdefault(topic, []).append(member_id)
        member_racks = {
            m: member.subscription.rack_id for m, member in members.items() if member.subscription.rack_id
        }
        states: list[_TopicState] = []
        for topic, subscribers in members_per_topic.items():
            num_partitions = partitions_per_topic.get(topic, 0)
            if num_partitions <= 0:
                continue
            subscribers.sort(key=lambda member_id: member_order_key(members[member_id]))
            states.append(
                _TopicState(topic, num_partitions, subscribers, member_racks, partition_racks or {})
            )

        assigned: dict[str, list[TopicPartition]] = {member_id: [] for member_id in members}
        rack_aware = any(s.rack_aware for s in states)
        if rack_aware:
            self._assign_with_rack_matching(states, assigned)
        for state in states:
            state.assign_ranges(lambda c, tp: True, assigned)
        if rack_aware:
            for state in states:  # a safety net, as Java's: what the shares left, round-robin
                for tp in list(state.unassigned):
                    consumer = next((c for c in state.consumers if state.max_assignable(c) > 0), None)
                    state.assign(consumer or next(iter(state.consumers)), [tp], assigned)
        return {member_id: Assignment(sorted_partitions(parts)) for member_id, parts in assigned.items()}

    @staticmethod
    def _assign_with_rack_matching(states: list[_TopicState], out: dict[str, list[TopicPartition]]) -> None:
        groups: dict[tuple[tuple[str, ...], int], list[_TopicState]] = {}
        for state in states:
            groups.setdefault((tuple(state.consumers), len(state.partition_racks)), []).append(state)
        for (consumers, num_partitions), group in groups.items():
            if len(group) == 1:
                if group[0].rack_aware:
                    group[0].assign_ranges(group[0].racks_match, out)
                continue
            remaining = list(consumers)
            for p in range(num_partitions):
                match = next(
                    (
                        c
                        for c in remaining
                        if all(
                            s.racks_match(c, TopicPartition(s.topic, p)) and s.max_assignable(c) > 0
                            for s in group
                        )
                    ),
                    None,
                )
                if match is None:
                    continue
                for s in group:
                    s.assign(match, [TopicPartition(s.topic, p)], out)
                if not any(s.max_assignable(match) > 0 for s in group):
                    remaining.remove(match)
                    if not remaining:
                        break
