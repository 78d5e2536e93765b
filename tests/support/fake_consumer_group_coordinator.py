"""An in-memory KIP-848 group coordinator, and a driver of real consumer-protocol members.

Not a test module. Tests import it as ``from support.fake_consumer_group_coordinator import ...``.

* :class:`FakeConsumerGroupCoordinator` answers ConsumerGroupHeartbeat and OffsetCommit the way
  Kafka's ``GroupMetadataManager`` does for ``group.protocol=consumer`` groups, and hands
  Metadata, FindCoordinator and OffsetFetch to a :class:`fakes.FakeCluster` (topics with ids,
  committed offsets), through :class:`fake_group_coordinator.CoordinatorBase`, which it shares
  with the classic fake. Kafka's rules, as modelled:

  - **Requests** are validated as ``throwIfConsumerGroupHeartbeatRequestIsInvalid`` does
    (INVALID_REQUEST: empty member id at v1, a join without RebalanceTimeoutMs, subscription or
    with owned partitions, epoch -2 without an instance id, an epoch below -2), an unknown
    ServerAssignor gets UNSUPPORTED_ASSIGNOR and an unparsable regex INVALID_REGULAR_EXPRESSION.
  - **Epochs.** The group epoch is bumped when a member joins or leaves, a subscription changes
    or the subscribed topics' metadata (ids, partition counts) changes; the target assignment is
    then recomputed at once by a server-side assignor over the members in the order they
    joined (their ids are random): ``range`` (the default) or ``uniform`` (round robin over every
    partition). A heartbeat's epoch must *equal* the member's (else FENCED_MEMBER_EPOCH; Kafka
    also takes the previous epoch with a subset of the partitions, which this fake does not); an
    unknown member id gets UNKNOWN_MEMBER_ID. Epoch 0 joins, and from a known member id is a
    rejoin: the member's partitions are released and it joins afresh with the same id.
  - **Reconciliation** (Kafka's ``CurrentAssignmentBuilder``). A member behind the target epoch
    first revokes what left its target: its assignment shrinks, its epoch stays, and the revoked
    partitions stay *pending revocation* until a heartbeat's TopicPartitions no longer hold them.
    Then its epoch moves to the target epoch and it gets the partitions of its target that no
    other member holds or still has to revoke; the others follow on later heartbeats, once
    released (Kafka's UNRELEASED_PARTITIONS, without an epoch bump). So a partition reaches its
    new owner only after the previous owner acknowledged it gave it up. A member that does not
    revoke within its rebalance timeout is removed.
  - **Responses** carry the assignment on a full request (epoch 0, or RebalanceTimeoutMs,
    SubscribedTopicNames and TopicPartitions all set) or when the member's assignment changed,
    else null; every success carries :attr:`FakeConsumerGroupCoordinator.heartbeat_interval_ms`.
  - **Leaving.** Epoch -1 removes the member; -2 (a static member) keeps its place and its
    partitions until its session expires or a new member with the same instance id joins and
    takes them over (an instance id still in use gets UNRELEASED_INSTANCE_ID).
  - **Sessions** expire ``session_timeout_ms`` after a member's last heartbeat, on the injected
    clock (:meth:`FakeConsumerGroupCoordinator.tick`).
  - **OffsetCommit** (v9) is validated as ``ConsumerGroup.validateOffsetCommit``: anyone may
    commit with epoch -1 to a group without members; otherwise the member must exist
    (UNKNOWN_MEMBER_ID), commit at v9 or later (UNSUPPORTED_VERSION) and with its exact epoch
    (STALE_MEMBER_EPOCH).

  Faults: error codes per request kind (:meth:`~fake_group_coordinator.CoordinatorBase.inject`),
  removal of a member (:meth:`FakeConsumerGroupCoordinator.remove_member`).
* :class:`ConsumerGroupDriver` is :class:`fake_group_coordinator.GroupDriver` for
  ``group.protocol=consumer`` members: the same :class:`~fake_group_coordinator.Member` (a
  ``ConsumerMembershipManager`` built by ``build_consumer_components``), the same loop, clock and
  network faults.

Nothing reads a clock or opens a socket: time is ``ConsumerGroupDriver.now_ms``.
"""

from __future__ import annotations

import enum
import itertools
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kaflux.consumer.member_state import MemberState
from kaflux.protocol.messages.consumer_group_heartbeat import (
    Assignment,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupHeartbeatResponseTopicPartitions,
)
from kaflux.protocol.messages.offset_commit import (
    OffsetCommitRequest,
)
from kaflux.structs import TopicPartition

