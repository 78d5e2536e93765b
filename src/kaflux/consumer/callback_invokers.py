"""Calling the application's callbacks: rebalance listener methods and commit callbacks.
[app: everything here runs on the thread calling poll(), commit or close()]

As Java's ``ConsumerRebalanceListenerInvoker`` and ``OffsetCommitCallbackInvoker``. A listener
method runs when the network thread asks for it (a background event) and is acknowledged with
an application event whatever it does, so the rebalance goes on; an ``async def`` method is
awaited on the event loop by ``kaflux.aio`` (a wait step), before the acknowledgement.
Commit callbacks run in commit order once their commit completed.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import Any, Protocol

from kaflux.blocking import AwaitableWait, Steps
from kaflux.consumer.events import RebalanceCallbackCompletedEvent, RebalanceCallbackNeededEvent, fail
from kaflux.consumer.rebalance_listener import ConsumerRebalanceListener
from kaflux.errors import KafkaError
from kaflux.structs import OffsetAndMetadata, TopicPartition

log = logging.getLogger(__name__)
CommitCallback = Callable[[dict[TopicPartition, OffsetAndMetadata], BaseException | None], None]


class BufferedPartitions(Protocol):
    """What the invoker does to the fetch buffer (``FetchBuffer``)."""

    def retain_all(self, partitions: set[TopicPartition]) -> None: ...


class AssignedPartitions(Protocol):
    """What the invoker reads of the subscription (``SubscriptionState``)."""

    def assigned_partitions(self) -> Iterable[TopicPartition]: ...


class RebalanceListenerInvoker:
    """Runs the rebalance listener's methods and acknowledges each to the network thread."""

    def __init__(
        self,
        buffer: BufferedPartitions,
        subscription: AssignedPartitions,
        acknowledge: Callable[[RebalanceCallbackCompletedEvent], None],
    ) -> None:
        """``acknowledge``: submit the completion event to the network thread."""
        self._buffer = buffer
        self._subscription = subscription
        self._acknowledge = acknowledge
        #: the listener given to subscribe(), if any
        self.listener: ConsumerRebalanceListener | None = None

    def invoke(self, event: RebalanceCallbackNeededEvent) -> Steps[BaseException | None]:
        """Run one listener method, then acknowledge it; returns the method's error."""
        error: BaseException | None = None
        if event.method == "on_partitions_revoked" or event.method == "on_partitions_lost":
            self._buffer.retain_all(set(self._subscription.assigned_partitions()) - set(event.partitions))
        listener = self.listener
        try:
            if listener is not None:
                result = getattr(listener, event.method)(set(event.partitions))
                if inspect.isawaitable(result):
                    yield AwaitableWait(result)
        except Exception as exc:  # the rebalance must go on; the caller sees the error
            error = exc
        except BaseException as exc:  # cancelled while awaited: acknowledge, then propagate
            error = exc
            raise
        finally:
            self._acknowledge(RebalanceCallbackCompletedEvent(event.callback_id, event.method, error))
        return error


class CommitCallbackInvoker:
    """Asynchronous commits not yet reported, with their callbacks, in commit order."""

    def __init__(
        self,
        client_id: str,
        on_commit: Callable[[dict[TopicPartition, OffsetAndMetadata]], None] | None = None,
    ) -> None:
        """``on_commit``: the interceptors' hook, run before a successful commit's callback."""
        self._client_id = client_id
        self._on_commit = on_commit
        self._pending: list[tuple[Future[Any], CommitCallback | None]] = []

    def add(self, future: Future[Any], callback: CommitCallback | None) -> None:
        """Remember a commit in flight."""
        self._pending.append((future, callback))

    def pending(self) -> list[Future[Any]]:
        """The futures of the commits not reported yet."""
        return [future for future, _ in self._pending]

    def run_completed(self) -> None:
        """Call the callbacks of the completed commits at the head of the queue."""
        while self._pending and self._pending[0][0].done():
            future, callback = self._pending.pop(0)
            error = future.exception()
            offsets = future.result() if error is None else {}
            if error is None and self._on_commit is not None:
                self._on_commit(offsets)
            if callback is not None:
                callback(offsets, error)
            elif error is not None:
                log.warning("%s: asynchronous commit failed: %s", self._client_id, error)

    def run_after_close(self) -> None:
        """At close: fail the commits still in flight, then report every one."""
        for future, _ in self._pending:
            if not future.done():
                fail(future, KafkaError("the consumer closed before the commit completed"))
        self.run_completed()
