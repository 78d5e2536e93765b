"""Commits offsets and reads committed offsets (OffsetCommit, OffsetFetch). [bg, pure]

Retry policy, as in Java's new consumer:

* ``commit_sync`` retries retriable errors until its deadline, then times out;
* ``commit_async`` is never retried: a retriable failure becomes
  :class:`~kaflux.errors.RetriableCommitFailedError`;
* the auto-commit timer (``auto.commit.interval.ms``) commits every consumed position, one
  commit in flight at a time; a retriable failure re-arms the timer to ``retry.backoff.ms``;
* OffsetFetch retries retriable errors (including UNSTABLE_OFFSET_COMMIT) until its deadline.

Requests wait while the coordinator is unknown; NOT_COORDINATOR-style errors and lost
connections make the coordinator manager look it up again.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kaflux.consumer.coordinator_request_manager import CoordinatorRequestManager
from kaflux.consumer.events import complete, fail
from kaflux.errors import (
    BrokerError,
    CommitFailedError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    FencedMemberEpochError,
    IllegalGenerationError,
    KafkaError,
    KafkaTimeoutError,
    NotCoordinatorError,
    RebalanceInProgressError,
    RetriableCommitFailedError,
    StaleMemberEpochError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from kaflux.network.backoff import ExponentialBackoff, RequestState
from kaflux.network.requests import ClientResponse, PollResult, RequestManager, UnsentRequest
from kaflux.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
)
from kaflux.protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestTopic,
    OffsetFetchResponse,
)
from kaflux.structs import OffsetAndMetadata, TopicPartition

if TYPE_CHECKING:
    from kaflux.consumer.subscription_state import SubscriptionState
    from kaflux.metrics.clients import CoordinatorMetrics

log = logging.getLogger(__name__)

#: v8 is the newest classic one; v9 is the KIP-848 flavour (the member epoch in place of the
#: generation), which a broker requires of members of the consumer protocol.
MAX_OFFSET_COMMIT_VERSION = 8
MAX_OFFSET_COMMIT_VERSION_CONSUMER_PROTOCOL = 9
#: v8+ batches groups; v7 (one group, require_stable) is enough.
MAX_OFFSET_FETCH_VERSION = 7

#: error code -> whether the coordinator is gone (else it is only loading)
_COORDINATOR_MOVED = {
    CoordinatorLoadInProgressError.code: False,
    CoordinatorNotAvailableError.code: True,
    NotCoordinatorError.code: True,
}
#: the member is not (or no longer) the one the group knows
_MEMBER_ERRORS = frozenset(
    e.code
    for e in (
        IllegalGenerationError,
        UnknownMemberIdError,
        FencedInstanceIdError,
        FencedMemberEpochError,
        StaleMemberEpochError,
    )
)


@dataclass(frozen=True, slots=True)
class MemberInfo:
    """Who commits: the group generation and member id (-1 / "" without membership)."""

    generation: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
    #: a rebalance is under way: commits are refused until it completes
    rebalancing: bool = False
    #: the member is subscribed but not in the group (stale, fenced or leaving)
    excluded: bool = False


@dataclass(slots=True)
class _PendingCommit:
    offsets: dict[TopicPartition, OffsetAndMetadata]
    retry: bool
    deadline_ms: int
    future: Future[dict[TopicPartition, OffsetAndMetadata]]
    state: RequestState
    #: the commit before partitions are revoked: retried with the latest member epoch after
    #: STALE_MEMBER_EPOCH, and not retried on UNKNOWN_TOPIC_OR_PARTITION (as Java)
    before_revocation: bool = False


@dataclass(slots=True)
class _PendingFetch:
    partitions: frozenset[TopicPartition]
    deadline_ms: int
    state: RequestState
    futures: list[Future[dict[TopicPartition, OffsetAndMetadata | None]]] = field(default_factory=list)


class CommitRequestManager(RequestManager):
    """OffsetCommit and OffsetFetch for one group, plus the auto-commit timer."""

    def __init__(
        self,
        group_id: str,
        coordinator: CoordinatorRequestManager,
        subscription: SubscriptionState,
        *,
        retry_backoff: ExponentialBackoff,
        auto_commit_interval_ms: int | None,
        require_stable: bool,
        member_info: Callable[[], MemberInfo] = MemberInfo,
        consumer_protocol: bool = False,
        metrics: CoordinatorMetrics | None = None,
        on_auto_committed: Callable[[dict[TopicPartition, OffsetAndMetadata]], None] | None = None,
    ) -> None:
        """``on_auto_committed`` is told, on this (the network) thread, what each successful
        auto-commit committed (for the consumer's interceptors)."""
        self._group_id = group_id
        self._on_auto_committed = on_auto_committed
        #: commit-latency and commit-rate (consumer-coordinator-metrics)
        self._metrics = metrics
        #: group.protocol=consumer: commits carry the member epoch (OffsetCommit v9)
        self._consumer_protocol = consumer_protocol
        self._max_commit_version = (
            MAX_OFFSET_COMMIT_VERSION_CONSUMER_PROTOCOL if consumer_protocol else MAX_OFFSET_COMMIT_VERSION
        )
        self._coordinator = coordinator
        self._subscription = subscription
        self._backoff = retry_backoff
        self._auto_interval_ms = auto_commit_interval_ms
        self._require_stable = require_stable
        self._member_info = member_info
        self._commits: list[_PendingCommit] = []
        self._fetches: list[_PendingFetch] = []
        self._next_auto_commit_ms: int | None = None
        self._auto_commit_in_flight = False
        self._last_auto_committed: dict[TopicPartition, OffsetAndMetadata] = {}

    @property
    def auto_commit_enabled(self) -> bool:
        """Whether ``enable.auto.commit`` is on (with a group)."""
        return self._auto_interval_ms is not None

    # -- called by the event processor --------------------------------------------------------

    def commit(
        self,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        *,
        retry: bool,
        deadline_ms: int,
        future: Future[dict[TopicPartition, OffsetAndMetadata]],
    ) -> None:
        """Queue a commit; ``future`` gets the committed offsets or the error."""
        if not offsets:
            complete(future, {})
            return
        self._commits.append(
            _PendingCommit(dict(offsets), retry, deadline_ms, future, RequestState(self._backoff))
        )

    def fetch_committed(
        self,
        partitions: frozenset[TopicPartition],
        deadline_ms: int,
        future: Future[dict[TopicPartition, OffsetAndMetadata | None]],
    ) -> None:
        """Queue an OffsetFetch; an identical one already pending is reused."""
        for pending in self._fetches:
            if pending.partitions == partitions:
                pending.futures.append(future)
                pending.deadline_ms = max(pending.deadline_ms, deadline_ms)
                return
        self._fetches.append(_PendingFetch(partitions, deadline_ms, RequestState(self._backoff), [future]))

    def maybe_auto_commit(self, now_ms: int) -> None:
        """Commit consumed positions if the auto-commit interval elapsed."""
        if self._auto_interval_ms is None:
            return
        if self._next_auto_commit_ms is None:
            self._next_auto_commit_ms = now_ms + self._auto_interval_ms
            return
        if now_ms < self._next_auto_commit_ms or self._auto_commit_in_flight:
            return
        self._next_auto_commit_ms = now_ms + self._auto_interval_ms
        self.auto_commit_now(now_ms)

    def auto_commit_now(
        self,
        now_ms: int,
        future: Future[dict[TopicPartition, OffsetAndMetadata]] | None = None,
        *,
        before_revocation_until_ms: int | None = None,
    ) -> None:
        """Commit every consumed position now (before an assignment change, on close).

        With ``before_revocation_until_ms`` (the membership revoking partitions, in a rebalance
        or when leaving) the commit is retried until then, as Java's
        ``maybeAutoCommitSyncBeforeRevocation``: retriable errors after the backoff,
        STALE_MEMBER_EPOCH with the epoch the member has by then; UNKNOWN_TOPIC_OR_PARTITION
        fails at once (a deleted topic must not hold the revocation up)."""
        offsets = self._subscription.all_consumed()
        changed = {tp: o for tp, o in offsets.items() if self._last_auto_committed.get(tp) != o}
        done: Future[dict[TopicPartition, OffsetAndMetadata]] = future or Future()
        if not changed:
            complete(done, {})
            return
        self._auto_commit_in_flight = True

        def finished(f: Future[dict[TopicPartition, OffsetAndMetadata]]) -> None:
            self._auto_commit_in_flight = False
            error = f.exception()
            if error is None:
                committed = f.result()
                self._last_auto_committed.update(committed)
                if self._on_auto_committed is not None and committed:
                    self._on_auto_committed(committed)
            else:
                # As Java: a failure that the next auto-commit may cure is logged at DEBUG only.
                expected = isinstance(error, (RebalanceInProgressError, RetriableCommitFailedError)) or (
                    isinstance(error, KafkaError) and error.retriable
                )
                (log.debug if expected else log.warning)(
                    "group %s: auto-commit failed: %s", self._group_id, error
                )
                if isinstance(error, KafkaError) and error.retriable and self._auto_interval_ms is not None:
                    self._next_auto_commit_ms = now_ms + self._backoff.initial_ms

        done.add_done_callback(finished)
        if before_revocation_until_ms is None:
            self.commit(changed, retry=False, deadline_ms=now_ms + 30_000, future=done)
        else:
            self._commits.append(
                _PendingCommit(
                    changed,
                    True,
                    before_revocation_until_ms,
                    done,
                    RequestState(self._backoff),
                    before_revocation=True,
                )
            )

    # -- request manager ------------------------------------------------------------------------

    def poll(self, now_ms: int) -> PollResult:
        self._expire(now_ms)
        self.maybe_auto_commit(now_ms)
        wait = 5000 if self._next_auto_commit_ms is None else max(0, self._next_auto_commit_ms - now_ms)
        node = self._coordinator.coordinator_id
        if node is None:
            return PollResult(wait)
        unsent: list[UnsentRequest[Any]] = []
        member = self._member_info()
        for commit in list(self._commits):
            if commit.future.done():  # given up by its caller (a revocation that did not go on)
                self._commits.remove(commit)
                continue
            if not commit.state.can_send(now_ms):
                continue
            if member.excluded:
                self._commits.remove(commit)
                fail(
                    commit.future,
                    CommitFailedError(
                        f"member {member.member_id!r} is not in group {self._group_id!r} now (it left "
                        "after max.poll.interval.ms, or was fenced)",
                        group_id=self._group_id,
                        generation=member.generation,
                        member_id=member.member_id,
                    ),
                )
                continue
            if member.rebalancing:
                self._commits.remove(commit)
                fail(
                    commit.future,
                    RebalanceInProgressError(
                        f"group {self._group_id!r} is rebalancing, so offsets cannot be committed now; "
                        "poll() to complete the rebalance, then commit again (or commit in "
                        "on_partitions_revoked)"
                    ),
                )
                continue
            commit.state.on_send(now_ms)
            unsent.append(self._commit_request(node, commit))
        for pending in self._fetches:
            if pending.state.can_send(now_ms):
                pending.state.on_send(now_ms)
                unsent.append(self._fetch_request(node, pending))
        wake_at = [c.state.retry_at_ms for c in self._commits if not c.state.in_flight]
        wake_at += [f.state.retry_at_ms for f in self._fetches if not f.state.in_flight]
        wake_at += [c.deadline_ms for c in self._commits] + [f.deadline_ms for f in self._fetches]
        if wake_at:
            wait = min(wait, max(0, min(wake_at) - now_ms))
        return PollResult(wait, unsent)

    def poll_on_close(self, now_ms: int) -> PollResult:
        return self.poll(now_ms)

    def has_pending(self) -> bool:
        return bool(self._commits or self._fetches)

    def _expire(self, now_ms: int) -> None:
        # In-flight requests expire too: the caller's deadline wins over request.timeout.ms,
        # and a late response finds its entry gone and is ignored.
        for commit in list(self._commits):
            if now_ms >= commit.deadline_ms:
                self._commits.remove(commit)
                fail(
                    commit.future,
                    KafkaTimeoutError(
                        f"offset commit for group {self._group_id!r} did not complete before its deadline"
                    ),
                )
        for pending in list(self._fetches):
            if now_ms >= pending.deadline_ms:
                self._fetches.remove(pending)
                for future in pending.futures:
                    fail(
                        future,
                        KafkaTimeoutError(
                            f"committed offsets of group {self._group_id!r} were not fetched before "
                            "the deadline"
                        ),
                    )

    def fail_all(self, error: BaseException) -> None:
        for commit in self._commits:
            fail(commit.future, error)
        for pending in self._fetches:
            for future in pending.futures:
                fail(future, error)
        self._commits.clear()
        self._fetches.clear()

    # -- OffsetCommit ----------------------------------------------------------------------------

    def _commit_request(self, node: int, commit: _PendingCommit) -> UnsentRequest[OffsetCommitResponse]:
        member = self._member_info()
        by_topic: dict[str, list[OffsetCommitRequestPartition]] = defaultdict(list)
        for tp, offset in sorted(commit.offsets.items()):
            by_topic[tp.topic].append(
                OffsetCommitRequestPartition(
                    partition_index=tp.partition,
                    committed_offset=offset.offset,
                    committed_leader_epoch=-1 if offset.leader_epoch is None else offset.leader_epoch,
                    committed_metadata=offset.metadata,
                )
            )
        request = OffsetCommitRequest(
            group_id=self._group_id,
            generation_id_or_member_epoch=member.generation,
            member_id=member.member_id,
            group_instance_id=member.group_instance_id,
            topics=[OffsetCommitRequestTopic(name=t, partitions=p) for t, p in by_topic.items()],
        )
        return UnsentRequest(
            request, node, lambda r: self._on_commit_response(commit, member, r), self._max_commit_version
        )

    def _on_commit_response(
        self, commit: _PendingCommit, sent_as: MemberInfo, response: ClientResponse[OffsetCommitResponse]
    ) -> None:
        commit.state.in_flight = False
        if self._metrics is not None and response.error is None:
            self._metrics.commit_answered(
                response.received_ms - response.request.created_ms, response.received_ms
            )
        if commit not in self._commits:
            return  # expired at its deadline while in flight
        now_ms = response.received_ms
        if response.error is not None:
            self._coordinator.mark_unknown(str(response.error))
            self._retry_or_fail(commit, response.error, now_ms)
            return
        body = response.body
        error: BrokerError | None = None
        for topic in body.topics:
            for partition in topic.partitions:
                if partition.error_code != 0:
                    error = error_for_code(partition.error_code)(f"{topic.name}-{partition.partition_index}")
                    break
            if error is not None:
                break
        if error is None:
            self._commits.remove(commit)
            complete(commit.future, commit.offsets)
            return
        if _COORDINATOR_MOVED.get(error.code):
            self._coordinator.mark_unknown(type(error).__name__)
        if isinstance(error, RebalanceInProgressError):
            self._commits.remove(commit)
            fail(
                commit.future,
                RebalanceInProgressError(
                    f"group {self._group_id!r} started a rebalance, so the commit was refused; poll() to "
                    "complete it, then commit again (or commit in on_partitions_revoked)"
                ),
            )
            return
        if error.code in _MEMBER_ERRORS:
            now = self._member_info()
            if (
                commit.before_revocation
                and isinstance(error, StaleMemberEpochError)
                and not now.excluded
                and now.generation >= 0
                and now_ms < commit.deadline_ms
            ):
                # The coordinator moved the member to a newer epoch that its heartbeat is
                # bringing in: commit again with it (the request is rebuilt when sent).
                log.debug("group %s: commit before revocation had a stale epoch; retrying", self._group_id)
                commit.state.on_failure(now_ms)
                return
            self._commits.remove(commit)
            moved = not now.excluded and now.generation >= 0 and now.generation != sent_as.generation
            if moved and not self._consumer_protocol:
                # As Java: the group moved to a new generation while the commit was on its way,
                # and this consumer is in it (a cooperative member keeps its partitions): it is
                # still a member, so it may simply commit again.
                fail(
                    commit.future,
                    RebalanceInProgressError(
                        f"the commit was sent in generation {sent_as.generation} of group "
                        f"{self._group_id!r}, which completed a rebalance meanwhile (now generation "
                        f"{now.generation}); this consumer is still a member: commit again"
                    ),
                )
                return
            fail(
                commit.future,
                CommitFailedError(
                    f"{type(error).__name__} from the coordinator for member {sent_as.member_id!r} of "
                    f"group {self._group_id!r} in generation {sent_as.generation}",
                    group_id=self._group_id,
                    generation=sent_as.generation,
                    member_id=sent_as.member_id,
                ),
            )
            return
        self._retry_or_fail(commit, error, now_ms)

    def _retry_or_fail(self, commit: _PendingCommit, error: KafkaError, now_ms: int) -> None:
        gone = commit.before_revocation and isinstance(error, UnknownTopicOrPartitionError)
        if error.retriable and commit.retry and now_ms < commit.deadline_ms and not gone:
            commit.state.on_failure(now_ms)
            return
        self._commits.remove(commit)
        if error.retriable and not commit.retry:
            fail(
                commit.future,
                RetriableCommitFailedError(
                    f"asynchronous offset commit failed with a retriable error ({error}); commit again "
                    "or use commit_sync()"
                ),
            )
        else:
            fail(commit.future, error)

    # -- OffsetFetch ------------------------------------------------------------------------------

    def _fetch_request(self, node: int, pending: _PendingFetch) -> UnsentRequest[OffsetFetchResponse]:
        by_topic: dict[str, list[int]] = defaultdict(list)
        for tp in sorted(pending.partitions):
            by_topic[tp.topic].append(tp.partition)
        request = OffsetFetchRequest(
            group_id=self._group_id,
            topics=[OffsetFetchRequestTopic(name=t, partition_indexes=p) for t, p in by_topic.items()],
            require_stable=self._require_stable,
        )
        return UnsentRequest(
            request, node, lambda r: self._on_fetch_response(pending, r), MAX_OFFSET_FETCH_VERSION
        )

    def _on_fetch_response(
        self, pending: _PendingFetch, response: ClientResponse[OffsetFetchResponse]
    ) -> None:
        pending.state.in_flight = False
        if pending not in self._fetches:
            return  # expired at its deadline while in flight
        now_ms = response.received_ms
        if response.error is not None:
            self._coordinator.mark_unknown(str(response.error))
            self._retry_fetch_or_fail(pending, response.error, now_ms)
            return
        body = response.body
        if body.error_code != 0:
            error = error_for_code(body.error_code)(f"group {self._group_id!r}")
            if _COORDINATOR_MOVED.get(body.error_code):
                self._coordinator.mark_unknown(type(error).__name__)
            self._retry_fetch_or_fail(pending, error, now_ms)
            return
        result: dict[TopicPartition, OffsetAndMetadata | None] = {tp: None for tp in pending.partitions}
        for topic in body.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                if p.error_code != 0:
                    error = error_for_code(p.error_code)(str(tp))
                    self._retry_fetch_or_fail(pending, error, now_ms)
                    return
                if p.committed_offset >= 0:
                    epoch = p.committed_leader_epoch if p.committed_leader_epoch >= 0 else None
                    result[tp] = OffsetAndMetadata(p.committed_offset, p.metadata or "", epoch)
        self._fetches.remove(pending)
        for future in pending.futures:
            complete(future, dict(result))

    def _retry_fetch_or_fail(self, pending: _PendingFetch, error: KafkaError, now_ms: int) -> None:
        if error.retriable and now_ms < pending.deadline_ms:
            pending.state.on_failure(now_ms)
            return
        self._fetches.remove(pending)
        for future in pending.futures:
            fail(future, error)
