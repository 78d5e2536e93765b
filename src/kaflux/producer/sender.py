"""Turns ready batches into Produce requests and their answers into record futures.
[bg, pure: takes now_ms]

A request manager (Java's ``Sender``): ``poll(now_ms)`` expires batches past
``delivery.timeout.ms``, lets the :class:`~kaflux.producer.transaction_manager.TransactionManager`
settle its state (a producer id to get, an epoch to bump, partitions to add to the transaction,
a transaction to complete), then drains ready batches from the accumulator, groups them by
leader and returns Produce requests: one batch per partition per request, at most
``max.in.flight.requests.per.connection`` requests per broker. Retriable errors (a leader moved,
a timeout, a lost connection; with idempotence also the sequence errors the transaction manager
says to retry) put the batch back in its partition's queue after ``retry.backoff.ms``
(exponential, jittered) while ``retries`` and ``delivery.timeout.ms`` allow; other errors fail
the batch's futures with the broker's error class. After a fatal error (a fenced producer) no
batch is sent any more: the queued ones fail with that error.

Metrics (``producer-metrics``, :class:`~kaflux.metrics.clients.ProducerMetrics`) are recorded
here, per request and per batch: what is sent, the answers' latency, errors and retries.

NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH answers that name the partition's current leader
(Produce v10+, KIP-951) move the partition to that leader in the cluster metadata at once (with
the broker's address, from the response's node endpoints, if it is new), and its batch is
retried there without a backoff, as Java does; a metadata refresh is still requested.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import TYPE_CHECKING, Protocol

from kaflux.errors import (
    DuplicateSequenceNumberError,
    FencedLeaderEpochError,
    KafkaError,
    KafkaTimeoutError,
    NotLeaderOrFollowerError,
    error_for_code,
)
from kaflux.network.backoff import ExponentialBackoff
from kaflux.network.cluster import ClusterMetadata
from kaflux.network.metadata_manager import MetadataManager
from kaflux.network.requests import ClientResponse, PollResult, RequestManager, UnsentRequest
from kaflux.producer.transaction_manager import TransactionAbortedError, TransactionManager, TxnState
from kaflux.protocol.messages.produce import (
    NodeEndpoint,
    PartitionProduceData,
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
)
from kaflux.structs import Node, TopicPartition

if TYPE_CHECKING:
    from kaflux.metrics.clients import ProducerMetrics
    from kaflux.producer.accumulator import ProducerBatch, RecordAccumulator

log = logging.getLogger("kaflux.producer")

#: The newest Produce version that still addresses topics by name (v13 uses topic ids).
MAX_PRODUCE_VERSION = 12
#: The newest Produce version of transactions v1: from v12 the partition leader adds the
#: partition to the transaction itself (KIP-890), which a v1 transaction must not rely on.
MAX_PRODUCE_VERSION_TXN_V1 = 11
#: How soon to look again while a fatal error holds everything back.
_FATAL_POLL_MS = 1000
#: how soon to look again at batches held back because their leader's connection is not ready
_NOT_READY_RECHECK_MS = 50


class LeaderConnections(Protocol):
    """What the sender asks the network client about a leader's connection (network thread)."""

    def ready(self, node_id: int, now_ms: int) -> bool:
        """Connected and able to take a request; if not, starts connecting unless backing off."""
        ...

    def connection_failed_recently(self, node_id: int, now_ms: int) -> bool:
        """In reconnect backoff after a failed connection."""
        ...


#: partition errors whose answer may name the current leader (KIP-951)
_LEADER_MOVED = {NotLeaderOrFollowerError.code, FencedLeaderEpochError.code}


