"""The sticky assignors: "sticky" (eager, KIP-54) and "cooperative-sticky" (KIP-429). [pure]

Both compute a balanced assignment that keeps as many partitions as possible with their current
owners. Current ownership comes from each member's claims: the eager ``sticky`` assignor reads them
from the user data of the subscription (in Java's ``StickyAssignor`` format, because eager members
revoke everything before rejoining); ``cooperative-sticky`` reads the subscription's owned partitions
and generation. When several members claim a partition, the claim of the highest generation wins; a
tie between members of that generation invalidates the claim.

The algorithm (the same for identical and differing subscriptions):

1. Every valid claim whose owner is still subscribed to the topic is kept.
2. Each unowned partition goes to the least-loaded member subscribed to its topic (partitions of
   topics with fewer subscribers first, ties by member order).
3. Rebalance until no improving move is left: a partition moves from a member to an eligible one
   with at least two fewer partitions, directly or along a chain of members (a gives to k1, k1
   gives one of another topic to k2, ... ). Moves always start at the most loaded member, and moves
   of partitions handed out in this run are exhausted before any kept claim moves. Each move takes
   a partition of the topic of which the giver holds the most more than the receiver, so partitions
   taken from an over-full member are spread over its topics and each topic stays split evenly
   (Java's KAFKA-16277: otherwise a member joining an owner of two topics would get all of one).

The result minimizes the sum of squared partition counts, so with identical subscriptions the
counts differ by at most one, and with differing ones no member could take over work from a member
with two more partitions. A kept claim only moves when balance requires it; in particular when the
claims are a previous result of this algorithm minus some partitions, no claim moves (which makes
the cooperative hand-over finish in its second round). Java's general algorithm may choose
differently: the sticky assignors must match Java's wire formats, not its results.

Rack-aware assignment (KIP-881), with Java's rules for when it applies: when members send their
``client.rack``, ``partition_racks`` gives the racks of each partition's replicas, some member's
rack holds a replica and the partitions are not all replicated on the same racks, balance comes
first, then rack locality, then stickiness:

- A claim of a member whose rack holds no replica of the partition is not kept as such: the
  owner still holds it, but it moves first when rebalancing (like a partition handed out in this
  run), and it moves to a member in a matching rack whenever that keeps the balance.
- Unowned partitions go to a least-loaded member in a matching rack when there is one.
- After rebalancing, partitions held outside their racks move to a member in a matching rack when
  that leaves every load as it was: directly to a member of the same subscription with one
  partition fewer, or in exchange for a partition that the other member holds outside its rack
  (not a kept claim). Kept claims in their racks never move for locality.

The result is as balanced as without racks; Java's algorithm may choose other rack-local partitions.
Members without a rack, and partitions without known racks, are assigned as before.

``cooperative-sticky`` then withholds every partition that changes hands: a partition assigned to a
member that did not claim it, but that another member claims, is left out of this round. Its old
owner, no longer assigned it, revokes it and rejoins; the next rebalance assigns it for real.
"""

from __future__ import annotations

import heapq
import struct
from collections import deque
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from kaflux.consumer.assignors.base import (
    GroupMember,
    PartitionAssignor,
    PartitionRacks,
    RebalanceProtocol,
    java_string_key,
    member_order_key,
    sorted_partitions,
    use_rack_aware_assignment,
)
from kaflux.consumer.assignors.consumer_protocol import Assignment
from kaflux.errors import ProtocolError
from kaflux.protocol.primitives import Reader, Writer
from kaflux.structs import TopicPartition

__all__ = [
    "DEFAULT_GENERATION",
    "CooperativeStickyAssignor",
    "MemberClaims",
    "StickyAssignor",
    "decode_sticky_user_data",
    "encode_sticky_user_data",
    "sticky_assignment",
]

DEFAULT_GENERATION = -1
"""The generation of claims that carry none (Java's ``AbstractStickyAssignor.DEFAULT_GENERATION``)."""

_I32 = struct.Struct(">i")


# --- user data formats --------------------------------------------------------------------------------


