"""What a member knows of its group: its settings and its published metadata. [pure]"""

from __future__ import annotations

from dataclasses import dataclass

from kaflux.structs import TopicPartition


@dataclass(frozen=True, slots=True)
class GroupSettings:
    """A consumer's group settings, as the membership parts read them."""

    group_id: str
    group_instance_id: str | None
    auto_commit: bool
    exclude_internal_topics: bool
    #: ``max.poll.interval.ms``: the poll timer, and the rebalance timeout announced on joining
    rebalance_timeout_ms: int
    session_timeout_ms: int
    heartbeat_interval_ms: int
    request_timeout_ms: int
    client_rack: str


@dataclass(frozen=True, slots=True)
class GroupMetadata:
    """What ``Consumer.group_metadata()`` returns (for transactional producers)."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupState:
    """What ``Consumer.group_state()`` returns: where the member is in its group."""

    group_id: str
    #: ``group.protocol``: "classic" or "consumer" (KIP-848)
    protocol: str
    #: the member's state (a ``MemberState`` name, e.g. "STABLE", "RECONCILING")
    state: str
    #: the classic generation, or the KIP-848 member epoch (-1: none)
    generation: int
    member_id: str
    group_instance_id: str | None
    assignment: frozenset[TopicPartition]
    #: why the last rebalance or leave started
    reason: str
