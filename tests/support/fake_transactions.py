"""An in-memory broker with producer state: idempotent Produce and a transaction coordinator.

Not a test module. Tests import it as ``from support.fake_transactions import ...``.

:class:`TxnFakeCluster` is a :class:`fakes.FakeCluster` (topics, logs, groups, faults, the fake
network) that also answers InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit
and EndTxn, and checks the producer fields of every Produce batch the way Kafka's
``ProducerStateManager`` does:

* per (partition, producer id) the broker remembers the epoch and the last five batches
  (first and last sequence, base offset); a batch equal to one of them is a duplicate and is
  answered with the original offset, without writing it again;
* a batch is in sequence when its first sequence follows the last one written; otherwise
  OUT_OF_ORDER_SEQUENCE_NUMBER; a new epoch must start at sequence 0 (else
  OUT_OF_ORDER_SEQUENCE_NUMBER); an unknown producer must start at 0 (else
  UNKNOWN_PRODUCER_ID), unless ``accept_any_first_sequence`` (Apache Kafka 4.4's rule: any
  first batch of an unknown producer is accepted); an older epoch gets INVALID_PRODUCER_EPOCH;
* transactional batches need their partition added to the producer's ongoing transaction
  (else INVALID_TXN_STATE).

The coordinator keeps one entry per transactional id (producer id, epoch, state, partitions,
pending group offsets). InitProducerId for a known id aborts its open transaction and bumps
the epoch, which fences the older producer (PRODUCER_FENCED on its next coordinator request);
with the current id and epoch (v3+) it bumps the epoch for that producer. EndTxn writes COMMIT or
ABORT markers on every partition that holds data of the transaction and, on commit, stores the
group offsets sent with TxnOffsetCommit. :meth:`TxnFakeCluster.forget_producer` drops a
producer's state on a partition (retention), :meth:`TxnFakeCluster.log_start_offset` moves with
:meth:`FakeCluster.delete_records`.

With ``transaction_version=2`` the fake plays a cluster with transactions v2 (KIP-890): a
transactional batch sent with Produce v12+ adds its partition to the ongoing transaction (the
partition leader's implicit AddPartitionsToTxn), TxnOffsetCommit v5+ adds the group, and EndTxn
v5+ bumps the epoch and answers it. Pass its :attr:`TxnFakeCluster.finalized_features` to the
client's cluster metadata (as ApiVersions would).
"""

from __future__ import annotations

import enum
import itertools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kaflux.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from kaflux.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopicResult,
)
from kaflux.protocol.messages.end_txn import EndTxnRequest, EndTxnResponse
from kaflux.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from kaflux.protocol.messages.produce import (
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceResponse,
)
from kaflux.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from kaflux.records import iter_batches
from kaflux.structs import TopicPartition

from support.fakes import (
    NONE,
    NOT_COORDINATOR,
    UNKNOWN_TOPIC_OR_PARTITION,
    BrokerDownError,
    Committed,
    FakeCluster,
)

OUT_OF_ORDER_SEQUENCE_NUMBER = 45
DUPLICATE_SEQUENCE_NUMBER = 46
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
CONCURRENT_TRANSACTIONS = 51
UNKNOWN_PRODUCER_ID = 59
PRODUCER_FENCED = 90
ILLEGAL_GENERATION = 22
MESSAGE_TOO_LARGE = 10

#: Kafka keeps this many batches per producer and partition for duplicate detection.
CACHED_BATCHES = 5
_INT_MAX = 2**31 - 1


