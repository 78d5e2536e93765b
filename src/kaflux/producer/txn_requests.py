"""The transactional requests and what each answer means. [bg, pure]

One handler per request a :class:`~kaflux.producer.transaction_manager.TransactionManager`
sends to a coordinator (Java's ``TxnRequestHandler`` subclasses): FindCoordinator,
InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and EndTxn. A handler
builds its request and turns the response's error codes into Java's outcomes: done, retried
(re-enqueued, after a coordinator lookup where the coordinator moved), an abortable error or a
fatal one. Handlers see their manager only through :class:`TxnContext`, its public face for
them.
"""

from __future__ import annotations

import enum
import logging
from concurrent.futures import Future
from typing import Any, Generic, Protocol, TypeVar

from kaflux.errors import (
    ClusterAuthorizationFailedError,
    CommitFailedError,
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    GroupAuthorizationFailedError,
    IllegalGenerationError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidTxnStateError,
    KafkaError,
    NotCoordinatorError,
    OperationNotAttemptedError,
    ProducerFencedError,
    RequestTimedOutError,
    TopicAuthorizationFailedError,
    TransactionAbortableError,
    TransactionalIdAuthorizationFailedError,
    UnknownMemberIdError,
    UnknownProducerIdError,
    UnknownTopicOrPartitionError,
    UnsupportedForMessageFormatError,
    error_for_code,
)
from kaflux.network.backoff import ExponentialBackoff
from kaflux.producer.txn_state import GroupMetadataLike, TransactionAbortedError
from kaflux.protocol.framing import RequestMessage
from kaflux.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from kaflux.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopic,
)
from kaflux.protocol.messages.end_txn import EndTxnRequest, EndTxnResponse
from kaflux.protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from kaflux.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from kaflux.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
    TxnOffsetCommitResponse,
)
from kaflux.structs import Node, OffsetAndMetadata, TopicPartition

log = logging.getLogger("kaflux.producer")

#: the response type of a handler's request
R = TypeVar("R")

#: FindCoordinator key types
GROUP_COORDINATOR = 0
TRANSACTION_COORDINATOR = 1
#: client-side caps: AddPartitionsToTxn v4+ is for brokers only; EndTxn v5 and TxnOffsetCommit
#: v5 are transactions v2 (KIP-890: one epoch per transaction, partitions added by the brokers),
#: used only when the cluster finalized ``transaction.version`` 2.
MAX_FIND_COORDINATOR_VERSION = 3
MAX_INIT_PRODUCER_ID_VERSION = 5
MAX_ADD_PARTITIONS_VERSION = 3
MAX_ADD_OFFSETS_VERSION = 4
MAX_END_TXN_VERSION = 4
MAX_END_TXN_VERSION_V2 = 5
MAX_TXN_OFFSET_COMMIT_VERSION = 4
MAX_TXN_OFFSET_COMMIT_VERSION_V2 = 5
#: the finalized feature that turns transactions v2 on at level 2 (KIP-890)
TRANSACTION_VERSION_FEATURE = "transaction.version"
#: InitProducerId from this version on takes the current id and epoch, so the coordinator can
#: bump the epoch instead of fencing (KIP-360)
_EPOCH_BUMP_VERSION = 3
#: the retry backoff of the first AddPartitionsToTxn of a transaction refused with
#: CONCURRENT_TRANSACTIONS: the previous transaction is still being completed (Java: 20 ms)
ADD_PARTITIONS_RETRY_BACKOFF_MS = 20


class Priority(enum.IntEnum):
    FIND_COORDINATOR = 0
    INIT_PRODUCER_ID = 1
    ADD_PARTITIONS_OR_OFFSETS = 2
    END_TXN = 3
    EPOCH_BUMP = 4


