"""``kaflux.Producer``: the public producer API. [app: every public method; the network thread
is started here and owns all I/O]

``send`` only appends to the shared accumulator (after learning the topic's partition count,
which it asks the network thread for once per topic), so that per-record work stays small: the
record is encoded into its batch at once (the compiled encoder when built) and gets a light
future that shares its batch's result. ``send_arrow`` does the same for a whole Arrow batch
at a time. The network thread batches, sends, retries and resolves the futures (future
callbacks and delivery callbacks therefore run on the network thread and must be quick).

Metrics (``metrics()``) are recorded on the network thread only (the send path records
nothing), in its own registry, and measured there when asked for with an event.

Idempotence is on by default, as in Java (``enable.idempotence``); a ``transactional.id``
enables transactions. Transactional calls are events to the network thread, where the
:class:`~kaflux.producer.transaction_manager.TransactionManager` runs them; the application
waits on their futures, bounded by ``max.block.ms`` or the call's ``timeout``.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from kaflux.blocking import DoneWait, FutureWait, SignalWait, Steps, blocking, run_sync
from kaflux.closeable import Closeable
from kaflux.config import ProducerConfig
from kaflux.errors import (
    IllegalStateError,
    InvalidArgumentError,
    InvalidTxnStateError,
    KafkaError,
    KafkaTimeoutError,
    TransactionAbortableError,
)
from kaflux.interceptors import ProducerInterceptor, ProducerInterceptors, ProducerRecord, load_interceptors
from kaflux.metrics.clients import KAFLUX_PRODUCER_METRICS, NetworkMetrics, ProducerMetrics
from kaflux.metrics.registry import MetricsRegistry, Snapshot, merge_snapshots
from kaflux.metrics.stats import MetricConfig
from kaflux.network.clock import monotonic_ms
from kaflux.producer.accumulator import BATCH_OVERHEAD, BufferSignal, ProducerBatch, RecordAccumulator
from kaflux.producer.events import MetricsSnapshotEvent, TopicPartitionsEvent, TransactionalEvent
from kaflux.producer.futures import BatchFuture, DeliveryCallback
from kaflux.producer.partitioner import StickyPartitioner
from kaflux.producer.txn_state import GroupMetadataLike, TxnState
from kaflux.records import codec_id, kernels
from kaflux.serialization import SerializationContext, takes_context
from kaflux.serialization import Serializer as ContextSerializer
from kaflux.structs import OffsetAndMetadata, PartitionInfo, RecordMetadata, TopicPartition
from kaflux.timeouts import MAX_TIMEOUT_S, explain, timeout_seconds
from kaflux.validation import (
    check_partition_number,
    check_record_size,
    check_timestamp,
    check_topic,
    record_size_upper_bound,
)

if TYPE_CHECKING:  # the network stack is imported when a Producer is made, not with this module
    from kaflux.producer.transaction_manager import TransactionManager

#: a plain ``fn(value) -> bytes``, or a :class:`kaflux.serialization.Serializer` (sees the topic,
#: key or value, and the headers)
Serializer = Callable[[Any], bytes | None] | ContextSerializer
Headers = Sequence[tuple[str, bytes | None]] | Mapping[str, bytes | None]
_client_ids = itertools.count(1)

_time_ns = time.time_ns
_monotonic = time.monotonic
#: how long metrics() waits for the network thread's metrics by default, in seconds
METRICS_TIMEOUT_S = 0.5

#: send_arrow() cuts each partition's rows into batches of up to this many bytes (at least
#: batch.size, at most half of max.request.size)
ARROW_BATCH_BYTES = 512 * 1024


def _coerce(what: str, data: object) -> bytes | None:
    if data is None or isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"{what} must be bytes or None (or give a {what}_serializer), got {type(data).__name__}")


def _check_partition_and_timestamp(partition: object, timestamp: object) -> None:
    if partition is not None:
        check_partition_number(partition)
    if timestamp is not None:
        check_timestamp(timestamp)


def _header_list(headers: Headers) -> list[tuple[str, bytes | None]]:
    items = list(headers.items()) if isinstance(headers, Mapping) else list(headers)
    for item in items:
        if not (
            isinstance(item, tuple)
            and len(item) == 2
            and isinstance(item[0], str)
            and (item[1] is None or isinstance(item[1], bytes))
        ):
            raise TypeError(f"headers must be (str, bytes | None) pairs, got {item!r}")
    return items


def _batch_acknowledger(interceptors: ProducerInterceptors) -> Callable[[Future[Any]], None]:
    """A done-callback of a ``send_arrow()`` batch future that reports it to the interceptors."""

    def done(future: Future[Any]) -> None:
        error = future.exception()
        interceptors.on_batch_acknowledgement(None if error is not None else future.result(), error)

    return done


class Producer(Closeable):
    """Sends records to Kafka topics; idempotent by default, transactional with a
    ``transactional.id``.

    Example::

        with Producer({"bootstrap.servers": "127.0.0.1:9092"}) as producer:
            producer.send("orders", b'{"id": 1}', key=b"customer-7")
            producer.flush(10.0)

    Transactions (see docs/clients.md, "Exactly once")::

        producer = Producer({"bootstrap.servers": ..., "transactional.id": "billing-1"})
        producer.init_transactions()
        producer.begin_transaction()
        producer.send("out", b"...")
        producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
        producer.commit_transaction()
    """

    def __init__(
        self,
        config: Mapping[str, object],
        *,
        key_serializer: Serializer | None = None,
        value_serializer: Serializer | None = None,
        interceptors: Sequence[ProducerInterceptor] | None = None,
    ) -> None:
        """Validate ``config`` (Kafka producer keys) and start the network thread.

        ``interceptors`` (and the classes of ``interceptor.classes``) see every record sent
        and its outcome (:class:`kaflux.ProducerInterceptor`, :mod:`kaflux.interceptors`).

        Raises:
            ConfigError: a key is unknown, a value invalid, or settings conflict (e.g.
                ``enable.idempotence=true`` with ``acks=1``), or an interceptor class cannot
                be loaded.
        """
        # The network stack and the request managers: imported here, so that importing kaflux
        # costs what the API needs and a process pays for the engine when it makes a client.
        from kaflux.network.client_telemetry import ClientTelemetry
        from kaflux.network.factory import build_network
        from kaflux.network.network_thread import NetworkThread
        from kaflux.producer.event_processor import ProducerEventProcessor
        from kaflux.producer.sender import ProduceRequestManager
        from kaflux.producer.transaction_manager import TransactionManager

        self._config = config_ = ProducerConfig.from_dict(config)
        self.client_id = client_id = config_.client_id or f"producer-{next(_client_ids)}"
        found = load_interceptors(
            ProducerInterceptor, "producer", self, interceptors, config_.interceptor_classes, config
        )
        #: None without interceptors (then send() is the plain method: nothing to check per record)
        self._interceptors = ProducerInterceptors(client_id, found) if found else None
        if self._interceptors is not None:
            self.send = self._intercepted_send  # type: ignore[method-assign]
        self._key_serializer: Any = key_serializer
        self._value_serializer: Any = value_serializer
        self._key_takes_context = takes_context(key_serializer)
        self._value_takes_context = takes_context(value_serializer)
        self._encoder = kernels.encoder()
        self._partition_for_key: Callable[[bytes, int], int] = self._encoder.partition_for_key
        idempotent = config_.enable_idempotence
        self._accumulator = RecordAccumulator(
            batch_size=config_.batch_size,
            linger_ms=config_.linger_ms,
            buffer_memory=config_.buffer_memory,
            compression=codec_id(config_.compression_type),
            compression_level=config_.compression_level,
            delivery_timeout_ms=config_.delivery_timeout_ms,
            max_in_flight_per_partition=config_.max_in_flight_requests_per_connection if idempotent else 1,
            encoder=self._encoder,
            max_block_ms=config_.max_block_ms,
        )
        network = build_network(config_, client_id, allow_auto_create_topics=True)
        #: the network thread's metrics (the only ones: the send path records nothing)
        network_metrics = MetricsRegistry(
            MetricConfig(config_.metrics_num_samples, config_.metrics_sample_window_ms)
        )
        network.client.enable_metrics(
            NetworkMetrics(network_metrics, "producer", network.client.connection_count)
        )
        #: the last snapshot of them
        self._network_metrics: Snapshot = {}
        self._tm: TransactionManager | None = None
        if idempotent:
            self._tm = TransactionManager(
                transactional_id=config_.transactional_id,
                transaction_timeout_ms=config_.transaction_timeout_ms,
                cluster=network.cluster,
                retry_backoff=network.retry_backoff,
                has_incomplete_batches=self._accumulator.has_incomplete,
            )
        self._transactional = config_.transactional_id is not None
        self._sender = ProduceRequestManager(
            self._accumulator,
            network.cluster,
            network.metadata,
            acks=config_.acks_value,
            request_timeout_ms=config_.request_timeout_ms,
            retries=config_.retries,
            delivery_timeout_ms=config_.delivery_timeout_ms,
            retry_backoff=network.retry_backoff,
            transaction_manager=self._tm,
            max_in_flight_per_node=config_.max_in_flight_requests_per_connection,
            connections=network.client,
            metrics=ProducerMetrics(
                network_metrics,
                requests_in_flight=lambda: self._sender.in_flight_requests,
                buffer_total_bytes=self._accumulator.buffer_memory,
                buffer_available_bytes=self._accumulator.available_bytes,
            ),
        )
        managers: list[Any] = [network.metadata, self._sender]
        if self._tm is not None:
            managers.append(self._tm)
        # KIP-714: the network thread's metrics (org.apache.kafka.producer.*), as brokers ask
        self._telemetry = ClientTelemetry(config_.enable_metrics_push, client_id, network_metrics.snapshot)
        managers.extend(self._telemetry.managers)
        self._reachability = network.client.reachability
        self._thread = NetworkThread(
            f"kaflux-producer-network-{client_id}",
            network.delegate,
            managers,
            ProducerEventProcessor(network, self._tm, network_metrics),
        )
        #: topic -> its partitions as TopicPartition objects (the list's length is the count)
        self._topics: dict[str, list[TopicPartition]] = {}
        self._sticky = StickyPartitioner()
        self._arrow_sticky: dict[str, int] = {}
        self._max_block_s = config_.max_block_ms / 1000
        self._linger_ms = config_.linger_ms
        self._max_record = min(config_.max_request_size, config_.buffer_memory)
        #: a value this long may make the record too large (checked in full then)
        self._max_value = max(0, self._max_record - 2**16)
        self._append = self._accumulator.append
        self._ignore_keys = config_.partitioner_ignore_keys
        self._all_complete = BufferSignal(self._accumulator, time.monotonic, all_complete=True)
        self._room = BufferSignal(self._accumulator, time.monotonic, all_complete=False)
        self._closed = False
        self._thread.start()

    # -- sending ------------------------------------------------------------------------------

    def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: Headers | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
        callback: DeliveryCallback | None = None,
    ) -> Future[RecordMetadata]:
        """Queue a record; the future resolves to where it landed, or to the send error.

        ``callback(metadata, error)``, if given, runs on the network thread once the record is
        acknowledged (``error`` None) or has failed (``metadata.offset`` -1), in send order
        within a partition. Blocks at most ``max.block.ms`` (to learn the topic's partitions,
        or while ``buffer.memory`` is full). Keyed records are partitioned like Java's client.

        Raises:
            KafkaTimeoutError: metadata or buffer space was not available within max.block.ms.
            RecordTooLargeError: the record is larger than max.request.size or buffer.memory.
            InvalidTxnStateError: a transactional producer outside a transaction.
            ProducerFencedError / TransactionAbortableError / ...: an earlier fatal or
                abortable error (see docs/clients.md, "Exactly once").
            TypeError: an argument of the wrong type (key, value, headers, partition, timestamp).
            InvalidTopicError: ``topic`` is not a legal topic name (checked before any request).
            InvalidArgumentError (a ValueError): a negative or missing partition, or a timestamp
                outside 0 .. 2**63-1.
        """
        if self._closed:
            raise IllegalStateError("send() after close(); create a new Producer")
        tm = self._tm
        if tm is not None and tm.send_blocked:
            tm.fail_if_not_ready_for_send()
        if headers is not None:
            headers = _header_list(headers) if headers else None
        if headers is None and (self._key_takes_context or self._value_takes_context):
            # a context-aware serializer may add a header (a Schema Registry serializer with
            # schema.id.serializer=header adds the schema's GUID): give it a list to add to
            headers = []
        if self._key_serializer is not None:
            key = (
                self._key_serializer(key, SerializationContext(topic, "key", headers))
                if self._key_takes_context
                else self._key_serializer(key)
            )
        if key is not None and type(key) is not bytes:
            key = _coerce("key", key)
        if self._value_serializer is not None:
            value = (
                self._value_serializer(value, SerializationContext(topic, "value", headers))
                if self._value_takes_context
                else self._value_serializer(value)
            )
        if value is not None and type(value) is not bytes:
            value = _coerce("value", value)
        if headers is not None and not headers:
            headers = None
        size = 0 if value is None else len(value)
        if key is not None:
            size += len(key)
        if size > self._max_value or headers is not None:
            self._too_large(key, value, headers)
        if partition is not None or timestamp is not None:
            _check_partition_and_timestamp(partition, timestamp)
        partitions = self._topics.get(topic)
        if partitions is None:
            deadline = time.monotonic() + self._max_block_s
            partitions = self._partitions(topic, deadline)
        else:
            deadline = 0.0  # the accumulator reads the clock only if it has to wait
        count = len(partitions)
        sticky = False
        if partition is None:
            if key is not None and not self._ignore_keys:
                partition = self._partition_for_key(key, count)
            else:
                partition, sticky = self._sticky.partition(topic, count), True
        elif not 0 <= partition < count:
            raise InvalidArgumentError(
                f"partition {partition} does not exist: {topic!r} has {count} partitions"
            )
        if timestamp is None:
            timestamp = _time_ns() // 1_000_000
        future, new_batch, rolled_over = self._append(
            partitions[partition], timestamp, key, value, headers, -1, deadline, _monotonic, callback
        )
        if new_batch:
            # Only a new batch changes what the sender waits for (linger, a full batch);
            # waking it for every record would cost a syscall and a loop pass per record.
            if sticky and rolled_over:
                self._sticky.on_new_batch(topic, count, partition)
            self._thread.wakeup_before(monotonic_ms() + (0 if rolled_over else self._linger_ms))
        return future

    def _intercepted_send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: Headers | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
        callback: DeliveryCallback | None = None,
    ) -> Future[RecordMetadata]:
        """:meth:`send` of a producer with interceptors (it is its ``send``): the record passes
        through each ``on_send`` first; ``on_acknowledgement`` runs before ``callback``."""
        interceptors = self._interceptors
        assert interceptors is not None
        if headers is not None and not isinstance(headers, list):
            headers = _header_list(headers)
        seen = interceptors.on_send_each(ProducerRecord(topic, value, key, headers, partition, timestamp))
        record = seen[-1]
        acknowledge = interceptors.on_acknowledgement

        def delivered(metadata: RecordMetadata, error: KafkaError | None) -> None:
            acknowledge(seen, metadata, error)
            if callback is not None:
                callback(metadata, error)

        try:
            return Producer.send(
                self,
                record.topic,
                record.value,
                record.key,
                record.headers,
                record.partition,
                record.timestamp,
                delivered,
            )
        except Exception as exc:
            error = exc if isinstance(exc, KafkaError) else KafkaError(f"{type(exc).__name__}: {exc}")
            acknowledge(seen, None, error)
            raise

    def _too_large(
        self, key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes | None]] | None
    ) -> None:
        """RecordTooLargeError if the whole serialized record, sized as Java sizes it, exceeds
        max.request.size or buffer.memory."""
        size = record_size_upper_bound(key, value, headers)
        check_record_size(size, self._config.max_request_size, self._config.buffer_memory)

    def send_arrow(self, topic: str, batch: Any) -> list[Future[Any]]:
        """Queue every row of a ``pyarrow.RecordBatch``; returns one future per partition batch.

        Columns: ``value`` (binary or string; nulls are tombstones), and optionally ``key``,
        ``partition`` (integer; null or absent: the key's partition, else a sticky one),
        ``timestamp`` (integer ms or an Arrow timestamp; null or absent: now) and ``headers``
        (``list<struct<key: string, value: binary>>``). Rows are encoded without a Python
        object per row, cut per partition into batches of up to 512 KiB (at least batch.size,
        at most half of max.request.size), in row order within each partition. Each future
        resolves to a :class:`~kaflux.producer.futures.BatchMetadata` (first offset, record
        count) or to the batch's error. Blocks like :meth:`send`.

        Raises:
            ImportError: pyarrow is not installed (``pip install 'kaflux[arrow]'``).
            TypeError / ValueError: a column of the wrong type, or a partition out of range
                (nothing is queued then).
            KafkaTimeoutError / InvalidTxnStateError / ...: as :meth:`send`.
        """
        from kaflux.producer.arrow import arrow_columns, require_pyarrow

        pa = require_pyarrow()
        if self._closed:
            raise IllegalStateError("send_arrow() after close(); create a new Producer")
        tm = self._tm
        if tm is not None and tm.send_blocked:
            tm.fail_if_not_ready_for_send()
        interceptors = self._interceptors
        if interceptors is not None:
            batch = interceptors.on_send_batch(topic, batch)
        columns = arrow_columns(pa, batch)
        config = self._config
        if config.partitioner_ignore_keys and columns.keys is not None:
            raise InvalidArgumentError("send_arrow() does not support partitioner.ignore.keys=true with keys")
        mono = time.monotonic()
        deadline = mono + self._max_block_s
        partitions = self._topics.get(topic) or self._partitions(topic, deadline)
        limit = max(config.batch_size, min(config.max_request_size // 2, ARROW_BATCH_BYTES)) - BATCH_OVERHEAD
        chunks, sticky = self._encoder.encode_columns(
            columns.num_rows,
            len(partitions),
            self._arrow_sticky.get(topic, self._sticky.partition(topic, len(partitions))),
            max(limit, 1),
            time.time_ns() // 1_000_000,
            columns.keys,
            columns.values,
            columns.partitions,
            columns.timestamps,
            columns.headers,
        )
        self._arrow_sticky[topic] = sticky
        now_ms = int(mono * 1000)
        futures: list[Future[Any]] = []
        for chunk in chunks:
            produced = ProducerBatch.from_chunk(partitions[chunk.partition], chunk, now_ms)
            self._accumulator.append_batch(produced, deadline, time.monotonic)
            future = BatchFuture(produced.result, chunk.record_count, chunk.max_timestamp)
            if interceptors is not None:
                future.add_done_callback(_batch_acknowledger(interceptors))
            futures.append(future)
        if futures:
            self._thread.wakeup()
        return futures

    def _partitions(self, topic: str, deadline: float) -> list[TopicPartition]:
        """The partitions of ``topic``, from the network thread's metadata (once per topic)."""
        run_sync(self._lookup_partitions(topic, deadline))
        return self._topics[topic]

    def _lookup_partitions(self, topic: str, deadline: float) -> Steps[list[PartitionInfo]]:
        """Ask the network thread for the partitions of ``topic`` and remember them."""
        check_topic(topic)
        event = TopicPartitionsEvent(topic, monotonic_ms() + int((deadline - time.monotonic()) * 1000))
        self._thread.submit(event)
        infos: list[PartitionInfo] = yield FutureWait(
            event.future,
            max(0.0, deadline - time.monotonic()) + 1.0,
            f"fetching metadata for topic {topic!r} (bounded by max.block.ms)",
        )
        self._topics[topic] = [TopicPartition(topic, p) for p in range(len(infos))]
        return infos

    @blocking
    def partitions_for(self, topic: str, timeout: float | None = None) -> Steps[list[PartitionInfo]]:
        """The partitions of ``topic``, sorted, from cluster metadata (as Java's
        ``partitionsFor``); afterwards :meth:`send` to ``topic`` never waits for metadata.

        Raises:
            KafkaTimeoutError: the topic was not found within ``timeout`` seconds (default
                ``max.block.ms``).
            TopicAuthorizationFailedError / ...: an error retrying will not cure.
        """
        if self._closed:
            raise IllegalStateError("partitions_for() after close(); create a new Producer")
        deadline = time.monotonic() + timeout_seconds(timeout, self._max_block_s)
        return (yield from self._lookup_partitions(topic, deadline))

    @blocking
    def await_buffer_space(self, timeout: float | None = None) -> Steps[bool]:
        """Wait until ``buffer.memory`` has room for a new batch (True), or ``timeout``
        seconds (default ``max.block.ms``) pass (False). :meth:`send` waits so itself; with
        ``max.block.ms=0`` (sends that never block, failing with KafkaTimeoutError when the
        buffer is full) this is how to wait before sending again."""
        deadline = time.monotonic() + timeout_seconds(timeout, self._max_block_s)
        while not self._accumulator.has_room():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            yield SignalWait(self._room, remaining)
        return True

    @blocking
    def flush(self, timeout: float | None = None) -> Steps[None]:
        """Send everything queued so far and wait for the results (not for success).

        Raises:
            KafkaTimeoutError: records were still unresolved when ``timeout`` seconds passed.
            IllegalStateError: called inside a delivery callback (or a done-callback of a
                record future), which runs on the producer's network thread: waiting there for
                the records that thread delivers would never end (KIP-1118, as Java).
        """
        if threading.current_thread() is self._thread:
            raise IllegalStateError(
                "Producer.flush() inside a delivery callback is not allowed: callbacks run on the "
                "producer's network thread, which flush() would wait for forever (deadlock); flush "
                "from the application's thread instead"
            )
        deadline = time.monotonic() + timeout_seconds(timeout, MAX_TIMEOUT_S)
        self._accumulator.begin_flush()
        try:
            self._thread.wakeup()
            while self._accumulator.has_incomplete():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    message = f"flush() did not complete within {timeout} s"
                    reason = self._reachability.unreachable()
                    raise KafkaTimeoutError(message if reason is None else explain(message, reason))
                yield SignalWait(self._all_complete, remaining)
        finally:
            self._accumulator.end_flush()

    @blocking
    def close(self, timeout: float | None = None) -> Steps[None]:
        """Deliver what is pending (bounded by ``timeout`` seconds, default unbounded), then
        stop. Every record sent before is either delivered or failed when this returns.
        An open transaction is aborted first (as Java's producer does). Idempotent."""
        budget = timeout_seconds(timeout, MAX_TIMEOUT_S)
        if self._closed:
            return
        deadline = time.monotonic() + budget
        tm = self._tm
        if tm is not None and self._transactional and tm.has_ongoing_transaction and not tm.has_fatal_error:
            try:
                yield from self._transactional_call(
                    lambda tm: tm.begin_abort(), max(0.0, deadline - time.monotonic()), "abort_transaction()"
                )
            except KafkaError:
                pass  # closing anyway; the coordinator aborts it at transaction.timeout.ms
        self._closed = True
        try:
            yield from Producer.flush.steps(self, max(0.0, deadline - time.monotonic()))
        except KafkaTimeoutError:
            pass
        finally:
            remaining = max(0.0, deadline - time.monotonic())
            yield DoneWait(self._thread.request_close(remaining), remaining + 1.0)
            self._accumulator.fail_all(KafkaError("the producer was closed before the record was sent"))
            if self._interceptors is not None:
                self._interceptors.close()

    # -- transactions -------------------------------------------------------------------------

    @blocking
    def init_transactions(self, timeout: float | None = None) -> Steps[None]:
        """Get the producer id and epoch of ``transactional.id``, fencing older producers with
        the same id and completing (aborting) a transaction one of them left open. Call once,
        before the first transaction. If it times out, call it again: it resumes.

        Raises:
            KafkaTimeoutError: not done within ``timeout`` seconds (default max.block.ms).
            InvalidTxnStateError: no transactional.id, or already called.
            ProducerFencedError / TransactionalIdAuthorizationFailedError / ...: fatal; close.
        """
        yield from self._transactional_call(
            lambda tm: tm.initialize_transactions(), timeout, "init_transactions()"
        )

    @blocking
    def begin_transaction(self) -> Steps[None]:
        """Start a transaction: the records sent until commit or abort belong to it.

        Raises:
            InvalidTxnStateError: not after init_transactions(), or a transaction is open.
            TransactionAbortableError / ProducerFencedError / ...: an earlier error.
        """
        yield from self._transactional_call(lambda tm: tm.begin_transaction(), None, "begin_transaction()")

    @blocking
    def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
        group_metadata: Any,
        timeout: float | None = None,
    ) -> Steps[None]:
        """Commit ``offsets`` (the *next* offsets to consume) for the consumer group of
        ``group_metadata`` (``Consumer.group_metadata()``) as part of the transaction: they
        count only if it commits. The group's coordinator checks the generation and member id,
        so a consumer that lost its partitions cannot commit them.

        Raises:
            KafkaTimeoutError: not done within ``timeout`` seconds (default max.block.ms).
            InvalidTxnStateError: no open transaction.
            TransactionAbortableError: the offsets were refused (e.g. the group moved on):
                abort the transaction.
            ProducerFencedError / ...: fatal; close the producer.
        """
        checked: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, om in offsets.items():
            if not isinstance(tp, TopicPartition):
                raise TypeError(f"offsets must be keyed by TopicPartition, got {tp!r}")
            if isinstance(om, int) and not isinstance(om, bool):
                om = OffsetAndMetadata(om)
            if not isinstance(om, OffsetAndMetadata) or om.offset < 0:
                raise InvalidArgumentError(
                    f"the offset of {tp} must be an OffsetAndMetadata >= 0, got {om!r}"
                )
            checked[tp] = om
        for name in ("group_id", "generation_id", "member_id", "group_instance_id"):
            if not hasattr(group_metadata, name):
                raise TypeError(f"group_metadata must come from Consumer.group_metadata(); it lacks {name!r}")
        if not checked:
            return
        group: GroupMetadataLike = group_metadata
        yield from self._transactional_call(
            lambda tm: tm.send_offsets_to_transaction(checked, group),
            timeout,
            "send_offsets_to_transaction()",
        )

    @blocking
    def commit_transaction(self, timeout: float | None = None) -> Steps[None]:
        """Flush the transaction's records and commit it. If it times out, call it again.

        Raises:
            KafkaTimeoutError: not done within ``timeout`` seconds (default max.block.ms).
            InvalidTxnStateError: no open transaction.
            TransactionAbortableError: a record or the commit failed: abort_transaction().
            ProducerFencedError / ...: fatal; close the producer.
        """
        yield from self._transactional_call(lambda tm: tm.begin_commit(), timeout, "commit_transaction()")

    @blocking
    def abort_transaction(self, timeout: float | None = None) -> Steps[None]:
        """Abort the transaction: unsent records fail with TransactionAbortedError, written
        ones are hidden from read_committed consumers. If it times out, call it again.

        Raises:
            KafkaTimeoutError: not done within ``timeout`` seconds (default max.block.ms).
            InvalidTxnStateError: no open transaction.
            ProducerFencedError / ...: fatal; close the producer.
        """
        yield from self._transactional_call(lambda tm: tm.begin_abort(), timeout, "abort_transaction()")

    def _transactional_call(
        self,
        operation: Callable[[TransactionManager], Future[None] | None],
        timeout: float | None,
        what: str,
    ) -> Steps[None]:
        if self._closed:
            raise IllegalStateError(f"{what} after close(); create a new Producer")
        tm = self._tm
        if tm is None or not self._transactional:
            raise InvalidTxnStateError(f"{what} needs a transactional.id in the producer config")
        deadline = time.monotonic() + timeout_seconds(timeout, self._max_block_s)
        event = TransactionalEvent(operation)
        self._thread.submit(event)
        pending = yield FutureWait(
            event.future, max(0.0, deadline - time.monotonic()) + 1.0, what, self._reachability.unreachable
        )
        if pending is None:
            return
        try:
            yield FutureWait(pending, max(0.0, deadline - time.monotonic()), what)
        except KafkaTimeoutError:
            raise
        except KafkaError as error:
            if tm.state is TxnState.ABORTABLE_ERROR and not isinstance(error, TransactionAbortableError):
                raised = TransactionAbortableError(
                    f"{what} failed and the transaction must be aborted: {type(error).__name__}: {error}"
                )
                raise raised from error
            raise

    # -- introspection ------------------------------------------------------------------------

    @blocking
    def client_instance_id(self, timeout: float) -> Steps[uuid.UUID | None]:
        """The client instance id the brokers gave this producer for its metrics push (KIP-714,
        Java's ``clientInstanceId(Duration)``), waiting at most ``timeout`` seconds for the
        first telemetry subscription; None if none came in time or the brokers have no
        client-telemetry APIs. Any thread may call it.

        Raises:
            IllegalStateError: ``enable.metrics.push`` is false, or the producer is closed.
        """
        if self._closed:
            raise IllegalStateError("the producer is closed")
        return (yield from self._telemetry.client_instance_id(timeout))

    @property
    def transaction_state(self) -> str | None:
        """The transaction manager's state (Java's names), None without idempotence."""
        return None if self._tm is None else self._tm.state.name

    @blocking
    def metrics(self, timeout: float = METRICS_TIMEOUT_S) -> Steps[dict[str, dict[str, float]]]:
        """The producer's metrics, with Java's names and meanings: ``{group: {name: value}}``.

        Groups: ``producer-metrics`` (records, batches and requests sent, latency, queue time,
        errors, retries, buffer, network I/O), ``producer-topic-metrics,topic=<t>`` per topic,
        ``producer-node-metrics,node-id=node-<id>`` per broker, and kaflux's own counters in
        ``kaflux-producer-metrics`` (network-loops, in-flight-requests, producer-id,
        producer-epoch). Windowed values cover ``metrics.num.samples`` samples of
        ``metrics.sample.window.ms``; see :mod:`kaflux.metrics.clients`.

        Any thread may call it. The metrics are measured on the network thread: this waits for
        them at most ``timeout`` seconds; if they do not come in time (a busy network thread)
        or the producer is closed, the last ones received are returned.
        """
        network = self._network_metrics
        if not self._closed:
            event = MetricsSnapshotEvent()
            self._thread.submit(event)
            try:
                network = yield FutureWait(event.future, max(0.0, timeout), "metrics()")
            except KafkaError:
                pass  # the last snapshot will do
            else:
                self._network_metrics = network
        tm = self._tm
        own = {
            "network-loops": float(self._thread.loop_count),
            "in-flight-requests": float(self._sender.in_flight_requests),
            "producer-id": float(-1 if tm is None else tm.producer_id),
            "producer-epoch": float(-1 if tm is None else tm.producer_epoch),
        }
        return merge_snapshots(network, {KAFLUX_PRODUCER_METRICS: own})
