"""The sticky assignors: stickiness, generations, user data formats and cooperative two-phase moves."""

from __future__ import annotations

import struct
import warnings
from collections import Counter
from typing import Any

import pytest

from kaflux.consumer.assignors import (
    Assignment,
    CooperativeStickyAssignor,
    GroupMember,
    RebalanceProtocol,
    StickyAssignor,
)
from kaflux.consumer.assignors.sticky import (
    MemberClaims,
    decode_sticky_user_data,
    encode_sticky_user_data,
    sticky_assignment,
)
from kaflux.structs import TopicPartition

from support.assignors_testutil import (
    as_sets,
    check_locally_balanced,
    check_valid,
    loads,
    member,
    min_moves,
    tp,
    tps,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    kp_user_data = pytest.importorskip("kafka.coordinator.assignors.sticky.user_data")
KpStickyUserData: Any = kp_user_data.StickyAssignorUserData


def eager_member(
    member_id: str, topics: list[str], previous: set[TopicPartition] | None, generation: int
) -> GroupMember:
    """A member of an eager sticky group: its previous assignment travels in the user data."""
    data = None if previous is None else encode_sticky_user_data(sorted(previous), generation)
    return member(member_id, topics, user_data=data)


def moved(
    before: dict[str, set[TopicPartition]], after: dict[str, set[TopicPartition]]
) -> set[TopicPartition]:
    """Partitions that some member held before and that now belong to another member."""
    owner = {p: m for m, ps in before.items() for p in ps}
    return {p for m, ps in after.items() for p in ps if p in owner and owner[p] != m}


def run_sticky(counts: dict[str, int], members: dict[str, GroupMember]) -> dict[str, set[TopicPartition]]:
    """The bare sticky assignment with claims read the cooperative way (owned partitions + generation)."""
    claims = {m: CooperativeStickyAssignor.member_claims(x) for m, x in members.items()}
    return {m: set(ps) for m, ps in sticky_assignment(counts, members, claims).items()}


# --- names, protocols, user data ---------------------------------------------------------------------------


def test_names_and_protocols() -> None:
    assert StickyAssignor.name == "sticky"
    assert StickyAssignor.supported_protocols == (RebalanceProtocol.EAGER,)
    assert CooperativeStickyAssignor.name == "cooperative-sticky"
    assert CooperativeStickyAssignor.supported_protocols == (
        RebalanceProtocol.COOPERATIVE,
        RebalanceProtocol.EAGER,
    )


def test_sticky_user_data_matches_kafka_python() -> None:
    partitions = [TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 2)]
    ours = encode_sticky_user_data(partitions, 7)
    assert ours == KpStickyUserData([("a", [0, 1]), ("b", [2])], 7).encode(header=False)
    assert decode_sticky_user_data(ours) == (partitions, 7)


def test_sticky_user_data_v0_and_garbage() -> None:
    v0 = KpStickyUserData([("t", [3])], version=0).encode(header=False)
    assert decode_sticky_user_data(v0) == ([TopicPartition("t", 3)], None)
    assert decode_sticky_user_data(b"\x00\x00\x00\x05garbage") == ([], -1)


def test_eager_sticky_user_data_remembers_the_last_assignment() -> None:
    assignor = StickyAssignor()
    assert assignor.subscription_user_data(["t"], (), -1) is None
    owned = [TopicPartition("t", 1)]
    # Before any assignment, what the member owns is used when there is something.
    assert decode_sticky_user_data(assignor.subscription_user_data(["t"], owned, 4) or b"") == (owned, 4)
    assignor.on_assignment(Assignment((TopicPartition("t", 0), TopicPartition("t", 2))), 9)
    data = assignor.subscription_user_data(["t"], (), -1)
    assert data is not None
    assert decode_sticky_user_data(data) == ([TopicPartition("t", 0), TopicPartition("t", 2)], 9)
    assert StickyAssignor.member_claims(member("m", ["t"], user_data=data)) == MemberClaims(
        (TopicPartition("t", 0), TopicPartition("t", 2)), 9
    )


def test_eager_sticky_ignores_owned_partitions_of_the_subscription() -> None:
    # Java's StickyAssignor reads ownership from the user data only.
    m = member("m", ["t"], owned=[TopicPartition("t", 0)], generation=3)
    assert StickyAssignor.member_claims(m) == MemberClaims()


