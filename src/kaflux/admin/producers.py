"""Describing the producers a partition's log knows: DescribeProducers (KIP-664), to find hanging
transactions, as Java's ``Admin.describeProducers`` does. [pure]

:class:`DescribeProducersApi` asks each partition's leader (or, given a broker id, that broker:
any replica answers for itself) which producers have written to it: id, epoch, last sequence and
timestamp, and where an open transaction started. A leader that moved is looked up again; a
broker named by the caller that is not a replica fails the partition, as in Java.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kaflux.admin.operation import AdminApi, Lookup, Outcome
from kaflux.errors import (
    KafkaError,
    NotLeaderOrFollowerError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
    error_for_code,
)
from kaflux.protocol.framing import RequestMessage
from kaflux.protocol.messages.describe_producers import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    TopicRequest,
)
from kaflux.structs import Node, TopicPartition

__all__ = ["DescribeProducersApi", "ProducerState"]


@dataclass(frozen=True, slots=True)
class ProducerState:
    """One producer a partition's log knows (Java's ``ProducerState``).

    ``current_transaction_start_offset`` is the offset of the first record of its open
    transaction (None: none open; an old one that stays open is a hanging transaction, which
    :meth:`~kaflux.AdminClient.abort_transaction` can end); ``coordinator_epoch`` is that of
    the transaction coordinator that last wrote a marker (None: none yet).
    """

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int | None
    current_transaction_start_offset: int | None


class DescribeProducersApi(AdminApi[TopicPartition, list[ProducerState]]):
    """DescribeProducers to each partition's leader, or to ``broker_id`` for all of them."""

    def __init__(self, partitions: Iterable[TopicPartition], broker_id: int | None = None) -> None:
        self._partitions = list(dict.fromkeys(partitions))
        self._broker_id = broker_id
        self.lookup = Lookup.LEADER if broker_id is None else Lookup.NODE

    def keys(self) -> list[TopicPartition]:
        return self._partitions

    def describe(self, key: TopicPartition) -> str:
        return f"the producers of {key}"

    def node_id(self, key: TopicPartition) -> int | None:
        return self._broker_id

    def build(
        self, node: Node | None, keys: list[TopicPartition]
    ) -> list[tuple[RequestMessage[Any], list[TopicPartition]]]:
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(keys):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        topics = [TopicRequest(name=t, partition_indexes=ps) for t, ps in by_topic.items()]
        return [(DescribeProducersRequest(topics=topics), keys)]

    def handle_error(
        self, node: Node | None, keys: list[TopicPartition], request: Any, error: KafkaError
    ) -> Outcome[TopicPartition, list[ProducerState]] | None:
        if not isinstance(error, UnsupportedVersionError):
            return None
        broker = "the broker" if node is None else f"broker {node.node_id} ({node.host}:{node.port})"
        return Outcome(
            failed={
                tp: UnsupportedVersionError(
                    f"describing the producers of {tp}: {broker} lacks DescribeProducers (KIP-664, "
                    f"Kafka 2.8+): {error}"
                )
                for tp in keys
            }
        )

    def handle(
        self, node: Node | None, keys: list[TopicPartition], body: DescribeProducersResponse
    ) -> Outcome[TopicPartition, list[ProducerState]]:
        wanted = set(keys)
        outcome: Outcome[TopicPartition, list[ProducerState]] = Outcome()
        for topic in body.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                if tp not in wanted:
                    continue
                if p.error_code:
                    self._partition_error(outcome, node, tp, p.error_code, p.error_message)
                    continue
                outcome.completed[tp] = [
                    ProducerState(
                        s.producer_id,
                        s.producer_epoch,
                        s.last_sequence,
                        s.last_timestamp,
                        s.coordinator_epoch if s.coordinator_epoch >= 0 else None,
                        s.current_txn_start_offset if s.current_txn_start_offset >= 0 else None,
                    )
                    for s in p.active_producers
                ]
        return outcome

    def _partition_error(
        self,
        outcome: Outcome[TopicPartition, list[ProducerState]],
        node: Node | None,
        tp: TopicPartition,
        code: int,
        message: str | None,
    ) -> None:
        detail = f"describing the producers of {tp}" + (f": {message}" if message else "")
        if self._broker_id is not None and code in (
            NotLeaderOrFollowerError.code,
            UnknownTopicOrPartitionError.code,
        ):
            outcome.failed[tp] = error_for_code(code)(
                f"{detail}: broker {self._broker_id} holds no replica of it; name a broker that does, "
                "or none to ask the leader"
            )
            return
        error = error_for_code(code)(detail)
        if error.invalid_metadata:
            outcome.unmapped[tp] = error
        elif error.retriable:
            outcome.retry[tp] = error
        else:
            outcome.failed[tp] = error