def encode_sticky_user_data(partitions: Iterable[TopicPartition], generation: int) -> bytes:
    """The eager sticky assignor's user data, Java's ``StickyAssignor`` V1 schema (no version prefix):
    ``previous_assignment: [topic: string, partitions: [int32]]`` then ``generation: int32``."""
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    w = Writer()
    w.int32(len(by_topic))
    for topic, parts in by_topic.items():
        w.string(topic)
        w.int32(len(parts))
        w.fixed_array("i", parts)
    w.int32(generation)
    return w.getvalue()


def _read_topic_partitions(r: Reader) -> list[TopicPartition]:
    n = r.array_length(False)
    if n < 0:
        raise ProtocolError("null previous_assignment array")
    out: list[TopicPartition] = []
    for _ in range(n):
        topic = r.string()
        count = r.array_length(False)
        if count < 0:
            raise ProtocolError("null partitions array")
        out.extend(TopicPartition(topic, p) for p in r.fixed_array("i", count, "partitions"))
    return out


def decode_sticky_user_data(data: bytes | bytearray | memoryview) -> tuple[list[TopicPartition], int | None]:
    """Parse :func:`encode_sticky_user_data` output: ``(previous assignment, generation)``.

    Like Java, falls back to the V0 schema (no generation: None) when V1 does not parse, and returns
    an empty assignment with :data:`DEFAULT_GENERATION` when neither does. Trailing bytes are ignored.
    """
    try:
        r = Reader(data)
        partitions = _read_topic_partitions(r)
        return partitions, r.int32()
    except ProtocolError:
        pass
    try:
        return _read_topic_partitions(Reader(data)), None
    except ProtocolError:
        return [], DEFAULT_GENERATION


def _decode_cooperative_user_data(data: bytes | None) -> int:
    """The generation in Java's ``CooperativeStickyAssignor`` user data (one int32), or -1."""
    if data is None or len(data) < _I32.size:
        return DEFAULT_GENERATION
    generation: int = _I32.unpack_from(data)[0]
    return generation


# --- the assignment algorithm ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MemberClaims:
    """The partitions a member says it owns, and the generation it got them in."""

    partitions: tuple[TopicPartition, ...] = ()
    generation: int = DEFAULT_GENERATION


class _Holding:
    """The partitions of one topic group that one member holds of one kind (kept or fresh), by topic.

    The topics are also indexed by the member's ``load`` of them (partitions of the topic it holds of
    both kinds), which the balancer keeps up to date with :meth:`relabel`.
    """

    __slots__ = ("by_load", "by_topic", "size")

    def __init__(self) -> None:
        self.by_topic: dict[str, list[TopicPartition]] = {}
        self.by_load: dict[int, dict[str, None]] = {}
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def add(self, tp: TopicPartition, load: int) -> None:
        """Add ``tp``; ``load`` is the member's load of its topic, ``tp`` included."""
        held = self.by_topic.get(tp.topic)
        if held is None:
            self.by_topic[tp.topic] = [tp]
            self.by_load.setdefault(load, {})[tp.topic] = None
        else:
            held.append(tp)
        self.size += 1

    def remove(self, tp: TopicPartition, load: int) -> None:
        """Remove ``tp``, which this holding has; ``load`` is the member's load of its topic with it
        already removed."""
        held = self.by_topic[tp.topic]
        held.remove(tp)
        self.size -= 1
        if not held:
            del self.by_topic[tp.topic]
            self._unindex(tp.topic, load)

    def pop(self, topic: str, load: int) -> TopicPartition:
        """Remove the last partition of ``topic`` added; ``load`` is the member's load of the topic
        with it already removed."""
        held = self.by_topic[topic]
        tp = held.pop()
        self.size -= 1
        if not held:
            del self.by_topic[topic]
            self._unindex(topic, load)
        return tp

    def relabel(self, topic: str, old: int, new: int) -> None:
        """The member's load of ``topic`` changed from ``old`` to ``new``."""
        if topic in self.by_topic:
            self._unindex(topic, old)
            self.by_load.setdefault(new, {})[topic] = None

    def _unindex(self, topic: str, load: int) -> None:
        bucket = self.by_load[load]
        del bucket[topic]
        if not bucket:
            del self.by_load[load]

    def choose(self, receiver_load: Mapping[str, int]) -> str:
        """The topic to give a partition of to a member with ``receiver_load``: the one of which this
        member holds the most more than the receiver (the move that best evens out the topics)."""
        best: tuple[int, str] | None = None  # (gap, topic); the gap is negative if the receiver holds more
        for load in sorted(self.by_load, reverse=True):
            if best is not None and load <= best[0]:
                break  # no topic held less often can have a larger gap
            for topic in self.by_load[load]:
                gap = load - receiver_load.get(topic, 0)
                if best is None or gap > best[0]:
                    best = (gap, topic)
                    if gap == load:
                        break  # the receiver holds none of it: the best this bucket can offer
        if best is None:
            raise RuntimeError("no partition to take")
        return best[1]