class TxnStatus(enum.Enum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"


@dataclass(slots=True)
class TxnEntry:
    """The coordinator's view of one transactional id."""

    producer_id: int
    epoch: int
    timeout_ms: int
    status: TxnStatus = TxnStatus.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    #: group -> offsets sent with TxnOffsetCommit in the ongoing transaction
    pending_offsets: dict[str, dict[TopicPartition, Committed]] = field(default_factory=dict)


@dataclass(slots=True)
class ProducerEntry:
    """A partition's view of one producer id."""

    epoch: int
    #: (first sequence, last sequence, base offset) of the last batches written
    batches: deque[tuple[int, int, int]] = field(default_factory=lambda: deque(maxlen=CACHED_BATCHES))

    @property
    def last_sequence(self) -> int:
        return self.batches[-1][1] if self.batches else -1


@dataclass(slots=True)
class WrittenBatch:
    """A producer batch as the fake broker wrote it (for assertions)."""

    tp: TopicPartition
    producer_id: int
    epoch: int
    first_sequence: int
    record_count: int
    base_offset: int
    transactional: bool


class TxnFakeCluster(FakeCluster):
    """FakeCluster with producer state and a transaction coordinator."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._producer_ids = itertools.count(1000)
        self.txns: dict[str, TxnEntry] = {}
        self.producers: dict[tuple[TopicPartition, int], ProducerEntry] = {}
        #: every producer batch written (not duplicates), in order
        self.written: list[WrittenBatch] = []
        #: Produce requests answered as duplicates: (tp, first sequence)
        self.duplicates: list[tuple[TopicPartition, int]] = []
        #: producer ids this broker gave out; with ``strict_producer_ids`` others are refused
        #: with UNKNOWN_PRODUCER_ID (as Tansu after losing its state)
        self.issued: set[int] = set()
        self.strict_producer_ids = False
        #: Apache Kafka's rule for a producer the partition has no state for: its first batch is
        #: accepted whatever its first sequence (ProducerAppendInfo: an empty entry has no
        #: epoch, so the "new epoch starts at 0" check does not apply). Off: such a batch must
        #: start at 0, else UNKNOWN_PRODUCER_ID (older brokers, the stand-ins).
        self.accept_any_first_sequence = False
        #: the finalized ``transaction.version`` (2: transactions v2, KIP-890)
        self.transaction_version = 1

    @property
    def finalized_features(self) -> dict[str, int]:
        return {"transaction.version": self.transaction_version}

    def _txn_v2(self, version: int, first_v2_version: int) -> bool:
        return self.transaction_version >= 2 and version >= first_v2_version

    # -- state for tests -------------------------------------------------------------------

    def forget_producer(self, tp: TopicPartition, producer_id: int) -> None:
        """The partition loses the producer's state (as when retention removed its batches)."""
        self.producers.pop((tp, producer_id), None)

    def lose_producer_state(self) -> None:
        """The broker forgets every producer (a restart of a broker without durable state)."""
        self.producers.clear()
        self.issued.clear()
        self.strict_producer_ids = True

    def time_out(self, transactional_id: str) -> None:
        """The coordinator aborts the ongoing transaction of ``transactional_id`` because it
        outlived its transaction.timeout.ms, and bumps the epoch (which fences the producer)."""
        entry = self.txns[transactional_id]
        if entry.status is TxnStatus.ONGOING:
            self._complete(transactional_id, entry, commit=False)
        entry.epoch += 1

    def log_start_offset(self, tp: TopicPartition) -> int:
        return self.partition(tp).log_start_offset

    def values(self, tp: TopicPartition) -> list[bytes | None]:
        """The values of every data record of ``tp``, in log order."""
        return [value for _, _, value in self.records(tp)]

    # -- dispatch ----------------------------------------------------------------------------

    def handle(self, broker_id: int, request: Any, version: int) -> Any:
        handlers: dict[type[Any], Callable[..., Any]] = {
            InitProducerIdRequest: self._init_producer_id,
            AddPartitionsToTxnRequest: self._add_partitions,
            AddOffsetsToTxnRequest: self._add_offsets,
            TxnOffsetCommitRequest: self._txn_offset_commit,
            EndTxnRequest: self._end_txn,
            ProduceRequest: self._idempotent_produce,
        }
        handler = handlers.get(type(request))
        if handler is None:
            return super().handle(broker_id, request, version)
        if broker_id in self.stopped or broker_id not in self.brokers:
            raise BrokerDownError(f"broker {broker_id} is down")
        self.handled.append((broker_id, request, version))
        return handler(broker_id, request, version)

    # -- the coordinator ---------------------------------------------------------------------------

    def _fenced(self, version: int, producer_fenced_from: int) -> int:
        return PRODUCER_FENCED if version >= producer_fenced_from else INVALID_PRODUCER_EPOCH

    def _check_producer(
        self, tid: str, producer_id: int, epoch: int, fenced: int
    ) -> tuple[int, TxnEntry | None]:
        entry = self.txns.get(tid)
        if entry is None or entry.producer_id != producer_id:
            return INVALID_PRODUCER_ID_MAPPING, None
        if epoch != entry.epoch:
            return fenced, None
        return NONE, entry

    def _init_producer_id(
        self, node: int, request: InitProducerIdRequest, version: int
    ) -> InitProducerIdResponse:
        error = self._fault(InitProducerIdRequest, None, node)
        if error:
            return InitProducerIdResponse(error_code=error, producer_id=-1, producer_epoch=-1)
        tid = request.transactional_id
        if tid is None:
            producer_id = next(self._producer_ids)
            self.issued.add(producer_id)
            return InitProducerIdResponse(producer_id=producer_id, producer_epoch=0)
        if self.coordinator_for(tid) != node:
            return InitProducerIdResponse(error_code=NOT_COORDINATOR, producer_id=-1, producer_epoch=-1)
        entry = self.txns.get(tid)
        if entry is None:
            entry = self.txns[tid] = TxnEntry(next(self._producer_ids), 0, request.transaction_timeout_ms)
            return InitProducerIdResponse(producer_id=entry.producer_id, producer_epoch=entry.epoch)
        if request.producer_id >= 0 and (request.producer_id, request.producer_epoch) != (
            entry.producer_id,
            entry.epoch,
        ):
            return InitProducerIdResponse(
                error_code=self._fenced(version, 4), producer_id=-1, producer_epoch=-1
            )
        if entry.status is TxnStatus.ONGOING:
            self._complete(tid, entry, commit=False)
        entry.epoch += 1
        entry.timeout_ms = request.transaction_timeout_ms
        return InitProducerIdResponse(producer_id=entry.producer_id, producer_epoch=entry.epoch)

    def _add_partitions(
        self, node: int, request: AddPartitionsToTxnRequest, version: int
    ) -> AddPartitionsToTxnResponse:
        tid = request.v3_and_below_transactional_id
        top = self._fault(AddPartitionsToTxnRequest, None, node)
        if not top and self.coordinator_for(tid) != node:
            top = NOT_COORDINATOR
        entry: TxnEntry | None = None
        if not top:
            top, entry = self._check_producer(
                tid,
                request.v3_and_below_producer_id,
                request.v3_and_below_producer_epoch,
                self._fenced(version, 2),
            )
        results = []
        for topic in request.v3_and_below_topics:
            partitions = []
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p)
                code = top or self._fault(AddPartitionsToTxnRequest, tp, node)
                if not code and (
                    topic.name not in self.topics or p not in self.topics[topic.name].partitions
                ):
                    code = UNKNOWN_TOPIC_OR_PARTITION
                if not code and entry is not None:
                    entry.partitions.add(tp)
                    entry.status = TxnStatus.ONGOING
                partitions.append(
                    AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=code)
                )
            results.append(AddPartitionsToTxnTopicResult(name=topic.name, results_by_partition=partitions))
        return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=results)

    def _add_offsets(
        self, node: int, request: AddOffsetsToTxnRequest, version: int
    ) -> AddOffsetsToTxnResponse:
        error = self._fault(AddOffsetsToTxnRequest, None, node)
        if not error and self.coordinator_for(request.transactional_id) != node:
            error = NOT_COORDINATOR
        if not error:
            error, entry = self._check_producer(
                request.transactional_id,
                request.producer_id,
                request.producer_epoch,
                self._fenced(version, 2),
            )
            if entry is not None:
                entry.groups.add(request.group_id)
                entry.status = TxnStatus.ONGOING
        return AddOffsetsToTxnResponse(error_code=error)

    def _txn_offset_commit(
        self, node: int, request: TxnOffsetCommitRequest, version: int
    ) -> TxnOffsetCommitResponse:
        top = self._fault(TxnOffsetCommitRequest, None, node)
        if not top and self.coordinator_for(request.group_id) != node:
            top = NOT_COORDINATOR
        entry: TxnEntry | None = None
        if not top:
            top, entry = self._check_producer(
                request.transactional_id, request.producer_id, request.producer_epoch, INVALID_PRODUCER_EPOCH
            )
        if not top and entry is not None and self._txn_v2(version, 5):
            entry.groups.add(request.group_id)  # the implicit AddOffsetsToTxn (KIP-890)
            entry.status = TxnStatus.ONGOING
        if not top and entry is not None and request.group_id not in entry.groups:
            top = INVALID_TXN_STATE
        topics = []
        for topic in request.topics:
            partitions = []
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                code = top or self._fault(TxnOffsetCommitRequest, tp, node)
                if not code and entry is not None:
                    offsets = entry.pending_offsets.setdefault(request.group_id, {})
                    offsets[tp] = Committed(
                        p.committed_offset, p.committed_metadata or "", p.committed_leader_epoch
                    )
                partitions.append(
                    TxnOffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
                )
            topics.append(TxnOffsetCommitResponseTopic(name=topic.name, partitions=partitions))
        return TxnOffsetCommitResponse(topics=topics)

    def _end_txn(self, node: int, request: EndTxnRequest, version: int) -> EndTxnResponse:
        tid = request.transactional_id
        error = self._fault(EndTxnRequest, None, node)
        if not error and self.coordinator_for(tid) != node:
            error = NOT_COORDINATOR
        if not error:
            error, entry = self._check_producer(
                tid, request.producer_id, request.producer_epoch, self._fenced(version, 2)
            )
            if entry is not None:
                if entry.status is not TxnStatus.ONGOING:
                    error = INVALID_TXN_STATE
                else:
                    self._complete(tid, entry, commit=request.committed)
                    if self._txn_v2(version, 5):
                        entry.epoch += 1  # every transaction has its own epoch (KIP-890)
                        return EndTxnResponse(producer_id=entry.producer_id, producer_epoch=entry.epoch)
        return EndTxnResponse(error_code=error)

    def _complete(self, tid: str, entry: TxnEntry, *, commit: bool) -> None:
        for tp in sorted(entry.partitions):
            if entry.producer_id in self.partition(tp).open_transactions:
                self.end_transaction(tp, entry.producer_id, commit=commit)
        if commit:
            for group, offsets in entry.pending_offsets.items():
                for tp, committed in offsets.items():
                    self.committed.setdefault(group, {})[tp] = committed
        entry.status = TxnStatus.EMPTY
        entry.partitions.clear()
        entry.groups.clear()
        entry.pending_offsets.clear()

    # -- Produce with producer state -----------------------------------------------------------------

    def _idempotent_produce(self, node: int, request: ProduceRequest, version: int) -> ProduceResponse | None:
        responses = []
        for t in request.topic_data:
            partitions = []
            for p in t.partition_data:
                tp = TopicPartition(t.name, p.index)
                error = (
                    self._fault(ProduceRequest, tp, node)
                    or self._fault(ProduceRequest, None, node)
                    or self._partition_error(node, tp)
                )
                base = -1
                if not error:
                    error, base = self._append_checked(
                        tp,
                        bytes(p.records or b""),
                        request.transactional_id,
                        implicit_add=self._txn_v2(version, 12),
                    )
                partitions.append(
                    PartitionProduceResponse(
                        index=p.index,
                        error_code=error,
                        base_offset=base if not error else -1,
                        log_start_offset=self.partition(tp).log_start_offset
                        if tp.topic in self.topics and tp.partition in self.topics[tp.topic].partitions
                        else -1,
                    )
                )
            responses.append(TopicProduceResponse(name=t.name, partition_responses=partitions))
        if request.acks == 0:
            return None
        return ProduceResponse(responses=responses)

    def _append_checked(
        self, tp: TopicPartition, data: bytes, transactional_id: str | None, *, implicit_add: bool = False
    ) -> tuple[int, int]:
        """Check and append one Produce batch; returns (error code, base offset)."""
        batch = next(iter_batches(memoryview(data), check_crcs=True))
        pid = batch.producer_id
        if pid < 0:
            return NONE, self.append_batch(tp, data)
        if self.strict_producer_ids and pid not in self.issued:
            return UNKNOWN_PRODUCER_ID, -1
        epoch, first, count = batch.producer_epoch, batch.base_sequence, batch.record_count
        last = (first + count - 1) % (_INT_MAX + 1)
        if batch.is_transactional:
            entry = self.txns.get(transactional_id or "")
            if entry is None or entry.producer_id != pid:
                return INVALID_PRODUCER_ID_MAPPING, -1
            if epoch < entry.epoch:
                return INVALID_PRODUCER_EPOCH, -1
            if tp not in entry.partitions and implicit_add and epoch == entry.epoch:
                entry.partitions.add(tp)  # the leader adds the partition (KIP-890)
                entry.status = TxnStatus.ONGOING
            if tp not in entry.partitions:
                return INVALID_TXN_STATE, -1
        state = self.producers.get((tp, pid))
        if state is None:
            if first != 0 and not self.accept_any_first_sequence:
                return UNKNOWN_PRODUCER_ID, -1
        elif epoch < state.epoch:
            return INVALID_PRODUCER_EPOCH, -1
        elif epoch > state.epoch:
            if first != 0:
                return OUT_OF_ORDER_SEQUENCE_NUMBER, -1
        else:
            for cached_first, cached_last, cached_offset in state.batches:
                if (cached_first, cached_last) == (first, last):
                    self.duplicates.append((tp, first))
                    return NONE, cached_offset
            if first != (state.last_sequence + 1) % (_INT_MAX + 1):
                return OUT_OF_ORDER_SEQUENCE_NUMBER, -1
        if state is None or epoch > state.epoch:
            state = self.producers[(tp, pid)] = ProducerEntry(epoch)
        base = self.append_batch(tp, data)
        state.batches.append((first, last, base))
        self.written.append(WrittenBatch(tp, pid, epoch, first, count, base, batch.is_transactional))
        return NONE, base