class TxnContext(Protocol):
    """What a handler may read and do of its transaction manager."""

    transactional_id: str | None
    transaction_timeout_ms: int
    producer_id: int
    producer_epoch: int
    #: learnt from the InitProducerId version the transaction coordinator answers
    coordinator_supports_epoch_bump: bool

    @property
    def is_transactional(self) -> bool: ...

    @property
    def can_bump_epoch(self) -> bool: ...

    @property
    def is_aborting(self) -> bool: ...

    @property
    def retry_backoff(self) -> ExponentialBackoff: ...

    @property
    def partitions_in_transaction(self) -> frozenset[TopicPartition]: ...

    def enqueue(self, handler: TxnRequestHandler[Any]) -> None:
        """Queue ``handler``'s request (again), in priority order."""

    def set_coordinator(self, key_type: int, node: Node) -> None:
        """FindCoordinator answered ``node`` for ``key_type``."""

    def lookup_coordinator(self, key_type: int, key: str) -> None:
        """The coordinator is unknown or moved: find it before the next request to it."""

    def fenced_error(self) -> ProducerFencedError:
        """The error a fenced producer raises."""
        ...

    def transition_to_abortable_error(self, error: KafkaError) -> None:
        """The transaction must be aborted."""

    def transition_to_fatal_error(self, error: KafkaError) -> None:
        """The producer must be closed."""

    def require_epoch_bump(self) -> None:
        """Aborting the transaction must bump the epoch (KIP-360)."""

    def on_producer_id(self, producer_id: int, epoch: int, *, epoch_bump: bool) -> None:
        """InitProducerId answered: use the id and epoch, the manager is READY."""

    def partitions_answered(self, partitions: set[TopicPartition], *, added: bool) -> None:
        """AddPartitionsToTxn answered for ``partitions`` (``added``: without error)."""

    def mark_transaction_started(self) -> None:
        """The coordinator knows of the transaction: ending it needs an EndTxn."""

    def complete_transaction(self, producer_id: int = -1, epoch: int = -1) -> None:
        """EndTxn succeeded: READY for the next transaction (with transactions v2, under the
        producer id and epoch EndTxn answered)."""


class TxnRequestHandler(Generic[R]):
    """One transactional request, its retries and the result the application waits on."""

    priority: Priority = Priority.ADD_PARTITIONS_OR_OFFSETS
    #: which coordinator the request goes to (None: any broker)
    coordinator_type: int | None = TRANSACTION_COORDINATOR
    is_end_txn = False
    max_version: int | None = None

    def __init__(self, tm: TxnContext, result: Future[None] | None = None) -> None:
        self.tm = tm
        self.result: Future[None] = result if result is not None else Future()
        self.attempts = 0
        self.retry_at_ms = 0

    @property
    def coordinator_key(self) -> str:
        return self.tm.transactional_id or ""

    def build(self) -> RequestMessage[R]:  # pragma: no cover - every handler overrides it
        raise NotImplementedError

    def handle(self, body: R, version: int) -> None:  # pragma: no cover
        raise NotImplementedError

    def retry_backoff_ms(self) -> int:
        """How long to wait before the next attempt (``attempts`` failures so far)."""
        return self.tm.retry_backoff.backoff_ms(max(0, self.attempts - 1))

    # outcomes

    def done(self) -> None:
        if not self.result.done():
            self.result.set_result(None)

    def fail(self, error: BaseException) -> None:
        if not self.result.done():
            self.result.set_exception(error)

    # The state changes before the result fails: the application, woken by the result, must
    # see the state the error left.

    def fatal_error(self, error: KafkaError) -> None:
        self.tm.transition_to_fatal_error(error)
        self.fail(error)

    def abortable_error(self, error: KafkaError) -> None:
        self.tm.transition_to_abortable_error(error)
        self.fail(error)

    def abortable_error_if_possible(self, error: KafkaError) -> None:
        if self.tm.can_bump_epoch:
            self.tm.require_epoch_bump()
            self.abortable_error(error)
        else:
            self.fatal_error(error)

    def reenqueue(self) -> None:
        self.attempts += 1
        self.tm.enqueue(self)

    def reenqueue_unless_aborting(self) -> None:
        """Retry offsets of the transaction, unless the application aborts it: the retries
        would go before the EndTxn(abort) forever (offsets of a topic the broker does not know
        are refused until it exists), and the abort drops those offsets anyway."""
        if self.tm.is_aborting:
            self.fail(
                TransactionAbortedError("the transaction was aborted before its offsets were committed")
            )
        else:
            self.reenqueue()


