"""The error tree: one class per broker code, the code lookup and the client-side errors."""

from __future__ import annotations

import inspect
import pickle
from typing import Any

import pytest

from kaflux import errors
from kaflux.errors import (
    BROKER_ERRORS,
    AuthenticationError,
    AuthorizationError,
    BrokerError,
    CommitFailedError,
    ConfigError,
    CoordinatorNotAvailableError,
    CorruptMessageError,
    DeserializerUnavailableError,
    InvalidOffsetError,
    KafkaError,
    KafkaTimeoutError,
    NoOffsetForPartitionError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    RebalanceInProgressError,
    RecordDeserializationError,
    RetriableCommitFailedError,
    UnknownBrokerError,
    UnknownMemberIdError,
    UnknownServerError,
    UnsupportedVersionBrokerError,
    UnsupportedVersionError,
    error_for_code,
    kafka_error_name,
    raise_for_code,
)
from kaflux.structs import TopicPartition

# Kafka 4.x defines every code from -1 to 133; 0 (NONE) is success and has no class.
ALL_CODES = [c for c in range(-1, 134) if c != 0]


def _module_classes() -> dict[str, type[BrokerError]]:
    return {
        name: obj
        for name, obj in vars(errors).items()
        if inspect.isclass(obj) and issubclass(obj, BrokerError) and obj is not BrokerError
    }


# --- the code table ---------------------------------------------------------------------------------------


def test_every_kafka_code_has_a_class() -> None:
    assert sorted(BROKER_ERRORS) == ALL_CODES


@pytest.mark.parametrize("code", ALL_CODES)
def test_code_maps_to_class_with_that_code(code: int) -> None:
    cls = error_for_code(code)
    assert cls is BROKER_ERRORS[code]
    assert issubclass(cls, BrokerError)
    assert cls.code == code
    assert cls.__name__.endswith("Error")
    assert getattr(errors, cls.__name__) is cls, "every broker error class is a module attribute"
    assert cls.description and cls.description != BrokerError.description
    assert not cls.description.endswith("."), "descriptions are fragments; the message adds detail after"


def test_class_names_and_kafka_names_are_unique() -> None:
    classes = list(BROKER_ERRORS.values())
    assert len({c.__name__ for c in classes}) == len(classes)
    names = [kafka_error_name(c) for c in ALL_CODES]
    assert len(set(names)) == len(names)
    assert all(n.isupper() for n in names)


def test_every_registered_class_in_module_is_in_the_table() -> None:
    in_table = set(BROKER_ERRORS.values())
    stray = {n for n, c in _module_classes().items() if c not in in_table and c is not UnknownBrokerError}
    assert stray == set()


def test_no_class_for_code_zero() -> None:
    assert 0 not in BROKER_ERRORS
    assert all(c.code != 0 for c in _module_classes().values())
    with pytest.raises(ValueError, match="NONE"):
        error_for_code(0)
    assert kafka_error_name(0) == "NONE"


def test_raise_for_code() -> None:
    raise_for_code(0)
    raise_for_code(0, "ignored")
    with pytest.raises(RebalanceInProgressError) as info:
        raise_for_code(27, "JoinGroup for group g")
    text = str(info.value)
    assert "JoinGroup for group g" in text and "code 27" in text and "RebalanceInProgressError" in text
    with pytest.raises(BrokerError):
        raise_for_code(-1)


def test_message_layout() -> None:
    err = NotLeaderOrFollowerError("Fetch t-0 from node 1")
    assert str(err).startswith("[NotLeaderOrFollowerError, code 6] ")
    assert str(err).endswith(": Fetch t-0 from node 1")
    assert str(NotLeaderOrFollowerError()) == f"[NotLeaderOrFollowerError, code 6] {err.description}"


# --- retriable / invalid_metadata -------------------------------------------------------------------------

