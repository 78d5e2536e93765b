"""``kaflux.Consumer``: the public consumer API. [app]

Theory of operation. Every public method runs on the caller's thread (the application
thread) and does no I/O. Calls that need the cluster become application events for the
consumer's network thread; blocking ones wait on the event's future with a deadline.
``poll()`` collects records from the fetch buffer, which the network thread keeps filled,
and handles background events (errors) between waits. ``wakeup()`` and ``metrics()`` are the
only methods other threads may call: wakeup() fails the future being waited on, or the next
one, with WakeupError.

Metrics. Each thread records into a registry of its own: this thread the time between polls
and what poll() returns (records, bytes, lag), the network thread its requests, the group and
the network I/O. ``metrics()`` merges this thread's registry with a snapshot of the network
thread's, which it asks for with an event and waits for at most a short timeout.
"""

from __future__ import annotations

import itertools
import logging
import queue
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeoutError
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from kaflux.closeable import Closeable
from kaflux.config import ConsumerConfig
from kaflux.consumer.assignors import assignor_for_name, rebalance_protocol_for
from kaflux.consumer.completed_fetch import Deserializer
from kaflux.consumer.components import build_consumer_components
from kaflux.consumer.consumer_record import ConsumerRecord, ConsumerRecords
from kaflux.consumer.events import (
    AssignmentChangeEvent,
    BackgroundEvent,
    CheckAndUpdatePositionsEvent,
    CommitEvent,
    CompletableEvent,
    EnforceRebalanceEvent,
    ErrorEvent,
    FetchCommittedOffsetsEvent,
    GroupStateEvent,
    LeaveGroupEvent,
    ListOffsetsEvent,
    MetricsSnapshotEvent,
    PollEvent,
    RebalanceCallbackCompletedEvent,
    RebalanceCallbackNeededEvent,
    SubscriptionChangeEvent,
    TopicMetadataEvent,
    fail,
)
from kaflux.consumer.fetch_buffer import FetchBuffer
from kaflux.consumer.fetch_collector import FetchCollector
from kaflux.consumer.membership.group import GroupMetadata, GroupState
from kaflux.consumer.offsets_request_manager import OffsetResult
from kaflux.consumer.rebalance_listener import ConsumerRebalanceListener
from kaflux.consumer.subscription_state import (
    FetchPosition,
    FetchState,
    ResetStrategy,
    SubscriptionState,
    SubscriptionType,
)
from kaflux.consumer.validation import check_assignment, check_subscription
from kaflux.errors import (
    ConcurrentAccessError,
    IllegalStateError,
    InvalidGroupIdError,
    KafkaError,
    KafkaTimeoutError,
    NoOffsetForPartitionError,
    WakeupError,
)
from kaflux.metrics.clients import KAFLUX_CONSUMER_METRICS, NetworkMetrics, PollMetrics
from kaflux.metrics.registry import MetricsRegistry, Snapshot, merge_snapshots
from kaflux.metrics.stats import MetricConfig
from kaflux.network.factory import build_network
from kaflux.network.metadata_manager import MetadataAnswer
from kaflux.network.network_thread import NetworkThread, monotonic_ms
from kaflux.records import RecordColumns, to_arrow
from kaflux.structs import OffsetAndMetadata, OffsetAndTimestamp, PartitionInfo, TopicPartition
from kaflux.timeouts import await_future, timeout_seconds

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)
T = TypeVar("T")
CommitCallback = Callable[[dict[TopicPartition, OffsetAndMetadata], BaseException | None], None]
_client_ids = itertools.count(1)
_NO_THREAD = -1
#: how long metrics() waits for the network thread's half by default, in seconds
METRICS_TIMEOUT_S = 0.5


def _gauge_of(read: Callable[[], int]) -> Callable[[int], float]:
    """A gauge (a function of the time) reading a counter."""
    return lambda now_ms: float(read())


def _num_records(records: dict[TopicPartition, list[ConsumerRecord]]) -> int:
    return sum(map(len, records.values()))


def _num_rows(columns: RecordColumns) -> int:
    return columns.num_rows