class FindCoordinatorHandler(TxnRequestHandler[FindCoordinatorResponse]):
    priority = Priority.FIND_COORDINATOR
    coordinator_type = None
    max_version = MAX_FIND_COORDINATOR_VERSION

    def __init__(self, tm: TxnContext, key_type: int, key: str) -> None:
        super().__init__(tm)
        self.key_type = key_type
        self.key = key

    def build(self) -> FindCoordinatorRequest:
        return FindCoordinatorRequest(key=self.key, key_type=self.key_type)

    def handle(self, body: FindCoordinatorResponse, version: int) -> None:
        code = body.error_code
        if code == 0:
            node = Node(body.node_id, body.host, body.port)
            self.tm.set_coordinator(self.key_type, node)
            self.done()
        elif code in (CoordinatorNotAvailableError.code, CoordinatorLoadInProgressError.code):
            self.reenqueue()
        elif code == TransactionalIdAuthorizationFailedError.code:
            self.fatal_error(TransactionalIdAuthorizationFailedError(self.key))
        elif code == GroupAuthorizationFailedError.code:
            self.abortable_error(GroupAuthorizationFailedError(f"group {self.key!r}"))
        else:
            kind = "transaction" if self.key_type == TRANSACTION_COORDINATOR else "group"
            self.fatal_error(
                error_for_code(code)(
                    f"could not find the {kind} coordinator for {self.key!r}: {body.error_message or ''}"
                )
            )


class InitProducerIdHandler(TxnRequestHandler[InitProducerIdResponse]):
    max_version = MAX_INIT_PRODUCER_ID_VERSION

    def __init__(self, tm: TxnContext, *, epoch_bump: bool, producer_id: int, epoch: int) -> None:
        super().__init__(tm)
        self.epoch_bump = epoch_bump
        self.priority = Priority.EPOCH_BUMP if epoch_bump else Priority.INIT_PRODUCER_ID
        self.coordinator_type = TRANSACTION_COORDINATOR if tm.is_transactional else None
        self.producer_id = producer_id
        self.epoch = epoch

    def build(self) -> InitProducerIdRequest:
        tm = self.tm
        return InitProducerIdRequest(
            transactional_id=tm.transactional_id,
            transaction_timeout_ms=tm.transaction_timeout_ms if tm.is_transactional else 2**31 - 1,
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
        )

    def handle(self, body: InitProducerIdResponse, version: int) -> None:
        tm = self.tm
        code = body.error_code
        if tm.is_transactional:
            tm.coordinator_supports_epoch_bump = version >= _EPOCH_BUMP_VERSION
        if code == 0:
            tm.on_producer_id(body.producer_id, body.producer_epoch, epoch_bump=self.epoch_bump)
            self.done()
        elif code in (NotCoordinatorError.code, CoordinatorNotAvailableError.code):
            tm.lookup_coordinator(TRANSACTION_COORDINATOR, tm.transactional_id or "")
            self.reenqueue()
        elif code in (CoordinatorLoadInProgressError.code, ConcurrentTransactionsError.code):
            self.reenqueue()
        elif code in (TransactionalIdAuthorizationFailedError.code, ClusterAuthorizationFailedError.code):
            self.fatal_error(error_for_code(code)(tm.transactional_id))
        elif code in (InvalidProducerEpochError.code, ProducerFencedError.code):
            # INVALID_PRODUCER_EPOCH comes from older coordinators: the same as PRODUCER_FENCED
            self.fatal_error(tm.fenced_error())
        elif code == TransactionAbortableError.code:
            self.abortable_error(TransactionAbortableError("InitProducerId"))
        else:
            self.fatal_error(error_for_code(code)("unexpected error in the InitProducerId response"))