# (code, class name, retriable, invalid_metadata) per Kafka's exception hierarchy.
FLAG_TABLE = [
    (-1, "UnknownServerError", False, False),
    (1, "OffsetOutOfRangeError", False, False),
    (2, "CorruptMessageError", True, False),
    (3, "UnknownTopicOrPartitionError", True, True),
    (5, "LeaderNotAvailableError", True, True),
    (6, "NotLeaderOrFollowerError", True, True),
    (7, "RequestTimedOutError", True, False),
    (8, "BrokerNotAvailableError", False, False),
    (10, "RecordTooLargeError", False, False),
    (12, "OffsetMetadataTooLargeError", False, False),
    (13, "NetworkError", True, True),
    (14, "CoordinatorLoadInProgressError", True, False),
    (15, "CoordinatorNotAvailableError", True, False),
    (16, "NotCoordinatorError", True, False),
    (22, "IllegalGenerationError", False, False),
    (24, "InvalidGroupIdError", False, False),
    (25, "UnknownMemberIdError", False, False),
    (27, "RebalanceInProgressError", False, False),
    (29, "TopicAuthorizationFailedError", False, False),
    (30, "GroupAuthorizationFailedError", False, False),
    (35, "UnsupportedVersionBrokerError", False, False),
    (56, "KafkaStorageError", True, True),
    (70, "FetchSessionIdNotFoundError", True, False),
    (71, "InvalidFetchSessionEpochError", True, False),
    (74, "FencedLeaderEpochError", True, True),
    (75, "UnknownLeaderEpochError", True, False),
    (76, "UnsupportedCompressionTypeError", False, False),
    (78, "OffsetNotAvailableError", True, False),
    (79, "MemberIdRequiredError", False, False),
    (82, "FencedInstanceIdError", False, False),
    (88, "UnstableOffsetCommitError", True, False),
    (89, "ThrottlingQuotaExceededError", True, False),
    (100, "UnknownTopicIdError", True, True),
    (110, "FencedMemberEpochError", False, False),
    (113, "StaleMemberEpochError", False, False),
    (129, "RebootstrapRequiredError", False, False),
    (133, "ShareSessionLimitReachedError", True, False),
]


@pytest.mark.parametrize(("code", "name", "retriable", "invalid_metadata"), FLAG_TABLE)
def test_flags(code: int, name: str, retriable: bool, invalid_metadata: bool) -> None:
    cls = error_for_code(code)
    assert cls.__name__ == name
    assert cls.retriable is retriable
    assert cls.invalid_metadata is invalid_metadata
    instance = cls("x")
    assert instance.retriable is retriable and instance.invalid_metadata is invalid_metadata


def test_consumer_relevant_flags_by_class() -> None:
    assert NotLeaderOrFollowerError.retriable and NotLeaderOrFollowerError.invalid_metadata
    assert CoordinatorNotAvailableError.retriable and not CoordinatorNotAvailableError.invalid_metadata
    assert not RebalanceInProgressError.retriable
    assert not UnknownMemberIdError.retriable


def test_invalid_metadata_implies_retriable() -> None:
    # In Kafka InvalidMetadataException extends RetriableException.
    assert all(c.retriable for c in BROKER_ERRORS.values() if c.invalid_metadata)


def test_flag_counts() -> None:
    assert sum(c.retriable for c in BROKER_ERRORS.values()) == 32
    assert sum(c.invalid_metadata for c in BROKER_ERRORS.values()) == 13


# --- families and special classes -------------------------------------------------------------------------


def test_families() -> None:
    for code in (29, 30, 31, 53, 65):
        assert issubclass(error_for_code(code), AuthorizationError)
    for code in (33, 34, 58):
        assert issubclass(error_for_code(code), AuthenticationError)
    assert issubclass(OffsetOutOfRangeError, InvalidOffsetError)
    assert issubclass(NoOffsetForPartitionError, InvalidOffsetError)
    assert not issubclass(NoOffsetForPartitionError, BrokerError)
    assert not issubclass(CorruptMessageError, errors.CorruptRecordError)


def test_unsupported_version_code_is_both() -> None:
    assert error_for_code(35) is UnsupportedVersionBrokerError
    assert issubclass(UnsupportedVersionBrokerError, BrokerError)
    assert issubclass(UnsupportedVersionBrokerError, UnsupportedVersionError)
    with pytest.raises(UnsupportedVersionError):
        raise_for_code(35, "ApiVersions v4")


def test_offset_out_of_range_carries_offsets() -> None:
    tp = TopicPartition("t", 3)
    err = OffsetOutOfRangeError("Fetch", offsets={tp: 42})
    assert err.offsets == {tp: 42}
    assert err.partitions == frozenset({tp})
    assert err.code == 1
    bare = error_for_code(1)("from the broker")
    assert isinstance(bare, OffsetOutOfRangeError) and bare.partitions == frozenset()


