"""Where replicas live and lead: log directories, leader elections, partition reassignments.
[pure]

DescribeLogDirs goes to each broker named; ElectLeaders and the reassignment calls go to the
controller, as Java's ``Admin`` sends them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kaflux.admin.operation import AdminApi, Lookup, Outcome
from kaflux.errors import KafkaError, error_for_code
from kaflux.protocol.framing import RequestMessage
from kaflux.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ReassignablePartition,
    ReassignableTopic,
)
from kaflux.protocol.messages.describe_log_dirs import DescribeLogDirsRequest, DescribeLogDirsResponse
from kaflux.protocol.messages.elect_leaders import ElectLeadersRequest, ElectLeadersResponse, TopicPartitions
from kaflux.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    ListPartitionReassignmentsTopics,
)
from kaflux.structs import Node, TopicPartition

__all__ = [
    "AlterReassignmentsApi",
    "DescribeLogDirsApi",
    "ElectLeadersApi",
    "ListReassignmentsApi",
    "LogDirDescription",
    "PartitionReassignment",
    "ReplicaInfo",
]

ELECTION_TYPES = {"preferred": 0, "unclean": 1}


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    """A replica in a log directory: its size in bytes and how far it lags (a future replica
    is one being moved into this directory)."""

    size: int
    offset_lag: int
    is_future: bool


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    """One log directory of a broker: its replicas, and its total and usable bytes (-1: the
    broker does not say). ``error`` is set for a directory that is offline."""

    path: str
    error: KafkaError | None
    replicas: dict[TopicPartition, ReplicaInfo]
    total_bytes: int
    usable_bytes: int


@dataclass(frozen=True, slots=True)
class PartitionReassignment:
    """An ongoing reassignment: the replicas, and those being added and removed."""

    replicas: list[int]
    adding_replicas: list[int]
    removing_replicas: list[int]


def _fail(outcome: Outcome[Any, Any], key: Any, error: KafkaError) -> None:
    if error.invalid_metadata or error.retriable:
        outcome.retry[key] = error
    else:
        outcome.failed[key] = error


class DescribeLogDirsApi(AdminApi[int, dict[str, LogDirDescription]]):
    """DescribeLogDirs to each broker, for every partition."""

    lookup = Lookup.NODE

    def __init__(self, brokers: Sequence[int]) -> None:
        self._brokers = list(dict.fromkeys(brokers))

    def keys(self) -> list[int]:
        return self._brokers

    def describe(self, key: int) -> str:
        return f"broker {key}"

    def node_id(self, key: int) -> int | None:
        return key

    def build(self, node: Node | None, keys: list[int]) -> list[tuple[RequestMessage[Any], list[int]]]:
        return [(DescribeLogDirsRequest(topics=None), keys)]

    def handle(
        self, node: Node | None, keys: list[int], body: DescribeLogDirsResponse
    ) -> Outcome[int, dict[str, LogDirDescription]]:
        outcome: Outcome[int, dict[str, LogDirDescription]] = Outcome()
        for key in keys:
            if body.error_code:
                _fail(outcome, key, error_for_code(body.error_code)(f"DescribeLogDirs on broker {key}"))
                continue
            outcome.completed[key] = {
                d.log_dir: LogDirDescription(
                    path=d.log_dir,
                    error=error_for_code(d.error_code)(f"log dir {d.log_dir}") if d.error_code else None,
                    replicas={
                        TopicPartition(t.name, p.partition_index): ReplicaInfo(
                            p.partition_size, p.offset_lag, p.is_future_key
                        )
                        for t in d.topics
                        for p in t.partitions
                    },
                    total_bytes=d.total_bytes,
                    usable_bytes=d.usable_bytes,
                )
                for d in body.results
            }
        return outcome


def _partition_errors(
    topics: Iterable[tuple[str, Iterable[tuple[int, int, str | None]]]],
) -> dict[TopicPartition, KafkaError | None]:
    """Per partition, None or the error its ``(partition, error code, message)`` names."""
    results: dict[TopicPartition, KafkaError | None] = {}
    for topic, partitions in topics:
        for partition, code, message in partitions:
            tp = TopicPartition(topic, partition)
            results[tp] = error_for_code(code)(f"{tp}: {message or ''}".rstrip(": ")) if code else None
    return dict(sorted(results.items()))


def _by_topic(partitions: Sequence[TopicPartition]) -> dict[str, list[int]]:
    topics: dict[str, list[int]] = {}
    for tp in sorted(set(partitions)):
        topics.setdefault(tp.topic, []).append(tp.partition)
    return topics


class ElectLeadersApi(AdminApi[None, dict[TopicPartition, KafkaError | None]]):
    """ElectLeaders to the controller; the value is each partition's error (None: elected)."""

    lookup = Lookup.CONTROLLER

    def __init__(
        self, election_type: int, partitions: Sequence[TopicPartition] | None, timeout_ms: int
    ) -> None:
        self._type = election_type
        self._partitions = partitions
        self._timeout_ms = timeout_ms

    def keys(self) -> list[None]:
        return [None]

    def describe(self, key: None) -> str:
        return "the leader election"

    def build(self, node: Node | None, keys: list[None]) -> list[tuple[RequestMessage[Any], list[None]]]:
        topics = (
            None
            if self._partitions is None
            else [TopicPartitions(topic=t, partitions=ps) for t, ps in _by_topic(self._partitions).items()]
        )
        request = ElectLeadersRequest(
            election_type=self._type, topic_partitions=topics, timeout_ms=self._timeout_ms
        )
        return [(request, keys)]

    def handle(
        self, node: Node | None, keys: list[None], body: ElectLeadersResponse
    ) -> Outcome[None, dict[TopicPartition, KafkaError | None]]:
        outcome: Outcome[None, dict[TopicPartition, KafkaError | None]] = Outcome()
        if body.error_code:
            _fail(outcome, None, error_for_code(body.error_code)("electing leaders"))
            return outcome
        outcome.completed[None] = _partition_errors(
            (t.topic, ((p.partition_id, p.error_code, p.error_message) for p in t.partition_result))
            for t in body.replica_election_results
        )
        return outcome


