"""Helpers shared by the assignor tests: building members, reading results, checking invariants."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from kaflux.consumer.assignors import Assignment, GroupMember, Subscription
from kaflux.structs import TopicPartition


def tp(name: str) -> TopicPartition:
    """``"t0p2"`` -> TopicPartition("t0", 2) (the notation of Java's assignor docs)."""
    topic, _, partition = name.rpartition("p")
    return TopicPartition(topic, int(partition))


def tps(*names: str) -> set[TopicPartition]:
    return {tp(n) for n in names}


def member(
    member_id: str,
    topics: Iterable[str],
    owned: Iterable[TopicPartition] = (),
    generation: int = -1,
    *,
    instance_id: str | None = None,
    user_data: bytes | None = None,
) -> GroupMember:
    return GroupMember(
        member_id,
        instance_id,
        Subscription(tuple(topics), user_data, tuple(sorted(owned)), generation),
    )


def as_sets(result: Mapping[str, Assignment]) -> dict[str, set[TopicPartition]]:
    return {member_id: set(a.partitions) for member_id, a in result.items()}


def all_partitions(
    partitions_per_topic: Mapping[str, int], members: Mapping[str, GroupMember]
) -> set[TopicPartition]:
    """Every partition of a topic that some member subscribes to."""
    subscribed = {t for m in members.values() for t in m.subscription.topics}
    return {
        TopicPartition(t, p)
        for t in subscribed
        if t in partitions_per_topic
        for p in range(partitions_per_topic[t])
    }


def check_valid(
    partitions_per_topic: Mapping[str, int],
    members: Mapping[str, GroupMember],
    result: Mapping[str, Assignment],
    *,
    complete: bool = True,
) -> None:
    """Every member has an entry; partitions go only to subscribed members, at most once, and (when
    ``complete``) every partition of a subscribed topic is assigned."""
    assert set(result) == set(members)
    counts = Counter(p for a in result.values() for p in a.partitions)
    duplicated = {p for p, c in counts.items() if c > 1}
    assert not duplicated, f"assigned more than once: {sorted(duplicated)}"
    expected = all_partitions(partitions_per_topic, members)
    assert set(counts) <= expected, f"not subscribed by anyone or unknown: {sorted(set(counts) - expected)}"
    for member_id, a in result.items():
        topics = set(members[member_id].subscription.topics)
        wrong = [p for p in a.partitions if p.topic not in topics]
        assert not wrong, f"{member_id} got partitions of topics it does not subscribe to: {wrong}"
    if complete:
        missing = expected - set(counts)
        assert not missing, f"not assigned: {sorted(missing)}"


def loads(result: Mapping[str, Assignment]) -> list[int]:
    return [len(a.partitions) for a in result.values()]


def check_locally_balanced(members: Mapping[str, GroupMember], result: Mapping[str, Assignment]) -> None:
    """No partition could move to an eligible member with at least two fewer partitions."""
    load = {m: len(a.partitions) for m, a in result.items()}
    for owner, a in result.items():
        for p in a.partitions:
            for other, m in members.items():
                if p.topic in m.subscription.topics:
                    assert load[owner] <= load[other] + 1, (
                        f"{p} could move from {owner} ({load[owner]}) to {other} ({load[other]})"
                    )


def check_no_improving_path(members: Mapping[str, GroupMember], result: Mapping[str, Assignment]) -> None:
    """No chain of moves (a gives a partition to k1, k1 gives one to k2, ..., to j, each receiver
    subscribed to the topic it receives) ends at a member j with at least two fewer partitions than
    a. Such an assignment minimizes the sum of squared loads."""
    load = {m: len(a.partitions) for m, a in result.items()}
    topics = {m: set(x.subscription.topics) for m, x in members.items()}
    for source in result:
        reached = {source}
        frontier = [source]
        while frontier:
            k = frontier.pop()
            for p in result[k].partitions:
                for j in result:
                    if j not in reached and p.topic in topics[j]:
                        reached.add(j)
                        frontier.append(j)
        worse = [j for j in reached if load[j] <= load[source] - 2]
        assert not worse, f"a chain of moves from {source} ({load[source]}) to {worse} would improve balance"


def min_moves(owned_counts: Iterable[int], total: int) -> int:
    """The fewest owned partitions that must change hands to reach a balanced assignment of
    ``total`` partitions (identical subscriptions): the members that own the most keep ``q + 1``."""
    counts = sorted(owned_counts, reverse=True)
    q, extra = divmod(total, len(counts))
    return sum(max(0, c - (q + 1 if i < extra else q)) for i, c in enumerate(counts))