class _Balancer:
    """Mutable state of one run of :func:`sticky_assignment`. Members are numbered in member order;
    topics with the same set of subscribers form one group (the unit of eligibility)."""

    def __init__(
        self,
        partitions_per_topic: Mapping[str, int],
        members: Mapping[str, GroupMember],
        claims: Mapping[str, MemberClaims],
        partition_racks: PartitionRacks | None = None,
    ) -> None:
        self.ids = sorted(members, key=lambda member_id: member_order_key(members[member_id]))
        n = len(self.ids)
        self.load = [0] * n
        subscribers: dict[str, list[int]] = {}
        self.subscribed: list[frozenset[str]] = []
        for i, member_id in enumerate(self.ids):
            topics = frozenset(
                t for t in members[member_id].subscription.topics if partitions_per_topic.get(t, 0) > 0
            )
            self.subscribed.append(topics)
            for t in topics:
                subscribers.setdefault(t, []).append(i)
        self.num_partitions = {t: partitions_per_topic[t] for t in subscribers}

        group_ids: dict[tuple[int, ...], int] = {}
        self.topic_group: dict[str, int] = {}
        self.group_members: list[tuple[int, ...]] = []
        self.member_groups: list[list[int]] = [[] for _ in range(n)]
        for t in sorted(subscribers, key=java_string_key):
            key = tuple(subscribers[t])
            g = group_ids.get(key)
            if g is None:
                g = group_ids[key] = len(self.group_members)
                self.group_members.append(key)
                for i in key:
                    self.member_groups[i].append(g)
            self.topic_group[t] = g

        # Partitions held per member and group: ``kept`` are the member's own valid claims,
        # ``fresh`` what it received in this run (moved first when rebalancing). ``topic_load``
        # counts both per member and topic.
        self.kept: list[dict[int, _Holding]] = [{} for _ in range(n)]
        self.fresh: list[dict[int, _Holding]] = [{} for _ in range(n)]
        self.topic_load: list[dict[str, int]] = [{} for _ in range(n)]
        self.fresh_count = [0] * n
        self.lowest: list[tuple[int, int]] = []  # rebalancing: (load, member) of eligible members
        self.fresh_holders: list[tuple[int, int]] = []  # rebalancing: (-load, member) holding fresh ones
        self.eligible = [i for i in range(n) if self.member_groups[i]]  # subscribed to something
        self.heaps: list[list[tuple[int, int]]] = [[(0, i) for i in key] for key in self.group_members]

        self.owners = self._resolve_claims(claims)

        # KIP-881: member racks and replica racks, when Java's rule says they apply.
        self.racks: list[str | None] = [members[m].subscription.rack_id or None for m in self.ids]
        self.partition_racks: Mapping[TopicPartition, frozenset[str]] = {}
        if partition_racks:
            subscribed_racks = {
                tp: partition_racks.get(tp, frozenset())
                for t, count in self.num_partitions.items()
                for tp in (TopicPartition(t, p) for p in range(count))
            }
            member_racks = {r for r in self.racks if r is not None}
            if use_rack_aware_assignment(member_racks, subscribed_racks):
                self.partition_racks = subscribed_racks
        self.rack_aware = bool(self.partition_racks)
        self.by_rack: dict[str, list[int]] = {}
        self.group_sets: list[frozenset[int]] = []
        self.outside: list[dict[TopicPartition, None]] = []

    def _resolve_claims(self, claims: Mapping[str, MemberClaims]) -> dict[TopicPartition, int]:
        """The valid owner of each claimed partition: its only claimant of the highest generation,
        provided that member is still subscribed to the topic."""
        best_generation: dict[TopicPartition, int] = {}
        claimants: dict[TopicPartition, list[int]] = {}
        for i, member_id in enumerate(self.ids):
            claim = claims.get(member_id)
            if claim is None:
                continue
            for tp in dict.fromkeys(claim.partitions):
                count = self.num_partitions.get(tp.topic)
                if count is None or not 0 <= tp.partition < count:
                    continue  # no longer part of this assignment
                generation = best_generation.get(tp)
                if generation is None or claim.generation > generation:
                    best_generation[tp] = claim.generation
                    claimants[tp] = [i]
                elif claim.generation == generation:
                    claimants[tp].append(i)
        return {
            tp: who[0]
            for tp, who in claimants.items()
            if len(who) == 1 and tp.topic in self.subscribed[who[0]]
        }

    def _least_loaded(self, g: int) -> int:
        """The member of group ``g`` with the fewest partitions (lowest number on ties)."""
        heap = self.heaps[g]
        while True:
            entry_load, i = heap[0]
            if entry_load == self.load[i]:
                return i
            heapq.heapreplace(heap, (self.load[i], i))

    def _relabel(self, i: int, g: int, topic: str, old: int, new: int) -> None:
        """Record that member ``i`` now holds ``new`` partitions of ``topic`` (of group ``g``)."""
        if new:
            self.topic_load[i][topic] = new
        else:
            del self.topic_load[i][topic]
        for holdings in (self.kept[i], self.fresh[i]):
            holding = holdings.get(g)
            if holding is not None:
                holding.relabel(topic, old, new)

    def _give(self, i: int, g: int, tp: TopicPartition, *, fresh: bool) -> None:
        load = self.topic_load[i].get(tp.topic, 0) + 1
        self._relabel(i, g, tp.topic, load - 1, load)
        holding = (self.fresh if fresh else self.kept)[i].setdefault(g, _Holding())
        holding.add(tp, load)
        self.load[i] += 1
        if fresh:
            self.fresh_count[i] += 1

    def _take(self, i: int, g: int, receiver: int, *, allow_kept: bool) -> TopicPartition:
        """Remove a partition of group ``g`` from member ``i`` to give to ``receiver``: one that ``i``
        received in this run if any, of the topic that ``i`` holds the most more of than ``receiver``
        (the most recently added partition of that topic)."""
        holding = self.fresh[i].get(g)
        if holding:
            self.fresh_count[i] -= 1
        elif not allow_kept:
            raise RuntimeError(f"member {self.ids[i]!r} holds no fresh partition of group {g}")
        else:
            holding = self.kept[i][g]
        topic = holding.choose(self.topic_load[receiver])
        load = self.topic_load[i][topic] - 1
        self._relabel(i, g, topic, load + 1, load)
        self.load[i] -= 1
        return holding.pop(topic, load)

    def _holds(self, i: int, g: int, *, allow_kept: bool) -> bool:
        return bool(self.fresh[i].get(g)) or (allow_kept and bool(self.kept[i].get(g)))

    # -- racks (KIP-881) ---------------------------------------------------------------------------------

    def _local(self, i: int, tp: TopicPartition) -> bool:
        """Member ``i`` has a rack and ``tp`` has a replica in it."""
        rack = self.racks[i]
        return rack is not None and rack in self.partition_racks.get(tp, ())

    def _mismatched(self, i: int, tp: TopicPartition) -> bool:
        """Java's ``racksMismatch``: member ``i`` has a rack that holds no replica of ``tp``."""
        rack = self.racks[i]
        return self.rack_aware and rack is not None and rack not in self.partition_racks.get(tp, ())

    def _remove(self, i: int, g: int, tp: TopicPartition) -> None:
        """Remove ``tp`` (of group ``g``, held fresh) from member ``i``."""
        load = self.topic_load[i][tp.topic] - 1
        self._relabel(i, g, tp.topic, load + 1, load)
        self.fresh[i][g].remove(tp, load)
        self.load[i] -= 1
        self.fresh_count[i] -= 1

    def _move(self, a: int, b: int, tp: TopicPartition) -> None:
        g = self.topic_group[tp.topic]
        self._remove(a, g, tp)
        self.outside[a].pop(tp, None)
        self._give(b, g, tp, fresh=True)
        if not self._local(b, tp):
            self.outside[b][tp] = None

    def improve_racks(self) -> None:
        """Move partitions held outside their racks to members in a matching rack where every load
        stays as it is (see the module docstring). Each step adds a rack-local partition, so this
        ends."""
        if not self.rack_aware:
            return
        by_rack: dict[str, list[int]] = {}
        for i, rack in enumerate(self.racks):
            if rack is not None:
                by_rack.setdefault(rack, []).append(i)
        self.by_rack = by_rack
        self.group_sets = [frozenset(key) for key in self.group_members]
        # Per member: the partitions it holds fresh and outside its rack (the only ones that move).
        self.outside = [
            {
                tp: None
                for holding in self.fresh[i].values()
                for held in holding.by_topic.values()
                for tp in held
                if not self._local(i, tp)
            }
            for i in range(len(self.ids))
        ]
        improved = True
        while improved:
            improved = False
            for a in range(len(self.ids)):
                for tp in list(self.outside[a]):
                    if tp in self.outside[a] and self._relocate(a, tp):
                        improved = True

    def _relocate(self, a: int, tp: TopicPartition) -> bool:
        """Give ``tp`` (held fresh by ``a``, outside its rack) to a member in a matching rack without
        changing any load: directly to a member of the same subscription with one partition fewer,
        or in exchange for a partition the other member holds outside its rack. Returns whether
        it moved."""
        g = self.topic_group[tp.topic]
        eligible = self.group_sets[g]
        candidates = [
            b
            for rack in sorted(self.partition_racks.get(tp, ()))
            for b in self.by_rack.get(rack, ())
            if b != a and b in eligible
        ]
        for b in candidates:
            if self.load[a] == self.load[b] + 1 and self.member_groups[a] == self.member_groups[b]:
                self._move(a, b, tp)
                return True
        for b in candidates:
            best: TopicPartition | None = None
            for other in self.outside[b]:
                if a in self.group_sets[self.topic_group[other.topic]]:
                    if best is None:
                        best = other
                    if other.topic == tp.topic:  # keeps each topic's split as it was
                        best = other
                        break
            if best is not None:
                self._move(a, b, tp)
                self._move(b, a, best)
                return True
        return False

    def keep_owned(self) -> None:
        for tp in sorted(self.owners, key=lambda tp: (java_string_key(tp.topic), tp.partition)):
            owner = self.owners[tp]
            # A claim outside the owner's rack stays with it but moves first (KIP-881).
            self._give(owner, self.topic_group[tp.topic], tp, fresh=self._mismatched(owner, tp))

    def assign_unowned(self) -> None:
        topics = sorted(
            self.num_partitions,
            key=lambda t: (len(self.group_members[self.topic_group[t]]), java_string_key(t)),
        )
        for t in topics:
            g = self.topic_group[t]
            for p in range(self.num_partitions[t]):
                tp = TopicPartition(t, p)
                if tp not in self.owners:
                    # Loads only grow in this phase, so stale heap entries underestimate and the
                    # lazy fix in _least_loaded finds the true minimum.
                    i = self._least_loaded(g)
                    if self.rack_aware and not self._local(i, tp):
                        i = next(
                            (
                                j
                                for j in self.group_members[g]
                                if self.load[j] == self.load[i] and self._local(j, tp)
                            ),
                            i,
                        )
                    self._give(i, g, tp, fresh=True)

    # -- rebalancing ------------------------------------------------------------------------------------
    #
    # The goal is an assignment with no improving path: no chain "a gives a partition of group g1 to
    # k1, k1 gives one of g2 to k2, ..., to j" with load[j] <= load[a] - 2 (a direct move is a chain
    # of one step). Such an assignment minimizes the sum of squared loads (the optimality condition
    # of semi-matchings), so with identical subscriptions the counts differ by at most one.
    #
    # Stickiness: improvements that move only partitions received in this run ("fresh") are
    # exhausted before any claimed ("kept") partition moves. So if keeping every valid claim is
    # compatible with an optimal assignment (as in the second round of a cooperative hand-over,
    # where the claims are the previous result minus the withheld partitions), no claim moves.

    def rebalance(self) -> None:
        if not self.eligible:
            return
        # Loads now move both ways: rebuild the group heaps, then push an entry on every change.
        self.heaps = [[(self.load[i], i) for i in key] for key in self.group_members]
        for heap in self.heaps:
            heapq.heapify(heap)
        self.lowest = [(self.load[i], i) for i in self.eligible]
        heapq.heapify(self.lowest)
        self.fresh_holders = [(-self.load[i], i) for i in self.eligible if self.fresh_count[i]]
        heapq.heapify(self.fresh_holders)
        chains = len(self.group_members) > 1  # with one group every chain shortens to a direct move
        while True:
            self._direct_moves(allow_kept=False)
            if chains and self._fresh_improvement_possible() and self._path_move(allow_kept=False):
                continue
            if self._direct_moves(allow_kept=True):
                continue
            if chains and self._path_move(allow_kept=True):
                continue
            return

    def _fresh_improvement_possible(self) -> bool:
        """Whether a member holding fresh partitions has at least two more than the least loaded
        member (a cheap necessary condition for a fresh-only improving path)."""
        lowest = self.lowest
        while lowest[0][0] != self.load[lowest[0][1]]:
            heapq.heappop(lowest)
        holders = self.fresh_holders
        while holders and (-holders[0][0] != self.load[holders[0][1]] or not self.fresh_count[holders[0][1]]):
            heapq.heappop(holders)
        return bool(holders) and -holders[0][0] >= lowest[0][0] + 2

    def _direct_moves(self, *, allow_kept: bool) -> bool:
        """Make direct moves, always from the most loaded member that can give, until none is left;
        with ``allow_kept``, stop early once a kept move makes a fresh improvement possible.
        Returns whether anything moved."""
        moved_any = False
        moved = True
        while moved:
            moved = False
            givers = [(-self.load[i], i) for i in self.eligible]
            heapq.heapify(givers)
            while givers:
                neg_load, a = heapq.heappop(givers)
                if -neg_load != self.load[a]:
                    continue  # stale entry
                move = self._move_one_from(a, allow_kept=allow_kept)
                if move is None:
                    continue
                b, kept_moved = move
                moved = moved_any = True
                if kept_moved and self._fresh_improvement_possible():
                    return True
                heapq.heappush(givers, (-self.load[a], a))
                heapq.heappush(givers, (-self.load[b], b))
        return moved_any

    def _min_valid(self, g: int) -> int:
        """The least-loaded member of group ``g`` (lowest number on ties), from a heap with an entry
        for every load change."""
        heap = self.heaps[g]
        while True:
            entry_load, i = heap[0]
            if entry_load == self.load[i]:
                return i
            heapq.heappop(heap)

    def _loads_changed(self, *members: int) -> None:
        """Record new loads and fresh counts of ``members`` in the lazy heaps."""
        for i in members:
            entry = (self.load[i], i)
            for h in self.member_groups[i]:
                heapq.heappush(self.heaps[h], entry)
            heapq.heappush(self.lowest, entry)
            if self.fresh_count[i]:
                heapq.heappush(self.fresh_holders, (-self.load[i], i))

    def _move_one_from(self, a: int, *, allow_kept: bool) -> tuple[int, bool] | None:
        """Move one partition from ``a`` to an eligible member with at least two fewer partitions,
        preferring fresh partitions, then the least-loaded receiver. Returns the receiver and
        whether a kept partition moved, or None when there is no such move."""
        best: tuple[tuple[int, int, int], int, int] | None = None
        for g in self.member_groups[a]:
            has_fresh = bool(self.fresh[a].get(g))
            if not has_fresh and not (allow_kept and self.kept[a].get(g)):
                continue
            b = self._min_valid(g)
            if self.load[a] <= self.load[b] + 1:
                continue
            key = (0 if has_fresh else 1, self.load[b], b)
            if best is None or key < best[0]:
                best = (key, g, b)
        if best is None:
            return None
        (kept_moved, _, _), g, b = best
        self._give(b, g, self._take(a, g, b, allow_kept=allow_kept), fresh=True)
        self._loads_changed(a, b)
        return b, bool(kept_moved)

    def _path_move(self, *, allow_kept: bool) -> bool:
        """Find and apply one improving path (see above) by breadth-first search from the most
        loaded members down; returns whether one was found."""
        lowest = min(self.load[i] for i in self.eligible)
        by_load = sorted(self.eligible, key=lambda i: (-self.load[i], i))
        parent: dict[int, tuple[int, int] | None] = {}
        opened: set[int] = set()
        queue: deque[int] = deque()
        pos = 0
        while pos < len(by_load) and self.load[by_load[pos]] >= lowest + 2:
            level = self.load[by_load[pos]]
            while pos < len(by_load) and self.load[by_load[pos]] == level:
                source = by_load[pos]
                pos += 1
                if source not in parent:
                    parent[source] = None
                    queue.append(source)
            target: int | None = None
            while queue:
                k = queue.popleft()
                for g in self.member_groups[k]:
                    if g in opened or not self._holds(k, g, allow_kept=allow_kept):
                        continue
                    opened.add(g)
                    for j in self.group_members[g]:
                        if j not in parent:
                            parent[j] = (k, g)
                            queue.append(j)
                            if self.load[j] <= level - 2 and (
                                target is None or self.load[j] < self.load[target]
                            ):
                                target = j
            if target is not None:
                self._apply_path(target, parent, allow_kept=allow_kept)
                return True
        return False

    def _apply_path(
        self, target: int, parent: Mapping[int, tuple[int, int] | None], *, allow_kept: bool
    ) -> None:
        steps: list[tuple[int, int, int]] = []  # (giver, group, receiver), from the target back
        source = target
        while (link := parent[source]) is not None:
            giver, g = link
            steps.append((giver, g, source))
            source = giver
        for giver, g, receiver in reversed(steps):
            self._give(receiver, g, self._take(giver, g, receiver, allow_kept=allow_kept), fresh=True)
        self._loads_changed(source, *(receiver for _, _, receiver in steps))

    def result(self) -> dict[str, list[TopicPartition]]:
        out: dict[str, list[TopicPartition]] = {}
        for i, member_id in enumerate(self.ids):
            parts: list[TopicPartition] = []
            for holdings in (self.kept[i], self.fresh[i]):
                for holding in holdings.values():
                    for held in holding.by_topic.values():
                        parts.extend(held)
            out[member_id] = parts
        return out


