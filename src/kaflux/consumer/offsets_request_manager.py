"""ListOffsets: offset lookups and fetch positions. [bg, pure: takes now_ms]

Two jobs:

* answer ``offsets_for_times``, ``beginning_offsets`` and ``end_offsets`` (ListOffsets grouped
  by partition leader, retriable errors retried until the caller's deadline);
* give every assigned partition a position: a partition without one (INITIALIZING) takes its
  committed offset when the consumer has a group, otherwise — or when nothing was committed —
  it is reset by ``auto.offset.reset``; a partition awaiting a reset (AWAIT_RESET, from
  ``seek_to_beginning``/``seek_to_end`` or an out-of-range fetch) is resolved with ListOffsets
  at -2 (earliest) or -1 (latest). With ``auto.offset.reset=none`` the partition is reported
  through ``on_error`` as :class:`~kaflux.errors.NoOffsetForPartitionError`.

Results apply only if the partition's position did not move meanwhile (position versions).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kaflux.consumer.commit_request_manager import CommitRequestManager
from kaflux.consumer.events import complete, fail
from kaflux.consumer.positions import FetchPosition, FetchState, ResetStrategy
from kaflux.errors import KafkaError, KafkaTimeoutError, NoOffsetForPartitionError, error_for_code
from kaflux.network.backoff import ExponentialBackoff, RequestState
from kaflux.network.cluster import ClusterMetadata
from kaflux.network.metadata_manager import MetadataManager
from kaflux.network.requests import ClientResponse, PollResult, RequestManager, UnsentRequest
from kaflux.protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from kaflux.structs import OffsetAndMetadata, TopicPartition

if TYPE_CHECKING:
    from kaflux.consumer.subscription_state import SubscriptionState

#: (offset, timestamp, leader_epoch) for a partition; None when no such offset exists
OffsetResult = tuple[int, int, int | None] | None


@dataclass(slots=True)
class _Lookup:
    timestamps: dict[TopicPartition, int]
    deadline_ms: int
    future: Future[dict[TopicPartition, OffsetResult]]
    retry: RequestState
    results: dict[TopicPartition, OffsetResult] = field(default_factory=dict)
    #: requests in flight (one per partition leader)
    in_flight: int = 0


@dataclass(slots=True)
class _PositionWaiter:
    partitions: list[TopicPartition] | None
    deadline_ms: int
    future: Future[bool]


class OffsetsRequestManager(RequestManager):
    """Offset lookups and position initialization."""

    def __init__(
        self,
        subscription: SubscriptionState,
        cluster: ClusterMetadata,
        metadata: MetadataManager,
        commits: CommitRequestManager | None,
        *,
        read_committed: bool,
        retry_backoff: ExponentialBackoff,
        default_api_timeout_ms: int,
        on_error: Callable[[KafkaError], None],
    ) -> None:
        self._subscription = subscription
        self._cluster = cluster
        self._metadata = metadata
        self._commits = commits
        self._isolation = 1 if read_committed else 0
        self._backoff = retry_backoff
        self._api_timeout_ms = default_api_timeout_ms
        self._on_error = on_error
        self._lookups: list[_Lookup] = []
        self._waiters: list[_PositionWaiter] = []
        self._resetting: dict[TopicPartition, int] = {}  # tp -> position version being reset
        self._committed_pending: set[TopicPartition] = set()
        self._reset_retry = RequestState(retry_backoff)
        self._reported: set[tuple[TopicPartition, int]] = set()
        self._last_reset_error: KafkaError | None = None

    # -- called by the event processor ---------------------------------------------------------

    def list_offsets(
        self,
        timestamps: dict[TopicPartition, int],
        deadline_ms: int,
        future: Future[dict[TopicPartition, OffsetResult]],
    ) -> None:
        """Look up offsets; ``future`` gets {tp: (offset, timestamp, epoch) or None}."""
        if not timestamps:
            complete(future, {})
            return
        self._metadata.add_topics({tp.topic for tp in timestamps})
        self._lookups.append(
            _Lookup(dict(timestamps), deadline_ms, future, retry=RequestState(self._backoff))
        )

    def await_positions(
        self, partitions: list[TopicPartition] | None, deadline_ms: int, future: Future[bool]
    ) -> None:
        """Complete ``future`` once the partitions (default: all assigned) have positions."""
        self._waiters.append(_PositionWaiter(partitions, deadline_ms, future))

    # -- request manager -------------------------------------------------------------------------

    def poll_on_close(self, now_ms: int) -> PollResult:
        """Nothing is worth sending while the client closes."""
        return PollResult()

    def poll(self, now_ms: int) -> PollResult:
        unsent: list[UnsentRequest[ListOffsetsResponse]] = []
        self._initialize_positions(now_ms)
        unsent += self._reset_requests(now_ms)
        for lookup in list(self._lookups):
            if lookup.in_flight == 0 and lookup.retry.can_send(now_ms):
                unsent += self._lookup_requests(lookup, now_ms)
        self._check_waiters(now_ms)
        wait = 5000
        if self._lookups or self._resetting or self._waiters:
            wait = 50
        return PollResult(wait, unsent)

    def fail_all(self, error: BaseException) -> None:
        for lookup in self._lookups:
            fail(lookup.future, error)
        for waiter in self._waiters:
            fail(waiter.future, error)
        self._lookups.clear()
        self._waiters.clear()

    # -- positions ----------------------------------------------------------------------------------

    def _initialize_positions(self, now_ms: int) -> None:
        initializing = [
            (tp, state.position_version)
            for tp, state in self._subscription.partitions_in_state(FetchState.INITIALIZING)
            if tp not in self._committed_pending
        ]
        if not initializing:
            return
        if self._commits is None:
            for tp, version in initializing:
                self._subscription.request_reset_if_version(tp, version)
            return
        versions = dict(initializing)
        self._committed_pending |= set(versions)
        future: Future[dict[TopicPartition, OffsetAndMetadata | None]] = Future()

        def on_committed(f: Future[dict[TopicPartition, OffsetAndMetadata | None]]) -> None:
            self._committed_pending -= set(versions)
            error = f.exception()
            if error is not None:
                if isinstance(error, KafkaError) and not error.retriable:
                    self._on_error(error)
                return  # still INITIALIZING: tried again on a later poll
            for tp, committed in f.result().items():
                version = versions[tp]
                if committed is not None:
                    position = FetchPosition(
                        committed.offset, committed.leader_epoch, self._cluster.leader_epoch(tp)
                    )
                    self._subscription.seek_if_version(tp, position, version)
                else:
                    self._subscription.request_reset_if_version(tp, version)

        future.add_done_callback(on_committed)
        self._commits.fetch_committed(frozenset(versions), now_ms + self._api_timeout_ms, future)

    def _reset_requests(self, now_ms: int) -> list[UnsentRequest[ListOffsetsResponse]]:
        if not self._reset_retry.can_send(now_ms):
            return []
        wanted: dict[TopicPartition, int] = {}
        versions: dict[TopicPartition, int] = {}
        for tp, state in self._subscription.partitions_in_state(FetchState.AWAIT_RESET):
            if self._resetting.get(tp) == state.position_version:
                continue
            strategy = state.reset_strategy or self._subscription.default_reset()
            if strategy is ResetStrategy.NONE:
                self._report_no_offset(tp, state.position_version)
                continue
            wanted[tp] = strategy.timestamp
            versions[tp] = state.position_version
        if not wanted:
            return []
        requests, unknown = self._requests_by_leader(wanted, lambda r: self._on_reset_response(versions, r))
        for tp in unknown:
            wanted.pop(tp)
        self._resetting.update({tp: versions[tp] for tp in wanted})
        return requests

    def _report_no_offset(self, tp: TopicPartition, version: int) -> None:
        if (tp, version) in self._reported:
            return
        self._reported.add((tp, version))
        error = NoOffsetForPartitionError(
            [tp],
            f"no committed offset and auto.offset.reset=none for {tp}; seek() to a position first",
        )
        self._on_error(error)
        for waiter in list(self._waiters):
            if waiter.partitions is None or tp in waiter.partitions:
                self._waiters.remove(waiter)
                fail(waiter.future, error)

    def _on_reset_response(
        self, versions: dict[TopicPartition, int], response: ClientResponse[ListOffsetsResponse]
    ) -> None:
        now_ms = response.received_ms
        results, error = self._parse(response)
        request = response.request.request
        assert isinstance(request, ListOffsetsRequest)
        asked = {TopicPartition(t.name, p.partition_index) for t in request.topics for p in t.partitions}
        for tp in asked:  # answered or not, these may be asked for again (after the backoff)
            if self._resetting.get(tp) == versions.get(tp):
                self._resetting.pop(tp, None)
        if error is not None:
            self._reset_backoff(now_ms, error)
            return
        failed = not asked <= results.keys()  # a partition left out of the answer: retry it
        for tp, result in results.items():
            if isinstance(result, KafkaError):
                if not result.retriable:
                    self._on_error(result)
                failed = True
                continue
            if result is not None and tp in versions:
                offset = result[0]
                self._subscription.seek_if_version(
                    tp, FetchPosition(offset, None, self._cluster.leader_epoch(tp)), versions[tp]
                )
        if failed:
            errors = [r for r in results.values() if isinstance(r, KafkaError)]
            if errors:
                self._last_reset_error = errors[0]
            self._reset_backoff(now_ms, None)
        else:
            self._reset_retry.on_success()
            self._last_reset_error = None

    def _reset_backoff(self, now_ms: int, error: KafkaError | None) -> None:
        if error is not None:
            self._last_reset_error = error
        if error is not None and not error.retriable:
            self._on_error(error)
        self._reset_retry.on_failure(now_ms)
        self._metadata.request_update()

    def _check_waiters(self, now_ms: int) -> None:
        for waiter in list(self._waiters):
            if self._subscription.has_all_positions(waiter.partitions):
                self._waiters.remove(waiter)
                complete(waiter.future, True)
        self.expire_waiters(now_ms)

    def expire_waiters(self, now_ms: int) -> None:
        """Fail the position waits whose deadline passed, naming what is missing and why."""
        for waiter in list(self._waiters):
            if now_ms >= waiter.deadline_ms and not self._subscription.has_all_positions(waiter.partitions):
                self._waiters.remove(waiter)
                fail(waiter.future, KafkaTimeoutError(self._why_unresolved(waiter.partitions)))

    def _why_unresolved(self, partitions: list[TopicPartition] | None) -> str:
        """A timeout message naming the partitions without a position and why."""
        missing = [
            tp
            for tp in (partitions if partitions is not None else self._subscription.assigned_partitions())
            if not self._subscription.has_all_positions([tp])
        ]
        shown = ", ".join(str(tp) for tp in sorted(missing)[:5]) + (" ..." if len(missing) > 5 else "")
        causes = sorted({self._cause(tp) for tp in missing})
        return f"the position of {shown or 'the partitions'} could not be determined in time: " + "; ".join(
            causes
        )

    def _cause(self, tp: TopicPartition) -> str:
        """Why ``tp`` has no position yet, as far as the metadata and responses tell."""
        error = self._metadata.topic_error(tp.topic)
        if error is not None:
            return str(error)
        if self._cluster.leader_for(tp) is None:
            return (
                f"no leader is known for {tp} (no metadata for it yet: the brokers may be unreachable, "
                "or the partition does not exist)"
            )
        if self._last_reset_error is not None:
            return f"listing offsets failed: {self._last_reset_error}"
        leader = self._cluster.leader_for(tp)
        return f"its leader, broker {leader}, did not answer in time"

    # -- lookups --------------------------------------------------------------------------------

    def _lookup_requests(self, lookup: _Lookup, now_ms: int) -> list[UnsentRequest[ListOffsetsResponse]]:
        if now_ms >= lookup.deadline_ms:
            self._lookups.remove(lookup)
            fail(lookup.future, KafkaTimeoutError("offsets were not listed before the deadline"))
            return []
        remaining = {tp: ts for tp, ts in lookup.timestamps.items() if tp not in lookup.results}
        requests, _ = self._requests_by_leader(remaining, lambda r: self._on_lookup_response(lookup, r))
        lookup.in_flight = len(requests)
        if not requests:
            lookup.retry.postpone(now_ms, 50)
        return requests

    def _on_lookup_response(self, lookup: _Lookup, response: ClientResponse[ListOffsetsResponse]) -> None:
        lookup.in_flight -= 1
        if lookup not in self._lookups:
            return  # already failed by another leader's response, or expired
        now_ms = response.received_ms
        results, error = self._parse(response)
        retry = error is not None and error.retriable
        if error is not None and not error.retriable:
            self._lookups.remove(lookup)
            fail(lookup.future, error)
            return
        for tp, result in results.items():
            if isinstance(result, KafkaError):
                if not result.retriable:
                    self._lookups.remove(lookup)
                    fail(lookup.future, result)
                    return
                retry = True
            elif tp in lookup.timestamps:
                lookup.results[tp] = result
        if len(lookup.results) == len(lookup.timestamps):
            self._lookups.remove(lookup)
            complete(lookup.future, dict(lookup.results))
        elif retry and lookup.in_flight == 0:
            self._metadata.request_update()
            lookup.retry.on_failure(now_ms)

    # -- shared -------------------------------------------------------------------------------------

    def _requests_by_leader(
        self,
        timestamps: dict[TopicPartition, int],
        handler: Callable[[ClientResponse[ListOffsetsResponse]], None],
    ) -> tuple[list[UnsentRequest[ListOffsetsResponse]], list[TopicPartition]]:
        by_leader: dict[int, dict[str, list[ListOffsetsPartition]]] = defaultdict(lambda: defaultdict(list))
        unknown: list[TopicPartition] = []
        for tp, timestamp in sorted(timestamps.items()):
            leader = self._cluster.leader_for(tp)
            if leader is None:
                unknown.append(tp)
                continue
            epoch = self._cluster.leader_epoch(tp)
            by_leader[leader][tp.topic].append(
                ListOffsetsPartition(
                    partition_index=tp.partition,
                    current_leader_epoch=-1 if epoch is None else epoch,
                    timestamp=timestamp,
                )
            )
        if unknown:
            self._metadata.add_topics({tp.topic for tp in unknown})
            self._metadata.request_update()
        requests = [
            UnsentRequest(
                ListOffsetsRequest(
                    replica_id=-1,
                    isolation_level=self._isolation,
                    topics=[ListOffsetsTopic(name=t, partitions=p) for t, p in topics.items()],
                ),
                leader,
                handler,
            )
            for leader, topics in by_leader.items()
        ]
        return requests, unknown

    def _parse(
        self, response: ClientResponse[ListOffsetsResponse]
    ) -> tuple[dict[TopicPartition, OffsetResult | KafkaError], KafkaError | None]:
        if response.error is not None:
            return {}, response.error
        body = response.body
        results: dict[TopicPartition, OffsetResult | KafkaError] = {}
        for topic in body.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                if p.error_code != 0:
                    results[tp] = error_for_code(p.error_code)(str(tp))
                    continue
                offset = p.offset
                if response.api_version == 0:
                    offset = p.old_style_offsets[0] if p.old_style_offsets else -1
                epoch = p.leader_epoch if p.leader_epoch >= 0 else None
                results[tp] = None if offset < 0 else (offset, p.timestamp, epoch)
        return results, None
