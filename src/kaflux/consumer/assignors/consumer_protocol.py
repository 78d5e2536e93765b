"""The ConsumerProtocol metadata carried in JoinGroup and SyncGroup of the classic group protocol. [pure]

A consumer joining a group sends a :class:`Subscription` (its topics plus assignor data) as the
protocol metadata of each assignor it supports; the leader answers, through SyncGroup, with one
:class:`Assignment` per member. Both travel as an int16 version followed by the body of
``ConsumerProtocolSubscription`` / ``ConsumerProtocolAssignment`` at that version (never flexible).

Version history of the subscription: v0 topics and user data; v1 adds the owned partitions (KIP-429);
v2 the generation id (KIP-792); v3 the rack id (KIP-881). The assignment body is the same at every
version.

Like Java's ``ConsumerProtocol``, decoding a version newer than the newest known one reads it with
the newest known layout and ignores whatever follows (the spec promises that newer versions only
append fields), and trailing bytes after a known version are ignored as well.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeVar

from kaflux.errors import ProtocolError, UnsupportedVersionError
from kaflux.protocol.messages.consumer_protocol import (
    ConsumerProtocolAssignment,
    ConsumerProtocolAssignmentTopicPartition,
    ConsumerProtocolSubscription,
    ConsumerProtocolSubscriptionTopicPartition,
)
from kaflux.protocol.primitives import Reader, Writer
from kaflux.structs import TopicPartition

__all__ = [
    "ASSIGNMENT_MAX_VERSION",
    "SUBSCRIPTION_MAX_VERSION",
    "Assignment",
    "Subscription",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
]

SUBSCRIPTION_MAX_VERSION = ConsumerProtocolSubscription.MAX_VERSION
"""The newest ConsumerProtocolSubscription version kaflux knows (and the default it sends)."""
ASSIGNMENT_MAX_VERSION = ConsumerProtocolAssignment.MAX_VERSION
"""The newest ConsumerProtocolAssignment version kaflux knows (and the default it sends)."""


@dataclass(frozen=True, slots=True)
class Subscription:
    """One member's subscription, as sent in JoinGroup.

    ``topics``: the topics the member subscribes to. ``user_data``: assignor-specific bytes (see
    :meth:`PartitionAssignor.subscription_user_data`), or None. ``owned_partitions``: the partitions
    the member holds while joining (v1+; empty under the eager protocol). ``generation_id``: the
    generation those partitions were assigned in (v2+; -1 when unknown). ``rack_id``: the member's
    ``client.rack`` (v3+).
    """

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = -1
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class Assignment:
    """The partitions the group leader assigned to one member, as received in SyncGroup."""

    partitions: tuple[TopicPartition, ...]
    user_data: bytes | None = None


def _group_by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    """Partition numbers per topic; topics in order of first appearance, partitions in given order."""
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return by_topic


def _check_encode_version(what: str, version: int, max_version: int) -> None:
    if not 0 <= version <= max_version:
        raise UnsupportedVersionError(
            f"cannot encode a consumer protocol {what} at version {version}: kaflux knows versions "
            f"0-{max_version}"
        )


def _read_version(r: Reader, what: str) -> int:
    try:
        version = r.int16()
    except ProtocolError as exc:
        raise ProtocolError(f"invalid consumer protocol {what}: {exc}") from exc
    if version < 0:
        raise ProtocolError(f"invalid consumer protocol {what}: negative version {version}")
    return version


def _encode_versioned(body: ConsumerProtocolSubscription | ConsumerProtocolAssignment, version: int) -> bytes:
    """An int16 ``version``, then ``body`` at that version."""
    w = Writer()
    w.int16(version)
    body.encode(w, version)
    return w.getvalue()


_Body = TypeVar("_Body", ConsumerProtocolSubscription, ConsumerProtocolAssignment)


def _decode_versioned(
    data: bytes | bytearray | memoryview, body: type[_Body], what: str, max_version: int
) -> _Body:
    """Read the int16 version, then the body at that version (at ``max_version`` when newer)."""
    r = Reader(data)
    version = min(_read_version(r, what), max_version)
    try:
        return body.decode(r, version)
    except ProtocolError as exc:
        raise ProtocolError(f"invalid consumer protocol {what}: {exc}") from exc


def encode_subscription(sub: Subscription, version: int = SUBSCRIPTION_MAX_VERSION) -> bytes:
    """Serialize ``sub`` as JoinGroup protocol metadata: an int16 ``version`` and the body.

    Fields the version does not carry are dropped (owned partitions below v1, the generation below
    v2, the rack below v3), as Java does for these ignorable fields. Owned partitions are grouped by
    topic, topics in order of first appearance.
    """
    _check_encode_version("subscription", version, SUBSCRIPTION_MAX_VERSION)
    body = ConsumerProtocolSubscription(
        topics=list(sub.topics),
        user_data=sub.user_data,
        owned_partitions=[
            ConsumerProtocolSubscriptionTopicPartition(topic, parts)
            for topic, parts in _group_by_topic(sub.owned_partitions).items()
        ],
        generation_id=sub.generation_id,
        rack_id=sub.rack_id,
    )
    return _encode_versioned(body, version)


def decode_subscription(data: bytes | bytearray | memoryview) -> Subscription:
    """Parse JoinGroup protocol metadata produced by :func:`encode_subscription` or any Kafka client.

    A version newer than :data:`SUBSCRIPTION_MAX_VERSION` is read with the newest known layout.
    Raises :class:`~kaflux.errors.ProtocolError` when the data is truncated or otherwise malformed.
    """
    body = _decode_versioned(data, ConsumerProtocolSubscription, "subscription", SUBSCRIPTION_MAX_VERSION)
    return Subscription(
        topics=tuple(body.topics),
        user_data=body.user_data,
        owned_partitions=tuple(
            TopicPartition(tp.topic, p) for tp in body.owned_partitions for p in tp.partitions
        ),
        generation_id=body.generation_id,
        rack_id=body.rack_id,
    )


def encode_assignment(assignment: Assignment, version: int = ASSIGNMENT_MAX_VERSION) -> bytes:
    """Serialize ``assignment`` for SyncGroup: an int16 ``version`` and the body (partitions grouped by
    topic, topics in order of first appearance)."""
    _check_encode_version("assignment", version, ASSIGNMENT_MAX_VERSION)
    body = ConsumerProtocolAssignment(
        assigned_partitions=[
            ConsumerProtocolAssignmentTopicPartition(topic, parts)
            for topic, parts in _group_by_topic(assignment.partitions).items()
        ],
        user_data=assignment.user_data,
    )
    return _encode_versioned(body, version)


def decode_assignment(data: bytes | bytearray | memoryview) -> Assignment:
    """Parse a SyncGroup member assignment.

    Empty data (what a broker hands a member the leader assigned nothing to) is an empty
    assignment. A version newer than :data:`ASSIGNMENT_MAX_VERSION` is read with the newest known
    layout. Raises :class:`~kaflux.errors.ProtocolError` when the data is truncated or malformed.
    """
    if len(data) == 0:
        return Assignment(())
    body = _decode_versioned(data, ConsumerProtocolAssignment, "assignment", ASSIGNMENT_MAX_VERSION)
    return Assignment(
        partitions=tuple(
            TopicPartition(tp.topic, p) for tp in body.assigned_partitions for p in tp.partitions
        ),
        user_data=body.user_data,
    )
