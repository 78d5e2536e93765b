"""``kaflux.Consumer``: the public consumer API. [app]

Theory of operation. Every public method runs on the caller's thread (the application
thread) and does no I/O. Calls that need the cluster become application events for the
consumer's network thread; blocking ones wait on the event's future with a deadline.
``poll()`` collects records from the fetch buffer, which the network thread keeps filled,
and handles background events (errors) between waits. ``wakeup()`` and ``metrics()`` are the
only methods other threads may call: wakeup() fails the future being waited on, or the next
one, with WakeupError.

The facade keeps the public API; the jobs behind it have modules of their own: the single-user
guard (``access.py``), wakeup (``wakeup.py``), background events (``background_events.py``),
listener and commit callbacks (``callback_invokers.py``), the offset and metadata calls
(``offset_calls.py``, mixed in) and the poll metrics (``consumer_metrics.py``). Each blocking
call is written once as wait steps (:mod:`kaflux.blocking`): this class runs them blocking,
``kaflux.aio.AsyncConsumer`` awaits them on an event loop.

Metrics. Each thread records into a registry of its own: this thread the time between polls
and what poll() returns (records, bytes, lag), the network thread its requests, the group and
the network I/O. ``metrics()`` merges this thread's registry with a snapshot of the network
thread's, which it asks for with an event and waits for at most a short timeout.
"""

from __future__ import annotations

import itertools
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from kaflux.blocking import DoneWait, FutureWait, SignalWait, Steps, blocking, run_sync
from kaflux.closeable import Closeable
from kaflux.config import ConsumerConfig
from kaflux.consumer.access import SingleThreadGuard
from kaflux.consumer.callback_invokers import CommitCallback, CommitCallbackInvoker, RebalanceListenerInvoker
from kaflux.consumer.close_options import CloseOptions, GroupMembershipOperation, resolve_close_arguments
from kaflux.consumer.completed_fetch import Deserializer
from kaflux.consumer.consumer_record import ConsumerRecord, ConsumerRecords
from kaflux.consumer.events import (
    AssignmentChangeEvent,
    AutoCommittedEvent,
    CommitEvent,
    CompletableEvent,
    EnforceRebalanceEvent,
    GroupStateEvent,
    LeaveGroupEvent,
    MetricsSnapshotEvent,
    PollEvent,
    SubscriptionChangeEvent,
)
from kaflux.consumer.fetch_buffer import FetchBuffer
from kaflux.consumer.fetch_collector import FetchCollector
from kaflux.consumer.membership.group import GroupMetadata, GroupState
from kaflux.consumer.offset_calls import OffsetCalls
from kaflux.consumer.rebalance_listener import ConsumerRebalanceListener
from kaflux.consumer.subscription_state import (
    FetchPosition,
    ResetStrategy,
    SubscriptionState,
    SubscriptionType,
)
from kaflux.consumer.validation import check_assignment, check_subscription
from kaflux.consumer.wakeup import WakeupTrigger
from kaflux.errors import (
    IllegalStateError,
    InvalidGroupIdError,
    KafkaError,
)
from kaflux.interceptors import ConsumerInterceptor, ConsumerInterceptors, load_interceptors
from kaflux.metrics.clients import NetworkMetrics, PollMetrics
from kaflux.metrics.registry import MetricsRegistry, Snapshot, merge_snapshots
from kaflux.metrics.stats import MetricConfig
from kaflux.network.clock import monotonic_ms
from kaflux.structs import OffsetAndMetadata, SubscriptionPattern, TopicPartition
from kaflux.timeouts import timeout_seconds

if TYPE_CHECKING:
    import pyarrow as pa


log = logging.getLogger(__name__)
T = TypeVar("T")
__all__ = ["METRICS_TIMEOUT_S", "CommitCallback", "Consumer"]
_client_ids = itertools.count(1)
#: how long metrics() waits for the network thread's half by default, in seconds
METRICS_TIMEOUT_S = 0.5


def _num_records(records: dict[TopicPartition, list[ConsumerRecord]]) -> int:
    return sum(map(len, records.values()))


def _num_rows(batch: pa.RecordBatch) -> int:
    return int(batch.num_rows)


