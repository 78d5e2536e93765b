"""Sends Fetch requests and fills the fetch buffer. [bg, pure: takes now_ms]

Each poll, for every broker leading a fetchable partition (assigned, positioned, not paused,
no data already buffered) and with no fetch in flight, one Fetch request is planned through
that broker's :class:`~kaflux.consumer.fetch_session.FetchSession`. Nothing is fetched while
the fetch buffer holds ``fetch.buffer.max.bytes`` or more, which bounds memory.

Responses become :class:`~kaflux.consumer.completed_fetch.CompletedFetch` objects without
decoding records (with metrics, only the batch headers are read, to count the records of a
response for records-per-request-avg). Partition errors: stale metadata (leader moved, unknown partition...)
triggers a metadata refresh and a retry; NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH
carrying the partition's current leader (KIP-951) also move the partition to that leader at
once, so the next fetch goes there without waiting for the refresh, after the position is
validated against it (see the offsets request manager); OFFSET_OUT_OF_RANGE requests a reset by
``auto.offset.reset`` (or, with ``none``, reaches the application as
:class:`~kaflux.errors.OffsetOutOfRangeError`); anything else reaches the application
through the buffer and is raised by ``poll()``. A response above ``receive.message.max.bytes``
(:class:`~kaflux.errors.ResponseTooLargeError`) goes to ``on_error``, so ``poll()`` raises it once
per failed fetch, and fetching goes on.

Follower fetching (KIP-392): a Fetch carries ``client.rack``; a leader whose
``replica.selector.class`` prefers another replica for this rack answers a partition with
``preferred_read_replica`` (and no records). That partition is then fetched from that node, as
Java's fetcher does (``AbstractFetch.selectReadReplica``), until the preference expires after
``metadata.max.age.ms``, the node is no longer in the metadata, or a fetch from it fails (any
partition error, or the request itself): then it goes back to the leader. An
OFFSET_OUT_OF_RANGE from a follower does not reset the position: the follower may just be
behind, so the leader is asked again first.
"""

from __future__ import annotations

import logging
import struct
from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING

from kaflux.consumer.completed_fetch import CompletedFetch
from kaflux.consumer.fetch_session import FetchPlan, FetchSession, PartitionFetchData
from kaflux.consumer.positions import LeaderAndEpoch, ResetStrategy
from kaflux.errors import (
    FencedLeaderEpochError,
    KafkaError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    ResponseTooLargeError,
    error_for_code,
)
from kaflux.network.backoff import ExponentialBackoff, RequestState
from kaflux.network.cluster import ClusterMetadata
from kaflux.network.metadata_manager import MetadataManager
from kaflux.network.requests import ClientResponse, PollResult, RequestManager, UnsentRequest
from kaflux.protocol.messages.fetch import (
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    ForgottenTopic,
    PartitionData,
)
from kaflux.structs import Node, TopicPartition

if TYPE_CHECKING:
    from kaflux.consumer.fetch_buffer import FetchBuffer
    from kaflux.consumer.subscription_state import SubscriptionState
    from kaflux.metrics.clients import FetchMetrics

log = logging.getLogger(__name__)

#: v13+ addresses topics by id; v12 (flexible, sessions, names) is what kaflux sends. v12
#: responses carry a partition's current leader (KIP-951); the brokers' endpoints come only
#: from v16, so a leader the client does not know yet waits for the metadata refresh.
MAX_FETCH_VERSION = 12

_OFFSET_OUT_OF_RANGE = OffsetOutOfRangeError.code
#: fetch.max.wait.ms for a Fetch of caught-up partitions while another partition of the same
#: broker still has a backlog (see FetchRequestManager._nodes_to_hurry)
SHORT_WAIT_MS = 10
_SESSION_ERRORS = {70, 71}  # FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH
#: partition errors whose response may name the current leader (KIP-951)
_LEADER_MOVED = {NotLeaderOrFollowerError.code, FencedLeaderEpochError.code}
#: the v2 record batch header: base offset, length, leader epoch, magic, crc, attributes,
#: last offset delta, timestamps, producer id, epoch, base sequence, record count
_BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
_CONTROL_BATCH = 0x20


