"""Checks of what the application hands the consumer's assign() and subscribe(). [pure]

Kept apart from the facade so each check is one call there; the rules themselves live in
:mod:`kaflux.validation` (shared with the producer and the admin client).
"""

from __future__ import annotations

from collections.abc import Iterable

from kaflux.structs import TopicPartition
from kaflux.validation import check_topic, check_topic_partition


def check_assignment(partitions: Iterable[object]) -> list[TopicPartition]:
    """The distinct partitions of an ``assign()`` call, in order; raises TypeError,
    InvalidTopicError or InvalidArgumentError for the first bad one."""
    if isinstance(partitions, (str, bytes, TopicPartition)):
        raise TypeError(f"assign() takes a list of TopicPartition values, got {type(partitions).__name__}")
    return [check_topic_partition(tp, "assign()") for tp in dict.fromkeys(partitions)]


def check_subscription(topics: Iterable[object]) -> list[str]:
    """The distinct topic names of a ``subscribe()`` call, in order; raises TypeError or
    InvalidTopicError for the first bad one."""
    return [check_topic(name, "subscribe(): topic") for name in dict.fromkeys(topics)]
