"""The admin client's cluster and partition requests through AdminRequestManager, against a fake
cluster with injected time: Metadata for describe_cluster / describe_topics, ListOffsets,
DeleteRecords to each leader (looked up again when a leader moves), CreatePartitions to the
controller. [test]"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kaflux.admin import AdminClient
from kaflux.admin.operation import AdminOperation, MetadataApi
from kaflux.admin.results import ClusterDescription, PartitionDescription, TopicDescription
from kaflux.admin.topics import (
    EARLIEST,
    LATEST,
    CreatePartitionsApi,
    DeleteRecordsApi,
    ListOffsetsApi,
    describe_cluster,
    describe_topics,
)
from kaflux.errors import (
    InvalidArgumentError,
    InvalidPartitionsError,
    KafkaConnectionError,
    KafkaTimeoutError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)
from kaflux.protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from kaflux.protocol.messages.delete_records import (
    DeleteRecordsPartitionResult,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)
from kaflux.protocol.messages.list_offsets import ListOffsetsRequest
from kaflux.protocol.messages.metadata import MetadataRequest
from kaflux.structs import Node, TopicPartition

from support.admin_rig import DEADLINE, AdminRig
from support.fakes import (
    BACKOFF_MS,
    NOT_LEADER_OR_FOLLOWER,
    OFFSET_OUT_OF_RANGE,
    UNKNOWN_TOPIC_OR_PARTITION,
    FakeCluster,
    FakePartition,
)
from support.socket_fake_broker import SocketFakeBroker

INVALID_PARTITIONS = 37
NOT_CONTROLLER = 41


class PartitionsFakeCluster(FakeCluster):
    """A FakeCluster that also answers CreatePartitions (on its controller, the lowest broker
    id, unless ``controller`` says otherwise) and DeleteRecords (on each leader)."""

    def __init__(self, brokers: int = 1, **kwargs: Any) -> None:
        super().__init__(brokers, **kwargs)
        self.controller = min(self.brokers)

    def handle(self, broker_id: int, request: Any, version: int) -> Any:
        handlers: dict[type[Any], Callable[..., Any]] = {
            CreatePartitionsRequest: self._create_partitions,
            DeleteRecordsRequest: self._delete,
        }
        handler = handlers.get(type(request))
        if handler is None or broker_id not in self.brokers or broker_id in self.stopped:
            return super().handle(broker_id, request, version)
        self.handled.append((broker_id, request, version))
        return handler(broker_id, request, version)

    def _create_partitions(
        self, node: int, request: CreatePartitionsRequest, version: int
    ) -> CreatePartitionsResponse:
        results = []
        for t in request.topics:
            topic = self.topics.get(t.name)
            error = self._fault(CreatePartitionsRequest, None, node)
            if not error and node != self.controller:
                error = NOT_CONTROLLER
            elif not error and topic is None:
                error = UNKNOWN_TOPIC_OR_PARTITION
            elif not error and topic is not None and t.count <= len(topic.partitions):
                error = INVALID_PARTITIONS
            if not error and topic is not None:
                ids = sorted(self.brokers)
                for p in range(len(topic.partitions), t.count):
                    topic.partitions[p] = FakePartition(leader=ids[p % len(ids)])
            message = f"now {len(topic.partitions)}" if error == INVALID_PARTITIONS and topic else None
            results.append(CreatePartitionsTopicResult(name=t.name, error_code=error, error_message=message))
        return CreatePartitionsResponse(results=results)

    def _delete(self, node: int, request: DeleteRecordsRequest, version: int) -> DeleteRecordsResponse:
        topics = []
        for t in request.topics:
            partitions = []
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                error = self._fault(DeleteRecordsRequest, tp, node) or self._partition_error(node, tp)
                if not error:
                    hw = self.partition(tp).high_watermark
                    offset = hw if p.offset == -1 else p.offset
                    if offset > hw:
                        error = OFFSET_OUT_OF_RANGE
                    else:
                        self.delete_records(tp, max(offset, self.partition(tp).log_start_offset))
                low = -1 if error else self.partition(tp).log_start_offset
                partitions.append(
                    DeleteRecordsPartitionResult(
                        partition_index=p.partition_index, low_watermark=low, error_code=error
                    )
                )
            topics.append(DeleteRecordsTopicResult(name=t.name, partitions=partitions))
        return DeleteRecordsResponse(topics=topics)


class Rig(AdminRig):
    """The manager on a fake cluster, polled before the metadata manager as in the client."""


@pytest.fixture
def fake() -> PartitionsFakeCluster:
    """Three brokers; topic ``t`` with 3 partitions led by brokers 0, 1, 2 and some records."""
    cluster = PartitionsFakeCluster(3)
    for tp in cluster.create_topic("t", 3):
        cluster.produce(tp, [b"x"] * (tp.partition + 2))
    cluster.delete_records(TopicPartition("t", 2), 1)
    return cluster


def test_describe_cluster_reads_one_metadata_answer(fake: PartitionsFakeCluster) -> None:
    rig = Rig(fake)
    answer = rig.run(MetadataApi([])).values()[None]
    assert describe_cluster(answer) == ClusterDescription(
        "fake-cluster", Node(0, "broker0.fake", 9092), [fake.brokers[0], fake.brokers[1], fake.brokers[2]]
    )
    assert all(r.allow_auto_topic_creation is False for _, r in rig.sent(MetadataRequest))


def test_a_controller_no_broker_has_is_none(fake: PartitionsFakeCluster) -> None:
    answer = Rig(fake).run(MetadataApi([])).values()[None]
    answer.controller_id = 7
    assert describe_cluster(answer).controller is None


def test_watermarks_come_from_each_leader(fake: PartitionsFakeCluster) -> None:
    rig = Rig(fake)
    answer = rig.run(MetadataApi(["t"])).values()[None]
    keys = [(TopicPartition("t", p), ts) for p in range(3) for ts in (EARLIEST, LATEST)]
    watermarks = rig.run(ListOffsetsApi(keys)).values()
    assert sorted(b for b, _ in rig.sent(ListOffsetsRequest)) == [0, 0, 1, 1, 2, 2], "one per leader and kind"
    described = describe_topics(answer, ["t"], watermarks)
    topic_id = fake.topics["t"].topic_id
    assert described == {
        "t": TopicDescription(
            "t",
            topic_id,
            False,
            [
                PartitionDescription(0, 0, [0], [0], 0, 2),
                PartitionDescription(1, 1, [1], [1], 0, 3),
                PartitionDescription(2, 2, [2], [2], 1, 4),
            ],
        )
    }
    assert isinstance(topic_id, uuid.UUID)


def test_a_partition_whose_leader_moved_is_looked_up_again(fake: PartitionsFakeCluster) -> None:
    fake.inject(ListOffsetsRequest, NOT_LEADER_OR_FOLLOWER, tp=TopicPartition("t", 1))
    fake.move_leader(TopicPartition("t", 1), 2)
    rig = Rig(fake)
    result = rig.run(ListOffsetsApi([(TopicPartition("t", 1), LATEST)])).values()
    assert result[(TopicPartition("t", 1), LATEST)].offset == 3


def test_an_unknown_topic_or_partition_fails_at_once(fake: PartitionsFakeCluster) -> None:
    rig = Rig(fake)
    result = rig.run(DeleteRecordsApi({TopicPartition("nope", 0): 1, TopicPartition("t", 9): 1}, 1000))
    assert rig.now < 1 + 2 * BACKOFF_MS, "not retried"
    assert "topic 'nope' does not exist" in str(result.failed[TopicPartition("nope", 0)])
    assert "topic 't' has 3 partitions" in str(result.failed[TopicPartition("t", 9)])
    assert all(isinstance(e, UnknownTopicOrPartitionError) for e in result.failed.values())


def test_delete_records_goes_to_each_leader_and_returns_the_low_watermarks(
    fake: PartitionsFakeCluster,
) -> None:
    rig = Rig(fake)
    wanted = {TopicPartition("t", 0): 1, TopicPartition("t", 1): -1, TopicPartition("t", 2): 3}
    result = rig.run(DeleteRecordsApi(wanted, 5000)).values()
    assert result == {TopicPartition("t", 0): 1, TopicPartition("t", 1): 3, TopicPartition("t", 2): 3}
    assert sorted(b for b, _ in rig.sent(DeleteRecordsRequest)) == [0, 1, 2]
    assert all(r.timeout_ms == 5000 for _, r in rig.sent(DeleteRecordsRequest))
    assert fake.partition(TopicPartition("t", 1)).log_start_offset == 3


def test_delete_records_beyond_the_high_watermark_says_what_to_pass(fake: PartitionsFakeCluster) -> None:
    result = Rig(fake).run(DeleteRecordsApi({TopicPartition("t", 0): 99}, 1000))
    with pytest.raises(OffsetOutOfRangeError, match=r"t-0 before offset 99.*-1 means the high watermark"):
        result.values()


def test_a_lost_answer_is_retried_after_a_new_lookup(fake: PartitionsFakeCluster) -> None:
    rig = Rig(fake)
    op: AdminOperation[Any, Any] = AdminOperation(
        "delete_records()", DEADLINE, DeleteRecordsApi({TopicPartition("t", 1): 2}, 1000)
    )
    rig.manager.submit(op)
    rig.side.net.run([rig.manager, rig.side.metadata], 1)  # the leader lookup
    (exchange,) = rig.side.net.add_all(rig.manager.poll(2), 2)
    rig.side.net.fail(exchange, KafkaConnectionError("lost"), received_ms=3)
    assert rig.manager.poll(3 + BACKOFF_MS - 1).unsent == []
    for now in (3 + BACKOFF_MS, 4 + BACKOFF_MS):
        rig.side.net.run([rig.manager, rig.side.metadata], now)
    assert op.future.result(0).values() == {TopicPartition("t", 1): 2}
    leader_lookups = [r for _, r in rig.sent(MetadataRequest) if r.topics and r.topics[0].name == "t"]
    assert len(leader_lookups) == 2


def test_create_partitions_goes_to_the_controller(fake: PartitionsFakeCluster) -> None:
    fake.create_topic("u", 1)
    rig = Rig(fake)
    assert rig.run(CreatePartitionsApi({"t": 5, "u": 2}, 3000)).values() == {"t": None, "u": None}
    ((broker, request),) = rig.sent(CreatePartitionsRequest)
    assert broker == 0 and request.timeout_ms == 3000
    assert sorted((t.name, t.count, t.assignments) for t in request.topics) == [
        ("t", 5, None),
        ("u", 2, None),
    ]
    assert len(fake.topics["t"].partitions) == 5


def test_create_partitions_follows_a_new_controller(fake: PartitionsFakeCluster) -> None:
    fake.controller = 2  # the metadata still names broker 0
    rig = Rig(fake)
    original = fake._metadata

    def metadata(node: int, request: MetadataRequest, version: int) -> Any:
        response = original(node, request, version)
        response.controller_id = fake.controller if len(rig.sent(CreatePartitionsRequest)) else 0
        return response

    fake._metadata = metadata  # type: ignore[method-assign]
    assert rig.run(CreatePartitionsApi({"t": 4}, 3000)).values() == {"t": None}
    brokers = [b for b, _ in rig.sent(CreatePartitionsRequest)]
    assert brokers[0] == 0 and brokers[-1] == 2, brokers


def test_create_partitions_errors_name_the_topic_and_the_fix(fake: PartitionsFakeCluster) -> None:
    result = Rig(fake).run(CreatePartitionsApi({"t": 2, "nope": 3}, 3000))
    assert isinstance(result.failed["t"], InvalidPartitionsError)
    assert "asked for 2 partitions in all: the new total must exceed the current count" in str(
        result.failed["t"]
    )
    assert isinstance(result.failed["nope"], UnknownTopicOrPartitionError)
    assert "create it first" in str(result.failed["nope"])


def test_a_leader_that_never_answers_times_out_naming_the_partition(fake: PartitionsFakeCluster) -> None:
    fake.stop_broker(1)
    rig = Rig(fake)
    result = rig.run(DeleteRecordsApi({TopicPartition("t", 1): 1}, 1000), "delete_records()")
    with pytest.raises(KafkaTimeoutError, match=r"delete_records\(\) did not complete .*partition t-1"):
        result.values()


# -- the AdminClient over a socket --------------------------------------------------------------


@pytest.fixture
def served() -> Iterator[tuple[PartitionsFakeCluster, AdminClient]]:
    """A one-broker PartitionsFakeCluster over loopback, with topic ``t`` (2 partitions, 3
    records in partition 0), and an AdminClient on it."""
    fake = PartitionsFakeCluster(1)
    broker = SocketFakeBroker(fake)
    fake.create_topic("t", 2)
    fake.produce(TopicPartition("t", 0), [b"a", b"b", b"c"])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers, "retry.backoff.ms": 10})
    try:
        yield fake, admin
    finally:
        admin.close()
        broker.close()


def test_the_client_describes_the_cluster_and_topics(
    served: tuple[PartitionsFakeCluster, AdminClient],
) -> None:
    fake, admin = served
    cluster = admin.describe_cluster(timeout=5)
    assert cluster.cluster_id == "fake-cluster" and cluster.nodes == [fake.brokers[0]]
    assert cluster.controller == fake.brokers[0]
    (topic,) = admin.describe_topics(["t"], timeout=5).values()
    assert topic.topic_id == fake.topics["t"].topic_id
    assert [(p.partition, p.leader, p.low_watermark, p.high_watermark) for p in topic.partitions] == [
        (0, 0, 0, 3),
        (1, 0, 0, 0),
    ]
    with pytest.raises(UnknownTopicOrPartitionError, match="topic 'nope' does not exist"):
        admin.describe_topics(["t", "nope"], timeout=5)
    assert admin.describe_topics([], timeout=5) == {}


def test_the_client_creates_partitions_and_deletes_records(
    served: tuple[PartitionsFakeCluster, AdminClient],
) -> None:
    fake, admin = served
    admin.create_partitions({"t": 4}, timeout=5)
    assert len(fake.topics["t"].partitions) == 4
    with pytest.raises(InvalidPartitionsError):
        admin.create_partitions({"t": 4}, timeout=5)
    assert admin.delete_records({TopicPartition("t", 0): 2, TopicPartition("t", 3): -1}, timeout=5) == {
        TopicPartition("t", 0): 2,
        TopicPartition("t", 3): 0,
    }
    assert [p.low_watermark for p in admin.describe_topics(["t"], timeout=5)["t"].partitions] == [2, 0, 0, 0]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda a: a.describe_topics("t"), "not one string"),
        (lambda a: a.create_partitions({"t": 0}), "must be an int >= 1"),
        (lambda a: a.delete_records({TopicPartition("t", 0): -2}), "must be an int >= -1"),
        (lambda a: a.delete_records({"t": 1}), "expected TopicPartition"),
    ],
)
def test_the_client_checks_its_arguments(
    served: tuple[PartitionsFakeCluster, AdminClient], call: Callable[[AdminClient], object], message: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        call(served[1])
