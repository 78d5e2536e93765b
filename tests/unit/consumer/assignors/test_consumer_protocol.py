"""ConsumerProtocol subscription/assignment encoding, checked against kafka-python as an oracle."""

from __future__ import annotations

import struct
import warnings
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kaflux.consumer.assignors import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kaflux.errors import ProtocolError, UnsupportedVersionError
from kaflux.structs import TopicPartition

# kafka-python loads its JSON specs through a deprecated importlib API while importing.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    kp_metadata = pytest.importorskip("kafka.protocol.consumer.metadata")
    kp_old = pytest.importorskip("kafka.protocol.old.consumer_protocol")
KpSubscription: Any = kp_metadata.ConsumerProtocolSubscription
KpAssignment: Any = kp_metadata.ConsumerProtocolAssignment

VERSIONS = [0, 1, 2, 3]

names = st.text(st.characters(codec="utf-8"), max_size=12)
partition_ids = st.integers(min_value=0, max_value=2**31 - 1)
user_data = st.none() | st.binary(max_size=40)


@st.composite
def grouped_partitions(draw: st.DrawFn) -> tuple[TopicPartition, ...]:
    """Partitions grouped by topic (the only order a round trip can preserve)."""
    by_topic = draw(st.dictionaries(names, st.lists(partition_ids, max_size=5), max_size=4))
    return tuple(TopicPartition(t, p) for t, parts in by_topic.items() for p in parts)


subscriptions = st.builds(
    Subscription,
    topics=st.lists(names, max_size=6).map(tuple),
    user_data=user_data,
    owned_partitions=grouped_partitions(),
    generation_id=st.integers(min_value=-(2**31), max_value=2**31 - 1),
    rack_id=st.none() | names,
)
assignments = st.builds(Assignment, partitions=grouped_partitions(), user_data=user_data)


def as_of_version(sub: Subscription, version: int) -> Subscription:
    """What survives encoding at ``version``."""
    return Subscription(
        sub.topics,
        sub.user_data,
        sub.owned_partitions if version >= 1 else (),
        sub.generation_id if version >= 2 else -1,
        sub.rack_id if version >= 3 else None,
    )


def kp_grouped(partitions: tuple[TopicPartition, ...]) -> list[tuple[str, list[int]]]:
    out: dict[str, list[int]] = {}
    for p in partitions:
        out.setdefault(p.topic, []).append(p.partition)
    return list(out.items())


def to_kafka_python_subscription(sub: Subscription, version: int) -> Any:
    fields: dict[str, Any] = {"topics": list(sub.topics), "user_data": sub.user_data}
    if version >= 1:
        fields["owned_partitions"] = [
            KpSubscription.TopicPartition(topic=t, partitions=ps)
            for t, ps in kp_grouped(sub.owned_partitions)
        ]
    if version >= 2:
        fields["generation_id"] = sub.generation_id
    if version >= 3:
        fields["rack_id"] = sub.rack_id
    return KpSubscription(version=version, **fields)


# --- round trips ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=80, deadline=None)
@given(sub=subscriptions)
def test_subscription_round_trip(version: int, sub: Subscription) -> None:
    data = encode_subscription(sub, version)
    assert struct.unpack_from(">h", data)[0] == version
    assert decode_subscription(data) == as_of_version(sub, version)
    assert decode_subscription(memoryview(data)) == as_of_version(sub, version)


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=60, deadline=None)
@given(a=assignments)
def test_assignment_round_trip(version: int, a: Assignment) -> None:
    data = encode_assignment(a, version)
    assert struct.unpack_from(">h", data)[0] == version
    assert decode_assignment(data) == a
    assert decode_assignment(bytearray(data)) == a


def test_default_versions_are_the_newest() -> None:
    sub = Subscription(("t",), None, (TopicPartition("t", 0),), 4, "rack-a")
    assert encode_subscription(sub)[:2] == b"\x00\x03"
    assert encode_assignment(Assignment(()))[:2] == b"\x00\x03"
    assert decode_subscription(encode_subscription(sub)) == sub


def test_owned_partitions_are_grouped_by_topic_in_first_appearance_order() -> None:
    owned = (TopicPartition("b", 1), TopicPartition("a", 0), TopicPartition("b", 0))
    decoded = decode_subscription(encode_subscription(Subscription(("a", "b"), owned_partitions=owned), 1))
    assert decoded.owned_partitions == (
        TopicPartition("b", 1),
        TopicPartition("b", 0),
        TopicPartition("a", 0),
    )


# --- kafka-python as an oracle -----------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=60, deadline=None)
@given(sub=subscriptions)
def test_subscription_bytes_match_kafka_python(version: int, sub: Subscription) -> None:
    theirs = to_kafka_python_subscription(sub, version).encode()
    assert encode_subscription(sub, version) == theirs
    assert decode_subscription(theirs) == as_of_version(sub, version)
    back = KpSubscription.decode(encode_subscription(sub, version))
    assert back.version == version
    assert list(back.topics) == list(sub.topics)
    assert back.user_data == sub.user_data


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=60, deadline=None)
@given(a=assignments)
def test_assignment_bytes_match_kafka_python(version: int, a: Assignment) -> None:
    theirs = KpAssignment(
        version=version,
        assigned_partitions=[
            KpAssignment.TopicPartition(topic=t, partitions=ps) for t, ps in kp_grouped(a.partitions)
        ],
        user_data=a.user_data,
    ).encode()
    assert encode_assignment(a, version) == theirs
    assert decode_assignment(theirs) == a
    back = KpAssignment.decode(encode_assignment(a, version))
    assert back.partitions() == [(p.topic, p.partition) for p in a.partitions]