# -- the client side: accumulator, sender and transaction manager over the fake network ---------


class ProducerDriver:
    """The producer's network-thread parts wired to a :class:`TxnFakeCluster`, driven with
    explicit time, as ``kaflux.Producer`` wires them (without its thread and facade).

    :meth:`send` plays the application thread; :meth:`run` one pass of the network thread with
    instant answers; :meth:`poll` a pass whose responses stay undelivered (deliver them with
    ``self.net``).
    """

    def __init__(
        self,
        fake: TxnFakeCluster,
        *,
        transactional_id: str | None = None,
        idempotent: bool = True,
        linger_ms: int = 0,
        batch_size: int = 16384,
        delivery_timeout_ms: int = 120_000,
        retries: int = 2**31 - 1,
        max_in_flight: int = 5,
        topics: tuple[str, ...] = ("t",),
    ) -> None:
        from kaflux.producer.accumulator import RecordAccumulator
        from kaflux.producer.sender import ProduceRequestManager
        from kaflux.producer.transaction_manager import TransactionManager

        from support.fakes import connect, exact_backoff

        self.fake = fake
        self.side = connect(fake, topics)
        self.net = self.side.net
        self.accumulator = RecordAccumulator(
            batch_size=batch_size,
            linger_ms=linger_ms,
            buffer_memory=1 << 24,
            compression=0,
            delivery_timeout_ms=delivery_timeout_ms,
            max_in_flight_per_partition=max_in_flight if idempotent else 1,
        )
        self.tm = (
            TransactionManager(
                transactional_id=transactional_id,
                transaction_timeout_ms=60_000,
                cluster=self.side.cluster,
                retry_backoff=exact_backoff(),
                has_incomplete_batches=self.accumulator.has_incomplete,
            )
            if idempotent
            else None
        )
        self.sender = ProduceRequestManager(
            self.accumulator,
            self.side.cluster,
            self.side.metadata,
            acks=-1,
            request_timeout_ms=30_000,
            retries=retries,
            delivery_timeout_ms=delivery_timeout_ms,
            retry_backoff=exact_backoff(),
            transaction_manager=self.tm,
            max_in_flight_per_node=max_in_flight,
        )
        self.managers: list[Any] = [self.side.metadata, self.sender] + ([self.tm] if self.tm else [])
        # what ApiVersions would tell the client
        self.side.cluster.update_finalized_features(fake.finalized_features, 0)

    def send(
        self, value: bytes, tp: TopicPartition | None = None, now_ms: int = 0, key: bytes | None = None
    ) -> Any:
        future, _, _ = self.accumulator.append(
            tp or TopicPartition("t", 0), 5_000, key, value, None, now_ms, 1e12, lambda: 0.0
        )
        return future

    def poll(self, now_ms: int) -> list[Any]:
        """Poll every manager once and send what they return; deliver nothing."""
        sent: list[Any] = []
        for manager in self.managers:
            sent += self.net.add_all(manager.poll(now_ms), now_ms)
        return sent

    def run(self, now_ms: int, passes: int = 1) -> list[Any]:
        """``passes`` network-thread passes at ``now_ms`` with instant answers."""
        sent: list[Any] = []
        for _ in range(passes):
            sent += self.net.run(self.managers, now_ms)
        return sent

    def run_until(self, done: Any, *, start_ms: int = 0, step_ms: int = 10, limit_ms: int = 60_000) -> int:
        """Run passes (``step_ms`` apart) until ``done()``; returns the time it took. Fails at
        ``limit_ms``."""
        now = start_ms
        while not done():
            assert now - start_ms <= limit_ms, "the driver did not get there in time"
            self.run(now)
            now += step_ms
        return now

    def sent(self, api: type[Any]) -> list[Any]:
        return self.net.sent(api)