class AddPartitionsHandler(TxnRequestHandler[AddPartitionsToTxnResponse]):
    max_version = MAX_ADD_PARTITIONS_VERSION

    def __init__(self, tm: TxnContext, partitions: set[TopicPartition]) -> None:
        super().__init__(tm)
        self.partitions = partitions
        self._backoff_override: int | None = None

    def build(self) -> AddPartitionsToTxnRequest:
        tm = self.tm
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(self.partitions):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        return AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=tm.transactional_id or "",
            v3_and_below_producer_id=tm.producer_id,
            v3_and_below_producer_epoch=tm.producer_epoch,
            v3_and_below_topics=[AddPartitionsToTxnTopic(name=t, partitions=p) for t, p in by_topic.items()],
        )

    def retry_backoff_ms(self) -> int:
        if self._backoff_override is not None:
            return min(self._backoff_override, super().retry_backoff_ms())
        return super().retry_backoff_ms()

    def handle(self, body: AddPartitionsToTxnResponse, version: int) -> None:
        tm = self.tm
        errors = {
            TopicPartition(t.name, p.partition_index): p.partition_error_code
            for t in body.results_by_topic_v3_and_below
            for p in t.results_by_partition
        }
        unauthorized: set[str] = set()
        other_errors = False
        self._backoff_override = None
        for tp, code in errors.items():
            if code == 0:
                continue
            if code in (CoordinatorNotAvailableError.code, NotCoordinatorError.code):
                tm.lookup_coordinator(TRANSACTION_COORDINATOR, tm.transactional_id or "")
                self.reenqueue()
                return
            if code == ConcurrentTransactionsError.code:
                if not tm.partitions_in_transaction:
                    self._backoff_override = ADD_PARTITIONS_RETRY_BACKOFF_MS
                self.reenqueue()
                return
            if code in (CoordinatorLoadInProgressError.code, UnknownTopicOrPartitionError.code):
                self.reenqueue()
                return
            if code in (InvalidProducerEpochError.code, ProducerFencedError.code):
                self.fatal_error(tm.fenced_error())
                return
            if code == TransactionalIdAuthorizationFailedError.code:
                self.fatal_error(TransactionalIdAuthorizationFailedError(tm.transactional_id))
                return
            if code == InvalidTxnStateError.code:
                self.fatal_error(InvalidTxnStateError("AddPartitionsToTxn"))
                return
            if code == TopicAuthorizationFailedError.code:
                unauthorized.add(tp.topic)
            elif code == OperationNotAttemptedError.code:
                other_errors = True
            elif code in (UnknownProducerIdError.code, InvalidProducerIdMappingError.code):
                self.abortable_error_if_possible(error_for_code(code)("AddPartitionsToTxn"))
                return
            elif code == TransactionAbortableError.code:
                self.abortable_error(TransactionAbortableError("AddPartitionsToTxn"))
                return
            else:
                log.error("could not add %s to the transaction: error code %d", tp, code)
                other_errors = True
        # Whatever the outcome, the partitions are no longer pending (Java): after an error the
        # transaction is aborted, and batches retrying for added partitions must still go out.
        tm.partitions_answered(set(errors), added=not (unauthorized or other_errors))
        if unauthorized:
            self.abortable_error(TopicAuthorizationFailedError(", ".join(sorted(unauthorized))))
        elif other_errors:
            self.abortable_error(
                TransactionAbortableError(f"could not add partitions to the transaction: {errors}")
            )
        else:
            self.done()


class AddOffsetsHandler(TxnRequestHandler[AddOffsetsToTxnResponse]):
    max_version = MAX_ADD_OFFSETS_VERSION

    def __init__(
        self,
        tm: TxnContext,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        group: GroupMetadataLike,
    ) -> None:
        super().__init__(tm)
        self.offsets = offsets
        self.group = group

    def build(self) -> AddOffsetsToTxnRequest:
        tm = self.tm
        return AddOffsetsToTxnRequest(
            transactional_id=tm.transactional_id or "",
            producer_id=tm.producer_id,
            producer_epoch=tm.producer_epoch,
            group_id=self.group.group_id,
        )

    def handle(self, body: AddOffsetsToTxnResponse, version: int) -> None:
        tm = self.tm
        code = body.error_code
        if code == 0:
            # the result completes only when the TxnOffsetCommit does
            tm.enqueue(TxnOffsetCommitHandler(tm, self.offsets, self.group, self.result))
            tm.mark_transaction_started()
        elif code in (CoordinatorNotAvailableError.code, NotCoordinatorError.code):
            tm.lookup_coordinator(TRANSACTION_COORDINATOR, tm.transactional_id or "")
            self.reenqueue_unless_aborting()
        elif code in (CoordinatorLoadInProgressError.code, ConcurrentTransactionsError.code):
            self.reenqueue_unless_aborting()
        elif code in (UnknownProducerIdError.code, InvalidProducerIdMappingError.code):
            self.abortable_error_if_possible(error_for_code(code)("AddOffsetsToTxn"))
        elif code in (InvalidProducerEpochError.code, ProducerFencedError.code):
            self.fatal_error(tm.fenced_error())
        elif code == TransactionalIdAuthorizationFailedError.code:
            self.fatal_error(TransactionalIdAuthorizationFailedError(tm.transactional_id))
        elif code == GroupAuthorizationFailedError.code:
            self.abortable_error(GroupAuthorizationFailedError(f"group {self.group.group_id!r}"))
        elif code == TransactionAbortableError.code:
            self.abortable_error(TransactionAbortableError("AddOffsetsToTxn"))
        else:
            self.fatal_error(error_for_code(code)("unexpected error in the AddOffsetsToTxn response"))


