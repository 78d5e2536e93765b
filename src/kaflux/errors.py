"""The kaflux error tree. [pure]

Every exception kaflux raises derives from :class:`KafkaError`. Errors a broker reports by
code have one class each (a subclass of :class:`BrokerError`) carrying the code, a
``retriable`` flag (the operation may succeed if retried) and an ``invalid_metadata`` flag
(the client should refresh cluster metadata before retrying). :func:`error_for_code` maps a code
to its class and :func:`raise_for_code` raises it; :data:`BROKER_ERRORS` lists them all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, ClassVar, Literal, TypeVar

from kaflux.structs import OffsetAndMetadata, TopicPartition


class KafkaError(Exception):
    """Root of every error kaflux raises."""

    retriable: ClassVar[bool] = False
    invalid_metadata: ClassVar[bool] = False


class ConfigError(KafkaError, ValueError):
    """A configuration key is unknown, has the wrong type, or an invalid value.

    ``key`` names the offending configuration key.
    """

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"config {key!r}: {message}")
        self.key = key


class KafkaTimeoutError(KafkaError, TimeoutError):
    """An operation did not finish before its deadline."""

    retriable = True


class KafkaConnectionError(KafkaError):
    """The connection to a broker failed or was closed while requests were in flight."""

    retriable = True
    invalid_metadata = True


class IllegalStateError(KafkaError, RuntimeError):
    """An API was used in a state that does not allow it (e.g. after close)."""


class InvalidArgumentError(KafkaError, ValueError):
    """An argument of an API call is invalid (Java's IllegalArgumentException), e.g. a
    negative or NaN timeout."""


class ConcurrentAccessError(KafkaError, RuntimeError):
    """A second thread called a consumer that is not safe for concurrent use."""


class WakeupError(KafkaError):
    """A blocking call was interrupted by ``wakeup()`` from another thread."""


class ProtocolError(KafkaError):
    """Bytes from a broker could not be parsed as the expected Kafka message."""


class MalformedResponseError(ProtocolError):
    """A broker answered a request (the right correlation id) with a body that could not be
    decoded as the response it announced: a broker defect, since the same request would get the
    same answer. That request fails at once, not retried; the connection is closed and the other
    requests in flight on it are retried as after any lost connection."""

    def __init__(self, message: str, *, correlation_id: int = -1) -> None:
        super().__init__(message)
        #: the correlation id of the request whose response this was
        self.correlation_id = correlation_id


class AcknowledgementOutcomeUnknownError(KafkaError):
    """A broker answered a ShareFetch or ShareAcknowledge that carried a share group's
    acknowledgements for a partition without a word on that partition: whether it took them is
    unknown. A record it did not take is delivered again (to some member, delivery count + 1)."""


class ResponseTooLargeError(KafkaConnectionError, ProtocolError):
    """A broker sent a response larger than ``receive.message.max.bytes``: the connection was
    closed unread and the requests in flight on it failed. The consumer raises it from ``poll()``
    once per occurrence (fetching goes on); raise ``receive.message.max.bytes``, or lower
    ``fetch.max.bytes`` / ``max.partition.fetch.bytes`` where the broker honours them."""

    def __init__(self, message: str, *, size: int = -1, limit: int = -1, broker: str = "") -> None:
        super().__init__(message)
        #: the response's size as its frame announced it, the limit, and ``host:port (node N)``
        self.size = size
        self.limit = limit
        self.broker = broker


class UnsupportedVersionError(KafkaError):
    """The broker supports no version of an API that kaflux implements."""


class CorruptRecordError(KafkaError):
    """A record batch failed validation (CRC, length, magic or structure).

    ``reason`` says what is wrong. ``topic``, ``partition`` and ``offset`` locate the bad data when
    known: the data from ``offset`` on is damaged. The consumer reports its position there (the
    offset it was about to read, so everything before it was good); the batch decoder on its own
    reports the batch's base offset.
    """

    def __init__(
        self,
        message: str,
        *,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
    ) -> None:
        where = data = ""
        skip = "seek to an offset beyond the corrupt batch"
        if topic is not None:
            tp = f"{topic}-{partition}"
            where = f" in {tp}"
            data = f" of {tp}"
            skip = f"seek {tp} to an offset beyond the corrupt batch"
            if offset is not None:
                where = f"{where} at offset {offset}"
                data = f"{data} from offset {offset} on"
        super().__init__(
            f"corrupt record batch{where}: {message}. The data{data} is damaged on the broker or in "
            f"transit; to skip it, {skip} (the records in it cannot be read)."
        )
        self.reason = message
        self.topic = topic
        self.partition = partition
        self.offset = offset


class BrokerError(KafkaError):
    """An error a broker returned as an error code.

    Subclasses set ``code``; ``error_for_code`` maps a code to its class.
    """

    code: ClassVar[int] = -1
    description: ClassVar[str] = "unknown broker error"

    def __init__(self, message: str | None = None) -> None:
        text = f"[{type(self).__name__}, code {self.code}] {self.description}"
        if message:
            text = f"{text}: {message}"
        super().__init__(text)
        self.detail = message

    def __reduce__(self) -> tuple[object, ...]:
        # Rebuild from the original detail, so pickling (Spark, multiprocessing) does not
        # prefix the class and code a second time.
        return (type(self), (self.detail,), self.__dict__)


# --- Families without a code of their own ---------------------------------------------------------------
# Broker error classes below also derive from these where Kafka groups them the same way, so callers can
# catch "any authorization failure" or "any bad position" with one except clause.


class AuthorizationError(KafkaError):
    """The principal lacks a permission (an ACL) for the operation. Retrying will not help; fix the ACLs."""


class AuthenticationError(KafkaError):
    """SASL authentication failed or was used out of order. Check the credentials and mechanism."""


class SslAuthenticationError(AuthenticationError):
    """The TLS handshake failed: the broker's certificate was not trusted or not for its host
    name, the client certificate was refused, or one side does not speak TLS at all (a
    security.protocol that does not match the broker's listener)."""


class InvalidOffsetError(KafkaError):
    """The consumer has no valid position for some partitions.

    ``partitions`` is the set of affected partitions (empty when unknown). Subclasses:
    :class:`NoOffsetForPartitionError` (nothing to start from) and :class:`OffsetOutOfRangeError`
    (the position fell off the log).
    """

    def __init__(self, message: str, partitions: Iterable[TopicPartition] = ()) -> None:
        super().__init__(message)
        self.partitions: frozenset[TopicPartition] = frozenset(partitions)


# --- Client-side errors (no broker code) ------------------------------------------------------------------


class CommitFailedError(KafkaError):
    """An offset commit failed for good because the consumer is no longer in the group's generation.

    ``message`` gives the context (e.g. the broker error); the standard explanation of the cause and
    the remedy is appended unless the message already covers it (mentions ``max.poll.interval.ms``).
    ``group_id``, ``generation`` and ``member_id`` say who tried to commit, when known.
    """

    _EXPLANATION: ClassVar[str] = (
        "the commit cannot be completed because this consumer is no longer an active member of the group: "
        "it was kicked out (poll() was not called within max.poll.interval.ms, or its session expired) and "
        "the group rebalanced, so its partitions may now belong to another member. The consumer rejoins on "
        "its next poll(). If the time between polls is the cause, increase max.poll.interval.ms or reduce "
        "max.poll.records so that each batch is processed in time, or process long batches with the "
        "pause-and-poll pattern (docs/clients.md: 'Long processing')"
    )

    def __init__(
        self,
        message: str | None = None,
        *,
        group_id: str | None = None,
        generation: int | None = None,
        member_id: str | None = None,
    ) -> None:
        if not message:
            text = f"offset commit failed: {self._EXPLANATION}"
        elif "max.poll.interval.ms" in message:
            text = message
        else:
            text = f"offset commit failed ({message}): {self._EXPLANATION}"
        super().__init__(text)
        self.detail = message
        self.group_id = group_id
        self.generation = generation
        self.member_id = member_id

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.detail,), self.__dict__)


