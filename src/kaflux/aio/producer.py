"""``kaflux.aio.AsyncProducer``: the producer for asyncio. [app: every method runs on the event
loop's thread; the producer's one network thread does all I/O]

It wraps a sync :class:`~kaflux.Producer` whose ``send()`` never blocks (``max.block.ms=0``
inside): a send to a topic not seen before first awaits the topic's partitions
(``Producer.partitions_for``), and a send that finds ``buffer.memory`` full awaits room
(``Producer.await_buffer_space``) on the loop and tries again, until this producer's own
``max.block.ms``. Flush, close and the transactional calls are the sync producer's own wait
steps (:mod:`kaflux.blocking`), awaited. The record's result is the network thread's future,
bridged to the loop only when awaited.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self

from kaflux.aio.driver import FutureAwaitable, LoopGuard
from kaflux.aio.serde import AsyncSerde, is_async
from kaflux.config import ProducerConfig
from kaflux.errors import KafkaTimeoutError
from kaflux.interceptors import ProducerInterceptor
from kaflux.producer.futures import DeliveryCallback
from kaflux.producer.producer import METRICS_TIMEOUT_S, Headers, Producer, Serializer
from kaflux.serialization import SerializationContext
from kaflux.structs import OffsetAndMetadata, PartitionInfo, RecordMetadata, TopicPartition

#: send() yields to the loop once per this many records, so that a tight send loop leaves the
#: loop's other tasks a turn (the loop-lag bound of the consumer's poll(), for the producer)
YIELD_EVERY = 1000


class AsyncProducer:
    """Sends records to Kafka topics, on an asyncio event loop.

    Example::

        async with AsyncProducer({"bootstrap.servers": "127.0.0.1:9092"}) as producer:
            delivered = await producer.send("orders", b'{"id": 1}', key=b"customer-7")
            metadata = await delivered  # or: await producer.send_and_wait(...)

    Names, semantics and errors are :class:`~kaflux.Producer`'s; what waits is a coroutine.
    One event loop only (else :class:`~kaflux.errors.ConcurrentAccessError`).
    """

    def __init__(
        self,
        config: Mapping[str, object],
        key_serializer: Serializer | AsyncSerde | None = None,
        value_serializer: Serializer | AsyncSerde | None = None,
        interceptors: Sequence[ProducerInterceptor] | None = None,
    ) -> None:
        """Validate ``config`` (the sync producer's keys) and start the network thread. A
        serializer may be async (e.g. ``AsyncAvroSerializer``): ``send()`` awaits it (see
        :mod:`kaflux.aio.serde`). ``interceptors``: as :class:`kaflux.Producer`'s (``on_send``
        runs on the loop's thread; with an async serializer it sees the value already
        serialized).

        Raises:
            ConfigError: a key is unknown, a value invalid, or settings conflict.
        """
        self._max_block_s = ProducerConfig.from_dict(config).max_block_ms / 1000
        # The sync producer serializes (plain functions or context-aware serializers alike) and
        # runs the interceptors (its send() is the intercepting one when there are some); async
        # serializers are awaited here, before it.
        self._key_async: Any = key_serializer if is_async(key_serializer) else None
        self._value_async: Any = value_serializer if is_async(value_serializer) else None
        self._producer = Producer(
            {**config, "max.block.ms": 0},
            key_serializer=None if self._key_async else key_serializer,  # type: ignore[arg-type]
            value_serializer=None if self._value_async else value_serializer,  # type: ignore[arg-type]
            interceptors=interceptors,
        )
        self._guard = LoopGuard("AsyncProducer")
        self._topics: set[str] = set()
        self._send = self._producer.send
        self._sends = 0

    @property
    def client_id(self) -> str:
        return self._producer.client_id

    @property
    def transaction_state(self) -> str | None:
        return self._producer.transaction_state

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def _timeout(self, timeout: float | None) -> float:
        return self._max_block_s if timeout is None else timeout

    async def _room(self, topic: str, deadline: float | None) -> float:
        """Await what a send waits for: the topic's partitions (once), or room in the buffer
        (``deadline`` given: the buffer was full). Returns the send's deadline."""
        if deadline is None:
            deadline = time.monotonic() + self._max_block_s
            steps = Producer.partitions_for.steps(self._producer, topic, self._max_block_s)
            await self._guard.run(steps)
            self._topics.add(topic)
            return deadline
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not await self._guard.run(
            Producer.await_buffer_space.steps(self._producer, remaining)
        ):
            raise KafkaTimeoutError(
                "buffer.memory is full and did not drain within max.block.ms; the broker may be "
                "unreachable or slower than the production rate"
            )
        return deadline

    async def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: Headers | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
        callback: DeliveryCallback | None = None,
    ) -> Awaitable[RecordMetadata]:
        """Queue a record (:meth:`kaflux.Producer.send`); returns an awaitable of its
        :class:`~kaflux.structs.RecordMetadata`. While ``buffer.memory`` is full this waits
        on the loop, never blocking it, up to ``max.block.ms``.

        Raises:
            KafkaTimeoutError: metadata or buffer space was not available within max.block.ms.
            RecordTooLargeError / InvalidTxnStateError / TypeError / ...: as the sync send.
        """
        self._guard.check_thread()
        self._sends += 1
        if not self._sends % YIELD_EVERY:
            await asyncio.sleep(0)  # bounded work per loop turn (before queueing: cancel-safe)
        if self._key_async or self._value_async:
            # a header-framing serializer adds to it
            headers = list(headers.items() if isinstance(headers, Mapping) else headers or ())
            if self._key_async and key is not None:
                key = await self._key_async(key, SerializationContext(topic, "key", headers))
            if self._value_async and value is not None:
                value = await self._value_async(value, SerializationContext(topic, "value", headers))
        deadline = None if topic in self._topics else await self._room(topic, None)
        while True:
            try:
                future = self._send(topic, value, key, headers, partition, timestamp, callback)
            except KafkaTimeoutError:  # buffer.memory is full (the topic's partitions are known)
                if topic not in self._topics:
                    raise
                if deadline is None:
                    deadline = time.monotonic() + self._max_block_s
                await self._room(topic, deadline)
            else:
                return FutureAwaitable(future)

    async def send_and_wait(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: Headers | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
    ) -> RecordMetadata:
        """Send a record and await its metadata."""
        return await (await self.send(topic, value, key, headers, partition, timestamp))

    async def send_arrow(self, topic: str, batch: Any) -> list[Awaitable[Any]]:
        """:meth:`kaflux.Producer.send_arrow`; one awaitable per partition batch. Waits on the
        loop for the topic's partitions and for room for a batch first; if ``buffer.memory``
        fills while the rows are queued, KafkaTimeoutError (rows queued so far are sent)."""
        self._guard.check_thread()
        if topic not in self._topics:
            await self._room(topic, None)
        if not self._producer.await_buffer_space(0):
            await self._room(topic, time.monotonic() + self._max_block_s)
        return [FutureAwaitable(f) for f in self._producer.send_arrow(topic, batch)]

    async def partitions_for(self, topic: str, timeout: float | None = None) -> list[PartitionInfo]:
        """:meth:`kaflux.Producer.partitions_for`."""
        steps = Producer.partitions_for.steps(self._producer, topic, self._timeout(timeout))
        return await self._guard.run(steps)

    async def flush(self, timeout: float | None = None) -> None:
        """:meth:`kaflux.Producer.flush`, awaiting on the loop."""
        await self._guard.run(Producer.flush.steps(self._producer, timeout))

    async def close(self, timeout: float | None = None) -> None:
        """:meth:`kaflux.Producer.close`, awaiting on the loop. Idempotent."""
        await self._guard.run(Producer.close.steps(self._producer, timeout))

    async def client_instance_id(self, timeout: float) -> uuid.UUID | None:
        """:meth:`kaflux.Producer.client_instance_id`, awaiting on the loop."""
        return await self._guard.run(Producer.client_instance_id.steps(self._producer, timeout))

    async def metrics(self, timeout: float = METRICS_TIMEOUT_S) -> dict[str, dict[str, float]]:
        return await self._guard.run(Producer.metrics.steps(self._producer, timeout))

    # -- transactions ---------------------------------------------------------------------------

    async def init_transactions(self, timeout: float | None = None) -> None:
        await self._guard.run(Producer.init_transactions.steps(self._producer, self._timeout(timeout)))

    def begin_transaction(self) -> None:
        """:meth:`kaflux.Producer.begin_transaction` (a local state change, taken by the
        network thread in its next pass)."""
        self._guard.check_thread()
        self._producer.begin_transaction()

    async def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
        group_metadata: Any,
        timeout: float | None = None,
    ) -> None:
        steps = Producer.send_offsets_to_transaction.steps(
            self._producer, offsets, group_metadata, self._timeout(timeout)
        )
        await self._guard.run(steps)

    async def commit_transaction(self, timeout: float | None = None) -> None:
        await self._guard.run(Producer.commit_transaction.steps(self._producer, self._timeout(timeout)))

    async def abort_transaction(self, timeout: float | None = None) -> None:
        await self._guard.run(Producer.abort_transaction.steps(self._producer, self._timeout(timeout)))