def test_decodes_kafka_python_legacy_v0_structs() -> None:
    meta = kp_old.ConsumerProtocolMemberMetadata_v0(0, ["orders", "payments"], b"\x01\x02").encode()
    assert decode_subscription(meta) == Subscription(("orders", "payments"), b"\x01\x02")

    assignment = kp_old.ConsumerProtocolMemberAssignment_v0(
        0, [("orders", [0, 2]), ("payments", [1])], b""
    ).encode()
    assert decode_assignment(assignment) == Assignment(
        (TopicPartition("orders", 0), TopicPartition("orders", 2), TopicPartition("payments", 1)), b""
    )


def test_known_bytes() -> None:
    # Hand-assembled v3 subscription: topics [a, b], user data "x", owned a-0 a-1, generation 5, rack "r1".
    data = bytes.fromhex(
        "0003000000020001610001620000000178000000010001610000000200000000000000010000000500027231"
    )
    assert decode_subscription(data) == Subscription(
        ("a", "b"), b"x", (TopicPartition("a", 0), TopicPartition("a", 1)), 5, "r1"
    )
    assert encode_subscription(decode_subscription(data)) == data


# --- newer versions, empty and malformed data ---------------------------------------------------------------


def test_newer_subscription_version_is_read_as_the_newest_known() -> None:
    sub = Subscription(("t",), b"u", (TopicPartition("t", 3),), 9, "rack")
    body = encode_subscription(sub, 3)[2:]
    future = struct.pack(">h", 7) + body + b"\x00\x00\x00\x2a future field"
    assert decode_subscription(future) == sub


def test_newer_assignment_version_is_read_as_the_newest_known() -> None:
    a = Assignment((TopicPartition("t", 1),), b"ud")
    future = struct.pack(">h", 12) + encode_assignment(a)[2:] + b"\xff\xff"
    assert decode_assignment(future) == a


def test_trailing_bytes_after_a_known_version_are_ignored() -> None:
    sub = Subscription(("t",))
    assert decode_subscription(encode_subscription(sub, 0) + b"junk") == sub


def test_empty_assignment_bytes_decode_to_an_empty_assignment() -> None:
    assert decode_assignment(b"") == Assignment(())
    assert decode_assignment(memoryview(b"")) == Assignment(())


@pytest.mark.parametrize("version", VERSIONS)
def test_every_truncation_of_a_subscription_is_rejected(version: int) -> None:
    data = encode_subscription(Subscription(("t0", "t1"), b"ud", (TopicPartition("t0", 1),), 3, "r"), version)
    for cut in range(len(data)):
        with pytest.raises(ProtocolError, match="invalid consumer protocol subscription"):
            decode_subscription(data[:cut])


@pytest.mark.parametrize("version", VERSIONS)
def test_every_truncation_of_an_assignment_is_rejected(version: int) -> None:
    data = encode_assignment(Assignment((TopicPartition("t0", 1), TopicPartition("t1", 0)), b"ud"), version)
    for cut in range(1, len(data)):
        with pytest.raises(ProtocolError, match="invalid consumer protocol assignment"):
            decode_assignment(data[:cut])


def test_negative_version_is_rejected() -> None:
    body = encode_subscription(Subscription(("t",)), 0)[2:]
    with pytest.raises(ProtocolError, match="negative version -1"):
        decode_subscription(b"\xff\xff" + body)
    with pytest.raises(ProtocolError, match="negative version"):
        decode_assignment(b"\x80\x00" + encode_assignment(Assignment(()))[2:])


def test_malformed_fields_are_rejected() -> None:
    null_topics = struct.pack(">hi", 0, -1) + struct.pack(">i", -1)
    with pytest.raises(ProtocolError, match="topics was null"):
        decode_subscription(null_topics)
    bad_utf8 = struct.pack(">hih", 0, 1, 2) + b"\xff\xfe" + struct.pack(">i", -1)
    with pytest.raises(ProtocolError, match="UTF-8"):
        decode_subscription(bad_utf8)
    huge_array = struct.pack(">hi", 3, 2**30)
    with pytest.raises(ProtocolError):
        decode_assignment(huge_array)


def test_unsupported_encode_versions() -> None:
    with pytest.raises(UnsupportedVersionError):
        encode_subscription(Subscription(()), 4)
    with pytest.raises(UnsupportedVersionError):
        encode_assignment(Assignment(()), -1)


def test_fields_a_version_lacks_are_dropped_on_encode() -> None:
    sub = Subscription(("t",), None, (TopicPartition("t", 0),), 7, "rack")
    assert decode_subscription(encode_subscription(sub, 0)) == Subscription(("t",))
    assert decode_subscription(encode_subscription(sub, 1)) == Subscription(
        ("t",), None, sub.owned_partitions
    )
    assert decode_subscription(encode_subscription(sub, 2)) == Subscription(
        ("t",), None, sub.owned_partitions, 7
    )
