"""``kaflux.aio.AsyncShareConsumer``: the share consumer for asyncio. [app: every method runs on
the event loop's thread; the share consumer's one network thread does all I/O]

As :class:`~kaflux.aio.AsyncConsumer` does for :class:`~kaflux.Consumer`, it drives the sync
:class:`~kaflux.ShareConsumer`'s own blocking calls (their wait steps, see
:mod:`kaflux.blocking`) with :func:`~kaflux.aio.driver.run_async`: the same events, share
sessions and network thread, awaited on the loop with no executor and no extra thread. Calls
that only change local state are plain methods and delegate to the sync share consumer.

Cancelling ``poll()`` while it waits takes nothing from the fetch buffer: records acquired
meanwhile are returned by the next ``poll()`` (in implicit mode the previous poll's records were
accepted when the cancelled poll started, as Java's would be).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Iterable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Self

from kaflux.aio.driver import FutureAwaitable, LoopGuard
from kaflux.blocking import Steps
from kaflux.consumer.completed_fetch import Deserializer
from kaflux.consumer.membership.group import GroupState
from kaflux.consumer.share.acknowledgements import AcknowledgeType
from kaflux.consumer.share.consumer import AcknowledgementCommitCallback, ShareConsumer
from kaflux.errors import KafkaError
from kaflux.interceptors import ShareConsumerInterceptor
from kaflux.records import ConsumerRecord
from kaflux.structs import TopicPartition


class AsyncShareConsumer:
    """Reads records as a member of a share group, on an asyncio event loop.

    Example::

        config = {"bootstrap.servers": "127.0.0.1:9092", "group.id": "jobs"}
        async with AsyncShareConsumer(config) as consumer:
            consumer.subscribe(["jobs"])
            async for record in consumer:
                await handle(record)  # accepted by the next poll (implicit mode)

    Names, semantics and errors are :class:`~kaflux.ShareConsumer`'s; what waits for the
    cluster is a coroutine. One event loop only: using it from a second loop, or from another
    thread while one of its coroutines is pending, raises
    :class:`~kaflux.errors.ConcurrentAccessError`.
    """

    def __init__(
        self,
        config: Mapping[str, object],
        key_deserializer: Deserializer | None = None,
        value_deserializer: Deserializer | None = None,
        interceptors: Sequence[ShareConsumerInterceptor] | None = None,
    ) -> None:
        """Validate ``config`` (the sync share consumer's keys) and start the network thread.
        ``interceptors``: as :class:`kaflux.ShareConsumer`'s (their hooks run on the loop's thread).

        Raises:
            ConfigError: ``group.id`` is missing, a key is unknown or belongs to consumer
                groups, or a value is wrong.
        """
        self._consumer = ShareConsumer(config, key_deserializer, value_deserializer, interceptors)
        self._guard = LoopGuard("AsyncShareConsumer")
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

    def _plain(self) -> ShareConsumer:
        """The sync share consumer, for a plain method (refused while another thread's
        coroutine waits)."""
        self._guard.check_thread()
        return self._consumer

    # -- local state: plain methods ------------------------------------------------------------

    def subscribe(self, topics: Iterable[str]) -> None:
        """:meth:`kaflux.ShareConsumer.subscribe` (the network thread takes the subscription in
        its next pass; this waits for that, typically well under a millisecond). Joining
        happens in :meth:`poll`."""
        self._plain().subscribe(topics)

    def unsubscribe(self) -> Awaitable[None]:
        """:meth:`kaflux.ShareConsumer.unsubscribe`: pending acknowledgements are handed over
        and the subscription cleared at once; leaving the group goes on in a task. Await the
        result to wait for it."""
        consumer = self._plain()
        return self._start(ShareConsumer.unsubscribe.steps(consumer))

    def subscription(self) -> set[str]:
        return self._plain().subscription()

    def acknowledge(self, record: ConsumerRecord, type: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:
        """:meth:`kaflux.ShareConsumer.acknowledge` (explicit mode)."""
        self._plain().acknowledge(record, type)

    def acquisition_lock_timeout(self) -> float | None:
        """:meth:`kaflux.ShareConsumer.acquisition_lock_timeout`."""
        return self._plain().acquisition_lock_timeout()

    def set_acknowledgement_commit_callback(self, callback: AcknowledgementCommitCallback | None) -> None:
        """:meth:`kaflux.ShareConsumer.set_acknowledgement_commit_callback`: the callback runs
        on the loop's thread, inside :meth:`poll`, a commit or :meth:`close`."""
        self._plain().set_acknowledgement_commit_callback(callback)

    async def group_state(self, timeout: float | None = None) -> GroupState:
        """:meth:`kaflux.ShareConsumer.group_state`: the member's state as the network thread
        holds it (answered at its next pass, no request to the broker), awaited on the loop as
        :meth:`AsyncConsumer.group_state` is."""
        return await self._guard.run(ShareConsumer.group_state.steps(self._consumer, timeout))

    def wakeup(self) -> None:
        """Interrupt the pending coroutine (or the next one) with WakeupError. Any thread."""
        self._consumer.wakeup()

    def commit_async(self) -> Awaitable[dict[TopicPartition, KafkaError | None]]:
        """:meth:`kaflux.ShareConsumer.commit_async`; returns an awaitable of the per-partition
        outcome (awaiting it is optional; the callback, if any, still runs in a later call)."""
        return FutureAwaitable(self._plain().commit_async())

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
            outcome: Any = None
            error: BaseException | None = None
            try:
                outcome = yield first
            except BaseException as exc:
                error = exc
            while True:
                try:
                    step = steps.send(outcome) if error is None else steps.throw(error)
                except StopIteration:
                    return None
                error = None
                try:
                    outcome = yield step
                except BaseException as exc:
                    outcome, error = None, exc

        return asyncio.ensure_future(self._guard.run(resume()))

    async def poll(self, timeout: float = 0.0) -> list[ConsumerRecord]:
        """:meth:`kaflux.ShareConsumer.poll`, awaiting on the loop (cancellation-safe)."""
        await asyncio.sleep(0)  # bounded work per loop turn: let others run before collecting
        return await self._guard.run(ShareConsumer.poll.steps(self._consumer, timeout))

    def __aiter__(self) -> AsyncShareConsumer:
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

    async def commit_sync(self, timeout: float | None = None) -> dict[TopicPartition, KafkaError | None]:
        """:meth:`kaflux.ShareConsumer.commit_sync`. Cancelled, the acknowledgements still go."""
        return await self._guard.run(ShareConsumer.commit_sync.steps(self._consumer, timeout))

    async def client_instance_id(self, timeout: float) -> uuid.UUID | None:
        """:meth:`kaflux.ShareConsumer.client_instance_id`, awaiting on the loop."""
        return await self._guard.run(ShareConsumer.client_instance_id.steps(self._consumer, timeout))

    async def metrics(self, timeout: float = 0.5) -> dict[str, dict[str, float]]:
        """:meth:`kaflux.ShareConsumer.metrics`."""
        return await self._guard.run(ShareConsumer.metrics.steps(self._consumer, timeout))

    async def close(self, timeout: float = 30.0) -> None:
        """:meth:`kaflux.ShareConsumer.close`: acknowledge what is pending, close the share
        sessions, leave the group and stop the network thread. Idempotent."""
        self._closed = True
        await self._guard.run(ShareConsumer.close.steps(self._consumer, timeout))
