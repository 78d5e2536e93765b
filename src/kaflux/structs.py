"""Public value types shared by the consumer, the producer and the admin client. [pure]"""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    """A partition of a topic. Hashable and ordered (by topic, then partition)."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class OffsetAndMetadata(NamedTuple):
    """A committed offset: the offset of the *next* record to consume, plus user metadata."""

    offset: int
    metadata: str = ""
    leader_epoch: int | None = None


class OffsetAndTimestamp(NamedTuple):
    """The result of ``offsets_for_times``: the earliest offset whose timestamp is >= the query."""

    offset: int
    timestamp: int
    leader_epoch: int | None = None


class RecordMetadata(NamedTuple):
    """Where a produced record landed: returned by ``Producer.send`` futures."""

    topic: str
    partition: int
    offset: int
    timestamp: int


class Node(NamedTuple):
    """A broker as described by cluster metadata."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


class PartitionInfo(NamedTuple):
    """Leadership and replicas of one partition, from cluster metadata."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()


class SubscriptionPattern(NamedTuple):
    """A regular expression that the group coordinator resolves (KIP-848), as Java's
    ``SubscriptionPattern``: ``Consumer.subscribe(pattern=SubscriptionPattern("orders-.*"))``
    with ``group.protocol=consumer``.

    The pattern is in RE2J syntax (Java's RE2 port, which the broker uses), matched against
    whole topic names; the coordinator evaluates it, also against topics created later, and
    assigns what matches: the client scans no metadata for it. A pattern the broker refuses
    fails ``poll()`` with ``InvalidRegularExpressionError``. A plain ``str`` (or
    ``re.Pattern``) given to ``subscribe(pattern=...)`` is a Python regex resolved by the client
    against cluster metadata instead (the only kind the classic protocol takes).
    """

    pattern: str

    def __str__(self) -> str:
        return self.pattern
