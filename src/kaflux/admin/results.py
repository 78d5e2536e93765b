"""What the admin client's group, cluster and topic calls return: frozen dataclasses. [pure]

Names and meanings follow Java's ``org.apache.kafka.clients.admin`` result classes, with Pythonic
field names; brokers are the public :class:`~kaflux.structs.Node`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from kaflux.structs import Node, TopicPartition

__all__ = [
    "ClusterDescription",
    "ConsumerGroupDescription",
    "ConsumerGroupListing",
    "GroupListing",
    "MemberDescription",
    "PartitionDescription",
    "TopicDescription",
]


@dataclass(frozen=True, slots=True)
class ConsumerGroupListing:
    """One consumer group as a broker lists it (ListGroups).

    ``state`` is None when the broker's ListGroups is older than v4 (it reports no state);
    ``group_type`` (``"classic"`` or ``"consumer"``) is None before v5. ``protocol_type`` is
    ``"consumer"``, or ``""`` for a group that only stores committed offsets.
    """

    group_id: str
    state: str | None
    protocol_type: str
    group_type: str | None


@dataclass(frozen=True, slots=True)
class GroupListing:
    """One group of any type as a broker lists it (ListGroups), as Java's ``GroupListing``
    (KIP-1043).

    ``group_type`` is ``"classic"``, ``"consumer"``, ``"share"`` or ``"streams"`` (None when the
    broker's ListGroups is older than v5); ``protocol`` is the group's protocol type
    (``"consumer"``, ``"share"``, ``"streams"``, ``"connect"``..., ``""`` for a group that only
    stores committed offsets); ``state`` is None before ListGroups v4.
    """

    group_id: str
    group_type: str | None
    protocol: str
    state: str | None


@dataclass(frozen=True, slots=True)
class MemberDescription:
    """One member of a consumer group and the partitions assigned to it."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescription:
    """A consumer group as its coordinator describes it.

    ``state`` is the broker's name for it (``Stable``, ``Empty``, ``PreparingRebalance``,
    ``CompletingRebalance``, ``Dead``; ``Assigning`` / ``Reconciling`` for KIP-848 groups);
    ``protocol`` is the partition assignor the group chose (``range``, ``uniform``...);
    ``coordinator`` is the broker that coordinates the group.
    """

    group_id: str
    state: str
    protocol_type: str
    protocol: str
    coordinator: Node
    members: list[MemberDescription]


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    """The cluster as Metadata describes it: its id, the controller (None when the broker
    names none, or names one that is not among ``nodes``) and every broker, by id."""

    cluster_id: str | None
    controller: Node | None
    nodes: list[Node]


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    """One partition: its leader (-1: none), replicas, in-sync replicas and the offsets of
    its first record (``low_watermark``) and of the next record to be written
    (``high_watermark``)."""

    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    low_watermark: int
    high_watermark: int


@dataclass(frozen=True, slots=True)
class TopicDescription:
    """One topic and its partitions, sorted by partition. ``topic_id`` is None when the
    broker reports none."""

    name: str
    topic_id: uuid.UUID | None
    is_internal: bool
    partitions: list[PartitionDescription]
