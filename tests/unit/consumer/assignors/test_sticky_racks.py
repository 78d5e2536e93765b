"""Rack-aware sticky and cooperative-sticky assignment (KIP-881): balance first, then rack
locality, then stickiness; without racks the assignment is the one before. [test]"""

from __future__ import annotations

import random

import pytest

from kaflux.consumer.assignors import (
    Assignment,
    CooperativeStickyAssignor,
    GroupMember,
    StickyAssignor,
    Subscription,
)
from kaflux.consumer.assignors.sticky import MemberClaims, sticky_assignment
from kaflux.structs import TopicPartition

from support.assignors_testutil import check_no_improving_path, check_valid


def member(
    member_id: str,
    rack: str | None,
    topics: tuple[str, ...] = ("t",),
    owned: tuple[TopicPartition, ...] = (),
    generation: int = -1,
) -> GroupMember:
    return GroupMember(member_id, None, Subscription(topics, None, tuple(sorted(owned)), generation, rack))


def racks(topic: str, pattern: str) -> dict[TopicPartition, frozenset[str]]:
    """Partition p of ``topic`` has its replicas in the racks named by ``pattern.split()[p]``
    ("ab": racks a and b); a single word of one letter per partition also works."""
    words = pattern.split() if " " in pattern else list(pattern)
    return {TopicPartition(topic, p): frozenset(w) for p, w in enumerate(words)}


def parts(result: dict[str, Assignment], member_id: str) -> set[int]:
    return {tp.partition for tp in result[member_id].partitions}


def t(*partitions: int) -> tuple[TopicPartition, ...]:
    return tuple(TopicPartition("t", p) for p in partitions)


ASSIGNORS = [StickyAssignor, CooperativeStickyAssignor]


@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_each_member_gets_the_partitions_in_its_rack(assignor: type[StickyAssignor]) -> None:
    members = {m: member(m, rack) for m, rack in (("m1", "a"), ("m2", "b"), ("m3", "c"))}
    result = assignor().assign({"t": 6}, members, racks("t", "cbacba"))
    # without racks: m1 0-1, m2 2-3, m3 4-5 (least loaded in member order)
    assert (parts(result, "m1"), parts(result, "m2"), parts(result, "m3")) == ({2, 5}, {1, 4}, {0, 3})


@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_balance_comes_before_racks_when_one_rack_holds_most_replicas(assignor: type[StickyAssignor]) -> None:
    members = {"m1": member("m1", "a"), "m2": member("m2", "b")}
    result = assignor().assign({"t": 4}, members, racks("t", "aaab"))
    assert len(parts(result, "m1")) == len(parts(result, "m2")) == 2
    assert 3 in parts(result, "m2")  # the only partition in rack b goes to the member there
    assert parts(result, "m1") <= {0, 1, 2}


def test_without_racks_on_either_side_the_assignment_is_the_one_before() -> None:
    rng = random.Random(881)
    for _ in range(40):
        counts = {"t": rng.randint(1, 12), "u": rng.randint(1, 12)}
        names = [f"m{i}" for i in range(rng.randint(1, 5))]
        owned: dict[str, list[TopicPartition]] = {m: [] for m in names}
        for topic, count in counts.items():
            for p in range(count):
                if rng.random() < 0.6:
                    owned[rng.choice(names)].append(TopicPartition(topic, p))
        subs = {m: rng.choice([("t",), ("u",), ("t", "u")]) for m in names}
        claims = {m: MemberClaims(tuple(owned[m]), 1) for m in names}
        plain = {m: member(m, None, subs[m]) for m in names}
        racked = {m: member(m, rng.choice("abc"), subs[m]) for m in names}
        partition_racks = {
            TopicPartition(topic, p): frozenset(rng.sample("abc", rng.randint(1, 2)))
            for topic, count in counts.items()
            for p in range(count)
        }
        everywhere = dict.fromkeys(partition_racks, frozenset("abc"))
        before = sticky_assignment(counts, plain, claims)
        assert sticky_assignment(counts, plain, claims, partition_racks) == before  # no member racks
        assert sticky_assignment(counts, racked, claims) == before  # no partition racks
        assert sticky_assignment(counts, racked, claims, everywhere) == before  # every rack has all
        other = {TopicPartition(k.topic, k.partition): frozenset("xy") for k in partition_racks}
        assert sticky_assignment(counts, racked, claims, other) == before  # no rack in common


