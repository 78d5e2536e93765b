"""What the consumer reads and where it is. [shared: both threads, every method takes one lock]

One of the two objects the application and network threads share (the other is the fetch
buffer). It holds the subscription (topics, a pattern, or a manual assignment), the assigned
partitions in assignment order, and per partition its fetch state, position, pause flag and
the offsets the last fetch reported (high watermark, last stable offset, log start).

Never call out of this class while holding its lock, and never hold another lock while
calling into it.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

from kaflux.consumer.positions import (
    FetchPosition,
    FetchState,
    LeaderAndEpoch,
    PartitionState,
    ResetStrategy,
    SubscriptionType,
    ValidationOutcome,
    ValidationResult,
    validate_position,
)
from kaflux.errors import IllegalStateError
from kaflux.structs import OffsetAndMetadata, TopicPartition

__all__ = [
    "FetchPosition",
    "FetchState",
    "LeaderAndEpoch",
    "PartitionState",
    "ResetStrategy",
    "SubscriptionState",
    "SubscriptionType",
]


class SubscriptionState:
    """The subscription, the assignment and per-partition positions (thread-safe)."""

    def __init__(self, default_reset: ResetStrategy, *, reset_duration_ms: int | None = None) -> None:
        self._lock = threading.Lock()
        #: the duration of ``auto.offset.reset=by_duration:...`` (KIP-1106)
        self.reset_duration_ms = reset_duration_ms
        self._type = SubscriptionType.NONE
        self._topics: frozenset[str] = frozenset()
        self._pattern: re.Pattern[str] | None = None
        self._re2j: str | None = None
        self._assignment: dict[TopicPartition, PartitionState] = {}
        self._default_reset = default_reset
        #: bumped on every assignment change
        self.assignment_version = 0
        #: bumped whenever a position is set (seek, reset, committed offset): the network thread
        #: then checks the new positions against the partitions' current leaders
        self.position_changes = 0

    # -- subscription ---------------------------------------------------------------------

    def _set_type(self, kind: SubscriptionType) -> None:
        if self._type is SubscriptionType.NONE:
            self._type = kind
        elif self._type is not kind:
            raise IllegalStateError(
                "subscribe() to topics, subscribe() to a pattern and assign() are mutually exclusive; "
                "call unsubscribe() first"
            )

    def assign_from_user(self, partitions: Iterable[TopicPartition]) -> set[TopicPartition]:
        """Replace the manual assignment; keeps state of partitions that stay. Returns removed."""
        with self._lock:
            self._set_type(SubscriptionType.USER_ASSIGNED)
            return self._replace_assignment(list(partitions))

    def subscribe(self, topics: Iterable[str]) -> bool:
        """Subscribe to topic names; returns whether the set changed."""
        with self._lock:
            self._set_type(SubscriptionType.AUTO_TOPICS)
            new = frozenset(topics)
            changed = new != self._topics
            self._topics = new
            return changed

    def subscribe_pattern(self, pattern: re.Pattern[str]) -> None:
        """Subscribe to every topic whose name fully matches ``pattern``."""
        with self._lock:
            self._set_type(SubscriptionType.AUTO_PATTERN)
            self._pattern = pattern

    def subscribe_re2j(self, pattern: str) -> bool:
        """Subscribe to a regex the group coordinator resolves; returns whether it changed."""
        with self._lock:
            self._set_type(SubscriptionType.AUTO_PATTERN_RE2J)
            changed = pattern != self._re2j
            self._re2j = pattern
            return changed

    def re2j_pattern(self) -> str | None:
        """The regex the coordinator resolves (a SubscriptionPattern subscription), else None."""
        with self._lock:
            return self._re2j

    def unsubscribe(self) -> None:
        """Drop the subscription and the assignment."""
        with self._lock:
            self._type = SubscriptionType.NONE
            self._topics = frozenset()
            self._pattern = None
            self._re2j = None
            self._replace_assignment([])

    def subscription_type(self) -> SubscriptionType:
        with self._lock:
            return self._type

    def subscription(self) -> frozenset[str]:
        """The subscribed topic names (for a pattern: the topics it currently matches)."""
        with self._lock:
            return self._topics

    def pattern(self) -> re.Pattern[str] | None:
        with self._lock:
            return self._pattern

    def set_pattern_matches(self, topics: Iterable[str]) -> bool:
        """Record the topics a pattern subscription matches now; returns whether they changed."""
        with self._lock:
            new = frozenset(topics)
            changed = new != self._topics
            self._topics = new
            return changed

    # -- assignment ------------------------------------------------------------------------

    def assign_from_subscription(self, partitions: Iterable[TopicPartition]) -> set[TopicPartition]:
        """Set the group-assigned partitions; keeps state of partitions that stay."""
        with self._lock:
            if self._type not in (
                SubscriptionType.AUTO_TOPICS,
                SubscriptionType.AUTO_PATTERN,
                SubscriptionType.AUTO_PATTERN_RE2J,
            ):
                raise IllegalStateError("assign_from_subscription without a subscription")
            return self._replace_assignment(list(partitions))

    def _replace_assignment(self, partitions: list[TopicPartition]) -> set[TopicPartition]:
        old = self._assignment
        removed = set(old) - set(partitions)
        self._assignment = {tp: old.get(tp) or PartitionState() for tp in partitions}
        if removed or len(self._assignment) != len(old) or list(old) != partitions:
            self.assignment_version += 1
        return removed

    def assigned_partitions(self) -> list[TopicPartition]:
        """The assigned partitions in assignment order."""
        with self._lock:
            return list(self._assignment)

    def is_assigned(self, tp: TopicPartition) -> bool:
        with self._lock:
            return tp in self._assignment

    def _state(self, tp: TopicPartition) -> PartitionState:
        state = self._assignment.get(tp)
        if state is None:
            raise IllegalStateError(f"partition {tp} is not assigned to this consumer")
        return state

    # -- positions -------------------------------------------------------------------------

    def seek(self, tp: TopicPartition, position: FetchPosition) -> None:
        """Set the position, as the application's ``seek()`` (Java's ``seekUnvalidated``): the
        fetch state becomes FETCHING, or AWAIT_VALIDATION when the position carries the leader
        epoch of the record before it (``offset_epoch``): the network thread then checks it
        against the partition's current leader before fetching from it."""
        with self._lock:
            self._set_position(self._state(tp), position, validate=position.offset_epoch is not None)

    def seek_if_version(self, tp: TopicPartition, position: FetchPosition, version: int) -> bool:
        """Seek, position trusted (a reset), only if nothing else moved the position since
        ``version`` (for async results)."""
        with self._lock:
            state = self._at_version(tp, version)
            if state is not None:
                self._set_position(state, position)
            return state is not None

    def seek_unvalidated_if_version(self, tp: TopicPartition, position: FetchPosition, version: int) -> bool:
        """As :meth:`seek_if_version` for a position to validate first if it can be (a
        committed offset with its leader epoch, the current leader's epoch known)."""
        with self._lock:
            state = self._at_version(tp, version)
            if state is not None:
                self._set_position(state, position, validate=position.needs_validation)
            return state is not None

    def _at_version(self, tp: TopicPartition, version: int) -> PartitionState | None:
        """The partition's state if it is assigned and its position is still at ``version``."""
        state = self._assignment.get(tp)
        return state if state is not None and state.position_version == version else None

    def _set_position(
        self, state: PartitionState, position: FetchPosition, *, validate: bool = False
    ) -> None:
        state.position = position
        state.fetch_state = FetchState.AWAIT_VALIDATION if validate else FetchState.FETCHING
        state.reset_strategy = None
        state.position_version += 1
        self.position_changes += 1

    @staticmethod
    def _await_reset(state: PartitionState, strategy: ResetStrategy) -> None:
        state.fetch_state = FetchState.AWAIT_RESET
        state.reset_strategy = strategy
        state.position = None
        state.position_version += 1

    def advance(self, tp: TopicPartition, position: FetchPosition, expected_offset: int) -> bool:
        """Move the position forward after records were returned (if still at ``expected_offset``).
        A ``position`` naming no current leader keeps the one of the position it replaces:
        reading records does not change who leads."""
        with self._lock:
            state = self._assignment.get(tp)
            if state is None or state.position is None or state.position.offset != expected_offset:
                return False
            if position.current_leader_id is None and position.current_leader_epoch is None:
                position = position.with_leader(state.position.current_leader)
            state.position = position
            return True

    def advance_offset(
        self, tp: TopicPartition, offset: int, offset_epoch: int | None, expected_offset: int
    ) -> bool:
        """:meth:`advance` to ``offset`` (``offset_epoch``: the epoch of the record before it),
        keeping the current leader: what the collector does after each take, made in one step."""
        with self._lock:
            state = self._assignment.get(tp)
            old = None if state is None else state.position
            if old is None or old.offset != expected_offset:
                return False
            assert state is not None
            state.position = FetchPosition(
                offset, offset_epoch, old.current_leader_epoch, old.current_leader_id
            )
            return True

    def request_reset(self, tp: TopicPartition, strategy: ResetStrategy | None = None) -> None:
        """Ask for the position to be reset (default: ``auto.offset.reset``)."""
        with self._lock:
            self._await_reset(self._state(tp), strategy or self._default_reset)

    def request_reset_if_version(self, tp: TopicPartition, version: int) -> bool:
        """Request the default reset only if the position did not move since ``version`` (a
        seek on the application thread wins over a reset decided on the network thread)."""
        with self._lock:
            state = self._at_version(tp, version)
            if state is not None:
                self._await_reset(state, self._default_reset)
            return state is not None

    def still_awaiting_reset(self, tp: TopicPartition) -> bool:
        """Whether ``tp`` is assigned and still has no position (awaiting a reset)."""
        with self._lock:
            state = self._assignment.get(tp)
            return state is not None and state.fetch_state in (
                FetchState.AWAIT_RESET,
                FetchState.INITIALIZING,
            )

    # -- validation against the current leader (KIP-320) ---------------------------------------

    def maybe_validate_positions(
        self, leaders: Mapping[TopicPartition, LeaderAndEpoch]
    ) -> list[TopicPartition]:
        """Compare positions with their partitions' current ``leaders`` (Java's
        ``maybeValidatePositionForCurrentLeader``). A position validated against another leader
        (or none yet) takes the new one, and awaits validation if it can be validated (it has
        an offset epoch and the leader epoch is known), else fetching goes on. Partitions
        without a position, awaiting a reset, or whose leader is unknown are left alone.
        Returns the partitions that now await validation."""
        waiting: list[TopicPartition] = []
        with self._lock:
            for tp, leader in leaders.items():
                state = self._assignment.get(tp)
                if (
                    state is None
                    or state.position is None
                    or state.fetch_state is FetchState.AWAIT_RESET
                    or leader.leader is None
                    or state.position.current_leader == leader
                ):
                    continue
                state.position = state.position.with_leader(leader)
                if state.position.needs_validation:
                    state.fetch_state = FetchState.AWAIT_VALIDATION
                    waiting.append(tp)
                else:
                    state.fetch_state = FetchState.FETCHING
        return waiting

    def positions_awaiting_validation(self) -> dict[TopicPartition, FetchPosition]:
        """The positions to check with OffsetForLeaderEpoch, in assignment order."""
        with self._lock:
            return {
                tp: s.position
                for tp, s in self._assignment.items()
                if s.fetch_state is FetchState.AWAIT_VALIDATION and s.position is not None
            }

    def maybe_complete_validation(
        self, tp: TopicPartition, position: FetchPosition, end_offset: int, end_epoch: int
    ) -> ValidationResult:
        """Apply the leader's answer (the end offset of the largest epoch at or below the
        position's offset epoch) to ``tp``, if it still awaits validation at ``position``
        (see :func:`~kaflux.consumer.positions.validate_position`). A truncation moves the
        position to where the log diverges, or resets it by ``auto.offset.reset`` when that
        point is unknown; with ``auto.offset.reset=none`` the partition keeps awaiting
        validation (and is not fetched) until the application seeks it."""
        with self._lock:
            state = self._assignment.get(tp)
            if (
                state is None
                or state.fetch_state is not FetchState.AWAIT_VALIDATION
                or state.position != position
            ):
                return ValidationResult(ValidationOutcome.STALE)
            result = validate_position(
                position,
                end_offset,
                end_epoch,
                has_reset_policy=self._default_reset is not ResetStrategy.NONE,
            )
            if result.outcome is ValidationOutcome.VALID:
                state.fetch_state = FetchState.FETCHING
            elif result.outcome is ValidationOutcome.SEEK:
                assert result.position is not None
                self._set_position(state, result.position)
            elif result.outcome is ValidationOutcome.RESET:
                self._await_reset(state, self._default_reset)
            return result

    def skip_validation(self, tp: TopicPartition, position: FetchPosition) -> bool:
        """Fetch from ``position`` without validating it (its leader cannot answer
        OffsetForLeaderEpoch), if ``tp`` still awaits validation there."""
        with self._lock:
            state = self._assignment.get(tp)
            if (
                state is None
                or state.fetch_state is not FetchState.AWAIT_VALIDATION
                or state.position != position
            ):
                return False
            state.fetch_state = FetchState.FETCHING
            return True

    def valid_position(self, tp: TopicPartition) -> tuple[FetchPosition, int] | None:
        """The position and its version if ``tp`` is assigned, not being revoked, and has a
        valid position (FETCHING): fetched data may be returned from there."""
        with self._lock:
            state = self._assignment.get(tp)
            if (
                state is None
                or state.pending_revocation
                or state.fetch_state is not FetchState.FETCHING
                or state.position is None
            ):
                return None
            return state.position, state.position_version

    def returnable_offset(self, tp: TopicPartition) -> int | None:
        """The position's offset if fetched data of ``tp`` may be returned now: as
        :meth:`valid_position`, and not paused; None otherwise (one lock for the collector's
        check of the fetch it is reading)."""
        with self._lock:
            state = self._assignment.get(tp)
            if (
                state is None
                or state.paused
                or state.pending_revocation
                or state.fetch_state is not FetchState.FETCHING
                or state.position is None
            ):
                return None
            return state.position.offset

    def position(self, tp: TopicPartition) -> FetchPosition | None:
        """The current position, or None if it is not known yet."""
        with self._lock:
            return self._state(tp).position

    def position_version(self, tp: TopicPartition) -> int:
        with self._lock:
            return self._state(tp).position_version

    def partitions_in_state(self, fetch_state: FetchState) -> list[tuple[TopicPartition, PartitionState]]:
        """Snapshots (copies) of partitions in ``fetch_state``."""
        with self._lock:
            return [(tp, replace(s)) for tp, s in self._assignment.items() if s.fetch_state is fetch_state]

    def has_all_positions(self, partitions: Iterable[TopicPartition] | None = None) -> bool:
        with self._lock:
            wanted = self._assignment if partitions is None else partitions
            return all(
                (s := self._assignment.get(tp)) is not None and s.fetch_state is FetchState.FETCHING
                for tp in wanted
            )

    def default_reset(self) -> ResetStrategy:
        return self._default_reset

    def all_consumed(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """The positions of partitions that have one: what ``commit_sync()`` commits."""
        with self._lock:
            return {
                tp: OffsetAndMetadata(s.position.offset, "", s.position.offset_epoch)
                for tp, s in self._assignment.items()
                if s.position is not None and s.fetch_state is FetchState.FETCHING
            }

    # -- pause and fetchability ----------------------------------------------------------------

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        with self._lock:
            states = [self._state(tp) for tp in partitions]
            for state in states:
                state.paused = True

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        with self._lock:
            states = [self._state(tp) for tp in partitions]
            for state in states:
                state.paused = False

    def paused(self) -> set[TopicPartition]:
        with self._lock:
            return {tp for tp, s in self._assignment.items() if s.paused}

    def is_paused(self, tp: TopicPartition) -> bool:
        with self._lock:
            state = self._assignment.get(tp)
            return state is not None and state.paused

    def is_readable(self, tp: TopicPartition) -> bool:
        """Assigned and not being revoked: buffered data of it may be returned."""
        with self._lock:
            state = self._assignment.get(tp)
            return state is not None and not state.pending_revocation

    def is_fetchable(self, tp: TopicPartition) -> bool:
        with self._lock:
            state = self._assignment.get(tp)
            return state is not None and state.is_fetchable()

    def fetchable_partitions(
        self, exclude: Callable[[TopicPartition], bool]
    ) -> list[tuple[TopicPartition, FetchPosition, int]]:
        """Fetchable partitions not excluded, with their positions and position versions."""
        with self._lock:
            result = []
            for tp, state in self._assignment.items():
                if state.is_fetchable() and not exclude(tp):
                    assert state.position is not None
                    result.append((tp, state.position, state.position_version))
            return result

    def mark_pending_revocation(self, partitions: Iterable[TopicPartition]) -> None:
        with self._lock:
            for tp in partitions:
                state = self._assignment.get(tp)
                if state is not None:
                    state.pending_revocation = True

    def set_awaiting_callback(self, partitions: Iterable[TopicPartition], awaiting: bool) -> None:
        with self._lock:
            for tp in partitions:
                state = self._assignment.get(tp)
                if state is not None:
                    state.awaiting_callback = awaiting

    # -- offsets reported by fetches ------------------------------------------------------------

    def update_fetch_offsets(
        self, tp: TopicPartition, high_watermark: int, last_stable_offset: int, log_start_offset: int
    ) -> None:
        with self._lock:
            state = self._assignment.get(tp)
            if state is None:
                return
            if high_watermark >= 0:
                state.high_watermark = high_watermark
            if last_stable_offset >= 0:
                state.last_stable_offset = last_stable_offset
            if log_start_offset >= 0:
                state.log_start_offset = log_start_offset

    def lag(self, tp: TopicPartition, read_committed: bool) -> int | None:
        """End offset (HW, or LSO under read_committed) minus position, if both are known."""
        with self._lock:
            return _lag(self._state(tp), read_committed)

    def lags(self, tps: Iterable[TopicPartition], read_committed: bool) -> dict[TopicPartition, int | None]:
        """:meth:`lag` of those of ``tps`` still assigned, read at one moment. For the network
        thread, whose view of a partition (say, in the fetch buffer) can outlive its assignment."""
        with self._lock:
            return {
                tp: _lag(state, read_committed)
                for tp in tps
                if (state := self._assignment.get(tp)) is not None
            }


def _lag(state: PartitionState, read_committed: bool) -> int | None:
    end = state.last_stable_offset if read_committed else state.high_watermark
    if end is None or state.position is None:
        return None
    return max(0, end - state.position.offset)
