"""An in-memory classic group coordinator, and a driver of real classic memberships against it.

Not a test module. Tests import it as ``from support.fake_group_coordinator import ...``.

* :class:`FakeGroupCoordinator` answers JoinGroup, SyncGroup, Heartbeat, LeaveGroup and
  OffsetCommit the way Kafka's classic ``GroupCoordinator`` does, and hands Metadata,
  FindCoordinator and OffsetFetch to a :class:`fakes.FakeCluster` (which also holds the topics and
  the committed offsets). It models groups in the states Empty, PreparingRebalance,
  CompletingRebalance and Stable; members, generations, the leader (the first joiner, kept while it
  stays); a join that completes once every known member rejoined, or at the rebalance timeout (the
  largest of the members'), removing those that did not; MEMBER_ID_REQUIRED on a first join
  (KIP-394, JoinGroup v4+); REBALANCE_IN_PROGRESS on heartbeats while a rebalance is pending;
  UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION / FENCED_INSTANCE_ID for stale members; session expiry on
  the injected clock (:meth:`FakeGroupCoordinator.tick`); static members (``group.instance.id``,
  KIP-345: a static member rejoining with a new instance takes over the old member's place and
  assignment without a rebalance); OffsetCommit validated as Kafka's ``validateOffsetCommit``
  does. Faults: error codes per request kind (:meth:`FakeGroupCoordinator.inject`), a forced
  protocol choice, removal of a member (:meth:`FakeGroupCoordinator.remove_member`).
* :class:`GroupDriver` owns several :class:`Member` objects, each a ``ClassicMembershipManager`` with its
  own SubscriptionState, ClusterMetadata and MetadataManager, and the coordinator and commit
  managers built with it by ``kaflux.consumer.components.build_consumer_components``, the builder
  ``kaflux.Consumer`` uses (the offsets and fetch managers it also builds are not driven: the
  driver resolves positions itself). Each :meth:`GroupDriver.step`
  plays the application thread (PollEvent, running requested rebalance callbacks and acknowledging
  them), polls every request manager, encodes each request at the negotiated version, decodes it
  for the coordinator, encodes and decodes the response, delivers it, and advances the clock.
  Responses can be held back (:meth:`GroupDriver.hold`) or lost (:meth:`GroupDriver.drop`); an
  unanswered request fails with KafkaTimeoutError at its timeout, as the network client would.

What does not depend on the group protocol is shared with the KIP-848 fake
(``fake_consumer_group_coordinator.py``): :class:`CoordinatorBase` (the fake cluster, supported
versions, injected faults, the log, request dispatch) and :class:`DriverBase` (the members, the
loop, the network and its faults); :class:`Member` builds whichever membership the settings
choose (``group.protocol``).

Nothing reads a clock or opens a socket: time is ``GroupDriver.now_ms``.
"""

from __future__ import annotations

import enum
import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from kaflux.config import ConsumerConfig
from kaflux.consumer.assignors import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
)
from kaflux.consumer.close_options import GroupMembershipOperation
from kaflux.consumer.components import build_consumer_components
from kaflux.consumer.events import BackgroundEvent, ErrorEvent, RebalanceCallbackNeededEvent
from kaflux.consumer.fetch_buffer import FetchBuffer
from kaflux.consumer.member_state import MEMBER_TRANSITIONS, MemberState
from kaflux.consumer.subscription_state import FetchPosition, ResetStrategy, SubscriptionState
from kaflux.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError, UnsupportedVersionError
from kaflux.network.backoff import ExponentialBackoff, RequestState
from kaflux.network.cluster import ClusterMetadata, is_coordinator_node_id
from kaflux.network.metadata_manager import MetadataManager
from kaflux.network.requests import ClientRequest, ClientResponse, UnsentRequest
from kaflux.protocol.messages.find_coordinator import FindCoordinatorRequest
from kaflux.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from kaflux.protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse, JoinGroupResponseMember
from kaflux.protocol.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse, MemberResponse
from kaflux.protocol.messages.metadata import MetadataRequest
from kaflux.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from kaflux.protocol.messages.offset_fetch import OffsetFetchRequest
from kaflux.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse
from kaflux.state_machine import StateMachine
from kaflux.structs import OffsetAndMetadata, TopicPartition

from support.fakes import BrokerDownError, FakeCluster, exact_backoff, roundtrip

# Kafka error codes the coordinator answers with.
NONE = 0
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
GROUP_AUTHORIZATION_FAILED = 30
MEMBER_ID_REQUIRED = 79
FENCED_INSTANCE_ID = 82

#: JoinGroup versions: MEMBER_ID_REQUIRED from v4, static members from v5, skip_assignment in v9
_JOIN_MEMBER_ID_REQUIRED_VERSION = 4
_JOIN_STATIC_VERSION = 5
_JOIN_NULLABLE_PROTOCOL_VERSION = 7
_JOIN_SKIP_ASSIGNMENT_VERSION = 9
_SYNC_PROTOCOL_VERSION = 5
_LEAVE_BATCH_VERSION = 3
_COMMIT_INSTANCE_ID_VERSION = 7
_HEARTBEAT_INSTANCE_ID_VERSION = 3

Reply = Callable[[Any], None]


class GroupState(enum.Enum):
    """The classic group states of Kafka's GroupCoordinator (Dead is not modelled)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"


@dataclass(slots=True)
class FakeMember:
    """One member as the coordinator sees it."""

    member_id: str
    instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    heartbeat_deadline_ms: int
    assignment: bytes = b""
    #: a parked JoinGroup: (reply, version)
    join_reply: tuple[Reply, int] | None = None
    #: a parked SyncGroup: (reply, version)
    sync_reply: tuple[Reply, int] | None = None

    @property
    def awaiting_join(self) -> bool:
        return self.join_reply is not None

    def metadata(self, protocol: str) -> bytes:
        """The metadata sent for ``protocol`` (the first protocol's for a forced unknown one)."""
        return dict(self.protocols).get(protocol, self.protocols[0][1])


@dataclass(frozen=True, slots=True)
class GenerationRecord:
    """A completed join: who was in the generation, who led it, with which protocol."""

    generation: int
    leader: str | None
    members: tuple[str, ...]
    protocol: str | None
    completed_ms: int


@dataclass(slots=True)
class FakeGroup:
    """One classic group."""

    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, FakeMember] = field(default_factory=dict)
    #: members that got MEMBER_ID_REQUIRED and have not joined yet: id -> expiry time
    pending: dict[str, int] = field(default_factory=dict)
    #: group.instance.id -> member id
    static: dict[str, str] = field(default_factory=dict)
    rebalance_deadline_ms: int | None = None
    generations: list[GenerationRecord] = field(default_factory=list)

    def assignments(self) -> dict[str, Assignment]:
        """The decoded current assignment of every member (by member id)."""
        return {mid: decode_assignment(m.assignment) for mid, m in self.members.items()}

    def subscription(self, member_id: str) -> Subscription:
        """The subscription a member sent for the selected protocol (or its first one)."""
        member = self.members[member_id]
        name = self.protocol_name or member.protocols[0][0]
        return decode_subscription(member.metadata(name))