def test_a_full_match_is_found_whatever_was_owned() -> None:
    """One member per rack and as many partitions in each rack: every partition ends up in its
    member's rack, from any previous ownership, and the result stays balanced."""
    rng = random.Random(4)
    for _ in range(40):
        n = rng.randint(2, 5)
        per_rack = rng.randint(1, 5)
        layout = [r for r in "abcde"[:n] for _ in range(per_rack)]
        rng.shuffle(layout)
        partition_racks = racks("t", "".join(layout))
        names = [f"m{i}" for i in range(n)]
        rack_of = dict(zip(names, "abcde", strict=False))
        owned: dict[str, list[TopicPartition]] = {m: [] for m in names}
        for p in range(len(layout)):
            if rng.random() < 0.7:
                owned[rng.choice(names)].append(TopicPartition("t", p))
        members = {m: member(m, rack_of[m]) for m in names}
        claims = {m: MemberClaims(tuple(owned[m]), 1) for m in names}
        result = sticky_assignment({"t": len(layout)}, members, claims, partition_racks)
        for m, assigned in result.items():
            assert all(rack_of[m] in partition_racks[tp] for tp in assigned), (m, assigned)
            assert len(assigned) == per_rack


def test_random_racks_keep_the_balance_of_the_plain_assignment() -> None:
    rng = random.Random(29)
    for _ in range(60):
        counts = {"t": rng.randint(1, 10), "u": rng.randint(1, 10)}
        names = [f"m{i}" for i in range(rng.randint(1, 6))]
        members = {
            m: member(m, rng.choice(["a", "b", "c", None]), rng.choice([("t",), ("u",), ("t", "u")]))
            for m in names
        }
        partition_racks = {
            TopicPartition(topic, p): frozenset(rng.sample("abc", rng.randint(1, 2)))
            for topic, count in counts.items()
            for p in range(count)
        }
        result = StickyAssignor().assign(counts, members, partition_racks)
        check_valid(counts, members, result)
        check_no_improving_path(members, result)
        plain = StickyAssignor().assign(counts, members)
        assert sorted(len(a.partitions) for a in result.values()) == sorted(
            len(a.partitions) for a in plain.values()
        )


def test_claims_in_their_racks_stay_when_a_member_joins() -> None:
    partition_racks = racks("t", "abcabc")
    first = CooperativeStickyAssignor().assign(
        {"t": 6}, {"m1": member("m1", "a"), "m2": member("m2", "b")}, partition_racks
    )
    assert parts(first, "m1") >= {0, 3} and parts(first, "m2") >= {1, 4}
    owned = {m: first[m].partitions for m in ("m1", "m2")}
    members = {
        "m1": member("m1", "a", owned=owned["m1"], generation=1),
        "m2": member("m2", "b", owned=owned["m2"], generation=1),
        "m3": member("m3", "c"),
    }
    second = CooperativeStickyAssignor().assign({"t": 6}, members, partition_racks)
    # round one: the partitions of rack c are revoked from their owners, nothing else moves
    assert (parts(second, "m1"), parts(second, "m2"), parts(second, "m3")) == ({0, 3}, {1, 4}, set())
    members = {
        "m1": member("m1", "a", owned=t(0, 3), generation=2),
        "m2": member("m2", "b", owned=t(1, 4), generation=2),
        "m3": member("m3", "c", generation=2),
    }
    third = CooperativeStickyAssignor().assign({"t": 6}, members, partition_racks)
    assert (parts(third, "m1"), parts(third, "m2"), parts(third, "m3")) == ({0, 3}, {1, 4}, {2, 5})