def test_cooperative_user_data_is_the_generation() -> None:
    assignor = CooperativeStickyAssignor()
    assert assignor.subscription_user_data(["t"], (), 12) == struct.pack(">i", 12)
    assert assignor.subscription_user_data(["t"], (), -1) == b"\xff\xff\xff\xff"
    owned = [TopicPartition("t", 0)]
    # v2+ subscriptions carry the generation; older ones only in the user data.
    assert CooperativeStickyAssignor.member_claims(member("m", ["t"], owned, 5)) == MemberClaims(
        tuple(owned), 5
    )
    from_user_data = member("m", ["t"], owned, -1, user_data=struct.pack(">i", 8))
    assert CooperativeStickyAssignor.member_claims(from_user_data) == MemberClaims(tuple(owned), 8)
    assert (
        CooperativeStickyAssignor.member_claims(member("m", ["t"], owned, user_data=b"\x01")).generation == -1
    )


# --- the sticky assignment ----------------------------------------------------------------------------------


def test_java_sticky_example_member_leaves() -> None:
    # StickyAssignor javadoc: C0, C1, C2 and t0..t3 with two partitions each; then C1 leaves.
    previous = {
        "C0": tps("t0p0", "t1p1", "t3p0"),
        "C1": tps("t0p1", "t2p0", "t3p1"),
        "C2": tps("t1p0", "t2p1"),
    }
    topics = ["t0", "t1", "t2", "t3"]
    counts = dict.fromkeys(topics, 2)
    members = {m: eager_member(m, topics, previous[m], 1) for m in ("C0", "C2")}
    result = StickyAssignor().assign(counts, members)
    check_valid(counts, members, result)
    after = as_sets(result)
    assert previous["C0"] <= after["C0"] and previous["C2"] <= after["C2"]
    assert sorted(loads(result)) == [4, 4]


def test_java_sticky_example_with_different_subscriptions() -> None:
    # StickyAssignor javadoc: C0 [t0], C1 [t0, t1], C2 [t0, t1, t2]; t0, t1, t2 have 1, 2, 3 partitions.
    counts = {"t0": 1, "t1": 2, "t2": 3}
    subs = {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}
    members = {m: eager_member(m, subs[m], None, -1) for m in subs}
    first = as_sets(StickyAssignor().assign(counts, members))
    assert first == {"C0": tps("t0p0"), "C1": tps("t1p0", "t1p1"), "C2": tps("t2p0", "t2p1", "t2p2")}
    # C0 leaves: sticky keeps C1 and C2 as they are (round robin would move t1p1 to C2).
    members = {m: eager_member(m, subs[m], first[m], 1) for m in ("C1", "C2")}
    second = as_sets(StickyAssignor().assign(counts, members))
    assert second == {"C1": tps("t1p0", "t1p1", "t0p0"), "C2": tps("t2p0", "t2p1", "t2p2")}


def test_fresh_assignment_is_balanced() -> None:
    members = {f"m{i}": member(f"m{i}", ["a", "b", "c"]) for i in range(4)}
    counts = {"a": 5, "b": 3, "c": 6}
    for assignor in (StickyAssignor(), CooperativeStickyAssignor()):
        result = assignor.assign(counts, members)
        check_valid(counts, members, result)
        assert sorted(loads(result)) == [3, 3, 4, 4]


def test_member_joining_takes_only_what_balance_requires() -> None:
    previous = {
        "A": {TopicPartition("t", p) for p in range(0, 6)},
        "B": {TopicPartition("t", p) for p in range(6, 12)},
    }
    members = {m: member(m, ["t"], previous.get(m, ()), 3) for m in ("A", "B", "C")}
    after = run_sticky({"t": 12}, members)
    assert sorted(len(ps) for ps in after.values()) == [4, 4, 4]
    assert len(moved(previous, after)) == 4
    assert after["A"] <= previous["A"] and after["B"] <= previous["B"]


def test_member_leaving_moves_only_its_partitions() -> None:
    previous = {
        "A": tps("tp0", "tp1", "tp2"),
        "B": tps("tp3", "tp4", "tp5"),
        "C": tps("tp6", "tp7"),
        "D": tps("tp8", "tp9"),
    }
    members = {m: eager_member(m, ["t"], previous[m], 5) for m in ("A", "C", "D")}
    after = as_sets(StickyAssignor().assign({"t": 10}, members))
    for m in ("A", "C", "D"):
        assert previous[m] <= after[m]
    assert sorted(len(ps) for ps in after.values()) == [3, 3, 4]