class RetriableCommitFailedError(KafkaError):
    """An offset commit failed with a retriable error (e.g. the coordinator moved); retrying may succeed."""

    retriable = True

    def __init__(self, message: str | None = None) -> None:
        super().__init__(
            message or "offset commit failed with a retriable error; a retry or a later commit may succeed"
        )
        self.detail = message

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.detail,), self.__dict__)


class NoOffsetForPartitionError(InvalidOffsetError):
    """Some partitions have no committed offset and ``auto.offset.reset`` is ``none``.

    ``message`` replaces the standard text, which names the partitions and the remedy.
    """

    def __init__(self, partitions: Iterable[TopicPartition], message: str | None = None) -> None:
        parts = sorted(frozenset(partitions))
        names = ", ".join(str(tp) for tp in parts) or "(none given)"
        super().__init__(
            message
            or f"no committed offset and no reset policy (auto.offset.reset=none) for: {names}. Call seek() "
            "for these partitions, or set auto.offset.reset to 'earliest' or 'latest'",
            parts,
        )
        self.detail = message

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (tuple(sorted(self.partitions)), self.detail), self.__dict__)


class RecordDeserializationError(KafkaError):
    """The key or value deserializer failed on a fetched record.

    ``topic``, ``partition`` and ``offset`` locate the record; ``origin`` says whether the key or the
    value failed (None when unknown). The consumer's position stays at this record; seek to
    ``offset + 1`` to skip it. (A share consumer releases the record instead; ``hint`` says so.)

    The record itself comes along as it was fetched, undeserialized (KIP-1036, as Java's
    ``RecordDeserializationException``): ``key`` and ``value`` (raw bytes or None),
    ``timestamp``, ``timestamp_type`` and ``headers`` (``(name, bytes | None)`` pairs), so a
    dead-letter handler can keep it. They are None where the error did not come from a fetched
    record.
    """

    #: the record's raw key and value bytes, timestamp, its type (0 create time, 1 log append
    #: time) and headers, as fetched (KIP-1036); None when unknown
    key: bytes | None = None
    value: bytes | None = None
    timestamp: int | None = None
    timestamp_type: int | None = None
    headers: list[tuple[str, bytes | None]] | None = None

    def __init__(
        self,
        message: str,
        *,
        topic: str,
        partition: int,
        offset: int,
        origin: Literal["key", "value"] | None = None,
        hint: str | None = None,
    ) -> None:
        what = f"the {origin} of " if origin else ""
        super().__init__(
            f"could not deserialize {what}the record at {topic}-{partition} offset {offset}: {message}. "
            + (hint if hint is not None else f"Seek to offset {offset + 1} to skip it")
        )
        self.detail = message
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.origin = origin

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def __reduce__(self) -> tuple[object, ...]:
        return (
            _rebuild_deserialization_error,
            (self.detail, self.topic, self.partition, self.offset, self.origin),
            self.__dict__,
        )


def _rebuild_deserialization_error(
    message: str, topic: str, partition: int, offset: int, origin: Literal["key", "value"] | None
) -> RecordDeserializationError:
    return RecordDeserializationError(message, topic=topic, partition=partition, offset=offset, origin=origin)


def deserialization_error(
    exc: Exception,
    *,
    topic: str,
    partition: int,
    offset: int,
    origin: Literal["key", "value"] | None,
    record: Any = None,
) -> RecordDeserializationError | DeserializerUnavailableError:
    """The error for a deserializer that raised ``exc`` on a record: an outage (``exc`` is a
    retriable KafkaError, e.g. the Schema Registry did not answer) or a bad record, which
    carries the fetched ``record``'s raw key, value, timestamp and headers (KIP-1036)."""
    if isinstance(exc, KafkaError) and exc.retriable:
        return DeserializerUnavailableError(
            str(exc), topic=topic, partition=partition, offset=offset, origin=origin
        )
    error = RecordDeserializationError(
        repr(exc), topic=topic, partition=partition, offset=offset, origin=origin
    )
    if record is not None:
        error.key = record.key
        error.value = record.value
        error.timestamp = record.timestamp
        error.timestamp_type = record.timestamp_type
        error.headers = list(record.headers) if record.headers is not None else None
    return error


