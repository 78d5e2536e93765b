"""In-memory Kafka for unit tests: a fake cluster and a fake network with injected time.

Not a test module. Tests import it as ``from support.fakes import ...``.

* :class:`FakeCluster` holds brokers, topics (partition logs of real v2 record batches built
  with :class:`~kaflux.records.BatchBuilder`), committed offsets per group and KIP-227 fetch
  sessions. :meth:`FakeCluster.handle` answers the generated request classes of
  :mod:`kaflux.protocol.messages` with generated response objects. Faults are injected per
  request kind: error codes (:meth:`FakeCluster.inject`), lost responses
  (:meth:`FakeCluster.drop`), leader moves (:meth:`FakeCluster.move_leader`), logs cut back
  as an unclean leader election does (:meth:`FakeCluster.truncate`), stopped
  brokers (:meth:`FakeCluster.stop_broker`) and a Tansu-like Fetch that fills the response
  from the first listed partition only (``fill_first_partition_only=True``). Each partition
  keeps its leader epoch history, which OffsetForLeaderEpoch answers from; Fetch (v12+) and
  Produce (v10+) answers to a request that missed the leader name the current one (KIP-951)
  unless ``report_current_leader=False``.
* :class:`FakeNetwork` stands where the ``NetworkClientDelegate`` stands: it takes
  :class:`~kaflux.network.network_client_delegate.UnsentRequest` objects, picks the version
  the real client would negotiate, encodes every request to bytes and decodes it back before
  the broker sees it (and the same for every response), and calls the handlers only when the
  test delivers a response, with the ``received_ms`` the test chooses. Nothing reads a clock.

The broker applies a request when it is sent (as a real broker does when it receives it);
delivering the response is a separate step, so a test can lose or delay it.
"""

from __future__ import annotations

