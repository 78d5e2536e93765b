"""Idempotence and transactions: producer id, epoch, sequence numbers and the transaction
state machine. [bg, pure: takes now_ms; the application thread only reads :attr:`state`]

Mirrors Java's ``TransactionManager``. One instance per producer with idempotence on (the
default); with a ``transactional.id`` it also runs transactions.

Idempotence. The producer gets a producer id and epoch (InitProducerId). Each batch carries
them and the sequence number of its first record, per partition (assigned when the batch is
drained, :meth:`TransactionManager.on_drain`); the broker keeps the last five batches of each
producer per partition, so a retried batch it already wrote is answered as a duplicate, and a
gap is refused with OUT_OF_ORDER_SEQUENCE_NUMBER. Up to five batches per partition may be in
flight; when one comes back for a retry, only the lowest outstanding sequence of the partition
is sent until it is resolved (:meth:`may_drain`), so the partition stays in order. Errors are
handled as Java handles them (:meth:`can_retry`, :meth:`handle_failed_batch`):

* OUT_OF_ORDER_SEQUENCE_NUMBER on a batch that is not the next expected one: retried (an
  earlier batch failed; this one follows it again). On the next expected one, a real gap: the
  idempotent producer bumps its epoch (locally, as Java) and restarts the partition's sequences
  at 0, retrying the batch; a transactional producer fails the batch (abortable).
* UNKNOWN_PRODUCER_ID: the broker lost the producer's state (retention removed its records):
  the sequences restart at 0 (transactional) or the epoch is bumped (idempotent), and the batch
  is retried.
* A batch that expired after being sent leaves its partition *unresolved*: no new batch is sent
  there until the in-flight ones tell whether it was written; if none does, the epoch is bumped
  (idempotent) or the transaction must be aborted.

Transactions. The state machine is :data:`TXN_TRANSITIONS` (Java's rules, in
:mod:`.txn_state`). Requests to the
transaction coordinator (FindCoordinator, InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
EndTxn) and the group coordinator (TxnOffsetCommit) go one at a time, in priority order
(coordinator lookups first, EndTxn only once every batch of the transaction is done). A
partition's batches are sent only once AddPartitionsToTxn added it. Errors are *abortable* (the
state ABORTABLE_ERROR: the application must call ``abort_transaction()``, then may go on) or
*fatal* (FATAL_ERROR: ProducerFencedError, an authorization failure, INVALID_TXN_STATE...: the
producer must be closed; it sends nothing more, so a fenced zombie stops). After an abortable
error that needs it, aborting also bumps the epoch (InitProducerId with the current id and
epoch, KIP-360) when the coordinator supports InitProducerId v3+.

Transactions v2 (KIP-890). When the cluster's finalized ``transaction.version`` feature is 2 or
more (ApiVersions, read at ``init_transactions()`` and at each ``begin_transaction()``, as Java),
a transaction sends no AddPartitionsToTxn nor AddOffsetsToTxn: the partition leader adds a
partition to the transaction when it gets the first batch (Produce v12), and the group
coordinator adds the offsets (TxnOffsetCommit v5). EndTxn v5 ends the transaction and answers a
new epoch (or a new producer id once the epoch is exhausted), which the next transaction uses:
a batch of an earlier transaction, delayed somewhere, is refused by its epoch. An abort after an
error therefore needs no InitProducerId. On older clusters (``transaction.version`` below 2)
transactions go as before (v1).
"""

from __future__ import annotations

import heapq
import itertools
import logging
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from kaflux.errors import (
    ClusterAuthorizationFailedError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidTxnStateError,
    KafkaError,
    OutOfOrderSequenceNumberError,
    ProducerFencedError,
    TransactionAbortableError,
    TransactionalIdAuthorizationFailedError,
    UnknownProducerIdError,
    UnsupportedVersionError,
)
from kaflux.network.backoff import ExponentialBackoff
from kaflux.network.cluster import ClusterMetadata, coordinator_node_id
from kaflux.network.requests import ClientResponse, PollResult, RequestManager, UnsentRequest
from kaflux.producer.sequences import NO_SEQUENCE, increment_sequence
from kaflux.producer.txn_requests import (
    ADD_PARTITIONS_RETRY_BACKOFF_MS,
    GROUP_COORDINATOR,
    TRANSACTION_COORDINATOR,
    TRANSACTION_VERSION_FEATURE,
    AddOffsetsHandler,
    AddPartitionsHandler,
    EndTxnHandler,
    FindCoordinatorHandler,
    InitProducerIdHandler,
    TxnOffsetCommitHandler,
    TxnRequestHandler,
)
from kaflux.producer.txn_state import TXN_TRANSITIONS, GroupMetadataLike, TransactionAbortedError, TxnState
from kaflux.state_machine import StateMachine
from kaflux.structs import Node, OffsetAndMetadata, TopicPartition

if TYPE_CHECKING:
    from kaflux.producer.accumulator import ProducerBatch

log = logging.getLogger("kaflux.producer")

#: the response type of a request
R = TypeVar("R")