@pytest.mark.parametrize("code", [134, 999, -2, 32767, -32768])
def test_unknown_codes(code: int) -> None:
    cls = error_for_code(code)
    assert issubclass(cls, UnknownBrokerError)
    assert issubclass(cls, UnknownServerError)
    assert cls.code == code
    assert error_for_code(code) is cls, "the class for an unknown code is cached"
    err = cls("hello")
    assert err.code == code and not err.retriable
    assert f"code {code}" in str(err) and "hello" in str(err)
    assert kafka_error_name(code) == f"UNKNOWN_ERROR_CODE_{code}"
    with pytest.raises(UnknownBrokerError):
        raise_for_code(code)


# --- client-side errors -----------------------------------------------------------------------------------


def test_kafka_timeout_is_timeout_error() -> None:
    assert issubclass(KafkaTimeoutError, TimeoutError)
    assert issubclass(KafkaTimeoutError, KafkaError)
    assert KafkaTimeoutError.retriable


def test_config_error_is_value_error_and_names_key() -> None:
    err = ConfigError("max.poll.records", "must be >= 1")
    assert isinstance(err, ValueError) and isinstance(err, KafkaError)
    assert err.key == "max.poll.records"
    assert "max.poll.records" in str(err) and "must be >= 1" in str(err)


def test_commit_failed_explains_itself() -> None:
    err = CommitFailedError()
    text = str(err)
    assert "max.poll.interval.ms" in text and "max.poll.records" in text and "rebalanced" in text
    assert not err.retriable
    with_context = str(CommitFailedError("UNKNOWN_MEMBER_ID for group g"))
    assert "UNKNOWN_MEMBER_ID for group g" in with_context and "max.poll.records" in with_context
    # A message that already explains the remedy is kept as it is.
    own = "kicked out of group g; raise max.poll.interval.ms"
    assert str(CommitFailedError(own)) == own


def test_retriable_commit_failed() -> None:
    assert RetriableCommitFailedError("coordinator moved").retriable
    assert str(RetriableCommitFailedError("coordinator moved")) == "coordinator moved"
    assert "retriable" in str(RetriableCommitFailedError())


def test_no_offset_for_partition() -> None:
    parts = [TopicPartition("b", 1), TopicPartition("a", 0)]
    err = NoOffsetForPartitionError(parts)
    assert err.partitions == frozenset(parts)
    assert "a-0, b-1" in str(err)
    assert "auto.offset.reset" in str(err)
    custom = NoOffsetForPartitionError([TopicPartition("a", 0)], "no offset for a-0; seek first")
    assert str(custom) == "no offset for a-0; seek first"
    assert custom.partitions == frozenset({TopicPartition("a", 0)})


def test_record_deserialization_error() -> None:
    err = RecordDeserializationError("bad utf-8", topic="t", partition=2, offset=10, origin="value")
    assert (err.topic, err.partition, err.offset, err.origin) == ("t", 2, 10, "value")
    assert err.topic_partition == TopicPartition("t", 2)
    assert "t-2 offset 10" in str(err) and "value" in str(err) and "11" in str(err)


def test_a_deserializer_outage_is_retriable_and_says_the_record_is_read_again() -> None:
    from kaflux.errors import deserialization_error

    outage = deserialization_error(
        KafkaTimeoutError("registry gone"), topic="t", partition=2, offset=10, origin="value"
    )
    assert type(outage) is DeserializerUnavailableError and outage.retriable
    assert (outage.topic_partition, outage.offset, outage.origin) == (TopicPartition("t", 2), 10, "value")
    assert "t-2 offset 10" in str(outage) and "registry gone" in str(outage)
    assert "reads it again" in str(outage) and "Seek to offset" not in str(outage)
    bad = deserialization_error(ValueError("bad"), topic="t", partition=2, offset=10, origin="value")
    assert type(bad) is RecordDeserializationError and "Seek to offset 11" in str(bad)