class DeserializerUnavailableError(KafkaError):
    """A deserializer could not reach a service it needs (a Schema Registry that did not
    answer, or answered with a transient error) for a fetched record: nothing is wrong with
    the record.

    Unlike :class:`RecordDeserializationError` it is not a bad record: do not seek past it.
    The consumer's position stays at ``offset``, so the next ``poll()`` reads the record
    again; ``retriable`` is True. ``topic``, ``partition``, ``offset`` and ``origin`` locate
    the record as in :class:`RecordDeserializationError`.
    """

    retriable = True

    def __init__(
        self,
        message: str,
        *,
        topic: str,
        partition: int,
        offset: int,
        origin: Literal["key", "value"] | None = None,
    ) -> None:
        what = f"the {origin} of " if origin else ""
        super().__init__(
            f"could not deserialize {what}the record at {topic}-{partition} offset {offset} "
            f"yet: {message}. The record was not skipped: the next poll() reads it again "
            "(do not seek past it)"
        )
        self.detail = message
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.origin = origin

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def __reduce__(self) -> tuple[object, ...]:
        return (
            _rebuild_unavailable_error,
            (self.detail, self.topic, self.partition, self.offset, self.origin),
            self.__dict__,
        )


def _rebuild_unavailable_error(
    message: str, topic: str, partition: int, offset: int, origin: Literal["key", "value"] | None
) -> DeserializerUnavailableError:
    return DeserializerUnavailableError(
        message, topic=topic, partition=partition, offset=offset, origin=origin
    )


# --- One class per broker error code ----------------------------------------------------------------------
# Codes, names and flags follow Apache Kafka's org.apache.kafka.common.protocol.Errors (Kafka 4.x, codes
# -1..133): ``retriable`` is set where Kafka's exception class extends RetriableException, and
# ``invalid_metadata`` where it extends InvalidMetadataException. Code 0 (NONE) is not an error and has no
# class. Class names are the Kafka names in CamelCase with an ``Error`` suffix, except where a name would
# clash or mislead: CORRUPT_MESSAGE is CorruptMessageError (CorruptRecordError is the client-side check),
# UNSUPPORTED_VERSION is UnsupportedVersionBrokerError (also an UnsupportedVersionError), MESSAGE_TOO_LARGE
# is RecordTooLargeError (Kafka's own exception name) and NETWORK_EXCEPTION is NetworkError.

_BY_CODE: dict[int, type[BrokerError]] = {}
_KAFKA_NAMES: dict[int, str] = {}
_E = TypeVar("_E", bound=BrokerError)


def _register(kafka_name: str) -> Callable[[type[_E]], type[_E]]:
    """Class decorator: record ``cls`` as the class for its ``code`` under Kafka's ``kafka_name``."""

    def register(cls: type[_E]) -> type[_E]:
        if cls.code == 0 or cls.code in _BY_CODE:
            raise RuntimeError(f"error code {cls.code} of {cls.__name__} is reserved or already taken")
        _BY_CODE[cls.code] = cls
        _KAFKA_NAMES[cls.code] = kafka_name
        return cls

    return register


@_register("UNKNOWN_SERVER_ERROR")
class UnknownServerError(BrokerError):
    code = -1
    description = "the broker hit an unexpected error while handling the request; its log has the details"


@_register("OFFSET_OUT_OF_RANGE")
class OffsetOutOfRangeError(BrokerError, InvalidOffsetError):
    """The fetch position is outside the partition's log.

    ``offsets`` maps each affected partition to the position that was out of range (empty when
    the broker error was raised directly); ``partitions`` holds its keys.
    """

    code = 1
    description = (
        "the requested offset is outside the range the partition's log holds (removed by retention, or not "
        "written yet); reset the position or seek"
    )

    def __init__(
        self, message: str | None = None, *, offsets: Mapping[TopicPartition, int] | None = None
    ) -> None:
        super().__init__(message)
        self.offsets: dict[TopicPartition, int] = dict(offsets or {})
        self.partitions = frozenset(self.offsets)
        self.detail = message

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.detail,), self.__dict__)


class LogTruncationError(InvalidOffsetError):
    """The log of some partitions was truncated below the consumer's position: records it had
    read are gone (an unclean leader election), and ``auto.offset.reset`` is ``none``.

    Java's ``LogTruncationException``, an ``OffsetOutOfRangeException`` there. Here it is no broker
    error (no code of its own), so it derives from the root both offset errors share,
    :class:`InvalidOffsetError`, and carries what :class:`OffsetOutOfRangeError` carries:
    ``offsets`` (also ``offset_out_of_range_partitions``) maps each truncated partition to its
    fetch offset, ``partitions`` holds its keys. ``divergent_offsets`` gives, for the partitions
    whose leader could tell, the first offset (with its leader epoch) where the leader's log
    differs from what the consumer read. The partitions are not fetched until they are seeked.
    """

    def __init__(
        self,
        message: str | None = None,
        *,
        offsets: Mapping[TopicPartition, int] | None = None,
        divergent_offsets: Mapping[TopicPartition, OffsetAndMetadata] | None = None,
    ) -> None:
        fetch_offsets = dict(offsets or {})
        divergent = dict(divergent_offsets or {})
        if not message:
            where = "; ".join(
                f"{tp} at offset {offset}: "
                + (
                    f"the leader's log diverges from offset {divergent[tp].offset} "
                    f"(leader epoch {divergent[tp].leader_epoch})"
                    if tp in divergent
                    else "where the leader's log diverges is unknown"
                )
                for tp, offset in sorted(fetch_offsets.items())
            )
            message = (
                "log truncation detected, records the consumer read are gone (an unclean leader "
                f"election): {where or 'no partition named'}. auto.offset.reset is 'none', so the "
                "consumer does not move on its own: seek() each partition (to its divergent offset to "
                "read what the log holds now), or set auto.offset.reset to 'earliest' or 'latest'"
            )
        super().__init__(message, fetch_offsets)
        self.offsets: dict[TopicPartition, int] = fetch_offsets
        self.divergent_offsets: dict[TopicPartition, OffsetAndMetadata] = divergent
        self.detail = message

    @property
    def offset_out_of_range_partitions(self) -> dict[TopicPartition, int]:
        """Each truncated partition's fetch offset (Java's ``offsetOutOfRangePartitions()``)."""
        return self.offsets

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.detail,), self.__dict__)


