"""The admin client's partition requests: watermarks, new partitions, deleting records. [pure]

:class:`ListOffsetsApi` and :class:`DeleteRecordsApi` go to each partition's leader (a partition
whose leader moved is looked up again); :class:`CreatePartitionsApi` goes to the controller.
:func:`describe_cluster` and :func:`describe_topics` turn a Metadata answer (and the watermarks)
into the public results.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kaflux.admin.offsets import (
    EARLIEST,
    LATEST,
    MAX_TIMESTAMP,
    MAX_TIMESTAMP_MIN_VERSION,
    IsolationLevel,
    ListOffsetsResultInfo,
)
from kaflux.admin.operation import AdminApi, Lookup, Outcome
from kaflux.admin.results import ClusterDescription, PartitionDescription, TopicDescription
from kaflux.errors import (
    InvalidPartitionsError,
    KafkaError,
    NotControllerError,
    OffsetOutOfRangeError,
    ThrottlingQuotaExceededError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
    error_for_code,
)
from kaflux.network.metadata_manager import MetadataAnswer
from kaflux.protocol.framing import RequestMessage
from kaflux.protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
)
from kaflux.protocol.messages.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsTopic,
)
from kaflux.protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from kaflux.structs import Node, TopicPartition

__all__ = [
    "EARLIEST",
    "LATEST",
    "CreatePartitionsApi",
    "DeleteRecordsApi",
    "ListOffsetsApi",
    "describe_cluster",
    "describe_topics",
]

#: the first ListOffsets version with an isolation level
READ_COMMITTED_MIN_VERSION = 2

OffsetKey = tuple[TopicPartition, int]


def _by_topic(items: Iterable[tuple[TopicPartition, Any]]) -> dict[str, list[tuple[int, Any]]]:
    grouped: dict[str, list[tuple[int, Any]]] = {}
    for tp, value in sorted(items):
        grouped.setdefault(tp.topic, []).append((tp.partition, value))
    return grouped


def _partition_error(outcome: Outcome[Any, Any], key: Any, error: KafkaError) -> None:
    """A partition's error: look the leader up again if it moved, retry other retriable errors,
    fail the key otherwise."""
    if error.invalid_metadata:
        outcome.unmapped[key] = error
    elif error.retriable:
        outcome.retry[key] = error
    else:
        outcome.failed[key] = error


class ListOffsetsApi(AdminApi[OffsetKey, ListOffsetsResultInfo]):
    """ListOffsets to each leader; keys are ``(partition, timestamp)`` (:data:`EARLIEST`,
    :data:`LATEST`, :data:`MAX_TIMESTAMP` or a time in ms), values what was found (offset -1:
    none). Under ``read_committed`` LATEST is the last stable offset.

    A request names a partition once, so the keys of one partition go in requests of their own;
    MAX_TIMESTAMP keys too, as they need ListOffsets v7: a leader without it fails them unsent
    with UnsupportedVersionError, and only them.
    """

    lookup = Lookup.LEADER

    def __init__(
        self, keys: Iterable[OffsetKey], isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED
    ) -> None:
        self._keys = list(dict.fromkeys(keys))
        self._isolation = IsolationLevel(isolation_level)

    def keys(self) -> list[OffsetKey]:
        return self._keys

    def describe(self, key: OffsetKey) -> str:
        tp, timestamp = key
        if timestamp == MAX_TIMESTAMP:
            return f"the offset of the record with the highest timestamp in {tp}"
        names = {EARLIEST: "earliest", LATEST: "latest"}
        return f"the {names.get(timestamp, f'timestamp {timestamp}')} offset of {tp}"

    def partition(self, key: OffsetKey) -> TopicPartition:
        return key[0]

    def build(
        self, node: Node | None, keys: list[OffsetKey]
    ) -> list[tuple[RequestMessage[Any], list[OffsetKey]]]:
        # Requests by (needs v7, round): round n holds each partition's n-th key.
        batches: dict[tuple[bool, int], list[OffsetKey]] = {}
        rounds: dict[tuple[bool, TopicPartition], int] = {}
        for key in sorted(keys):
            kind = (key[1] == MAX_TIMESTAMP, key[0])
            n = rounds[kind] = rounds.get(kind, -1) + 1
            batches.setdefault((kind[0], n), []).append(key)
        requests: list[tuple[RequestMessage[Any], list[OffsetKey]]] = []
        for _, subset in sorted(batches.items()):
            topics = [
                ListOffsetsTopic(
                    name=topic,
                    partitions=[ListOffsetsPartition(partition_index=p, timestamp=ts) for p, ts in parts],
                )
                for topic, parts in _by_topic(subset).items()
            ]
            request = ListOffsetsRequest(replica_id=-1, isolation_level=int(self._isolation), topics=topics)
            requests.append((request, subset))
        return requests

    def min_version(self, request: RequestMessage[Any]) -> int | None:
        assert isinstance(request, ListOffsetsRequest)
        if any(p.timestamp == MAX_TIMESTAMP for t in request.topics for p in t.partitions):
            return MAX_TIMESTAMP_MIN_VERSION
        return READ_COMMITTED_MIN_VERSION if self._isolation else None

    def handle_error(
        self, node: Node | None, keys: list[OffsetKey], request: Any, error: KafkaError
    ) -> Outcome[OffsetKey, ListOffsetsResultInfo] | None:
        if not isinstance(error, UnsupportedVersionError):
            return None
        if any(ts == MAX_TIMESTAMP for _, ts in keys):
            need = "max_timestamp lookups (KIP-734) need ListOffsets v7 or later, which Kafka 3.0+ offers"
        elif self._isolation:
            need = "read_committed lookups need ListOffsets v2 or later"
        else:
            need = "the broker offers no ListOffsets version kaflux implements"
        return Outcome(
            failed={k: UnsupportedVersionError(f"{self.describe(k)}: {need}; {error}") for k in keys}
        )

    def handle(
        self, node: Node | None, keys: list[OffsetKey], body: ListOffsetsResponse
    ) -> Outcome[OffsetKey, ListOffsetsResultInfo]:
        timestamps = {tp: ts for tp, ts in keys}
        outcome: Outcome[OffsetKey, ListOffsetsResultInfo] = Outcome()
        for topic in body.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                if tp not in timestamps:
                    continue
                key = (tp, timestamps[tp])
                if p.error_code:
                    _partition_error(outcome, key, error_for_code(p.error_code)(self.describe(key)))
                    continue
                offset = p.old_style_offsets[0] if p.old_style_offsets else p.offset
                epoch = p.leader_epoch if p.leader_epoch >= 0 else None
                outcome.completed[key] = ListOffsetsResultInfo(offset, p.timestamp, epoch)
        return outcome


class DeleteRecordsApi(AdminApi[TopicPartition, int]):
    """DeleteRecords to each leader: keys are partitions, values their new low watermarks."""

    lookup = Lookup.LEADER

    def __init__(self, before_offsets: Mapping[TopicPartition, int], timeout_ms: int) -> None:
        self._before = dict(before_offsets)
        self._timeout_ms = timeout_ms

    def keys(self) -> list[TopicPartition]:
        return sorted(self._before)

    def describe(self, key: TopicPartition) -> str:
        return f"partition {key}"

    def build(
        self, node: Node | None, keys: list[TopicPartition]
    ) -> list[tuple[RequestMessage[Any], list[TopicPartition]]]:
        topics = [
            DeleteRecordsTopic(
                name=topic,
                partitions=[DeleteRecordsPartition(partition_index=p, offset=offset) for p, offset in parts],
            )
            for topic, parts in _by_topic((tp, self._before[tp]) for tp in keys).items()
        ]
        return [(DeleteRecordsRequest(topics=topics, timeout_ms=self._timeout_ms), keys)]

    def handle(
        self, node: Node | None, keys: list[TopicPartition], body: DeleteRecordsResponse
    ) -> Outcome[TopicPartition, int]:
        outcome: Outcome[TopicPartition, int] = Outcome()
        for topic in body.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                if p.error_code == OffsetOutOfRangeError.code:
                    outcome.failed[tp] = OffsetOutOfRangeError(
                        f"cannot delete the records of {tp} before offset {self._before.get(tp)}: it is "
                        "beyond the high watermark; pass an offset up to the high watermark (-1 means "
                        "the high watermark)"
                    )
                elif p.error_code:
                    _partition_error(outcome, tp, error_for_code(p.error_code)(f"deleting records of {tp}"))
                else:
                    outcome.completed[tp] = p.low_watermark
        return outcome


class CreatePartitionsApi(AdminApi[str, None]):
    """CreatePartitions to the controller: raise each topic's partition count to a new total."""

    lookup = Lookup.CONTROLLER

    def __init__(self, new_totals: Mapping[str, int], timeout_ms: int) -> None:
        self._totals = dict(new_totals)
        self._timeout_ms = timeout_ms

    def keys(self) -> list[str]:
        return sorted(self._totals)

    def describe(self, key: str) -> str:
        return f"topic {key!r}"

    def build(self, node: Node | None, keys: list[str]) -> list[tuple[RequestMessage[Any], list[str]]]:
        topics = [CreatePartitionsTopic(name=t, count=self._totals[t], assignments=None) for t in keys]
        return [(CreatePartitionsRequest(topics=topics, timeout_ms=self._timeout_ms), keys)]

    def handle(
        self, node: Node | None, keys: list[str], body: CreatePartitionsResponse
    ) -> Outcome[str, None]:
        outcome: Outcome[str, None] = Outcome()
        for result in body.results:
            topic = result.name
            if result.error_code == 0:
                outcome.completed[topic] = None
                continue
            detail = (
                f"topic {topic!r}: {result.error_message}" if result.error_message else f"topic {topic!r}"
            )
            if result.error_code == InvalidPartitionsError.code:
                detail += (
                    f" (asked for {self._totals.get(topic)} partitions in all: the new total must "
                    "exceed the current count)"
                )
            elif result.error_code == UnknownTopicOrPartitionError.code:
                detail += ": the topic does not exist; create it first, or check its name"
            error = error_for_code(result.error_code)(detail)
            if result.error_code == NotControllerError.code:
                outcome.unmapped[topic] = error  # sent again to the controller a metadata update names
            elif result.error_code == ThrottlingQuotaExceededError.code:
                outcome.retry[topic] = error
            else:
                outcome.failed[topic] = error  # as Java: an unknown topic is not waited for
        return outcome