def count_records(records: memoryview, fetch_offset: int) -> int:
    """The records of the complete batches in ``records`` at or after ``fetch_offset``,
    control batches left out, read from the batch headers alone (a legacy message set entry
    counts one)."""
    count = 0
    pos = 0
    end = len(records)
    unpack = _BATCH_HEADER.unpack_from
    while end - pos >= _BATCH_HEADER.size:
        base, length, _, magic, _, attributes, last_delta, _, _, _, _, _, n = unpack(records, pos)
        size = 12 + length
        if length < 0 or pos + size > end:
            break  # the partial batch a size limit cut off
        if magic < 2:
            count += base >= fetch_offset
        elif not attributes & _CONTROL_BATCH:
            last = base + last_delta
            if base >= fetch_offset:
                count += n
            elif last >= fetch_offset:
                count += min(n, last - fetch_offset + 1)
        pos += size
    return count


class FetchRequestManager(RequestManager):
    """Keeps one fetch in flight per broker while the buffer has room."""

    def __init__(
        self,
        subscription: SubscriptionState,
        cluster: ClusterMetadata,
        metadata: MetadataManager,
        buffer: FetchBuffer,
        *,
        fetch_min_bytes: int,
        fetch_max_bytes: int,
        fetch_max_wait_ms: int,
        max_partition_fetch_bytes: int,
        buffer_max_bytes: int,
        read_committed: bool,
        check_crcs: bool,
        client_rack: str,
        retry_backoff: ExponentialBackoff,
        use_sessions: bool = True,
        metadata_max_age_ms: int = 300_000,
        metrics: FetchMetrics | None = None,
        on_error: Callable[[KafkaError], None] | None = None,
    ) -> None:
        self._subscription = subscription
        #: where errors the application must see go (the consumer raises them from poll())
        self._on_error = on_error
        self._cluster = cluster
        self._metadata = metadata
        self._buffer = buffer
        self._min_bytes = fetch_min_bytes
        self._max_bytes = fetch_max_bytes
        self._max_wait_ms = fetch_max_wait_ms
        self._partition_max_bytes = max_partition_fetch_bytes
        self._buffer_max_bytes = buffer_max_bytes
        self._read_committed = read_committed
        self._check_crcs = check_crcs
        self._rack = client_rack
        #: KIP-392: partition -> (the replica its leader prefers we read from, until when)
        self._read_replicas: dict[TopicPartition, tuple[int, int]] = {}
        self._read_replica_ttl_ms = metadata_max_age_ms
        self._backoff = retry_backoff
        self._use_sessions = use_sessions
        self._sessions: dict[int, FetchSession] = {}
        #: one RequestState per broker: a fetch in flight, and the backoff after a failure
        self._nodes: dict[int, RequestState] = {}
        self.fetches_sent = 0
        self._metrics = metrics

    def poll(self, now_ms: int) -> PollResult:
        if self._buffer.size_bytes() >= self._buffer_max_bytes:
            return PollResult(100)  # the application thread wakes us as it drains the buffer
        buffered = self._buffer.buffered_partitions()
        wanted: dict[int, dict[TopicPartition, PartitionFetchData]] = defaultdict(dict)
        unknown_leader = False
        wait = 5000
        for tp, position, version in self._subscription.fetchable_partitions(buffered.__contains__):
            leader = self._cluster.leader_for(tp)
            if leader is None:
                unknown_leader = True
                continue
            target = self.read_replica(tp, leader, now_ms)
            node = self._node(target)
            if node.in_flight:
                continue
            if not node.can_send(now_ms):
                wait = min(wait, node.remaining_backoff_ms(now_ms))  # come back when it ends
                continue
            epoch = self._cluster.leader_epoch(tp)  # the current leader's, not the one at seek time
            wanted[target][tp] = PartitionFetchData(
                position.offset, self._partition_max_bytes, -1 if epoch is None else epoch, version
            )
        if unknown_leader:
            self._metadata.request_update()
        hurry = self._nodes_to_hurry(wanted, buffered)
        short_wait = min(SHORT_WAIT_MS, self._max_wait_ms)
        unsent = [
            self._request(node, partitions, now_ms, short_wait if node in hurry else self._max_wait_ms)
            for node, partitions in wanted.items()
        ]
        return PollResult(min(wait, 100) if unknown_leader else wait, unsent)

    def read_replica(self, tp: TopicPartition, leader: int, now_ms: int) -> int:
        """The node to fetch ``tp`` from: the replica its leader preferred (KIP-392) while that
        preference holds and the node is known, else the leader."""
        preferred = self._read_replicas.get(tp)
        if preferred is None:
            return leader
        node_id, expires_ms = preferred
        if now_ms >= expires_ms or self._cluster.node(node_id) is None:
            del self._read_replicas[tp]
            return leader
        return node_id

    def _clear_read_replica(self, tp: TopicPartition) -> bool:
        """Fetch ``tp`` from its leader again; True if it was read from another replica."""
        return self._read_replicas.pop(tp, None) is not None

    def _nodes_to_hurry(
        self, wanted: dict[int, dict[TopicPartition, PartitionFetchData]], buffered: set[TopicPartition]
    ) -> set[int]:
        """Brokers whose Fetch should come back soon: every partition it asks for is caught up,
        while a partition of theirs with data waiting in the buffer is not. The broker would hold
        such a Fetch for fetch.max.wait.ms, and with it the lagging partition's next fetch (one
        fetch per broker at a time): on Tansu, the tail of a backlog then came in 500 ms steps."""
        # A buffered partition may have been revoked since; it no longer counts.
        behind: set[int] = set()
        for tp, lag in self._subscription.lags(buffered, self._read_committed).items():
            leader = self._cluster.leader_for(tp)
            if leader is not None and (lag is None or lag > 0):
                behind.add(self._read_replicas.get(tp, (leader, 0))[0])
        hurry: set[int] = set()
        for node, partitions in wanted.items():
            if node in behind:
                lags = self._subscription.lags(partitions, self._read_committed)
                if len(lags) == len(partitions) and all(lag == 0 for lag in lags.values()):
                    hurry.add(node)
        return hurry

    def _request(
        self, node: int, partitions: dict[TopicPartition, PartitionFetchData], now_ms: int, max_wait_ms: int
    ) -> UnsentRequest[FetchResponse]:
        session = self._sessions.setdefault(node, FetchSession(node, self._use_sessions))
        plan = session.plan(partitions)
        topics: dict[str, list[FetchPartition]] = {}
        for tp in plan.to_send:
            data = plan.partitions[tp]
            topics.setdefault(tp.topic, []).append(
                FetchPartition(
                    partition=tp.partition,
                    current_leader_epoch=data.current_leader_epoch,
                    fetch_offset=data.fetch_offset,
                    partition_max_bytes=data.max_bytes,
                )
            )
        forgotten: dict[str, list[int]] = defaultdict(list)
        for tp in plan.to_forget:
            forgotten[tp.topic].append(tp.partition)
        request = FetchRequest(
            replica_id=-1,
            max_wait_ms=max_wait_ms,
            min_bytes=self._min_bytes,
            max_bytes=self._max_bytes,
            isolation_level=1 if self._read_committed else 0,
            session_id=plan.session_id,
            session_epoch=plan.epoch,
            topics=[FetchTopic(topic=t, partitions=p) for t, p in topics.items()],
            forgotten_topics_data=[ForgottenTopic(topic=t, partitions=p) for t, p in forgotten.items()],
            rack_id=self._rack,
        )
        self._node(node).on_send(now_ms)
        self.fetches_sent += 1
        return UnsentRequest(
            request, node, lambda r: self._on_response(node, session, plan, r), MAX_FETCH_VERSION
        )

    def _on_response(
        self, node: int, session: FetchSession, plan: FetchPlan, response: ClientResponse[FetchResponse]
    ) -> None:
        state = self._node(node)
        state.in_flight = False
        if response.error is not None:
            session.reset()
            self._node_failed(node, response.received_ms)
            for tp in plan.partitions:  # as Java: fetch them from their leaders again
                self._clear_read_replica(tp)
            if isinstance(response.error, ResponseTooLargeError) and self._on_error is not None:
                # Retrying cannot cure it while the data stays that large: tell the application
                # (once per failed fetch), as Java raises a fetch error, and keep fetching.
                self._on_error(response.error)
            if response.error.invalid_metadata:
                self._metadata.request_update()
            return
        body = response.body
        session.on_response(plan, body.session_id, body.error_code)
        if body.error_code != 0:
            if body.error_code not in _SESSION_ERRORS:
                self._node_failed(node, response.received_ms)
                self._metadata.request_update()
            return
        state.on_success()
        completed: list[CompletedFetch] = []
        new_leaders: dict[TopicPartition, tuple[int, int]] = {}
        metrics = self._metrics
        fetched_bytes = fetched_records = 0
        for topic in body.responses:
            for p in topic.partitions:
                tp = TopicPartition(topic.topic, p.partition_index)
                data = plan.partitions.get(tp)
                if data is not None:
                    if metrics is not None and p.records:
                        fetched_bytes += len(p.records)
                        fetched_records += count_records(p.records, data.fetch_offset)
                    if p.preferred_read_replica >= 0 and p.error_code == 0:
                        # KIP-392: read this partition from that replica from now on
                        expires = response.received_ms + self._read_replica_ttl_ms
                        self._read_replicas[tp] = (p.preferred_read_replica, expires)
                    leader = p.current_leader
                    if p.error_code in _LEADER_MOVED and leader.leader_id >= 0 and leader.leader_epoch >= 0:
                        new_leaders[tp] = (leader.leader_id, leader.leader_epoch)
                    fetch = self._completed_fetch(tp, data, p)
                    if fetch is not None:
                        completed.append(fetch)
        if new_leaders:
            self._apply_current_leaders(
                new_leaders, [Node(e.node_id, e.host, e.port, e.rack) for e in body.node_endpoints]
            )
        if metrics is not None:
            latency = response.received_ms - response.request.created_ms
            metrics.fetch_answered(
                latency, fetched_bytes, fetched_records, body.throttle_time_ms, response.received_ms
            )
        if completed:
            self._buffer.add(completed)

    def _apply_current_leaders(
        self, leaders: dict[TopicPartition, tuple[int, int]], nodes: list[Node]
    ) -> None:
        """KIP-951: take the leaders a response named as the partitions' own; their positions
        are validated against the new leader before they are fetched again (Java's
        ``AbstractFetch.handleFetchSuccess``)."""
        updated = self._cluster.update_partition_leadership(leaders, nodes)
        if not updated:
            return
        log.debug(
            "leaders moved (from a Fetch response): %s", {str(tp): leaders[tp] for tp in sorted(updated)}
        )
        self._subscription.maybe_validate_positions(
            {
                tp: LeaderAndEpoch(self._cluster.leader_for(tp), self._cluster.leader_epoch(tp))
                for tp in updated
            }
        )

    def _completed_fetch(
        self, tp: TopicPartition, data: PartitionFetchData, p: PartitionData
    ) -> CompletedFetch | None:
        error: KafkaError | None = None
        if p.error_code == _OFFSET_OUT_OF_RANGE:
            error = OffsetOutOfRangeError(
                f"fetching {tp} at offset {data.fetch_offset} (auto.offset.reset=none: seek to a "
                "valid offset)",
                offsets={tp: data.fetch_offset},
            )
        elif p.error_code != 0:
            error = error_for_code(p.error_code)(f"fetching {tp} at offset {data.fetch_offset}")
        if error is not None:
            if self._clear_read_replica(tp) and (
                error.invalid_metadata or error.retriable or p.error_code == _OFFSET_OUT_OF_RANGE
            ):
                # A follower failed (or is behind): ask the leader before anything else, as
                # Java does; the position is not reset on a follower's OFFSET_OUT_OF_RANGE.
                if p.error_code != _OFFSET_OUT_OF_RANGE:
                    self._metadata.request_update()
                return None
            if error.invalid_metadata or error.retriable:
                self._metadata.request_update()
                return None
            if (
                p.error_code == _OFFSET_OUT_OF_RANGE
                and self._subscription.default_reset() is not ResetStrategy.NONE
            ):
                if (
                    self._subscription.is_assigned(tp)
                    and self._subscription.position_version(tp) == data.position_version
                ):
                    self._subscription.request_reset(tp)
                return None
        if error is None and not p.records:
            # Nothing to read: record the offsets now rather than parking an empty fetch in
            # the buffer, which would keep the partition from being fetched until poll().
            if (
                self._subscription.is_assigned(tp)
                and self._subscription.position_version(tp) == data.position_version
            ):
                self._subscription.update_fetch_offsets(
                    tp, p.high_watermark, p.last_stable_offset, p.log_start_offset
                )
            return None
        aborted = [(a.producer_id, a.first_offset) for a in p.aborted_transactions or ()]
        return CompletedFetch(
            tp,
            data.fetch_offset,
            data.position_version,
            p.records if error is None else None,
            high_watermark=p.high_watermark,
            last_stable_offset=p.last_stable_offset,
            log_start_offset=p.log_start_offset,
            aborted_transactions=aborted,
            error=error,
            read_committed=self._read_committed,
            check_crcs=self._check_crcs,
        )

    def _node(self, node: int) -> RequestState:
        state = self._nodes.get(node)
        if state is None:
            state = self._nodes[node] = RequestState(self._backoff)
        return state

    def _node_failed(self, node: int, now_ms: int) -> None:
        self._node(node).on_failure(now_ms)

    def poll_on_close(self, now_ms: int) -> PollResult:
        """Fetch sessions are left to expire on the brokers; nothing to send."""
        return PollResult()
