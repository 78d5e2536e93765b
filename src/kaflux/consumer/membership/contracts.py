"""What a heartbeat request manager may read of, and do to, its membership. [pure]

A group protocol is a pair: a *membership* (its state, its decisions) and a *heartbeat request
manager* (its requests, and what their answers mean). Neither builds nor imports the other:
``consumer/components.py`` builds both and hands the membership to the heartbeat, which sees it
only through the Protocols here, as a transaction request handler sees its manager through
``producer/txn_requests.py``'s ``TxnContext``.

* :class:`MembershipContext` -- what every heartbeat manager may read (state, identity, the
  coordinator metrics) and do (rejoin, leave on the poll timeout, finish a leave, fence, fail).
* :class:`ClassicMembershipContext`, :class:`ConsumerMembershipContext` and
  :class:`ShareMembershipContext` -- what the classic, the KIP-848 and the share group (KIP-932)
  heartbeat managers add: a protocol's own questions and answers.
* :class:`CoordinatorLookup` -- what a membership and its heartbeat need of the coordinator
  lookup (``CoordinatorRequestManager``).
* :class:`GroupHeartbeat` -- what the rest of the consumer sees of a heartbeat manager: a request
  manager whose poll timer each ``poll()`` of the application resets.

A new protocol adds its own ``MembershipContext`` extension here (as share groups did with
:class:`ShareMembershipContext`); see ``docs/architecture.md``, "Adding a group protocol".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from kaflux.network.requests import RequestManager

if TYPE_CHECKING:
    import uuid

    from kaflux.consumer.assignors import Assignment
    from kaflux.consumer.member_state import MemberState
    from kaflux.errors import BrokerError, KafkaError
    from kaflux.metrics.clients import CoordinatorMetrics
    from kaflux.protocol.messages.consumer_group_heartbeat import (
        Assignment as TargetAssignment,
    )
    from kaflux.protocol.messages.consumer_group_heartbeat import (
        ConsumerGroupHeartbeatRequestTopicPartitions,
    )

__all__ = [
    "ClassicMembershipContext",
    "ConsumerMembershipContext",
    "CoordinatorLookup",
    "GroupHeartbeat",
    "JoinedMember",
    "MembershipContext",
    "ShareMembershipContext",
]

#: A member of the generation as the JoinGroup response lists it (for the leader):
#: member id, group.instance.id, subscription metadata.
JoinedMember = tuple[str, str | None, bytes]


class CoordinatorLookup(Protocol):
    """What the group parts need of the coordinator lookup (``CoordinatorRequestManager``)."""

    @property
    def coordinator_id(self) -> int | None:
        """The node to send group requests to; None while it is unknown."""
        ...

    def mark_unknown(self, reason: str) -> None:
        """The coordinator moved or its connection failed: look it up again."""


class MembershipContext(Protocol):
    """What every heartbeat request manager may read of, and do to, its membership."""

    @property
    def state(self) -> MemberState:
        """The member's state; the heartbeat sends what it calls for."""
        ...

    @property
    def member_id(self) -> str: ...

    @property
    def instance_id(self) -> str | None:
        """``group.instance.id`` (None: a dynamic member)."""
        ...

    @property
    def generation(self) -> int:
        """The classic generation, or the KIP-848 member epoch (-1: none)."""
        ...

    @property
    def metrics(self) -> CoordinatorMetrics:
        """Where heartbeats are counted and timed."""
        ...

    def maybe_rejoin(self, now_ms: int) -> None:
        """Start a rejoin requested while the member was in the group (each poll, first)."""

    def leave_on_poll_timeout(self) -> None:
        """The poll timer expired: leave at once; the member ends STALE."""

    def finish_leave(self) -> None:
        """The coordinator was told of the leave (or cannot be): the member is out."""

    def fence(self, error: type[BrokerError], *, forget_member_id: bool) -> None:
        """The coordinator no longer knows the member or its generation: lose the partitions,
        rejoin."""

    def fail(self, error: KafkaError) -> None:
        """A non-recoverable group error: FATAL, raised by the application's ``poll()``."""


