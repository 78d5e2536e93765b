"""``kaflux.AdminClient``: topics, partitions, consumer groups and their offsets, the cluster.
[app: public methods; the network thread owns all I/O]

Each call becomes an event on the network thread: an :class:`~kaflux.admin.request_manager.AdminCall`
(one request to the controller or any broker) or an :class:`~kaflux.admin.operation.AdminOperation`
(keys looked up and fanned out: groups to their coordinators, partitions to their leaders,
ListGroups to every broker). The :class:`~kaflux.admin.request_manager.AdminRequestManager` retries
retriable failures until the call's deadline and completes its future; this thread turns the
answer into results, or raises each broker error as its kaflux error class.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Hashable, Iterable, Mapping
from typing import Any, NamedTuple, TypeVar

from kaflux.admin.event_processor import AdminEventProcessor
from kaflux.admin.features import DescribeFeaturesApi, FeatureMetadata
from kaflux.admin.group_calls import ConsumerGroupCalls, partitions_of
from kaflux.admin.offsets import IsolationLevel, ListOffsetsResultInfo, OffsetSpec, offset_keys
from kaflux.admin.operation import AdminApi, AdminOperation, AdminResult, MetadataApi
from kaflux.admin.operations_calls import OperationsCalls
from kaflux.admin.request_manager import AdminCall, AdminRequestManager
from kaflux.admin.results import ClusterDescription, TopicDescription
from kaflux.admin.share_group_calls import ShareGroupCalls
from kaflux.admin.tokens_quotas import TokenQuotaCalls
from kaflux.admin.topics import (
    EARLIEST,
    LATEST,
    CreatePartitionsApi,
    DeleteRecordsApi,
    ListOffsetsApi,
    describe_cluster,
    describe_topics,
)
from kaflux.blocking import DoneWait, FutureWait, Steps, blocking
from kaflux.closeable import Closeable
from kaflux.config import AdminConfig
from kaflux.errors import (
    IllegalStateError,
    InvalidArgumentError,
    KafkaError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from kaflux.metrics.clients import NetworkMetrics
from kaflux.metrics.registry import MetricsRegistry
from kaflux.metrics.stats import MetricConfig
from kaflux.network.client_telemetry import ClientTelemetry
from kaflux.network.clock import monotonic_ms
from kaflux.network.factory import build_network
from kaflux.network.metadata_manager import MetadataAnswer
from kaflux.network.network_thread import NetworkThread
from kaflux.protocol.messages.create_topics import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from kaflux.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse, DeleteTopicState
from kaflux.structs import PartitionInfo, TopicPartition
from kaflux.timeouts import timeout_seconds
from kaflux.validation import check_topic

_client_ids = itertools.count(1)
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class NewTopic(NamedTuple):
    """A topic to create."""

    name: str
    num_partitions: int = 1
    replication_factor: int = 1
    config: Mapping[str, str] = {}


class AdminClient(ConsumerGroupCalls, ShareGroupCalls, TokenQuotaCalls, OperationsCalls, Closeable):
    """Administers topics, partitions, groups of every type (consumer and share groups and
    their offsets), configs, ACLs, SCRAM users, delegation tokens, client quotas, transactions
    and replicas, as Java's ``Admin``
    does (Pythonic names, the same semantics). Every call has a deadline: ``timeout`` seconds,
    or ``default.api.timeout.ms`` when None."""

    def __init__(self, config: Mapping[str, object]) -> None:
        """Validate ``config`` and start the network thread. Raises ConfigError."""
        self._config = AdminConfig.from_dict(config)
        client_id = self._config.client_id or f"admin-{next(_client_ids)}"
        network = build_network(self._config, client_id, allow_auto_create_topics=False)
        self._reachability = network.client.reachability
        manager = AdminRequestManager(network.cluster, network.metadata, network.retry_backoff)
        # The network thread's I/O metrics (Java's admin-client-metrics and, per broker,
        # admin-client-node-metrics), read there by the KIP-714 push (off by default, as in Java)
        network_metrics = MetricsRegistry(
            MetricConfig(self._config.metrics_num_samples, self._config.metrics_sample_window_ms)
        )
        network.client.enable_metrics(
            NetworkMetrics(network_metrics, "admin-client", network.client.connection_count)
        )
        self._telemetry = ClientTelemetry(
            self._config.enable_metrics_push, client_id, network_metrics.snapshot
        )
        self._thread = NetworkThread(
            f"kaflux-admin-network-{client_id}",
            network.delegate,
            # the metadata manager sends this one's lookups at once
            [manager, network.metadata, *self._telemetry.managers],
            AdminEventProcessor(manager),
        )
        self._closed = False
        self._thread.start()

    def _call(self, what: str, request: Any, timeout: float) -> Steps[Any]:
        """Run one call on the network thread and wait for its answer (retried until then)."""
        if self._closed:
            raise IllegalStateError("the admin client is closed")
        call = AdminCall(what, monotonic_ms() + int(timeout * 1000), request)
        self._thread.submit(call)
        return (yield FutureWait(call.future, timeout + 1.0, what, self._reachability.unreachable))

    def _timeout(self, timeout: float | None) -> float:
        return timeout_seconds(timeout, self._config.default_api_timeout_ms / 1000)

    def _deadline_ms(self, timeout: float | None) -> tuple[float, int]:
        """``timeout`` in seconds (checked; the default when None) and the deadline it sets."""
        seconds = self._timeout(timeout)
        return seconds, monotonic_ms() + int(seconds * 1000)

    def _run(self, what: str, api: AdminApi[K, V], deadline_ms: int) -> Steps[AdminResult[K, V]]:
        """Run one operation on the network thread and wait for its result (each key retried
        until ``deadline_ms``)."""
        if self._closed:
            raise IllegalStateError("the admin client is closed")
        operation = AdminOperation(what, deadline_ms, api)
        self._thread.submit(operation)
        timeout_s = max(0.0, (deadline_ms - monotonic_ms()) / 1000) + 1.0
        result: AdminResult[K, V] = yield FutureWait(
            operation.future, timeout_s, what, self._reachability.unreachable
        )
        return result

    @blocking
    def create_topics(
        self, topics: Iterable[NewTopic | str], *, timeout: float | None = None, exist_ok: bool = False
    ) -> Steps[None]:
        """Create topics and wait until the controller confirms.

        Raises:
            TopicAlreadyExistsError: a topic exists (unless ``exist_ok``).
            InvalidTopicError: a name Kafka refuses (empty, illegal characters...), before any
                request; TypeError: an element is neither a NewTopic nor a str.
            BrokerError: the broker refused (the first error, naming the topic).
            KafkaTimeoutError: no answer within ``timeout`` seconds.
        """
        wanted = [NewTopic(t) if isinstance(t, str) else t for t in topics]
        for t in wanted:
            if not isinstance(t, NewTopic):
                raise TypeError(f"create_topics() takes NewTopic values or names, got {type(t).__name__}")
            check_topic(t.name, "create_topics(): topic")
        seconds = self._timeout(timeout)
        request = CreateTopicsRequest(
            topics=[
                CreatableTopic(
                    name=t.name,
                    num_partitions=t.num_partitions,
                    replication_factor=t.replication_factor,
                    configs=[CreatableTopicConfig(name=k, value=v) for k, v in sorted(t.config.items())],
                )
                for t in wanted
            ],
            timeout_ms=int(seconds * 1000),
        )
        response: CreateTopicsResponse = yield from self._call("create_topics()", request, seconds)
        for result in response.topics:
            if result.error_code == 0:
                continue
            error = error_for_code(result.error_code)(
                f"topic {result.name!r}: {result.error_message or ''}".strip()
            )
            if isinstance(error, TopicAlreadyExistsError):
                if exist_ok:
                    continue
                error = TopicAlreadyExistsError(
                    f"{error.detail}. If a connection was lost during this call, its earlier attempt "
                    "may have created it (the broker's answer was lost); exist_ok=True accepts a topic "
                    "that exists"
                )
            raise error

    @blocking
    def delete_topics(
        self, names: Iterable[str], *, timeout: float | None = None, missing_ok: bool = False
    ) -> Steps[None]:
        """Delete topics.

        Raises:
            UnknownTopicOrPartitionError: a topic does not exist (unless ``missing_ok``).
            KafkaTimeoutError: no answer within ``timeout`` seconds.
        """
        seconds = self._timeout(timeout)
        wanted = list(dict.fromkeys(names))
        # v0-5 name topics in topic_names, v6+ in topics; the negotiated version uses one.
        request = DeleteTopicsRequest(
            topics=[DeleteTopicState(name=name) for name in wanted],
            topic_names=wanted,
            timeout_ms=int(seconds * 1000),
        )
        response: DeleteTopicsResponse = yield from self._call("delete_topics()", request, seconds)
        unanswered = set(wanted) - {r.name for r in response.responses}
        if unanswered:
            raise KafkaError(
                f"the broker did not answer for topics {sorted(unanswered)}; they may not be deleted"
            )
        for result in response.responses:
            if result.error_code == 0:
                continue
            error = error_for_code(result.error_code)(f"topic {result.name!r}")
            if missing_ok and isinstance(error, UnknownTopicOrPartitionError):
                continue
            raise error

    @blocking
    def list_topics(
        self, *, timeout: float | None = None, include_internal: bool = False
    ) -> Steps[dict[str, list[PartitionInfo]]]:
        """All topics with their partitions, sorted by partition."""
        seconds = self._timeout(timeout)
        answer: MetadataAnswer = yield from self._call("list_topics()", None, seconds)
        return {
            name: [info.partitions[p] for p in sorted(info.partitions)]
            for name, info in sorted(answer.topics.items())
            if include_internal or not info.is_internal
        }

    @blocking
    def describe_cluster(self, timeout: float | None = None) -> Steps[ClusterDescription]:
        """The cluster id, the controller and every broker, from a Metadata request.

        Raises:
            KafkaTimeoutError: no broker answered in time.
        """
        _, deadline = self._deadline_ms(timeout)
        answer = (yield from self._run("describe_cluster()", MetadataApi([]), deadline)).values()[None]
        return describe_cluster(answer)

    @blocking
    def describe_features(self, timeout: float | None = None) -> Steps[FeatureMetadata]:
        """The cluster's feature flags (KIP-584), as Java's ``Admin.describeFeatures``: the
        features a broker supports, and those the cluster finalized with their epoch, from an
        ApiVersions request (v3+) to any broker. A broker with an older ApiVersions reports
        none (empty maps, epoch None).

        Raises:
            BrokerError: the broker refused.
            KafkaTimeoutError: no broker answered in time.
        """
        _, deadline = self._deadline_ms(timeout)
        found = (yield from self._run("describe_features()", DescribeFeaturesApi(), deadline)).values()
        return found[None]

    @blocking
    def describe_topics(
        self, topics: Iterable[str], timeout: float | None = None
    ) -> Steps[dict[str, TopicDescription]]:
        """Describe topics: id, partitions with leader, replicas, in-sync replicas and
        watermarks (ListOffsets EARLIEST and LATEST to each leader).

        Raises:
            UnknownTopicOrPartitionError: a topic does not exist.
            BrokerError: a broker refused (e.g. ``TopicAuthorizationFailedError``).
            KafkaTimeoutError: not answered in time.
        """
        if isinstance(topics, (str, bytes)):
            raise InvalidArgumentError("describe_topics() takes an iterable of topic names, not one string")
        names = list(dict.fromkeys(topics))
        if not names:
            return {}
        _, deadline = self._deadline_ms(timeout)
        answer = (yield from self._run("describe_topics()", MetadataApi(names), deadline)).values()[None]
        for name in names:
            code = answer.topic_errors.get(name)
            if code == UnknownTopicOrPartitionError.code or (code is None and name not in answer.topics):
                raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist: check its name")
            if code is not None:
                raise error_for_code(code)(f"topic {name!r}")
        keys = [
            (TopicPartition(name, p), timestamp)
            for name in names
            for p in sorted(answer.topics[name].partitions)
            for timestamp in (EARLIEST, LATEST)
        ]
        watermarks = (yield from self._run("describe_topics()", ListOffsetsApi(keys), deadline)).values()
        return describe_topics(answer, names, watermarks)

    @blocking
    def list_offsets(
        self,
        specs: Mapping[TopicPartition, OffsetSpec],
        *,
        isolation_level: IsolationLevel | str = IsolationLevel.READ_UNCOMMITTED,
        timeout: float | None = None,
    ) -> Steps[dict[TopicPartition, ListOffsetsResultInfo]]:
        """Look up offsets of partitions (ListOffsets to each partition's leader), as Java's
        ``Admin.listOffsets``: per partition the :class:`~kaflux.admin.offsets.OffsetSpec`
        asked for (earliest, latest, max_timestamp, or the first offset at or after a time).
        Returns each partition's :class:`~kaflux.admin.offsets.ListOffsetsResultInfo` (offset,
        timestamp, leader epoch; offset -1 when no record matches), sorted by partition.

        Under ``isolation_level="read_committed"`` latest is the last stable offset (before
        the first open transaction). A leader that moved, or not yet knowing a new topic, is
        looked up again until ``timeout``.

        Raises:
            InvalidArgumentError: not a mapping, an empty one, a key that is not a
                TopicPartition, a value that is not an OffsetSpec, or an unknown isolation level.
            UnknownTopicOrPartitionError: a topic or partition does not exist.
            UnsupportedVersionError: ``max_timestamp`` asked of a leader without ListOffsets v7
                (Kafka before 3.0).
            BrokerError: a leader refused (e.g. ``TopicAuthorizationFailedError``).
            KafkaTimeoutError: not answered in time (naming the last error seen).
        """
        what = "list_offsets()"
        keys = offset_keys(specs, what)
        isolation = IsolationLevel.parse(isolation_level)
        _, deadline = self._deadline_ms(timeout)
        found = (yield from self._run(what, ListOffsetsApi(keys, isolation), deadline)).values()
        return {tp: found[(tp, ts)] for tp, ts in sorted(keys)}

    @blocking
    def create_partitions(self, new_totals: Mapping[str, int], timeout: float | None = None) -> Steps[None]:
        """Raise the partition count of topics to new totals (CreatePartitions to the
        controller); existing partitions keep their data and leaders.

        Raises:
            InvalidArgumentError: a count is not a positive int.
            InvalidPartitionsError: a new total does not exceed the topic's current count.
            UnknownTopicOrPartitionError: a topic does not exist.
            UnsupportedVersionError: the broker does not offer CreatePartitions.
            KafkaTimeoutError: not answered in time.
        """
        for topic, count in new_totals.items():
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise InvalidArgumentError(
                    f"create_partitions(): the total for {topic!r} must be an int >= 1"
                )
        if not new_totals:
            return
        seconds, deadline = self._deadline_ms(timeout)
        api = CreatePartitionsApi(new_totals, int(seconds * 1000))
        (yield from self._run("create_partitions()", api, deadline)).values()

    @blocking
    def delete_records(
        self, before_offsets: Mapping[TopicPartition, int], timeout: float | None = None
    ) -> Steps[dict[TopicPartition, int]]:
        """Delete the records of each partition before an offset (-1: the high watermark, so
        all of them), with DeleteRecords to each leader. Returns each partition's new low
        watermark.

        Raises:
            InvalidArgumentError: an offset is below -1.
            OffsetOutOfRangeError: an offset is beyond the partition's high watermark.
            UnknownTopicOrPartitionError: a topic or partition does not exist.
            KafkaTimeoutError: not answered in time.
        """
        what = "delete_records()"
        before: dict[TopicPartition, int] = {}
        for tp, offset in zip(partitions_of(before_offsets, what), before_offsets.values(), strict=True):
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < -1:
                raise InvalidArgumentError(
                    f"{what}: the offset for {tp} must be an int >= -1, got {offset!r}"
                )
            before[tp] = offset
        if not before:
            return {}
        seconds, deadline = self._deadline_ms(timeout)
        api = DeleteRecordsApi(before, int(seconds * 1000))
        low_watermarks = (yield from self._run(what, api, deadline)).values()
        return dict(sorted(low_watermarks.items()))

    @blocking
    def client_instance_id(self, timeout: float) -> Steps[uuid.UUID | None]:
        """The client instance id the brokers gave this admin client for its metrics push
        (KIP-714, Java's ``clientInstanceId(Duration)``), waiting at most ``timeout`` seconds
        for the first telemetry subscription; None if none came in time or the brokers have no
        client-telemetry APIs.

        Raises:
            IllegalStateError: ``enable.metrics.push`` is false (the admin client's default, as
                in Java), or the admin client is closed.
        """
        if self._closed:
            raise IllegalStateError("the admin client is closed")
        return (yield from self._telemetry.client_instance_id(timeout))

    @blocking
    def close(self, timeout: float = 5.0) -> Steps[None]:
        """Stop the network thread. Idempotent."""
        seconds = timeout_seconds(timeout, 5.0)
        if not self._closed:
            self._closed = True
            yield DoneWait(self._thread.request_close(seconds), seconds + 1.0)