from support.fake_group_coordinator import CoordinatorBase, DriverBase, Exchange, Member, Reply
from support.fakes import FakeCluster

# Kafka error codes the coordinator answers with.
NONE = 0
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
UNKNOWN_MEMBER_ID = 25
GROUP_AUTHORIZATION_FAILED = 30
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42
GROUP_ID_NOT_FOUND = 69
FENCED_INSTANCE_ID = 82
INVALID_REGULAR_EXPRESSION = 128  # Kafka's Errors (109 is OFFSET_MOVED_TO_TIERED_STORAGE)
FENCED_MEMBER_EPOCH = 110
UNRELEASED_INSTANCE_ID = 111
UNSUPPORTED_ASSIGNOR = 112
STALE_MEMBER_EPOCH = 113

JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
#: OffsetCommit carries the member epoch from v9 (KIP-848)
_COMMIT_MEMBER_EPOCH_VERSION = 9

#: a partition as the protocol names it
TopicIdPartition = tuple[uuid.UUID, int]


class ConsumerGroupState(enum.Enum):
    """Kafka's ConsumerGroup states (Dead is not modelled)."""

    EMPTY = "Empty"
    RECONCILING = "Reconciling"
    STABLE = "Stable"


@dataclass(slots=True)
class ConsumerGroupMember:
    """One member as the coordinator sees it."""

    member_id: str
    instance_id: str | None
    #: the member's place in the join order (the assignors sort by it)
    joined: int
    session_deadline_ms: int
    member_epoch: int = 0
    previous_member_epoch: int = -1
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    #: the partitions the member may own now
    assigned: frozenset[TopicIdPartition] = frozenset()
    #: the partitions it was told to give up and has not acknowledged giving up yet
    pending_revocation: frozenset[TopicIdPartition] = frozenset()
    revocation_deadline_ms: int | None = None
    #: what it last said it owns (a heartbeat's TopicPartitions); None: never said
    owned: frozenset[TopicIdPartition] | None = None

    def subscribes_to(self, topic: str) -> bool:
        regex = self.subscribed_topic_regex
        return topic in self.subscribed_topic_names or bool(regex and re.fullmatch(regex, topic))

    @property
    def left_static(self) -> bool:
        """A static member that left with epoch -2: it keeps its place until its session ends."""
        return self.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH


@dataclass(slots=True)
class ConsumerGroup:
    """One KIP-848 group."""

    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    #: member id -> its target assignment (of the assignment epoch)
    target: dict[str, frozenset[TopicIdPartition]] = field(default_factory=dict)
    #: group.instance.id -> member id
    static: dict[str, str] = field(default_factory=dict)
    #: subscribed topic name -> (id, partition count), as the last target was computed from
    subscription_metadata: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)

    def reconciled(self, member: ConsumerGroupMember) -> bool:
        """The member is at the target epoch with exactly its target and nothing to revoke."""
        return (
            member.member_epoch == self.assignment_epoch
            and not member.pending_revocation
            and member.assigned == self.target.get(member.member_id, frozenset())
        )

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if all(self.reconciled(m) for m in self.members.values() if not m.left_static):
            return ConsumerGroupState.STABLE
        return ConsumerGroupState.RECONCILING

    def owner(self, tp: TopicIdPartition) -> str | None:
        """The member that holds ``tp`` (assigned, or still to revoke)."""
        for member in self.members.values():
            if tp in member.assigned or tp in member.pending_revocation:
                return member.member_id
        return None