@dataclass(slots=True)
class _Fault:
    api: type[Any]
    error_code: int
    count: int
    member_id: str | None


class CoordinatorBase:
    """What every fake group coordinator shares: the :class:`FakeCluster` it answers Metadata,
    FindCoordinator and OffsetFetch from, the versions it supports, injected faults, its log and
    the dispatch of decoded requests to the handlers a protocol's coordinator lists."""

    #: the request classes the coordinator itself answers (and takes injected faults for)
    GROUP_APIS: tuple[type[Any], ...] = ()
    #: the groups by id (each protocol's coordinator holds its own kind of group)
    groups: dict[str, Any]

    def __init__(
        self,
        cluster: FakeCluster | None = None,
        *,
        max_versions: Mapping[type[Any], int] | None = None,
    ) -> None:
        self.cluster = cluster if cluster is not None else FakeCluster()
        #: the highest version the "broker" supports, per request class (default: all)
        self.max_versions: dict[type[Any], int] = dict(max_versions or {})
        self.faults: list[_Fault] = []
        #: (time, group, what) for every rebalance-relevant event, in order
        self.log: list[tuple[int, str, str]] = []
        self._now_ms = 0

    def _log(self, group: Any, what: str) -> None:
        self.log.append((self._now_ms, group.group_id, what))

    # -- faults --------------------------------------------------------------------------------------

    def inject(
        self, api: type[Any], error_code: int, *, count: int = 1, member_id: str | None = None
    ) -> None:
        """Answer the next ``count`` (-1: all) requests of class ``api`` (of ``member_id`` if given)
        with ``error_code`` without applying them. Metadata, FindCoordinator and OffsetFetch faults
        go to the fake cluster."""
        if api in self.GROUP_APIS:
            self.faults.append(_Fault(api, error_code, count, member_id))
        else:
            self.cluster.inject(api, error_code, count=count)

    def _take_fault(self, api: type[Any], member_id: str) -> int:
        for fault in self.faults:
            if fault.api is api and fault.member_id in (None, member_id):
                if fault.count > 0:
                    fault.count -= 1
                    if fault.count == 0:
                        self.faults.remove(fault)
                return fault.error_code
        return NONE

    # -- time and dispatch ---------------------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        """Let time pass on the coordinator (session expiry...)."""
        self._now_ms = now_ms

    def group(self, group_id: str) -> Any:
        raise NotImplementedError

    def _handlers(self) -> dict[type[Any], Callable[[int, Any, int, int, Reply], None]]:
        """The handler of each request class in :attr:`GROUP_APIS`."""
        raise NotImplementedError

    def handle(self, broker_id: int, request: Any, version: int, now_ms: int, reply: Reply) -> None:
        """Apply ``request`` (decoded at ``version``) received by broker ``broker_id`` at ``now_ms``;
        ``reply(response)`` is called now, or later for a request that has to wait."""
        self._now_ms = now_ms
        handler = self._handlers().get(type(request))
        if handler is not None:
            if broker_id in self.cluster.stopped or broker_id not in self.cluster.brokers:
                raise BrokerDownError(f"broker {broker_id} is down")
            handler(broker_id, request, version, now_ms, reply)
            return
        if isinstance(request, MetadataRequest | FindCoordinatorRequest | OffsetFetchRequest):
            reply(self.cluster.handle(broker_id, request, version))
            return
        raise NotImplementedError(f"{type(self).__name__} does not answer {type(request).__name__}")

    #: how the logs name what an OffsetCommit carries: a generation, or a member epoch
    GENERATION_WORD = "gen"

    def _commit_error(self, req: OffsetCommitRequest, version: int) -> int:
        raise NotImplementedError

    def _offset_commit(
        self, broker: int, req: OffsetCommitRequest, version: int, now: int, reply: Reply
    ) -> None:
        code = self._take_fault(OffsetCommitRequest, req.member_id)
        if not code and not self._is_coordinator(broker, req.group_id):
            code = NOT_COORDINATOR
        if not code:
            code = self._commit_error(req, version)
        topics = []
        for t in req.topics:
            for p in t.partitions:
                if not code:
                    self.cluster.commit(
                        req.group_id,
                        TopicPartition(t.name, p.partition_index),
                        p.committed_offset,
                        p.committed_metadata or "",
                        p.committed_leader_epoch,
                    )
            topics.append(
                OffsetCommitResponseTopic(
                    name=t.name,
                    partitions=[
                        OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
                        for p in t.partitions
                    ],
                )
            )
        group = self.groups.get(req.group_id)
        if group is not None:
            who = f"{req.member_id or '-'} {self.GENERATION_WORD} {req.generation_id_or_member_epoch}"
            self._log(group, f"commit by {who}: {code}")
        reply(OffsetCommitResponse(topics=topics))

    def _is_coordinator(self, broker_id: int, group_id: str) -> bool:
        return self.cluster.coordinator_for(group_id) == broker_id