def test_new_partitions_and_new_topics_go_to_the_least_loaded() -> None:
    previous = {"A": tps("tp0", "tp1"), "B": tps("tp2")}
    members = {m: eager_member(m, ["t", "u"], previous[m], 2) for m in ("A", "B")}
    after = as_sets(StickyAssignor().assign({"t": 4, "u": 2}, members))
    assert previous["A"] <= after["A"] and previous["B"] <= after["B"]
    assert sorted(len(ps) for ps in after.values()) == [3, 3]


def test_owner_that_unsubscribed_loses_the_topic() -> None:
    previous = {"A": tps("tp0", "tp1", "up0"), "B": tps("up1")}
    members = {
        "A": eager_member("A", ["u"], previous["A"], 1),
        "B": eager_member("B", ["t", "u"], previous["B"], 1),
    }
    result = StickyAssignor().assign({"t": 2, "u": 2}, members)
    check_valid({"t": 2, "u": 2}, members, result)
    after = as_sets(result)
    # B must take t (nobody else subscribes to it), so balance hands B's u-1 to A.
    assert after == {"A": tps("up0", "up1"), "B": tps("tp0", "tp1")}


def test_claims_on_vanished_topics_and_partitions_are_ignored() -> None:
    previous = {"A": tps("gonep0", "tp7", "tp0"), "B": set()}
    members = {m: eager_member(m, ["t", "gone"], previous[m], 1) for m in ("A", "B")}
    result = StickyAssignor().assign({"t": 2}, members)
    check_valid({"t": 2}, members, result)
    assert as_sets(result) == {"A": tps("tp0"), "B": tps("tp1")}


def test_higher_generation_wins_a_contested_partition() -> None:
    members = {
        "A": member("A", ["t"], tps("tp0", "tp1"), generation=4),
        "B": member("B", ["t"], tps("tp1", "tp2"), generation=5),
    }
    result = run_sticky({"t": 4}, members)
    # B (generation 5) keeps t-1; the new partition t-3 goes to A, the least loaded.
    assert result == {"A": tps("tp0", "tp3"), "B": tps("tp1", "tp2")}


def test_same_generation_conflict_invalidates_the_claim() -> None:
    members = {
        "A": member("A", ["t"], tps("tp0", "tp1"), generation=5),
        "B": member("B", ["t"], tps("tp1"), generation=5),
        "C": member("C", ["t"], (), generation=5),
    }
    result = run_sticky({"t": 3}, members)
    # Nobody validly owns t-1, so it goes to the least-loaded member: B and C hold nothing else.
    assert result["A"] == tps("tp0")
    assert sorted(len(v) for v in result.values()) == [1, 1, 1]


def test_general_subscriptions_are_locally_balanced() -> None:
    subs = {"A": ["x"], "B": ["x", "y"], "C": ["y", "z"], "D": ["z"]}
    counts = {"x": 7, "y": 2, "z": 5}
    members = {m: member(m, t) for m, t in subs.items()}
    result = StickyAssignor().assign(counts, members)
    check_valid(counts, members, result)
    check_locally_balanced(members, result)


def test_chain_of_moves_reaches_a_member_with_a_narrow_subscription() -> None:
    # m1 can only take t0-0. Moving t0-0 to m1 and a t1 partition to whoever held t0-0 balances the
    # group; single moves alone would leave m1 idle and m2 with two.
    subs = {"m0": ["t0", "t1"], "m1": ["t0"], "m2": ["t0", "t1"], "m3": ["t0", "t1"]}
    previous = {"m2": tps("t0p0", "t1p0", "t1p1", "t1p2")}
    members = {m: eager_member(m, t, previous.get(m), 1) for m, t in subs.items()}
    result = StickyAssignor().assign({"t0": 1, "t1": 3}, members)
    check_valid({"t0": 1, "t1": 3}, members, result)
    assert as_sets(result)["m1"] == tps("t0p0")
    assert loads(result) == [1, 1, 1, 1]
    assert len(as_sets(result)["m2"] & previous["m2"]) == 1


