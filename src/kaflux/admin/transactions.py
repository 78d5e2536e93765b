"""Transactions seen from outside: list and describe them, fence their producers, abort a hanging
one; and deleting a group's committed offsets. [pure]

ListTransactions goes to every broker (each lists the transactions it coordinates);
DescribeTransactions and the fencing InitProducerId go to each transactional id's coordinator
(FindCoordinator with key type 1); the abort writes the marker with WriteTxnMarkers to the
partition's leader, as Java's ``Admin.abortTransaction`` does. OffsetDelete goes to the group's
coordinator.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kaflux.admin.groups import GroupApi, group_error
from kaflux.admin.operation import AdminApi, Lookup, Outcome
from kaflux.errors import (
    CoordinatorNotAvailableError,
    KafkaError,
    NotCoordinatorError,
    error_for_code,
)
from kaflux.protocol.framing import RequestMessage
from kaflux.protocol.messages.describe_transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
)
from kaflux.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from kaflux.protocol.messages.list_transactions import ListTransactionsRequest, ListTransactionsResponse
from kaflux.protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
    OffsetDeleteResponse,
)
from kaflux.protocol.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from kaflux.structs import Node, TopicPartition

__all__ = [
    "AbortTransactionApi",
    "AbortTransactionSpec",
    "DescribeTransactionsApi",
    "FenceProducersApi",
    "ListTransactionsApi",
    "OffsetDeleteApi",
    "ProducerIdAndEpoch",
    "TransactionDescription",
    "TransactionListing",
]

_MOVED = (NotCoordinatorError.code, CoordinatorNotAvailableError.code)


@dataclass(frozen=True, slots=True)
class TransactionListing:
    """A transactional id as its coordinator lists it, with its producer id and state
    (``Ongoing``, ``PrepareCommit``, ``CompleteCommit``, ``Empty``...)."""

    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    """A transaction as its coordinator describes it. ``start_time_ms`` is -1 when none is
    open; ``partitions`` are those it wrote to."""

    transactional_id: str
    coordinator_id: int
    state: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    start_time_ms: int
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class ProducerIdAndEpoch:
    """The producer id and the new epoch a fenced transactional id got."""

    producer_id: int
    epoch: int


@dataclass(frozen=True, slots=True)
class AbortTransactionSpec:
    """A hanging transaction to abort on one partition (Java's ``AbortTransactionSpec``): the
    producer id and epoch that wrote it, and the coordinator epoch of its marker
    (``kaflux`` learns these from DescribeProducers or the broker's logs)."""

    partition: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int


def _fail(outcome: Outcome[Any, Any], key: Any, error: KafkaError) -> None:
    (outcome.retry if error.retriable else outcome.failed)[key] = error


class ListTransactionsApi(AdminApi[int, list[TransactionListing]]):
    """ListTransactions to every broker."""

    lookup = Lookup.BROKERS

    def __init__(self, states: Sequence[str], producer_ids: Sequence[int], duration_ms: int) -> None:
        self._states = list(states)
        self._producer_ids = list(producer_ids)
        self._duration_ms = duration_ms

    def keys(self) -> list[int]:
        return []

    def describe(self, key: int) -> str:
        return f"broker {key}"

    def build(self, node: Node | None, keys: list[int]) -> list[tuple[RequestMessage[Any], list[int]]]:
        request = ListTransactionsRequest(
            state_filters=self._states,
            producer_id_filters=self._producer_ids,
            duration_filter=self._duration_ms,
        )
        return [(request, keys)]

    def handle(
        self, node: Node | None, keys: list[int], body: ListTransactionsResponse
    ) -> Outcome[int, list[TransactionListing]]:
        outcome: Outcome[int, list[TransactionListing]] = Outcome()
        for key in keys:
            if body.error_code:
                _fail(outcome, key, error_for_code(body.error_code)(f"ListTransactions on broker {key}"))
                continue
            outcome.completed[key] = [
                TransactionListing(t.transactional_id, t.producer_id, t.transaction_state)
                for t in body.transaction_states
            ]
        return outcome


class _TxnIdApi(AdminApi[str, Any]):
    """Keyed by transactional id, sent to its transaction coordinator."""

    lookup = Lookup.COORDINATOR
    coordinator_type = 1

    def __init__(self, ids: Iterable[str]) -> None:
        self._ids = list(dict.fromkeys(ids))

    def keys(self) -> list[str]:
        return self._ids

    def describe(self, key: str) -> str:
        return f"transactional id {key!r}"

    def _error(self, outcome: Outcome[str, Any], key: str, code: int) -> None:
        error = error_for_code(code)(self.describe(key))
        if code in _MOVED:
            outcome.unmapped[key] = error
        else:
            _fail(outcome, key, error)


class DescribeTransactionsApi(_TxnIdApi):
    """DescribeTransactions to each transactional id's coordinator."""

    def build(self, node: Node | None, keys: list[str]) -> list[tuple[RequestMessage[Any], list[str]]]:
        return [(DescribeTransactionsRequest(transactional_ids=keys), keys)]

    def handle(
        self, node: Node | None, keys: list[str], body: DescribeTransactionsResponse
    ) -> Outcome[str, TransactionDescription]:
        outcome: Outcome[str, TransactionDescription] = Outcome()
        for state in body.transaction_states:
            key = state.transactional_id
            if key not in keys:
                continue
            if state.error_code:
                self._error(outcome, key, state.error_code)
                continue
            outcome.completed[key] = TransactionDescription(
                transactional_id=key,
                coordinator_id=-1 if node is None else node.node_id,
                state=state.transaction_state,
                producer_id=state.producer_id,
                producer_epoch=state.producer_epoch,
                transaction_timeout_ms=state.transaction_timeout_ms,
                start_time_ms=state.transaction_start_time_ms,
                partitions=frozenset(TopicPartition(t.topic, p) for t in state.topics for p in t.partitions),
            )
        return outcome


class FenceProducersApi(_TxnIdApi):
    """InitProducerId for each transactional id: bumps its epoch, so the producer using it is
    fenced and its open transaction aborted (Java's ``fenceProducers``)."""

    def build(self, node: Node | None, keys: list[str]) -> list[tuple[RequestMessage[Any], list[str]]]:
        return [
            (
                InitProducerIdRequest(
                    transactional_id=k, transaction_timeout_ms=1, producer_id=-1, producer_epoch=-1
                ),
                [k],
            )
            for k in keys
        ]

    def handle(
        self, node: Node | None, keys: list[str], body: InitProducerIdResponse
    ) -> Outcome[str, ProducerIdAndEpoch]:
        outcome: Outcome[str, ProducerIdAndEpoch] = Outcome()
        for key in keys:
            if body.error_code:
                self._error(outcome, key, body.error_code)
            else:
                outcome.completed[key] = ProducerIdAndEpoch(body.producer_id, body.producer_epoch)
        return outcome


class AbortTransactionApi(AdminApi[TopicPartition, None]):
    """WriteTxnMarkers with an abort marker to the partition's leader."""

    lookup = Lookup.LEADER

    def __init__(self, spec: AbortTransactionSpec) -> None:
        self._spec = spec

    def keys(self) -> list[TopicPartition]:
        return [self._spec.partition]

    def build(
        self, node: Node | None, keys: list[TopicPartition]
    ) -> list[tuple[RequestMessage[Any], list[TopicPartition]]]:
        spec = self._spec
        marker = WritableTxnMarker(
            producer_id=spec.producer_id,
            producer_epoch=spec.producer_epoch,
            transaction_result=False,
            topics=[
                WritableTxnMarkerTopic(
                    name=spec.partition.topic, partition_indexes=[spec.partition.partition]
                )
            ],
            coordinator_epoch=spec.coordinator_epoch,
        )
        return [(WriteTxnMarkersRequest(markers=[marker]), keys)]

    def handle(
        self, node: Node | None, keys: list[TopicPartition], body: WriteTxnMarkersResponse
    ) -> Outcome[TopicPartition, None]:
        outcome: Outcome[TopicPartition, None] = Outcome()
        for marker in body.markers:
            for topic in marker.topics:
                for p in topic.partitions:
                    tp = TopicPartition(topic.name, p.partition_index)
                    if tp not in keys:
                        continue
                    if p.error_code:
                        error = error_for_code(p.error_code)(f"aborting the transaction on {tp}")
                        if error.invalid_metadata:
                            outcome.unmapped[tp] = error
                        else:
                            _fail(outcome, tp, error)
                    else:
                        outcome.completed[tp] = None
        return outcome


class OffsetDeleteApi(GroupApi):
    """OffsetDelete: remove a group's committed offsets for some partitions. Values are the
    per-partition errors (None: deleted)."""

    def __init__(self, group_id: str, partitions: Sequence[TopicPartition]) -> None:
        super().__init__([group_id])
        self._partitions = sorted(set(partitions))

    def build(self, node: Node | None, keys: list[str]) -> list[tuple[RequestMessage[Any], list[str]]]:
        topics: dict[str, list[int]] = {}
        for tp in self._partitions:
            topics.setdefault(tp.topic, []).append(tp.partition)
        request = OffsetDeleteRequest(
            group_id=keys[0],
            topics=[
                OffsetDeleteRequestTopic(
                    name=t, partitions=[OffsetDeleteRequestPartition(partition_index=p) for p in ps]
                )
                for t, ps in topics.items()
            ],
        )
        return [(request, keys)]

    def handle(
        self, node: Node | None, keys: list[str], body: OffsetDeleteResponse
    ) -> Outcome[str, dict[TopicPartition, KafkaError | None]]:
        outcome: Outcome[str, dict[TopicPartition, KafkaError | None]] = Outcome()
        group = keys[0]
        if body.error_code:
            group_error(outcome, group, body.error_code)
            return outcome
        results: dict[TopicPartition, KafkaError | None] = {}
        for topic in body.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                results[tp] = (
                    error_for_code(p.error_code)(f"deleting the offset of group {group!r} for {tp}")
                    if p.error_code
                    else None
                )
        outcome.completed[group] = {tp: results.get(tp) for tp in self._partitions}
        return outcome
