"""The consumer's calls about offsets and metadata: position, commits, committed offsets,
offset lookups by time or end, and topic metadata. [app: public methods of ``Consumer``, which
mixes this class in]

Each call is written once as wait steps (:mod:`kaflux.blocking`): it submits an application
event and waits on its future, the sync ``Consumer`` by blocking, ``kaflux.aio.AsyncConsumer``
on its event loop.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from kaflux.blocking import DoneWait, Steps, blocking
from kaflux.config import ConsumerConfig
from kaflux.consumer.callback_invokers import CommitCallback, CommitCallbackInvoker
from kaflux.consumer.events import (
    CheckAndUpdatePositionsEvent,
    CommitEvent,
    CompletableEvent,
    FetchCommittedOffsetsEvent,
    ListOffsetsEvent,
    TopicMetadataEvent,
)
from kaflux.consumer.subscription_state import SubscriptionState
from kaflux.errors import KafkaError, KafkaTimeoutError
from kaflux.interceptors import ConsumerInterceptors
from kaflux.structs import OffsetAndMetadata, OffsetAndTimestamp, PartitionInfo, TopicPartition

if TYPE_CHECKING:  # types only: the network stack is imported when a Consumer is made
    from kaflux.consumer.offsets_request_manager import OffsetResult
    from kaflux.network.metadata_manager import MetadataAnswer
    from kaflux.network.network_thread import NetworkThread


class OffsetCalls:
    """Offset and metadata methods of :class:`~kaflux.consumer.consumer.Consumer`."""

    _config: ConsumerConfig
    _subscription: SubscriptionState
    _thread: NetworkThread
    _commit_callbacks: CommitCallbackInvoker
    _interceptors: ConsumerInterceptors | None

    def _in_use(self) -> AbstractContextManager[None]:
        raise NotImplementedError  # Consumer: hold the consumer as its only user

    def _timeout_s(self, timeout: float | None) -> float:
        raise NotImplementedError  # Consumer: the timeout checked, default.api.timeout.ms if None

    def _deadline_ms(self, timeout_s: float) -> int:
        raise NotImplementedError  # Consumer: the deadline, in monotonic ms

    def _call(self, event: CompletableEvent, timeout_s: float, what: str | None = None) -> Steps[Any]:
        raise NotImplementedError  # Consumer: submit the event and wait for its result

    @blocking
    def position(self, tp: TopicPartition, timeout: float | None = None) -> Steps[int]:
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
            yield from self._call(
                CheckAndUpdatePositionsEvent(self._deadline_ms(timeout_s), partitions=[tp]),
                timeout_s,
                f"position({tp})",
            )
            resolved = self._subscription.position(tp)
            if resolved is None:
                raise KafkaTimeoutError(f"the position of {tp} is not known yet")
            return resolved.offset

    @blocking
    def commit_sync(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
        timeout: float | None = None,
    ) -> Steps[None]:
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
            committed = yield from self._call(event, timeout_s)
            if self._interceptors is not None:
                self._interceptors.on_commit(committed)
            for future in self._commit_callbacks.pending():
                if not (yield DoneWait(future, max(0.0, deadline - time.monotonic()))):
                    raise KafkaTimeoutError("earlier asynchronous commits did not finish in time")
            self._commit_callbacks.run_completed()

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
        callback: CommitCallback | None = None,
    ) -> Future[dict[TopicPartition, OffsetAndMetadata]]:
        """Commit without waiting; ``callback(offsets, error)`` runs on this thread during a
        later poll(), commit or close(), in commit order. Failures are never retried.

        Returns the commit's future (the committed offsets, or the error); nothing needs to
        wait on it."""
        with self._in_use():
            event = CommitEvent(2**62, offsets=self._normalize(offsets), sync=False)
            self._thread.submit(event)
            self._commit_callbacks.add(event.future, callback)
            future: Future[dict[TopicPartition, OffsetAndMetadata]] = event.future
            return future

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

    @blocking
    def committed(
        self, partitions: Iterable[TopicPartition], timeout: float | None = None
    ) -> Steps[dict[TopicPartition, OffsetAndMetadata | None]]:
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
            result: dict[TopicPartition, OffsetAndMetadata | None] = yield from self._call(
                FetchCommittedOffsetsEvent(self._deadline_ms(timeout_s), partitions=wanted), timeout_s
            )
            return {tp: result.get(tp) for tp in wanted}

    # -- offset lookups ----------------------------------------------------------------------------

    def _list_offsets(
        self, timestamps: dict[TopicPartition, int], timeout: float | None
    ) -> Steps[dict[TopicPartition, OffsetResult]]:
        with self._in_use():
            timeout_s = self._timeout_s(timeout)
            if not timestamps:
                return {}
            event = ListOffsetsEvent(
                self._deadline_ms(timeout_s), timestamps=timestamps, require_timestamp=True
            )
            result: dict[TopicPartition, OffsetResult] = yield from self._call(event, timeout_s)
            return result

    @blocking
    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int], timeout: float | None = None
    ) -> Steps[dict[TopicPartition, OffsetAndTimestamp | None]]:
        """For each partition, the earliest offset whose timestamp is >= the given one
        (milliseconds), or None if there is none.

        Raises:
            ValueError: a timestamp is negative.
            KafkaTimeoutError: no answer within ``timeout`` seconds.
        """
        for tp, ts in timestamps.items():
            if isinstance(ts, bool) or not isinstance(ts, int) or ts < 0:
                raise ValueError(f"timestamp for {tp} must be a non-negative int (ms), got {ts!r}")
        result = yield from self._list_offsets(dict(timestamps), timeout)
        return {
            tp: None if (r := result.get(tp)) is None else OffsetAndTimestamp(r[0], r[1], r[2])
            for tp in timestamps
        }

    @blocking
    def beginning_offsets(
        self, partitions: Iterable[TopicPartition], timeout: float | None = None
    ) -> Steps[dict[TopicPartition, int]]:
        """The first offset of each partition."""
        return (yield from self._ends(partitions, -2, timeout))

    @blocking
    def end_offsets(
        self, partitions: Iterable[TopicPartition], timeout: float | None = None
    ) -> Steps[dict[TopicPartition, int]]:
        """The offset after the last record of each partition (the LSO under read_committed)."""
        return (yield from self._ends(partitions, -1, timeout))

    def _ends(
        self, partitions: Iterable[TopicPartition], which: int, timeout: float | None
    ) -> Steps[dict[TopicPartition, int]]:
        wanted = list(dict.fromkeys(partitions))
        result = yield from self._list_offsets({tp: which for tp in wanted}, timeout)
        out: dict[TopicPartition, int] = {}
        for tp in wanted:
            r = result.get(tp)
            if r is None:
                raise KafkaError(
                    f"the broker returned no {'end' if which == -1 else 'beginning'} offset for {tp}"
                )
            out[tp] = r[0]
        return out

    # -- metadata ----------------------------------------------------------------------------------

    @blocking
    def partitions_for(self, topic: str, timeout: float | None = None) -> Steps[list[PartitionInfo]]:
        """The partitions of ``topic`` (empty if it does not exist).

        As Java's ``partitionsFor``, a lost connection or a leader election is retried until
        ``timeout`` (default ``default.api.timeout.ms``), then :class:`KafkaTimeoutError`
        names the last failure; an error retrying cannot cure (e.g.
        :class:`TopicAuthorizationFailedError`) is raised at once."""
        with self._in_use():
            timeout_s = self._timeout_s(timeout)
            answer: MetadataAnswer = yield from self._call(
                TopicMetadataEvent(self._deadline_ms(timeout_s), topic=topic), timeout_s
            )
            info = answer.topics.get(topic)
            return [] if info is None else [info.partitions[p] for p in sorted(info.partitions)]

    @blocking
    def list_topics(self, timeout: float | None = None) -> Steps[dict[str, list[PartitionInfo]]]:
        """Every topic the consumer may read, with its partitions; failures are retried
        until ``timeout`` as in :meth:`partitions_for`."""
        with self._in_use():
            timeout_s = self._timeout_s(timeout)
            answer: MetadataAnswer = yield from self._call(
                TopicMetadataEvent(self._deadline_ms(timeout_s), topic=None), timeout_s
            )
            return {
                name: [info.partitions[p] for p in sorted(info.partitions)]
                for name, info in sorted(answer.topics.items())
                if not (info.is_internal and self._config.exclude_internal_topics)
            }