class FakeGroupCoordinator(CoordinatorBase):
    """Classic group coordinator semantics over a :class:`FakeCluster` (see the module doc)."""

    GROUP_APIS = (
        JoinGroupRequest,
        SyncGroupRequest,
        HeartbeatRequest,
        LeaveGroupRequest,
        OffsetCommitRequest,
    )

    def __init__(
        self,
        cluster: FakeCluster | None = None,
        *,
        max_versions: Mapping[type[Any], int] | None = None,
    ) -> None:
        super().__init__(cluster, max_versions=max_versions)
        self.groups: dict[str, FakeGroup] = {}
        #: protocol name to select regardless of the members' votes (fault injection)
        self.forced_protocol: str | None = None
        self._ids = itertools.count(1)

    # -- inspection --------------------------------------------------------------------------------

    def group(self, group_id: str) -> FakeGroup:
        return self.groups.setdefault(group_id, FakeGroup(group_id))

    def remove_member(self, group_id: str, member_id: str, now_ms: int) -> None:
        """Remove a member as if its session expired (or an admin removed it)."""
        self._now_ms = now_ms
        group = self.group(group_id)
        self._remove_and_rebalance(group, group.members[member_id], now_ms, "removed by the test")

    # -- time ----------------------------------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        """Expire sessions and pending members; complete a join whose rebalance timeout passed."""
        self._now_ms = now_ms
        for group in self.groups.values():
            for member_id, expiry in list(group.pending.items()):
                if now_ms >= expiry:
                    del group.pending[member_id]
                    self._log(group, f"pending member {member_id} expired")
                    self._maybe_complete_join(group, now_ms)
            for member in list(group.members.values()):
                if member.member_id not in group.members:
                    continue
                waiting = member.awaiting_join or member.sync_reply is not None
                if not waiting and now_ms >= member.heartbeat_deadline_ms:
                    self._remove_and_rebalance(group, member, now_ms, "session expired")
            if (
                group.state is GroupState.PREPARING_REBALANCE
                and group.rebalance_deadline_ms is not None
                and now_ms >= group.rebalance_deadline_ms
            ):
                group.pending.clear()
                self._complete_join(group, now_ms)

    # -- dispatch ------------------------------------------------------------------------------------

    def _handlers(self) -> dict[type[Any], Callable[[int, Any, int, int, Reply], None]]:
        """JoinGroup and SyncGroup may answer later (the join completes when every member rejoined)."""
        return {
            JoinGroupRequest: self._join_group,
            SyncGroupRequest: self._sync_group,
            HeartbeatRequest: self._heartbeat,
            LeaveGroupRequest: self._leave_group,
            OffsetCommitRequest: self._offset_commit,
        }

    def _new_member_id(self, instance_id: str | None) -> str:
        return f"{instance_id or 'member'}-{next(self._ids):04d}"

    def _unknown_member_error(self, group: FakeGroup, member_id: str, instance_id: str | None) -> int | None:
        """FENCED_INSTANCE_ID / UNKNOWN_MEMBER_ID for a request of a member not in the group."""
        if instance_id is not None and group.static.get(instance_id) not in (None, member_id):
            return FENCED_INSTANCE_ID
        if member_id not in group.members:
            return UNKNOWN_MEMBER_ID
        return None

    # -- JoinGroup -------------------------------------------------------------------------------------

    def _join_response(
        self,
        version: int,
        *,
        error_code: int = NONE,
        member_id: str = "",
        group: FakeGroup | None = None,
        members: Iterable[FakeMember] = (),
        skip_assignment: bool = False,
    ) -> JoinGroupResponse:
        if group is None or error_code:
            nullable = version >= _JOIN_NULLABLE_PROTOCOL_VERSION
            return JoinGroupResponse(
                error_code=error_code,
                generation_id=-1,
                protocol_type=None,
                protocol_name=None if nullable else "",
                leader="",
                member_id=member_id,
            )
        protocol = group.protocol_name or ""
        return JoinGroupResponse(
            error_code=NONE,
            generation_id=group.generation,
            protocol_type=group.protocol_type,
            protocol_name=protocol,
            leader=group.leader_id or "",
            skip_assignment=skip_assignment and version >= _JOIN_SKIP_ASSIGNMENT_VERSION,
            member_id=member_id,
            members=[
                JoinGroupResponseMember(
                    member_id=m.member_id,
                    group_instance_id=m.instance_id if version >= _JOIN_STATIC_VERSION else None,
                    metadata=m.metadata(protocol),
                )
                for m in members
            ],
        )

    def _current_join_response(self, group: FakeGroup, member: FakeMember, version: int) -> JoinGroupResponse:
        """What a member that rejoins without causing a rebalance gets: the current generation."""
        leader = member.member_id == group.leader_id
        members = list(group.members.values()) if leader else []
        return self._join_response(
            version, member_id=member.member_id, group=group, members=members, skip_assignment=leader
        )

    def _supports(self, group: FakeGroup, protocol_type: str, names: list[str]) -> bool:
        if not group.members:
            return bool(protocol_type) and bool(names)
        if protocol_type != group.protocol_type:
            return False
        common = self._common_protocols(group.members.values())
        return any(name in common for name in names)

    @staticmethod
    def _common_protocols(members: Iterable[FakeMember]) -> set[str]:
        sets = [{name for name, _ in m.protocols} for m in members]
        return set.intersection(*sets) if sets else set()

    def _select_protocol(self, group: FakeGroup) -> str:
        if self.forced_protocol is not None:
            return self.forced_protocol
        members = list(group.members.values())
        common = self._common_protocols(members)
        votes: Counter[str] = Counter()
        for m in members:
            votes[next(name for name, _ in m.protocols if name in common)] += 1
        first_choice = [name for name, _ in members[0].protocols if name in common]
        return max(first_choice, key=lambda name: (votes[name], -first_choice.index(name)))

    def _join_group(self, broker: int, req: JoinGroupRequest, version: int, now: int, reply: Reply) -> None:
        def fail(code: int, member_id: str = "") -> None:
            reply(self._join_response(version, error_code=code, member_id=member_id))

        code = self._take_fault(JoinGroupRequest, req.member_id)
        if code:
            fail(code, req.member_id)
            return
        if not self._is_coordinator(broker, req.group_id):
            fail(NOT_COORDINATOR)
            return
        group = self.group(req.group_id)
        instance = req.group_instance_id if version >= _JOIN_STATIC_VERSION else None
        protocols = [(p.name, bytes(p.metadata)) for p in req.protocols]
        if not self._supports(group, req.protocol_type, [name for name, _ in protocols]):
            fail(INCONSISTENT_GROUP_PROTOCOL, req.member_id)
            return
        rebalance_timeout = req.rebalance_timeout_ms if version >= 1 else req.session_timeout_ms

        def new_member(member_id: str) -> FakeMember:
            return FakeMember(
                member_id,
                instance,
                req.session_timeout_ms,
                rebalance_timeout,
                req.protocol_type,
                protocols,
                now + req.session_timeout_ms,
                join_reply=(reply, version),
            )

        if not req.member_id:
            if instance is not None and instance in group.static:
                self._replace_static_member(group, instance, new_member, reply, version, now)
                return
            member_id = self._new_member_id(instance)
            if instance is None and version >= _JOIN_MEMBER_ID_REQUIRED_VERSION:
                group.pending[member_id] = now + req.session_timeout_ms
                self._log(group, f"{member_id} must rejoin with its member id")
                fail(MEMBER_ID_REQUIRED, member_id)
                return
            self._add_member(group, new_member(member_id), now)
            return
        if req.member_id in group.pending:
            del group.pending[req.member_id]
            self._add_member(group, new_member(req.member_id), now)
            return
        error = self._unknown_member_error(group, req.member_id, instance)
        if error is not None:
            fail(error, req.member_id)
            return
        member = group.members[req.member_id]
        self._rejoin(group, member, protocols, rebalance_timeout, req.session_timeout_ms, reply, version, now)

    def _add_member(self, group: FakeGroup, member: FakeMember, now: int) -> None:
        if group.leader_id is None:
            group.leader_id = member.member_id
        if group.protocol_type is None:
            group.protocol_type = member.protocol_type
        group.members[member.member_id] = member
        if member.instance_id is not None:
            group.static[member.instance_id] = member.member_id
        self._log(group, f"{member.member_id} joined")
        self._prepare_rebalance(group, now, f"{member.member_id} joined")
        self._maybe_complete_join(group, now)

    def _rejoin(
        self,
        group: FakeGroup,
        member: FakeMember,
        protocols: list[tuple[str, bytes]],
        rebalance_timeout: int,
        session_timeout: int,
        reply: Reply,
        version: int,
        now: int,
    ) -> None:
        same = member.protocols == protocols
        member.rebalance_timeout_ms = rebalance_timeout
        member.session_timeout_ms = session_timeout
        member.heartbeat_deadline_ms = now + session_timeout
        if group.state is GroupState.PREPARING_REBALANCE:
            member.protocols = protocols
            member.join_reply = (reply, version)
            self._maybe_complete_join(group, now)
            return
        leader = member.member_id == group.leader_id
        if (group.state is GroupState.COMPLETING_REBALANCE and same) or (
            group.state is GroupState.STABLE and same and not leader
        ):
            reply(self._current_join_response(group, member, version))
            return
        member.protocols = protocols
        member.join_reply = (reply, version)
        self._prepare_rebalance(group, now, f"{member.member_id} rejoined")
        self._maybe_complete_join(group, now)

    def _replace_static_member(
        self,
        group: FakeGroup,
        instance: str,
        new_member: Callable[[str], FakeMember],
        reply: Reply,
        version: int,
        now: int,
    ) -> None:
        old = group.members[group.static[instance]]
        if old.join_reply is not None:
            join_reply, join_version = old.join_reply
            join_reply(
                self._join_response(join_version, error_code=FENCED_INSTANCE_ID, member_id=old.member_id)
            )
        if old.sync_reply is not None:
            sync_reply, sync_version = old.sync_reply
            sync_reply(self._sync_response(sync_version, FENCED_INSTANCE_ID))
        member = new_member(self._new_member_id(instance))
        member.assignment = old.assignment
        member.join_reply = None
        group.members = {
            (member.member_id if mid == old.member_id else mid): (member if mid == old.member_id else m)
            for mid, m in group.members.items()
        }
        group.static[instance] = member.member_id
        if group.leader_id == old.member_id:
            group.leader_id = member.member_id
        self._log(group, f"static member {instance}: {old.member_id} replaced by {member.member_id}")
        if group.state is GroupState.STABLE and self._select_protocol(group) == group.protocol_name:
            reply(self._current_join_response(group, member, version))
            return
        member.join_reply = (reply, version)
        self._prepare_rebalance(group, now, f"static member {instance} rejoined")
        self._maybe_complete_join(group, now)

    def _prepare_rebalance(self, group: FakeGroup, now: int, reason: str) -> None:
        if group.state is GroupState.COMPLETING_REBALANCE:
            for m in group.members.values():
                m.assignment = b""
                if m.sync_reply is not None:
                    sync_reply, sync_version = m.sync_reply
                    m.sync_reply = None
                    sync_reply(self._sync_response(sync_version, REBALANCE_IN_PROGRESS))
        if group.state is not GroupState.PREPARING_REBALANCE:
            group.state = GroupState.PREPARING_REBALANCE
            timeouts = [m.rebalance_timeout_ms for m in group.members.values()]
            group.rebalance_deadline_ms = now + (max(timeouts) if timeouts else 0)
            self._log(group, f"preparing rebalance: {reason}")

    def _maybe_complete_join(self, group: FakeGroup, now: int) -> None:
        if group.state is not GroupState.PREPARING_REBALANCE:
            return
        if all(m.awaiting_join for m in group.members.values()) and not group.pending:
            self._complete_join(group, now)

    def _complete_join(self, group: FakeGroup, now: int) -> None:
        for member in list(group.members.values()):
            if not member.awaiting_join:
                self._remove(group, member, "did not rejoin before the rebalance timeout")
        group.generation += 1
        group.rebalance_deadline_ms = None
        if not group.members:
            group.state = GroupState.EMPTY
            group.protocol_name = None
            group.protocol_type = None
            group.leader_id = None
            group.generations.append(GenerationRecord(group.generation, None, (), None, now))
            self._log(group, f"generation {group.generation}: empty")
            return
        group.protocol_name = self._select_protocol(group)
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        group.state = GroupState.COMPLETING_REBALANCE
        group.generations.append(
            GenerationRecord(
                group.generation, group.leader_id, tuple(group.members), group.protocol_name, now
            )
        )
        self._log(group, f"generation {group.generation}: members {list(group.members)}")
        all_members = list(group.members.values())
        for member in all_members:
            assert member.join_reply is not None
            join_reply, version = member.join_reply
            member.join_reply = None
            member.heartbeat_deadline_ms = now + member.session_timeout_ms
            leader = member.member_id == group.leader_id
            join_reply(
                self._join_response(
                    version, member_id=member.member_id, group=group, members=all_members if leader else []
                )
            )

    def _remove(self, group: FakeGroup, member: FakeMember, reason: str) -> None:
        del group.members[member.member_id]
        if member.instance_id is not None and group.static.get(member.instance_id) == member.member_id:
            del group.static[member.instance_id]
        if group.leader_id == member.member_id:
            group.leader_id = next(iter(group.members), None)
        self._log(group, f"{member.member_id} left: {reason}")

    def _remove_and_rebalance(self, group: FakeGroup, member: FakeMember, now: int, reason: str) -> None:
        if member.join_reply is not None:
            join_reply, version = member.join_reply
            join_reply(self._join_response(version, error_code=UNKNOWN_MEMBER_ID, member_id=member.member_id))
        if member.sync_reply is not None:
            sync_reply, version = member.sync_reply
            sync_reply(self._sync_response(version, UNKNOWN_MEMBER_ID))
        self._remove(group, member, reason)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, now, f"{member.member_id} left ({reason})")
        self._maybe_complete_join(group, now)

    # -- SyncGroup ---------------------------------------------------------------------------------------

    def _sync_response(
        self, version: int, error_code: int, group: FakeGroup | None = None, assignment: bytes = b""
    ) -> SyncGroupResponse:
        with_protocol = group is not None and version >= _SYNC_PROTOCOL_VERSION and not error_code
        return SyncGroupResponse(
            error_code=error_code,
            protocol_type=group.protocol_type if with_protocol and group is not None else None,
            protocol_name=group.protocol_name if with_protocol and group is not None else None,
            assignment=assignment,
        )

    def _sync_group(self, broker: int, req: SyncGroupRequest, version: int, now: int, reply: Reply) -> None:
        code = self._take_fault(SyncGroupRequest, req.member_id)
        if not code and not self._is_coordinator(broker, req.group_id):
            code = NOT_COORDINATOR
        group = self.groups.get(req.group_id)
        instance = req.group_instance_id if version >= 3 else None
        if not code:
            code = (
                UNKNOWN_MEMBER_ID
                if group is None
                else self._unknown_member_error(group, req.member_id, instance) or 0
            )
        if not code and group is not None:
            if req.generation_id != group.generation:
                code = ILLEGAL_GENERATION
            elif version >= _SYNC_PROTOCOL_VERSION and (
                (req.protocol_type is not None and req.protocol_type != group.protocol_type)
                or (req.protocol_name is not None and req.protocol_name != group.protocol_name)
            ):
                code = INCONSISTENT_GROUP_PROTOCOL
            elif group.state is GroupState.PREPARING_REBALANCE:
                code = REBALANCE_IN_PROGRESS
        if code or group is None:
            reply(self._sync_response(version, code))
            return
        member = group.members[req.member_id]
        member.heartbeat_deadline_ms = now + member.session_timeout_ms
        if group.state is GroupState.STABLE:
            reply(self._sync_response(version, NONE, group, member.assignment))
            return
        # CompletingRebalance: wait for the leader's assignment.
        member.sync_reply = (reply, version)
        if member.member_id != group.leader_id:
            return
        given = {a.member_id: bytes(a.assignment) for a in req.assignments}
        for m in group.members.values():
            m.assignment = given.get(m.member_id, b"")
        group.state = GroupState.STABLE
        self._log(group, f"generation {group.generation} stable")
        for m in group.members.values():
            if m.sync_reply is not None:
                sync_reply, sync_version = m.sync_reply
                m.sync_reply = None
                m.heartbeat_deadline_ms = now + m.session_timeout_ms
                sync_reply(self._sync_response(sync_version, NONE, group, m.assignment))

    # -- Heartbeat -----------------------------------------------------------------------------------------

    def _heartbeat(self, broker: int, req: HeartbeatRequest, version: int, now: int, reply: Reply) -> None:
        code = self._take_fault(HeartbeatRequest, req.member_id)
        if not code and not self._is_coordinator(broker, req.group_id):
            code = NOT_COORDINATOR
        group = self.groups.get(req.group_id)
        instance = req.group_instance_id if version >= _HEARTBEAT_INSTANCE_ID_VERSION else None
        if not code:
            if group is None or group.state is GroupState.EMPTY:
                code = UNKNOWN_MEMBER_ID
            else:
                code = self._unknown_member_error(group, req.member_id, instance) or 0
        if not code and group is not None:
            if req.generation_id != group.generation:
                code = ILLEGAL_GENERATION
            else:
                member = group.members[req.member_id]
                member.heartbeat_deadline_ms = now + member.session_timeout_ms
                if group.state is GroupState.PREPARING_REBALANCE:
                    code = REBALANCE_IN_PROGRESS
        reply(HeartbeatResponse(error_code=code))

    # -- LeaveGroup ----------------------------------------------------------------------------------------

    def _leave_group(self, broker: int, req: LeaveGroupRequest, version: int, now: int, reply: Reply) -> None:
        if version >= _LEAVE_BATCH_VERSION:
            leaving = [(m.member_id, m.group_instance_id) for m in req.members]
        else:
            leaving = [(req.member_id, None)]
        top = self._take_fault(LeaveGroupRequest, leaving[0][0] if leaving else "")
        if not top and not self._is_coordinator(broker, req.group_id):
            top = NOT_COORDINATOR
        results: list[MemberResponse] = []
        group = self.groups.get(req.group_id)
        for member_id, instance in leaving:
            code = top
            if not code:
                if group is None:
                    code = UNKNOWN_MEMBER_ID
                elif instance is not None and not member_id:
                    member_id = group.static.get(instance, "")
                    code = NONE if member_id else UNKNOWN_MEMBER_ID
                else:
                    code = self._unknown_member_error(group, member_id, instance) or 0
            if not code and group is not None:
                if member_id in group.pending:
                    del group.pending[member_id]
                    self._maybe_complete_join(group, now)
                else:
                    self._remove_and_rebalance(group, group.members[member_id], now, "LeaveGroup")
            results.append(MemberResponse(member_id=member_id, group_instance_id=instance, error_code=code))
        if version >= _LEAVE_BATCH_VERSION:
            reply(LeaveGroupResponse(error_code=top, members=results))
        else:
            reply(LeaveGroupResponse(error_code=results[0].error_code if results else top))

    # -- OffsetCommit --------------------------------------------------------------------------------------

    def _commit_error(self, req: OffsetCommitRequest, version: int) -> int:
        """Kafka's validateOffsetCommit plus the group-state check of doCommitOffsets."""
        group = self.groups.get(req.group_id)
        generation = req.generation_id_or_member_epoch
        instance = req.group_instance_id if version >= _COMMIT_INSTANCE_ID_VERSION else None
        if group is None:
            return NONE if generation < 0 else ILLEGAL_GENERATION
        if generation >= 0 or req.member_id or instance is not None:
            error = self._unknown_member_error(group, req.member_id, instance)
            if error is not None:
                return error
            if generation != group.generation:
                return ILLEGAL_GENERATION
        elif group.state is not GroupState.EMPTY:
            return UNKNOWN_MEMBER_ID  # only members may commit to a non-empty group
        if group.state is GroupState.COMPLETING_REBALANCE:
            return REBALANCE_IN_PROGRESS
        return NONE