class ListReassignmentsApi(AdminApi[None, dict[TopicPartition, PartitionReassignment]]):
    """ListPartitionReassignments to the controller."""

    lookup = Lookup.CONTROLLER

    def __init__(self, partitions: Sequence[TopicPartition] | None, timeout_ms: int) -> None:
        self._partitions = partitions
        self._timeout_ms = timeout_ms

    def keys(self) -> list[None]:
        return [None]

    def describe(self, key: None) -> str:
        return "the partition reassignments"

    def build(self, node: Node | None, keys: list[None]) -> list[tuple[RequestMessage[Any], list[None]]]:
        topics = (
            None
            if self._partitions is None
            else [
                ListPartitionReassignmentsTopics(name=t, partition_indexes=ps)
                for t, ps in _by_topic(self._partitions).items()
            ]
        )
        return [(ListPartitionReassignmentsRequest(timeout_ms=self._timeout_ms, topics=topics), keys)]

    def handle(
        self, node: Node | None, keys: list[None], body: ListPartitionReassignmentsResponse
    ) -> Outcome[None, dict[TopicPartition, PartitionReassignment]]:
        outcome: Outcome[None, dict[TopicPartition, PartitionReassignment]] = Outcome()
        if body.error_code:
            error = error_for_code(body.error_code)(body.error_message or "listing partition reassignments")
            _fail(outcome, None, error)
            return outcome
        outcome.completed[None] = {
            TopicPartition(t.name, p.partition_index): PartitionReassignment(
                list(p.replicas), list(p.adding_replicas), list(p.removing_replicas)
            )
            for t in body.topics
            for p in t.partitions
        }
        return outcome


class AlterReassignmentsApi(AdminApi[None, dict[TopicPartition, KafkaError | None]]):
    """AlterPartitionReassignments to the controller: new replica lists (None cancels an
    ongoing reassignment); the value is each partition's error (None: accepted)."""

    lookup = Lookup.CONTROLLER

    def __init__(self, reassignments: Mapping[TopicPartition, Sequence[int] | None], timeout_ms: int) -> None:
        self._reassignments = dict(reassignments)
        self._timeout_ms = timeout_ms

    def keys(self) -> list[None]:
        return [None]

    def describe(self, key: None) -> str:
        return "the partition reassignments"

    def build(self, node: Node | None, keys: list[None]) -> list[tuple[RequestMessage[Any], list[None]]]:
        topics: dict[str, list[ReassignablePartition]] = {}
        for tp, replicas in sorted(self._reassignments.items()):
            topics.setdefault(tp.topic, []).append(
                ReassignablePartition(
                    partition_index=tp.partition, replicas=None if replicas is None else list(replicas)
                )
            )
        request = AlterPartitionReassignmentsRequest(
            timeout_ms=self._timeout_ms,
            topics=[ReassignableTopic(name=t, partitions=ps) for t, ps in topics.items()],
        )
        return [(request, keys)]

    def handle(
        self, node: Node | None, keys: list[None], body: AlterPartitionReassignmentsResponse
    ) -> Outcome[None, dict[TopicPartition, KafkaError | None]]:
        outcome: Outcome[None, dict[TopicPartition, KafkaError | None]] = Outcome()
        if body.error_code:
            error = error_for_code(body.error_code)(body.error_message or "reassigning partitions")
            _fail(outcome, None, error)
            return outcome
        outcome.completed[None] = _partition_errors(
            (t.name, ((p.partition_index, p.error_code, p.error_message) for p in t.partitions))
            for t in body.responses
        )
        return outcome
