"""The in-memory KIP-848 coordinator the membership tests run against applies Kafka's rules."""

from __future__ import annotations

from typing import Any

from kaflux.protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatRequestTopicPartitions,
)
from kaflux.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
)

from support.fake_consumer_group_coordinator import (
    FENCED_MEMBER_EPOCH,
    INVALID_REQUEST,
    STALE_MEMBER_EPOCH,
    UNKNOWN_MEMBER_ID,
    UNSUPPORTED_ASSIGNOR,
    UNSUPPORTED_VERSION,
    ConsumerGroupState,
    FakeConsumerGroupCoordinator,
)
from support.fakes import roundtrip
from support.kip848_membership_rig import partitions

# -- the fake coordinator itself ----------------------------------------------------------------------------


def call(coordinator: FakeConsumerGroupCoordinator, request: Any, now_ms: int = 0) -> Any:
    """Send ``request`` to broker 0 at the newest version; its response."""
    answers: list[Any] = []
    version = type(request).MAX_VERSION
    coordinator.handle(0, roundtrip(request, version), version, now_ms, answers.append)
    return roundtrip(answers[0], version, type(request).RESPONSE)


def join(member_id: str, topics: list[str] | None = None, **kw: Any) -> ConsumerGroupHeartbeatRequest:
    return ConsumerGroupHeartbeatRequest(
        group_id="g",
        member_id=member_id,
        member_epoch=0,
        rebalance_timeout_ms=5_000,
        subscribed_topic_names=topics if topics is not None else ["t"],
        subscribed_topic_regex="",
        topic_partitions=[],
        **kw,
    )


def test_the_coordinator_moves_partitions_only_after_their_revocation_is_acknowledged() -> None:
    coordinator = FakeConsumerGroupCoordinator()
    coordinator.cluster.create_topic("t", 4)
    topic_id = coordinator.cluster.topics["t"].topic_id
    x = call(coordinator, join("x"))
    assert (x.error_code, x.member_epoch, partitions(x)) == (0, 1, [0, 1, 2, 3])
    y = call(coordinator, join("y"))
    assert (y.member_epoch, partitions(y)) == (2, [])  # 2 and 3 are still x's
    x = call(coordinator, ConsumerGroupHeartbeatRequest(group_id="g", member_id="x", member_epoch=1))
    assert (x.member_epoch, partitions(x)) == (1, [0, 1])  # revoke 2, 3; same epoch
    y = call(coordinator, ConsumerGroupHeartbeatRequest(group_id="g", member_id="y", member_epoch=2))
    assert y.assignment is None  # unchanged: still nothing free
    ack = [ConsumerGroupHeartbeatRequestTopicPartitions(topic_id=topic_id, partitions=[0, 1])]
    x = call(
        coordinator,
        ConsumerGroupHeartbeatRequest(group_id="g", member_id="x", member_epoch=1, topic_partitions=ack),
    )
    assert (x.member_epoch, x.assignment) == (2, None)
    y = call(coordinator, ConsumerGroupHeartbeatRequest(group_id="g", member_id="y", member_epoch=2))
    assert (y.member_epoch, partitions(y)) == (2, [2, 3])
    assert coordinator.group("g").state is ConsumerGroupState.STABLE


def test_the_coordinator_checks_epochs_members_and_requests_as_kafka_does() -> None:
    coordinator = FakeConsumerGroupCoordinator()
    coordinator.cluster.create_topic("t", 2)
    assert call(coordinator, join("x")).member_epoch == 1
    beat = ConsumerGroupHeartbeatRequest(group_id="g", member_id="x", member_epoch=2)
    assert call(coordinator, beat).error_code == FENCED_MEMBER_EPOCH  # higher
    beat.member_epoch = 1
    assert call(coordinator, beat).error_code == 0
    beat.member_id = "nobody"
    assert call(coordinator, beat).error_code == UNKNOWN_MEMBER_ID
    no_timeout = join("z")
    no_timeout.rebalance_timeout_ms = -1
    assert call(coordinator, no_timeout).error_code == INVALID_REQUEST
    owning = join("z")
    owning.topic_partitions = [ConsumerGroupHeartbeatRequestTopicPartitions(partitions=[0])]
    assert call(coordinator, owning).error_code == INVALID_REQUEST
    assert call(coordinator, join("")).error_code == INVALID_REQUEST  # v1: the client names itself
    assert call(coordinator, join("z", server_assignor="bogus")).error_code == UNSUPPORTED_ASSIGNOR
    # a full request always gets the assignment
    assert partitions(call(coordinator, join("x"))) == [0, 1]
    leave = ConsumerGroupHeartbeatRequest(group_id="g", member_id="x", member_epoch=-1)
    assert call(coordinator, leave).member_epoch == -1
    assert "x" not in coordinator.group("g").members
    assert call(coordinator, leave).error_code == UNKNOWN_MEMBER_ID


def test_the_coordinator_validates_commits_by_member_epoch() -> None:
    coordinator = FakeConsumerGroupCoordinator()
    coordinator.cluster.create_topic("t", 1)

    def commit(epoch: int, member_id: str, version: int = 9) -> int:
        request = OffsetCommitRequest(
            group_id="g",
            generation_id_or_member_epoch=epoch,
            member_id=member_id,
            topics=[
                OffsetCommitRequestTopic(
                    name="t", partitions=[OffsetCommitRequestPartition(partition_index=0)]
                )
            ],
        )
        answers: list[OffsetCommitResponse] = []
        coordinator.handle(0, roundtrip(request, version), version, 0, answers.append)
        return answers[0].topics[0].partitions[0].error_code

    assert commit(-1, "") == 0  # no members: anyone may commit
    assert call(coordinator, join("x")).member_epoch == 1
    assert commit(1, "x") == 0
    assert commit(0, "x") == STALE_MEMBER_EPOCH
    assert commit(2, "x") == STALE_MEMBER_EPOCH  # equality, not "at most"
    assert commit(1, "y") == UNKNOWN_MEMBER_ID
    assert commit(-1, "") == UNKNOWN_MEMBER_ID
    assert commit(1, "x", version=8) == UNSUPPORTED_VERSION