# -- the driver -------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Exchange:
    """One request a member sent, as the coordinator decoded it, and its outcome."""

    member: Member
    unsent: UnsentRequest
    version: int
    request: Any
    sent_ms: int
    deadline_ms: int
    #: the member's state when it sent the request
    state: MemberState = MemberState.UNJOINED
    response: Any = None
    error: KafkaError | None = None
    #: the outcome may be delivered from this time on (None: no answer yet)
    ready_ms: int | None = None
    held: bool = False
    dropped: bool = False
    done: bool = False
    delivered_ms: int | None = None

    @property
    def api(self) -> type[Any]:
        return type(self.unsent.request)

    @property
    def error_code(self) -> int | None:
        """The response's error code (an OffsetCommit's first partition's), None without one."""
        if self.response is None:
            return None
        if isinstance(self.response, OffsetCommitResponse):
            codes = [p.error_code for t in self.response.topics for p in t.partitions]
            return codes[0] if codes else NONE
        code: int = self.response.error_code
        return code


@dataclass(frozen=True, slots=True)
class CallbackCall:
    """A rebalance listener method the application thread ran."""

    member: str
    method: str
    partitions: frozenset[TopicPartition]
    requested_ms: int
    acknowledged_ms: int | None = None
    error: BaseException | None = None