@_register("CORRUPT_MESSAGE")
class CorruptMessageError(BrokerError):
    code = 2
    description = (
        "the broker found a corrupt record batch: a CRC mismatch, an impossible size, or a null key on a "
        "compacted topic"
    )
    retriable = True


@_register("UNKNOWN_TOPIC_OR_PARTITION")
class UnknownTopicOrPartitionError(BrokerError):
    code = 3
    description = (
        "the broker hosts no such topic-partition; it may not exist yet, or the client's metadata is stale"
    )
    retriable = True
    invalid_metadata = True


@_register("INVALID_FETCH_SIZE")
class InvalidFetchSizeError(BrokerError):
    code = 4
    description = "the fetch size in the request is not acceptable"


@_register("LEADER_NOT_AVAILABLE")
class LeaderNotAvailableError(BrokerError):
    code = 5
    description = (
        "the partition has no leader at the moment (an election is under way); refresh metadata and retry"
    )
    retriable = True
    invalid_metadata = True


@_register("NOT_LEADER_OR_FOLLOWER")
class NotLeaderOrFollowerError(BrokerError):
    code = 6
    description = (
        "this broker is not the partition's leader (or not one of its replicas); refresh metadata and send "
        "to the right broker"
    )
    retriable = True
    invalid_metadata = True


@_register("REQUEST_TIMED_OUT")
class RequestTimedOutError(BrokerError):
    code = 7
    description = "the broker gave up on the request before it could complete it"
    retriable = True


@_register("BROKER_NOT_AVAILABLE")
class BrokerNotAvailableError(BrokerError):
    code = 8
    description = "the broker is not available"


@_register("REPLICA_NOT_AVAILABLE")
class ReplicaNotAvailableError(BrokerError):
    code = 9
    description = "a replica of the partition is not available on this broker"
    retriable = True
    invalid_metadata = True


@_register("MESSAGE_TOO_LARGE")
class RecordTooLargeError(BrokerError):
    code = 10
    description = (
        "a record batch is bigger than the broker or topic accepts (message.max.bytes / max.message.bytes)"
    )


@_register("STALE_CONTROLLER_EPOCH")
class StaleControllerEpochError(BrokerError):
    code = 11
    description = "the request carried an outdated controller epoch: the controller has moved"


@_register("OFFSET_METADATA_TOO_LARGE")
class OffsetMetadataTooLargeError(BrokerError):
    code = 12
    description = (
        "the metadata string of a committed offset is longer than the broker allows "
        "(offset.metadata.max.bytes)"
    )


@_register("NETWORK_EXCEPTION")
class NetworkError(BrokerError):
    code = 13
    description = "the broker lost the connection before it could send a response"
    retriable = True
    invalid_metadata = True


@_register("COORDINATOR_LOAD_IN_PROGRESS")
class CoordinatorLoadInProgressError(BrokerError):
    code = 14
    description = "the coordinator is still loading its state and cannot serve requests yet; retry shortly"
    retriable = True


@_register("COORDINATOR_NOT_AVAILABLE")
class CoordinatorNotAvailableError(BrokerError):
    code = 15
    description = (
        "no coordinator is available for the group or transaction right now; look the coordinator up again "
        "and retry"
    )
    retriable = True


@_register("NOT_COORDINATOR")
class NotCoordinatorError(BrokerError):
    code = 16
    description = (
        "this broker is not the coordinator for the group or transaction; look the coordinator up again and"
        " retry"
    )
    retriable = True


@_register("INVALID_TOPIC_EXCEPTION")
class InvalidTopicError(BrokerError):
    code = 17
    description = (
        "the topic name is not legal, or the operation is not allowed on that topic (e.g. an internal one)"
    )


@_register("RECORD_LIST_TOO_LARGE")
class RecordListTooLargeError(BrokerError):
    code = 18
    description = "the record batch is bigger than a log segment on the broker"


@_register("NOT_ENOUGH_REPLICAS")
class NotEnoughReplicasError(BrokerError):
    code = 19
    description = "the write was refused: fewer replicas are in sync than min.insync.replicas demands"
    retriable = True


@_register("NOT_ENOUGH_REPLICAS_AFTER_APPEND")
class NotEnoughReplicasAfterAppendError(BrokerError):
    code = 20
    description = "the records were appended, but fewer replicas than required were in sync"
    retriable = True


@_register("INVALID_REQUIRED_ACKS")
class InvalidRequiredAcksError(BrokerError):
    code = 21
    description = "the produce request asked for an acks value the broker does not accept"


@_register("ILLEGAL_GENERATION")
class IllegalGenerationError(BrokerError):
    code = 22
    description = (
        "the request named a group generation that is no longer current; the member has to rejoin the group"
    )


@_register("INCONSISTENT_GROUP_PROTOCOL")
class InconsistentGroupProtocolError(BrokerError):
    code = 23
    description = (
        "the member's protocol type or assignment strategies do not fit those of the group's current members"
    )


@_register("INVALID_GROUP_ID")
class InvalidGroupIdError(BrokerError):
    code = 24
    description = "the group id is empty or otherwise not valid"