class TxnOffsetCommitHandler(TxnRequestHandler[TxnOffsetCommitResponse]):
    coordinator_type = GROUP_COORDINATOR
    max_version = MAX_TXN_OFFSET_COMMIT_VERSION

    def __init__(
        self,
        tm: TxnContext,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        group: GroupMetadataLike,
        result: Future[None],
        *,
        transaction_v2: bool = False,
    ) -> None:
        super().__init__(tm, result)
        self.pending = dict(offsets)
        self.group = group
        self._concurrent = False
        self._warned_unknown = False
        if transaction_v2:
            self.max_version = MAX_TXN_OFFSET_COMMIT_VERSION_V2

    @property
    def coordinator_key(self) -> str:
        return self.group.group_id

    def build(self) -> TxnOffsetCommitRequest:
        tm = self.tm
        by_topic: dict[str, list[TxnOffsetCommitRequestPartition]] = {}
        for tp, om in sorted(self.pending.items()):
            by_topic.setdefault(tp.topic, []).append(
                TxnOffsetCommitRequestPartition(
                    partition_index=tp.partition,
                    committed_offset=om.offset,
                    committed_leader_epoch=om.leader_epoch if om.leader_epoch is not None else -1,
                    committed_metadata=om.metadata,
                )
            )
        return TxnOffsetCommitRequest(
            transactional_id=tm.transactional_id or "",
            group_id=self.group.group_id,
            producer_id=tm.producer_id,
            producer_epoch=tm.producer_epoch,
            generation_id=self.group.generation_id,
            member_id=self.group.member_id,
            group_instance_id=self.group.group_instance_id,
            topics=[TxnOffsetCommitRequestTopic(name=t, partitions=p) for t, p in by_topic.items()],
        )

    def retry_backoff_ms(self) -> int:
        if self._concurrent:
            # the previous transaction's markers are being written: that takes milliseconds
            return min(ADD_PARTITIONS_RETRY_BACKOFF_MS, super().retry_backoff_ms())
        return super().retry_backoff_ms()

    def handle(self, body: TxnOffsetCommitResponse, version: int) -> None:
        tm = self.tm
        group = self.group.group_id
        lookup = False
        unknown: set[TopicPartition] = set()
        self._concurrent = False
        for topic in body.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                code = p.error_code
                if code == 0:
                    self.pending.pop(tp, None)
                elif code in (
                    CoordinatorNotAvailableError.code,
                    NotCoordinatorError.code,
                    RequestTimedOutError.code,
                ):
                    lookup = True
                elif code in (
                    UnknownTopicOrPartitionError.code,
                    CoordinatorLoadInProgressError.code,
                    # transactions v2: the group coordinator's implicit AddOffsetsToTxn met the
                    # previous transaction still writing its markers
                    ConcurrentTransactionsError.code,
                ):
                    self._concurrent = self._concurrent or code == ConcurrentTransactionsError.code
                    if code == UnknownTopicOrPartitionError.code:
                        unknown.add(tp)
                    continue
                elif code == GroupAuthorizationFailedError.code:
                    self.abortable_error(GroupAuthorizationFailedError(f"group {group!r}"))
                elif code == FencedInstanceIdError.code:
                    self.abortable_error(FencedInstanceIdError(f"group {group!r}"))
                elif code in (UnknownMemberIdError.code, IllegalGenerationError.code):
                    self.abortable_error(
                        CommitFailedError(
                            "the transactional offset commit failed: the consumer group metadata does not "
                            f"match the group's ({error_for_code(code).__name__})",
                            group_id=group,
                            generation=self.group.generation_id,
                            member_id=self.group.member_id,
                        )
                    )
                elif code == TransactionAbortableError.code:
                    self.abortable_error(TransactionAbortableError("TxnOffsetCommit"))
                elif code in (
                    TransactionalIdAuthorizationFailedError.code,
                    InvalidProducerEpochError.code,
                    ProducerFencedError.code,
                    UnsupportedForMessageFormatError.code,
                ):
                    fatal = (
                        tm.fenced_error()
                        if code in (InvalidProducerEpochError.code, ProducerFencedError.code)
                        else error_for_code(code)("TxnOffsetCommit")
                    )
                    self.fatal_error(fatal)
                else:
                    self.fatal_error(error_for_code(code)("unexpected error in the TxnOffsetCommit response"))
                if self.result.done():
                    return
        if lookup:
            tm.lookup_coordinator(GROUP_COORDINATOR, group)
        if not self.pending:
            self.done()
        else:
            if unknown and not self._warned_unknown:
                self._warned_unknown = True
                log.warning(
                    "transactional.id=%s: group %r's coordinator does not know %s "
                    "(UNKNOWN_TOPIC_OR_PARTITION): retrying until the topic exists; "
                    "abort_transaction() gives up on these offsets",
                    tm.transactional_id,
                    group,
                    ", ".join(str(tp) for tp in sorted(unknown)),
                )
            self.reenqueue_unless_aborting()


