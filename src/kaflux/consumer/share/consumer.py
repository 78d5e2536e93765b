"""``kaflux.ShareConsumer``: a share group member (KIP-932, "queues for Kafka"). [app]

Theory of operation. As :class:`kaflux.Consumer`, two threads: the caller's, which runs the
public API, decodes records (with the record kernel) and runs the acknowledgement commit
callback; and one network thread (:class:`~kaflux.network.network_thread.NetworkThread`)
running the coordinator lookup, the share membership and its heartbeat
(:mod:`~kaflux.consumer.share.membership`, :mod:`~kaflux.consumer.share.heartbeat`, built by
:func:`kaflux.consumer.components.build_share_group` on the shared membership core) and the
share-consume manager
(:mod:`~kaflux.consumer.share.consume_request_manager`). They meet in the event queues and in
the byte-bounded :class:`~kaflux.consumer.share.fetch_buffer.ShareFetchBuffer`.

Each record ``poll()`` returns was *acquired* for this member and carries ``delivery_count``.
The :class:`~kaflux.consumer.share.acknowledgements.AcknowledgementBook` on this thread tracks
them: in ``implicit`` mode the next ``poll()`` or commit accepts them all; in ``explicit`` mode
each must be acknowledged (:meth:`ShareConsumer.acknowledge`) before the next ``poll()``.
Acknowledgements travel to the network thread in events and go to the broker on the next
ShareFetch, or at once in a ShareAcknowledge for ``commit_sync``/``commit_async``.

Each blocking call is written once as wait steps (:mod:`kaflux.blocking`): this class runs them
blocking, ``kaflux.aio.AsyncShareConsumer`` awaits the same steps on an event loop.
"""

from __future__ import annotations

import base64
import itertools
import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from kaflux.blocking import DoneWait, FutureWait, SignalWait, Steps, blocking
from kaflux.closeable import Closeable
from kaflux.config import ShareConsumerConfig
from kaflux.consumer.completed_fetch import Deserializer
from kaflux.consumer.components import ShareGroupParts, build_share_group
from kaflux.consumer.coordinator_request_manager import CoordinatorRequestManager
from kaflux.consumer.events import CompletableEvent, fail
from kaflux.consumer.membership.group import GroupState
from kaflux.consumer.share.acknowledgements import AcknowledgementBook, Acknowledgements, AcknowledgeType
from kaflux.consumer.share.consume_request_manager import AckResults, ShareCommit, ShareConsumeRequestManager
from kaflux.consumer.share.decode import acquired_records
from kaflux.consumer.share.deserialize import RecordDeserializers
from kaflux.consumer.share.events import (
    ShareAcknowledgeEvent,
    ShareCloseSessionsEvent,
    ShareEventProcessor,
    ShareGroupStateEvent,
    ShareLeaveEvent,
    ShareMetricsEvent,
    ShareSubscribeEvent,
)
from kaflux.consumer.share.fetch_buffer import ShareCompletedFetch, ShareFetchBuffer
from kaflux.errors import (
    ConcurrentAccessError,
    IllegalStateError,
    InvalidArgumentError,
    KafkaError,
    WakeupError,
)
from kaflux.interceptors import (
    ConsumerInterceptor,
    ConsumerInterceptors,
    ShareConsumerInterceptor,
    load_interceptors,
)
from kaflux.metrics.clients import NetworkMetrics, ShareMetrics
from kaflux.metrics.registry import MetricsRegistry
from kaflux.metrics.stats import MetricConfig
from kaflux.network.backoff import RequestState
from kaflux.network.client_telemetry import ClientTelemetry
from kaflux.network.clock import monotonic_ms
from kaflux.network.factory import build_network
from kaflux.network.network_thread import NetworkThread
from kaflux.records import ConsumerRecord, active_kernel
from kaflux.structs import TopicPartition
from kaflux.timeouts import timeout_seconds

log = logging.getLogger(__name__)

__all__ = ["AcknowledgeType", "AcknowledgementCommitCallback", "ShareConsumer"]