class ProduceRequestManager(RequestManager):
    """Sends batches; completes, retries or fails them."""

    def __init__(
        self,
        accumulator: RecordAccumulator,
        cluster: ClusterMetadata,
        metadata: MetadataManager,
        *,
        acks: int,
        request_timeout_ms: int,
        retries: int,
        delivery_timeout_ms: int,
        retry_backoff: ExponentialBackoff,
        transaction_manager: TransactionManager | None = None,
        max_in_flight_per_node: int = 5,
        metrics: ProducerMetrics | None = None,
        connections: LeaderConnections | None = None,
    ) -> None:
        self._accumulator = accumulator
        #: the network client's view of each broker's connection (None: drain for any leader)
        self._connections = connections
        self._cluster = cluster
        self._metadata = metadata
        self._acks = acks
        self._request_timeout_ms = request_timeout_ms
        self._retries = retries
        self._delivery_timeout_ms = delivery_timeout_ms
        self._retry_backoff = retry_backoff
        self._tm = transaction_manager
        self._max_in_flight = max(1, max_in_flight_per_node)
        self._node_in_flight: dict[int, int] = {}
        self._closing = False
        self.in_flight_requests = 0
        self._metrics = metrics

    # -- request manager ---------------------------------------------------------------------

    def poll(self, now_ms: int) -> PollResult:
        """Return Produce requests for every broker that leads a ready partition."""
        tm = self._tm
        for batch in self._accumulator.expire(now_ms):
            self._fail_batch(
                batch,
                KafkaTimeoutError(
                    f"{batch.count} record(s) for {batch.tp} expired after delivery.timeout.ms="
                    f"{self._delivery_timeout_ms} without being sent"
                ),
                now_ms,
                adjust_sequences=False,
            )
            if tm is not None and batch.attempts > 0:
                tm.mark_sequence_unresolved(batch)
        if tm is not None:
            tm.maybe_resolve_sequences()
            if tm.has_fatal_error:
                error = tm.last_error or KafkaError("the producer hit a fatal error")
                self._accumulator.abort_undrained(error)
                return PollResult(_FATAL_POLL_MS)
            tm.bump_idempotent_epoch_and_reset_id_if_needed()
            if tm.is_transactional:
                self._prepare_transaction(tm)
        topics = self._accumulator.topics_with_data()
        if topics:
            self._metadata.add_topics(topics)
        unsent: list[UnsentRequest[ProduceResponse]] = []
        wait_ms = 2**31
        not_ready: set[int] = set()
        unreachable: set[int] = set()
        connections = self._connections

        def skip(node_id: int) -> bool:
            # Like Java's Sender, drain batches only for a leader whose connection is ready
            # (asking starts connecting to it): a batch drained for a broker that cannot be
            # reached would wait in the unsent queue for request.timeout.ms, even after the
            # metadata named a new leader (a dead broker's partitions stalled until it came
            # back). Left in the accumulator, it goes to whichever leader the metadata names next.
            if (
                connections is not None
                and node_id not in not_ready
                and not connections.ready(node_id, now_ms)
            ):
                not_ready.add(node_id)
                if connections.connection_failed_recently(node_id, now_ms):
                    unreachable.add(node_id)
            if node_id in not_ready:
                return True
            return self._node_full(node_id)

        for _ in range(self._max_in_flight):
            by_node, next_ms, unknown_leader = self._accumulator.drain_ready(
                now_ms, self._cluster.leader_for, tm, skip
            )
            wait_ms = min(wait_ms, next_ms)
            if unknown_leader:
                self._metadata.request_update()
                wait_ms = min(wait_ms, 50)
            if not by_node:
                break
            unsent.extend(self._request_for(node, batches, now_ms) for node, batches in by_node.items())
        if unreachable:
            self._metadata.request_update()  # the leader may have moved: learn where
        if not_ready:
            wait_ms = min(wait_ms, _NOT_READY_RECHECK_MS)  # look again once it may be connected
        return PollResult(max(0, wait_ms), unsent)

    def poll_on_close(self, now_ms: int) -> PollResult:
        """At close: send everything still buffered; nothing is retried any more."""
        self._accumulator.close()
        self._closing = True
        return self.poll(now_ms)

    def _prepare_transaction(self, tm: TransactionManager) -> None:
        """Add partitions with data to the transaction; while it completes, make every batch
        ready (and drop the unsent ones when aborting) so EndTxn can follow them."""
        if tm.state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING_TRANSACTION):
            for tp in self._accumulator.partitions_with_data():
                tm.maybe_add_partition(tp)
        if tm.is_completing and self._accumulator.has_incomplete():
            if tm.is_aborting:
                # Batches that were sent and wait for a retry keep their sequence and still go
                # out: whether the broker wrote them must be known before EndTxn.
                self._accumulator.abort_undrained(
                    TransactionAbortedError("the transaction was aborted before the record was sent"),
                    keep_sequenced=True,
                )
            if not tm.completion_flush:
                self._accumulator.begin_flush()
                tm.completion_flush = True
        elif tm.completion_flush and not tm.is_completing:
            self._accumulator.end_flush()
            tm.completion_flush = False

    def _node_full(self, node_id: int) -> bool:
        return self._node_in_flight.get(node_id, 0) >= self._max_in_flight

    # -- requests -------------------------------------------------------------------------------

    def _request_for(
        self, node_id: int, batches: list[ProducerBatch], now_ms: int
    ) -> UnsentRequest[ProduceResponse]:
        compression = self._accumulator.compression
        level = self._accumulator.compression_level
        by_topic: dict[str, list[PartitionProduceData]] = defaultdict(list)
        metrics = self._metrics
        for batch in batches:
            encoded = batch.build(compression, level)
            by_topic[batch.tp.topic].append(
                PartitionProduceData(index=batch.tp.partition, records=memoryview(encoded))
            )
            if metrics is not None:
                metrics.batch_sent(
                    batch.tp.topic, batch.record_count, len(encoded), now_ms - batch.created_ms, now_ms
                )
        if metrics is not None:
            metrics.request_sent(sum(batch.record_count for batch in batches), now_ms)
        tm = self._tm
        request = ProduceRequest(
            transactional_id=tm.transactional_id if tm is not None else None,
            acks=self._acks,
            timeout_ms=self._request_timeout_ms,
            topic_data=[TopicProduceData(name=t, partition_data=p) for t, p in sorted(by_topic.items())],
        )
        self.in_flight_requests += 1
        self._node_in_flight[node_id] = self._node_in_flight.get(node_id, 0) + 1

        def handle(response: ClientResponse[ProduceResponse]) -> None:
            self.in_flight_requests -= 1
            count = self._node_in_flight.get(node_id, 0) - 1
            if count > 0:
                self._node_in_flight[node_id] = count
            else:
                self._node_in_flight.pop(node_id, None)
            self._on_response(batches, response)

        # delivery.timeout.ms bounds the whole life of a record, retries and in-flight time
        # included: the request may not outlive its oldest batch's delivery deadline.
        delivery_deadline = min(b.created_ms for b in batches) + self._delivery_timeout_ms
        timeout = max(1, min(self._request_timeout_ms, delivery_deadline - now_ms))
        return UnsentRequest(
            request,
            node_id,
            handle,
            max_version=(
                MAX_PRODUCE_VERSION_TXN_V1
                if tm is not None and tm.is_transactional and not tm.transaction_v2
                else MAX_PRODUCE_VERSION
            ),
            expect_response=self._acks != 0,
            timeout_ms=timeout,
            deadline_ms=delivery_deadline,
        )

    def _on_response(self, batches: list[ProducerBatch], response: ClientResponse[ProduceResponse]) -> None:
        now_ms = response.received_ms
        if self._metrics is not None and response.error is None and self._acks != 0:
            self._metrics.request_answered(
                now_ms - response.request.created_ms, response.body.throttle_time_ms, now_ms
            )
        if response.error is not None:
            for batch in batches:
                self._complete_with_error(batch, response.error, -1, now_ms)
            return
        if self._acks == 0:
            for batch in batches:
                self._complete_ok(batch, -1, -1)
            return
        body = response.body
        results = {(t.name, p.index): p for t in body.responses for p in t.partition_responses}
        moved = self._apply_current_leaders(batches, results, body.node_endpoints)
        for batch in batches:
            result = results.get((batch.tp.topic, batch.tp.partition))
            if result is None:
                self._complete_with_error(
                    batch, KafkaError(f"the broker did not answer for {batch.tp}"), -1, now_ms
                )
            elif result.error_code != 0:
                error = error_for_code(result.error_code)(result.error_message or None)
                self._complete_with_error(
                    batch, error, result.log_start_offset, now_ms, leader_moved=batch.tp in moved
                )
            else:
                self._complete_ok(batch, result.base_offset, result.log_append_time_ms)

    def _apply_current_leaders(
        self,
        batches: list[ProducerBatch],
        results: dict[tuple[str, int], PartitionProduceResponse],
        endpoints: list[NodeEndpoint],
    ) -> set[TopicPartition]:
        """KIP-951: take the leaders the answer named for partitions it refused as not led
        there; returns the partitions whose leader changed."""
        leaders: dict[TopicPartition, tuple[int, int]] = {}
        for batch in batches:
            result = results.get((batch.tp.topic, batch.tp.partition))
            if result is None or result.error_code not in _LEADER_MOVED:
                continue
            leader = result.current_leader
            if leader.leader_id >= 0 and leader.leader_epoch >= 0:
                leaders[batch.tp] = (leader.leader_id, leader.leader_epoch)
        if not leaders:
            return set()
        nodes = [Node(e.node_id, e.host, e.port, e.rack) for e in endpoints]
        moved = self._cluster.update_partition_leadership(leaders, nodes)
        if moved:
            log.debug(
                "leaders moved (from a Produce response): %s", {str(tp): leaders[tp] for tp in sorted(moved)}
            )
        return moved

    # -- outcomes -------------------------------------------------------------------------------

    def _complete_ok(self, batch: ProducerBatch, base_offset: int, log_append_time_ms: int) -> None:
        if batch.done:
            return
        if self._tm is not None and batch.has_sequence:
            self._tm.handle_completed_batch(batch, base_offset)
        batch.complete(base_offset, log_append_time_ms)
        self._accumulator.deallocate(batch)

    def _complete_with_error(
        self,
        batch: ProducerBatch,
        error: KafkaError,
        log_start_offset: int,
        now_ms: int,
        *,
        leader_moved: bool = False,
    ) -> None:
        if batch.done:
            return  # failed meanwhile (at close)
        if error.invalid_metadata:
            self._metadata.request_update()
        age = now_ms - batch.created_ms
        if self._can_retry(batch, error, log_start_offset, age):
            # A retry to a new leader goes at once (Java's shouldBackoff, KIP-951).
            backoff = 0 if leader_moved else self._retry_backoff.backoff_ms(batch.attempts)
            self._accumulator.reenqueue(batch, now_ms + backoff)
            if self._metrics is not None:
                self._metrics.records_retried(batch.tp.topic, batch.count, now_ms)
            return
        if isinstance(error, DuplicateSequenceNumberError):
            # The broker has the batch but no longer its offset: success, offset unknown (Java).
            self._complete_ok(batch, -1, -1)
            return
        if error.retriable and age >= self._delivery_timeout_ms:
            error = KafkaTimeoutError(
                f"{batch.count} record(s) for {batch.tp} were not acknowledged within "
                f"delivery.timeout.ms={self._delivery_timeout_ms} (last error: {error})"
            )
            self._fail_batch(batch, error, now_ms, adjust_sequences=False)
            if self._tm is not None:
                # it was sent: whether the broker wrote it is unknown
                self._tm.mark_sequence_unresolved(batch)
            return
        # Sequences of later batches are adjusted only if this one did not exhaust its retries:
        # otherwise the broker may have written it.
        self._fail_batch(batch, error, now_ms, adjust_sequences=batch.attempts < self._retries)

    def _can_retry(self, batch: ProducerBatch, error: KafkaError, log_start_offset: int, age_ms: int) -> bool:
        if self._closing or age_ms >= self._delivery_timeout_ms or batch.attempts >= self._retries:
            return False
        tm = self._tm
        if tm is not None and batch.has_sequence:
            if tm.has_fatal_error:
                return False
            return tm.can_retry(error, batch, log_start_offset)
        return error.retriable

    def _fail_batch(
        self, batch: ProducerBatch, error: KafkaError, now_ms: int, *, adjust_sequences: bool
    ) -> None:
        if batch.done:
            return
        if self._metrics is not None:
            self._metrics.records_failed(batch.tp.topic, batch.count, now_ms)
        if self._tm is not None:
            self._tm.handle_failed_batch(batch, error, adjust_sequences)
        batch.fail(error)
        self._accumulator.deallocate(batch)