class EndTxnHandler(TxnRequestHandler[EndTxnResponse]):
    priority = Priority.END_TXN
    is_end_txn = True
    max_version = MAX_END_TXN_VERSION

    def __init__(self, tm: TxnContext, commit: bool, *, transaction_v2: bool = False) -> None:
        super().__init__(tm)
        self.commit = commit
        self.transaction_v2 = transaction_v2
        if transaction_v2:
            self.max_version = MAX_END_TXN_VERSION_V2

    def build(self) -> EndTxnRequest:
        tm = self.tm
        return EndTxnRequest(
            transactional_id=tm.transactional_id or "",
            producer_id=tm.producer_id,
            producer_epoch=tm.producer_epoch,
            committed=self.commit,
        )

    def handle(self, body: EndTxnResponse, version: int) -> None:
        tm = self.tm
        code = body.error_code
        if code == 0:
            if self.transaction_v2 and version >= MAX_END_TXN_VERSION_V2:
                # the epoch (or, once exhausted, the producer id) of the next transaction
                tm.complete_transaction(body.producer_id, body.producer_epoch)
            else:
                tm.complete_transaction()
            self.done()
        elif code in (CoordinatorNotAvailableError.code, NotCoordinatorError.code):
            tm.lookup_coordinator(TRANSACTION_COORDINATOR, tm.transactional_id or "")
            self.reenqueue()
        elif code in (CoordinatorLoadInProgressError.code, ConcurrentTransactionsError.code):
            self.reenqueue()
        elif code in (InvalidProducerEpochError.code, ProducerFencedError.code):
            self.fatal_error(tm.fenced_error())
        elif code == TransactionalIdAuthorizationFailedError.code:
            self.fatal_error(TransactionalIdAuthorizationFailedError(tm.transactional_id))
        elif code == InvalidTxnStateError.code:
            self.fatal_error(InvalidTxnStateError("EndTxn"))
        elif code in (UnknownProducerIdError.code, InvalidProducerIdMappingError.code):
            self.abortable_error_if_possible(error_for_code(code)("EndTxn"))
        elif code == TransactionAbortableError.code:
            self.abortable_error(TransactionAbortableError("EndTxn"))
        else:
            self.fatal_error(error_for_code(code)("unexpected error in the EndTxn response"))