__all__ = [
    "ADD_PARTITIONS_RETRY_BACKOFF_MS",
    "TXN_TRANSITIONS",
    "GroupMetadataLike",
    "TransactionAbortedError",
    "TransactionManager",
    "TxnState",
]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
_MAX_EPOCH = 2**15 - 1


#: errors that end the producer (Java's maybeTransitionToErrorState)
_FATAL_ERRORS: tuple[type[BaseException], ...] = (
    ClusterAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
    ProducerFencedError,
    UnsupportedVersionError,
)


@dataclass(slots=True)
class _PartitionEntry:
    """Sequence bookkeeping of one partition (Java's TopicPartitionEntry)."""

    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    #: base sequence of the next batch drained for the partition
    next_sequence: int = 0
    #: sequence of the last record of the last acknowledged batch
    last_acked_sequence: int = -1
    #: drained batches without an outcome yet, by base sequence
    in_flight: list[ProducerBatch] = field(default_factory=list)
    #: offset of the last acknowledged record (tells UNKNOWN_PRODUCER_ID after retention apart)
    last_acked_offset: int = -1

    def add_in_flight(self, batch: ProducerBatch) -> None:
        position = len(self.in_flight)
        while position > 0 and self.in_flight[position - 1].base_sequence > batch.base_sequence:
            position -= 1
        self.in_flight.insert(position, batch)

    def remove_in_flight(self, batch: ProducerBatch) -> None:
        for i, candidate in enumerate(self.in_flight):
            if candidate is batch:
                del self.in_flight[i]
                return


