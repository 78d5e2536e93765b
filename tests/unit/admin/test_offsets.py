"""``AdminClient.list_offsets``: OffsetSpec and its checks, and ListOffsetsApi through
AdminRequestManager against a fake cluster with injected time: every spec to each leader,
read_committed, leaders that moved, a topic the leader does not know yet, max_timestamp on a
broker without ListOffsets v7, the deadline. [test]"""

from __future__ import annotations

from typing import Any

import pytest

from kaflux import AdminClient
from kaflux.admin import IsolationLevel, ListOffsetsResultInfo, OffsetSpec
from kaflux.admin.offsets import offset_keys
from kaflux.admin.topics import ListOffsetsApi
from kaflux.errors import (
    InvalidArgumentError,
    KafkaTimeoutError,
    NotLeaderOrFollowerError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
from kaflux.protocol.api import CLIENT_VERSIONS, ApiKey
from kaflux.protocol.messages.list_offsets import ListOffsetsRequest
from kaflux.protocol.messages.metadata import MetadataRequest
from kaflux.structs import TopicPartition

from support.admin_rig import DEADLINE, AdminRig
from support.fakes import BACKOFF_MS, NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, FakeCluster

T0, T1, T2 = (TopicPartition("t", p) for p in range(3))
BASE = 1_700_000_000_000


def cluster(**kwargs: Any) -> FakeCluster:
    """Three brokers; topic ``t`` with partitions led by brokers 0, 1, 2. Partition 0 holds 5
    records (timestamps BASE+10, +11, +12, then BASE+50, +51 in a second batch), partition 1
    three, partition 2 none."""
    fake = FakeCluster(3, **kwargs)
    fake.create_topic("t", 3)
    fake.produce(T0, [b"a", b"b", b"c"], timestamp_ms=BASE + 10)
    fake.produce(T0, [b"d", b"e"], timestamp_ms=BASE + 50)
    fake.produce(T1, [b"x", b"y", b"z"], timestamp_ms=BASE)
    return fake


def keys(specs: dict[TopicPartition, OffsetSpec]) -> list[tuple[TopicPartition, int]]:
    return offset_keys(specs, "list_offsets()")


# -- OffsetSpec and the checks of the call's argument ------------------------------------------------


def test_offset_specs_carry_kafkas_timestamps() -> None:
    assert [
        s.timestamp for s in (OffsetSpec.earliest(), OffsetSpec.latest(), OffsetSpec.max_timestamp())
    ] == [
        -2,
        -1,
        -3,
    ]
    assert OffsetSpec.for_timestamp(0).timestamp == 0
    assert OffsetSpec.for_timestamp(BASE) == OffsetSpec(BASE)
    assert repr(OffsetSpec.max_timestamp()) == "OffsetSpec.max_timestamp()"
    assert repr(OffsetSpec.for_timestamp(5)) == "OffsetSpec.for_timestamp(5)"


@pytest.mark.parametrize("bad", [-1, -4, 1.5, True, "5", None])
def test_for_timestamp_refuses_what_is_not_a_time(bad: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="int >= 0"):
        OffsetSpec.for_timestamp(bad)


@pytest.mark.parametrize("bad", [-4, -100, 2.0, "latest"])
def test_an_offset_spec_of_an_unknown_value_is_refused(bad: Any) -> None:
    with pytest.raises(InvalidArgumentError, match=r"OffsetSpec\.earliest"):
        OffsetSpec(bad)


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        ({}, "no partitions given"),
        ([(T0, OffsetSpec.latest())], "takes a mapping"),
        ({("t", -1): OffsetSpec.latest()}, "TopicPartition"),
        ({("", 0): OffsetSpec.latest()}, "TopicPartition"),
        ({"t": OffsetSpec.latest()}, "TopicPartition"),
        ({T0: -1}, "must be an OffsetSpec"),
        ({T0: "latest"}, "must be an OffsetSpec"),
    ],
)
def test_the_call_refuses_bad_input_before_any_request(specs: Any, message: str) -> None:
    with AdminClient({"bootstrap.servers": "127.0.0.1:9"}) as admin:  # nothing listens there
        with pytest.raises(InvalidArgumentError, match=message):
            admin.list_offsets(specs, timeout=30)
        with pytest.raises(InvalidArgumentError, match="unknown IsolationLevel 'serializable'"):
            admin.list_offsets({T0: OffsetSpec.latest()}, isolation_level="serializable", timeout=30)