class Consumer(OffsetCalls, Closeable):
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
        interceptors: Sequence[ConsumerInterceptor] | None = None,
    ) -> None:
        """Validate ``config`` (Kafka consumer keys, Java defaults) and start the network thread.

        ``interceptors`` (and the classes of ``interceptor.classes``) see what poll() returns
        and what is committed (:class:`kaflux.ConsumerInterceptor`, :mod:`kaflux.interceptors`).

        Raises:
            ConfigError: a key is unknown, a value has the wrong type or is out of range, or an
                interceptor class cannot be loaded.
        """
        # The network stack and the request managers: imported here, so that importing kaflux
        # costs what the API needs and a process pays for the engine when it makes a client.
        from kaflux.consumer.assignors import assignor_for_name, rebalance_protocol_for
        from kaflux.consumer.background_events import BackgroundEventHandler
        from kaflux.consumer.components import build_consumer_components
        from kaflux.consumer.consumer_metrics import PollRecorder, add_kaflux_gauges
        from kaflux.network.client_telemetry import ClientTelemetry
        from kaflux.network.factory import build_network
        from kaflux.network.network_thread import NetworkThread

        self._config = config_ = ConsumerConfig.from_dict(config)
        # Checked with or without a group.id, as Java checks its config.
        assignors = [assignor_for_name(name) for name in config_.partition_assignment_strategy]
        rebalance_protocol_for(assignors)
        group = config_.group_id
        self.client_id = config_.client_id or f"consumer-{group or 'nogroup'}-{next(_client_ids)}"
        found = load_interceptors(
            ConsumerInterceptor, "consumer", self, interceptors, config_.interceptor_classes, config
        )
        #: None without interceptors: poll() checks this one attribute per call
        self._interceptors = ConsumerInterceptors(self.client_id, found) if found else None
        on_commit = None if self._interceptors is None else self._interceptors.on_commit
        self._read_committed = config_.isolation_level == "read_committed"
        duration_ms = config_.reset_duration_ms
        self._subscription = SubscriptionState(
            ResetStrategy.BY_DURATION
            if duration_ms is not None
            else ResetStrategy(config_.auto_offset_reset),
            reset_duration_ms=duration_ms,
        )
        self._fetch_buffer = FetchBuffer()
        self._background_events = BackgroundEventHandler(
            self.client_id, self._subscription, self._fetch_buffer.wakeup, on_commit
        )
        post_event = self._background_events.post
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
            post_event=self._background_events.post,
            on_error=self._background_events.post_error,
            metrics=network_metrics,
            on_auto_committed=None
            if on_commit is None
            else lambda offsets: post_event(AutoCommittedEvent(dict(offsets))),
        )
        self._membership = parts.membership
        network.metadata.add_error_listener(self._background_events.on_topic_error)
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
        self._poll_metrics = PollRecorder(PollMetrics(self._metrics), self._subscription, self._collector)
        # KIP-714: the network thread's metrics, pushed as the broker's subscription asks
        self._telemetry = ClientTelemetry(
            config_.enable_metrics_push, self.client_id, network_metrics.snapshot
        )
        managers = [*parts.managers, *self._telemetry.managers]
        self._thread = NetworkThread(
            f"kaflux-consumer-network-{self.client_id}", network.delegate, managers, parts.processor
        )
        self._listeners = RebalanceListenerInvoker(
            self._fetch_buffer, self._subscription, self._thread.submit
        )
        self._commit_callbacks = CommitCallbackInvoker(self.client_id, on_commit)
        self._guard = SingleThreadGuard()
        self._wakeup = WakeupTrigger(self._fetch_buffer.wakeup)
        self._closed = False
        self._closing = False
        self._records_returned = 0
        add_kaflux_gauges(
            self._metrics,
            records_returned=lambda: self._records_returned,
            fetch_requests=lambda: self._fetcher.fetches_sent,
            fetch_buffer_bytes=self._fetch_buffer.size_bytes,
            network_loops=lambda: self._thread.loop_count,
            subscription=self._subscription,
        )
        self._thread.start()

    # -- single-threaded access ---------------------------------------------------------------

    @contextmanager
    def _in_use(self) -> Iterator[None]:
        """Hold the consumer as its only user, for one call on an open consumer."""
        with self._guard:
            self._ensure_open()
            yield

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

    def _call(self, event: CompletableEvent, timeout_s: float, what: str | None = None) -> Steps[Any]:
        """Submit ``event`` and wait for its result (interruptible by wakeup()). ``what``
        names the operation in a timeout message."""
        self._wakeup.activate(event.future)
        try:
            self._thread.submit(event)
            # The network thread fails the event at its deadline, naming the cause; the extra
            # second only guards against a network thread that cannot.
            return (
                yield FutureWait(
                    event.future,
                    timeout_s + 1.0,
                    what or type(event).__name__,
                    why=self._reachability.unreachable,
                )
            )
        finally:
            self._wakeup.deactivate()

    def _deadline_ms(self, timeout_s: float) -> int:
        return monotonic_ms() + int(timeout_s * 1000)

    def _process_background_events(self) -> Steps[None]:
        """Run requested rebalance callbacks and raise the first error (others are logged)."""
        yield from self._background_events.process(self._listeners.invoke)

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
            run_sync(
                self._call(AssignmentChangeEvent(self._deadline_ms(timeout), partitions=wanted), timeout)
            )
            self._fetch_buffer.retain_all(set(wanted))

    def _unassign(self) -> None:
        self._subscription.unsubscribe()
        self._fetch_buffer.clear()

    def subscribe(
        self,
        topics: Iterable[str] | None = None,
        pattern: str | re.Pattern[str] | SubscriptionPattern | None = None,
        listener: ConsumerRebalanceListener | None = None,
    ) -> None:
        """Join the consumer group and read the partitions it assigns to this member.

        Give ``topics`` (names) or ``pattern``: a :class:`~kaflux.SubscriptionPattern` (RE2J
        syntax, resolved by the group coordinator, with ``group.protocol=consumer`` only, as
        Java), or a ``str`` / ``re.Pattern`` (a Python regex matched by this client against
        whole topic names in cluster metadata, re-evaluated as topics appear). The join happens
        during the next :meth:`poll`; ``listener`` methods run there, on this thread. An empty
        list is the same as :meth:`unsubscribe`.

        Raises:
            InvalidGroupIdError: no group.id was configured.
            IllegalStateError: partitions were assigned manually with assign().
            ValueError / TypeError: neither or both of topics and pattern, or bad values.
            InvalidTopicError: a topic name that Kafka refuses (empty, illegal characters...),
                as :meth:`Producer.send` would.
            IllegalStateError: a SubscriptionPattern with group.protocol=classic (Java's
                classic consumer refuses it too).
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
                    run_sync(self._leave_group(self._timeout_s(None), on_close=False))
                    return
                self._subscription.subscribe(names)
                self._fetch_buffer.retain_all(
                    {tp for tp in self._subscription.assigned_partitions() if tp.topic in set(names)}
                )
            elif isinstance(pattern, SubscriptionPattern):
                if self._config.group_protocol != "consumer":
                    raise IllegalStateError(
                        "subscribe(pattern=SubscriptionPattern(...)) needs group.protocol=consumer "
                        "(the coordinator resolves it, KIP-848); with group.protocol=classic give the "
                        "pattern as a str (a Python regex this client resolves)"
                    )
                if not isinstance(pattern.pattern, str) or not pattern.pattern:
                    raise ValueError("a SubscriptionPattern needs a non-empty regex string")
                self._subscription.subscribe_re2j(pattern.pattern)
            else:
                compiled = re.compile(pattern) if isinstance(pattern, str) else pattern
                if not isinstance(compiled, re.Pattern):
                    raise TypeError("pattern must be a str or re.Pattern")
                self._subscription.subscribe_pattern(compiled)
            self._listeners.listener = listener
            self._thread.submit(SubscriptionChangeEvent(listener is not None))

    @blocking
    def unsubscribe(self) -> Steps[None]:
        """Leave the group (after ``on_partitions_revoked``) or drop the manual assignment;
        buffered data is discarded."""
        with self._in_use():
            yield from self._leave_group(self._timeout_s(None), on_close=False)

    def _leave_group(
        self,
        timeout_s: float,
        *,
        on_close: bool,
        membership: GroupMembershipOperation = GroupMembershipOperation.DEFAULT,
    ) -> Steps[None]:
        """Revoke (running the listener here) and leave (as ``membership`` says, on close),
        within ``timeout_s``; then unsubscribe."""
        try:
            if self._membership is not None and self._subscription.subscription_type() in (
                SubscriptionType.AUTO_TOPICS,
                SubscriptionType.AUTO_PATTERN,
                SubscriptionType.AUTO_PATTERN_RE2J,
            ):
                event = LeaveGroupEvent(
                    self._deadline_ms(timeout_s), on_close=on_close, membership=membership
                )
                self._thread.submit(event)
                deadline = time.monotonic() + timeout_s
                while not event.future.done() and time.monotonic() < deadline:
                    yield from self._process_background_events()
                    yield SignalWait(self._fetch_buffer, min(0.1, max(0.0, deadline - time.monotonic())))
                yield from self._process_background_events()
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

    @blocking
    def group_state(self, timeout: float | None = None) -> Steps[GroupState]:
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
            state: GroupState = yield from self._call(
                GroupStateEvent(self._deadline_ms(timeout_s)), timeout_s
            )
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

    @blocking
    def poll(self, timeout: float = 0.0) -> Steps[ConsumerRecords]:
        """Return records, waiting up to ``timeout`` seconds for some to arrive.

        Raises:
            IllegalStateError: nothing is assigned or subscribed.
            WakeupError: wakeup() was called.
            NoOffsetForPartitionError, OffsetOutOfRangeError: no position and auto.offset.reset=none.
            CorruptRecordError, RecordDeserializationError: a bad record (seek past it).
            DeserializerUnavailableError: a deserializer's service (the Schema Registry) did
                not answer; the record stays, the next poll() reads it again.
            KafkaError: any other error found by the network thread.
        """
        records = yield from self._poll_with(timeout, self._collector.collect, _num_records, "poll()")
        if self._interceptors is not None and records:
            records = self._interceptors.on_consume_by_partition(records)
        return ConsumerRecords(records)

    @blocking
    def poll_arrow(self, timeout: float = 0.0) -> Steps[pa.RecordBatch]:
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
        batch: pa.RecordBatch = yield from self._poll_with(
            timeout, self._collector.collect_arrow, _num_rows, "poll_arrow()"
        )
        if self._interceptors is not None and batch.num_rows:
            batch = self._interceptors.on_consume_batch(batch)
        return batch

    def _poll_with(
        self, timeout: float, collect: Callable[[], T], count: Callable[[T], int], what: str
    ) -> Steps[T]:
        """The loop of :meth:`poll` and :meth:`poll_arrow`: ``collect()`` until it returns
        something (``count`` > 0) or ``timeout`` passes; then its last (empty) result.

        It runs once per poll: what it does per pass is kept to checks that cost no lock when
        there is nothing to do (wakeup, background events, commit callbacks)."""
        guard = self._guard
        guard.acquire()  # not self._in_use(): a generator context manager costs a call's worth
        try:
            self._ensure_open()
            timeout_s = self._timeout_s(timeout)
            subscription = self._subscription
            if subscription.subscription_type() is SubscriptionType.NONE:
                raise IllegalStateError(
                    f"{what} needs a subscription or an assignment: call subscribe() or assign()"
                )
            start = time.monotonic()
            deadline = start + timeout_s
            poll_metrics = self._poll_metrics
            poll_metrics.poll_started(start * 1000)
            thread = self._thread
            background_events = self._background_events
            try:
                while True:
                    # The event feeds the poll timer and the auto-commit timer and starts a
                    # pending (re)join; only the latter needs the network thread at once, and
                    # only outside a generation. Without a group.id it has nothing to drive.
                    membership = self._membership
                    if membership is not None:
                        joining = (
                            membership.group_metadata.generation_id < 0
                            and subscription.subscription_type() is not SubscriptionType.USER_ASSIGNED
                        )
                        thread.submit(PollEvent(monotonic_ms()), wake=joining)
                    self._wakeup.check()
                    self._commit_callbacks.run_completed()
                    if background_events.has_pending():
                        yield from self._process_background_events()
                    records = collect()
                    if self._collector.released_fetches:
                        thread.wakeup()  # partitions became fetchable again: prefetch now
                    returned = count(records)
                    if returned:
                        self._records_returned += returned
                        return records
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return records
                    yield SignalWait(self._fetch_buffer, min(remaining, thread.max_time_to_wait_ms / 1000))
            finally:
                poll_metrics.poll_ended()
        finally:
            guard.release()

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

    def current_lag(self, tp: TopicPartition) -> int | None:
        """Records between the position and the end of ``tp`` as of the last fetch, without
        a network call; None while unknown."""
        return self._guarded(lambda: self._subscription.lag(tp, self._read_committed))

    # -- lifecycle ---------------------------------------------------------------------------------

    def wakeup(self) -> None:
        """Interrupt the current blocking call, or the next one, with WakeupError. Any thread."""
        self._wakeup.wakeup()

    @blocking
    def close(
        self,
        options: CloseOptions | float | None = None,
        /,
        *,
        timeout: float | None = None,
        group_membership: GroupMembershipOperation | None = None,
    ) -> Steps[None]:
        """Commit consumed offsets (with auto-commit), run ``on_partitions_revoked``, leave the
        group, finish pending commits and stop the network thread, all within the timeout
        (30 s by default). Idempotent.

        Takes a :class:`~kaflux.CloseOptions` (Java's ``close(CloseOptions)``, KIP-1092) or a
        timeout in seconds positionally, or the keywords: ``close()``, ``close(10)``,
        ``close(timeout=10, group_membership=GroupMembershipOperation.LEAVE_GROUP)``,
        ``close(CloseOptions(timeout=10, group_membership=...))``. ``group_membership``
        (:class:`~kaflux.GroupMembershipOperation`) decides whether the coordinator is told:
        DEFAULT leaves for a dynamic member and keeps a static member's place until its
        session expires; LEAVE_GROUP leaves, also a static member; REMAIN_IN_GROUP sends no
        leave, also for a dynamic member (listed with its partitions until its session
        expires). The commit and the callbacks happen whatever it says.

        Raises:
            InvalidArgumentError: a wrong type or value (the consumer is left open), or a
                CloseOptions together with keywords.
        """
        # Bad arguments are refused before anything happens: the consumer is left open.
        budget, operation = resolve_close_arguments(options, timeout, group_membership)
        self._guard.acquire()
        try:
            if self._closed or self._closing:
                return  # closed already, or close() called again from a callback of this close
            deadline = time.monotonic() + budget
            self._closing = True
            self._wakeup.clear()
            if self._subscription.subscription_type() in (
                SubscriptionType.AUTO_TOPICS,
                SubscriptionType.AUTO_PATTERN,
                SubscriptionType.AUTO_PATTERN_RE2J,
            ):
                # Leaving commits (with auto-commit) and runs the revocation callback.
                try:
                    yield from self._leave_group(
                        max(0.0, deadline - time.monotonic()), on_close=True, membership=operation
                    )
                except Exception as exc:
                    log.warning("%s: error while leaving the group on close: %s", self.client_id, exc)
            elif self._config.auto_commit and self._subscription.all_consumed():
                remaining = max(0.0, deadline - time.monotonic())
                event = CommitEvent(self._deadline_ms(remaining), offsets=None, sync=True)
                try:
                    self._thread.submit(event)
                    committed = yield FutureWait(event.future, remaining, "the commit on close")
                except KafkaError as exc:
                    log.warning("%s: commit on close failed: %s", self.client_id, exc)
                else:
                    if self._interceptors is not None:
                        self._interceptors.on_commit(committed)
            # Only now is the consumer closed: the revocation callbacks above may still call
            # commit_sync() and the other methods, as they may in Java.
            self._closed = True
            remaining = max(0.0, deadline - time.monotonic())
            yield DoneWait(self._thread.request_close(remaining), remaining + 1.0)
            self._commit_callbacks.run_after_close()
            if self._interceptors is not None:
                self._background_events.process_after_close()
                self._interceptors.close()
        finally:
            self._closed = True
            self._guard.release()

    @blocking
    def metrics(self, timeout: float = METRICS_TIMEOUT_S) -> Steps[dict[str, dict[str, float]]]:
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
                network = yield FutureWait(event.future, timeout_s, "metrics()")
            except KafkaError as exc:
                log.debug("%s: metrics of the network thread not received in time: %s", self.client_id, exc)
            else:
                self._network_metrics = network
        return merge_snapshots(network, self._metrics.snapshot(monotonic_ms()))

    @blocking
    def client_instance_id(self, timeout: float) -> Steps[uuid.UUID | None]:
        """The client instance id the brokers gave this consumer for its metrics push (KIP-714,
        Java's ``clientInstanceId(Duration)``), waiting at most ``timeout`` seconds for the
        first telemetry subscription; None if none came in time or the brokers have no
        client-telemetry APIs. Any thread may call it.

        Raises:
            IllegalStateError: ``enable.metrics.push`` is false, or the consumer is closed.
        """
        if self._closed:
            raise IllegalStateError("this consumer is closed")
        return (yield from self._telemetry.client_instance_id(timeout))