class TransactionManager(RequestManager):
    """Producer id, epoch and sequences (idempotence), and the transaction state machine."""

    def __init__(
        self,
        *,
        transactional_id: str | None,
        transaction_timeout_ms: int,
        cluster: ClusterMetadata,
        retry_backoff: ExponentialBackoff,
        has_incomplete_batches: Callable[[], bool] = lambda: False,
    ) -> None:
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self._cluster = cluster
        self._backoff = retry_backoff
        self._has_incomplete_batches = has_incomplete_batches
        self._sm: StateMachine[TxnState] = StateMachine(
            f"transactional.id={transactional_id}" if transactional_id else "idempotent producer",
            TxnState.UNINITIALIZED,
            TXN_TRANSITIONS,
        )
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        #: whether send() must ask :meth:`fail_if_not_ready_for_send` (a plain attribute: the
        #: application thread reads it for every record)
        self.send_blocked = transactional_id is not None
        self._last_error: KafkaError | None = None
        self._partitions: dict[TopicPartition, _PartitionEntry] = {}
        #: partitions with a batch that expired after being sent -> the sequence after it
        self._unresolved: dict[TopicPartition, int] = {}
        self._partitions_to_rewrite: set[TopicPartition] = set()
        self._epoch_bump_required = False
        #: idempotent producer: the broker does not know the producer id; get a new one and
        #: restart every partition's sequences with it
        self._reset_producer_id_required = False
        self._rewrite_sequences_on_new_id = False
        self.coordinator_supports_epoch_bump = False
        #: whether the current transaction uses transactions v2 (KIP-890; see the module docs)
        self.transaction_v2 = False
        # transactions
        self._pending: list[tuple[int, int, TxnRequestHandler[Any]]] = []
        self._order = itertools.count()
        self._in_flight: TxnRequestHandler[Any] | None = None
        self._new_partitions: set[TopicPartition] = set()
        self._pending_partitions: set[TopicPartition] = set()
        self._partitions_in_transaction: set[TopicPartition] = set()
        self._transaction_started = False
        self._pending_result: Future[None] | None = None
        self._coordinators: dict[int, Node | None] = {TRANSACTION_COORDINATOR: None, GROUP_COORDINATOR: None}
        self._group_key: str | None = None
        #: whether this manager started a flush of the accumulator to complete a transaction
        self.completion_flush = False

    # -- state, readable from any thread ---------------------------------------------------------

    @property
    def state(self) -> TxnState:
        return self._sm.state

    @property
    def last_error(self) -> KafkaError | None:
        """The error that put the manager in ABORTABLE_ERROR or FATAL_ERROR."""
        return self._last_error

    @property
    def is_transactional(self) -> bool:
        return self.transactional_id is not None

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0 and self.producer_epoch >= 0

    @property
    def has_fatal_error(self) -> bool:
        return self._sm.state is TxnState.FATAL_ERROR

    @property
    def has_abortable_error(self) -> bool:
        return self._sm.state is TxnState.ABORTABLE_ERROR

    @property
    def has_error(self) -> bool:
        return self._sm.state in (TxnState.ABORTABLE_ERROR, TxnState.FATAL_ERROR)

    @property
    def is_completing(self) -> bool:
        return self._sm.state in (TxnState.COMMITTING_TRANSACTION, TxnState.ABORTING_TRANSACTION)

    @property
    def is_aborting(self) -> bool:
        return self._sm.state is TxnState.ABORTING_TRANSACTION

    @property
    def has_ongoing_transaction(self) -> bool:
        """Started and not completed (nor failed fatally)."""
        return self._sm.state in (
            TxnState.IN_TRANSACTION,
            TxnState.COMMITTING_TRANSACTION,
            TxnState.ABORTING_TRANSACTION,
            TxnState.ABORTABLE_ERROR,
        )

    @property
    def can_bump_epoch(self) -> bool:
        """An idempotent producer bumps its epoch itself; a transactional one needs a
        coordinator with InitProducerId v3+."""
        return not self.is_transactional or self.coordinator_supports_epoch_bump

    @property
    def in_flight_request(self) -> bool:
        return self._in_flight is not None

    @property
    def partitions_in_transaction(self) -> frozenset[TopicPartition]:
        return frozenset(self._partitions_in_transaction)

    # -- the transactional API (events from the application) ---------------------------------------

    def initialize_transactions(self) -> Future[None]:
        """Start InitProducerId (once; a call while it runs returns the same future)."""
        self._ensure_transactional()
        if self._pending_result is not None and self.state is TxnState.INITIALIZING:
            return self._pending_result
        if self.has_fatal_error:
            raise self._error_for_caller("init_transactions()")
        self._require(TxnState.INITIALIZING, "init_transactions()")
        self._update_transaction_version()
        self._transition(TxnState.INITIALIZING)
        log.info("transactional.id=%s: getting a producer id (InitProducerId)", self.transactional_id)
        handler = InitProducerIdHandler(
            self, epoch_bump=False, producer_id=NO_PRODUCER_ID, epoch=NO_PRODUCER_EPOCH
        )
        self.enqueue(handler)
        self._pending_result = handler.result
        return handler.result

    def begin_transaction(self) -> None:
        """READY -> IN_TRANSACTION."""
        self._ensure_transactional()
        self._maybe_fail_with_error()
        self._require(TxnState.IN_TRANSACTION, "begin_transaction()")
        self._update_transaction_version()
        self._transition(TxnState.IN_TRANSACTION)

    def _update_transaction_version(self) -> None:
        """Between transactions only: use transactions v2 if the cluster finalized it."""
        v2 = self._cluster.feature_level(TRANSACTION_VERSION_FEATURE) >= 2
        if v2 != self.transaction_v2:
            log.info(
                "transactional.id=%s: transactions %s (transaction.version=%d)",
                self.transactional_id,
                "v2 (KIP-890)" if v2 else "v1",
                self._cluster.feature_level(TRANSACTION_VERSION_FEATURE),
            )
        self.transaction_v2 = v2

    def begin_commit(self) -> Future[None]:
        """Flush the transaction's batches, then EndTxn(commit)."""
        self._ensure_transactional()
        if self._pending_result is not None and self.state is TxnState.COMMITTING_TRANSACTION:
            return self._pending_result
        self._maybe_fail_with_error()
        self._require(TxnState.COMMITTING_TRANSACTION, "commit_transaction()")
        self._transition(TxnState.COMMITTING_TRANSACTION)
        self._pending_result = self._begin_completing(commit=True)
        return self._pending_result

    def begin_abort(self) -> Future[None]:
        """Drop the unsent batches, wait for those in flight, then EndTxn(abort)."""
        self._ensure_transactional()
        if self._pending_result is not None and self.state is TxnState.ABORTING_TRANSACTION:
            return self._pending_result
        if self.state is not TxnState.ABORTABLE_ERROR:
            self._maybe_fail_with_error()
        self._require(TxnState.ABORTING_TRANSACTION, "abort_transaction()")
        self._transition(TxnState.ABORTING_TRANSACTION)
        self._new_partitions.clear()
        self._drop_pending_offsets()
        self._pending_result = self._begin_completing(commit=False)
        return self._pending_result

    def _drop_pending_offsets(self) -> None:
        """Aborting: offsets still waiting to be sent are aborted with the transaction (their
        retries would otherwise go before the EndTxn(abort), forever for a topic the broker
        does not know)."""
        kept = []
        for entry in self._pending:
            handler = entry[2]
            if isinstance(handler, (AddOffsetsHandler, TxnOffsetCommitHandler)):
                handler.fail(
                    TransactionAbortedError("the transaction was aborted before its offsets were committed")
                )
            else:
                kept.append(entry)
        heapq.heapify(kept)
        self._pending = kept

    def send_offsets_to_transaction(
        self, offsets: dict[TopicPartition, OffsetAndMetadata], group: GroupMetadataLike
    ) -> Future[None]:
        """AddOffsetsToTxn, then TxnOffsetCommit to the group's coordinator."""
        self._ensure_transactional()
        self._maybe_fail_with_error()
        if self.state is not TxnState.IN_TRANSACTION:
            raise InvalidTxnStateError(
                f"send_offsets_to_transaction() needs an open transaction (state {self.state.name}); "
                "call begin_transaction() first"
            )
        if self.transaction_v2:
            # the group coordinator adds the offsets to the transaction itself (KIP-890)
            commit = TxnOffsetCommitHandler(self, offsets, group, Future(), transaction_v2=True)
            self.enqueue(commit)
            self._transaction_started = True
            return commit.result
        handler = AddOffsetsHandler(self, offsets, group)
        self.enqueue(handler)
        return handler.result

    def maybe_add_partition(self, tp: TopicPartition) -> None:
        """A batch for ``tp`` waits: add the partition to the transaction if it is not in it."""
        if (
            tp in self._partitions_in_transaction
            or tp in self._new_partitions
            or tp in self._pending_partitions
        ):
            return
        if self.state not in (TxnState.IN_TRANSACTION, TxnState.COMMITTING_TRANSACTION):
            return
        self._partition_entry(tp)
        if self.transaction_v2:
            # the partition leader adds it when the first batch comes (Produce v12, KIP-890)
            self._partitions_in_transaction.add(tp)
            self._transaction_started = True
            return
        self._new_partitions.add(tp)

    def fail_if_not_ready_for_send(self) -> None:
        """Raise when a record may not be sent now (the application thread's check)."""
        state = self._sm.state
        if state is TxnState.FATAL_ERROR or state is TxnState.ABORTABLE_ERROR:
            raise self._error_for_caller("send()")
        if self.is_transactional and state is not TxnState.IN_TRANSACTION:
            if state in (TxnState.UNINITIALIZED, TxnState.INITIALIZING) and not self.has_producer_id:
                raise InvalidTxnStateError("send() needs init_transactions() first with a transactional.id")
            raise InvalidTxnStateError(
                f"send() needs an open transaction (state {state.name}); call begin_transaction() first"
            )

    def close(self, error: KafkaError) -> None:
        """The producer closes: fail whatever transactional operation is pending."""
        for _, _, handler in self._pending:
            handler.fail(error)
        self._pending.clear()
        if self._in_flight is not None:
            self._in_flight.fail(error)
        if self._pending_result is not None and not self._pending_result.done():
            self._pending_result.set_exception(error)

    # -- sequences (the sender and the accumulator, on the network thread) -------------------------

    def _partition_entry(self, tp: TopicPartition) -> _PartitionEntry:
        entry = self._partitions.get(tp)
        if entry is None:
            entry = self._partitions[tp] = _PartitionEntry()
        return entry

    def next_sequence(self, tp: TopicPartition) -> int:
        return self._partition_entry(tp).next_sequence

    def last_acked_sequence(self, tp: TopicPartition) -> int:
        return self._partition_entry(tp).last_acked_sequence

    def has_in_flight_batches(self, tp: TopicPartition) -> bool:
        return bool(self._partition_entry(tp).in_flight)

    def first_in_flight_sequence(self, tp: TopicPartition) -> int:
        entry = self._partitions.get(tp)
        if entry is None or not entry.in_flight:
            return NO_SEQUENCE
        return entry.in_flight[0].base_sequence

    def _has_stale_producer_id_and_epoch(self, tp: TopicPartition) -> bool:
        entry = self._partition_entry(tp)
        return (entry.producer_id, entry.producer_epoch) != (self.producer_id, self.producer_epoch)

    def is_send_to_partition_allowed(self, tp: TopicPartition) -> bool:
        if self.has_fatal_error:
            return False
        return not self.is_transactional or tp in self._partitions_in_transaction

    def may_drain(self, tp: TopicPartition, first: ProducerBatch) -> bool:
        """Whether the first queued batch of ``tp`` may go out now (Java's
        ``shouldStopDrainBatchesForPartition``, negated)."""
        if not self.is_send_to_partition_allowed(tp) or not self.has_producer_id:
            return False
        if not first.has_sequence:
            if self.has_in_flight_batches(tp) and self._has_stale_producer_id_and_epoch(tp):
                # earlier batches still carry the old epoch: a batch with the new epoch and
                # sequence 0 must not overtake them
                return False
            if tp in self._unresolved:
                return False
            if self.has_in_flight_batches(tp) and self._partition_entry(tp).last_acked_sequence == -1:
                # Nothing of this epoch is acknowledged on the partition yet. Kafka takes any first
                # batch from a producer it has no state for: were the first batch refused (a
                # partition not led yet) while this one went through, this one would become the
                # producer's first, and the earlier sequences could never be written. The first
                # batch of an epoch goes alone (not in Java, whose canRetry then retries it until
                # delivery.timeout.ms).
                return False
        first_in_flight = self.first_in_flight_sequence(tp)
        # a retry goes out only as the lowest outstanding sequence of its partition
        return not (
            first_in_flight != NO_SEQUENCE and first.has_sequence and first.base_sequence != first_in_flight
        )

    def on_drain(self, batch: ProducerBatch) -> None:
        """Give a batch drained for the first time its producer id, epoch and sequence."""
        if batch.has_sequence:
            return
        tp = batch.tp
        self._maybe_update_producer_id_and_epoch(tp)
        entry = self._partition_entry(tp)
        batch.set_producer_state(
            self.producer_id, self.producer_epoch, entry.next_sequence, self.is_transactional
        )
        entry.next_sequence = increment_sequence(entry.next_sequence, batch.record_count)
        entry.add_in_flight(batch)

    def _maybe_update_producer_id_and_epoch(self, tp: TopicPartition) -> None:
        if self._has_stale_producer_id_and_epoch(tp) and not self.has_in_flight_batches(tp):
            # the partition's batches of the old id/epoch are all done: start again at 0
            self._start_sequences_at_beginning(tp)

    def _start_sequences_at_beginning(self, tp: TopicPartition) -> None:
        entry = self._partition_entry(tp)
        sequence = 0
        for batch in entry.in_flight:
            batch.reset_producer_state(self.producer_id, self.producer_epoch, sequence)
            sequence = increment_sequence(sequence, batch.record_count)
        entry.producer_id = self.producer_id
        entry.producer_epoch = self.producer_epoch
        entry.next_sequence = sequence
        entry.last_acked_sequence = -1

    def handle_completed_batch(self, batch: ProducerBatch, base_offset: int) -> None:
        """The broker wrote ``batch`` (or had it already)."""
        entry = self._partition_entry(batch.tp)
        if batch.last_sequence > entry.last_acked_sequence:
            entry.last_acked_sequence = batch.last_sequence
        if base_offset >= 0:
            last_offset = base_offset + batch.record_count - 1
            if last_offset > entry.last_acked_offset:
                entry.last_acked_offset = last_offset
        entry.remove_in_flight(batch)

    def can_retry(self, error: KafkaError, batch: ProducerBatch, log_start_offset: int) -> bool:
        """Whether a failed batch is retried (Java's ``TransactionManager.canRetry``); may
        request an epoch bump or restart the partition's sequences."""
        tp = batch.tp
        if isinstance(error, UnknownProducerIdError):
            if log_start_offset == -1:
                return True  # no log start offset yet: retry until the broker knows it
            if not self.is_transactional and self._is_fresh_start(batch):
                # Sequence 0 with the current id and epoch is refused too: the broker does not
                # know the producer id at all (it lost its state). Get a new one (librdkafka
                # does so; Java would bump the epoch forever).
                log.warning(
                    "%s: the broker does not know producer id %d; getting a new one", tp, batch.producer_id
                )
                self._reset_producer_id_required = True
                return True
            if batch.sequence_reset:
                return True  # an earlier batch of the partition already restarted the sequences
            if self._partition_entry(tp).last_acked_offset < log_start_offset:
                # retention removed the producer's records, and its state with them
                if self.is_transactional:
                    self._start_sequences_at_beginning(tp)
                else:
                    self.request_epoch_bump_for_partition(tp)
                return True
            if not self.is_transactional:
                self.request_epoch_bump_for_partition(tp)
                return True
        elif (
            isinstance(error, (ProducerFencedError, InvalidProducerEpochError))
            and not self.is_transactional
            and batch.producer_epoch > 0
        ):
            # An idempotent producer bumped its epoch locally (as Java does after an expired
            # batch); a broker that refuses the bumped epoch (Tansu answers PRODUCER_FENCED) gets
            # a new producer id instead, as librdkafka does: nothing else shares this id.
            log.warning(
                "%s: the broker refused epoch %d of producer id %d (%s); getting a new producer id",
                tp,
                batch.producer_epoch,
                batch.producer_id,
                type(error).__name__,
            )
            self._reset_producer_id_required = True
            return True
        elif isinstance(error, OutOfOrderSequenceNumberError):
            unresolved = tp in self._unresolved
            if not unresolved and (
                batch.sequence_reset or not self._is_next_sequence(tp, batch.base_sequence)
            ):
                return True  # not the next expected batch: an earlier one failed; resend in order
            if not self.is_transactional:
                if not unresolved or self._unresolved.get(tp) == batch.base_sequence:
                    self.request_epoch_bump_for_partition(tp)
                return True
        return error.retriable

    def _is_fresh_start(self, batch: ProducerBatch) -> bool:
        """The batch starts its partition's sequences with the current producer id and epoch."""
        return (
            batch.base_sequence == 0
            and (batch.producer_id, batch.producer_epoch) == (self.producer_id, self.producer_epoch)
            and self._partition_entry(batch.tp).last_acked_sequence == -1
        )

    def _is_next_sequence(self, tp: TopicPartition, sequence: int) -> bool:
        return sequence - self._partition_entry(tp).last_acked_sequence == 1

    def handle_failed_batch(self, batch: ProducerBatch, error: KafkaError, adjust_sequences: bool) -> None:
        """``batch`` failed for good with ``error`` (its futures fail too)."""
        self._maybe_transition_to_error_state(error)
        entry = self._partition_entry(batch.tp)
        entry.remove_in_flight(batch)
        if self.has_fatal_error or not batch.has_sequence:
            return
        if isinstance(error, OutOfOrderSequenceNumberError) and not self.is_transactional:
            log.error(
                "%s: OUT_OF_ORDER_SEQUENCE_NUMBER for producer id %d epoch %d sequence %d; bumping the epoch",
                batch.tp,
                batch.producer_id,
                batch.producer_epoch,
                batch.base_sequence,
            )
            self.request_epoch_bump_for_partition(batch.tp)
        elif isinstance(error, UnknownProducerIdError):
            self._partitions.pop(batch.tp, None)
            self._unresolved.pop(batch.tp, None)
        elif adjust_sequences:
            if not self.is_transactional:
                self.request_epoch_bump_for_partition(batch.tp)
            else:
                self._adjust_sequences_after_failed_batch(batch)

    def _adjust_sequences_after_failed_batch(self, batch: ProducerBatch) -> None:
        """The broker refused ``batch`` for good: later batches move down into its sequences."""
        entry = self._partitions.get(batch.tp)
        if entry is None:
            return
        entry.next_sequence = max(0, entry.next_sequence - batch.record_count)
        for other in entry.in_flight:
            if other.base_sequence < batch.base_sequence:
                continue
            other.set_producer_state(
                other.producer_id,
                other.producer_epoch,
                max(0, other.base_sequence - batch.record_count),
                other.is_transactional,
            )

    def _maybe_transition_to_error_state(self, error: KafkaError) -> None:
        if isinstance(error, _FATAL_ERRORS):
            self.transition_to_fatal_error(error)
        elif self.is_transactional:
            if self.can_bump_epoch and not self.is_completing:
                self._epoch_bump_required = True
            self.transition_to_abortable_error(error)

    def request_epoch_bump_for_partition(self, tp: TopicPartition) -> None:
        self._epoch_bump_required = True
        self._partitions_to_rewrite.add(tp)

    def mark_sequence_unresolved(self, batch: ProducerBatch) -> None:
        """A batch sent at least once expired: whether the broker wrote it is unknown."""
        if not batch.has_sequence:
            return
        following = increment_sequence(batch.last_sequence, 1)
        current = self._unresolved.get(batch.tp)
        self._unresolved[batch.tp] = following if current is None else max(current, following)
        self._partition_entry(batch.tp).remove_in_flight(batch)

    def has_unresolved_sequence(self, tp: TopicPartition) -> bool:
        return tp in self._unresolved

    def maybe_resolve_sequences(self) -> None:
        """Settle unresolved partitions once they have nothing in flight."""
        for tp in list(self._unresolved):
            if self.has_in_flight_batches(tp):
                continue
            if self._is_next_sequence(tp, self.next_sequence(tp)):
                # a later batch was acknowledged: the expired one was written after all
                del self._unresolved[tp]
                continue
            if self.is_transactional:
                reason = "the client got no acknowledgement for records it sent and can no longer retry them"
                if self.can_bump_epoch:
                    self._epoch_bump_required = True
                    self.transition_to_abortable_error(
                        TransactionAbortableError(f"{reason}; aborting the transaction is safe")
                    )
                else:
                    self.transition_to_fatal_error(KafkaError(f"{reason}; it is not safe to continue"))
            else:
                log.info("%s: no batch in flight and sequences unresolved; bumping the epoch", tp)
                self.request_epoch_bump_for_partition(tp)
            del self._unresolved[tp]

    def bump_idempotent_epoch_and_reset_id_if_needed(self) -> None:
        """Idempotent producer: bump the epoch (locally, as Java) when asked to, and get a
        producer id when there is none."""
        if self.is_transactional:
            return
        if self._reset_producer_id_required:
            self._reset_producer_id_required = False
            self._epoch_bump_required = False
            self._partitions_to_rewrite.clear()
            self._rewrite_sequences_on_new_id = True
            self._set_producer_id_and_epoch(NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
            if self.state is TxnState.READY:
                self._transition(TxnState.UNINITIALIZED)
        if self._epoch_bump_required:
            self._bump_idempotent_epoch()
        if self.state is not TxnState.INITIALIZING and not self.has_producer_id and not self.has_fatal_error:
            self._transition(TxnState.INITIALIZING)
            self.enqueue(
                InitProducerIdHandler(
                    self, epoch_bump=False, producer_id=NO_PRODUCER_ID, epoch=NO_PRODUCER_EPOCH
                )
            )

    def _bump_idempotent_epoch(self) -> None:
        if self.producer_epoch >= _MAX_EPOCH:
            # epoch exhausted: get a new producer id
            log.debug("idempotent producer: epoch exhausted, getting a new producer id")
            self._set_producer_id_and_epoch(NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
            if self.state is TxnState.READY:
                self._transition(TxnState.UNINITIALIZED)
        else:
            self._set_producer_id_and_epoch(self.producer_id, self.producer_epoch + 1)
        for tp in self._partitions_to_rewrite:
            self._start_sequences_at_beginning(tp)
            self._unresolved.pop(tp, None)
        self._partitions_to_rewrite.clear()
        self._epoch_bump_required = False

    def _reset_sequence_numbers(self) -> None:
        self._partitions.clear()
        self._unresolved.clear()

    def _set_producer_id_and_epoch(self, producer_id: int, epoch: int) -> None:
        if producer_id >= 0:
            log.info(
                "%s: producer id %d, epoch %d",
                self.transactional_id or "idempotent producer",
                producer_id,
                epoch,
            )
        self.producer_id = producer_id
        self.producer_epoch = epoch

    # -- error states ------------------------------------------------------------------------

    def transition_to_abortable_error(self, error: KafkaError) -> None:
        if self.state is TxnState.ABORTING_TRANSACTION:
            log.debug("already aborting; not entering ABORTABLE_ERROR for %s", error)
            return
        if self.has_fatal_error:
            return
        log.info("%s: abortable error: %s", self.transactional_id, error)
        self._transition(TxnState.ABORTABLE_ERROR, error)

    def transition_to_fatal_error(self, error: KafkaError) -> None:
        log.warning("%s: fatal error: %s", self.transactional_id or "idempotent producer", error)
        self._transition(TxnState.FATAL_ERROR, error)
        if self._pending_result is not None and not self._pending_result.done():
            self._pending_result.set_exception(error)

    def _transition(self, target: TxnState, error: KafkaError | None = None) -> None:
        self._sm.transition_to(target)
        self.send_blocked = target is TxnState.FATAL_ERROR or (
            self.is_transactional and target is not TxnState.IN_TRANSACTION
        )
        if target in (TxnState.ABORTABLE_ERROR, TxnState.FATAL_ERROR):
            assert error is not None
            self._last_error = error
        else:
            self._last_error = None

    def fenced_error(self) -> ProducerFencedError:
        return ProducerFencedError(
            f"transactional.id={self.transactional_id} (or its transaction outlived transaction.timeout.ms)"
        )

    def _error_for_caller(self, what: str) -> KafkaError:
        """The error to raise to the application for ``what`` in an error state (Java's
        maybeFailWithError): the fatal error's class, or TransactionAbortableError."""
        error = self._last_error
        if self.state is TxnState.ABORTABLE_ERROR:
            raised: KafkaError = TransactionAbortableError(
                f"{what}: the transaction hit an error and must be aborted with abort_transaction() "
                f"({type(error).__name__}: {error})"
            )
        elif isinstance(error, ProducerFencedError):
            raised = self.fenced_error()
        else:
            # the fatal error's own class (an authentication failure stays one), with context
            message = f"{what}: the producer hit a fatal error earlier and must be closed ({error})"
            try:
                raised = type(error)(message) if error is not None else KafkaError(message)
            except TypeError:  # a class whose constructor takes more than a message
                raised = KafkaError(message)
        raised.__cause__ = error
        return raised

    def _maybe_fail_with_error(self) -> None:
        if self.has_error:
            raise self._error_for_caller("the transactional call")

    def _ensure_transactional(self) -> None:
        if not self.is_transactional:
            raise InvalidTxnStateError("transactional methods need a transactional.id in the producer config")

    def _require(self, target: TxnState, what: str) -> None:
        if not self._sm.can_transition_to(target):
            raise InvalidTxnStateError(f"{what} is not allowed in state {self.state.name}")

    # -- completing a transaction -------------------------------------------------------------------

    def _begin_completing(self, *, commit: bool) -> Future[None]:
        if self._new_partitions:
            self.enqueue(self._add_partitions_handler())
        if not isinstance(self._last_error, InvalidProducerIdMappingError):
            handler = EndTxnHandler(self, commit, transaction_v2=self.transaction_v2)
            self.enqueue(handler)
            if self.transaction_v2:
                # EndTxn v5 bumps the epoch itself: batches of this transaction still on their
                # way are fenced by it, with no InitProducerId (KIP-890)
                self._epoch_bump_required = False
            if not self._epoch_bump_required:
                return handler.result
        bump = InitProducerIdHandler(
            self, epoch_bump=True, producer_id=self.producer_id, epoch=self.producer_epoch
        )
        self.enqueue(bump)
        return bump.result

    def complete_transaction(self, producer_id: int = NO_PRODUCER_ID, epoch: int = NO_PRODUCER_EPOCH) -> None:
        """The transaction ended; with transactions v2 the coordinator answered the producer id
        and epoch of the next one (``producer_id`` >= 0): every partition's sequences restart."""
        if (
            producer_id >= 0
            and epoch >= 0
            and (producer_id, epoch) != (self.producer_id, self.producer_epoch)
        ):
            self._set_producer_id_and_epoch(producer_id, epoch)
            self._reset_sequence_numbers()
        self._transition(TxnState.INITIALIZING if self._epoch_bump_required else TxnState.READY)
        self._last_error = None
        self._epoch_bump_required = False
        self._transaction_started = False
        self._new_partitions.clear()
        self._pending_partitions.clear()
        self._partitions_in_transaction.clear()

    def _add_partitions_handler(self) -> AddPartitionsHandler:
        self._pending_partitions |= self._new_partitions
        self._new_partitions = set()
        return AddPartitionsHandler(self, set(self._pending_partitions))

    # -- what the request handlers report (txn_requests.TxnContext) --------------------------------

    @property
    def retry_backoff(self) -> ExponentialBackoff:
        """``retry.backoff.ms`` growing to ``retry.backoff.max.ms``."""
        return self._backoff

    def require_epoch_bump(self) -> None:
        """Aborting the current transaction must bump the epoch (KIP-360)."""
        self._epoch_bump_required = True

    def on_producer_id(self, producer_id: int, epoch: int, *, epoch_bump: bool) -> None:
        """InitProducerId answered: use the id and epoch; READY. After an epoch bump every
        partition's sequences restart; after a new id, the ones waiting for it are rewritten."""
        self._set_producer_id_and_epoch(producer_id, epoch)
        self._transition(TxnState.READY)
        if epoch_bump:
            self._reset_sequence_numbers()
        if self._rewrite_sequences_on_new_id:
            self._rewrite_sequences_on_new_id = False
            for tp in list(self._partitions):
                self._start_sequences_at_beginning(tp)
            self._unresolved.clear()

    def partitions_answered(self, partitions: set[TopicPartition], *, added: bool) -> None:
        """AddPartitionsToTxn answered: the partitions are no longer pending, whatever the
        outcome (as Java: after an error the transaction is aborted, and batches retrying for
        added partitions must still go out); ``added`` ones are in the transaction."""
        self._pending_partitions -= partitions
        if added:
            self._partitions_in_transaction |= partitions
            self._transaction_started = True

    def mark_transaction_started(self) -> None:
        """The coordinator knows of the transaction (partitions or offsets were added)."""
        self._transaction_started = True

    # -- the request manager -------------------------------------------------------------------

    def enqueue(self, handler: TxnRequestHandler[Any]) -> None:
        heapq.heappush(self._pending, (int(handler.priority), next(self._order), handler))

    def set_coordinator(self, key_type: int, node: Node) -> None:
        self._coordinators[key_type] = node
        self._cluster.coordinators[coordinator_node_id(node.node_id)] = node

    def lookup_coordinator(self, key_type: int, key: str) -> None:
        self._coordinators[key_type] = None
        if any(isinstance(h, FindCoordinatorHandler) and h.key_type == key_type for _, _, h in self._pending):
            return
        self.enqueue(FindCoordinatorHandler(self, key_type, key))

    def _next_request(self) -> TxnRequestHandler[Any] | None:
        if self._new_partitions:
            self.enqueue(self._add_partitions_handler())
        while self._pending:
            handler = self._pending[0][2]
            if handler.is_end_txn and self._has_incomplete_batches():
                return None  # EndTxn waits for every batch of the transaction
            heapq.heappop(self._pending)
            if self.has_error and not (
                self.has_abortable_error and isinstance(handler, FindCoordinatorHandler)
            ):
                assert self._last_error is not None
                handler.fail(self._last_error)
                return None
            if handler.is_end_txn and not self._transaction_started:
                # nothing was added to the transaction: nothing to end on the coordinator
                handler.done()
                if not self.has_fatal_error:
                    self.complete_transaction()
                continue
            return handler
        return None

    def poll(self, now_ms: int) -> PollResult:
        """The next transactional request, one at a time."""
        if self._in_flight is not None:
            return PollResult()
        while True:
            if not self._pending and not self._new_partitions:
                return PollResult()
            if self._pending and self._pending[0][2].retry_at_ms > now_ms:
                return PollResult(self._pending[0][2].retry_at_ms - now_ms)
            handler = self._next_request()
            if handler is None:
                return PollResult()
            node_id: int | None = None
            if handler.coordinator_type is not None:
                coordinator = self._coordinators[handler.coordinator_type]
                if coordinator is None:
                    self.lookup_coordinator(handler.coordinator_type, handler.coordinator_key)
                    self.enqueue(handler)
                    continue
                node_id = coordinator_node_id(coordinator.node_id)
            self._in_flight = handler
            # A coordinator that cannot be reached (its broker died) fails the request at once,
            # and the retry finds the coordinator again, as Java's Sender does; waiting for
            # request.timeout.ms would stall the transaction that long after the failover.
            request = UnsentRequest(
                handler.build(),
                node_id,
                self._response_handler(handler, now_ms),
                handler.max_version,
                fail_on_connection_failure=node_id is not None,
            )
            return PollResult(unsent=[request])

    def poll_on_close(self, now_ms: int) -> PollResult:
        """Nothing is sent at close (an open transaction is aborted by ``Producer.close``)."""
        return PollResult()

    def _response_handler(
        self, handler: TxnRequestHandler[R], sent_ms: int
    ) -> Callable[[ClientResponse[R]], None]:
        def on_response(response: ClientResponse[R]) -> None:
            self._in_flight = None
            now_ms = response.received_ms
            if response.error is not None:
                error = response.error
                if isinstance(error, UnsupportedVersionError):
                    handler.fatal_error(error)
                    return
                if not error.retriable:
                    handler.fatal_error(error)
                    return
                log.debug("%s failed (%s); retrying", type(handler).__name__, error)
                if handler.coordinator_type is not None:
                    self.lookup_coordinator(handler.coordinator_type, handler.coordinator_key)
                handler.reenqueue()
                handler.retry_at_ms = now_ms + handler.retry_backoff_ms()
                return
            try:
                handler.handle(response.body, response.api_version)
            except KafkaError as exc:  # a state-machine bug shows as a fatal error, not a hang
                log.exception("handling %s failed", type(handler).__name__)
                handler.fatal_error(exc)
                return
            if not handler.result.done() and handler.attempts and handler.retry_at_ms <= now_ms:
                # re-enqueued by its handler: wait the backoff first
                handler.retry_at_ms = now_ms + handler.retry_backoff_ms()

        return on_response
