"""The sensors of kaflux's clients, with Java's group and metric names. [pure: takes now_ms]

Each class is the set of sensors one part of a client records into, on one thread, into that
thread's :class:`~kaflux.metrics.registry.MetricsRegistry`:

* application thread of the consumer: :class:`PollMetrics` (``consumer-metrics``: the time
  between ``poll()`` calls and how much of it poll() was idle;
  ``consumer-fetch-manager-metrics``: records and bytes returned by poll(), lag);
* network thread of the consumer: :class:`FetchMetrics` (Fetch requests),
  :class:`CoordinatorMetrics` (``consumer-coordinator-metrics``: commits, rebalances,
  heartbeats), :class:`NetworkMetrics` (bytes and requests per client and per broker);
* network thread of the producer: :class:`ProducerMetrics` (``producer-metrics`` and
  ``producer-topic-metrics``) and :class:`NetworkMetrics`;
* network thread of the share consumer: :class:`ShareMetrics`
  (``consumer-share-fetch-manager-metrics`` and ``consumer-share-coordinator-metrics``) and
  :class:`NetworkMetrics` (as ``consumer``, the group prefix Java's share consumer uses);
* network thread of the admin client: :class:`NetworkMetrics` (as ``admin-client``), read only
  by the KIP-714 push.

Where kaflux measures something differently from Java, the class says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from kaflux.metrics.registry import MetricsRegistry, Sensor, tagged_group

if TYPE_CHECKING:
    from kaflux.structs import TopicPartition

CONSUMER_METRICS = "consumer-metrics"
FETCH_MANAGER_METRICS = "consumer-fetch-manager-metrics"
COORDINATOR_METRICS = "consumer-coordinator-metrics"
PRODUCER_METRICS = "producer-metrics"
PRODUCER_TOPIC_METRICS = "producer-topic-metrics"
SHARE_FETCH_MANAGER_METRICS = "consumer-share-fetch-manager-metrics"
SHARE_COORDINATOR_METRICS = "consumer-share-coordinator-metrics"
#: kaflux's own counters (no Java equivalent)
KAFLUX_CONSUMER_METRICS = "kaflux-consumer-metrics"
KAFLUX_PRODUCER_METRICS = "kaflux-producer-metrics"


def node_group(client: str, node_id: int) -> str:
    """``<client>-node-metrics,node-id=node-<id>`` (``client``: consumer, producer or admin-client)."""
    return tagged_group(f"{client}-node-metrics", [("node-id", f"node-{node_id}")])


def partition_group(tp: TopicPartition) -> str:
    """``consumer-fetch-manager-metrics,topic=<topic>,partition=<p>``; as in Java, dots in
    the topic name become underscores."""
    return tagged_group(
        FETCH_MANAGER_METRICS, [("topic", tp.topic.replace(".", "_")), ("partition", tp.partition)]
    )


def producer_topic_group(topic: str) -> str:
    """``producer-topic-metrics,topic=<topic>`` (the name as it is, as in Java)."""
    return tagged_group(PRODUCER_TOPIC_METRICS, [("topic", topic)])


def _seconds_ago(then_ms: float, now_ms: int) -> float:
    """Whole seconds since ``then_ms`` (Java truncates), -1 if it never happened."""
    return -1.0 if then_ms < 0 else float(int(now_ms - then_ms) // 1000)


# -- consumer, application thread ----------------------------------------------------------------


class PollMetrics:
    """The consumer's application-thread metrics, recorded once per ``poll()`` (when it ends,
    under one lock acquisition), never per record.

    ``consumer-metrics`` (Java's ``KafkaConsumerMetrics``): time-between-poll-avg / -max (ms
    from the start of one poll to the start of the next), poll-idle-ratio-avg (the share of the
    time from the end of one poll to the end of the next spent inside poll),
    last-poll-seconds-ago (-1 before the first poll). Times are fractional milliseconds: at a
    high record rate both the time in poll() and the time between polls are often under a
    millisecond, where Java's whole milliseconds give 0/0 (a NaN poll-idle-ratio, which
    kaflux does not record).

    ``consumer-fetch-manager-metrics`` of what poll() returned:

    * records-consumed-rate / -total: records returned by poll() and poll_arrow();
    * bytes-consumed-rate / -total: the size of the fetched record data (record batches as
      they came over the wire: batch headers included, compressed when compressed) of each
      partition's part of a Fetch response, counted when poll() first returns records from
      it. Java counts the returned records' own sizes (uncompressed, without batch headers);
    * records-lag-max (the largest lag recorded in the window) and, per partition in
      ``consumer-fetch-manager-metrics,topic=<t>,partition=<p>``, records-lag (the last),
      records-lag-max and records-lag-avg: the high watermark (the last stable offset under
      read_committed) minus the position, after poll() took the partition's records. The
      per-partition metrics go when the partition leaves the assignment.
    """

    def __init__(self, registry: MetricsRegistry) -> None:
        self._registry = registry
        self._between = (
            registry.sensor("time-between-poll")
            .add_avg(CONSUMER_METRICS, "time-between-poll-avg")
            .add_max(CONSUMER_METRICS, "time-between-poll-max")
        )
        self._idle = registry.sensor("poll-idle-ratio-avg").add_avg(CONSUMER_METRICS, "poll-idle-ratio-avg")
        registry.add_gauge(CONSUMER_METRICS, "last-poll-seconds-ago", self._last_poll_seconds_ago)
        self._records = registry.sensor("records-consumed").add_meter(
            FETCH_MANAGER_METRICS, "records-consumed-rate", "records-consumed-total"
        )
        self._bytes = registry.sensor("bytes-consumed").add_meter(
            FETCH_MANAGER_METRICS, "bytes-consumed-rate", "bytes-consumed-total"
        )
        self._lag = registry.sensor("records-lag").add_max(FETCH_MANAGER_METRICS, "records-lag-max")
        self._partition_lag: dict[TopicPartition, Sensor] = {}
        self._last_poll_ms = -1.0
        self._poll_start_ms = 0.0
        self._since_last_ms = 0.0

    def poll_started(self, now_ms: float) -> None:
        self._since_last_ms = now_ms - self._last_poll_ms if self._last_poll_ms >= 0 else 0.0
        self._poll_start_ms = now_ms
        self._last_poll_ms = now_ms

    def poll_ended(
        self, now_ms: float, records: int = 0, size: int = 0, lags: Mapping[TopicPartition, int] | None = None
    ) -> None:
        """The poll that started last ended at ``now_ms``, returning ``records`` records;
        ``size`` bytes of fetches it started reading, ``lags`` the lag of each partition it
        returned records of."""
        if lags:
            for tp in lags:
                if tp not in self._partition_lag:
                    self._add_partition(tp)
        in_poll = now_ms - self._poll_start_ms
        total = in_poll + self._since_last_ms
        sample_ms = int(now_ms)
        with self._registry.guard():
            self._between.record_held(self._since_last_ms, sample_ms)
            if total > 0:
                self._idle.record_held(in_poll / total, sample_ms)
            if records:
                self._records.record_held(records, sample_ms)
            if size:
                self._bytes.record_held(size, sample_ms)
            if lags:
                self._lag.record_held(max(lags.values()), sample_ms)  # the window's max is the same
                for tp, lag in lags.items():
                    self._partition_lag[tp].record_held(lag, sample_ms)

    def _add_partition(self, tp: TopicPartition) -> None:
        group = partition_group(tp)
        self._partition_lag[tp] = (
            self._registry.sensor(self._lag_sensor_name(tp))
            .add_value(group, "records-lag")
            .add_max(group, "records-lag-max")
            .add_avg(group, "records-lag-avg")
        )

    def retain_partitions(self, assigned: Iterable[TopicPartition]) -> None:
        """Drop the per-partition metrics of partitions no longer assigned."""
        keep = set(assigned)
        for tp in [tp for tp in self._partition_lag if tp not in keep]:
            del self._partition_lag[tp]
            self._registry.remove_sensor(self._lag_sensor_name(tp))

    @staticmethod
    def _lag_sensor_name(tp: TopicPartition) -> str:
        return f"{tp.topic}-{tp.partition}.records-lag"

    def _last_poll_seconds_ago(self, now_ms: int) -> float:
        return _seconds_ago(self._last_poll_ms, now_ms)


# -- consumer, network thread ----------------------------------------------------------------------


class FetchMetrics:
    """``consumer-fetch-manager-metrics`` of Fetch requests, recorded per answered Fetch:
    fetch-latency-avg / -max (ms), fetch-rate / fetch-total, fetch-size-avg / -max (bytes of
    record data in the response), records-per-request-avg (records in the response's record
    batches, control batches and records before the fetch offset left out: read from the batch
    headers, where Java counts what the application then consumes of it), and
    fetch-throttle-time-avg / -max."""

    def __init__(self, registry: MetricsRegistry) -> None:
        group = FETCH_MANAGER_METRICS
        self._latency = (
            registry.sensor("fetch-latency")
            .add_avg(group, "fetch-latency-avg")
            .add_max(group, "fetch-latency-max")
            .add_meter(group, "fetch-rate", "fetch-total", count=True)
        )
        self._size = (
            registry.sensor("bytes-fetched").add_avg(group, "fetch-size-avg").add_max(group, "fetch-size-max")
        )
        self._records = registry.sensor("records-fetched").add_avg(group, "records-per-request-avg")
        self._throttle = (
            registry.sensor("fetch-throttle-time")
            .add_avg(group, "fetch-throttle-time-avg")
            .add_max(group, "fetch-throttle-time-max")
        )

    def fetch_answered(self, latency_ms: int, size: int, records: int, throttle_ms: int, now_ms: int) -> None:
        self._latency.record(latency_ms, now_ms)
        self._size.record(size, now_ms)
        self._records.record(records, now_ms)
        self._throttle.record(throttle_ms, now_ms)


class ShareMetrics:
    """A share consumer's network thread, as Kafka's metrics go: each count a windowed
    per-second ``-rate`` beside its cumulative ``-total``.

    ``consumer-share-fetch-manager-metrics``: fetch-rate / fetch-total (ShareFetch requests
    sent), fetch-latency-avg / -max (ms, sent to answered), records-consumed-rate / -total
    (records acquired), bytes-consumed-rate / -total (record data received),
    acknowledgements-send-rate / -total (acknowledgements sent in ShareFetch and
    ShareAcknowledge requests), acknowledgements-error-rate / -total (those that failed).
    ``consumer-share-coordinator-metrics``: heartbeat-rate / heartbeat-total (ShareGroupHeartbeat
    requests sent)."""

    def __init__(self, registry: MetricsRegistry) -> None:
        group = SHARE_FETCH_MANAGER_METRICS
        self._fetches = registry.sensor("share-fetches").add_meter(
            group, "fetch-rate", "fetch-total", count=True
        )
        self._latency = (
            registry.sensor("share-fetch-latency")
            .add_avg(group, "fetch-latency-avg")
            .add_max(group, "fetch-latency-max")
        )
        self._records = registry.sensor("share-records").add_meter(
            group, "records-consumed-rate", "records-consumed-total"
        )
        self._bytes = registry.sensor("share-bytes").add_meter(
            group, "bytes-consumed-rate", "bytes-consumed-total"
        )
        self._acks = registry.sensor("share-acks").add_meter(
            group, "acknowledgements-send-rate", "acknowledgements-send-total"
        )
        self._ack_errors = registry.sensor("share-ack-errors").add_meter(
            group, "acknowledgements-error-rate", "acknowledgements-error-total"
        )
        self._heartbeats = registry.sensor("share-heartbeats").add_meter(
            SHARE_COORDINATOR_METRICS, "heartbeat-rate", "heartbeat-total", count=True
        )

    def fetch_sent(self, acknowledgements: int, now_ms: int) -> None:
        self._fetches.record(1, now_ms)
        self._acks.record(acknowledgements, now_ms)

    def acknowledge_sent(self, acknowledgements: int, now_ms: int) -> None:
        self._acks.record(acknowledgements, now_ms)

    def fetch_answered(self, latency_ms: int, records: int, size: int, now_ms: int) -> None:
        self._latency.record(latency_ms, now_ms)
        self._records.record(records, now_ms)
        self._bytes.record(size, now_ms)

    def acknowledgements_failed(self, count: int, now_ms: int) -> None:
        self._ack_errors.record(count, now_ms)

    def heartbeat_sent(self, now_ms: int) -> None:
        self._heartbeats.record(1, now_ms)


class CoordinatorMetrics:
    """``consumer-coordinator-metrics`` (Java's offset-commit, rebalance and heartbeat metrics
    managers, and the coordinator's assigned-partitions):

    * commit-latency-avg / -max (ms, per OffsetCommit answered), commit-rate / commit-total;
    * rebalance-latency-avg / -max / -total (ms), rebalance-total, rebalance-rate-per-hour,
      failed-rebalance-total, failed-rebalance-rate-per-hour, last-rebalance-seconds-ago;
    * heartbeat-response-time-max (ms), heartbeat-rate / heartbeat-total,
      last-heartbeat-seconds-ago (since the last heartbeat was sent; -1 before the first);
    * assigned-partitions.

    Membership code records rebalances from state changes that do not all carry a time, so
    the network thread's components :meth:`tick` the time they see (events, polls, responses)
    and rebalances are timed at the last tick.
    """

    def __init__(
        self, registry: MetricsRegistry, assigned_partitions: Callable[[], int] | None = None
    ) -> None:
        group = COORDINATOR_METRICS
        self._commit = (
            registry.sensor("commit-latency")
            .add_avg(group, "commit-latency-avg")
            .add_max(group, "commit-latency-max")
            .add_meter(group, "commit-rate", "commit-total", count=True)
        )
        self._rebalance = (
            registry.sensor("rebalance-latency")
            .add_avg(group, "rebalance-latency-avg")
            .add_max(group, "rebalance-latency-max")
            .add_total(group, "rebalance-latency-total")
            .add_count(group, "rebalance-total")
            .add_hourly_count_rate(group, "rebalance-rate-per-hour")
        )
        self._failed = (
            registry.sensor("failed-rebalance")
            .add_count(group, "failed-rebalance-total")
            .add_hourly_count_rate(group, "failed-rebalance-rate-per-hour")
        )
        self._heartbeat = (
            registry.sensor("heartbeat-latency")
            .add_max(group, "heartbeat-response-time-max")
            .add_meter(group, "heartbeat-rate", "heartbeat-total", count=True)
        )
        registry.add_gauge(group, "last-heartbeat-seconds-ago", self._last_heartbeat_seconds_ago)
        registry.add_gauge(group, "last-rebalance-seconds-ago", self._last_rebalance_seconds_ago)
        if assigned_partitions is not None:
            registry.add_gauge(group, "assigned-partitions", lambda now_ms: float(assigned_partitions()))
        #: the latest time a component of the network thread saw
        self.now_ms = 0
        self._last_heartbeat_ms = -1
        self._rebalance_start_ms = -1
        self._last_rebalance_end_ms = -1

    def tick(self, now_ms: int) -> None:
        """The time is now ``now_ms`` (it never goes back)."""
        if now_ms > self.now_ms:
            self.now_ms = now_ms

    def commit_answered(self, latency_ms: int, now_ms: int) -> None:
        self.tick(now_ms)
        self._commit.record(latency_ms, now_ms)

    def heartbeat_sent(self, now_ms: int) -> None:
        self.tick(now_ms)
        self._last_heartbeat_ms = now_ms

    def heartbeat_answered(self, latency_ms: int, now_ms: int) -> None:
        self.tick(now_ms)
        self._heartbeat.record(latency_ms, now_ms)

    @property
    def rebalancing(self) -> bool:
        return self._rebalance_start_ms >= 0

    def rebalance_started(self) -> None:
        if self._rebalance_start_ms < 0:
            self._rebalance_start_ms = self.now_ms

    def rebalance_ended(self) -> None:
        if self._rebalance_start_ms < 0:
            return
        now = self.now_ms
        self._rebalance.record(now - self._rebalance_start_ms, now)
        self._rebalance_start_ms = -1
        self._last_rebalance_end_ms = now

    def rebalance_failed(self) -> None:
        if self._rebalance_start_ms < 0:
            return
        self._failed.record(1.0, self.now_ms)
        self._rebalance_start_ms = -1

    def rebalance_abandoned(self) -> None:
        """The member left the group during a rebalance: it neither completed nor failed."""
        self._rebalance_start_ms = -1

    def _last_heartbeat_seconds_ago(self, now_ms: int) -> float:
        return _seconds_ago(self._last_heartbeat_ms, now_ms)

    def _last_rebalance_seconds_ago(self, now_ms: int) -> float:
        return _seconds_ago(self._last_rebalance_end_ms, now_ms)


# -- both clients, network thread ---------------------------------------------------------------------


class _NodeSensors:
    __slots__ = ("received", "requests", "responses", "sent")

    def __init__(self, sent: Sensor, received: Sensor, requests: Sensor, responses: Sensor) -> None:
        self.sent = sent
        self.received = received
        self.requests = requests
        self.responses = responses


class NetworkMetrics:
    """Network I/O of one client (Java's ``Selector`` metrics), in ``<client>-metrics`` and per
    broker in ``<client>-node-metrics,node-id=node-<id>``: outgoing-byte-rate / -total,
    incoming-byte-rate / -total (the Kafka protocol's bytes written to and read from the
    connections, handshakes included, before TLS; recorded per send and per I/O event),
    request-rate / -total, response-rate / -total
    and, per broker, request-latency-avg / -max (ms from sending a request to reading its
    response, for every request: Java's consumer times only its Fetch requests here, its
    producer only Produce requests); connection-count for the client."""

    def __init__(
        self, registry: MetricsRegistry, client: str, connection_count: Callable[[], int] | None = None
    ) -> None:
        self._registry = registry
        self._client = client
        group = self._group = f"{client}-metrics"
        self._sent = registry.sensor("bytes-sent").add_meter(
            group, "outgoing-byte-rate", "outgoing-byte-total"
        )
        self._received = registry.sensor("bytes-received").add_meter(
            group, "incoming-byte-rate", "incoming-byte-total"
        )
        self._requests = registry.sensor("requests-sent").add_meter(
            group, "request-rate", "request-total", count=True
        )
        self._responses = registry.sensor("responses-received").add_meter(
            group, "response-rate", "response-total", count=True
        )
        if connection_count is not None:
            registry.add_gauge(group, "connection-count", lambda now_ms: float(connection_count()))
        self._nodes: dict[int, _NodeSensors] = {}
        self._latency: dict[int, Sensor] = {}

    def _node(self, node_id: int) -> _NodeSensors:
        sensors = self._nodes.get(node_id)
        if sensors is None:
            registry = self._registry
            group = node_group(self._client, node_id)
            prefix = f"node-{node_id}"
            sensors = self._nodes[node_id] = _NodeSensors(
                registry.sensor(f"{prefix}.bytes-sent").add_meter(
                    group, "outgoing-byte-rate", "outgoing-byte-total"
                ),
                registry.sensor(f"{prefix}.bytes-received").add_meter(
                    group, "incoming-byte-rate", "incoming-byte-total"
                ),
                registry.sensor(f"{prefix}.requests-sent").add_meter(
                    group, "request-rate", "request-total", count=True
                ),
                registry.sensor(f"{prefix}.responses-received")
                .add_meter(group, "response-rate", "response-total", count=True)
                .add_avg(group, "request-latency-avg")
                .add_max(group, "request-latency-max"),
            )
        return sensors

    def bytes_sent(self, node_id: int, size: int, now_ms: int) -> None:
        self._sent.record(size, now_ms)
        self._node(node_id).sent.record(size, now_ms)

    def bytes_received(self, node_id: int, size: int, now_ms: int) -> None:
        self._received.record(size, now_ms)
        self._node(node_id).received.record(size, now_ms)

    def request_sent(self, node_id: int, now_ms: int) -> None:
        self._requests.record(1.0, now_ms)
        self._node(node_id).requests.record(1.0, now_ms)

    def response_received(self, node_id: int, latency_ms: int, now_ms: int) -> None:
        """One response read; ``latency_ms`` since its request was sent."""
        self._responses.record(1.0, now_ms)
        self._node(node_id).responses.record(latency_ms, now_ms)


# -- producer, network thread ---------------------------------------------------------------------------


class _TopicSensors:
    __slots__ = ("bytes", "errors", "records", "retries")

    def __init__(self, records: Sensor, size: Sensor, errors: Sensor, retries: Sensor) -> None:
        self.records = records
        self.bytes = size
        self.errors = errors
        self.retries = retries


class ProducerMetrics:
    """``producer-metrics`` (Java's ``SenderMetrics``), recorded by the sender per Produce
    request and per batch, never per record: record-send-rate / -total and
    records-per-request-avg (records in each Produce request sent, retries included),
    batch-size-avg / -max (bytes of each batch as sent), record-queue-time-avg / -max (ms from a
    batch's creation to its being sent), request-latency-avg / -max (ms, per answered Produce
    request), record-error-rate / -total, record-retry-rate / -total, produce-throttle-time-avg
    / -max, requests-in-flight, buffer-total-bytes and buffer-available-bytes; per topic in
    ``producer-topic-metrics,topic=<t>``: record-send-rate / -total, byte-rate / -total,
    record-error-rate / -total and record-retry-rate / -total."""

    def __init__(
        self,
        registry: MetricsRegistry,
        *,
        requests_in_flight: Callable[[], int] | None = None,
        buffer_total_bytes: int | None = None,
        buffer_available_bytes: Callable[[], int] | None = None,
    ) -> None:
        self._registry = registry
        group = PRODUCER_METRICS
        self._per_request = (
            registry.sensor("records-per-request")
            .add_meter(group, "record-send-rate", "record-send-total")
            .add_avg(group, "records-per-request-avg")
        )
        self._batch_size = (
            registry.sensor("batch-size").add_avg(group, "batch-size-avg").add_max(group, "batch-size-max")
        )
        self._queue_time = (
            registry.sensor("queue-time")
            .add_avg(group, "record-queue-time-avg")
            .add_max(group, "record-queue-time-max")
        )
        self._latency = (
            registry.sensor("request-time")
            .add_avg(group, "request-latency-avg")
            .add_max(group, "request-latency-max")
        )
        self._errors = registry.sensor("errors").add_meter(group, "record-error-rate", "record-error-total")
        self._retries = registry.sensor("record-retries").add_meter(
            group, "record-retry-rate", "record-retry-total"
        )
        self._throttle = (
            registry.sensor("produce-throttle-time")
            .add_avg(group, "produce-throttle-time-avg")
            .add_max(group, "produce-throttle-time-max")
        )
        if requests_in_flight is not None:
            registry.add_gauge(group, "requests-in-flight", lambda now_ms: float(requests_in_flight()))
        if buffer_total_bytes is not None:
            total = float(buffer_total_bytes)
            registry.add_gauge(group, "buffer-total-bytes", lambda now_ms: total)
        if buffer_available_bytes is not None:
            registry.add_gauge(
                group, "buffer-available-bytes", lambda now_ms: float(buffer_available_bytes())
            )
        self._topics: dict[str, _TopicSensors] = {}

    def _topic(self, topic: str) -> _TopicSensors:
        sensors = self._topics.get(topic)
        if sensors is None:
            registry = self._registry
            group = producer_topic_group(topic)
            prefix = f"topic.{topic}"
            sensors = self._topics[topic] = _TopicSensors(
                registry.sensor(f"{prefix}.records-per-batch").add_meter(
                    group, "record-send-rate", "record-send-total"
                ),
                registry.sensor(f"{prefix}.bytes").add_meter(group, "byte-rate", "byte-total"),
                registry.sensor(f"{prefix}.record-errors").add_meter(
                    group, "record-error-rate", "record-error-total"
                ),
                registry.sensor(f"{prefix}.record-retries").add_meter(
                    group, "record-retry-rate", "record-retry-total"
                ),
            )
        return sensors

    def batch_sent(self, topic: str, records: int, size: int, queue_time_ms: int, now_ms: int) -> None:
        """One batch of a Produce request being sent."""
        self._batch_size.record(size, now_ms)
        self._queue_time.record(queue_time_ms, now_ms)
        sensors = self._topic(topic)
        sensors.records.record(records, now_ms)
        sensors.bytes.record(size, now_ms)

    def request_sent(self, records: int, now_ms: int) -> None:
        """A Produce request carrying ``records`` records is being sent."""
        self._per_request.record(records, now_ms)

    def request_answered(self, latency_ms: int, throttle_ms: int, now_ms: int) -> None:
        self._latency.record(latency_ms, now_ms)
        self._throttle.record(throttle_ms, now_ms)

    def records_failed(self, topic: str, records: int, now_ms: int) -> None:
        self._errors.record(records, now_ms)
        self._topic(topic).errors.record(records, now_ms)

    def records_retried(self, topic: str, records: int, now_ms: int) -> None:
        self._retries.record(records, now_ms)
        self._topic(topic).retries.record(records, now_ms)