@_register("UNKNOWN_MEMBER_ID")
class UnknownMemberIdError(BrokerError):
    code = 25
    description = (
        "the coordinator does not know this member id (e.g. its session expired); rejoin the group without "
        "a member id"
    )


@_register("INVALID_SESSION_TIMEOUT")
class InvalidSessionTimeoutError(BrokerError):
    code = 26
    description = (
        "session.timeout.ms is outside the range the broker allows (group.min/max.session.timeout.ms)"
    )


@_register("REBALANCE_IN_PROGRESS")
class RebalanceInProgressError(BrokerError):
    code = 27
    description = "the group is rebalancing; the member has to rejoin before it can continue"


@_register("INVALID_COMMIT_OFFSET_SIZE")
class InvalidCommitOffsetSizeError(BrokerError):
    code = 28
    description = "the offset commit request is too big or its size is otherwise invalid"


@_register("TOPIC_AUTHORIZATION_FAILED")
class TopicAuthorizationFailedError(BrokerError, AuthorizationError):
    code = 29
    description = "the principal may not access the topic"


@_register("GROUP_AUTHORIZATION_FAILED")
class GroupAuthorizationFailedError(BrokerError, AuthorizationError):
    code = 30
    description = "the principal may not access the consumer group"


@_register("CLUSTER_AUTHORIZATION_FAILED")
class ClusterAuthorizationFailedError(BrokerError, AuthorizationError):
    code = 31
    description = "the principal may not perform this cluster-level operation"


@_register("INVALID_TIMESTAMP")
class InvalidTimestampError(BrokerError):
    code = 32
    description = "a record's timestamp is outside the window the broker accepts"


@_register("UNSUPPORTED_SASL_MECHANISM")
class UnsupportedSaslMechanismError(BrokerError, AuthenticationError):
    code = 33
    description = "the requested SASL mechanism is not enabled on the broker"


@_register("ILLEGAL_SASL_STATE")
class IllegalSaslStateError(BrokerError, AuthenticationError):
    code = 34
    description = "the request is not allowed at this point of the SASL exchange"


@_register("UNSUPPORTED_VERSION")
class UnsupportedVersionBrokerError(BrokerError, UnsupportedVersionError):
    code = 35
    description = "the broker does not support the version of the API the request used"


@_register("TOPIC_ALREADY_EXISTS")
class TopicAlreadyExistsError(BrokerError):
    code = 36
    description = "the topic exists already"


@_register("INVALID_PARTITIONS")
class InvalidPartitionsError(BrokerError):
    code = 37
    description = "the requested partition count is not valid (below 1, or not an increase)"


@_register("INVALID_REPLICATION_FACTOR")
class InvalidReplicationFactorError(BrokerError):
    code = 38
    description = "the replication factor is below 1 or exceeds the number of live brokers"


@_register("INVALID_REPLICA_ASSIGNMENT")
class InvalidReplicaAssignmentError(BrokerError):
    code = 39
    description = "the replica assignment in the request is not valid"


@_register("INVALID_CONFIG")
class InvalidConfigError(BrokerError):
    code = 40
    description = "a configuration entry in the request is not valid"


@_register("NOT_CONTROLLER")
class NotControllerError(BrokerError):
    code = 41
    description = "this broker is not the active controller; retry against the current one"
    retriable = True


@_register("INVALID_REQUEST")
class InvalidRequestError(BrokerError):
    code = 42
    description = (
        "the broker could not make sense of the request (a malformed request or an incompatible broker); "
        "its log has the details"
    )


@_register("UNSUPPORTED_FOR_MESSAGE_FORMAT")
class UnsupportedForMessageFormatError(BrokerError):
    code = 43
    description = "the topic's message format version is too old for this request"


@_register("POLICY_VIOLATION")
class PolicyViolationError(BrokerError):
    code = 44
    description = "the request breaks a policy configured on the broker"


@_register("OUT_OF_ORDER_SEQUENCE_NUMBER")
class OutOfOrderSequenceNumberError(BrokerError):
    code = 45
    description = "the broker got a producer sequence number that is out of order"


@_register("DUPLICATE_SEQUENCE_NUMBER")
class DuplicateSequenceNumberError(BrokerError):
    code = 46
    description = "the broker got a producer sequence number it had already seen"


@_register("INVALID_PRODUCER_EPOCH")
class InvalidProducerEpochError(BrokerError):
    code = 47
    description = "the producer used an epoch older than the current one for its producer id"


@_register("INVALID_TXN_STATE")
class InvalidTxnStateError(BrokerError):
    code = 48
    description = "the transactional operation is not allowed in the transaction's current state"


@_register("INVALID_PRODUCER_ID_MAPPING")
class InvalidProducerIdMappingError(BrokerError):
    code = 49
    description = "the producer id is not the one currently mapped to this transactional id"


@_register("INVALID_TRANSACTION_TIMEOUT")
class InvalidTransactionTimeoutError(BrokerError):
    code = 50
    description = "the transaction timeout is above the broker's transaction.max.timeout.ms"


@_register("CONCURRENT_TRANSACTIONS")
class ConcurrentTransactionsError(BrokerError):
    code = 51
    description = "another operation on the same transaction is still finishing; retry shortly"
    retriable = True


@_register("TRANSACTION_COORDINATOR_FENCED")
class TransactionCoordinatorFencedError(BrokerError):
    code = 52
    description = "a newer transaction coordinator has taken over and fenced the sender"


