"""``kaflux.aio.AsyncConsumer``: the consumer for asyncio. [app: every method runs on the event
loop's thread; the consumer's one network thread does all I/O]

It drives the sync :class:`~kaflux.Consumer`'s own blocking calls (their wait steps, see
:mod:`kaflux.blocking`) with :func:`~kaflux.aio.driver.run_async`: the same events, request
managers and network thread, awaited on the loop instead of blocked on. Calls that only change
local state are plain methods and delegate to the sync consumer as they are.

Work on the loop per call is bounded: ``poll()`` yields to the loop once before it collects,
and collects at most ``max.poll.records``. Cancelling ``poll()`` while it waits takes nothing
from the fetch buffer: records fetched meanwhile are returned by the next ``poll()``, and
positions advance only for records returned.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Iterable, Iterator, Mapping, Sequence
from re import Pattern
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from kaflux.aio.driver import FutureAwaitable, LoopGuard
from kaflux.aio.serde import AsyncSerde, deserialize, is_async
from kaflux.blocking import Steps
from kaflux.consumer.callback_invokers import CommitCallback
from kaflux.consumer.close_options import CloseOptions, GroupMembershipOperation, resolve_close_arguments
from kaflux.consumer.completed_fetch import Deserializer
from kaflux.consumer.consumer import METRICS_TIMEOUT_S, Consumer
from kaflux.consumer.consumer_record import ConsumerRecord, ConsumerRecords
from kaflux.consumer.membership.group import GroupMetadata, GroupState
from kaflux.consumer.rebalance_listener import ConsumerRebalanceListener
from kaflux.interceptors import ConsumerInterceptor
from kaflux.structs import OffsetAndMetadata, OffsetAndTimestamp, PartitionInfo, TopicPartition

if TYPE_CHECKING:
    import pyarrow as pa


class AsyncConsumerRebalanceListener(ConsumerRebalanceListener):
    """A rebalance listener with ``async def`` methods, awaited on the loop inside ``poll()``
    before the rebalance is acknowledged. Subclass and override what you need."""

    async def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        """See :meth:`ConsumerRebalanceListener.on_partitions_revoked`."""

    async def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        """See :meth:`ConsumerRebalanceListener.on_partitions_assigned`."""

    async def on_partitions_lost(self, partitions: set[TopicPartition]) -> None:
        """Awaits :meth:`on_partitions_revoked`, as the sync default calls it."""
        await self.on_partitions_revoked(partitions)


class AsyncConsumer:
    """Reads records from Kafka partitions, on an asyncio event loop.

    Example::

        async with AsyncConsumer({"bootstrap.servers": "127.0.0.1:9092", "group.id": "billing"}) as consumer:
            consumer.subscribe(["orders"])
            async for record in consumer:
                print(record.offset, record.value)

    Names, semantics and errors are :class:`~kaflux.Consumer`'s; what waits for the cluster is
    a coroutine. One event loop only: using it from a second loop, or from another thread while
    one of its coroutines is pending, raises :class:`~kaflux.errors.ConcurrentAccessError`.
    """

    def __init__(
        self,
        config: Mapping[str, object],
        key_deserializer: Deserializer | AsyncSerde | None = None,
        value_deserializer: Deserializer | AsyncSerde | None = None,
        interceptors: Sequence[ConsumerInterceptor] | None = None,
    ) -> None:
        """Validate ``config`` (the sync consumer's keys) and start the network thread. A
        deserializer may be async (e.g. ``AsyncAvroDeserializer``): ``poll()`` awaits it
        (see :mod:`kaflux.aio.serde`). ``interceptors``: as :class:`kaflux.Consumer`'s (their
        hooks run on the loop's thread; with an async deserializer, ``on_consume`` sees the
        records before it has decoded them).

        Raises:
            ConfigError: a key is unknown, a value has the wrong type or is out of range.
        """
        self._key_async: Any = key_deserializer if is_async(key_deserializer) else None
        self._value_async: Any = value_deserializer if is_async(value_deserializer) else None
        self._consumer = Consumer(
            config,
            None if self._key_async else key_deserializer,  # type: ignore[arg-type]
            None if self._value_async else value_deserializer,  # type: ignore[arg-type]
            interceptors,
        )
        self._guard = LoopGuard("AsyncConsumer")
        self._closed = False
        self._batch: Iterator[ConsumerRecord] = iter(())

    @property
    def client_id(self) -> str:
        return self._consumer.client_id

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def _plain(self) -> Consumer:
        """The sync consumer, for a plain method (refused while another thread's coroutine waits)."""
        self._guard.check_thread()
        return self._consumer

    # -- local state: plain methods ------------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """:meth:`kaflux.Consumer.assign` (the network thread takes the assignment in its next
        pass; this waits for that, typically well under a millisecond)."""
        self._plain().assign(partitions)

    def subscribe(
        self,
        topics: Iterable[str] | None = None,
        pattern: str | Pattern[str] | None = None,
        listener: ConsumerRebalanceListener | None = None,
    ) -> None:
        """:meth:`kaflux.Consumer.subscribe`; the listener's methods may be ``async def``
        (see :class:`AsyncConsumerRebalanceListener`): they are awaited inside :meth:`poll`."""
        self._plain().subscribe(topics, pattern, listener)

    def unsubscribe(self) -> Awaitable[None]:
        """:meth:`kaflux.Consumer.unsubscribe`: local state changes at once; leaving the group
        (after the revocation callback) goes on in a task. Await the result to wait for it."""
        consumer = self._plain()
        return self._start(Consumer.unsubscribe.steps(consumer))

    def assignment(self) -> set[TopicPartition]:
        return self._plain().assignment()

    def subscription(self) -> set[str]:
        return self._plain().subscription()

    def seek(self, tp: TopicPartition, offset: int | OffsetAndMetadata) -> None:
        self._plain().seek(tp, offset)

    def seek_to_beginning(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        self._plain().seek_to_beginning(partitions)

    def seek_to_end(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        self._plain().seek_to_end(partitions)

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        self._plain().pause(partitions)

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        self._plain().resume(partitions)

    def paused(self) -> set[TopicPartition]:
        return self._plain().paused()

    def current_lag(self, tp: TopicPartition) -> int | None:
        return self._plain().current_lag(tp)

    def group_metadata(self) -> GroupMetadata:
        return self._plain().group_metadata()

    def enforce_rebalance(self, reason: str | None = None) -> None:
        self._plain().enforce_rebalance(reason)

    def wakeup(self) -> None:
        """Interrupt the pending coroutine (or the next one) with WakeupError. Any thread."""
        self._consumer.wakeup()

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
        callback: CommitCallback | None = None,
    ) -> Awaitable[dict[TopicPartition, OffsetAndMetadata]]:
        """:meth:`kaflux.Consumer.commit_async`; returns an awaitable of the committed offsets
        (awaiting it is optional; the callback, if any, still runs in a later poll)."""
        return FutureAwaitable(self._plain().commit_async(offsets, callback))

    # -- coroutines ------------------------------------------------------------------------------

    def _start(self, steps: Steps[None]) -> asyncio.Future[None]:
        """Run ``steps`` eagerly up to their first wait, the rest in a task."""
        loop = asyncio.get_running_loop()
        try:
            first = next(steps)
        except StopIteration:
            done = loop.create_future()
            done.set_result(None)
            return done

        def resume() -> Steps[None]:
            try:
                outcome: Any = yield first
            except BaseException as exc:
                return (yield from _continue(steps, None, exc))
            return (yield from _continue(steps, outcome, None))

        return asyncio.ensure_future(self._guard.run(resume()))

    async def poll(self, timeout: float = 0.0) -> ConsumerRecords:
        """:meth:`kaflux.Consumer.poll`, awaiting on the loop (cancellation-safe)."""
        await asyncio.sleep(0)  # bounded work per loop turn: let others run before collecting
        records = await self._guard.run(Consumer.poll.steps(self._consumer, timeout))
        if (self._key_async or self._value_async) and records:
            return await deserialize(records, self._key_async, self._value_async, self._consumer)
        return records

    async def poll_arrow(self, timeout: float = 0.0) -> pa.RecordBatch:
        """:meth:`kaflux.Consumer.poll_arrow`, awaiting on the loop (cancellation-safe)."""
        await asyncio.sleep(0)
        return await self._guard.run(Consumer.poll_arrow.steps(self._consumer, timeout))

    def __aiter__(self) -> AsyncConsumer:
        return self

    async def __anext__(self) -> ConsumerRecord:
        """The next record, polling in 1-second slices until the consumer is closed."""
        for record in self._batch:
            return record
        while not self._closed:
            self._batch = iter(await self.poll(1.0))
            for record in self._batch:
                return record
        raise StopAsyncIteration

    async def commit_sync(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
        timeout: float | None = None,
    ) -> None:
        """:meth:`kaflux.Consumer.commit_sync`. Cancelled, the commit may still take effect."""
        await self._guard.run(Consumer.commit_sync.steps(self._consumer, offsets, timeout))

    async def committed(
        self, partitions: Iterable[TopicPartition], timeout: float | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return await self._guard.run(Consumer.committed.steps(self._consumer, partitions, timeout))

    async def position(self, tp: TopicPartition, timeout: float | None = None) -> int:
        return await self._guard.run(Consumer.position.steps(self._consumer, tp, timeout))

    async def beginning_offsets(
        self, partitions: Iterable[TopicPartition], timeout: float | None = None
    ) -> dict[TopicPartition, int]:
        return await self._guard.run(Consumer.beginning_offsets.steps(self._consumer, partitions, timeout))

    async def end_offsets(
        self, partitions: Iterable[TopicPartition], timeout: float | None = None
    ) -> dict[TopicPartition, int]:
        return await self._guard.run(Consumer.end_offsets.steps(self._consumer, partitions, timeout))

    async def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int], timeout: float | None = None
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        return await self._guard.run(Consumer.offsets_for_times.steps(self._consumer, timestamps, timeout))

    async def partitions_for(self, topic: str, timeout: float | None = None) -> list[PartitionInfo]:
        return await self._guard.run(Consumer.partitions_for.steps(self._consumer, topic, timeout))

    async def list_topics(self, timeout: float | None = None) -> dict[str, list[PartitionInfo]]:
        return await self._guard.run(Consumer.list_topics.steps(self._consumer, timeout))

    async def group_state(self, timeout: float | None = None) -> GroupState:
        return await self._guard.run(Consumer.group_state.steps(self._consumer, timeout))

    async def client_instance_id(self, timeout: float) -> uuid.UUID | None:
        """:meth:`kaflux.Consumer.client_instance_id`, awaiting on the loop."""
        return await self._guard.run(Consumer.client_instance_id.steps(self._consumer, timeout))

    async def metrics(self, timeout: float = METRICS_TIMEOUT_S) -> dict[str, dict[str, float]]:
        return await self._guard.run(Consumer.metrics.steps(self._consumer, timeout))

    async def close(
        self,
        options: CloseOptions | float | None = None,
        /,
        *,
        timeout: float | None = None,
        group_membership: GroupMembershipOperation | None = None,
    ) -> None:
        """:meth:`kaflux.Consumer.close`: commit (with auto-commit), leave the group (awaiting
        an async revocation callback) and stop the network thread. Idempotent. Takes the same
        arguments: a :class:`~kaflux.CloseOptions` or a timeout in seconds, or the ``timeout``
        and ``group_membership`` keywords (KIP-1092)."""
        resolve_close_arguments(options, timeout, group_membership)  # refused before anything
        self._closed = True
        await self._guard.run(
            Consumer.close.steps(self._consumer, options, timeout=timeout, group_membership=group_membership)
        )


def _continue(steps: Steps[None], outcome: Any, error: BaseException | None) -> Steps[None]:
    """The rest of ``steps`` after its first step, whose outcome was ``outcome`` (or ``error``)."""
    while True:
        try:
            step = steps.send(outcome) if error is None else steps.throw(error)
        except StopIteration as stop:
            result: None = stop.value
            return result
        error = None
        try:
            outcome = yield step
        except BaseException as exc:
            outcome, error = None, exc