def test_heavily_unbalanced_ownership_rebalances() -> None:
    everything = {TopicPartition(t, p) for t in ("a", "b") for p in range(50)}
    members = {
        f"m{i}": eager_member(f"m{i}", ["a", "b"], everything if i == 0 else set(), 1) for i in range(7)
    }
    result = StickyAssignor().assign({"a": 50, "b": 50}, members)
    check_valid({"a": 50, "b": 50}, members, result)
    assert sorted(loads(result)) == [14, 14, 14, 14, 14, 15, 15]
    assert set(result["m0"].partitions) <= everything


def test_sticky_is_deterministic_and_independent_of_mapping_order() -> None:
    members = {m: member(m, ["a", "b"] if m < "m3" else ["b"]) for m in ("m4", "m1", "m3", "m0", "m2")}
    reordered = dict(sorted(members.items()))
    for assignor in (StickyAssignor(), CooperativeStickyAssignor()):
        assert assignor.assign({"a": 9, "b": 4}, members) == assignor.assign({"a": 9, "b": 4}, reordered)


# --- cooperative two-phase moves -------------------------------------------------------------------------


def test_cooperative_first_round_withholds_moving_partitions() -> None:
    everything = {TopicPartition("t", p) for p in range(6)}
    members = {"A": member("A", ["t"], everything, 1), "B": member("B", ["t"], (), 1)}
    assignor = CooperativeStickyAssignor()
    round1 = assignor.assign({"t": 6}, members)
    check_valid({"t": 6}, members, round1, complete=False)
    kept = set(round1["A"].partitions)
    assert len(kept) == 3 and kept <= everything
    assert round1["B"].partitions == ()  # its three partitions are still A's until A revokes them

    # A revokes what it lost and rejoins with generation 2; B still owns nothing.
    members = {"A": member("A", ["t"], kept, 2), "B": member("B", ["t"], (), 2)}
    round2 = assignor.assign({"t": 6}, members)
    check_valid({"t": 6}, members, round2)
    assert set(round2["A"].partitions) == kept
    assert set(round2["B"].partitions) == everything - kept


def test_cooperative_unowned_partitions_are_assigned_at_once() -> None:
    members = {"A": member("A", ["t"], tps("tp0"), 3), "B": member("B", ["t"], tps("tp1"), 3)}
    result = as_sets(CooperativeStickyAssignor().assign({"t": 4}, members))
    assert result["A"] >= tps("tp0") and result["B"] >= tps("tp1")
    assert result["A"] | result["B"] == tps("tp0", "tp1", "tp2", "tp3")


def test_cooperative_keeps_partitions_the_member_claims_even_when_contested() -> None:
    # B claims t-1 with an older generation; A (newer) keeps it and is not made to revoke it.
    members = {"A": member("A", ["t"], tps("tp0", "tp1"), 6), "B": member("B", ["t"], tps("tp1", "tp2"), 5)}
    result = as_sets(CooperativeStickyAssignor().assign({"t": 4}, members))
    assert result["A"] == tps("tp0", "tp1")
    assert tp("tp1") not in result["B"]


def test_cooperative_stale_claim_delays_the_move() -> None:
    # Only B (an older generation) claims t-1, but B has left the topic: whoever gets t-1 must wait
    # until B has revoked it.
    members = {"A": member("A", ["t"], (), 6), "B": member("B", ["u"], tps("tp1"), 5)}
    result = as_sets(CooperativeStickyAssignor().assign({"t": 2, "u": 1}, members))
    assert result == {"A": tps("tp0"), "B": tps("up0")}


def test_cooperative_second_round_completes_with_different_subscriptions() -> None:
    subs = {"m0": ["t0", "t1"], "m1": ["t0"], "m2": ["t0", "t1"], "m3": ["t0", "t1"]}
    owned = {"m2": tps("t0p0", "t1p0", "t1p1", "t1p2")}
    counts = {"t0": 1, "t1": 3}
    assignor = CooperativeStickyAssignor()
    members = {m: member(m, t, owned.get(m, ()), 1) for m, t in subs.items()}
    round1 = as_sets(assignor.assign(counts, members))
    assert sum(map(len, round1.values())) == 1 and len(round1["m2"]) == 1  # three partitions move
    members = {m: member(m, t, round1[m], 2) for m, t in subs.items()}
    round2 = assignor.assign(counts, members)
    check_valid(counts, members, round2)
    assert round1["m2"] == as_sets(round2)["m2"]
    assert as_sets(round2)["m1"] == tps("t0p0")