@_register("TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
class TransactionalIdAuthorizationFailedError(BrokerError, AuthorizationError):
    code = 53
    description = "the principal may not use the transactional id"


@_register("SECURITY_DISABLED")
class SecurityDisabledError(BrokerError):
    code = 54
    description = "the operation needs security features that the broker has disabled"


@_register("OPERATION_NOT_ATTEMPTED")
class OperationNotAttemptedError(BrokerError):
    code = 55
    description = "the broker skipped this operation, usually because another part of the same request failed"


@_register("KAFKA_STORAGE_ERROR")
class KafkaStorageError(BrokerError):
    code = 56
    description = (
        "the broker hit a disk error reading or writing the partition's log; refresh metadata and retry"
    )
    retriable = True
    invalid_metadata = True


@_register("LOG_DIR_NOT_FOUND")
class LogDirNotFoundError(BrokerError):
    code = 57
    description = "the named log directory is not configured on the broker"


@_register("SASL_AUTHENTICATION_FAILED")
class SaslAuthenticationFailedError(BrokerError, AuthenticationError):
    code = 58
    description = "SASL authentication did not succeed (wrong credentials or mechanism)"


@_register("UNKNOWN_PRODUCER_ID")
class UnknownProducerIdError(BrokerError):
    code = 59
    description = "the broker has no state for the producer id (it may have expired)"


@_register("REASSIGNMENT_IN_PROGRESS")
class ReassignmentInProgressError(BrokerError):
    code = 60
    description = "a partition reassignment is under way"


@_register("DELEGATION_TOKEN_AUTH_DISABLED")
class DelegationTokenAuthDisabledError(BrokerError):
    code = 61
    description = "delegation tokens are not enabled on the broker"


@_register("DELEGATION_TOKEN_NOT_FOUND")
class DelegationTokenNotFoundError(BrokerError):
    code = 62
    description = "the broker has no such delegation token"


@_register("DELEGATION_TOKEN_OWNER_MISMATCH")
class DelegationTokenOwnerMismatchError(BrokerError):
    code = 63
    description = "the principal is neither the owner nor a renewer of the delegation token"


@_register("DELEGATION_TOKEN_REQUEST_NOT_ALLOWED")
class DelegationTokenRequestNotAllowedError(BrokerError):
    code = 64
    description = (
        "delegation token requests are refused on this kind of connection (plaintext, one-way TLS, or "
        "token-authenticated)"
    )


@_register("DELEGATION_TOKEN_AUTHORIZATION_FAILED")
class DelegationTokenAuthorizationFailedError(BrokerError, AuthorizationError):
    code = 65
    description = "the principal may not perform this delegation token operation"


@_register("DELEGATION_TOKEN_EXPIRED")
class DelegationTokenExpiredError(BrokerError):
    code = 66
    description = "the delegation token has run out"


@_register("INVALID_PRINCIPAL_TYPE")
class InvalidPrincipalTypeError(BrokerError):
    code = 67
    description = "the principal type is not one the broker supports"


@_register("NON_EMPTY_GROUP")
class NonEmptyGroupError(BrokerError):
    code = 68
    description = "the group still has active members, so it cannot be deleted"


@_register("GROUP_ID_NOT_FOUND")
class GroupIdNotFoundError(BrokerError):
    code = 69
    description = "no group with this id exists"


@_register("FETCH_SESSION_ID_NOT_FOUND")
class FetchSessionIdNotFoundError(BrokerError):
    code = 70
    description = "the broker has dropped the incremental fetch session; start a new one with a full fetch"
    retriable = True


@_register("INVALID_FETCH_SESSION_EPOCH")
class InvalidFetchSessionEpochError(BrokerError):
    code = 71
    description = (
        "the fetch session epoch is not the one the broker expected; start a new session with a full fetch"
    )
    retriable = True


@_register("LISTENER_NOT_FOUND")
class ListenerNotFoundError(BrokerError):
    code = 72
    description = "the partition's leader has no listener matching the one this request arrived on"
    retriable = True
    invalid_metadata = True


@_register("TOPIC_DELETION_DISABLED")
class TopicDeletionDisabledError(BrokerError):
    code = 73
    description = "topic deletion is switched off on the broker (delete.topic.enable=false)"


@_register("FENCED_LEADER_EPOCH")
class FencedLeaderEpochError(BrokerError):
    code = 74
    description = "the request carried a leader epoch older than the broker's; refresh metadata and retry"
    retriable = True
    invalid_metadata = True


@_register("UNKNOWN_LEADER_EPOCH")
class UnknownLeaderEpochError(BrokerError):
    code = 75
    description = (
        "the request carried a leader epoch newer than the broker has seen; retry after a short wait"
    )
    retriable = True


@_register("UNSUPPORTED_COMPRESSION_TYPE")
class UnsupportedCompressionTypeError(BrokerError):
    code = 76
    description = (
        "the partition uses a compression type (e.g. zstd) that the request's API version cannot carry"
    )


@_register("STALE_BROKER_EPOCH")
class StaleBrokerEpochError(BrokerError):
    code = 77
    description = "the broker epoch in the request is out of date"


@_register("OFFSET_NOT_AVAILABLE")
class OffsetNotAvailableError(BrokerError):
    code = 78
    description = "after a leader change the new leader's high watermark has not caught up yet; retry shortly"
    retriable = True


@_register("MEMBER_ID_REQUIRED")
class MemberIdRequiredError(BrokerError):
    code = 79
    description = "the coordinator assigned this member an id; join again using that id"


@_register("PREFERRED_LEADER_NOT_AVAILABLE")
class PreferredLeaderNotAvailableError(BrokerError):
    code = 80
    description = "the partition's preferred leader is not available"
    retriable = True
    invalid_metadata = True


@_register("GROUP_MAX_SIZE_REACHED")
class GroupMaxSizeReachedError(BrokerError):
    code = 81
    description = "the group already has as many members as group.max.size allows"


@_register("FENCED_INSTANCE_ID")
class FencedInstanceIdError(BrokerError):
    code = 82
    description = (
        "a newer member with the same group.instance.id took this static member's place; check for "
        "duplicate instance ids"
    )


@_register("ELIGIBLE_LEADERS_NOT_AVAILABLE")
class EligibleLeadersNotAvailableError(BrokerError):
    code = 83
    description = "no eligible leader is available for the partition"
    retriable = True
    invalid_metadata = True


@_register("ELECTION_NOT_NEEDED")
class ElectionNotNeededError(BrokerError):
    code = 84
    description = "the partition already has the leader an election would pick"
    retriable = True
    invalid_metadata = True


@_register("NO_REASSIGNMENT_IN_PROGRESS")
class NoReassignmentInProgressError(BrokerError):
    code = 85
    description = "there is no partition reassignment under way"


@_register("GROUP_SUBSCRIBED_TO_TOPIC")
class GroupSubscribedToTopicError(BrokerError):
    code = 86
    description = "the group is still subscribed to the topic, so its offsets for it cannot be deleted"


@_register("INVALID_RECORD")
class InvalidRecordError(BrokerError):
    code = 87
    description = "the broker's validation rejected a record"


@_register("UNSTABLE_OFFSET_COMMIT")
class UnstableOffsetCommitError(BrokerError):
    code = 88
    description = (
        "an open transaction still has offsets pending for the partition; fetch the committed offset again "
        "shortly"
    )
    retriable = True


@_register("THROTTLING_QUOTA_EXCEEDED")
class ThrottlingQuotaExceededError(BrokerError):
    code = 89
    description = "the request went over a throttling quota; retry after the throttle time"
    retriable = True


@_register("PRODUCER_FENCED")
class ProducerFencedError(BrokerError):
    code = 90
    description = "a newer producer with the same transactional id has started; this producer must be closed"


@_register("RESOURCE_NOT_FOUND")
class ResourceNotFoundError(BrokerError):
    code = 91
    description = "the request names a resource that does not exist"


@_register("DUPLICATE_RESOURCE")
class DuplicateResourceError(BrokerError):
    code = 92
    description = "the request names the same resource more than once"


@_register("UNACCEPTABLE_CREDENTIAL")
class UnacceptableCredentialError(BrokerError):
    code = 93
    description = "the credential does not meet the broker's requirements"


@_register("INCONSISTENT_VOTER_SET")
class InconsistentVoterSetError(BrokerError):
    code = 94
    description = "the sender or the receiver is not part of the KRaft quorum's voter set"


@_register("INVALID_UPDATE_VERSION")
class InvalidUpdateVersionError(BrokerError):
    code = 95
    description = "the update version is not valid"


@_register("FEATURE_UPDATE_FAILED")
class FeatureUpdateFailedError(BrokerError):
    code = 96
    description = "an unexpected broker error prevented updating the finalized features"


@_register("PRINCIPAL_DESERIALIZATION_FAILURE")
class PrincipalDeserializationFailureError(BrokerError):
    code = 97
    description = "the principal of a forwarded request could not be decoded"


@_register("SNAPSHOT_NOT_FOUND")
class SnapshotNotFoundError(BrokerError):
    code = 98
    description = "the requested KRaft snapshot does not exist"


@_register("POSITION_OUT_OF_RANGE")
class PositionOutOfRangeError(BrokerError):
    code = 99
    description = "the requested position lies outside the snapshot"


@_register("UNKNOWN_TOPIC_ID")
class UnknownTopicIdError(BrokerError):
    code = 100
    description = "the broker hosts no topic with this id; refresh metadata"
    retriable = True
    invalid_metadata = True


@_register("DUPLICATE_BROKER_REGISTRATION")
class DuplicateBrokerRegistrationError(BrokerError):
    code = 101
    description = "another broker has already registered this broker id"


@_register("BROKER_ID_NOT_REGISTERED")
class BrokerIdNotRegisteredError(BrokerError):
    code = 102
    description = "the broker id has not been registered"


@_register("INCONSISTENT_TOPIC_ID")
class InconsistentTopicIdError(BrokerError):
    code = 103
    description = "the topic id in the request differs from the one in the broker's log; refresh metadata"
    retriable = True
    invalid_metadata = True


@_register("INCONSISTENT_CLUSTER_ID")
class InconsistentClusterIdError(BrokerError):
    code = 104
    description = "the cluster id in the request differs from the server's"


@_register("TRANSACTIONAL_ID_NOT_FOUND")
class TransactionalIdNotFoundError(BrokerError):
    code = 105
    description = "no transaction with this transactional id exists"


@_register("FETCH_SESSION_TOPIC_ID_ERROR")
class FetchSessionTopicIdError(BrokerError):
    code = 106
    description = "the fetch session used topic ids inconsistently; start a new session"
    retriable = True


@_register("INELIGIBLE_REPLICA")
class IneligibleReplicaError(BrokerError):
    code = 107
    description = "the proposed in-sync replica set contains a replica that is not eligible"


@_register("NEW_LEADER_ELECTED")
class NewLeaderElectedError(BrokerError):
    code = 108
    description = "the partition state was changed, but meanwhile a new leader was elected"


@_register("OFFSET_MOVED_TO_TIERED_STORAGE")
class OffsetMovedToTieredStorageError(BrokerError):
    code = 109
    description = "the requested offset is now only in tiered (remote) storage"


@_register("FENCED_MEMBER_EPOCH")
class FencedMemberEpochError(BrokerError):
    code = 110
    description = "the coordinator fenced this member's epoch; it must give up all its partitions and rejoin"


@_register("UNRELEASED_INSTANCE_ID")
class UnreleasedInstanceIdError(BrokerError):
    code = 111
    description = "another member still holds this group.instance.id; that member has to leave first"


@_register("UNSUPPORTED_ASSIGNOR")
class UnsupportedAssignorError(BrokerError):
    code = 112
    description = "the group does not support the requested server-side assignor (or that version of it)"


@_register("STALE_MEMBER_EPOCH")
class StaleMemberEpochError(BrokerError):
    code = 113
    description = (
        "the member epoch is out of date; retry once a heartbeat response has delivered the current epoch"
    )


@_register("MISMATCHED_ENDPOINT_TYPE")
class MismatchedEndpointTypeError(BrokerError):
    code = 114
    description = "the request went to the wrong kind of endpoint (broker versus controller)"


@_register("UNSUPPORTED_ENDPOINT_TYPE")
class UnsupportedEndpointTypeError(BrokerError):
    code = 115
    description = "the endpoint type is not supported yet"


@_register("UNKNOWN_CONTROLLER_ID")
class UnknownControllerIdError(BrokerError):
    code = 116
    description = "the controller id is not known"


@_register("UNKNOWN_SUBSCRIPTION_ID")
class UnknownSubscriptionIdError(BrokerError):
    code = 117
    description = "the telemetry subscription id is unknown or outdated; get a fresh subscription"


@_register("TELEMETRY_TOO_LARGE")
class TelemetryTooLargeError(BrokerError):
    code = 118
    description = "the pushed telemetry is bigger than the broker accepts"


@_register("INVALID_REGISTRATION")
class InvalidRegistrationError(BrokerError):
    code = 119
    description = "the controller considers the broker's registration invalid"


@_register("TRANSACTION_ABORTABLE")
class TransactionAbortableError(BrokerError):
    code = 120
    description = "the transaction hit an error; abort it to keep using the transactional id"


@_register("INVALID_RECORD_STATE")
class InvalidRecordStateError(BrokerError):
    code = 121
    description = "the record's state does not allow this acknowledgement"


@_register("SHARE_SESSION_NOT_FOUND")
class ShareSessionNotFoundError(BrokerError):
    code = 122
    description = "the broker has no such share session; open a new one"
    retriable = True


@_register("INVALID_SHARE_SESSION_EPOCH")
class InvalidShareSessionEpochError(BrokerError):
    code = 123
    description = "the share session epoch is not the one the broker expected"
    retriable = True


@_register("FENCED_STATE_EPOCH")
class FencedStateEpochError(BrokerError):
    code = 124
    description = (
        "the share coordinator refused the request because the share-group state epoch did not match"
    )


@_register("INVALID_VOTER_KEY")
class InvalidVoterKeyError(BrokerError):
    code = 125
    description = "the voter key does not match the receiving replica"


@_register("DUPLICATE_VOTER")
class DuplicateVoterError(BrokerError):
    code = 126
    description = "the voter is in the voter set already"


@_register("VOTER_NOT_FOUND")
class VoterNotFoundError(BrokerError):
    code = 127
    description = "the voter is not in the voter set"


@_register("INVALID_REGULAR_EXPRESSION")
class InvalidRegularExpressionError(BrokerError):
    code = 128
    description = "the subscription's regular expression is not valid"


@_register("REBOOTSTRAP_REQUIRED")
class RebootstrapRequiredError(BrokerError):
    code = 129
    description = "the client's metadata is too stale to repair; re-bootstrap from bootstrap.servers"


@_register("STREAMS_INVALID_TOPOLOGY")
class StreamsInvalidTopologyError(BrokerError):
    code = 130
    description = "the Kafka Streams topology is not valid"


@_register("STREAMS_INVALID_TOPOLOGY_EPOCH")
class StreamsInvalidTopologyEpochError(BrokerError):
    code = 131
    description = "the Kafka Streams topology epoch is not valid"


@_register("STREAMS_TOPOLOGY_FENCED")
class StreamsTopologyFencedError(BrokerError):
    code = 132
    description = "the Kafka Streams topology epoch is out of date"


@_register("SHARE_SESSION_LIMIT_REACHED")
class ShareSessionLimitReachedError(BrokerError):
    code = 133
    description = "the broker cannot open another share session (its limit is reached); retry later"
    retriable = True


class UnknownBrokerError(UnknownServerError):
    """The broker returned an error code this client does not know.

    :func:`error_for_code` returns a subclass per unknown code, so ``code`` on the class and on its
    instances is the code the broker actually sent. Like Kafka, it is treated as not retriable.
    """

    description = (
        "the broker returned an error code this client does not know (perhaps one added in a newer Kafka)"
    )

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message)
        self.detail = message

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_unknown_error, (self.code, self.detail), self.__dict__)


