"""``AdminClient.describe_producers``: DescribeProducersApi through AdminRequestManager against a
fake cluster with injected time: each leader asked for its partitions, a named broker, a leader
that moved, a named broker without the replica, a broker without the API. [test]"""

from __future__ import annotations

from typing import Any

import pytest

from kaflux import AdminClient
from kaflux.admin import ProducerState
from kaflux.admin.producers import DescribeProducersApi
from kaflux.errors import (
    InvalidArgumentError,
    NotLeaderOrFollowerError,
    TopicAuthorizationFailedError,
    UnsupportedVersionError,
)
from kaflux.protocol.api import CLIENT_VERSIONS, ApiKey
from kaflux.protocol.messages.describe_producers import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    PartitionResponse,
    TopicResponse,
)
from kaflux.protocol.messages.describe_producers import ProducerState as WireState
from kaflux.structs import TopicPartition

from support.admin_rig import AdminRig
from support.fakes import BACKOFF_MS, NOT_LEADER_OR_FOLLOWER, FakeCluster

T0, T1, T2 = (TopicPartition("t", p) for p in range(3))
TOPIC_AUTHORIZATION_FAILED = 29


class ProducersFakeCluster(FakeCluster):
    """Three brokers; topic ``t`` led by brokers 0, 1, 2. Every broker holds every replica and
    answers DescribeProducers for it (a follower too, as Kafka does for a named broker); with
    ``leaders_only`` only the leader answers, others NOT_LEADER_OR_FOLLOWER."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(3, **kwargs)
        self.create_topic("t", 3)
        self.states: dict[TopicPartition, list[WireState]] = {
            T0: [WireState(7, 1, 41, 1_000, 3, 120), WireState(9, 0, 4, 900, -1, -1)],
        }
        self.leaders_only = True

    def handle(self, broker_id: int, request: Any, version: int) -> Any:
        if not isinstance(request, DescribeProducersRequest) or broker_id in self.stopped:
            return super().handle(broker_id, request, version)
        self.handled.append((broker_id, request, version))
        topics = []
        for t in request.topics:
            partitions = []
            for p in t.partition_indexes:
                tp = TopicPartition(t.name, p)
                error = self._fault(DescribeProducersRequest, tp, broker_id)
                if not error and self.leaders_only:
                    error = self._partition_error(broker_id, tp)
                partitions.append(
                    PartitionResponse(p, error, None, [] if error else list(self.states.get(tp, [])))
                )
            topics.append(TopicResponse(t.name, partitions))
        return DescribeProducersResponse(topics=topics)


def test_each_leader_describes_the_producers_of_its_partitions() -> None:
    fake = ProducersFakeCluster()
    rig = AdminRig(fake)
    found = rig.run(DescribeProducersApi([T1, T0, T2])).values()
    assert found == {
        T0: [ProducerState(7, 1, 41, 1_000, 3, 120), ProducerState(9, 0, 4, 900, None, None)],
        T1: [],
        T2: [],
    }
    assert sorted(b for b, _ in rig.sent(DescribeProducersRequest)) == [0, 1, 2]


def test_a_named_broker_is_asked_for_every_partition() -> None:
    fake = ProducersFakeCluster()
    fake.leaders_only = False
    rig = AdminRig(fake)
    found = rig.run(DescribeProducersApi([T0, T1], broker_id=2)).values()
    assert found[T0][0].producer_id == 7 and found[T1] == []
    [(broker, request)] = rig.sent(DescribeProducersRequest)
    assert broker == 2 and [(t.name, t.partition_indexes) for t in request.topics] == [("t", [0, 1])]


def test_a_named_broker_without_the_replica_fails_the_partition_saying_so() -> None:
    fake = ProducersFakeCluster()
    rig = AdminRig(fake)
    result = rig.run(DescribeProducersApi([T0, T1], broker_id=1))
    assert result.completed == {T1: []}
    error = result.failed[T0]
    assert isinstance(error, NotLeaderOrFollowerError) and "broker 1 holds no replica" in str(error)
    assert rig.now < 1 + 2 * BACKOFF_MS, "not retried"


def test_a_leader_that_moved_is_looked_up_again() -> None:
    fake = ProducersFakeCluster()
    fake.inject(DescribeProducersRequest, NOT_LEADER_OR_FOLLOWER, tp=T0, node=0, count=-1)
    rig = AdminRig(fake)
    op = rig.submit(DescribeProducersApi([T0]))
    for _ in range(100):
        if op.future.done():
            break
        rig.side.net.run([rig.manager, rig.side.metadata], rig.now)
        if rig.sent(DescribeProducersRequest) and fake.partition(T0).leader == 0:
            fake.move_leader(T0, 2)
        rig.now += BACKOFF_MS
    assert op.future.result(0).values()[T0][0].producer_id == 7
    assert [b for b, _ in rig.sent(DescribeProducersRequest)] == [0, 2]


def test_a_refused_partition_fails_with_its_error() -> None:
    fake = ProducersFakeCluster()
    fake.inject(DescribeProducersRequest, TOPIC_AUTHORIZATION_FAILED, tp=T1)
    result = AdminRig(fake).run(DescribeProducersApi([T0, T1]))
    assert isinstance(result.failed[T1], TopicAuthorizationFailedError)
    assert "describing the producers of t-1" in str(result.failed[T1])
    assert T0 in result.completed


def test_a_broker_without_describe_producers_fails_at_once_naming_the_api() -> None:
    versions = {k: v for k, v in CLIENT_VERSIONS.items() if k is not ApiKey.DESCRIBE_PRODUCERS}
    fake = ProducersFakeCluster(api_versions=versions)
    rig = AdminRig(fake)
    result = rig.run(DescribeProducersApi([T0]))
    error = result.failed[T0]
    assert isinstance(error, UnsupportedVersionError) and "lacks DescribeProducers (KIP-664" in str(error)
    assert rig.now < 1 + 2 * BACKOFF_MS, "not retried"
    assert not rig.sent(DescribeProducersRequest)


@pytest.mark.parametrize(
    ("partitions", "broker_id", "message"),
    [
        ("t", None, "not a string"),
        ([("t", -1)], None, "TopicPartition"),
        ([("", 0)], None, "TopicPartition"),
        ([T0], -1, "broker_id must be an int >= 0"),
        ([T0], True, "broker_id must be an int >= 0"),
    ],
)
def test_the_call_refuses_bad_input_before_any_request(partitions: Any, broker_id: Any, message: str) -> None:
    with (
        AdminClient({"bootstrap.servers": "127.0.0.1:9"}) as admin,
        pytest.raises(InvalidArgumentError, match=message),
    ):
        admin.describe_producers(partitions, broker_id=broker_id, timeout=30)


def test_no_partitions_need_no_request() -> None:
    with AdminClient({"bootstrap.servers": "127.0.0.1:9"}) as admin:
        assert admin.describe_producers([], timeout=30) == {}
