"""The values the subscription state is made of: fetch states, positions, reset strategies. [pure]

Plain data, so that the request managers can use them without importing the locked
:class:`~kaflux.consumer.subscription_state.SubscriptionState` itself.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from kaflux.structs import OffsetAndMetadata


class SubscriptionType(enum.Enum):
    """How partitions are chosen."""

    NONE = "none"
    AUTO_TOPICS = "auto_topics"
    AUTO_PATTERN = "auto_pattern"
    #: a SubscriptionPattern the group coordinator resolves (KIP-848)
    AUTO_PATTERN_RE2J = "auto_pattern_re2j"
    USER_ASSIGNED = "user_assigned"


class FetchState(enum.Enum):
    """Whether a partition has a position to fetch from."""

    INITIALIZING = "initializing"  # no position yet: use the committed offset or the reset policy
    AWAIT_RESET = "await_reset"  # a reset (earliest/latest) was requested
    AWAIT_VALIDATION = "await_validation"  # leader changed: check the position is not truncated
    FETCHING = "fetching"  # valid position


class ResetStrategy(enum.Enum):
    """``auto.offset.reset`` and explicit seeks to the ends."""

    EARLIEST = "earliest"
    LATEST = "latest"
    NONE = "none"
    #: ``by_duration:<ISO-8601 duration>`` (KIP-1106): the first offset at or after now minus
    #: the duration (the end when there is none); the duration is the subscription state's
    BY_DURATION = "by_duration"

    @property
    def timestamp(self) -> int:
        """The ListOffsets timestamp: -2 earliest, -1 latest."""
        return -2 if self is ResetStrategy.EARLIEST else -1


@dataclass(frozen=True, slots=True)
class LeaderAndEpoch:
    """A partition's leader broker and leader epoch as the client last learned them (None
    where unknown)."""

    leader: int | None = None
    epoch: int | None = None


@dataclass(frozen=True, slots=True)
class FetchPosition:
    """Where the next fetch starts (Java's ``FetchPosition``).

    ``offset_epoch`` is the leader epoch of the record before ``offset`` (the last one
    consumed, or the epoch committed with the offset); ``current_leader_epoch`` and
    ``current_leader_id`` name the leader the position was last validated against. When the
    partition's leader moves, a position with an ``offset_epoch`` is checked against the new
    leader's log (OffsetForLeaderEpoch) before fetching goes on.
    """

    offset: int
    offset_epoch: int | None = None
    current_leader_epoch: int | None = None
    current_leader_id: int | None = None

    @property
    def current_leader(self) -> LeaderAndEpoch:
        return LeaderAndEpoch(self.current_leader_id, self.current_leader_epoch)

    def with_leader(self, leader: LeaderAndEpoch) -> FetchPosition:
        """The same offset and offset epoch, validated against ``leader``."""
        return FetchPosition(self.offset, self.offset_epoch, leader.epoch, leader.leader)

    @property
    def needs_validation(self) -> bool:
        """Whether the position can and must be checked against its leader's log: both the
        epoch of the last record consumed and the current leader's epoch are known (Java
        skips the check otherwise)."""
        return self.offset_epoch is not None and self.current_leader_epoch is not None


class ValidationOutcome(enum.Enum):
    """What an OffsetForLeaderEpoch answer means for the position it validated."""

    STALE = "stale"  # the position moved (or the partition left) while the request was out
    VALID = "valid"  # no truncation: fetch on from the same offset
    SEEK = "seek"  # truncated, a reset policy exists: move to where the log diverges
    RESET = "reset"  # truncated at an unknown point, a reset policy exists: reset by it
    TRUNCATED = "truncated"  # truncated, auto.offset.reset=none: the application must seek


@dataclass(frozen=True, slots=True)
class ValidationResult:
    """The outcome of validating one position, with the position it moved to (SEEK) or the
    offset where the leader's log diverges, when known (SEEK, TRUNCATED)."""

    outcome: ValidationOutcome
    position: FetchPosition | None = None
    divergent: OffsetAndMetadata | None = None


def validate_position(
    position: FetchPosition, end_offset: int, end_epoch: int, *, has_reset_policy: bool
) -> ValidationResult:
    """Judge ``position`` by the leader's answer for its ``offset_epoch``: the largest epoch
    the leader knows at or below it (``end_epoch``) and where that epoch ends in the leader's
    log (``end_offset``); -1 for either means the leader could not tell.

    As Java's ``SubscriptionState.maybeCompleteValidation``: the end offset below the position
    is a truncation at that offset; an undefined answer a truncation at an unknown point. One
    case more: a returned epoch older than the position's, ending at or after the position,
    says the leader never had the epoch of the records consumed, so those records are gone too,
    from an offset the leader cannot tell (the consumer's reads were committed ones, which
    every clean leader holds).
    """
    unknown = end_offset < 0 or end_epoch < 0
    if not unknown and end_offset < position.offset:
        divergent = OffsetAndMetadata(end_offset, "", end_epoch)
        if has_reset_policy:
            moved = FetchPosition(
                end_offset, end_epoch, position.current_leader_epoch, position.current_leader_id
            )
            return ValidationResult(ValidationOutcome.SEEK, moved, divergent)
        return ValidationResult(ValidationOutcome.TRUNCATED, None, divergent)
    lost_epoch = not unknown and position.offset_epoch is not None and end_epoch < position.offset_epoch
    if unknown or lost_epoch:
        return ValidationResult(ValidationOutcome.RESET if has_reset_policy else ValidationOutcome.TRUNCATED)
    return ValidationResult(ValidationOutcome.VALID)


@dataclass(slots=True)
class PartitionState:
    """Per-partition state. Mutated only under the SubscriptionState lock."""

    fetch_state: FetchState = FetchState.INITIALIZING
    position: FetchPosition | None = None
    reset_strategy: ResetStrategy | None = None
    paused: bool = False
    pending_revocation: bool = False
    awaiting_callback: bool = False
    high_watermark: int | None = None
    last_stable_offset: int | None = None
    log_start_offset: int | None = None
    #: bumped on every seek/reset, so fetches issued before it can be recognised as stale
    position_version: int = 0

    def is_fetchable(self) -> bool:
        return (
            self.fetch_state is FetchState.FETCHING
            and self.position is not None
            and not self.paused
            and not self.pending_revocation
            and not self.awaiting_callback
        )