AcknowledgementCommitCallback = Callable[[dict[TopicPartition, set[int]], KafkaError | None], None]
_client_ids = itertools.count(1)
_NO_THREAD = -1


@dataclass(slots=True)
class _Reading:
    """A fetch being returned over one or more polls."""

    fetch: ShareCompletedFetch
    #: its acquired records, decoded
    records: list[ConsumerRecord]
    #: the first acquired offset not yet in the acknowledgement book
    next_offset: int
    #: the next record to return
    index: int = 0
    #: the record at ``index`` could not be deserialized: raised by the next poll()
    error: tuple[ConsumerRecord, KafkaError] | None = None


def _member_id() -> str:
    """A member id as Java's ``Uuid.randomUuid().toString()`` spells it (KIP-1082)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class ShareConsumer(Closeable):
    """Reads records as a member of a share group: many members share each partition, each
    record goes to one member at a time, and the member acknowledges it.

    Example::

        with ShareConsumer({"bootstrap.servers": "127.0.0.1:9092", "group.id": "jobs"}) as consumer:
            consumer.subscribe(["jobs"])
            while True:
                for record in consumer.poll(1.0):
                    handle(record)  # accepted by the next poll() (implicit mode)

    Only one thread may use a share consumer at a time, except :meth:`wakeup` and
    :meth:`metrics`, which any thread may call.
    """

    def __init__(
        self,
        config: Mapping[str, object],
        key_deserializer: Deserializer | None = None,
        value_deserializer: Deserializer | None = None,
        interceptors: Sequence[ShareConsumerInterceptor] | None = None,
    ) -> None:
        """Validate ``config`` and start the network thread. ``interceptors`` (and the classes
        of ``interceptor.classes``) see what poll() returns and each completed acknowledgement
        (:class:`kaflux.ShareConsumerInterceptor`; in explicit mode an interceptor must not
        drop records from ``on_consume``: each record returned must be acknowledged).

        Raises:
            ConfigError: ``group.id`` is missing, a key is unknown or belongs to consumer
                groups (``enable.auto.commit``, ``auto.offset.reset``...), or a value is wrong.
        """
        self._config = config_ = ShareConsumerConfig.from_dict(config)
        self._implicit = config_.share_acknowledgement_mode == "implicit"
        self.client_id = config_.client_id or f"share-consumer-{config_.group_id}-{next(_client_ids)}"
        found = load_interceptors(
            ShareConsumerInterceptor,
            "share-consumer",
            self,
            interceptors,
            config_.interceptor_classes,
            config,
        )
        #: None without interceptors: poll() checks this one attribute per call
        chain: list[ConsumerInterceptor] = list(found)
        self._interceptors = ConsumerInterceptors(self.client_id, chain) if chain else None
        self._deserializers = RecordDeserializers(key_deserializer, value_deserializer)
        self._buffer = ShareFetchBuffer()
        self._background: queue.SimpleQueue[
            tuple[dict[TopicPartition, Acknowledgements], KafkaError | None]
        ] = queue.SimpleQueue()
        self._errors: queue.SimpleQueue[KafkaError] = queue.SimpleQueue()
        network = build_network(config_, self.client_id, allow_auto_create_topics=False)
        backoff = network.retry_backoff
        coordinator = CoordinatorRequestManager(
            config_.group_id, RequestState(backoff), network.cluster, self._post_error
        )
        # The network thread's metrics: recorded there, measured there for metrics()
        metric_config = MetricConfig(config_.metrics_num_samples, config_.metrics_sample_window_ms)
        network_metrics = MetricsRegistry(metric_config)
        # network I/O in consumer-metrics / consumer-node-metrics, as Java's share consumer names it
        network.client.enable_metrics(
            NetworkMetrics(network_metrics, "consumer", network.client.connection_count)
        )
        share_metrics = ShareMetrics(network_metrics)
        # The network thread's: this thread reaches them only through events.
        membership, heartbeat = build_share_group(
            ShareGroupParts(
                config_, _member_id(), network, coordinator, self._post_error, share_metrics.heartbeat_sent
            )
        )
        consume = ShareConsumeRequestManager(
            membership,
            network.cluster,
            self._buffer,
            request_metadata=network.metadata.request_update,
            on_acknowledged=self._post_acknowledged,
            on_error=self._post_error,
            topic_ids=membership.topic_id,
            fetch_max_wait_ms=config_.fetch_max_wait_ms,
            fetch_min_bytes=config_.fetch_min_bytes,
            fetch_max_bytes=config_.fetch_max_bytes,
            max_poll_records=config_.max_poll_records,
            buffer_max_bytes=config_.fetch_buffer_max_bytes,
            acquire_mode=config_.share_acquire_mode,
            metrics=share_metrics,
        )
        processor = ShareEventProcessor(membership, consume, heartbeat, network.metadata, network_metrics)
        # KIP-714: the network thread's metrics (org.apache.kafka.consumer.*), as brokers ask
        self._telemetry = ClientTelemetry(
            config_.enable_metrics_push, self.client_id, network_metrics.snapshot
        )
        self._thread = NetworkThread(
            f"kaflux-share-consumer-network-{self.client_id}",
            network.delegate,
            [network.metadata, coordinator, membership, heartbeat, consume, *self._telemetry.managers],
            processor,
        )
        self._book = AcknowledgementBook(implicit=self._implicit)
        #: per broker, the last delivery decoded here, and the last one reported settled
        self._seen: dict[int, int] = {}
        self._reported: dict[int, int] = {}
        self._kernel = active_kernel()
        self._subscription: frozenset[str] = frozenset()
        self._callback: AcknowledgementCommitCallback | None = None
        #: records decoded but not returned yet (max.poll.records), with their fetch
        self._current: _Reading | None = None
        #: the acquisition lock timeout the latest ShareFetch answer with records gave (KIP-1222)
        self._lock_timeout_ms: int | None = None
        self._owner = _NO_THREAD
        self._depth = 0
        self._owner_lock = threading.Lock()
        self._wakeup_requested = False
        self._waiting_on: Future[Any] | None = None
        self._wakeup_lock = threading.Lock()
        self._closed = False
        self._closing = False
        self._records_returned = 0
        self._thread.start()

    # -- single-threaded access ------------------------------------------------------------------

    @contextmanager
    def _in_use(self) -> Iterator[None]:
        me = threading.get_ident()
        with self._owner_lock:
            if self._owner not in (_NO_THREAD, me):
                raise ConcurrentAccessError(
                    "this ShareConsumer is being used by another thread; it is not safe for "
                    "concurrent use (only wakeup() and metrics() may be called from other threads)"
                )
            self._owner = me
            self._depth += 1
        try:
            if self._closed:
                raise IllegalStateError("this share consumer is closed")
            yield
        finally:
            with self._owner_lock:
                self._depth -= 1
                if self._depth == 0:
                    self._owner = _NO_THREAD

    # -- waiting and background work ---------------------------------------------------------------

    def _check_wakeup(self) -> None:
        with self._wakeup_lock:
            if self._wakeup_requested:
                self._wakeup_requested = False
                raise WakeupError("the share consumer was woken up by wakeup()")

    def _wait(self, future: Future[Any], timeout_s: float, what: str) -> Steps[Any]:
        """Wait for ``future`` (interruptible by wakeup())."""
        with self._wakeup_lock:
            if self._wakeup_requested:
                self._wakeup_requested = False
                raise WakeupError("the share consumer was woken up by wakeup()")
            self._waiting_on = future
        try:
            return (yield FutureWait(future, timeout_s, what))
        finally:
            with self._wakeup_lock:
                self._waiting_on = None

    def _call(self, event: CompletableEvent, timeout_s: float, what: str) -> Steps[Any]:
        self._thread.submit(event)
        return (yield from self._wait(event.future, timeout_s + 1.0, what))

    def _deadline_ms(self, timeout_s: float) -> int:
        return monotonic_ms() + int(timeout_s * 1000)

    def _post_error(self, error: KafkaError) -> None:
        """[bg] An error for the application: raised by the next poll()."""
        self._errors.put(error)
        self._buffer.wakeup()

    def _post_acknowledged(
        self, acks: dict[TopicPartition, Acknowledgements], error: KafkaError | None
    ) -> None:
        """[bg] Acknowledgements completed: the callback runs on the application thread."""
        self._background.put((acks, error))

    def _run_callbacks(self) -> None:
        """Run the acknowledgement commit callback for every completed acknowledgement."""
        while True:
            try:
                acks, error = self._background.get_nowait()
            except queue.Empty:
                return
            callback = self._callback
            interceptors = self._interceptors
            if callback is not None or interceptors is not None:
                offsets = {tp: a.offsets() for tp, a in acks.items()}
                offsets = {tp: o for tp, o in offsets.items() if o}
                if interceptors is not None:
                    interceptors.on_acknowledge(offsets, error)
                if callback is not None:
                    callback(offsets, error)
            elif error is not None:
                log.warning("%s: acknowledgement of %s failed: %s", self.client_id, sorted(acks), error)

    def _raise_errors(self) -> None:
        try:
            error = self._errors.get_nowait()
        except queue.Empty:
            return
        raise error

    # -- subscription ------------------------------------------------------------------------------

    @blocking
    def subscribe(self, topics: Iterable[str]) -> Steps[None]:
        """Join the share group (at the next poll) for ``topics``, replacing any subscription.

        Raises:
            InvalidArgumentError: ``topics`` is a string, or holds a non-string or empty name.
        """
        if isinstance(topics, str):
            raise InvalidArgumentError("subscribe() takes a list of topic names, not one string")
        names = frozenset(topics)
        if any(not isinstance(t, str) or not t.strip() for t in names):
            raise InvalidArgumentError(
                f"topic names must be non-empty strings, got {sorted(map(repr, names))}"
            )
        with self._in_use():
            if not names:
                yield from self._unsubscribe()
                return
            self._subscription = names
            timeout_s = self._config.default_api_timeout_ms / 1000
            yield from self._call(
                ShareSubscribeEvent(self._deadline_ms(timeout_s), topics=names), timeout_s, "subscribe()"
            )

    @blocking
    def unsubscribe(self) -> Steps[None]:
        """Acknowledge what is pending (implicit mode), then leave the share group."""
        with self._in_use():
            yield from self._unsubscribe()

    def _unsubscribe(self) -> Steps[None]:
        if not self._subscription:
            return
        self._send_acknowledgements(commit=None)
        self._subscription = frozenset()
        self._current = None
        timeout_s = self._config.default_api_timeout_ms / 1000
        yield from self._call(ShareLeaveEvent(self._deadline_ms(timeout_s)), timeout_s, "unsubscribe()")
        self._run_callbacks()

    def subscription(self) -> set[str]:
        """The subscribed topics."""
        return set(self._subscription)

    def acquisition_lock_timeout(self) -> float | None:
        """How long, in seconds, the broker holds the records of the latest fetch for this member
        before another member may get them (``group.share.record.lock.duration.ms``, as the
        ShareFetch answer said; KIP-1222), as Java's ``acquisitionLockTimeoutMs()``. Acknowledge
        a record with RENEW to restart its lock. None before any records were fetched."""
        with self._in_use():
            return None if self._lock_timeout_ms is None else self._lock_timeout_ms / 1000

    @blocking
    def group_state(self, timeout: float | None = None) -> Steps[GroupState]:
        """Where the member is in its share group: ``state`` (e.g. ``"STABLE"``), the member
        epoch as ``generation``, ``member_id`` and the assigned partitions. ``protocol`` is
        ``"share"``."""
        with self._in_use():
            timeout_s = timeout_seconds(timeout, self._config.default_api_timeout_ms / 1000)
            state: GroupState = yield from self._call(
                ShareGroupStateEvent(self._deadline_ms(timeout_s)), timeout_s, "group_state()"
            )
            return state

    # -- poll ----------------------------------------------------------------------------------------

    @blocking
    def poll(self, timeout: float = 0.0) -> Steps[list[ConsumerRecord]]:
        """Acquired records, waiting up to ``timeout`` seconds for some; each carries
        ``delivery_count``. In implicit mode this first accepts the records the previous
        poll() returned.

        Raises:
            IllegalStateError: not subscribed; or, in explicit mode, records of the previous
                poll() are not all acknowledged.
            WakeupError: wakeup() was called.
            RecordDeserializationError: a deserializer failed (the record is released).
            KafkaError: an error found by the network thread (a fatal group error, say).
        """
        with self._in_use():
            timeout_s = timeout_seconds(timeout, 0.0)
            if not self._subscription:
                raise IllegalStateError("poll() needs a subscription: call subscribe() first")
            if not self._implicit:
                waiting = self._book.unacknowledged()
                if waiting:
                    raise IllegalStateError(
                        f"{waiting} records of the last poll() are not acknowledged; in explicit "
                        "acknowledgement mode acknowledge() every record before polling again"
                    )
            self._send_acknowledgements(commit=None)
            deadline = time.monotonic() + timeout_s
            while True:
                self._check_wakeup()
                self._run_callbacks()
                self._raise_errors()
                records = self._collect()
                if records:
                    self._records_returned += len(records)
                    if self._interceptors is not None:
                        return self._interceptors.on_consume(records)
                    return records
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return records
                yield SignalWait(self._buffer, min(remaining, 1.0))

    def __iter__(self) -> Iterator[ConsumerRecord]:
        """Yield records forever (polling in 1-second slices) until the consumer is closed."""
        while not self._closed:
            yield from self.poll(1.0)

    def _collect(self) -> list[ConsumerRecord]:
        """Up to max.poll.records records from the buffer, decoded (and deserialized) here. Only
        what is returned enters the acknowledgement book: a fetch split over several polls is
        acknowledged part by part, and its last part carries the acquired offsets with no record
        (gaps). A record that cannot be deserialized is RELEASEd and its error raised, once the
        records before it were returned."""
        limit = self._config.max_poll_records
        out: list[ConsumerRecord] = []
        while len(out) < limit:
            reading = self._current
            if reading is None:
                fetch = self._buffer.take()
                if fetch is None:
                    break
                tp = fetch.tp
                records = acquired_records(
                    self._kernel,
                    fetch.records,
                    tp.topic,
                    tp.partition,
                    fetch.acquired,
                    check_crcs=self._config.check_crcs,
                )
                reading = self._current = _Reading(fetch, records, min(a for a, _, _ in fetch.acquired))
                if fetch.acquisition_lock_timeout_ms is not None:
                    self._lock_timeout_ms = fetch.acquisition_lock_timeout_ms
                self._seen[fetch.node] = max(fetch.seq, self._seen.get(fetch.node, 0))
            fetch, records = reading.fetch, reading.records
            error = reading.error
            if error is None:
                chunk = records[reading.index : reading.index + limit - len(out)]
                error = self._deserializers.apply(chunk, fetch.tp)
                if error is not None:
                    chunk = chunk[: chunk.index(error[0])]
                done = error is None and reading.index + len(chunk) == len(records)
                self._hand_over(reading, chunk, done)
                out += chunk
            if error is not None:
                if out:
                    reading.error = error  # the bad record stays first in line: the next poll() raises
                    return out
                reading.error = None
                bad, exc = error
                self._book.release(fetch.tp, fetch.node, bad.offset)
                reading.index += 1
                reading.next_offset = bad.offset + 1
                if reading.index == len(records):
                    self._hand_over(reading, [], True)
                raise exc
        return out

    def _hand_over(self, reading: _Reading, chunk: list[ConsumerRecord], done: bool) -> None:
        """Enter ``chunk`` (returned now) in the acknowledgement book with the acquired offsets
        up to the next record (all the rest when ``done``)."""
        fetch = reading.fetch
        if done:
            high = max(b for _, b, _ in fetch.acquired)
        else:
            high = reading.records[reading.index + len(chunk)].offset - 1
        ranges = [
            (max(a, reading.next_offset), min(b, high))
            for a, b, _ in fetch.acquired
            if max(a, reading.next_offset) <= min(b, high)
        ]
        if ranges:
            self._book.deliver(fetch.tp, fetch.node, ranges, [r.offset for r in chunk])
        reading.index += len(chunk)
        reading.next_offset = high + 1
        if done:
            self._current = None
            self._buffer.release(fetch)

    # -- acknowledgements --------------------------------------------------------------------------

    def acknowledge(self, record: ConsumerRecord, type: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:
        """Acknowledge one record the last poll() returned (explicit mode): ACCEPT it (done),
        RELEASE it (deliver again, delivery count + 1), REJECT it (never again) or RENEW its
        lock (KIP-1222; the broker must serve ShareAcknowledge v2, else the commit reports
        UnsupportedVersionError). Sent at the next poll() or commit.

        Raises:
            IllegalStateError: implicit acknowledgement mode, or the record is not waiting
                for an acknowledgement.
        """
        with self._in_use():
            if self._implicit:
                raise IllegalStateError(
                    "acknowledge() needs share.acknowledgement.mode=explicit; in implicit mode the "
                    "next poll() or commit accepts every record"
                )
            self._book.acknowledge(record.topic_partition, record.offset, AcknowledgeType(type))

    def _send_acknowledgements(self, commit: ShareCommit | None) -> None:
        """Hand the acknowledgements made so far to the network thread, with the deliveries
        now settled (so that their brokers are fetched from again)."""
        acks = self._book.take(implicit=self._implicit)
        unsettled = self._book.unsettled_nodes()
        if self._current is not None:
            unsettled.add(self._current.fetch.node)
        settled = {
            n: seq for n, seq in self._seen.items() if n not in unsettled and seq > self._reported.get(n, 0)
        }
        if acks or commit is not None or settled:
            self._reported.update(settled)
            self._thread.submit(ShareAcknowledgeEvent(acks, commit, settled))

    @blocking
    def commit_sync(self, timeout: float | None = None) -> Steps[dict[TopicPartition, KafkaError | None]]:
        """Send the acknowledgements made so far (implicit mode: accept the last poll's
        records) and wait for the outcome: ``{partition: None or the error}``.

        Raises:
            KafkaTimeoutError: no answer within ``timeout`` seconds (default.api.timeout.ms).
            WakeupError: wakeup() was called.
        """
        with self._in_use():
            timeout_s = timeout_seconds(timeout, self._config.default_api_timeout_ms / 1000)
            commit = ShareCommit()
            self._send_acknowledgements(commit)
            try:
                results: AckResults = yield from self._wait(commit.future, timeout_s, "commit_sync()")
            finally:
                self._run_callbacks()
            return dict(results)

    def commit_async(self) -> Future[dict[TopicPartition, KafkaError | None]]:
        """Send the acknowledgements made so far without waiting; the acknowledgement commit
        callback reports the outcome (inside a later poll(), commit or close()). Returns a
        future of the per-partition outcome, as commit_sync() returns it (waiting on it is
        optional; it completes on the network thread)."""
        with self._in_use():
            commit = ShareCommit()
            self._send_acknowledgements(commit)
            self._run_callbacks()
            return commit.future

    def set_acknowledgement_commit_callback(self, callback: AcknowledgementCommitCallback | None) -> None:
        """``callback(offsets, error)`` runs on this thread, inside poll(), commit_*() or
        close(), once per completed group of acknowledgements: ``offsets`` maps each
        partition to the acknowledged offsets, ``error`` is None or what failed them."""
        with self._in_use():
            self._callback = callback

    # -- lifecycle -----------------------------------------------------------------------------------

    def wakeup(self) -> None:
        """Interrupt the current blocking call, or the next one, with WakeupError. Any thread."""
        with self._wakeup_lock:
            waiting = self._waiting_on
            if waiting is not None and not waiting.done():
                fail(waiting, WakeupError("the share consumer was woken up by wakeup()"))
            else:
                self._wakeup_requested = True
        self._buffer.wakeup()

    @blocking
    def client_instance_id(self, timeout: float) -> Steps[uuid.UUID | None]:
        """The client instance id the brokers gave this share consumer for its metrics push
        (KIP-714, Java's ``clientInstanceId(Duration)``), waiting at most ``timeout`` seconds
        for the first telemetry subscription; None if none came in time or the brokers have no
        client-telemetry APIs. Any thread may call it.

        Raises:
            IllegalStateError: ``enable.metrics.push`` is false, or the share consumer is closed.
        """
        if self._closed:
            raise IllegalStateError("this share consumer is closed")
        return (yield from self._telemetry.client_instance_id(timeout))

    @blocking
    def close(self, timeout: float = 30.0) -> Steps[None]:
        """Acknowledge what is pending (implicit mode: accept the last poll's records; explicit:
        what was acknowledged, the rest is released), close the share sessions, leave the
        group (epoch -1) and stop the network thread, within ``timeout`` seconds. Idempotent."""
        if self._closed or self._closing:
            return
        with self._in_use():
            self._closing = True
            with self._wakeup_lock:
                self._wakeup_requested = False
            deadline = time.monotonic() + timeout_seconds(timeout, 30.0)
            try:
                if self._subscription:
                    commit = ShareCommit()
                    self._thread.submit(
                        ShareCloseSessionsEvent(commit, self._book.take(implicit=self._implicit))
                    )
                    try:
                        remaining = max(0.0, deadline - time.monotonic())
                        yield FutureWait(commit.future, remaining, "acknowledging on close")
                    except Exception as exc:
                        log.warning("%s: acknowledging on close failed: %s", self.client_id, exc)
                    leave = ShareLeaveEvent(self._deadline_ms(max(0.0, deadline - time.monotonic())))
                    self._thread.submit(leave)
                    try:
                        remaining = max(0.0, deadline - time.monotonic())
                        yield FutureWait(leave.future, remaining, "leaving the share group on close")
                    except Exception as exc:
                        log.warning("%s: leaving the share group on close failed: %s", self.client_id, exc)
                self._run_callbacks()
            finally:
                # Stopping starts even if the steps above failed or were cancelled; waiting
                # for it (not in a finally: a closed generator may not wait) is the last step.
                self._closed = True
                remaining = max(0.0, deadline - time.monotonic())
                stopped = self._thread.request_close(remaining)
            try:
                yield DoneWait(stopped, remaining + 1.0)
            finally:
                self._run_callbacks()
                if self._interceptors is not None:
                    self._interceptors.close()

    @blocking
    def metrics(self, timeout: float = 0.5) -> Steps[dict[str, dict[str, float]]]:
        """The share consumer's metrics with Java's names, ``{group: {name: value}}``:
        ``consumer-share-fetch-manager-metrics`` (``fetch-rate`` / ``fetch-total``,
        ``fetch-latency-avg`` / ``-max``, ``records-consumed-rate`` / ``-total``,
        ``bytes-consumed-rate`` / ``-total``, ``acknowledgements-send-rate`` / ``-total``,
        ``acknowledgements-error-rate`` / ``-total``) and ``consumer-share-coordinator-metrics``
        (``heartbeat-rate`` / ``heartbeat-total``, ``assigned-partitions``), network I/O in
        ``consumer-metrics`` and per broker ``consumer-node-metrics,node-id=node-<id>`` (as
        Java's share consumer names them), plus
        ``kaflux-share-consumer-metrics`` (``records-returned``). Rates are per second over
        ``metrics.num.samples`` windows of ``metrics.sample.window.ms``
        (:class:`~kaflux.metrics.clients.ShareMetrics`). Any thread may call it."""
        out: dict[str, dict[str, float]] = {}
        if not self._closed:
            event = ShareMetricsEvent(self._deadline_ms(timeout))
            self._thread.submit(event)
            try:
                out = dict((yield FutureWait(event.future, max(0.0, timeout), "metrics()")))
            except Exception as exc:
                log.debug("%s: metrics of the network thread not received in time: %s", self.client_id, exc)
        out["kaflux-share-consumer-metrics"] = {"records-returned": float(self._records_returned)}
        return out