def test_cooperative_member_leaving_needs_one_round() -> None:
    # A member that left owns nothing any more: its partitions are handed out in the same round.
    members = {"A": member("A", ["t"], tps("tp0", "tp1"), 2), "C": member("C", ["t"], tps("tp4", "tp5"), 2)}
    result = CooperativeStickyAssignor().assign({"t": 6}, members)
    check_valid({"t": 6}, members, result)
    assert sorted(loads(result)) == [3, 3]


# --- per-topic balance (KAFKA-16277) ------------------------------------------------------------------------


def rebalance_until_stable(
    assignor: StickyAssignor | CooperativeStickyAssignor,
    counts: dict[str, int],
    topics: list[str],
    owned: dict[str, set[TopicPartition]],
    generation: int,
) -> tuple[dict[str, set[TopicPartition]], int]:
    """One rebalance of the members in ``owned`` (member -> what it owns now), plus the cooperative
    follow-up rebalances until nothing is withheld; returns the final assignment and generation."""
    for _ in range(4):
        if isinstance(assignor, StickyAssignor):
            members = {m: eager_member(m, topics, ps or None, generation) for m, ps in owned.items()}
        else:
            members = {m: member(m, topics, ps, generation) for m, ps in owned.items()}
        result = assignor.assign(counts, members)
        generation += 1
        check_valid(counts, members, result, complete=False)
        owned = as_sets(result)
        if sum(map(len, owned.values())) == sum(counts.values()):
            check_valid(counts, members, result)
            return owned, generation
    raise AssertionError(f"{assignor.name} still withholds partitions after 4 rebalances: {owned}")


@pytest.mark.parametrize("assignor_cls", [StickyAssignor, CooperativeStickyAssignor])
def test_topic_balance_after_reassignment(
    assignor_cls: type[StickyAssignor] | type[CooperativeStickyAssignor],
) -> None:
    # Java's AbstractStickyAssignorTest.testTopicBalanceAfterReassignment (KAFKA-16277): when partitions
    # move away from an over-full member, each topic is split evenly, not one topic per member.
    counts = {"topic1": 12, "topic2": 12}
    topics = list(counts)
    assignor = assignor_cls()
    owned: dict[str, set[TopicPartition]] = {"consumer1": set()}
    generation = 1
    # (members joining, members leaving, partitions of each topic every member ends up with)
    steps = [
        ([], [], 12),
        (["consumer2"], [], 6),
        (["consumer3", "consumer4"], [], 3),
        ([], ["consumer1", "consumer2"], 6),
    ]
    for joining, leaving, per_topic in steps:
        before = {m: ps for m, ps in owned.items() if m not in leaving}
        before.update((m, set()) for m in joining)
        owned, generation = rebalance_until_stable(assignor, counts, topics, before, generation)
        for m, ps in owned.items():
            assert Counter(p.topic for p in ps) == dict.fromkeys(topics, per_topic), (m, sorted(ps))
        # Still sticky: only what balance requires changes hands.
        lost = sum(len(before[m] - owned[m]) for m in before)
        assert lost == min_moves((len(ps) for ps in before.values()), sum(counts.values()))


@pytest.mark.parametrize("assignor_cls", [StickyAssignor, CooperativeStickyAssignor])
def test_members_joining_an_owner_of_everything_get_a_share_of_each_topic(
    assignor_cls: type[StickyAssignor] | type[CooperativeStickyAssignor],
) -> None:
    # Topics of different sizes: every member ends up with a near-even share of each topic.
    counts = {"a": 4, "b": 20, "c": 9}
    topics = list(counts)
    everything = {TopicPartition(t, p) for t, n in counts.items() for p in range(n)}
    owned = {"m0": everything, "m1": set(), "m2": set()}
    after, _ = rebalance_until_stable(assignor_cls(), counts, topics, owned, 1)
    assert sorted(map(len, after.values())) == [11, 11, 11]
    assert after["m0"] <= everything
    for t in counts:
        shares = sorted(sum(p.topic == t for p in ps) for ps in after.values())
        assert shares[-1] - shares[0] <= 1, (t, shares)