def sticky_assignment(
    partitions_per_topic: Mapping[str, int],
    members: Mapping[str, GroupMember],
    claims: Mapping[str, MemberClaims],
    partition_racks: PartitionRacks | None = None,
) -> dict[str, list[TopicPartition]]:
    """The balanced sticky assignment shared by both sticky assignors (see the module docstring).

    ``claims`` maps member ids to what they claim to own; members without an entry claim nothing.
    Every partition of a topic that some member subscribes to is assigned to exactly one member
    subscribed to it; every member id of ``members`` has an entry. ``partition_racks`` (the racks
    of each partition's replicas) makes it rack-aware where members sent racks (KIP-881).
    """
    balancer = _Balancer(partitions_per_topic, members, claims, partition_racks)
    balancer.keep_owned()
    balancer.assign_unowned()
    balancer.rebalance()
    balancer.improve_racks()
    return balancer.result()


# --- the assignors -----------------------------------------------------------------------------------


class StickyAssignor(PartitionAssignor):
    """The "sticky" assignor: balanced and sticky under the eager protocol (Java's ``StickyAssignor``).

    Eager members revoke everything before rejoining, so each member sends its previous assignment
    and generation in the subscription's user data, remembered from :meth:`on_assignment`.
    """

    name = "sticky"
    supported_protocols = (RebalanceProtocol.EAGER,)

    def __init__(self) -> None:
        self._last_assignment: tuple[TopicPartition, ...] | None = None
        self._generation = DEFAULT_GENERATION

    def on_assignment(self, assignment: Assignment, generation: int) -> None:
        self._last_assignment = assignment.partitions
        self._generation = generation

    def subscription_user_data(
        self, topics: Collection[str], owned: Collection[TopicPartition], generation: int
    ) -> bytes | None:
        """The last assignment and its generation in Java's format; before any assignment, ``owned``
        and ``generation`` if ``owned`` is not empty, else None (as Java sends)."""
        if self._last_assignment is not None:
            return encode_sticky_user_data(self._last_assignment, self._generation)
        if owned:
            return encode_sticky_user_data(sorted_partitions(owned), generation)
        return None

    @staticmethod
    def member_claims(member: GroupMember) -> MemberClaims:
        """What ``member`` claims, read from its user data only (as Java does: under the eager
        protocol the subscription's owned partitions are empty)."""
        data = member.subscription.user_data
        if not data:
            return MemberClaims()
        partitions, generation = decode_sticky_user_data(data)
        return MemberClaims(tuple(partitions), DEFAULT_GENERATION if generation is None else generation)

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        members: Mapping[str, GroupMember],
        partition_racks: PartitionRacks | None = None,
    ) -> dict[str, Assignment]:
        claims = {member_id: self.member_claims(member) for member_id, member in members.items()}
        assigned = sticky_assignment(partitions_per_topic, members, claims, partition_racks)
        return {member_id: Assignment(sorted_partitions(parts)) for member_id, parts in assigned.items()}