class ClassicMembershipContext(MembershipContext, Protocol):
    """What the classic heartbeat manager (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) adds."""

    @property
    def is_leader(self) -> bool:
        """The member leads the generation: its SyncGroup carries everyone's assignment."""
        ...

    @property
    def protocol_name(self) -> str | None:
        """The assignor the coordinator chose for the generation."""
        ...

    def take_rejoin_reason(self) -> str:
        """A JoinGroup is being sent: the reason it carries."""
        ...

    def join_protocols(self) -> list[tuple[str, bytes]]:
        """The JoinGroup's protocols: each assignor's name and subscription metadata."""
        ...

    def rejoin_with_member_id(self, member_id: str) -> None:
        """JoinGroup asked to join again at once with ``member_id``."""

    def on_join_succeeded(
        self,
        *,
        member_id: str,
        generation: int,
        protocol_name: str | None,
        leader_id: str,
        members: list[JoinedMember],
        now_ms: int,
    ) -> None:
        """JoinGroup put the member in ``generation``."""

    def restart_join(self) -> None:
        """SyncGroup failed; the member may join again."""

    def leader_assignments(self, now_ms: int) -> list[tuple[str, bytes]] | None:
        """The leader's SyncGroup assignments; None while it cannot send them yet."""
        ...

    def on_sync_succeeded(self, assignment: Assignment, now_ms: int) -> None:
        """SyncGroup brought the member's assignment."""

    def request_rejoin(self, reason: str) -> None:
        """The coordinator started a rebalance: rejoin."""


class EpochMembershipContext(MembershipContext, Protocol):
    """What the heartbeats of the broker-driven protocols (KIP-848, KIP-932) add alike."""

    @property
    def epoch(self) -> int:
        """The member epoch to send (0 while joining)."""
        ...

    @property
    def incarnation(self) -> int:
        """Bumped on every (re)join and leave: answers to older heartbeats are dropped."""
        ...


class ConsumerMembershipContext(EpochMembershipContext, Protocol):
    """What the KIP-848 heartbeat manager (ConsumerGroupHeartbeat) adds."""

    def take_subscription_change(self) -> bool:
        """Whether the subscription changed since the last heartbeat that carried it."""
        ...

    def subscribed_topics(self) -> list[str]: ...

    def subscribed_regex(self) -> str | None:
        """The SubscriptionPattern the coordinator resolves (KIP-848), else None."""
        ...

    def owned_topic_partitions(self) -> list[ConsumerGroupHeartbeatRequestTopicPartitions]:
        """The assignment in place, as a heartbeat acknowledges it."""
        ...

    def leave_epoch(self) -> int:
        """The epoch a leaving heartbeat carries (-1, or -2 for a static member closing
        without LEAVE_GROUP)."""
        ...

    def on_heartbeat_request_generated(self) -> None:
        """A heartbeat was built from the state (a join sent, an assignment acknowledged)."""

    def on_heartbeat_success(self, epoch: int, assignment: TargetAssignment | None, now_ms: int) -> None:
        """A heartbeat was answered without error."""


class ShareMembershipContext(EpochMembershipContext, Protocol):
    """What the share group heartbeat manager (ShareGroupHeartbeat, KIP-932) adds."""

    def subscription(self) -> frozenset[str]:
        """The subscribed topic names."""
        ...

    def take_subscription_change(self) -> bool:
        """Whether the subscription changed since the last heartbeat that carried it."""
        ...

    def on_join_sent(self) -> None:
        """A joining heartbeat went out: from now on, leaving must tell the coordinator."""

    def on_heartbeat_success(
        self, member_id: str | None, epoch: int, assignment: dict[uuid.UUID, list[int]] | None
    ) -> None:
        """A heartbeat was answered without error: the epoch, and any new assignment (topic id
        -> partitions)."""


class GroupHeartbeat(RequestManager, Protocol):
    """A group protocol's heartbeat request manager, as the consumer's other parts see it."""

    def reset_poll_timer(self, now_ms: int) -> None:
        """The application polled at ``now_ms`` (``max.poll.interval.ms`` starts again)."""