import itertools
import struct
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kaflux.consumer.commit_request_manager import CommitRequestManager
from kaflux.consumer.fetch_buffer import FetchBuffer
from kaflux.consumer.fetch_request_manager import FetchRequestManager
from kaflux.consumer.offsets_request_manager import OffsetsRequestManager
from kaflux.consumer.subscription_state import SubscriptionState
from kaflux.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError, UnsupportedVersionError
from kaflux.network.backoff import ExponentialBackoff, RequestState
from kaflux.network.cluster import ClusterMetadata, is_coordinator_node_id
from kaflux.network.metadata_manager import MetadataManager
from kaflux.network.requests import ClientRequest, ClientResponse, PollResult, UnsentRequest
from kaflux.protocol.api import CLIENT_VERSIONS, ApiKey
from kaflux.protocol.messages.create_topics import (
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from kaflux.protocol.messages.delete_topics import (
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from kaflux.protocol.messages.fetch import (
    AbortedTransaction,
    FetchableTopicResponse,
    FetchRequest,
    FetchResponse,
    PartitionData,
)
from kaflux.protocol.messages.fetch import LeaderIdAndEpoch as FetchLeader
from kaflux.protocol.messages.fetch import NodeEndpoint as FetchNodeEndpoint
from kaflux.protocol.messages.find_coordinator import (
    Coordinator,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from kaflux.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from kaflux.protocol.messages.list_offsets import (
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from kaflux.protocol.messages.metadata import (
    MetadataRequest,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from kaflux.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from kaflux.protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)
from kaflux.protocol.messages.offset_for_leader_epoch import (
    EpochEndOffset,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
)
from kaflux.protocol.messages.produce import LeaderIdAndEpoch as ProduceLeader
from kaflux.protocol.messages.produce import NodeEndpoint as ProduceNodeEndpoint
from kaflux.protocol.messages.produce import (
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceResponse,
)
from kaflux.protocol.primitives import Reader, Writer
from kaflux.records import CONTROL_ABORT, CONTROL_COMMIT, BatchBuilder, build_control_batch, iter_batches
from kaflux.structs import Node, TopicPartition

# Kafka error codes the fake answers with.
NONE = 0
OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
GROUP_AUTHORIZATION_FAILED = 30
TOPIC_ALREADY_EXISTS = 36
FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75

_LAST_OFFSET_DELTA = struct.Struct(">i")
_BASE_OFFSET = struct.Struct(">q")
_OFFSET_FETCH_BATCHED_VERSION = 8
_FIND_COORDINATOR_BATCHED_VERSION = 4
_DELETE_TOPICS_BY_STATE_VERSION = 6
#: the first versions whose answers name the current leader (KIP-951) and the brokers' endpoints
_FETCH_CURRENT_LEADER_VERSION = 12
_FETCH_NODE_ENDPOINTS_VERSION = 16
_PRODUCE_CURRENT_LEADER_VERSION = 10
_LEADER_MOVED = (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH)


# -- logs ---------------------------------------------------------------------------------


@dataclass(slots=True)
class StoredBatch:
    """One record batch in a partition log, with its offsets rewritten by the broker."""

    base_offset: int
    last_offset: int
    data: bytes
    timestamps: list[int]
    producer_id: int = -1
    is_transactional: bool = False
    is_control: bool = False


@dataclass(slots=True)
class FakePartition:
    """A partition: leader, epoch and its log."""

    leader: int
    leader_epoch: int = 0
    log_start_offset: int = 0
    batches: list[StoredBatch] = field(default_factory=list)
    #: the leader epoch history: (epoch, first offset written in it), oldest first
    epochs: list[tuple[int, int]] = field(default_factory=lambda: [(0, 0)])
    #: producer id -> first offset of its open transaction
    open_transactions: dict[int, int] = field(default_factory=dict)
    #: (producer_id, first_offset, last_offset) of aborted transactions
    aborted: list[tuple[int, int, int]] = field(default_factory=list)

    @property
    def high_watermark(self) -> int:
        return self.batches[-1].last_offset + 1 if self.batches else self.log_start_offset

    @property
    def last_stable_offset(self) -> int:
        if self.open_transactions:
            return min(self.open_transactions.values())
        return self.high_watermark


@dataclass(slots=True)
class FakeTopic:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, FakePartition]
    is_internal: bool = False


@dataclass(slots=True)
class Committed:
    """An offset committed for a group."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1


@dataclass(slots=True)
class Fault:
    """An error code to answer ``count`` matching requests with (-1: forever)."""

    api: type[Any]
    error_code: int
    tp: TopicPartition | None
    count: int
    node: int | None


@dataclass(slots=True)
class _BrokerFetchSession:
    session_id: int
    node: int
    epoch: int
    #: tp -> (fetch offset, partition max bytes, current leader epoch), in session order
    partitions: dict[TopicPartition, tuple[int, int, int]]
    #: high watermark last reported per partition (incremental responses omit unchanged ones)
    reported_hw: dict[TopicPartition, int] = field(default_factory=dict)


class BrokerDownError(Exception):
    """The addressed broker is stopped (the fake network turns it into a connection error)."""


def patch_base_offset(batch: bytes, base_offset: int) -> bytes:
    """``batch`` with its base offset replaced (the offset is not covered by the CRC)."""
    return _BASE_OFFSET.pack(base_offset) + batch[8:]


# -- the cluster --------------------------------------------------------------------------


#: the client-telemetry APIs (KIP-714), which the fake cluster does not offer
_TELEMETRY_APIS = frozenset({ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY})


class FakeCluster:
    """Brokers, topics, groups and fetch sessions of an in-memory Kafka cluster."""

    def __init__(
        self,
        brokers: int = 1,
        *,
        sessions: bool = True,
        fill_first_partition_only: bool = False,
        auto_create_topics: bool = False,
        cluster_id: str = "fake-cluster",
        api_versions: dict[ApiKey, tuple[int, int]] | None = None,
        report_current_leader: bool = True,
    ) -> None:
        self.brokers: dict[int, Node] = {i: Node(i, f"broker{i}.fake", 9092 + i) for i in range(brokers)}
        self.report_current_leader = report_current_leader
        self.stopped: set[int] = set()
        self.sessions_enabled = sessions
        self.fill_first_partition_only = fill_first_partition_only
        #: KIP-392: partition -> the replica its leader prefers a consumer with a client.rack reads
        #: from (the leader answers with preferred_read_replica; that node serves the fetches)
        self.read_replicas: dict[TopicPartition, int] = {}
        self.auto_create_topics = auto_create_topics
        self.cluster_id = cluster_id
        # A broker offers the client-telemetry APIs (KIP-714) only with a telemetry plugin: not here.
        self.api_versions: dict[ApiKey, tuple[int, int]] = dict(
            api_versions or {k: v for k, v in CLIENT_VERSIONS.items() if k not in _TELEMETRY_APIS}
        )
        self.topics: dict[str, FakeTopic] = {}
        self.committed: dict[str, dict[TopicPartition, Committed]] = {}
        self.coordinators: dict[str, int] = {}
        self.faults: list[Fault] = []
        self.drops: list[Fault] = []
        self.omissions: list[Fault] = []
        self.fetch_sessions: dict[int, _BrokerFetchSession] = {}
        self._session_ids = itertools.count(1000)
        #: every request handled: (broker id, request as decoded, version)
        self.handled: list[tuple[int, Any, int]] = []

    # -- building state ----------------------------------------------------------------------

    def create_topic(
        self, name: str, partitions: int = 1, *, leaders: Sequence[int] | None = None
    ) -> list[TopicPartition]:
        """Create ``name``; leaders default to round robin over the brokers."""
        ids = sorted(self.brokers)
        chosen = list(leaders) if leaders is not None else [ids[p % len(ids)] for p in range(partitions)]
        self.topics[name] = FakeTopic(
            name, uuid.uuid4(), {p: FakePartition(leader=chosen[p]) for p in range(partitions)}
        )
        return [TopicPartition(name, p) for p in range(partitions)]

    def partition(self, tp: TopicPartition) -> FakePartition:
        return self.topics[tp.topic].partitions[tp.partition]

    def produce(
        self,
        tp: TopicPartition,
        values: Iterable[bytes | None],
        *,
        keys: Iterable[bytes | None] | None = None,
        timestamp_ms: int = 1_000,
        headers: Sequence[tuple[str, bytes | None]] = (),
        producer_id: int = -1,
        transactional: bool = False,
        compression: int = 0,
    ) -> int:
        """Append one batch of records (timestamps ``timestamp_ms``, +1 per record); returns
        its base offset."""
        builder = BatchBuilder(
            compression,
            producer_id=producer_id,
            producer_epoch=0 if producer_id >= 0 else -1,
            is_transactional=transactional,
            partition_leader_epoch=self.partition(tp).leader_epoch,
        )
        key_list = list(keys) if keys is not None else None
        for i, value in enumerate(values):
            key = key_list[i] if key_list is not None else None
            builder.append(timestamp_ms + i, key, value, headers)
        return self.append_batch(tp, builder.build())

    def append_batch(self, tp: TopicPartition, batch: bytes) -> int:
        """Append a complete v2 batch (its base offset is rewritten); returns its base offset."""
        part = self.partition(tp)
        base = part.high_watermark
        data = patch_base_offset(bytes(batch), base)
        parsed = next(iter_batches(memoryview(data), check_crcs=False))
        timestamps = (
            [r.timestamp for r in parsed.records()] if not parsed.is_control else [parsed.max_timestamp]
        )
        stored = StoredBatch(
            base,
            parsed.last_offset,
            data,
            timestamps,
            parsed.producer_id,
            parsed.is_transactional,
            parsed.is_control,
        )
        part.batches.append(stored)
        if stored.is_transactional and not stored.is_control:
            part.open_transactions.setdefault(stored.producer_id, base)
        return base

    def end_transaction(self, tp: TopicPartition, producer_id: int, *, commit: bool) -> int:
        """Write the COMMIT or ABORT marker of ``producer_id``'s open transaction."""
        part = self.partition(tp)
        first = part.open_transactions.pop(producer_id)
        marker = build_control_batch(
            CONTROL_COMMIT if commit else CONTROL_ABORT,
            producer_id=producer_id,
            producer_epoch=0,
            timestamp_ms=2_000,
        )
        offset = self.append_batch(tp, marker)
        if not commit:
            part.aborted.append((producer_id, first, offset))
        return offset

    def append_corrupt(self, tp: TopicPartition, values: Iterable[bytes]) -> int:
        """Append a batch whose CRC does not match its records (a flipped payload byte)."""
        builder = BatchBuilder()
        for i, value in enumerate(values):
            builder.append(1_000 + i, None, value)
        data = bytearray(builder.build())
        data[-1] ^= 0xFF
        part = self.partition(tp)
        base = part.high_watermark
        data[0:8] = _BASE_OFFSET.pack(base)
        (delta,) = _LAST_OFFSET_DELTA.unpack_from(data, 23)
        part.batches.append(StoredBatch(base, base + delta, bytes(data), [1_000] * (delta + 1)))
        return base

    def delete_records(self, tp: TopicPartition, before: int) -> None:
        """Move the log start to ``before`` (what retention does)."""
        part = self.partition(tp)
        part.log_start_offset = before
        part.batches = [b for b in part.batches if b.last_offset >= before]

    def move_leader(self, tp: TopicPartition, new_leader: int) -> None:
        """Make ``new_leader`` lead ``tp`` and bump the leader epoch (the new epoch starts at the
        end of the log)."""
        part = self.partition(tp)
        part.leader = new_leader
        part.leader_epoch += 1
        part.epochs.append((part.leader_epoch, part.high_watermark))

    def truncate(self, tp: TopicPartition, offset: int) -> None:
        """Lose the records from ``offset`` on, and the leader epochs that began there or later:
        the log of a replica elected uncleanly (follow with :meth:`move_leader`). ``offset``
        must be a batch boundary."""
        part = self.partition(tp)
        assert any(b.base_offset == offset for b in part.batches) or offset == part.high_watermark
        part.batches = [b for b in part.batches if b.base_offset < offset]
        part.epochs = [(e, start) for e, start in part.epochs if start < offset] or [(0, 0)]
        part.open_transactions = {
            pid: first for pid, first in part.open_transactions.items() if first < offset
        }

    def commit(
        self, group: str, tp: TopicPartition, offset: int, metadata: str = "", leader_epoch: int = -1
    ) -> None:
        """Store a committed offset as if some member had committed it."""
        self.committed.setdefault(group, {})[tp] = Committed(offset, metadata, leader_epoch)

    def coordinator_for(self, group: str) -> int:
        return self.coordinators.get(group, min(self.brokers))

    def stop_broker(self, broker_id: int) -> None:
        self.stopped.add(broker_id)

    def start_broker(self, broker_id: int) -> None:
        self.stopped.discard(broker_id)

    def records(self, tp: TopicPartition) -> list[tuple[int, bytes | None, bytes | None]]:
        """``(offset, key, value)`` of every data record in the log of ``tp``."""
        out = []
        for batch in self.partition(tp).batches:
            if batch.is_control:
                continue
            for record in next(iter_batches(memoryview(batch.data))).records():
                out.append((record.offset, record.key, record.value))
        return out

    # -- faults -----------------------------------------------------------------------------------

    def inject(
        self,
        api: type[Any],
        error_code: int,
        *,
        tp: TopicPartition | None = None,
        count: int = 1,
        node: int | None = None,
    ) -> None:
        """Answer the next ``count`` requests of class ``api`` (-1: all) with ``error_code``.

        With ``tp`` the error is that partition's; without, it is the request's top-level
        error where the response has one (Fetch, OffsetFetch, FindCoordinator), else every
        partition's (ListOffsets, OffsetCommit, Produce) or every topic's (Metadata).
        ``node`` restricts the fault to requests sent to that broker.
        """
        self.faults.append(Fault(api, error_code, tp, count, node))

    def drop(self, api: type[Any], *, count: int = 1) -> None:
        """Handle the next ``count`` requests of class ``api`` but lose their responses."""
        self.drops.append(Fault(api, 0, None, count, None))

    def omit(self, api: type[Any], tp: TopicPartition, *, count: int = 1) -> None:
        """Leave ``tp`` out of the next ``count`` responses of class ``api`` that should list it
        (a broker defect; ListOffsets only)."""
        self.omissions.append(Fault(api, 0, tp, count, None))

    def take_drop(self, request: Any) -> bool:
        return self._take(self.drops, type(request), None, None) is not None

    def _take(
        self, faults: list[Fault], api: type[Any], tp: TopicPartition | None, node: int | None
    ) -> Fault | None:
        for fault in faults:
            if fault.api is api and fault.tp == tp and fault.node in (None, node):
                if fault.count > 0:
                    fault.count -= 1
                    if fault.count == 0:
                        faults.remove(fault)
                return fault
        return None

    def _fault(self, api: type[Any], tp: TopicPartition | None, node: int) -> int:
        fault = self._take(self.faults, api, tp, node)
        return fault.error_code if fault is not None else NONE

    # -- answering ------------------------------------------------------------------------------

    def handle(self, broker_id: int, request: Any, version: int) -> Any:
        """The response of broker ``broker_id`` to ``request`` (decoded at ``version``), or
        None for a request that gets no response (Produce with acks=0)."""
        if broker_id in self.stopped or broker_id not in self.brokers:
            raise BrokerDownError(f"broker {broker_id} is down")
        self.handled.append((broker_id, request, version))
        handlers: dict[type[Any], Callable[[int, Any, int], Any]] = {
            MetadataRequest: self._metadata,
            FetchRequest: self._fetch,
            ListOffsetsRequest: self._list_offsets,
            OffsetCommitRequest: self._offset_commit,
            OffsetFetchRequest: self._offset_fetch,
            FindCoordinatorRequest: self._find_coordinator,
            ProduceRequest: self._produce,
            CreateTopicsRequest: self._create_topics,
            DeleteTopicsRequest: self._delete_topics,
            InitProducerIdRequest: self._init_producer_id,
            OffsetForLeaderEpochRequest: self._offset_for_leader_epoch,
        }
        handler = handlers.get(type(request))
        if handler is None:
            raise NotImplementedError(f"FakeCluster does not answer {type(request).__name__}")
        return handler(broker_id, request, version)

    def _partition_error(self, node: int, tp: TopicPartition, *, leader_only: bool = True) -> int:
        topic = self.topics.get(tp.topic)
        if topic is None or tp.partition not in topic.partitions:
            return UNKNOWN_TOPIC_OR_PARTITION
        if leader_only and topic.partitions[tp.partition].leader != node:
            return NOT_LEADER_OR_FOLLOWER
        return NONE

    # Metadata

    def _metadata(self, node: int, request: MetadataRequest, version: int) -> MetadataResponse:
        names = sorted(self.topics) if request.topics is None else [t.name for t in request.topics if t.name]
        top_fault = self._fault(MetadataRequest, None, node)
        topics = []
        for name in names:
            if name not in self.topics and self.auto_create_topics and request.allow_auto_topic_creation:
                self.create_topic(name)
            topic = self.topics.get(name)
            if top_fault or topic is None:
                topics.append(
                    MetadataResponseTopic(error_code=top_fault or UNKNOWN_TOPIC_OR_PARTITION, name=name)
                )
                continue
            partitions = [
                MetadataResponsePartition(
                    error_code=NONE,
                    partition_index=p,
                    leader_id=part.leader,
                    leader_epoch=part.leader_epoch,
                    replica_nodes=[part.leader],
                    isr_nodes=[part.leader],
                )
                for p, part in sorted(topic.partitions.items())
            ]
            topics.append(
                MetadataResponseTopic(
                    error_code=NONE,
                    name=name,
                    topic_id=topic.topic_id,
                    is_internal=topic.is_internal,
                    partitions=partitions,
                )
            )
        brokers = [
            MetadataResponseBroker(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
            for b in self.brokers.values()
        ]
        return MetadataResponse(
            brokers=brokers, cluster_id=self.cluster_id, controller_id=min(self.brokers), topics=topics
        )

    # Fetch (KIP-227 sessions)

    def _fetch(self, node: int, request: FetchRequest, version: int) -> FetchResponse:
        top = self._fault(FetchRequest, None, node)
        if top:
            return FetchResponse(error_code=top, session_id=0)
        requested = {
            TopicPartition(t.topic, p.partition): (
                p.fetch_offset,
                p.partition_max_bytes,
                p.current_leader_epoch,
            )
            for t in request.topics
            for p in t.partitions
        }
        session_id, epoch = request.session_id, request.session_epoch
        incremental = False
        response_session = 0
        if session_id == 0 or not self.sessions_enabled or epoch == -1:
            if session_id != 0:
                self.fetch_sessions.pop(session_id, None)  # epoch -1 closes the session
            wanted = requested
            if self.sessions_enabled and session_id == 0 and epoch == 0:
                response_session = next(self._session_ids)
                self.fetch_sessions[response_session] = _BrokerFetchSession(
                    response_session, node, 1, dict(requested)
                )
        else:
            session = self.fetch_sessions.get(session_id)
            if session is None or session.node != node:
                return FetchResponse(error_code=FETCH_SESSION_ID_NOT_FOUND, session_id=0)
            if epoch != session.epoch:
                return FetchResponse(error_code=INVALID_FETCH_SESSION_EPOCH, session_id=0)
            for forgotten in request.forgotten_topics_data:
                for p in forgotten.partitions:
                    session.partitions.pop(TopicPartition(forgotten.topic, p), None)
                    session.reported_hw.pop(TopicPartition(forgotten.topic, p), None)
            session.partitions.update(requested)
            session.epoch += 1
            wanted = dict(session.partitions)
            incremental = True
            response_session = session_id
        budget = request.max_bytes
        filled = False
        by_topic: dict[str, list[PartitionData]] = {}
        leaders: set[int] = set()
        session_state = self.fetch_sessions.get(response_session)
        for tp, (offset, max_bytes, leader_epoch) in wanted.items():
            replica = self.read_replicas.get(tp)
            if (
                replica is not None
                and request.rack_id
                and replica != node
                and not self._partition_error(node, tp)
            ):
                part = self.partition(tp)
                by_topic.setdefault(tp.topic, []).append(
                    PartitionData(
                        partition_index=tp.partition,
                        high_watermark=part.high_watermark,
                        log_start_offset=part.log_start_offset,
                        preferred_read_replica=replica,
                        records=b"",  # type: ignore[arg-type]
                    )
                )
                continue
            data = self._fetch_partition(
                node, tp, offset, max_bytes, leader_epoch, request.isolation_level, budget
            )
            if self.fill_first_partition_only and filled:
                data.records = b""  # type: ignore[assignment]
            size = len(data.records or b"")
            if size:
                filled = True
                budget = max(0, budget - size)
            if incremental and session_state is not None:
                changed = (
                    size > 0
                    or data.error_code != NONE
                    or session_state.reported_hw.get(tp) != data.high_watermark
                )
                if not changed:
                    continue
            if session_state is not None:
                session_state.reported_hw[tp] = data.high_watermark
            leader = self._current_leader(tp, data.error_code, version, _FETCH_CURRENT_LEADER_VERSION)
            if leader is not None:
                data.current_leader = FetchLeader(leader_id=leader[0], leader_epoch=leader[1])
                leaders.add(leader[0])
            by_topic.setdefault(tp.topic, []).append(data)
        endpoints = []
        if version >= _FETCH_NODE_ENDPOINTS_VERSION:
            endpoints = [
                FetchNodeEndpoint(node_id=n.node_id, host=n.host, port=n.port, rack=n.rack)
                for n in (self.brokers[b] for b in sorted(leaders) if b in self.brokers)
            ]
        return FetchResponse(
            error_code=NONE,
            session_id=response_session,
            responses=[FetchableTopicResponse(topic=t, partitions=p) for t, p in by_topic.items()],
            node_endpoints=endpoints,
        )

    def _current_leader(
        self, tp: TopicPartition, error_code: int, version: int, since_version: int
    ) -> tuple[int, int] | None:
        """The (leader, epoch) a broker names when a request for ``tp`` missed the leader."""
        topic = self.topics.get(tp.topic)
        if (
            not self.report_current_leader
            or version < since_version
            or error_code not in _LEADER_MOVED
            or topic is None
            or tp.partition not in topic.partitions
        ):
            return None
        part = topic.partitions[tp.partition]
        return part.leader, part.leader_epoch

    def _fetch_partition(
        self,
        node: int,
        tp: TopicPartition,
        offset: int,
        max_bytes: int,
        leader_epoch: int,
        isolation_level: int,
        budget: int,
    ) -> PartitionData:
        follower = self.read_replicas.get(tp) == node  # a replica serving a follower fetch
        error = self._partition_error(node, tp, leader_only=not follower) or self._fault(
            FetchRequest, tp, node
        )
        if error:
            return PartitionData(
                partition_index=tp.partition,
                error_code=error,
                high_watermark=-1,
                records=b"",  # type: ignore[arg-type]
            )
        part = self.partition(tp)
        if leader_epoch >= 0 and leader_epoch != part.leader_epoch:
            code = FENCED_LEADER_EPOCH if leader_epoch < part.leader_epoch else UNKNOWN_LEADER_EPOCH
            return PartitionData(
                partition_index=tp.partition,
                error_code=code,
                high_watermark=-1,
                records=b"",  # type: ignore[arg-type]
            )
        if offset < part.log_start_offset or offset > part.high_watermark:
            return PartitionData(
                partition_index=tp.partition,
                error_code=OFFSET_OUT_OF_RANGE,
                high_watermark=part.high_watermark,
                log_start_offset=part.log_start_offset,
                records=b"",  # type: ignore[arg-type]
            )
        limit = part.last_stable_offset if isolation_level == 1 else part.high_watermark
        chunks: list[bytes] = []
        size = 0
        last_returned = offset - 1
        for batch in part.batches:
            if batch.last_offset < offset or batch.base_offset >= limit:
                continue
            if chunks and (size + len(batch.data) > max_bytes or size + len(batch.data) > budget):
                break
            if not chunks and budget <= 0:
                break
            chunks.append(batch.data)
            size += len(batch.data)
            last_returned = batch.last_offset
        records = b"".join(chunks)
        aborted = None
        if isolation_level == 1:
            aborted = [
                AbortedTransaction(producer_id=pid, first_offset=first)
                for pid, first, end in part.aborted
                if first <= last_returned and end >= offset
            ]
        return PartitionData(
            partition_index=tp.partition,
            error_code=NONE,
            high_watermark=part.high_watermark,
            last_stable_offset=part.last_stable_offset,
            log_start_offset=part.log_start_offset,
            aborted_transactions=aborted,
            records=records,  # type: ignore[arg-type]
        )

    # ListOffsets

    def _list_offsets(self, node: int, request: ListOffsetsRequest, version: int) -> ListOffsetsResponse:
        topics = []
        for t in request.topics:
            partitions = []
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                if self._take(self.omissions, ListOffsetsRequest, tp, node) is not None:
                    continue
                error = (
                    self._fault(ListOffsetsRequest, tp, node)
                    or self._fault(ListOffsetsRequest, None, node)
                    or self._partition_error(node, tp)
                )
                if error:
                    partitions.append(
                        ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=error)
                    )
                    continue
                offset, timestamp = self._offset_for(tp, p.timestamp, request.isolation_level)
                part = self.partition(tp)
                partitions.append(
                    ListOffsetsPartitionResponse(
                        partition_index=p.partition_index,
                        old_style_offsets=[offset] if version == 0 else [],
                        timestamp=timestamp,
                        offset=offset,
                        leader_epoch=part.leader_epoch,
                    )
                )
            topics.append(ListOffsetsTopicResponse(name=t.name, partitions=partitions))
        return ListOffsetsResponse(topics=topics)

    def _offset_for(self, tp: TopicPartition, timestamp: int, isolation_level: int) -> tuple[int, int]:
        part = self.partition(tp)
        if timestamp == -2:
            return part.log_start_offset, -1
        if timestamp == -1:
            return (part.last_stable_offset if isolation_level == 1 else part.high_watermark), -1
        if timestamp == -3:  # the record with the highest timestamp (the first such)
            best = (-1, -1)
            for batch in part.batches:
                if batch.is_control:
                    continue
                for delta, ts in enumerate(batch.timestamps):
                    if ts > best[1] and batch.base_offset + delta >= part.log_start_offset:
                        best = (batch.base_offset + delta, ts)
            return best
        for batch in part.batches:
            if batch.is_control:
                continue
            for delta, ts in enumerate(batch.timestamps):
                if ts >= timestamp and batch.base_offset + delta >= part.log_start_offset:
                    return batch.base_offset + delta, ts
        return -1, -1

    # Groups

    def _is_coordinator(self, node: int, group: str) -> bool:
        return self.coordinator_for(group) == node

    def _offset_commit(self, node: int, request: OffsetCommitRequest, version: int) -> OffsetCommitResponse:
        group = request.group_id
        top = self._fault(OffsetCommitRequest, None, node)
        if not top and not self._is_coordinator(node, group):
            top = NOT_COORDINATOR
        topics = []
        for t in request.topics:
            partitions = []
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                error = top or self._fault(OffsetCommitRequest, tp, node)
                if not error:
                    self.commit(
                        group, tp, p.committed_offset, p.committed_metadata or "", p.committed_leader_epoch
                    )
                partitions.append(
                    OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=error)
                )
            topics.append(OffsetCommitResponseTopic(name=t.name, partitions=partitions))
        return OffsetCommitResponse(topics=topics)

    def _offset_fetch(self, node: int, request: OffsetFetchRequest, version: int) -> OffsetFetchResponse:
        if version >= _OFFSET_FETCH_BATCHED_VERSION:
            groups = []
            for g in request.groups:
                wanted = None if g.topics is None else [(t.name, list(t.partition_indexes)) for t in g.topics]
                error, parts = self._committed_for(node, g.group_id, wanted)
                topics = [
                    OffsetFetchResponseTopics(
                        name=name,
                        partitions=[
                            OffsetFetchResponsePartitions(
                                partition_index=p,
                                committed_offset=o,
                                committed_leader_epoch=e,
                                metadata=m,
                                error_code=c,
                            )
                            for p, o, e, m, c in entries
                        ],
                    )
                    for name, entries in parts.items()
                ]
                groups.append(OffsetFetchResponseGroup(group_id=g.group_id, topics=topics, error_code=error))
            return OffsetFetchResponse(groups=groups)
        wanted = (
            None if request.topics is None else [(t.name, list(t.partition_indexes)) for t in request.topics]
        )
        error, parts = self._committed_for(node, request.group_id, wanted)
        legacy_topics = [
            OffsetFetchResponseTopic(
                name=name,
                partitions=[
                    OffsetFetchResponsePartition(
                        partition_index=p,
                        committed_offset=o,
                        committed_leader_epoch=e,
                        metadata=m,
                        error_code=c,
                    )
                    for p, o, e, m, c in entries
                ],
            )
            for name, entries in parts.items()
        ]
        return OffsetFetchResponse(topics=legacy_topics, error_code=error)

    def _committed_for(
        self, node: int, group: str, wanted: list[tuple[str, list[int]]] | None
    ) -> tuple[int, dict[str, list[tuple[int, int, int, str, int]]]]:
        top = self._fault(OffsetFetchRequest, None, node)
        if not top and not self._is_coordinator(node, group):
            top = NOT_COORDINATOR
        if top:
            return top, {}
        stored = self.committed.get(group, {})
        if wanted is None:
            wanted = [(tp.topic, [tp.partition]) for tp in sorted(stored)]
        parts: dict[str, list[tuple[int, int, int, str, int]]] = {}
        for name, indexes in wanted:
            for p in indexes:
                tp = TopicPartition(name, p)
                error = self._fault(OffsetFetchRequest, tp, node)
                c = stored.get(tp)
                entry = (
                    (p, -1, -1, "", error)
                    if c is None or error
                    else (p, c.offset, c.leader_epoch, c.metadata, 0)
                )
                parts.setdefault(name, []).append(entry)
        return NONE, parts

    def _find_coordinator(
        self, node: int, request: FindCoordinatorRequest, version: int
    ) -> FindCoordinatorResponse:
        keys = (
            list(request.coordinator_keys) if version >= _FIND_COORDINATOR_BATCHED_VERSION else [request.key]
        )
        answers = []
        for key in keys:
            error = self._fault(FindCoordinatorRequest, None, node)
            broker = self.brokers[self.coordinator_for(key)]
            if error:
                answers.append(Coordinator(key=key, node_id=-1, host="", port=-1, error_code=error))
            else:
                answers.append(
                    Coordinator(key=key, node_id=broker.node_id, host=broker.host, port=broker.port)
                )
        if version >= _FIND_COORDINATOR_BATCHED_VERSION:
            return FindCoordinatorResponse(coordinators=answers)
        one = answers[0]
        return FindCoordinatorResponse(
            error_code=one.error_code,
            error_message=None if not one.error_code else "injected",
            node_id=one.node_id,
            host=one.host,
            port=one.port,
        )

    # Produce and admin

    def _produce(self, node: int, request: ProduceRequest, version: int) -> ProduceResponse | None:
        responses = []
        leaders: set[int] = set()
        for t in request.topic_data:
            partitions = []
            for p in t.partition_data:
                tp = TopicPartition(t.name, p.index)
                error = (
                    self._fault(ProduceRequest, tp, node)
                    or self._fault(ProduceRequest, None, node)
                    or self._partition_error(node, tp)
                )
                if error:
                    answer = PartitionProduceResponse(index=p.index, error_code=error, base_offset=-1)
                    leader = self._current_leader(tp, error, version, _PRODUCE_CURRENT_LEADER_VERSION)
                    if leader is not None:
                        answer.current_leader = ProduceLeader(leader_id=leader[0], leader_epoch=leader[1])
                        leaders.add(leader[0])
                    partitions.append(answer)
                    continue
                base = -1
                for batch in iter_batches(memoryview(bytes(p.records or b""))):
                    offset = self.append_batch(tp, bytes(batch.raw()))
                    base = offset if base < 0 else base
                partitions.append(
                    PartitionProduceResponse(
                        index=p.index, base_offset=base, log_start_offset=self.partition(tp).log_start_offset
                    )
                )
            responses.append(TopicProduceResponse(name=t.name, partition_responses=partitions))
        if request.acks == 0:
            return None
        endpoints = [
            ProduceNodeEndpoint(node_id=n.node_id, host=n.host, port=n.port, rack=n.rack)
            for n in (self.brokers[b] for b in sorted(leaders) if b in self.brokers)
        ]
        return ProduceResponse(responses=responses, node_endpoints=endpoints)

    # OffsetForLeaderEpoch

    def _offset_for_leader_epoch(
        self, node: int, request: OffsetForLeaderEpochRequest, version: int
    ) -> OffsetForLeaderEpochResponse:
        topics = []
        for t in request.topics:
            partitions = []
            for p in t.partitions:
                tp = TopicPartition(t.topic, p.partition)
                error = (
                    self._fault(OffsetForLeaderEpochRequest, tp, node)
                    or self._fault(OffsetForLeaderEpochRequest, None, node)
                    or self._partition_error(node, tp)
                )
                if not error and p.current_leader_epoch >= 0:
                    current = self.partition(tp).leader_epoch
                    if p.current_leader_epoch != current:
                        error = (
                            FENCED_LEADER_EPOCH if p.current_leader_epoch < current else UNKNOWN_LEADER_EPOCH
                        )
                if error:
                    partitions.append(EpochEndOffset(error_code=error, partition=p.partition))
                    continue
                epoch, end_offset = self.end_offset_for(tp, p.leader_epoch)
                partitions.append(
                    EpochEndOffset(partition=p.partition, leader_epoch=epoch, end_offset=end_offset)
                )
            topics.append(OffsetForLeaderTopicResult(topic=t.topic, partitions=partitions))
        return OffsetForLeaderEpochResponse(topics=topics)

    def end_offset_for(self, tp: TopicPartition, epoch: int) -> tuple[int, int]:
        """``(epoch, end offset)`` as a Kafka leader answers OffsetForLeaderEpoch: the largest
        epoch at or below ``epoch`` it knows and the offset where the next epoch begins (the log
        end for the latest epoch); ``(-1, -1)`` when it cannot tell."""
        part = self.partition(tp)
        if epoch < 0:
            return -1, -1
        if epoch == part.epochs[-1][0]:
            return epoch, part.high_watermark
        higher = [(e, start) for e, start in part.epochs if e > epoch]
        if not higher:
            return -1, -1
        floor = [e for e, _ in part.epochs if e <= epoch]
        return (floor[-1] if floor else epoch), higher[0][1]

    def _init_producer_id(
        self, node: int, request: InitProducerIdRequest, version: int
    ) -> InitProducerIdResponse:
        """A new producer id for an idempotent producer (the producer is enabled by default). The
        plain fake keeps no producer state: Produce ignores producer ids and sequences (see
        ``fake_transactions.TxnFakeCluster`` for a broker that checks them)."""
        error = self._fault(InitProducerIdRequest, None, node)
        if error:
            return InitProducerIdResponse(error_code=error, producer_id=-1, producer_epoch=-1)
        self._last_producer_id = getattr(self, "_last_producer_id", 999) + 1
        return InitProducerIdResponse(producer_id=self._last_producer_id, producer_epoch=0)

    def _create_topics(self, node: int, request: CreateTopicsRequest, version: int) -> CreateTopicsResponse:
        results = []
        for t in request.topics:
            if t.name in self.topics:
                results.append(
                    CreatableTopicResult(name=t.name, error_code=TOPIC_ALREADY_EXISTS, error_message="exists")
                )
                continue
            count = t.num_partitions if t.num_partitions > 0 else 1
            if not request.validate_only:
                self.create_topic(t.name, count)
            results.append(
                CreatableTopicResult(
                    name=t.name,
                    topic_id=self.topics[t.name].topic_id if t.name in self.topics else uuid.UUID(int=0),
                    num_partitions=count,
                    replication_factor=1,
                )
            )
        return CreateTopicsResponse(topics=results)

    def _delete_topics(self, node: int, request: DeleteTopicsRequest, version: int) -> DeleteTopicsResponse:
        if version >= _DELETE_TOPICS_BY_STATE_VERSION:
            names = [t.name for t in request.topics if t.name is not None]
        else:
            names = list(request.topic_names)
        results = []
        for name in names:
            topic = self.topics.pop(name, None)
            if topic is None:
                results.append(DeletableTopicResult(name=name, error_code=UNKNOWN_TOPIC_OR_PARTITION))
            else:
                results.append(DeletableTopicResult(name=name, topic_id=topic.topic_id))
        return DeleteTopicsResponse(responses=results)


# -- the network ----------------------------------------------------------------------------


def roundtrip(message: Any, version: int, cls: type[Any] | None = None) -> Any:
    """``message`` encoded at ``version`` and decoded again (as ``cls``, default its class)."""
    w = Writer()
    message.encode(w, version)
    return (cls or type(message)).decode(Reader(w.getvalue()), version)


@dataclass(slots=True)
class Exchange:
    """One request sent through the fake network and its (not yet delivered) outcome."""

    unsent: UnsentRequest
    node_id: int
    broker_id: int | None
    version: int
    request: Any
    response: Any
    sent_ms: int
    error: KafkaError | None = None
    dropped: bool = False
    delivered: bool = False

    @property
    def api(self) -> type[Any]:
        return type(self.unsent.request)

    def deadline_ms(self, request_timeout_ms: int) -> int:
        """When the network client would give up waiting for the response."""
        timeout = self.unsent.timeout_ms
        return self.sent_ms + (timeout if timeout is not None else request_timeout_ms)


class FakeNetwork:
    """Sends UnsentRequests to a :class:`FakeCluster`; the test delivers the responses."""

    def __init__(self, cluster: FakeCluster, *, wire: bool = True, request_timeout_ms: int = 30_000) -> None:
        self.cluster = cluster
        self.wire = wire
        self.request_timeout_ms = request_timeout_ms
        self.exchanges: list[Exchange] = []

    # -- sending ----------------------------------------------------------------------------

    def add_all(self, requests: Iterable[UnsentRequest] | PollResult, now_ms: int) -> list[Exchange]:
        """Send every request (what the delegate does once the brokers are ready)."""
        if isinstance(requests, PollResult):
            requests = requests.unsent
        return [self.send(r, now_ms) for r in requests]

    def send(self, unsent: UnsentRequest, now_ms: int) -> Exchange:
        node_id = unsent.node_id if unsent.node_id is not None else self.least_loaded()
        broker_id = self.broker_for(node_id)
        cls: Any = type(unsent.request)
        key = ApiKey(cls.API_KEY)
        lo, hi = self.cluster.api_versions.get(key, (0, -1))
        version = min(hi, cls.MAX_VERSION, unsent.max_version if unsent.max_version is not None else hi)
        exchange = Exchange(unsent, node_id, broker_id, version, None, None, now_ms)
        self.exchanges.append(exchange)
        if version < max(lo, cls.MIN_VERSION):
            exchange.error = UnsupportedVersionError(f"no common version of {key.name}")
            return exchange
        if unsent.min_version is not None and version < unsent.min_version:
            exchange.error = UnsupportedVersionError(
                f"broker {broker_id} supports {key.name} only up to v{version}; this request needs "
                f"v{unsent.min_version} or later"
            )
            return exchange
        request = roundtrip(unsent.request, version) if self.wire else unsent.request
        exchange.request = request
        try:
            if broker_id is None:
                raise BrokerDownError(f"node {node_id} is unknown")
            response = self.cluster.handle(broker_id, request, version)
        except BrokerDownError as exc:
            exchange.error = KafkaConnectionError(str(exc))
            return exchange
        exchange.dropped = self.cluster.take_drop(request)
        if response is not None and self.wire:
            response = roundtrip(response, version, cls.RESPONSE)
        exchange.response = response
        return exchange

    def least_loaded(self) -> int:
        """The running broker with the fewest undelivered requests (lowest id on ties)."""
        live = [b for b in sorted(self.cluster.brokers) if b not in self.cluster.stopped] or sorted(
            self.cluster.brokers
        )
        return min(live, key=lambda b: sum(1 for e in self.pending() if e.broker_id == b))

    def broker_for(self, node_id: int) -> int | None:
        """The broker behind a client node id (bootstrap ids are -1, -2, ...)."""
        if is_coordinator_node_id(node_id):
            return 2**31 - 1 - node_id
        if node_id < 0:
            ids = sorted(self.cluster.brokers)
            index = -node_id - 1
            return ids[index] if index < len(ids) else None
        return node_id

    # -- delivering ---------------------------------------------------------------------------

    def pending(self, api: type[Any] | None = None) -> list[Exchange]:
        """Sent, not delivered and not lost, oldest first."""
        return [
            e for e in self.exchanges if not e.delivered and not e.dropped and (api is None or e.api is api)
        ]

    def deliver(self, exchange: Exchange | None = None, *, received_ms: int) -> Exchange:
        """Hand one outcome (default: the oldest pending) to its request's handler."""
        if exchange is None:
            exchange = self.pending()[0]
        assert not exchange.delivered, "already delivered"
        exchange.delivered = True
        unsent = exchange.unsent
        request = ClientRequest(
            node_id=exchange.node_id,
            request=unsent.request,
            callback=unsent.handler,
            created_ms=exchange.sent_ms,
            expect_response=unsent.expect_response,
            max_version=unsent.max_version,
            timeout_ms=unsent.timeout_ms,
        )
        body = None if exchange.error is not None else exchange.response
        version = -1 if exchange.error is not None else exchange.version
        unsent.handler(ClientResponse(request, body, exchange.error, version, received_ms))
        return exchange

    def deliver_all(self, *, received_ms: int, api: type[Any] | None = None) -> list[Exchange]:
        """Deliver every pending outcome (of class ``api``), oldest first."""
        return [self.deliver(e, received_ms=received_ms) for e in self.pending(api)]

    def fail(self, exchange: Exchange, error: KafkaError, *, received_ms: int) -> None:
        """Deliver ``error`` instead of the response (a lost connection, a timeout...)."""
        exchange.error = error
        exchange.dropped = False
        self.deliver(exchange, received_ms=received_ms)

    def expire(self, now_ms: int) -> list[Exchange]:
        """Fail undelivered requests (lost ones included) whose timeout passed (the request's
        own ``timeout_ms``, else request.timeout.ms) with KafkaTimeoutError, as the network
        client would."""
        expired = [
            e for e in self.exchanges if not e.delivered and now_ms >= e.deadline_ms(self.request_timeout_ms)
        ]
        for e in expired:
            self.fail(e, KafkaTimeoutError("request timed out"), received_ms=now_ms)
        return expired

    def run(self, managers: Sequence[Any], now_ms: int) -> list[Exchange]:
        """One network-thread pass with instant responses: poll every manager at ``now_ms``,
        send what they return and deliver every pending outcome at ``now_ms``."""
        sent: list[Exchange] = []
        for manager in managers:
            sent += self.add_all(manager.poll(now_ms), now_ms)
        self.deliver_all(received_ms=now_ms)
        return sent

    # -- inspecting ---------------------------------------------------------------------------

    def sent(self, api: type[Any]) -> list[Any]:
        """Requests of class ``api`` as the broker decoded them, in sending order."""
        return [e.request for e in self.exchanges if e.api is api and e.request is not None]


def fetch_partitions(request: FetchRequest) -> list[TopicPartition]:
    """The partitions a Fetch request lists, in request order."""
    return [TopicPartition(t.topic, p.partition) for t in request.topics for p in t.partitions]


def forgotten_partitions(request: FetchRequest) -> list[TopicPartition]:
    """The partitions a Fetch request asks the session to forget."""
    return [TopicPartition(t.topic, p) for t in request.forgotten_topics_data for p in t.partitions]


# -- client-side wiring ---------------------------------------------------------------------

BACKOFF_MS = 100
BACKOFF_MAX_MS = 1_000


def exact_backoff() -> ExponentialBackoff:
    """retry.backoff.ms=100 up to 1000, without jitter, so tests know every retry time."""
    return ExponentialBackoff(BACKOFF_MS, BACKOFF_MAX_MS, jitter=0.0)


@dataclass(slots=True)
class ClientSide:
    """What every client's network thread owns, wired to a fake cluster."""

    fake: FakeCluster
    cluster: ClusterMetadata
    metadata: MetadataManager
    net: FakeNetwork

    def fetcher(
        self, subscription: SubscriptionState, buffer: FetchBuffer, **overrides: Any
    ) -> FetchRequestManager:
        """A FetchRequestManager on this side with the consumer's defaults (``overrides`` wins)."""
        settings: dict[str, Any] = {
            "fetch_min_bytes": 1,
            "fetch_max_bytes": 50 << 20,
            "fetch_max_wait_ms": 500,
            "max_partition_fetch_bytes": 1 << 20,
            "buffer_max_bytes": 64 << 20,
            "read_committed": False,
            "check_crcs": True,
            "client_rack": "",
            "retry_backoff": exact_backoff(),
        }
        settings.update(overrides)
        return FetchRequestManager(subscription, self.cluster, self.metadata, buffer, **settings)

    def offsets(
        self,
        subscription: SubscriptionState,
        commits: CommitRequestManager | None,
        on_error: Callable[[KafkaError], None],
        *,
        read_committed: bool = False,
    ) -> OffsetsRequestManager:
        """An OffsetsRequestManager on this side (``commits``: None without a group)."""
        return OffsetsRequestManager(
            subscription,
            self.cluster,
            self.metadata,
            commits,
            read_committed=read_committed,
            retry_backoff=exact_backoff(),
            default_api_timeout_ms=60_000,
            on_error=on_error,
        )


def connect(
    fake: FakeCluster, topics: Iterable[str] = (), *, now_ms: int = 0, wire: bool = True
) -> ClientSide:
    """Client metadata for ``fake`` (bootstrapped, then refreshed once for ``topics``)."""
    cluster = ClusterMetadata([(b.host, b.port) for _, b in sorted(fake.brokers.items())])
    metadata = MetadataManager(cluster, RequestState(exact_backoff()), max_age_ms=300_000)
    metadata.set_topics(set(topics))
    net = FakeNetwork(fake, wire=wire)
    net.run([metadata], now_ms)
    return ClientSide(fake, cluster, metadata, net)