def test_isolation_levels_are_parsed_from_their_names() -> None:
    assert IsolationLevel.parse("read_committed") is IsolationLevel.READ_COMMITTED
    assert IsolationLevel.parse("READ-UNCOMMITTED") is IsolationLevel.READ_UNCOMMITTED


# -- ListOffsets to the leaders -----------------------------------------------------------------------


def test_every_spec_is_answered_by_each_partitions_leader() -> None:
    fake = cluster()
    rig = AdminRig(fake)
    specs = {
        T0: OffsetSpec.max_timestamp(),
        T1: OffsetSpec.latest(),
        T2: OffsetSpec.earliest(),
        TopicPartition("t", 0): OffsetSpec.max_timestamp(),
    }
    found = rig.run(ListOffsetsApi(keys(specs))).values()
    assert found == {
        (T0, -3): ListOffsetsResultInfo(4, BASE + 51, 0),
        (T1, -1): ListOffsetsResultInfo(3, -1, 0),
        (T2, -2): ListOffsetsResultInfo(0, -1, 0),
    }
    assert sorted(b for b, _ in rig.sent(ListOffsetsRequest)) == [0, 1, 2], "one request per leader"


def test_a_time_finds_the_first_record_at_or_after_it_and_minus_one_past_the_end() -> None:
    fake = cluster()
    rig = AdminRig(fake)
    at = rig.run(ListOffsetsApi([(T0, BASE + 11), (T1, BASE + 99)])).values()
    assert at[(T0, BASE + 11)] == ListOffsetsResultInfo(1, BASE + 11, 0)
    assert at[(T1, BASE + 99)].offset == -1
    between = rig.run(ListOffsetsApi([(T0, BASE + 13)])).values()
    assert between[(T0, BASE + 13)] == ListOffsetsResultInfo(3, BASE + 50, 0), "into the second batch"


def test_several_specs_of_one_partition_go_in_separate_requests() -> None:
    rig = AdminRig(cluster())
    found = rig.run(ListOffsetsApi([(T0, -2), (T0, -1), (T0, -3), (T0, BASE + 50)])).values()
    assert {k[1]: v.offset for k, v in found.items()} == {-2: 0, -1: 5, -3: 4, BASE + 50: 3}
    for _, request in rig.sent(ListOffsetsRequest):
        names = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
        assert len(names) == len(set(names)), "a partition appears once per request"
    assert len(rig.sent(ListOffsetsRequest)) == 4


def test_read_committed_latest_is_the_last_stable_offset() -> None:
    fake = cluster()
    fake.produce(T1, [b"open"], producer_id=7, transactional=True)  # offset 3, not committed
    fake.produce(T1, [b"later"])
    rig = AdminRig(fake)
    uncommitted = rig.run(ListOffsetsApi([(T1, -1)])).values()[(T1, -1)]
    committed = rig.run(ListOffsetsApi([(T1, -1)], IsolationLevel.READ_COMMITTED)).values()[(T1, -1)]
    assert (uncommitted.offset, committed.offset) == (5, 3)
    assert [r.isolation_level for _, r in rig.sent(ListOffsetsRequest)] == [0, 1]