@pytest.mark.parametrize(
    "err",
    [
        NotLeaderOrFollowerError("x"),
        CoordinatorNotAvailableError(),
        OffsetOutOfRangeError("f", offsets={TopicPartition("t", 0): 7}),
        error_for_code(4242)("from the future"),
        CommitFailedError("g"),
        RetriableCommitFailedError("r"),
        NoOffsetForPartitionError([TopicPartition("t", 1)]),
        NoOffsetForPartitionError([TopicPartition("t", 1)], "custom"),
        CommitFailedError("see max.poll.interval.ms"),
        RecordDeserializationError("m", topic="t", partition=0, offset=1, origin="key"),
        DeserializerUnavailableError("no answer", topic="t", partition=0, offset=1, origin="value"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_pickle_round_trip(err: KafkaError) -> None:
    # Errors cross process boundaries (multiprocessing, Spark executors).
    copy = pickle.loads(pickle.dumps(err))
    assert type(copy) is type(err)
    if not isinstance(err, BrokerError) or isinstance(err, (OffsetOutOfRangeError, UnknownBrokerError)):
        assert str(copy) == str(err)
        assert vars(copy) == vars(err)


# --- cross-checks against other clients -------------------------------------------------------------------

# confluent-kafka's constant name -> Kafka's name, where librdkafka kept an older or shorter name.
CONFLUENT_ALIASES = {
    "UNKNOWN": "UNKNOWN_SERVER_ERROR",
    "INVALID_MSG": "CORRUPT_MESSAGE",
    "UNKNOWN_TOPIC_OR_PART": "UNKNOWN_TOPIC_OR_PARTITION",
    "INVALID_MSG_SIZE": "INVALID_FETCH_SIZE",
    "NOT_LEADER_FOR_PARTITION": "NOT_LEADER_OR_FOLLOWER",
    "MSG_SIZE_TOO_LARGE": "MESSAGE_TOO_LARGE",
    "STALE_CTRL_EPOCH": "STALE_CONTROLLER_EPOCH",
    "TOPIC_EXCEPTION": "INVALID_TOPIC_EXCEPTION",
}


def test_codes_match_confluent_kafka() -> None:
    ck = pytest.importorskip("confluent_kafka")
    seen = 0
    for name, value in vars(ck.KafkaError).items():
        # Negative codes below -1 are librdkafka's own (client-side) errors.
        if not name.isupper() or not isinstance(value, int) or value < -1 or value == 0:
            continue
        assert value in BROKER_ERRORS, f"confluent-kafka knows {name}={value}, we do not"
        assert kafka_error_name(value) == CONFLUENT_ALIASES.get(name, name), name
        seen += 1
    assert seen >= 120


# kafka-python class name -> our class name, where the names differ but the code means the same.
KAFKA_PYTHON_ALIASES = {
    "UnknownError": "UnknownServerError",
    "CorruptRecordError": "CorruptMessageError",
    "CorruptRecordException": "CorruptMessageError",
    "InvalidFetchRequestError": "InvalidFetchSizeError",
    "NotLeaderForPartitionError": "NotLeaderOrFollowerError",
    "MessageSizeTooLargeError": "RecordTooLargeError",
    "NetworkExceptionError": "NetworkError",
    "UnsupportedVersionError": "UnsupportedVersionBrokerError",
    "IncompatibleBrokerVersion": "UnsupportedVersionBrokerError",
    "InvalidReplicationAssignmentError": "InvalidReplicaAssignmentError",
    "InvalidConfigurationError": "InvalidConfigError",
}

# Deliberate differences from kafka-python, where we follow Kafka's Java exception hierarchy:
# - code 2 CORRUPT_MESSAGE: CorruptRecordException extends RetriableException in Kafka (a re-fetch may
#   return good data), kafka-python marks it not retriable.
# - code 75 UNKNOWN_LEADER_EPOCH: UnknownLeaderEpochException extends RetriableException but not
#   InvalidMetadataException (the broker is behind, not the client), kafka-python sets invalid_metadata.
RETRIABLE_DIFFERENCES = {2}
INVALID_METADATA_DIFFERENCES = {75}


def _kafka_python_classes() -> list[Any]:
    kerrors = pytest.importorskip("kafka.errors")
    return [
        cls
        for cls in vars(kerrors).values()
        if inspect.isclass(cls)
        and issubclass(cls, kerrors.KafkaError)
        and isinstance(getattr(cls, "errno", None), int)
        and getattr(cls, "errno", 0) != 0
    ]


def test_codes_match_kafka_python() -> None:
    classes = _kafka_python_classes()
    assert len(classes) >= 120
    for kp in classes:
        assert kp.errno in BROKER_ERRORS, f"kafka-python knows {kp.__name__}={kp.errno}, we do not"
        ours = error_for_code(kp.errno)
        assert ours.__name__ == KAFKA_PYTHON_ALIASES.get(kp.__name__, kp.__name__), kp.__name__
        if kp.errno not in RETRIABLE_DIFFERENCES:
            assert ours.retriable is bool(kp.retriable), kp.__name__
        else:
            assert ours.retriable is not bool(kp.retriable)
        if kp.errno not in INVALID_METADATA_DIFFERENCES:
            assert ours.invalid_metadata is bool(kp.invalid_metadata), kp.__name__