class TracingStateMachine(StateMachine[MemberState]):
    """The member's real state machine (same table) that also records every transition."""

    __slots__ = ("_on_transition",)

    def __init__(
        self,
        name: str,
        on_transition: Callable[[MemberState, MemberState], None],
        transitions: dict[MemberState, frozenset[MemberState]] = MEMBER_TRANSITIONS,
    ) -> None:
        super().__init__(name, MemberState.UNJOINED, transitions)
        self._on_transition = on_transition

    def transition_to(self, target: MemberState) -> None:
        source = self.state
        super().transition_to(target)
        self._on_transition(source, target)


@dataclass(frozen=True, slots=True)
class _MemberNetwork:
    """The parts of a network stack the components builder uses (no client: the driver sends)."""

    cluster: ClusterMetadata
    metadata: MetadataManager
    retry_backoff: ExponentialBackoff


#: what the driver logs: (time, member name, kind, detail)
LogEntry = tuple[int, str, str, Any]


class Member:
    """One consumer's group machinery, built as ``kaflux.Consumer`` builds it."""

    def __init__(
        self,
        driver: DriverBase,
        name: str,
        *,
        group_id: str,
        settings: Mapping[str, Any],
        has_listener: bool,
    ) -> None:
        """``settings``: the consumer's Kafka settings besides ``bootstrap.servers`` and
        ``group.id`` (which the driver's fake cluster and group give)."""
        self.driver = driver
        self.name = name
        self.group_id = group_id
        fake = driver.coordinator.cluster
        brokers = [(b.host, b.port) for _, b in sorted(fake.brokers.items())]
        config = ConsumerConfig.from_dict(
            {
                "bootstrap.servers": [f"{host}:{port}" for host, port in brokers],
                "group.id": group_id,
                **settings,
            }
        )
        self.config = config
        self.request_timeout_ms = config.request_timeout_ms
        backoff = exact_backoff()
        self.cluster = ClusterMetadata(brokers)
        self.subscription = SubscriptionState(ResetStrategy.EARLIEST)
        self.metadata = MetadataManager(
            self.cluster, RequestState(backoff), max_age_ms=config.metadata_max_age_ms
        )
        #: ErrorEvents the application thread would raise from poll()
        self.errors: list[BaseException] = []
        #: the membership's fatal errors (the ErrorEvents it posted)
        self.fatal: list[BaseException] = []
        parts = build_consumer_components(
            config,
            _MemberNetwork(self.cluster, self.metadata, backoff),
            self.subscription,
            FetchBuffer(),
            post_event=self._post_event,
            on_error=self._on_error,
        )
        assert parts.coordinator is not None and parts.commits is not None
        assert parts.membership is not None and parts.heartbeat is not None
        self.coordinator = parts.coordinator
        self.commits = parts.commits
        self.manager = parts.membership
        self.heartbeat: Any = parts.heartbeat
        # Observe every transition of the real table (the manager's own machine is replaced by
        # an identical one that also records).
        self.manager._machine = TracingStateMachine(
            f"member {name}", self._on_transition, type(self.manager).TRANSITIONS
        )
        self.has_listener = has_listener
        #: the application calls poll() every step (sends PollEvents, runs callbacks)
        self.polling = True
        #: run requested callbacks as soon as the application thread gets to them
        self.auto_ack = True
        #: resolve positions of new partitions (committed offset, else 0) like the offsets manager
        self.auto_positions = True
        #: method name -> exception the listener raises
        self.callback_errors: dict[str, BaseException] = {}
        #: transitions (time, source, target)
        self.transitions: list[tuple[int, MemberState, MemberState]] = []
        self.requested: list[RebalanceCallbackNeededEvent] = []
        self.pending_callbacks: list[RebalanceCallbackNeededEvent] = []
        self.calls: list[CallbackCall] = []
        self._requested_at: dict[int, int] = {}
        self.leave_future: Future[None] | None = None
        #: no longer driven at all (crashed or replaced)
        self.stopped = False

    # -- wiring callbacks ----------------------------------------------------------------------------

    def _on_error(self, error: BaseException) -> None:
        """An error for the application (an ErrorEvent), from any manager."""
        self.errors.append(error)
        self.driver.record(self, "error", error)

    def _post_event(self, event: BackgroundEvent) -> None:
        now = self.driver.now_ms
        if isinstance(event, RebalanceCallbackNeededEvent):
            self.requested.append(event)
            self.pending_callbacks.append(event)
            self._requested_at[event.callback_id] = now
            self.driver.record(self, "callback", (event.method, event.partitions))
        elif isinstance(event, ErrorEvent):  # the membership's fatal error
            self.fatal.append(event.error)
            self._on_error(event.error)
        else:  # the membership posts no other event (AutoCommittedEvent: the commit manager)
            raise AssertionError(f"unexpected background event {event!r}")

    def _on_transition(self, source: MemberState, target: MemberState) -> None:
        self.transitions.append((self.driver.now_ms, source, target))
        self.driver.record(self, "state", target)

    # -- what the application does ------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str]) -> None:
        """``Consumer.subscribe(topics, listener=...)``: join on the next poll."""
        self.subscription.subscribe(list(topics))
        self.manager.on_subscription_change(self.has_listener)

    def leave(
        self,
        *,
        on_close: bool = False,
        membership: GroupMembershipOperation = GroupMembershipOperation.DEFAULT,
    ) -> Future[None]:
        """``unsubscribe()`` / ``close()`` (with its ``group_membership``): the LeaveGroupEvent."""
        future: Future[None] = Future()
        self.leave_future = future
        self.manager.leave(future, on_close=on_close, now_ms=self.driver.now_ms, membership=membership)
        self.driver.observe()
        return future

    def commit(
        self, offsets: Mapping[TopicPartition, int], *, sync: bool = True, timeout_ms: int = 5_000
    ) -> Future[dict[TopicPartition, OffsetAndMetadata]]:
        """``commit_sync`` / ``commit_async`` of explicit offsets (the CommitEvent)."""
        future: Future[dict[TopicPartition, OffsetAndMetadata]] = Future()
        self.commits.commit(
            {tp: OffsetAndMetadata(o) for tp, o in offsets.items()},
            retry=sync,
            deadline_ms=self.driver.now_ms + timeout_ms,
            future=future,
        )
        return future

    def consume(self, tp: TopicPartition, count: int) -> None:
        """Pretend ``count`` records of ``tp`` were returned: move its position forward."""
        position = self.subscription.position(tp)
        start = position.offset if position is not None else 0
        self.subscription.seek(tp, FetchPosition(start + count))

    def ack(self, method: str | None = None) -> CallbackCall:
        """Run the oldest requested callback (of ``method``) and acknowledge it."""
        for event in self.pending_callbacks:
            if method is None or event.method == method:
                return self._run_callback(event)
        raise AssertionError(f"{self.name}: no pending callback {method or ''}; requested {self.requested}")

    def _run_callback(self, event: RebalanceCallbackNeededEvent) -> CallbackCall:
        self.pending_callbacks.remove(event)
        error = self.callback_errors.get(event.method)
        call = CallbackCall(
            self.name,
            event.method,
            event.partitions,
            self._requested_at[event.callback_id],
            self.driver.now_ms,
            error,
        )
        self.calls.append(call)
        self.driver.record(self, "ack", (event.method, event.partitions))
        self.manager.on_callback_completed(event.callback_id, event.method, error)
        self.driver.observe()
        return call

    def app_pass(self, now_ms: int) -> None:
        """The application thread inside poll() (or waiting in unsubscribe/close)."""
        leaving = self.leave_future is not None and not self.leave_future.done()
        if self.polling:
            # PollEvent: auto-commit timer and poll timer, as the event processor applies it.
            self.commits.maybe_auto_commit(now_ms)
            self.manager.on_poll(now_ms)
            self.driver.observe()
        if (self.polling or leaving) and self.auto_ack:
            while self.pending_callbacks:
                self._run_callback(self.pending_callbacks[0])
        if self.auto_positions:
            self.resolve_positions()

    def resolve_positions(self) -> None:
        committed = self.driver.coordinator.cluster.committed.get(self.group_id, {})
        for tp in self.subscription.assigned_partitions():
            if self.subscription.position(tp) is None:
                stored = committed.get(tp)
                self.subscription.seek(tp, FetchPosition(stored.offset if stored is not None else 0))

    # -- inspection --------------------------------------------------------------------------------------

    @property
    def state(self) -> MemberState:
        return self.manager.state

    @property
    def member_id(self) -> str:
        return self.manager.member_id

    def assignment(self) -> set[TopicPartition]:
        return set(self.subscription.assigned_partitions())

    def fetchable(self) -> set[TopicPartition]:
        return {tp for tp in self.subscription.assigned_partitions() if self.subscription.is_fetchable(tp)}

    def states(self) -> list[MemberState]:
        """The states entered, in order."""
        return [target for _, _, target in self.transitions]

    def calls_of(self, method: str) -> list[CallbackCall]:
        return [c for c in self.calls if c.method == method]

    def requested_of(self, method: str) -> list[RebalanceCallbackNeededEvent]:
        return [e for e in self.requested if e.method == method]

    def sent(self, api: type[Any]) -> list[Exchange]:
        return [e for e in self.driver.exchanges if e.member is self and e.api is api]

    def managers(self) -> list[Any]:
        """In the order the consumer's network thread polls them."""
        return [self.metadata, self.coordinator, self.commits, self.manager, self.heartbeat]

    def __repr__(self) -> str:
        return f"<Member {self.name} {self.state.name} {self.member_id!r} gen {self.manager.generation}>"


