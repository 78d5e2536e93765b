"""Checks of what the application hands the clients, shared by their front doors. [pure]

Each check raises, from the call that took the bad value and before anything reaches the
network thread, the error a caller can act on:

* ``TypeError`` for a value of the wrong type (as the rest of the API does);
* :class:`~kaflux.errors.InvalidTopicError` for a topic name every Kafka broker refuses
  (Java's ``Topic.validate``: 1 to 249 characters of ``[a-zA-Z0-9._-]``, not ``.`` or ``..``);
* :class:`~kaflux.errors.InvalidArgumentError` for a number out of range (a negative
  partition, a timestamp outside 0 .. 2**63-1, as Java's ``ProducerRecord``);
* :class:`~kaflux.errors.RecordTooLargeError` for a record above ``max.request.size`` or
  ``buffer.memory``, sized as Java sizes it: the upper bound of the whole serialized record in
  a batch of its own (``DefaultRecordBatch.estimateBatchSizeUpperBound``: the batch header,
  the record's own overhead, key, value and every header).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from kaflux.errors import InvalidArgumentError, InvalidTopicError, RecordTooLargeError
from kaflux.structs import TopicPartition

#: the longest topic name Kafka accepts
MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
#: Java's RECORD_BATCH_OVERHEAD (the v2 batch header) and DefaultRecord.MAX_RECORD_OVERHEAD
RECORD_BATCH_OVERHEAD = 61
MAX_RECORD_OVERHEAD = 21
_NULL_VARINT_SIZE = 1
_INT64_MAX = 2**63 - 1


def check_topic(topic: object, what: str = "topic") -> str:
    """``topic`` if it is a legal topic name; else TypeError or InvalidTopicError."""
    if not isinstance(topic, str):
        raise TypeError(f"{what} must be a str (a topic name), got {type(topic).__name__} {topic!r}")
    if not topic:
        raise InvalidTopicError(f"{what} name must not be empty")
    if topic in (".", ".."):
        raise InvalidTopicError(f"{what} name cannot be {topic!r}")
    if len(topic) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(
            f"{what} name is {len(topic)} characters long; Kafka allows at most {MAX_TOPIC_NAME_LENGTH}"
        )
    if _LEGAL_TOPIC.fullmatch(topic) is None:
        raise InvalidTopicError(
            f"{what} name {topic!r} is illegal: it may contain only ASCII letters, digits, '.', '_' and '-'"
        )
    return topic


def check_partition_number(partition: object, what: str = "partition") -> int:
    """``partition`` if it is a non-negative int (not a bool); else TypeError or
    InvalidArgumentError."""
    if isinstance(partition, bool) or not isinstance(partition, int):
        raise TypeError(f"{what} must be an int, got {type(partition).__name__} {partition!r}")
    if partition < 0:
        raise InvalidArgumentError(f"{what} must not be negative, got {partition}")
    return partition


def is_topic_partition_pair(tp: object) -> bool:
    """Whether ``tp`` is a (topic, partition) pair as the admin calls take it: a TopicPartition or
    a plain 2-tuple of a non-empty topic name and a non-negative int (not a bool)."""
    return (
        isinstance(tp, tuple)
        and len(tp) == 2
        and isinstance(tp[0], str)
        and bool(tp[0])
        and not isinstance(tp[1], bool)
        and isinstance(tp[1], int)
        and tp[1] >= 0
    )


def check_topic_partition(tp: object, call: str) -> TopicPartition:
    """``tp`` if it is a TopicPartition of a legal topic name and a non-negative partition."""
    if not isinstance(tp, TopicPartition):
        raise TypeError(f"{call} takes TopicPartition values, got {type(tp).__name__} {tp!r}")
    check_topic(tp.topic, f"{call}: the topic of {tp!r}")
    check_partition_number(tp.partition, f"{call}: the partition of {tp!r}")
    return tp


def check_timestamp(timestamp: object) -> int:
    """``timestamp`` (ms since the epoch) if it is an int in 0 .. 2**63-1, as Java's
    ProducerRecord requires; else TypeError or InvalidArgumentError."""
    if isinstance(timestamp, bool) or not isinstance(timestamp, int):
        raise TypeError(
            f"timestamp must be an int (ms since the epoch) or None, got {type(timestamp).__name__}"
        )
    if not 0 <= timestamp <= _INT64_MAX:
        raise InvalidArgumentError(
            f"invalid timestamp {timestamp}: it must be between 0 and 2**63-1 ms since the epoch, or None"
        )
    return timestamp


def _varint_size(value: int) -> int:
    """Bytes of ``value`` as a zig-zag varint (Kafka's record fields)."""
    zigzag = (value << 1) ^ (value >> 63)
    size = 1
    while zigzag >= 0x80:
        zigzag >>= 7
        size += 1
    return size


def _sized(data: bytes | None) -> int:
    return _NULL_VARINT_SIZE if data is None else _varint_size(len(data)) + len(data)


def record_size_upper_bound(
    key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes | None]] | None
) -> int:
    """The most bytes one record can take in a batch of its own (Java's
    ``DefaultRecordBatch.estimateBatchSizeUpperBound``)."""
    size = RECORD_BATCH_OVERHEAD + MAX_RECORD_OVERHEAD + _sized(key) + _sized(value)
    headers = headers or ()
    size += _varint_size(len(headers))
    for header_key, header_value in headers:
        size += _sized(header_key.encode()) + _sized(header_value)
    return size


def check_record_size(size: int, max_request_size: int, buffer_memory: int) -> None:
    """RecordTooLargeError, with Java's reasons, if a record of ``size`` bytes (see
    :func:`record_size_upper_bound`) can never be sent."""
    if size > max_request_size:
        raise RecordTooLargeError(
            f"the record is {size} bytes when serialized (key, value, headers and record overhead), "
            f"more than max.request.size={max_request_size}; raise max.request.size (and the broker's "
            "message.max.bytes) or send smaller records"
        )
    if size > buffer_memory:
        raise RecordTooLargeError(
            f"the record is {size} bytes when serialized, more than the whole buffer.memory={buffer_memory}"
        )
