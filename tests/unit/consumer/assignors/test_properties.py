"""Property tests of all assignors over random groups: members, subscriptions, partition counts and
owned partitions (with generations)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kaflux.consumer.assignors import (
    Assignment,
    CooperativeStickyAssignor,
    GroupMember,
    PartitionAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    Subscription,
)
from kaflux.consumer.assignors.sticky import encode_sticky_user_data
from kaflux.structs import TopicPartition

from support.assignors_testutil import (
    all_partitions,
    as_sets,
    check_locally_balanced,
    check_no_improving_path,
    check_valid,
    min_moves,
)

PROPS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@dataclass
class Group:
    counts: dict[str, int]
    topics: dict[str, tuple[str, ...]]  # per member
    instance_ids: dict[str, str | None]
    owned: dict[str, set[TopicPartition]]
    generations: dict[str, int]

    def members(self, assignor: PartitionAssignor) -> dict[str, GroupMember]:
        """The members as ``assignor`` sees them: eager sticky reads ownership from the user data,
        the others from the subscription."""
        out = {}
        for m, topics in self.topics.items():
            owned = tuple(sorted(self.owned.get(m, ())))
            generation = self.generations.get(m, -1)
            if isinstance(assignor, StickyAssignor):
                sub = Subscription(topics, encode_sticky_user_data(owned, generation) if owned else None)
            else:
                sub = Subscription(topics, None, owned, generation)
            out[m] = GroupMember(m, self.instance_ids[m], sub)
        return out

    @property
    def identical(self) -> bool:
        return len(set(map(frozenset, self.topics.values()))) <= 1


TOPICS = ["t0", "t1", "t2", "t3", "t4"]
member_ids = st.lists(st.text("abcxyz01", min_size=1, max_size=4), min_size=1, max_size=7, unique=True)


@st.composite
def groups(draw: st.DrawFn, identical: bool | None = None, disjoint_owned: bool = False) -> Group:
    topics = TOPICS[: draw(st.integers(1, len(TOPICS)))]
    counts = {t: draw(st.integers(0, 9)) for t in topics}
    if draw(st.booleans()):
        counts.pop(topics[-1])  # subscribed but unknown to the metadata
    ids = draw(member_ids)
    topic_choice = st.lists(st.sampled_from([*topics, "nope"]), max_size=len(topics) + 1, unique=True).map(
        tuple
    )
    same = draw(st.booleans()) if identical is None else identical
    if same:
        common = draw(topic_choice)
        subs = dict.fromkeys(ids, common)
    else:
        subs = {m: draw(topic_choice) for m in ids}
    instance_ids = {
        m: draw(st.none() | st.sampled_from(["i1", "i2", "i3", "i4", "i5", "i6", "i7"])) for m in ids
    }
    if len({i for i in instance_ids.values() if i is not None}) < sum(
        i is not None for i in instance_ids.values()
    ):
        instance_ids = dict.fromkeys(ids)  # instance ids are unique in a group

    # Owned partitions, possibly of unknown topics or beyond the partition count.
    candidates = [TopicPartition(t, p) for t in [*topics, "old"] for p in range(counts.get(t, 3) + 1)]
    owned: dict[str, set[TopicPartition]] = {m: set() for m in ids}
    if disjoint_owned:
        for p in candidates:
            owner = draw(st.sampled_from([None, *ids]))
            if owner is not None:
                owned[owner].add(p)
        generations = dict.fromkeys(ids, draw(st.integers(-1, 5)))
    else:
        for m in ids:
            owned[m] = set(draw(st.lists(st.sampled_from(candidates), max_size=8))) if candidates else set()
        generations = {m: draw(st.integers(-1, 4)) for m in ids}
    return Group(counts, subs, instance_ids, owned, generations)


ASSIGNORS: list[type[PartitionAssignor]] = [
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    CooperativeStickyAssignor,
]


def valid_owned(group: Group, members: dict[str, GroupMember]) -> dict[str, set[TopicPartition]]:
    """Owned partitions that the owner may keep: in range, subscribed, claimed by no one else."""
    everything = all_partitions(group.counts, members)
    claims = Counter(p for ps in group.owned.values() for p in ps)
    return {
        m: {p for p in ps if p in everything and claims[p] == 1 and p.topic in group.topics[m]}
        for m, ps in group.owned.items()
    }


# --- validity and balance ----------------------------------------------------------------------------------


@PROPS
@given(group=groups())
def test_every_partition_assigned_once_to_a_subscriber(group: Group) -> None:
    for cls in ASSIGNORS:
        assignor = cls()
        members = group.members(assignor)
        result = assignor.assign(group.counts, members)
        check_valid(group.counts, members, result, complete=cls is not CooperativeStickyAssignor)
        for a in result.values():
            assert list(a.partitions) == sorted(set(a.partitions))
            assert a.user_data is None


@PROPS
@given(group=groups(identical=True))
def test_identical_subscriptions_are_balanced(group: Group) -> None:
    for cls in (RoundRobinAssignor, StickyAssignor):
        assignor = cls()
        result = assignor.assign(group.counts, group.members(assignor))
        counts = [len(a.partitions) for a in result.values()]
        assert max(counts) - min(counts) <= 1, (cls.name, counts)
    # Range balances each topic separately.
    result = RangeAssignor().assign(group.counts, group.members(RangeAssignor()))
    for topic in group.counts:
        per_topic = [sum(p.topic == topic for p in a.partitions) for a in result.values()]
        if any(topic in ts for ts in group.topics.values()):
            assert max(per_topic) - min(per_topic) <= 1


@PROPS
@given(group=groups(identical=False))
def test_sticky_is_optimally_balanced_for_any_subscriptions(group: Group) -> None:
    assignor = StickyAssignor()
    members = group.members(assignor)
    result = assignor.assign(group.counts, members)
    check_locally_balanced(members, result)
    check_no_improving_path(members, result)


@PROPS
@given(group=groups(), data=st.data())
def test_results_do_not_depend_on_member_order(group: Group, data: st.DataObject) -> None:
    for cls in ASSIGNORS:
        assignor = cls()
        members = group.members(assignor)
        shuffled = dict(data.draw(st.permutations(list(members.items()))))
        assert assignor.assign(group.counts, members) == assignor.assign(group.counts, shuffled)


# --- stickiness --------------------------------------------------------------------------------------------


@PROPS
@given(group=groups(identical=True, disjoint_owned=True))
def test_sticky_moves_only_what_balance_requires(group: Group) -> None:
    for cls in (StickyAssignor, CooperativeStickyAssignor):
        assignor = cls()
        members = group.members(assignor)
        result = as_sets(assignor.assign(group.counts, members))
        owned = valid_owned(group, members)
        total = len(all_partitions(group.counts, members))
        kept = sum(len(owned[m] & result[m]) for m in members)
        lost = sum(len(ps) for ps in owned.values()) - kept
        assert lost == min_moves((len(ps) for ps in owned.values()), total), (cls.name, owned, result)


@PROPS
@given(group=groups(identical=True), data=st.data())
def test_member_leaving_moves_only_its_partitions(group: Group, data: st.DataObject) -> None:
    assignor = StickyAssignor()
    before = as_sets(assignor.assign(group.counts, group.members(assignor)))
    leaving = data.draw(st.sampled_from(sorted(before)))
    rest = Group(
        group.counts,
        {m: t for m, t in group.topics.items() if m != leaving},
        group.instance_ids,
        {m: before[m] for m in before if m != leaving},
        {m: 1 for m in before if m != leaving},
    )
    if not rest.topics:
        return
    after = as_sets(assignor.assign(rest.counts, rest.members(assignor)))
    for m, ps in after.items():
        assert before[m] <= ps, f"{m} lost {before[m] - ps} when {leaving} left"


@PROPS
@given(group=groups(identical=True), new_member=st.text("pqr", min_size=5, max_size=5))
def test_member_joining_takes_only_what_balance_requires(group: Group, new_member: str) -> None:
    assignor = StickyAssignor()
    before = as_sets(assignor.assign(group.counts, group.members(assignor)))
    common = next(iter(group.topics.values()))
    joined = Group(
        group.counts,
        {**group.topics, new_member: common},
        {**group.instance_ids, new_member: None},
        before,
        dict.fromkeys(before, 1),
    )
    after = as_sets(assignor.assign(joined.counts, joined.members(assignor)))
    total = sum(len(ps) for ps in before.values())
    moved = sum(len(before[m] - after[m]) for m in before)
    assert moved == min_moves([*(len(ps) for ps in before.values()), 0], total)
    assert all(after[m] <= before[m] for m in before)


# --- cooperative two-phase moves -------------------------------------------------------------------------


def next_round(group: Group, result: dict[str, Assignment]) -> Group:
    """Every member revokes what it lost, keeps what it was given, and rejoins one generation later."""
    generation = max(group.generations.values(), default=0) + 1
    return Group(
        group.counts,
        group.topics,
        group.instance_ids,
        {m: set(a.partitions) for m, a in result.items()},
        dict.fromkeys(result, generation),
    )


@PROPS
@given(group=groups())
def test_cooperative_hands_over_in_two_rounds(group: Group) -> None:
    assignor = CooperativeStickyAssignor()
    members = group.members(assignor)
    round1 = assignor.assign(group.counts, members)
    check_valid(group.counts, members, round1, complete=False)
    # A member only gets a partition someone else claims if it claims it too.
    for m, a in round1.items():
        others = {p for o, ps in group.owned.items() if o != m for p in ps}
        assert not {p for p in a.partitions if p in others and p not in group.owned[m]}
    # Without the cooperative adjustment the result is the eager sticky one.
    withheld = all_partitions(group.counts, members) - {p for a in round1.values() for p in a.partitions}
    assert withheld <= {p for ps in group.owned.values() for p in ps}

    second = next_round(group, round1)
    members2 = second.members(assignor)
    round2 = assignor.assign(second.counts, members2)
    check_valid(second.counts, members2, round2)
    for m, a in round1.items():
        assert set(a.partitions) <= set(round2[m].partitions), "round 2 must not move what round 1 kept"
    if group.identical:
        counts = [len(a.partitions) for a in round2.values()]
        assert max(counts) - min(counts) <= 1


@PROPS
@given(group=groups())
def test_cooperative_round_without_ownership_changes_is_complete(group: Group) -> None:
    # Once the assignment is stable, a rebalance changes nothing and withholds nothing.
    assignor = CooperativeStickyAssignor()
    stable = next_round(group, assignor.assign(group.counts, group.members(assignor)))
    stable = next_round(stable, assignor.assign(stable.counts, stable.members(assignor)))
    result = assignor.assign(stable.counts, stable.members(assignor))
    assert as_sets(result) == stable.owned
