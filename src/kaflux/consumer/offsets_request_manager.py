"""ListOffsets and OffsetForLeaderEpoch: offset lookups and fetch positions. [bg, pure: takes now_ms]

Three jobs:

* answer ``offsets_for_times``, ``beginning_offsets`` and ``end_offsets`` (ListOffsets grouped
  by partition leader, retriable errors retried until the caller's deadline);
* give every assigned partition a position: a partition without one (INITIALIZING) takes its
  committed offset when the consumer has a group, otherwise — or when nothing was committed —
  it is reset by ``auto.offset.reset``; a partition awaiting a reset (AWAIT_RESET, from
  ``seek_to_beginning``/``seek_to_end`` or an out-of-range fetch) is resolved with ListOffsets
  at -2 (earliest) or -1 (latest). With ``auto.offset.reset=none`` the partition is reported
  through ``on_error`` as :class:`~kaflux.errors.NoOffsetForPartitionError`;
* check positions against their partition's current leader (KIP-320, Java's position
  validation): a position carrying the leader epoch of the last record consumed
  (``offset_epoch``), once its partition's leader changed (a metadata refresh, a Fetch
  response naming the new leader, a seek or a committed offset with an epoch), awaits
  validation and is not fetched. OffsetForLeaderEpoch asks the leader where that epoch ends in
  its log. Ending below the position means the log was truncated (an unclean leader
  election lost records the consumer read): with a reset policy the position moves to where
  the log diverges (or, when the leader cannot tell, is reset by ``auto.offset.reset``); with
  ``auto.offset.reset=none`` the application gets :class:`~kaflux.errors.LogTruncationError`
  and the partition waits for a seek. A leader that cannot answer (no OffsetForLeaderEpoch
  v2+, which carries the current leader epoch) is not asked: fetching goes on unvalidated, as
  Java does for brokers without a usable version.

Results apply only if the partition's position did not move meanwhile (position versions).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kaflux.consumer.commit_request_manager import CommitRequestManager
from kaflux.consumer.events import complete, fail
from kaflux.consumer.positions import (
    FetchPosition,
    FetchState,
    LeaderAndEpoch,
    ResetStrategy,
    ValidationOutcome,
)
from kaflux.errors import (
    ClusterAuthorizationFailedError,
    KafkaError,
    KafkaTimeoutError,
    LogTruncationError,
    NoOffsetForPartitionError,
    TopicAuthorizationFailedError,
    UnsupportedVersionError,
    error_for_code,
)
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
from kaflux.protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from kaflux.structs import OffsetAndMetadata, TopicPartition

if TYPE_CHECKING:
    from kaflux.consumer.subscription_state import SubscriptionState

log = logging.getLogger(__name__)

#: OffsetForLeaderEpoch v2 added the current leader epoch, which fences a request sent with stale
#: metadata; an older version cannot validate a position. (Java asks for v3, where the request
#: needs only the topic's DESCRIBE permission; a v2 broker that wants CLUSTER_ACTION instead
#: answers CLUSTER_AUTHORIZATION_FAILED, and its partitions go on unvalidated, as Java's would.)
MIN_VALIDATION_VERSION = 2
#: the first OffsetForLeaderEpoch version authorized by topic (KIP-320)
_TOPIC_PERMISSION_VERSION = 3
_TOPIC_AUTHORIZATION_FAILED = TopicAuthorizationFailedError.code
_CLUSTER_AUTHORIZATION_FAILED = ClusterAuthorizationFailedError.code

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
        wall_clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self._subscription = subscription
        #: the wall clock (epoch ms) that auto.offset.reset=by_duration counts back from
        self._wall_clock_ms = wall_clock_ms
        #: by_duration resets that found no record that recent: they go to the end (KIP-1106)
        self._duration_found_nothing: set[TopicPartition] = set()
        #: partitions whose reset in flight asks for a by_duration timestamp
        self._duration_asked: set[TopicPartition] = set()
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
        #: per partition awaiting validation: its request in flight and its retry backoff
        self._validations: dict[TopicPartition, RequestState] = {}
        #: truncations reported to the application: not asked again until the position moves
        self._truncations_reported: set[tuple[TopicPartition, FetchPosition]] = set()
        self._last_validation_error: KafkaError | None = None
        #: (cluster version, subscription position changes) at the last leader check
        self._leaders_checked: tuple[int, int] = (-1, -1)

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
        unsent: list[UnsentRequest[Any]] = []
        self._check_leaders()
        self._initialize_positions(now_ms)
        unsent += self._reset_requests(now_ms)
        unsent += self._validation_requests(now_ms)
        for lookup in list(self._lookups):
            if lookup.in_flight == 0 and lookup.retry.can_send(now_ms):
                unsent += self._lookup_requests(lookup, now_ms)
        self._check_waiters(now_ms)
        wait = 5000
        if self._lookups or self._resetting or self._waiters:
            wait = 50
        waiting = [s.remaining_backoff_ms(now_ms) for s in self._validations.values() if not s.in_flight]
        if waiting:  # come back when a backoff ends (or soon, while a leader is unknown)
            wait = min(wait, min(ms if ms > 0 else 50 for ms in waiting))
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
                    # Java's refreshCommittedOffsets: validated first when it carries an epoch
                    position = FetchPosition(committed.offset, committed.leader_epoch).with_leader(
                        self._current_leader(tp)
                    )
                    self._subscription.seek_unvalidated_if_version(tp, position, version)
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
            if strategy is ResetStrategy.BY_DURATION:
                if tp in self._duration_found_nothing:
                    wanted[tp] = ResetStrategy.LATEST.timestamp
                else:
                    assert self._wall_clock_ms is not None, "by_duration needs the wall clock"
                    duration = self._subscription.reset_duration_ms or 0
                    wanted[tp] = max(0, self._wall_clock_ms() - duration)
                    self._duration_asked.add(tp)
            else:
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
            if result is None and tp in self._duration_asked:
                # by_duration: no record that recent; ask for the end next (KIP-1106)
                self._duration_asked.discard(tp)
                self._duration_found_nothing.add(tp)
                continue
            if result is not None and tp in versions:
                offset = result[0]
                self._duration_asked.discard(tp)
                self._duration_found_nothing.discard(tp)
                position = FetchPosition(offset).with_leader(self._current_leader(tp))
                self._subscription.seek_if_version(tp, position, versions[tp])
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

    # -- validation (OffsetForLeaderEpoch) ------------------------------------------------------

    def _current_leader(self, tp: TopicPartition) -> LeaderAndEpoch:
        return LeaderAndEpoch(self._cluster.leader_for(tp), self._cluster.leader_epoch(tp))

    def _check_leaders(self) -> None:
        """After a metadata change or a new position, compare every position with its
        partition's current leader (Java's ``validatePositionsOnMetadataChange``)."""
        key = (self._cluster.version, self._subscription.position_changes)
        if key == self._leaders_checked:
            return
        self._leaders_checked = key  # read first: a change from now on is seen next time
        self._subscription.maybe_validate_positions(
            {tp: self._current_leader(tp) for tp in self._subscription.assigned_partitions()}
        )

    def _validation_requests(self, now_ms: int) -> list[UnsentRequest[OffsetForLeaderEpochResponse]]:
        positions = self._subscription.positions_awaiting_validation()
        for tp in [
            tp for tp, state in self._validations.items() if tp not in positions and not state.in_flight
        ]:
            del self._validations[tp]
        self._truncations_reported = {
            (tp, p) for tp, p in self._truncations_reported if positions.get(tp) == p
        }
        by_leader: dict[int, dict[TopicPartition, FetchPosition]] = defaultdict(dict)
        unknown_leader = False
        for tp, position in positions.items():
            if position.offset_epoch is None or (tp, position) in self._truncations_reported:
                continue
            state = self._validations.setdefault(tp, RequestState(self._backoff))
            if not state.can_send(now_ms):
                continue
            leader = self._cluster.leader_for(tp)
            if leader is None:
                unknown_leader = True
                continue
            by_leader[leader][tp] = position
        if unknown_leader:
            self._metadata.request_update()
        requests: list[UnsentRequest[OffsetForLeaderEpochResponse]] = []
        for leader, sent in by_leader.items():
            topics: dict[str, list[OffsetForLeaderPartition]] = defaultdict(list)
            for tp, position in sent.items():
                self._validations[tp].on_send(now_ms)
                assert position.offset_epoch is not None
                topics[tp.topic].append(
                    OffsetForLeaderPartition(
                        partition=tp.partition,
                        current_leader_epoch=-1
                        if position.current_leader_epoch is None
                        else position.current_leader_epoch,
                        leader_epoch=position.offset_epoch,
                    )
                )
            request = OffsetForLeaderEpochRequest(
                replica_id=-1,
                topics=[OffsetForLeaderTopic(topic=t, partitions=p) for t, p in topics.items()],
            )
            log.debug(
                "validating positions %s with broker %d",
                {str(tp): p.offset for tp, p in sent.items()},
                leader,
            )
            requests.append(
                UnsentRequest(
                    request,
                    leader,
                    self._validation_handler(sent),
                    max_version=OffsetForLeaderEpochRequest.MAX_VERSION,
                )
            )
        return requests

    def _validation_handler(
        self, sent: dict[TopicPartition, FetchPosition]
    ) -> Callable[[ClientResponse[OffsetForLeaderEpochResponse]], None]:
        return lambda response: self._on_validation_response(sent, response)

    def _validation_done(self, tp: TopicPartition) -> None:
        state = self._validations.get(tp)
        if state is not None:
            state.on_success()

    def _validation_failed(self, tp: TopicPartition, now_ms: int) -> None:
        state = self._validations.get(tp)
        if state is not None:
            state.on_failure(now_ms)

    def _skip_validation(self, sent: dict[TopicPartition, FetchPosition], why: str) -> None:
        """The leader cannot validate: fetch on unvalidated (Java's
        ``updatePositionLeaderNoValidation``)."""
        log.debug("not validating the positions of %s: %s", sorted(str(tp) for tp in sent), why)
        for tp, position in sent.items():
            self._validation_done(tp)
            self._subscription.skip_validation(tp, position)

    def _on_validation_response(
        self,
        sent: dict[TopicPartition, FetchPosition],
        response: ClientResponse[OffsetForLeaderEpochResponse],
    ) -> None:
        now_ms = response.received_ms
        error = response.error
        if isinstance(error, UnsupportedVersionError):
            self._skip_validation(sent, f"the broker does not support OffsetForLeaderEpoch ({error})")
            return
        if error is not None:
            self._last_validation_error = error
            for tp in sent:
                self._validation_failed(tp, now_ms)
            self._metadata.request_update()
            if not error.retriable:
                self._on_error(error)
            return
        if response.api_version < MIN_VALIDATION_VERSION:
            self._skip_validation(
                sent, f"the broker supports OffsetForLeaderEpoch only up to v{response.api_version}"
            )
            return
        retry = set(sent)
        unauthorized: set[str] = set()
        truncated: dict[TopicPartition, tuple[FetchPosition, OffsetAndMetadata | None]] = {}
        for topic in response.body.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.topic, p.partition)
                position = sent.get(tp)
                if position is None:
                    continue
                if p.error_code == 0:
                    retry.discard(tp)
                    self._validation_done(tp)
                    self._apply_validation(tp, position, p.end_offset, p.leader_epoch, truncated)
                elif p.error_code == _TOPIC_AUTHORIZATION_FAILED:
                    unauthorized.add(tp.topic)
                elif (
                    p.error_code == _CLUSTER_AUTHORIZATION_FAILED
                    and response.api_version < _TOPIC_PERMISSION_VERSION
                ):
                    retry.discard(tp)
                    self._skip_validation(
                        {tp: position}, "the broker wants CLUSTER_ACTION for OffsetForLeaderEpoch v2"
                    )
                else:
                    # NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION...
                    self._last_validation_error = error_for_code(p.error_code)(
                        f"validating the position of {tp}"
                    )
                    log.debug("validating the position of %s: %s; retrying", tp, self._last_validation_error)
        for tp in retry:  # failed, or left out of the answer: ask again after the backoff
            self._validation_failed(tp, now_ms)
        if retry:
            self._metadata.request_update()
        if unauthorized:
            error = TopicAuthorizationFailedError(
                f"topics {sorted(unauthorized)}: not authorized to validate the consumer's positions "
                "(OffsetForLeaderEpoch needs DESCRIBE on the topic)"
            )
            self._last_validation_error = error
            self._on_error(error)
        if truncated:
            self._report_truncation(truncated)

    def _apply_validation(
        self,
        tp: TopicPartition,
        position: FetchPosition,
        end_offset: int,
        end_epoch: int,
        truncated: dict[TopicPartition, tuple[FetchPosition, OffsetAndMetadata | None]],
    ) -> None:
        result = self._subscription.maybe_complete_validation(tp, position, end_offset, end_epoch)
        outcome = result.outcome
        if outcome is ValidationOutcome.SEEK:
            log.info(
                "truncation detected for %s at offset %d (leader epoch %s): the leader's log diverges from "
                "offset %d (epoch %d); fetching from there",
                tp,
                position.offset,
                position.offset_epoch,
                end_offset,
                end_epoch,
            )
        elif outcome is ValidationOutcome.RESET:
            log.info(
                "truncation detected for %s at offset %d (leader epoch %s), where the leader's log diverges "
                "is unknown (end offset %d, epoch %d): resetting by auto.offset.reset=%s",
                tp,
                position.offset,
                position.offset_epoch,
                end_offset,
                end_epoch,
                self._subscription.default_reset().value,
            )
        elif outcome is ValidationOutcome.TRUNCATED:
            log.warning(
                "truncation detected for %s at offset %d (leader epoch %s; the leader answered end offset "
                "%d, epoch %d), and auto.offset.reset=none: the application must seek",
                tp,
                position.offset,
                position.offset_epoch,
                end_offset,
                end_epoch,
            )
            truncated[tp] = (position, result.divergent)

    def _report_truncation(
        self, truncated: dict[TopicPartition, tuple[FetchPosition, OffsetAndMetadata | None]]
    ) -> None:
        """Tell the application, once per position, and fail the position waits it concerns."""
        self._truncations_reported |= {(tp, position) for tp, (position, _) in truncated.items()}
        for tp in truncated:
            self._validations.pop(tp, None)
        error = LogTruncationError(
            offsets={tp: position.offset for tp, (position, _) in truncated.items()},
            divergent_offsets={tp: d for tp, (_, d) in truncated.items() if d is not None},
        )
        self._on_error(error)
        for waiter in list(self._waiters):
            if waiter.partitions is None or any(tp in waiter.partitions for tp in truncated):
                self._waiters.remove(waiter)
                fail(waiter.future, error)

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
        if tp in self._subscription.positions_awaiting_validation():
            cause = "its position awaits validation against its new leader (OffsetForLeaderEpoch)"
            error = self._last_validation_error
            return cause + (f", which failed: {error}" if error is not None else "")
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
