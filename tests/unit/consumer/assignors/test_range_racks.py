"""Rack-aware range assignment (KIP-881), against Java's ``RangeAssignor`` behaviour: members
send their rack, the partitions' replica racks come from the metadata. [test]"""

from __future__ import annotations

from kaflux.consumer.assignors.base import GroupMember
from kaflux.consumer.assignors.consumer_protocol import Assignment, Subscription
from kaflux.consumer.assignors.range import RangeAssignor, use_rack_aware_assignment
from kaflux.structs import TopicPartition


def member(member_id: str, rack: str | None, *topics: str) -> GroupMember:
    return GroupMember(member_id, None, Subscription(tuple(topics), rack_id=rack))


def racks(topic: str, *per_partition: str) -> dict[TopicPartition, frozenset[str]]:
    """Partition p's replicas are in the racks named by per_partition[p] ("ab": racks a and b)."""
    return {TopicPartition(topic, p): frozenset(r) for p, r in enumerate(per_partition)}


def parts(result: dict[str, Assignment], member_id: str) -> list[tuple[str, int]]:
    return [(tp.topic, tp.partition) for tp in result[member_id].partitions]


def test_each_member_gets_the_partitions_replicated_in_its_rack() -> None:
    members = {"m1": member("m1", "a", "t"), "m2": member("m2", "b", "t"), "m3": member("m3", "c", "t")}
    # without racks m1 would get 0-1, m2 2-3, m3 4-5
    result = RangeAssignor().assign({"t": 6}, members, racks("t", "c", "b", "a", "c", "b", "a"))
    assert parts(result, "m1") == [("t", 2), ("t", 5)]
    assert parts(result, "m2") == [("t", 1), ("t", 4)]
    assert parts(result, "m3") == [("t", 0), ("t", 3)]


def test_shares_are_kept_when_one_rack_holds_more_replicas() -> None:
    members = {"m1": member("m1", "a", "t"), "m2": member("m2", "b", "t")}
    result = RangeAssignor().assign({"t": 4}, members, racks("t", "a", "a", "a", "b"))
    assert parts(result, "m1") == [("t", 0), ("t", 1)]  # its share: 2 of the 3 in rack a
    assert parts(result, "m2") == [("t", 2), ("t", 3)]  # its rack's one, then what is left


def test_without_member_racks_or_with_every_partition_everywhere_it_is_the_plain_range() -> None:
    plain = {"m1": member("m1", None, "t"), "m2": member("m2", None, "t")}
    everywhere = {"m1": member("m1", "a", "t"), "m2": member("m2", "b", "t")}
    for members, partition_racks in (
        (plain, racks("t", "b", "b", "a", "a")),
        (everywhere, racks("t", "ab", "ab", "ab", "ab")),
    ):
        result = RangeAssignor().assign({"t": 4}, members, partition_racks)
        assert parts(result, "m1") == [("t", 0), ("t", 1)]
        assert parts(result, "m2") == [("t", 2), ("t", 3)]
    assert not use_rack_aware_assignment({"a", "b"}, racks("t", "ab", "ab"))
    assert not use_rack_aware_assignment({"x"}, racks("t", "a", "b"))
    assert use_rack_aware_assignment({"a"}, racks("t", "a", "b"))


def test_co_partitioned_topics_stay_co_partitioned() -> None:
    members = {"m1": member("m1", "a", "t", "u"), "m2": member("m2", "b", "t", "u")}
    partition_racks = {**racks("t", "b", "a"), **racks("u", "b", "a")}
    result = RangeAssignor().assign({"t": 2, "u": 2}, members, partition_racks)
    assert parts(result, "m1") == [("t", 1), ("u", 1)]
    assert parts(result, "m2") == [("t", 0), ("u", 0)]


def test_every_partition_is_assigned_once_when_racks_cannot_all_match() -> None:
    members = {m: member(m, "a", "t") for m in ("m1", "m2", "m3")}
    result = RangeAssignor().assign({"t": 5}, members, racks("t", "a", "b", "b", "b", "a"))
    every = sorted(tp for m in members for tp in parts(result, m))
    assert every == [("t", p) for p in range(5)]
    assert sorted(len(parts(result, m)) for m in members) == [1, 2, 2]