class CooperativeStickyAssignor(PartitionAssignor):
    """The "cooperative-sticky" assignor: the sticky assignment with KIP-429's two-phase hand-over.

    Supports both protocols and prefers COOPERATIVE. Members send their owned partitions and
    generation in the subscription (v2+); the user data carries the generation again as one int32
    for leaders that read subscriptions older than v2 (Java's format).
    """

    name = "cooperative-sticky"
    supported_protocols = (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)

    def subscription_user_data(
        self, topics: Collection[str], owned: Collection[TopicPartition], generation: int
    ) -> bytes | None:
        return _I32.pack(generation)

    @staticmethod
    def member_claims(member: GroupMember) -> MemberClaims:
        """What ``member`` claims: its owned partitions, with the subscription's generation (v2+) or
        else the one in its user data."""
        sub = member.subscription
        generation = sub.generation_id
        if generation < 0:
            generation = _decode_cooperative_user_data(sub.user_data)
        return MemberClaims(sub.owned_partitions, generation)

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        members: Mapping[str, GroupMember],
        partition_racks: PartitionRacks | None = None,
    ) -> dict[str, Assignment]:
        claims = {member_id: self.member_claims(member) for member_id, member in members.items()}
        assigned = sticky_assignment(partitions_per_topic, members, claims, partition_racks)

        # A partition that moves to a member which did not claim it, while another member does,
        # must first be revoked by that member: leave it out of this round.
        claimed = {tp for claim in claims.values() for tp in claim.partitions}
        result: dict[str, Assignment] = {}
        for member_id, parts in assigned.items():
            own = set(claims[member_id].partitions)
            kept = [tp for tp in parts if tp in own or tp not in claimed]
            result[member_id] = Assignment(sorted_partitions(kept))
        return result
