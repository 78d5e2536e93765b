"""The values the subscription state is made of: fetch states, positions, reset strategies. [pure]

Plain data, so that the request managers can use them without importing the locked
:class:`~kaflux.consumer.subscription_state.SubscriptionState` itself.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class SubscriptionType(enum.Enum):
    """How partitions are chosen."""

    NONE = "none"
    AUTO_TOPICS = "auto_topics"
    AUTO_PATTERN = "auto_pattern"
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

    @property
    def timestamp(self) -> int:
        """The ListOffsets timestamp: -2 earliest, -1 latest."""
        return -2 if self is ResetStrategy.EARLIEST else -1


@dataclass(frozen=True, slots=True)
class FetchPosition:
    """Where the next fetch starts, with the leader epoch of the last record consumed."""

    offset: int
    offset_epoch: int | None = None
    current_leader_epoch: int | None = None


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