_UNKNOWN_BY_CODE: dict[int, type[UnknownBrokerError]] = {}

#: Read-only map from every known broker error code to its class.
BROKER_ERRORS: Mapping[int, type[BrokerError]] = MappingProxyType(_BY_CODE)


def error_for_code(code: int) -> type[BrokerError]:
    """The :class:`BrokerError` subclass for a broker error ``code``.

    Unknown codes get an :class:`UnknownBrokerError` subclass whose ``code`` is ``code``. Code 0 means
    "no error" and raises ValueError.
    """
    cls = _BY_CODE.get(code)
    if cls is not None:
        return cls
    if code == 0:
        raise ValueError("error code 0 (NONE) means success; there is no error class for it")
    unknown = _UNKNOWN_BY_CODE.get(code)
    if unknown is None:
        unknown = _UNKNOWN_BY_CODE.setdefault(code, _make_unknown_error(code))
    return unknown


def _make_unknown_error(unknown_code: int) -> type[UnknownBrokerError]:
    class _UnknownCode(UnknownBrokerError):
        code = unknown_code

    _UnknownCode.__name__ = _UnknownCode.__qualname__ = "UnknownBrokerError"
    return _UnknownCode


def raise_for_code(code: int, message: str | None = None) -> None:
    """Raise the error for a broker error ``code`` with ``message``; do nothing for code 0."""
    if code != 0:
        raise error_for_code(code)(message)


def kafka_error_name(code: int) -> str:
    """Kafka's name for an error code, e.g. ``"NOT_LEADER_OR_FOLLOWER"``; ``"NONE"`` for 0."""
    if code == 0:
        return "NONE"
    return _KAFKA_NAMES.get(code, f"UNKNOWN_ERROR_CODE_{code}")


def _rebuild_unknown_error(code: int, message: str | None) -> BrokerError:
    return error_for_code(code)(message)