class Consumer(Closeable):
    """Reads records from Kafka partitions.

    Example::

        consumer = Consumer({"bootstrap.servers": "127.0.0.1:9092", "group.id": "billing"})
        consumer.assign([TopicPartition("orders", 0)])
        for record in consumer.poll(1.0):
            print(record.offset, record.value)
        consumer.close()

    Only one thread may use a consumer at a time (others get ConcurrentAccessError), except
    :meth:`wakeup`, which any thread may call.
    """

    def __init__(
        self,
        config: Mapping[str, object],
        key_deserializer: Deserializer | None = None,
        value_deserializer: Deserializer | None = None,
    ) -> None:
        """Validate ``config`` (Kafka consumer keys, Java defaults) and start the network thread.

        Raises:
            ConfigError: a key is unknown, a value has the wrong type or is out of range.
        """
        self._config = config_ = ConsumerConfig.from_dict(config)
        # Checked with or without a group.id, as Java checks its config.
        assignors = [assignor_for_name(name) for name in config_.partition_assignment_strategy]
        rebalance_protocol_for(assignors)
        group = config_.group_id
        self.client_id = config_.client_id or f"consumer-{group or 'nogroup'}-{next(_client_ids)}"
        self._read_committed = config_.isolation_level == "read_committed"
        self._subscription = SubscriptionState(ResetStrategy(config_.auto_offset_reset))
        self._fetch_buffer = FetchBuffer()
        self._background_events: queue.SimpleQueue[BackgroundEvent] = queue.SimpleQueue()
        network = build_network(
            config_, self.client_id, allow_auto_create_topics=config_.allow_auto_create_topics
        )
        self._reachability = network.client.reachability
        metric_config = MetricConfig(config_.metrics_num_samples, config_.metrics_sample_window_ms)
        #: this thread's metrics; its lock lets metrics() measure them from any thread
        self._metrics = MetricsRegistry(metric_config, lock=threading.Lock())
        network_metrics = MetricsRegistry(metric_config)  # the network thread's own
        network.client.enable_metrics(
            NetworkMetrics(network_metrics, "consumer", network.client.connection_count)
        )
        #: the last snapshot of the network thread's metrics
        self._network_metrics: Snapshot = {}
        parts = build_consumer_components(
            config_,
            network,
            self._subscription,
            self._fetch_buffer,
            post_event=self._post_background_event,
            on_error=self._post_error,
            metrics=network_metrics,
        )
        self._membership = parts.membership
        network.metadata.add_error_listener(self._on_topic_error)
        self._fetcher = parts.fetcher
        self._collector = FetchCollector(
            self._subscription,
            self._fetch_buffer,
            max_poll_records=config_.max_poll_records,
            key_deserializer=key_deserializer,
            value_deserializer=value_deserializer,
            tally=True,
            read_committed=self._read_committed,
        )
        self._poll_metrics = PollMetrics(self._metrics)
        self._metrics_assignment = -1
        self._thread = NetworkThread(
            f"kaflux-consumer-network-{self.client_id}", network.delegate, parts.managers, parts.processor
        )
        self._listener: ConsumerRebalanceListener | None = None
        self._async_commits: list[tuple[Future[Any], CommitCallback | None]] = []
        self._owner = _NO_THREAD
        self._depth = 0
        self._owner_lock = threading.Lock()
        self._wakeup_requested = False
        self._waiting_on: Future[Any] | None = None
        self._wakeup_lock = threading.Lock()
        self._closed = False
        self._closing = False
        self._records_returned = 0
        self._add_kaflux_gauges()
        self._thread.start()

    def _add_kaflux_gauges(self) -> None:
        """kaflux's own counters (no Java equivalent), in ``kaflux-consumer-metrics``."""
        group = KAFLUX_CONSUMER_METRICS
        gauges: dict[str, Callable[[], int]] = {
            "records-returned": lambda: self._records_returned,
            "fetch-requests": lambda: self._fetcher.fetches_sent,
            "fetch-buffer-bytes": self._fetch_buffer.size_bytes,
            "network-loops": lambda: self._thread.loop_count,
            "assigned-partitions": lambda: len(self._subscription.assigned_partitions()),
            "partitions-awaiting-position": lambda: (
                len(self._subscription.partitions_in_state(FetchState.AWAIT_RESET))
                + len(self._subscription.partitions_in_state(FetchState.INITIALIZING))
            ),
        }
        for name, read in gauges.items():
            self._metrics.add_gauge(group, name, _gauge_of(read))

    # -- single-threaded access ---------------------------------------------------------------

    def _acquire(self) -> None:
        me = threading.get_ident()
        with self._owner_lock:
            if self._owner not in (_NO_THREAD, me):
                raise ConcurrentAccessError(
                    "this Consumer is being used by another thread; a consumer is not safe for "
                    "concurrent use (only wakeup() may be called from other threads)"
                )
            self._owner = me
            self._depth += 1

    def _release(self) -> None:
        with self._owner_lock:
            self._depth -= 1
            if self._depth == 0:
                self._owner = _NO_THREAD

    @contextmanager
    def _in_use(self) -> Iterator[None]:
        """Hold the consumer as its only user, for one call on an open consumer."""
        self._acquire()
        try:
            self._ensure_open()
            yield
        finally:
            self._release()

    def _ensure_open(self) -> None:
        if self._closed:
            raise IllegalStateError("this consumer is closed")

    def _guarded(self, action: Callable[[], T]) -> T:
        """Run ``action`` as the consumer's only user, on an open consumer."""
        with self._in_use():
            return action()

    # -- waiting ---------------------------------------------------------------------------------

    def _timeout_s(self, timeout: float | None) -> float:
        return timeout_seconds(timeout, self._config.default_api_timeout_ms / 1000)

    def _check_wakeup(self) -> None:
        with self._wakeup_lock:
            if self._wakeup_requested:
                self._wakeup_requested = False
                raise WakeupError("the consumer was woken up by wakeup()")

    def _call(self, event: CompletableEvent, timeout_s: float, what: str | None = None) -> Any:
        """Submit ``event`` and wait for its result (interruptible by wakeup()). ``what``
        names the operation in a timeout message."""
        with self._wakeup_lock:
            if self._wakeup_requested:
                self._wakeup_requested = False
                raise WakeupError("the consumer was woken up by wakeup()")
            self._waiting_on = event.future
        try:
            self._thread.submit(event)
            # The network thread fails the event at its deadline, naming the cause; the extra
            # second only guards against a network thread that cannot.
            return await_future(
                event.future, timeout_s + 1.0, what or type(event).__name__, self._reachability.unreachable
            )
        finally:
            with self._wakeup_lock:
                self._waiting_on = None

    def _deadline_ms(self, timeout_s: float) -> int:
        return monotonic_ms() + int(timeout_s * 1000)

    def _post_error(self, error: KafkaError) -> None:
        """[bg] Hand an error to the application thread; raised by the next poll()."""
        self._post_background_event(ErrorEvent(error))

    def _on_topic_error(self, topic: str | None, error: KafkaError) -> None:
        """[bg] A metadata refresh reported an error that retrying will not cure: for a topic
        (e.g. TOPIC_AUTHORIZATION_FAILED), raise it from poll() if the topic is in use; for the
        refresh itself (e.g. a failed login), always."""
        if (
            topic is None
            or topic in self._subscription.subscription()
            or any(tp.topic == topic for tp in self._subscription.assigned_partitions())
        ):
            self._post_error(error)

    def _post_background_event(self, event: BackgroundEvent) -> None:
        """[bg] Queue a background event and wake a waiting poll()."""
        self._background_events.put(event)
        self._fetch_buffer.wakeup()

    def _process_background_events(self) -> None:
        """Run requested rebalance callbacks and raise the first error (others are logged)."""
        first: BaseException | None = None
        while True:
            try:
                event = self._background_events.get_nowait()
            except queue.Empty:
                break
            error = event.error if isinstance(event, ErrorEvent) else self._run_rebalance_callback(event)
            if error is None or self._is_stale(error):
                continue
            if first is None:
                first = error
            else:
                log.warning("%s: further background error: %s", self.client_id, error)
        if first is not None:
            raise first

    def _is_stale(self, error: BaseException) -> bool:
        """A NoOffsetForPartitionError is moot once the application gave its partitions a
        position (a seek that raced with the network thread's check)."""
        if not isinstance(error, NoOffsetForPartitionError):
            return False
        return not any(self._subscription.still_awaiting_reset(tp) for tp in error.partitions)

    def _run_rebalance_callback(self, event: RebalanceCallbackNeededEvent) -> BaseException | None:
        """Run one listener method on this (the application) thread, then acknowledge it."""
        error: BaseException | None = None
        if event.method == "on_partitions_revoked" or event.method == "on_partitions_lost":
            self._fetch_buffer.retain_all(
                set(self._subscription.assigned_partitions()) - set(event.partitions)
            )
        listener = self._listener
        if listener is not None:
            try:
                getattr(listener, event.method)(set(event.partitions))
            except Exception as exc:  # the rebalance must go on; the caller sees the error
                error = exc
        self._thread.submit(RebalanceCallbackCompletedEvent(event.callback_id, event.method, error))
        return error

    def _run_commit_callbacks(self) -> None:
        while self._async_commits and self._async_commits[0][0].done():
            future, callback = self._async_commits.pop(0)
            error = future.exception()
            offsets = future.result() if error is None else {}
            if callback is not None:
                callback(offsets, error)
            elif error is not None:
                log.warning("%s: asynchronous commit failed: %s", self.client_id, error)

    # -- assignment -------------------------------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read exactly these partitions (no group membership; replaces any previous assignment).

        An empty list is the same as :meth:`unsubscribe`.

        Raises:
            IllegalStateError: the consumer is subscribed to topics or a pattern.
            TypeError: an element is not a TopicPartition of a str topic and an int partition.
            InvalidTopicError: a topic name that Kafka refuses (empty, illegal characters...).
            InvalidArgumentError: a negative partition.
        """
        with self._in_use():
            wanted = check_assignment(partitions)
            if not wanted:
                self._unassign()
                return
            timeout = self._timeout_s(None)
            self._call(AssignmentChangeEvent(self._deadline_ms(timeout), partitions=wanted), timeout)
            self._fetch_buffer.retain_all(set(wanted))

    def _unassign(self) -> None:
        self._subscription.unsubscribe()
        self._fetch_buffer.clear()

    def subscribe(
        self,
        topics: Iterable[str] | None = None,
        pattern: str | re.Pattern[str] | None = None,
        listener: ConsumerRebalanceListener | None = None,
    ) -> None:
        """Join the consumer group and read the partitions it assigns to this member.

        Give ``topics`` (names) or ``pattern`` (a regex matched against whole topic names in
        cluster metadata, re-evaluated as topics appear). The join happens during the next
        :meth:`poll`; ``listener`` methods run there, on this thread. An empty list is the
        same as :meth:`unsubscribe`.

        Raises:
            InvalidGroupIdError: no group.id was configured.
            IllegalStateError: partitions were assigned manually with assign().
            ValueError / TypeError: neither or both of topics and pattern, or bad values.
            InvalidTopicError: a topic name that Kafka refuses (empty, illegal characters...),
                as :meth:`Producer.send` would.
        """
        with self._in_use():
            if self._membership is None:
                raise InvalidGroupIdError(
                    "subscribe() needs a group.id in the config; use assign() without a group"
                )
            if (topics is None) == (pattern is None):
                raise ValueError("give exactly one of topics or pattern")
            if listener is not None and not isinstance(listener, ConsumerRebalanceListener):
                raise TypeError("listener must be a kaflux.ConsumerRebalanceListener")
            if topics is not None:
                if isinstance(topics, str):
                    raise TypeError("topics must be a list of topic names, not a string")
                names = check_subscription(topics)
                if not names:
                    self._leave_group(self._timeout_s(None), on_close=False)
                    return
                self._subscription.subscribe(names)
                self._fetch_buffer.retain_all(
                    {tp for tp in self._subscription.assigned_partitions() if tp.topic in set(names)}
                )
            else:
                compiled = re.compile(pattern) if isinstance(pattern, str) else pattern
                if not isinstance(compiled, re.Pattern):
                    raise TypeError("pattern must be a str or re.Pattern")
                self._subscription.subscribe_pattern(compiled)
            self._listener = listener
            self._thread.submit(SubscriptionChangeEvent(listener is not None))

    def unsubscribe(self) -> None:
        """Leave the group (after ``on_partitions_revoked``) or drop the manual assignment;
        buffered data is discarded."""
        with self._in_use():
            self._leave_group(self._timeout_s(None), on_close=False)

    def _leave_group(self, timeout_s: float, *, on_close: bool) -> None:
        """Revoke (running the listener here) and leave, within ``timeout_s``; then unsubscribe."""
        try:
            if self._membership is not None and self._subscription.subscription_type() in (
                SubscriptionType.AUTO_TOPICS,
                SubscriptionType.AUTO_PATTERN,
            ):
                event = LeaveGroupEvent(self._deadline_ms(timeout_s), on_close=on_close)
                self._thread.submit(event)
                deadline = time.monotonic() + timeout_s
                while not event.future.done() and time.monotonic() < deadline:
                    self._process_background_events()
                    self._fetch_buffer.await_not_empty(min(0.1, max(0.0, deadline - time.monotonic())))
                self._process_background_events()
                if not event.future.done():
                    log.warning(
                        "%s: leaving the group did not finish within %.1f s", self.client_id, timeout_s
                    )
        finally:
            self._unassign()

    def subscription(self) -> set[str]:
        """The subscribed topics (for a pattern: the topics it matches now)."""
        return self._guarded(lambda: set(self._subscription.subscription()))

    def group_metadata(self) -> GroupMetadata:
        """The group id, generation, member id and instance id (for transactional producers)."""
        membership = self._membership
        if membership is None:
            raise InvalidGroupIdError("group_metadata() needs a group.id in the config")
        return self._guarded(lambda: membership.group_metadata)

    def group_state(self, timeout: float | None = None) -> GroupState:
        """Where this member is in its group: its state, generation (classic) or member epoch
        (KIP-848), member id, assignment and why the last rebalance started. A snapshot taken
        on the network thread, which owns the membership.

        Raises:
            InvalidGroupIdError: there is no group.id in the config.
            KafkaTimeoutError: the network thread did not answer within ``timeout`` seconds.
        """
        with self._in_use():
            if self._membership is None:
                raise InvalidGroupIdError("group_state() needs a group.id in the config")
            timeout_s = self._timeout_s(timeout)
            state: GroupState = self._call(GroupStateEvent(self._deadline_ms(timeout_s)), timeout_s)
            return state

    def enforce_rebalance(self, reason: str | None = None) -> None:
        """Ask the group to rebalance (at the next poll); no-op without a subscription, and with
        group.protocol=consumer, where the coordinator alone decides (as in Java)."""
        with self._in_use():
            if self._config.group_protocol == "consumer":
                log.warning(
                    "enforce_rebalance() does nothing with group.protocol=consumer: the group "
                    "coordinator decides when partitions move"
                )
                return
            if self._membership is not None:
                self._thread.submit(EnforceRebalanceEvent(reason or "enforce_rebalance() was called"))

    def assignment(self) -> set[TopicPartition]:
        """The partitions currently assigned."""
        return self._guarded(lambda: set(self._subscription.assigned_partitions()))

    # -- poll -----------------------------------------------------------------------------------

    def poll(self, timeout: float = 0.0) -> ConsumerRecords:
        """Return records, waiting up to ``timeout`` seconds for some to arrive.

        Raises:
            IllegalStateError: nothing is assigned or subscribed.
            WakeupError: wakeup() was called.
            NoOffsetForPartitionError, OffsetOutOfRangeError: no position and auto.offset.reset=none.
            CorruptRecordError, RecordDeserializationError: a bad record (seek past it).
            KafkaError: any other error found by the network thread.
        """
        records = self._poll_with(timeout, self._collector.collect, _num_records, "poll()")
        return ConsumerRecords(records)

    def poll_arrow(self, timeout: float = 0.0) -> pa.RecordBatch:
        """:meth:`poll` as one ``pyarrow.RecordBatch``: the same records (same positions,
        ``max.poll.records``, ``read_committed`` and control-record handling, same errors),
        decoded by the record kernel straight from the fetched bytes into Arrow buffers, with
        no Python object per record. Deserializers do not apply: keys and values are bytes.

        Columns, in this order: ``key`` binary, ``value`` binary (both nullable), ``topic``
        string, ``partition`` int32, ``offset`` int64, ``timestamp`` timestamp[ms, tz=UTC],
        ``timestamp_type`` int32 (0 create time, 1 log-append time), ``headers``
        list<struct<key: string, value: binary>> (an empty list for a record without
        headers). Rows of one partition are in offset order. When nothing arrives in time,
        an empty batch with that schema.

        Raises:
            ImportError: pyarrow is not installed (``pip install 'kaflux[arrow]'``).
            IllegalStateError, WakeupError, KafkaError...: as :meth:`poll`.
        """
        try:
            import pyarrow  # noqa: F401  # checked first: no record is taken without it
        except ImportError as exc:
            raise ImportError(
                "Consumer.poll_arrow() needs pyarrow, which is not installed: "
                "install kaflux with the arrow extra (pip install 'kaflux[arrow]')"
            ) from exc
        columns = self._poll_with(timeout, self._collector.collect_columns, _num_rows, "poll_arrow()")
        return to_arrow(columns)

    def _poll_with(self, timeout: float, collect: Callable[[], T], count: Callable[[T], int], what: str) -> T:
        """The loop of :meth:`poll` and :meth:`poll_arrow`: ``collect()`` until it returns
        something (``count`` > 0) or ``timeout`` passes; then its last (empty) result."""
        with self._in_use():
            timeout_s = self._timeout_s(timeout)
            if self._subscription.subscription_type() is SubscriptionType.NONE:
                raise IllegalStateError(
                    f"{what} needs a subscription or an assignment: call subscribe() or assign()"
                )
            start = time.monotonic()
            deadline = start + timeout_s
            self._poll_metrics.poll_started(start * 1000)
            try:
                while True:
                    # The event feeds the poll timer and starts a pending (re)join; only the
                    # latter needs the network thread at once, and only outside a generation.
                    membership = self._membership
                    joining = (
                        membership is not None
                        and membership.group_metadata.generation_id < 0
                        and self._subscription.subscription_type() is not SubscriptionType.USER_ASSIGNED
                    )
                    self._thread.submit(PollEvent(monotonic_ms()), wake=joining)
                    self._check_wakeup()
                    self._run_commit_callbacks()
                    self._process_background_events()
                    records = collect()
                    if self._collector.released_fetches:
                        self._thread.wakeup()  # partitions became fetchable again: prefetch now
                    returned = count(records)
                    if returned:
                        self._records_returned += returned
                        return records
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return records
                    self._fetch_buffer.await_not_empty(
                        min(remaining, self._thread.max_time_to_wait_ms / 1000)
                    )
            finally:
                self._record_poll()

    def _record_poll(self) -> None:
        """The metrics of the poll that ends: once per poll, whatever it returned."""
        version = self._subscription.assignment_version
        if version != self._metrics_assignment:
            self._metrics_assignment = version
            self._poll_metrics.retain_partitions(self._subscription.assigned_partitions())
        tally = self._collector.tally
        now_ms = time.monotonic() * 1000
        if tally is None or not tally.records:
            self._poll_metrics.poll_ended(now_ms)
        else:
            self._poll_metrics.poll_ended(now_ms, tally.records, tally.bytes, tally.lags)
            tally.reset()

    def __iter__(self) -> Iterator[ConsumerRecord]:
        """Yield records forever (polling in 1-second slices) until the consumer is closed.

        Raises IllegalStateError, at the first ``next()``, on a consumer already closed."""
        self._ensure_open()
        while not self._closed:
            yield from self.poll(1.0)

    # -- positions ---------------------------------------------------------------------------------

    def seek(self, tp: TopicPartition, offset: int | OffsetAndMetadata) -> None:
        """Fetch ``tp`` from ``offset`` on the next poll.

        Raises:
            IllegalStateError: ``tp`` is not assigned.
            ValueError: the offset is negative.
        """
        with self._in_use():
            meta = offset if isinstance(offset, OffsetAndMetadata) else OffsetAndMetadata(offset)
            if isinstance(meta.offset, bool) or not isinstance(meta.offset, int) or meta.offset < 0:
                raise ValueError(f"seek offset must be a non-negative int, got {meta.offset!r}")
            self._subscription.seek(tp, FetchPosition(meta.offset, meta.leader_epoch))
            self._thread.wakeup()

    def _reset(self, partitions: Iterable[TopicPartition] | None, strategy: ResetStrategy) -> None:
        with self._in_use():
            targets = self._subscription.assigned_partitions() if partitions is None else list(partitions)
            for tp in targets:
                self._subscription.request_reset(tp, strategy)
            self._thread.wakeup()

    def seek_to_beginning(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Move to the earliest offset (of all assigned partitions by default); resolved lazily."""
        self._reset(partitions, ResetStrategy.EARLIEST)

    def seek_to_end(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Move to the end (of all assigned partitions by default); resolved lazily."""
        self._reset(partitions, ResetStrategy.LATEST)

    def position(self, tp: TopicPartition, timeout: float | None = None) -> int:
        """The offset of the next record to be returned for ``tp``.

        Raises:
            IllegalStateError: ``tp`` is not assigned.
            KafkaTimeoutError: the position could not be determined within ``timeout`` seconds.
            NoOffsetForPartitionError: no committed offset and auto.offset.reset=none.
        """
        with self._in_use():
            timeout_s = self._timeout_s(timeout)
            current = self._subscription.position(tp)
            if current is not None and self._subscription.has_all_positions([tp]):
                return current.offset
            self._call(
                CheckAndUpdatePositionsEvent(self._deadline_ms(timeout_s), partitions=[tp]),
                timeout_s,
                f"position({tp})",
            )
            resolved = self._subscription.position(tp)
            if resolved is None:
                raise KafkaTimeoutError(f"the position of {tp} is not known yet")
            return resolved.offset

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop fetching these partitions; data already buffered is kept for :meth:`resume`.

        Raises:
            IllegalStateError: a partition is not assigned.
        """
        self._guarded(lambda: self._subscription.pause(list(partitions)))

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        """Fetch these partitions again.

        Raises:
            IllegalStateError: a partition is not assigned.
        """
        self._guarded(lambda: self._subscription.resume(list(partitions)))
        self._thread.wakeup()

    def paused(self) -> set[TopicPartition]:
        """The paused partitions."""
        return self._guarded(self._subscription.paused)

    # -- commits -----------------------------------------------------------------------------------

    def commit_sync(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
        timeout: float | None = None,
    ) -> None:
        """Commit ``offsets`` (default: every consumed position) and wait, retrying retriable
        errors until ``timeout``. Earlier asynchronous commits finish first and their callbacks run.

        Raises:
            CommitFailedError: the group no longer accepts this member's commits.
            KafkaTimeoutError: not committed within ``timeout`` seconds.
            InvalidGroupIdError: no group.id was configured.
        """
        with self._in_use():
            timeout_s = self._timeout_s(timeout)
            deadline = time.monotonic() + timeout_s
            event = CommitEvent(self._deadline_ms(timeout_s), offsets=self._normalize(offsets), sync=True)
            self._call(event, timeout_s)
            for future, _ in list(self._async_commits):
                try:
                    future.exception(timeout=max(0.0, deadline - time.monotonic()))
                except FutureTimeoutError:
                    raise KafkaTimeoutError("earlier asynchronous commits did not finish in time") from None
            self._run_commit_callbacks()

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
        callback: CommitCallback | None = None,
    ) -> None:
        """Commit without waiting; ``callback(offsets, error)`` runs on this thread during a
        later poll(), commit or close(), in commit order. Failures are never retried."""
        with self._in_use():
            event = CommitEvent(2**62, offsets=self._normalize(offsets), sync=False)
            self._thread.submit(event)
            self._async_commits.append((event.future, callback))

    @staticmethod
    def _normalize(
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None,
    ) -> dict[TopicPartition, OffsetAndMetadata] | None:
        if offsets is None:
            return None
        result: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, value in offsets.items():
            meta = value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(value)
            if isinstance(meta.offset, bool) or not isinstance(meta.offset, int) or meta.offset < 0:
                raise ValueError(f"commit offset for {tp} must be a non-negative int, got {meta.offset!r}")
            result[tp] = meta
        return result

    def committed(
        self, partitions: Iterable[TopicPartition], timeout: float | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The committed offsets of ``partitions`` (None where nothing was committed).

        Raises:
            KafkaTimeoutError: no answer within ``timeout`` seconds.
            InvalidGroupIdError: no group.id was configured.
        """
        with self._in_use():
            timeout_s = self._timeout_s(timeout)
            wanted = list(dict.fromkeys(partitions))
            if not wanted:
                return {}
            result: dict[TopicPartition, OffsetAndMetadata | None] = self._call(
                FetchCommittedOffsetsEvent(self._deadline_ms(timeout_s), partitions=wanted), timeout_s
            )
            return {tp: result.get(tp) for tp in wanted}

    # -- offset lookups ----------------------------------------------------------------------------

    def _list_offsets(
        self, timestamps: dict[TopicPartition, int], timeout: float | None
    ) -> dict[TopicPartition, OffsetResult]:
        with self._in_use():
            timeout_s = self._timeout_s(timeout)
            if not timestamps:
                return {}
            event = ListOffsetsEvent(
                self._deadline_ms(timeout_s), timestamps=timestamps, require_timestamp=True
            )
            result: dict[TopicPartition, OffsetResult] = self._call(event, timeout_s)
            return result

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int], timeout: float | None = None
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """For each partition, the earliest offset whose timestamp is >= the given one
        (milliseconds), or None if there is none.

        Raises:
            ValueError: a timestamp is negative.
            KafkaTimeoutError: no answer within ``timeout`` seconds.
        """
        for tp, ts in timestamps.items():
            if isinstance(ts, bool) or not isinstance(ts, int) or ts < 0:
                raise ValueError(f"timestamp for {tp} must be a non-negative int (ms), got {ts!r}")
        result = self._list_offsets(dict(timestamps), timeout)
        return {
            tp: None if (r := result.get(tp)) is None else OffsetAndTimestamp(r[0], r[1], r[2])
            for tp in timestamps
        }

    def beginning_offsets(
        self, partitions: Iterable[TopicPartition], timeout: float | None = None
    ) -> dict[TopicPartition, int]:
        """The first offset of each partition."""
        return self._ends(partitions, -2, timeout)

    def end_offsets(
        self, partitions: Iterable[TopicPartition], timeout: float | None = None
    ) -> dict[TopicPartition, int]:
        """The offset after the last record of each partition (the LSO under read_committed)."""
        return self._ends(partitions, -1, timeout)

    def _ends(
        self, partitions: Iterable[TopicPartition], which: int, timeout: float | None
    ) -> dict[TopicPartition, int]:
        wanted = list(dict.fromkeys(partitions))
        result = self._list_offsets({tp: which for tp in wanted}, timeout)
        out: dict[TopicPartition, int] = {}
        for tp in wanted:
            r = result.get(tp)
            if r is None:
                raise KafkaError(
                    f"the broker returned no {'end' if which == -1 else 'beginning'} offset for {tp}"
                )
            out[tp] = r[0]
        return out

    def current_lag(self, tp: TopicPartition) -> int | None:
        """Records between the position and the end of ``tp`` as of the last fetch, without
        a network call; None while unknown."""
        return self._guarded(lambda: self._subscription.lag(tp, self._read_committed))

    # -- metadata ----------------------------------------------------------------------------------

    def partitions_for(self, topic: str, timeout: float | None = None) -> list[PartitionInfo]:
        """The partitions of ``topic`` (empty if it does not exist).

        As Java's ``partitionsFor``, a lost connection or a leader election is retried until
        ``timeout`` (default ``default.api.timeout.ms``), then :class:`KafkaTimeoutError`
        names the last failure; an error retrying cannot cure (e.g.
        :class:`TopicAuthorizationFailedError`) is raised at once."""
        with self._in_use():
            timeout_s = self._timeout_s(timeout)
            answer: MetadataAnswer = self._call(
                TopicMetadataEvent(self._deadline_ms(timeout_s), topic=topic), timeout_s
            )
            info = answer.topics.get(topic)
            return [] if info is None else [info.partitions[p] for p in sorted(info.partitions)]

    def list_topics(self, timeout: float | None = None) -> dict[str, list[PartitionInfo]]:
        """Every topic the consumer may read, with its partitions; failures are retried
        until ``timeout`` as in :meth:`partitions_for`."""
        with self._in_use():
            timeout_s = self._timeout_s(timeout)
            answer: MetadataAnswer = self._call(
                TopicMetadataEvent(self._deadline_ms(timeout_s), topic=None), timeout_s
            )
            return {
                name: [info.partitions[p] for p in sorted(info.partitions)]
                for name, info in sorted(answer.topics.items())
                if not (info.is_internal and self._config.exclude_internal_topics)
            }

    # -- lifecycle ---------------------------------------------------------------------------------

    def wakeup(self) -> None:
        """Interrupt the current blocking call, or the next one, with WakeupError. Any thread."""
        with self._wakeup_lock:
            waiting = self._waiting_on
            if waiting is not None and not waiting.done():
                fail(waiting, WakeupError("the consumer was woken up by wakeup()"))
            else:
                self._wakeup_requested = True
        self._fetch_buffer.wakeup()

    def close(self, timeout: float = 30.0) -> None:
        """Commit consumed offsets (with auto-commit), finish pending commits and stop the
        network thread, all within ``timeout`` seconds. Idempotent."""
        self._acquire()
        try:
            if self._closed or self._closing:
                return  # closed already, or close() called again from a callback of this close
            deadline = time.monotonic() + timeout_seconds(timeout, 30.0)
            self._closing = True
            with self._wakeup_lock:
                self._wakeup_requested = False
            if self._subscription.subscription_type() in (
                SubscriptionType.AUTO_TOPICS,
                SubscriptionType.AUTO_PATTERN,
            ):
                # Leaving commits (with auto-commit) and runs the revocation callback.
                try:
                    self._leave_group(max(0.0, deadline - time.monotonic()), on_close=True)
                except Exception as exc:
                    log.warning("%s: error while leaving the group on close: %s", self.client_id, exc)
            elif self._config.auto_commit and self._subscription.all_consumed():
                remaining = max(0.0, deadline - time.monotonic())
                event = CommitEvent(self._deadline_ms(remaining), offsets=None, sync=True)
                try:
                    self._thread.submit(event)
                    event.future.result(timeout=remaining)
                except (KafkaError, FutureTimeoutError) as exc:
                    log.warning("%s: commit on close failed: %s", self.client_id, exc)
            # Only now is the consumer closed: the revocation callbacks above may still call
            # commit_sync() and the other methods, as they may in Java.
            self._closed = True
            self._thread.close(max(0.0, deadline - time.monotonic()))
            self._run_commit_callbacks_after_close()
        finally:
            self._closed = True
            self._release()

    def _run_commit_callbacks_after_close(self) -> None:
        for future, _ in self._async_commits:
            if not future.done():
                fail(future, KafkaError("the consumer closed before the commit completed"))
        self._run_commit_callbacks()

    def metrics(self, timeout: float = METRICS_TIMEOUT_S) -> dict[str, dict[str, float]]:
        """The consumer's metrics, with Java's names and meanings: ``{group: {name: value}}``.

        Groups: ``consumer-metrics`` (poll timing, network I/O), ``consumer-fetch-manager-metrics``
        (records and bytes consumed, fetch latency and rate, lag; per partition in
        ``consumer-fetch-manager-metrics,topic=<t>,partition=<p>``, dots in the topic replaced
        by underscores as Java does), ``consumer-coordinator-metrics`` (with a group.id: commits,
        rebalances, heartbeats, assigned partitions), ``consumer-node-metrics,node-id=node-<id>``
        per broker, and kaflux's own counters in ``kaflux-consumer-metrics``. Windowed values
        (rates, averages, maxima) cover ``metrics.num.samples`` samples of
        ``metrics.sample.window.ms``; an average or maximum with no value in the window is NaN.
        See :mod:`kaflux.metrics.clients` for what each metric counts.

        Any thread may call it. The network thread's metrics are measured there: this waits
        for them at most ``timeout`` seconds (the network thread answers at its next pass,
        normally within milliseconds). If they do not come in time (a busy network thread) or
        the consumer is closed, the last ones received are returned with this thread's
        current ones, so metrics() never blocks longer than ``timeout``.
        """
        network = self._network_metrics
        if not self._closed:
            timeout_s = max(0.0, timeout)
            event = MetricsSnapshotEvent(self._deadline_ms(timeout_s))
            self._thread.submit(event)
            try:
                network = event.future.result(timeout=timeout_s)
            except (FutureTimeoutError, KafkaError) as exc:
                log.debug("%s: metrics of the network thread not received in time: %s", self.client_id, exc)
            else:
                self._network_metrics = network
        return merge_snapshots(network, self._metrics.snapshot(monotonic_ms()))
