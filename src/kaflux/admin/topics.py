"""The admin client's partition requests: watermarks, new partitions, deleting records. [pure]

:class:`ListOffsetsApi` and :class:`DeleteRecordsApi` go to each partition's leader (a partition
whose leader moved is looked up again); :class:`CreatePartitionsApi` goes to the controller.
:func:`describe_cluster` and :func:`describe_topics` turn a Metadata answer (and the watermarks)
into the public results.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kaflux.admin.operation import AdminApi, Lookup, Outcome
from kaflux.admin.results import ClusterDescription, PartitionDescription, TopicDescription
from kaflux.errors import (
    InvalidPartitionsError,
    KafkaError,
    NotControllerError,
    OffsetOutOfRangeError,
    ThrottlingQuotaExceededError,
    UnknownTopicOrPartitionError,
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

#: ListOffsets timestamps: the log start offset, and the high watermark
EARLIEST = -2
LATEST = -1

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


class ListOffsetsApi(AdminApi[OffsetKey, int]):
    """ListOffsets to each leader; keys are ``(partition, timestamp)`` (:data:`EARLIEST`,
    :data:`LATEST` or a time in ms), values the offsets (-1: none)."""

    lookup = Lookup.LEADER

    def __init__(self, keys: Iterable[OffsetKey]) -> None:
        self._keys = list(dict.fromkeys(keys))

    def keys(self) -> list[OffsetKey]:
        return self._keys

    def describe(self, key: OffsetKey) -> str:
        names = {EARLIEST: "earliest", LATEST: "latest"}
        return f"the {names.get(key[1], f'timestamp {key[1]}')} offset of {key[0]}"

    def partition(self, key: OffsetKey) -> TopicPartition:
        return key[0]

    def build(
        self, node: Node | None, keys: list[OffsetKey]
    ) -> list[tuple[RequestMessage[Any], list[OffsetKey]]]:
        # One request per timestamp: a partition may appear only once in a request.
        by_timestamp: dict[int, list[OffsetKey]] = {}
        for key in keys:
            by_timestamp.setdefault(key[1], []).append(key)
        requests: list[tuple[RequestMessage[Any], list[OffsetKey]]] = []
        for timestamp, subset in sorted(by_timestamp.items()):
            topics = [
                ListOffsetsTopic(
                    name=topic,
                    partitions=[
                        ListOffsetsPartition(partition_index=p, timestamp=timestamp) for p, _ in parts
                    ],
                )
                for topic, parts in _by_topic((tp, None) for tp, _ in subset).items()
            ]
            requests.append((ListOffsetsRequest(replica_id=-1, topics=topics), subset))
        return requests

    def handle(
        self, node: Node | None, keys: list[OffsetKey], body: ListOffsetsResponse
    ) -> Outcome[OffsetKey, int]:
        timestamps = {tp: ts for tp, ts in keys}
        outcome: Outcome[OffsetKey, int] = Outcome()
        for topic in body.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                if tp not in timestamps:
                    continue
                key = (tp, timestamps[tp])
                if p.error_code:
                    _partition_error(outcome, key, error_for_code(p.error_code)(self.describe(key)))
                else:
                    outcome.completed[key] = p.old_style_offsets[0] if p.old_style_offsets else p.offset
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
    answer: MetadataAnswer, names: list[str], watermarks: Mapping[OffsetKey, int]
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
                watermarks.get((TopicPartition(name, p.partition), EARLIEST), -1),
                watermarks.get((TopicPartition(name, p.partition), LATEST), -1),
            )
            for p in (info.partitions[i] for i in sorted(info.partitions))
        ]
        topic_id = info.topic_id if info.topic_id.int != 0 else None
        described[name] = TopicDescription(name, topic_id, info.is_internal, partitions)
    return described