class DriverBase:
    """Plays the application and network threads of several members over a fake coordinator
    (whatever its group protocol): the members, the loop, the network and its faults."""

    def __init__(
        self,
        coordinator: CoordinatorBase,
        *,
        topics: Mapping[str, int] | None = None,
        group_id: str = "g",
        step_ms: int = 10,
        latency_ms: int = 0,
        now_ms: int = 0,
    ) -> None:
        self.coordinator = coordinator
        for name, partitions in (topics if topics is not None else {"t": 6}).items():
            self.coordinator.cluster.create_topic(name, partitions)
        self.group_id = group_id
        self.step_ms = step_ms
        self.latency_ms = latency_ms
        self.now_ms = now_ms
        self.members: dict[str, Member] = {}
        self.exchanges: list[Exchange] = []
        self.log: list[LogEntry] = []
        #: called after every action (a manager poll, a delivered response, an acknowledged callback)
        self.observers: list[Callable[[DriverBase], None]] = []
        self._holds: list[tuple[type[Any], Member | None]] = []
        self._drops: list[list[Any]] = []

    # -- members ---------------------------------------------------------------------------------------

    def _add(
        self,
        name: str,
        settings: Mapping[str, Any],
        *,
        topics: Iterable[str],
        has_listener: bool,
        subscribe: bool,
    ) -> Member:
        member = Member(self, name, group_id=self.group_id, settings=settings, has_listener=has_listener)
        self.members[name] = member
        if subscribe:
            member.subscribe(topics)
        return member

    def active(self) -> list[Member]:
        return [m for m in self.members.values() if not m.stopped]

    def group(self) -> Any:
        return self.coordinator.group(self.group_id)

    # -- network faults -----------------------------------------------------------------------------------

    def hold(self, api: type[Any], member: Member | None = None) -> None:
        """Keep responses to requests of class ``api`` (of ``member``) sent from now on undelivered
        until :meth:`release`. The coordinator still applies the requests."""
        self._holds.append((api, member))

    def unhold(self, api: type[Any], member: Member | None = None) -> None:
        """Stop holding responses to requests of class ``api`` (of ``member``) sent from now on;
        those already held stay held until :meth:`release` (or their ``held`` is cleared)."""
        self._holds = [(a, m) for a, m in self._holds if not (a is api and m is member)]

    def release(self, api: type[Any], member: Member | None = None) -> None:
        """Stop holding ``api`` responses and deliver the held ones at the next step."""
        self._holds = [(a, m) for a, m in self._holds if not (a is api and m is member)]
        for e in self.exchanges:
            if e.held and e.api is api and (member is None or e.member is member):
                e.held = False

    def release_all(self) -> None:
        """Stop every hold and deliver every held response at the next step."""
        self._holds = []
        for e in self.exchanges:
            e.held = False

    def drop(self, api: type[Any], *, count: int = 1, member: Member | None = None) -> None:
        """Lose the responses to the next ``count`` requests of class ``api``."""
        self._drops.append([api, member, count])

    # -- the loop ------------------------------------------------------------------------------------------

    def record(self, member: Member, kind: str, detail: Any) -> None:
        self.log.append((self.now_ms, member.name, kind, detail))

    def observe(self) -> None:
        for observer in self.observers:
            observer(self)

    def step(self) -> None:
        """One pass at ``now_ms``, then advance the clock by ``step_ms``."""
        now = self.now_ms
        for member in self.active():
            member.app_pass(now)
        for member in self.active():
            for manager in member.managers():
                result = manager.poll(now)
                self.observe()
                for unsent in result.unsent:
                    self._send(member, unsent, now)
        self.coordinator.tick(now)
        self._deliver(now)
        self.now_ms += self.step_ms

    def run(self, duration_ms: int) -> None:
        """Step until ``duration_ms`` passed."""
        end = self.now_ms + duration_ms
        while self.now_ms < end:
            self.step()

    def run_until(self, condition: Callable[[], bool], timeout_ms: int = 60_000) -> int:
        """Step until ``condition()`` holds (checked before each step); returns the time it took."""
        start = self.now_ms
        while not condition():
            if self.now_ms - start > timeout_ms:
                raise AssertionError(
                    f"condition not met within {timeout_ms} ms: {self.describe()}\nlast log: {self.log[-15:]}"
                )
            self.step()
        return self.now_ms - start

    def stable(self, *members: Member) -> bool:
        """The group and these (default: all active) members are stable with nothing pending."""
        raise NotImplementedError

    def settle(self, *members: Member, timeout_ms: int = 60_000) -> int:
        """Run until :meth:`stable`."""
        return self.run_until(lambda: self.stable(*members), timeout_ms)

    def describe(self) -> str:
        return ", ".join(repr(m) for m in self.members.values())

    # -- the network -----------------------------------------------------------------------------------------

    def _broker_for(self, node_id: int | None) -> int:
        brokers = sorted(self.coordinator.cluster.brokers)
        if node_id is None:
            live = [b for b in brokers if b not in self.coordinator.cluster.stopped]
            return (live or brokers)[0]
        if is_coordinator_node_id(node_id):
            return 2**31 - 1 - node_id
        if node_id < 0:
            return brokers[-node_id - 1]
        return node_id

    def _send(self, member: Member, unsent: UnsentRequest, now: int) -> Exchange:
        cls: Any = type(unsent.request)
        version = min(
            cls.MAX_VERSION,
            unsent.max_version if unsent.max_version is not None else cls.MAX_VERSION,
            self.coordinator.max_versions.get(cls, cls.MAX_VERSION),
        )
        timeout = unsent.timeout_ms if unsent.timeout_ms is not None else member.request_timeout_ms
        if unsent.min_version is not None and version < unsent.min_version:
            # As the network client: a request whose meaning needs a newer version than the
            # broker serves fails unsent.
            exchange = Exchange(member, unsent, version, unsent.request, now, now + timeout, member.state)
            exchange.error = UnsupportedVersionError(
                f"{cls.__name__} needs v{unsent.min_version} or later; the coordinator serves v{version}"
            )
            exchange.ready_ms = now
            self.exchanges.append(exchange)
            return exchange
        request = roundtrip(unsent.request, version)
        exchange = Exchange(member, unsent, version, request, now, now + timeout, member.state)
        exchange.held = any(api is cls and who in (None, member) for api, who in self._holds)
        for drop in self._drops:
            if drop[0] is cls and drop[1] in (None, member) and drop[2] > 0:
                drop[2] -= 1
                exchange.dropped = True
                break
        self.exchanges.append(exchange)
        self.record(member, "send", cls.__name__)

        def reply(response: Any) -> None:
            if exchange.done:
                return  # the client gave up on it
            exchange.response = roundtrip(response, version, cls.RESPONSE)
            exchange.ready_ms = self.now_ms + self.latency_ms

        try:
            self.coordinator.handle(self._broker_for(unsent.node_id), request, version, now, reply)
        except BrokerDownError as exc:
            exchange.error = KafkaConnectionError(str(exc))
            exchange.ready_ms = now
        return exchange

    def _deliver(self, now: int) -> None:
        for exchange in list(self.exchanges):
            if exchange.done:
                continue
            ready = exchange.ready_ms is not None and exchange.ready_ms <= now
            if ready and not exchange.held and not exchange.dropped:
                self._complete(exchange, now)
            elif now >= exchange.deadline_ms:
                exchange.error = KafkaTimeoutError("request timed out")
                exchange.response = None
                self._complete(exchange, now)

    def _complete(self, exchange: Exchange, now: int) -> None:
        exchange.done = True
        exchange.delivered_ms = now
        unsent = exchange.unsent
        request = ClientRequest(
            node_id=unsent.node_id if unsent.node_id is not None else -1,
            request=unsent.request,
            callback=unsent.handler,
            created_ms=exchange.sent_ms,
            expect_response=unsent.expect_response,
            max_version=unsent.max_version,
            timeout_ms=unsent.timeout_ms,
        )
        body = None if exchange.error is not None else exchange.response
        version = -1 if exchange.error is not None else exchange.version
        if exchange.member.stopped:
            return
        unsent.handler(ClientResponse(request, body, exchange.error, version, now))
        self.observe()


