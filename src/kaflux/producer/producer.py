"""``kaflux.Producer``: the public producer API. [app: every public method; the network thread
is started here and owns all I/O]

``send`` only appends to the accumulator (after learning the topic's partition count, which
it asks the network thread for once per topic); the network thread batches, sends, retries
and resolves each record's ``concurrent.futures.Future``. Future callbacks therefore run on
the network thread and must be quick.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from kaflux.closeable import Closeable
from kaflux.config import ProducerConfig
from kaflux.errors import IllegalStateError, KafkaError, KafkaTimeoutError
from kaflux.network.factory import NetworkStack, build_network
from kaflux.network.network_thread import NetworkThread, monotonic_ms
from kaflux.producer.accumulator import RecordAccumulator
from kaflux.producer.partitioner import StickyPartitioner, partition_for_key
from kaflux.producer.sender import ProduceRequestManager
from kaflux.records import codec_id
from kaflux.structs import RecordMetadata, TopicPartition
from kaflux.timeouts import MAX_TIMEOUT_S, await_future, timeout_seconds

Serializer = Callable[[Any], bytes | None]
_client_ids = itertools.count(1)


@dataclass(slots=True)
class PartitionCountEvent:
    """Application event: learn how many partitions ``topic`` has (completes ``future``)."""

    topic: str
    deadline_ms: int
    future: Future[int] = field(default_factory=Future)


class _ProducerEventProcessor:
    """Resolves partition-count lookups from cluster metadata. [bg]"""

    def __init__(self, network: NetworkStack) -> None:
        self._cluster = network.cluster
        self._metadata = network.metadata
        self._pending: list[PartitionCountEvent] = []
        network.metadata.add_error_listener(self._on_metadata_error)

    def _on_metadata_error(self, topic: str | None, error: KafkaError) -> None:
        """A failure retrying will not cure (a refused login; an unauthorized topic): the
        sends waiting for metadata fail with it now instead of at max.block.ms."""
        still: list[PartitionCountEvent] = []
        for event in self._pending:
            if topic is None or topic == event.topic:
                if not event.future.done():
                    event.future.set_exception(error)
            else:
                still.append(event)
        self._pending = still

    def process(self, event: PartitionCountEvent, now_ms: int) -> None:
        self._metadata.add_topics({event.topic})
        self._metadata.request_update()
        self._pending.append(event)

    def expire(self, now_ms: int) -> None:
        still: list[PartitionCountEvent] = []
        for event in self._pending:
            partitions = self._cluster.partitions_for(event.topic)
            if partitions:
                event.future.set_result(len(partitions))
            elif now_ms >= event.deadline_ms:
                event.future.set_exception(
                    KafkaTimeoutError(
                        f"topic {event.topic!r} was not found in cluster metadata within max.block.ms; "
                        "create it first or check the name"
                    )
                )
            else:
                still.append(event)
        self._pending = still

    def next_deadline_ms(self) -> int | None:
        return min((e.deadline_ms for e in self._pending), default=None)

    def fail_all(self, error: Exception) -> None:
        for event in self._pending:
            if not event.future.done():
                event.future.set_exception(error)
        self._pending = []


def _to_bytes(what: str, data: object, serializer: Serializer | None) -> bytes | None:
    if serializer is not None:
        data = serializer(data)
    if data is None or isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"{what} must be bytes or None (or give a {what}_serializer), got {type(data).__name__}")


class Producer(Closeable):
    """Sends records to Kafka topics.

    Example::

        with Producer({"bootstrap.servers": "127.0.0.1:9092"}) as producer:
            producer.send("orders", b'{"id": 1}', key=b"customer-7")
            producer.flush(10.0)
    """

    def __init__(
        self,
        config: Mapping[str, object],
        *,
        key_serializer: Serializer | None = None,
        value_serializer: Serializer | None = None,
    ) -> None:
        """Validate ``config`` (Kafka producer keys) and start the network thread.

        Raises:
            ConfigError: a key is unknown or a value invalid.
        """
        self._config = ProducerConfig.from_dict(config)
        client_id = self._config.client_id or f"producer-{next(_client_ids)}"
        self._key_serializer = key_serializer
        self._value_serializer = value_serializer
        self._accumulator = RecordAccumulator(
            batch_size=self._config.batch_size,
            linger_ms=self._config.linger_ms,
            buffer_memory=self._config.buffer_memory,
            compression=codec_id(self._config.compression_type),
            delivery_timeout_ms=self._config.delivery_timeout_ms,
        )
        network = build_network(self._config, client_id, allow_auto_create_topics=True)
        self._sender = ProduceRequestManager(
            self._accumulator,
            network.cluster,
            network.metadata,
            acks=self._config.acks_value,
            request_timeout_ms=self._config.request_timeout_ms,
            retries=self._config.retries,
            delivery_timeout_ms=self._config.delivery_timeout_ms,
            retry_backoff=network.retry_backoff,
        )
        self._thread = NetworkThread(
            f"kaflux-producer-network-{client_id}",
            network.delegate,
            [network.metadata, self._sender],
            _ProducerEventProcessor(network),
        )
        self._partition_counts: dict[str, int] = {}
        self._sticky = StickyPartitioner()
        self._closed = False
        self._thread.start()

    def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: Sequence[tuple[str, bytes | None]] | Mapping[str, bytes | None] | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
    ) -> Future[RecordMetadata]:
        """Queue a record; the future resolves to where it landed, or to the send error.

        Blocks at most ``max.block.ms`` (to learn the topic's partitions, or while
        ``buffer.memory`` is full). Keyed records are partitioned like Java's client.

        Raises:
            KafkaTimeoutError: metadata or buffer space was not available within max.block.ms.
            TypeError / ValueError: bad argument types or an out-of-range partition.
        """
        if self._closed:
            raise IllegalStateError("send() after close(); create a new Producer")
        key_bytes = _to_bytes("key", key, self._key_serializer)
        value_bytes = _to_bytes("value", value, self._value_serializer)
        header_list = self._headers(headers)
        deadline = time.monotonic() + self._config.max_block_ms / 1000
        count = self._partition_count(topic, deadline)
        sticky = False
        if partition is None:
            if key_bytes is not None and not self._config.partitioner_ignore_keys:
                partition = partition_for_key(key_bytes, count)
            else:
                partition, sticky = self._sticky.partition(topic, count), True
        elif not 0 <= partition < count:
            raise ValueError(f"partition {partition} does not exist: {topic!r} has {count} partitions")
        if timestamp is None:
            timestamp = int(time.time() * 1000)
        future, new_batch, rolled_over = self._accumulator.append(
            TopicPartition(topic, partition),
            timestamp,
            key_bytes,
            value_bytes,
            header_list,
            monotonic_ms(),
            deadline,
            time.monotonic,
        )
        if new_batch:
            # Only a new batch changes what the sender waits for (linger, a full batch);
            # waking it for every record would cost a syscall and a loop pass per record.
            if sticky and rolled_over:
                self._sticky.on_new_batch(topic, count, partition)
            self._thread.wakeup_before(monotonic_ms() + (0 if rolled_over else self._config.linger_ms))
        return future

    def _headers(
        self, headers: Sequence[tuple[str, bytes | None]] | Mapping[str, bytes | None] | None
    ) -> list[tuple[str, bytes | None]]:
        if headers is None:
            return []
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

    def _partition_count(self, topic: str, deadline: float) -> int:
        count = self._partition_counts.get(topic)
        if count is not None:
            return count
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"topic must be a non-empty string, got {topic!r}")
        event = PartitionCountEvent(topic, monotonic_ms() + int((deadline - time.monotonic()) * 1000))
        self._thread.submit(event)
        count = await_future(
            event.future,
            max(0.0, deadline - time.monotonic()) + 1.0,
            f"fetching metadata for topic {topic!r} (bounded by max.block.ms)",
        )
        self._partition_counts[topic] = count
        return count

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued so far and wait for the results (not for success).

        Raises:
            KafkaTimeoutError: records were still unresolved when ``timeout`` seconds passed.
        """
        deadline = time.monotonic() + timeout_seconds(timeout, MAX_TIMEOUT_S)
        self._accumulator.begin_flush()
        try:
            self._thread.wakeup()
            if not self._accumulator.await_all_complete(deadline, time.monotonic):
                raise KafkaTimeoutError(f"flush() did not complete within {timeout} s")
        finally:
            self._accumulator.end_flush()

    def close(self, timeout: float | None = None) -> None:
        """Flush (bounded by ``timeout`` seconds, default unbounded) and stop. Idempotent.

        Records that could not be sent in time fail with KafkaError.
        """
        budget = timeout_seconds(timeout, MAX_TIMEOUT_S)
        if self._closed:
            return
        self._closed = True
        deadline = time.monotonic() + budget
        try:
            self.flush(budget)
        except KafkaTimeoutError:
            pass
        finally:
            self._thread.close(max(0.0, deadline - time.monotonic()))
            self._accumulator.fail_all(KafkaError("the producer was closed before the record was sent"))

    def metrics(self) -> dict[str, object]:
        """A few counters about the producer."""
        return {
            "network-loops": self._thread.loop_count,
            "in-flight-requests": self._sender.in_flight_requests,
        }