def describe_cluster(answer: MetadataAnswer) -> ClusterDescription:
    """The cluster a Metadata answer describes."""
    nodes = [answer.brokers[n] for n in sorted(answer.brokers)]
    return ClusterDescription(answer.cluster_id, answer.brokers.get(answer.controller_id), nodes)


def describe_topics(
    answer: MetadataAnswer, names: list[str], watermarks: Mapping[OffsetKey, ListOffsetsResultInfo]
) -> dict[str, TopicDescription]:
    """The topics ``names`` as a Metadata answer describes them, with the watermarks found."""
    described: dict[str, TopicDescription] = {}
    for name in names:
        info = answer.topics[name]
        partitions = [
            PartitionDescription(
                p.partition,
                p.leader,
                list(p.replicas),
                list(p.isr),
                _offset(watermarks, TopicPartition(name, p.partition), EARLIEST),
                _offset(watermarks, TopicPartition(name, p.partition), LATEST),
            )
            for p in (info.partitions[i] for i in sorted(info.partitions))
        ]
        topic_id = info.topic_id if info.topic_id.int != 0 else None
        described[name] = TopicDescription(name, topic_id, info.is_internal, partitions)
    return described


def _offset(found: Mapping[OffsetKey, ListOffsetsResultInfo], tp: TopicPartition, timestamp: int) -> int:
    info = found.get((tp, timestamp))
    return -1 if info is None else info.offset