def test_a_leader_that_moved_is_looked_up_again() -> None:
    fake = cluster()
    fake.inject(ListOffsetsRequest, NOT_LEADER_OR_FOLLOWER, tp=T0, node=0, count=-1)
    rig = AdminRig(fake)
    op = rig.submit(ListOffsetsApi([(T0, -1)]))
    for _ in range(100):  # pass by pass: the leader moves once broker 0 has refused
        if op.future.done():
            break
        rig.side.net.run([rig.manager, rig.side.metadata], rig.now)
        if rig.sent(ListOffsetsRequest) and fake.partition(T0).leader == 0:
            fake.move_leader(T0, 2)
        rig.now += BACKOFF_MS
    assert op.future.result(0).values()[(T0, -1)] == ListOffsetsResultInfo(5, -1, 1)
    assert [b for b, _ in rig.sent(ListOffsetsRequest)] == [0, 2]
    assert len(rig.sent(MetadataRequest)) >= 2, "the leader was looked up again"


def test_a_leader_that_does_not_know_the_topic_yet_is_asked_again() -> None:
    fake = cluster()
    fake.inject(ListOffsetsRequest, UNKNOWN_TOPIC_OR_PARTITION, tp=T1, count=2)
    rig = AdminRig(fake)
    assert rig.run(ListOffsetsApi([(T1, -1)])).values()[(T1, -1)].offset == 3
    assert len(rig.sent(ListOffsetsRequest)) == 3


def test_a_topic_the_cluster_does_not_have_fails_at_once_saying_what_to_do() -> None:
    rig = AdminRig(cluster())
    result = rig.run(ListOffsetsApi([(TopicPartition("nope", 0), -1), (TopicPartition("t", 7), -1)]))
    assert rig.now < 1 + 2 * BACKOFF_MS, "not retried"
    errors = {k[0].topic + str(k[0].partition): e for k, e in result.failed.items()}
    assert all(isinstance(e, UnknownTopicOrPartitionError) for e in errors.values())
    assert "create it first, or check its name" in str(errors["nope0"])
    assert "topic 't' has 3 partitions" in str(errors["t7"])
    assert not rig.sent(ListOffsetsRequest)


def test_max_timestamp_on_a_broker_without_list_offsets_v7_fails_unsent_and_alone() -> None:
    versions = dict(CLIENT_VERSIONS)
    versions[ApiKey.LIST_OFFSETS] = (0, 6)
    fake = cluster(api_versions=versions)
    rig = AdminRig(fake)
    result = rig.run(ListOffsetsApi([(T0, -3), (T0, -1), (T1, -2)]))
    assert rig.now < 1 + 2 * BACKOFF_MS, "not retried"
    error = result.failed[(T0, -3)]
    assert isinstance(error, UnsupportedVersionError)
    assert "ListOffsets v7 or later" in str(error) and "only up to v6" in str(error)
    assert result.completed == {
        (T0, -1): ListOffsetsResultInfo(5, -1, 0),
        (T1, -2): ListOffsetsResultInfo(0, -1, 0),
    }
    assert all(
        -3 not in [p.timestamp for t in r.topics for p in t.partitions]
        for _, r in rig.sent(ListOffsetsRequest)
    )


def test_a_partition_that_keeps_failing_times_out_naming_the_last_error() -> None:
    fake = cluster()
    fake.inject(ListOffsetsRequest, NOT_LEADER_OR_FOLLOWER, tp=T0, count=-1)
    rig = AdminRig(fake)
    result = rig.run(ListOffsetsApi([(T0, -1), (T1, -1)]), what="list_offsets()")
    assert result.completed == {(T1, -1): ListOffsetsResultInfo(3, -1, 0)}
    error = result.failed[(T0, -1)]
    assert isinstance(error, KafkaTimeoutError) and isinstance(error.__cause__, NotLeaderOrFollowerError)
    assert "list_offsets() did not complete before its deadline" in str(error)
    assert "the latest offset of t-0" in str(error)
    assert rig.now >= 1 + DEADLINE