class FakeConsumerGroupCoordinator(CoordinatorBase):
    """KIP-848 group coordinator semantics over a :class:`FakeCluster` (see the module doc)."""

    GROUP_APIS = (ConsumerGroupHeartbeatRequest, OffsetCommitRequest)
    GENERATION_WORD = "epoch"
    ASSIGNORS = ("range", "uniform")

    def __init__(
        self,
        cluster: FakeCluster | None = None,
        *,
        max_versions: Mapping[type[Any], int] | None = None,
        heartbeat_interval_ms: int = 1_000,
        session_timeout_ms: int = 10_000,
        assignor: str = "range",
    ) -> None:
        super().__init__(cluster, max_versions=max_versions)
        #: ``group.consumer.heartbeat.interval.ms``: sent in every successful response
        self.heartbeat_interval_ms = heartbeat_interval_ms
        #: ``group.consumer.session.timeout.ms``
        self.session_timeout_ms = session_timeout_ms
        #: the assignor used when a member names none
        self.assignor = assignor
        self.groups: dict[str, ConsumerGroup] = {}
        self._join_order = itertools.count()

    # -- inspection ------------------------------------------------------------------------------

    def group(self, group_id: str) -> ConsumerGroup:
        return self.groups.setdefault(group_id, ConsumerGroup(group_id))

    def topic_partition(self, tp: TopicIdPartition) -> TopicPartition:
        """The name of a partition the protocol names by topic id."""
        topic_id, partition = tp
        name = next(t.name for t in self.cluster.topics.values() if t.topic_id == topic_id)
        return TopicPartition(name, partition)

    def names(self, partitions: Iterable[TopicIdPartition]) -> set[TopicPartition]:
        return {self.topic_partition(tp) for tp in partitions}

    def topic_id_partition(self, tp: TopicPartition) -> TopicIdPartition:
        return (self.cluster.topics[tp.topic].topic_id, tp.partition)

    # -- faults and time -----------------------------------------------------------------------------

    def remove_member(self, group_id: str, member_id: str, now_ms: int) -> None:
        """Remove a member as if its session expired (or an admin removed it)."""
        self._now_ms = now_ms
        group = self.group(group_id)
        self._remove(group, group.members[member_id], "removed by the test")

    def tick(self, now_ms: int) -> None:
        """Expire sessions; remove members that did not revoke within their rebalance timeout."""
        self._now_ms = now_ms
        for group in self.groups.values():
            for member in list(group.members.values()):
                if now_ms >= member.session_deadline_ms:
                    self._remove(group, member, "session expired")
                elif member.revocation_deadline_ms is not None and now_ms >= member.revocation_deadline_ms:
                    self._remove(group, member, "did not revoke within its rebalance timeout")

    def _handlers(self) -> dict[type[Any], Callable[[int, Any, int, int, Reply], None]]:
        return {
            ConsumerGroupHeartbeatRequest: self._heartbeat,
            OffsetCommitRequest: self._offset_commit,
        }

    # -- the group -----------------------------------------------------------------------------------

    def _remove(self, group: ConsumerGroup, member: ConsumerGroupMember, reason: str) -> None:
        del group.members[member.member_id]
        group.target.pop(member.member_id, None)
        if member.instance_id is not None and group.static.get(member.instance_id) == member.member_id:
            del group.static[member.instance_id]
        self._log(group, f"{member.member_id} left: {reason}")
        self._bump(group)

    def _subscription_metadata(self, group: ConsumerGroup) -> dict[str, tuple[uuid.UUID, int]]:
        return {
            name: (topic.topic_id, len(topic.partitions))
            for name, topic in self.cluster.topics.items()
            if any(m.subscribes_to(name) for m in group.members.values())
        }

    def _bump(self, group: ConsumerGroup) -> None:
        """A new group epoch, and the target assignment computed for it at once."""
        group.group_epoch += 1
        group.subscription_metadata = self._subscription_metadata(group)
        group.target = self._assign(group)
        group.assignment_epoch = group.group_epoch
        self._log(
            group,
            f"epoch {group.group_epoch}: target "
            + str({m: sorted(map(str, self.names(t))) for m, t in group.target.items()}),
        )

    def _assign(self, group: ConsumerGroup) -> dict[str, frozenset[TopicIdPartition]]:
        members = sorted(group.members.values(), key=lambda m: m.joined)
        chosen = next((m.server_assignor for m in members if m.server_assignor), None) or self.assignor
        target: dict[str, set[TopicIdPartition]] = {m.member_id: set() for m in members}
        if chosen == "uniform":
            every = [
                (name, p)
                for name in sorted(group.subscription_metadata)
                for p in range(group.subscription_metadata[name][1])
            ]
            for turn, (name, p) in enumerate(every):
                subscribers = [m for m in members if m.subscribes_to(name)]
                owner = subscribers[turn % len(subscribers)]
                target[owner.member_id].add((group.subscription_metadata[name][0], p))
        else:  # range, per topic
            for name in sorted(group.subscription_metadata):
                topic_id, count = group.subscription_metadata[name]
                subscribers = [m for m in members if m.subscribes_to(name)]
                per, extra = divmod(count, len(subscribers))
                start = 0
                for i, member in enumerate(subscribers):
                    size = per + (1 if i < extra else 0)
                    target[member.member_id].update((topic_id, p) for p in range(start, start + size))
                    start += size
        return {member_id: frozenset(tps) for member_id, tps in target.items()}

    def _is_free(self, group: ConsumerGroup, member: ConsumerGroupMember, tp: TopicIdPartition) -> bool:
        owner = group.owner(tp)
        return owner is None or owner == member.member_id

    def _next_assignment(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        """Move the member towards the current target: revoke first, then the new epoch."""
        target = group.target.get(member.member_id, frozenset())
        revoke = member.assigned - target
        if revoke:
            member.assigned = member.assigned & target
            member.pending_revocation = revoke
            member.revocation_deadline_ms = self._now_ms + max(0, member.rebalance_timeout_ms)
            return
        member.previous_member_epoch = member.member_epoch
        member.member_epoch = group.assignment_epoch
        member.assigned = member.assigned | {tp for tp in target if self._is_free(group, member, tp)}

    def _reconcile(self, group: ConsumerGroup, member: ConsumerGroupMember, reported_owned: bool) -> None:
        if member.pending_revocation:
            owned = member.owned if member.owned is not None else frozenset()
            if reported_owned and not owned & member.pending_revocation:
                member.pending_revocation = frozenset()
                member.revocation_deadline_ms = None
                self._next_assignment(group, member)
            return
        if member.member_epoch != group.assignment_epoch:
            self._next_assignment(group, member)
            return
        target = group.target.get(member.member_id, frozenset())
        released = {tp for tp in target - member.assigned if self._is_free(group, member, tp)}
        if released:
            member.assigned = member.assigned | released

    # -- ConsumerGroupHeartbeat ------------------------------------------------------------------------

    def _error(self, code: int, message: str | None = None) -> ConsumerGroupHeartbeatResponse:
        return ConsumerGroupHeartbeatResponse(error_code=code, error_message=message, member_epoch=-1)

    def _invalid(self, req: ConsumerGroupHeartbeatRequest, version: int) -> str | None:
        """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid (INVALID_REQUEST)."""
        if not req.group_id:
            return "GroupId can't be empty."
        if not req.member_id and (version >= 1 or req.member_epoch != JOIN_GROUP_MEMBER_EPOCH):
            return "MemberId can't be empty."
        if req.instance_id is not None and not req.instance_id:
            return "InstanceId can't be empty."
        if req.rack_id is not None and not req.rack_id:
            return "RackId can't be empty."
        if req.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
            if req.rebalance_timeout_ms == -1:
                return "RebalanceTimeoutMs must be provided in first request."
            if req.topic_partitions is None or req.topic_partitions:
                return "TopicPartitions must be empty when (re-)joining."
            if req.subscribed_topic_names is None and not req.subscribed_topic_regex:
                return "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
        elif req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH and req.instance_id is None:
            return "InstanceId can't be null."
        elif req.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            return f"MemberEpoch is invalid: {req.member_epoch}"
        return None

    def _heartbeat(
        self, broker: int, req: ConsumerGroupHeartbeatRequest, version: int, now: int, reply: Reply
    ) -> None:
        code = self._take_fault(ConsumerGroupHeartbeatRequest, req.member_id)
        if not code and not self._is_coordinator(broker, req.group_id):
            code = NOT_COORDINATOR
        if code:
            reply(self._error(code, "injected" if code != NOT_COORDINATOR else None))
            return
        invalid = self._invalid(req, version)
        if invalid is not None:
            reply(self._error(INVALID_REQUEST, invalid))
            return
        if req.server_assignor is not None and req.server_assignor not in self.ASSIGNORS:
            reply(
                self._error(UNSUPPORTED_ASSIGNOR, f"ServerAssignor {req.server_assignor} is not supported.")
            )
            return
        if req.subscribed_topic_regex:
            try:
                re.compile(req.subscribed_topic_regex)
            except re.error as exc:
                reply(self._error(INVALID_REGULAR_EXPRESSION, str(exc)))
                return
        if req.group_id not in self.groups and req.member_epoch != JOIN_GROUP_MEMBER_EPOCH:
            reply(self._error(GROUP_ID_NOT_FOUND, f"Group {req.group_id} not found."))
            return
        group = self.group(req.group_id)
        if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            reply(self._leave(group, req))
        else:
            reply(self._member_heartbeat(group, req, now))

    def _leave(
        self, group: ConsumerGroup, req: ConsumerGroupHeartbeatRequest
    ) -> ConsumerGroupHeartbeatResponse:
        if req.instance_id is None:
            member = group.members.get(req.member_id)
            if member is None:
                return self._error(UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of the group.")
        else:
            member = group.members.get(group.static.get(req.instance_id, ""))
            if member is None:
                return self._error(UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
            if member.member_id != req.member_id:
                return self._error(
                    FENCED_INSTANCE_ID, f"Instance id {req.instance_id} belongs to another member."
                )
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # It keeps its place and partitions until its session expires or it is replaced.
            member.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH
            member.session_deadline_ms = self._now_ms + self.session_timeout_ms
            self._log(group, f"{member.member_id} left temporarily (static, epoch -2)")
        else:
            self._remove(group, member, "left with epoch -1")
        return ConsumerGroupHeartbeatResponse(
            member_id=req.member_id,
            member_epoch=req.member_epoch,
            heartbeat_interval_ms=self.heartbeat_interval_ms,
        )

    def _join(
        self, group: ConsumerGroup, req: ConsumerGroupHeartbeatRequest, now: int
    ) -> ConsumerGroupMember | int:
        """The member of an epoch-0 heartbeat (new, rejoining or replacing a static one), or an error."""
        member = group.members.get(req.member_id)
        if req.instance_id is not None:
            holder = group.members.get(group.static.get(req.instance_id, ""))
            if holder is not None and holder.member_id != req.member_id:
                if not holder.left_static:
                    return UNRELEASED_INSTANCE_ID
                # The new instance takes the old one's place, partitions and target.
                del group.members[holder.member_id]
                replaced = ConsumerGroupMember(
                    req.member_id,
                    req.instance_id,
                    holder.joined,
                    now + self.session_timeout_ms,
                    subscribed_topic_names=holder.subscribed_topic_names,
                    subscribed_topic_regex=holder.subscribed_topic_regex,
                    assigned=holder.assigned,
                )
                group.members[req.member_id] = replaced
                group.target[req.member_id] = group.target.pop(holder.member_id, frozenset())
                group.static[req.instance_id] = req.member_id
                self._log(group, f"{req.member_id} replaced static member {holder.member_id}")
                return replaced
        if member is not None:
            # A rejoin with the same id (after a fence): it owns nothing any more.
            member.assigned = frozenset()
            member.pending_revocation = frozenset()
            member.revocation_deadline_ms = None
            member.member_epoch = JOIN_GROUP_MEMBER_EPOCH
            self._log(group, f"{member.member_id} rejoined with epoch 0")
            return member
        member = ConsumerGroupMember(req.member_id, req.instance_id, next(self._join_order), now)
        group.members[req.member_id] = member
        if req.instance_id is not None:
            group.static[req.instance_id] = req.member_id
        self._log(group, f"{req.member_id} joined")
        return member

    def _member_heartbeat(
        self, group: ConsumerGroup, req: ConsumerGroupHeartbeatRequest, now: int
    ) -> ConsumerGroupHeartbeatResponse:
        bump = False
        if req.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
            joined = self._join(group, req, now)
            if isinstance(joined, int):
                return self._error(joined, f"Instance id {req.instance_id} is still in use.")
            member = joined
            bump = member.member_id not in group.target
        else:
            found = group.members.get(req.member_id)
            if found is None:
                return self._error(UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of the group.")
            if req.member_epoch != found.member_epoch:
                return self._error(
                    FENCED_MEMBER_EPOCH,
                    f"The member epoch ({req.member_epoch}) is not the coordinator's ({found.member_epoch}).",
                )
            member = found
        member.session_deadline_ms = now + self.session_timeout_ms
        if req.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.server_assignor is not None:
            member.server_assignor = req.server_assignor
        if req.subscribed_topic_names is not None:
            names = tuple(sorted(set(req.subscribed_topic_names)))
            bump |= names != member.subscribed_topic_names
            member.subscribed_topic_names = names
        if req.subscribed_topic_regex is not None:
            regex = req.subscribed_topic_regex or None
            bump |= regex != member.subscribed_topic_regex
            member.subscribed_topic_regex = regex
        if req.topic_partitions is not None:
            member.owned = frozenset((t.topic_id, p) for t in req.topic_partitions for p in t.partitions)
        if bump or self._subscription_metadata(group) != group.subscription_metadata:
            self._bump(group)
        before = member.assigned
        self._reconcile(group, member, reported_owned=req.topic_partitions is not None)
        full = req.member_epoch == JOIN_GROUP_MEMBER_EPOCH or (
            req.rebalance_timeout_ms != -1
            and req.subscribed_topic_names is not None
            and req.topic_partitions is not None
        )
        assignment = None
        if full or member.assigned != before:
            by_topic: dict[uuid.UUID, list[int]] = {}
            for topic_id, p in sorted(member.assigned, key=lambda tp: (str(tp[0]), tp[1])):
                by_topic.setdefault(topic_id, []).append(p)
            assignment = Assignment(
                topic_partitions=[
                    ConsumerGroupHeartbeatResponseTopicPartitions(topic_id=t, partitions=ps)
                    for t, ps in by_topic.items()
                ]
            )
        return ConsumerGroupHeartbeatResponse(
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            assignment=assignment,
        )

    # -- OffsetCommit ------------------------------------------------------------------------------------

    def _commit_error(self, req: OffsetCommitRequest, version: int) -> int:
        """Kafka's ConsumerGroup.validateOffsetCommit."""
        group = self.groups.get(req.group_id)
        epoch = req.generation_id_or_member_epoch
        if group is None or not group.members:
            return NONE if epoch < 0 else UNKNOWN_MEMBER_ID
        member = group.members.get(req.member_id)
        if member is None:
            return UNKNOWN_MEMBER_ID
        if version < _COMMIT_MEMBER_EPOCH_VERSION:
            return UNSUPPORTED_VERSION
        if epoch != member.member_epoch:
            return STALE_MEMBER_EPOCH
        return NONE


# -- the driver -------------------------------------------------------------------------------------------


class ConsumerGroupDriver(DriverBase):
    """Members of a KIP-848 group (``group.protocol=consumer``) over a
    :class:`FakeConsumerGroupCoordinator`."""

    coordinator: FakeConsumerGroupCoordinator

    def __init__(
        self,
        coordinator: FakeConsumerGroupCoordinator | None = None,
        *,
        topics: Mapping[str, int] | None = None,
        group_id: str = "g",
        step_ms: int = 10,
        latency_ms: int = 0,
        now_ms: int = 0,
    ) -> None:
        super().__init__(
            coordinator if coordinator is not None else FakeConsumerGroupCoordinator(),
            topics=topics,
            group_id=group_id,
            step_ms=step_ms,
            latency_ms=latency_ms,
            now_ms=now_ms,
        )

    def add_member(
        self,
        name: str,
        *,
        topics: Iterable[str] = ("t",),
        instance_id: str | None = None,
        remote_assignor: str | None = None,
        auto_commit: bool = False,
        auto_commit_interval_ms: int = 60_000,
        max_poll_interval_ms: int = 30_000,
        request_timeout_ms: int = 30_000,
        metadata_max_age_ms: int = 300_000,
        has_listener: bool = True,
        subscribe: bool = True,
    ) -> Member:
        """A new ``group.protocol=consumer`` member; it subscribes to ``topics`` (and joins at its
        first poll) by default."""
        settings: dict[str, Any] = {
            "group.protocol": "consumer",
            "group.instance.id": instance_id,
            "group.remote.assignor": remote_assignor,
            "enable.auto.commit": auto_commit,
            "auto.commit.interval.ms": auto_commit_interval_ms,
            "max.poll.interval.ms": max_poll_interval_ms,
            "request.timeout.ms": request_timeout_ms,
            "metadata.max.age.ms": metadata_max_age_ms,
        }
        return self._add(name, settings, topics=topics, has_listener=has_listener, subscribe=subscribe)

    def group(self) -> ConsumerGroup:
        return self.coordinator.group(self.group_id)

    def stable(self, *members: Member) -> bool:
        """These (default: all active) members are STABLE with nothing pending, hold exactly what
        the coordinator gave them at its epoch, and the group is fully reconciled."""
        chosen = members or tuple(self.active())
        group = self.group()
        for m in chosen:
            known = group.members.get(m.member_id)
            if (
                known is None
                or not group.reconciled(known)
                or m.state is not MemberState.STABLE
                or m.pending_callbacks
                or m.manager.generation != known.member_epoch
                or m.assignment() != self.coordinator.names(known.assigned)
            ):
                return False
        return bool(members) or group.state is ConsumerGroupState.STABLE

    def describe(self) -> str:
        group = self.group()
        members = {
            mid: (m.member_epoch, sorted(map(str, self.coordinator.names(m.assigned))))
            for mid, m in group.members.items()
        }
        return f"group {group.state.name} epoch {group.group_epoch} members {members}; " + ", ".join(
            repr(m) for m in self.members.values()
        )

    def heartbeats(self, member: Member) -> list[Exchange]:
        """The ConsumerGroupHeartbeat exchanges of ``member``, oldest first."""
        return member.sent(ConsumerGroupHeartbeatRequest)