def test_claims_outside_their_racks_move_in_two_cooperative_rounds() -> None:
    partition_racks = racks("t", "abab")
    members = {
        "m1": member("m1", "a", owned=t(0, 1), generation=3),  # 1 is in rack b
        "m2": member("m2", "b", owned=t(2, 3), generation=3),  # 2 is in rack a
    }
    first = CooperativeStickyAssignor().assign({"t": 4}, members, partition_racks)
    assert (parts(first, "m1"), parts(first, "m2")) == ({0}, {3})  # 1 and 2 are revoked first
    members = {
        "m1": member("m1", "a", owned=t(0), generation=4),
        "m2": member("m2", "b", owned=t(3), generation=4),
    }
    second = CooperativeStickyAssignor().assign({"t": 4}, members, partition_racks)
    assert (parts(second, "m1"), parts(second, "m2")) == ({0, 2}, {1, 3})


def test_a_claim_outside_its_rack_stays_when_no_member_there_can_take_it() -> None:
    members = {
        "m1": member("m1", "a", owned=t(0, 1), generation=1),
        "m2": member("m2", "b", owned=t(2, 3), generation=1),  # 2 is in rack c, which has no member
    }
    result = CooperativeStickyAssignor().assign({"t": 4}, members, racks("t", "aacb"))
    assert (parts(result, "m1"), parts(result, "m2")) == ({0, 1}, {2, 3})


def test_a_member_of_a_rack_without_replicas_trades_for_the_others_locality() -> None:
    members = {"m1": member("m1", "a"), "m2": member("m2", "c")}  # rack c holds no replica
    claims = {"m1": MemberClaims(t(0, 2), 1), "m2": MemberClaims(t(1, 3), 1)}
    result = sticky_assignment({"t": 4}, members, claims, racks("t", "aabb"))
    assert (set(result["m1"]), set(result["m2"])) == (set(t(0, 1)), set(t(2, 3)))


def test_cooperative_rounds_with_racks_converge_and_then_move_nothing() -> None:
    """Members join and leave a racked group one at a time: each change completes within a few
    cooperative rounds (nothing withheld), every result is balanced, and a rebalance with the
    same members afterwards moves nothing (stickiness)."""
    rng = random.Random(7)
    for _ in range(15):
        counts = {"t": rng.randint(4, 20), "u": rng.randint(4, 20)}
        partition_racks = {
            TopicPartition(topic, p): frozenset(rng.sample("abcd", rng.randint(1, 2)))
            for topic, count in counts.items()
            for p in range(count)
        }
        rack_of: dict[str, str | None] = {}
        owned: dict[str, tuple[TopicPartition, ...]] = {}
        generation = 0
        for step in range(8):
            if len(owned) > 1 and (len(owned) > 4 or rng.random() < 0.3):
                name = rng.choice(sorted(owned))
                del owned[name]
            else:
                name = f"m{step}"
                rack_of[name] = rng.choice(["a", "b", "c", "d", None])
                owned[name] = ()
            for _round in range(5):
                generation += 1
                members = {m: member(m, rack_of[m], ("t", "u"), owned[m], generation - 1) for m in owned}
                result = CooperativeStickyAssignor().assign(counts, members, partition_racks)
                check_valid(counts, members, result, complete=False)
                changed = any(set(result[m].partitions) != set(owned[m]) for m in owned)
                owned = {m: result[m].partitions for m in owned}
                if not changed and sum(len(p) for p in owned.values()) == sum(counts.values()):
                    break
            else:
                raise AssertionError(f"no stable assignment after 5 rounds: {owned}")
            loads = sorted(len(p) for p in owned.values())
            assert loads[-1] - loads[0] <= 1, loads