class GroupDriver(DriverBase):
    """Members of a classic group (``group.protocol=classic``) over a :class:`FakeGroupCoordinator`."""

    coordinator: FakeGroupCoordinator

    def __init__(
        self,
        coordinator: FakeGroupCoordinator | None = None,
        *,
        topics: Mapping[str, int] | None = None,
        group_id: str = "g",
        step_ms: int = 10,
        latency_ms: int = 0,
        now_ms: int = 0,
    ) -> None:
        super().__init__(
            coordinator if coordinator is not None else FakeGroupCoordinator(),
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
        assignors: Iterable[str] = ("range",),
        instance_id: str | None = None,
        auto_commit: bool = False,
        auto_commit_interval_ms: int = 60_000,
        session_timeout_ms: int = 10_000,
        heartbeat_interval_ms: int = 1_000,
        max_poll_interval_ms: int = 30_000,
        request_timeout_ms: int = 30_000,
        metadata_max_age_ms: int = 300_000,
        has_listener: bool = True,
        subscribe: bool = True,
        client_rack: str = "",
    ) -> Member:
        """A new member; it subscribes to ``topics`` (and joins at its first poll) by default."""
        settings = {
            "client.rack": client_rack,
            "group.instance.id": instance_id,
            "partition.assignment.strategy": list(assignors),
            "enable.auto.commit": auto_commit,
            "auto.commit.interval.ms": auto_commit_interval_ms,
            "session.timeout.ms": session_timeout_ms,
            "heartbeat.interval.ms": heartbeat_interval_ms,
            "max.poll.interval.ms": max_poll_interval_ms,
            "request.timeout.ms": request_timeout_ms,
            "metadata.max.age.ms": metadata_max_age_ms,
        }
        return self._add(name, settings, topics=topics, has_listener=has_listener, subscribe=subscribe)

    def group(self) -> FakeGroup:
        return self.coordinator.group(self.group_id)

    def stable(self, *members: Member) -> bool:
        """The group and these (default: all active) members are stable with nothing pending."""
        chosen = members or tuple(self.active())
        group = self.group()
        return (
            group.state is GroupState.STABLE
            and all(m.state is MemberState.STABLE and not m.pending_callbacks for m in chosen)
            and all(m.member_id in group.members and m.manager.generation == group.generation for m in chosen)
            and not any(m.manager.join_requested for m in chosen)
        )

    def describe(self) -> str:
        group = self.group()
        return f"group {group.state.name} gen {group.generation} members {list(group.members)}; " + ", ".join(
            repr(m) for m in self.members.values()
        )


def exclusive_ownership(driver: DriverBase) -> None:
    """Observer: no partition is in the assignment of two running members."""
    owners: dict[TopicPartition, str] = {}
    for member in driver.active():
        for tp in member.assignment():
            other = owners.setdefault(tp, member.name)
            assert other == member.name, (
                f"at {driver.now_ms} ms {tp} is owned by both {other} and {member.name}: {driver.describe()}"
            )
