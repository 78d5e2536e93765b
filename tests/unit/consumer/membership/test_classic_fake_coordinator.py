"""The in-memory classic group coordinator the membership tests run against applies Kafka's rules."""

from __future__ import annotations

from typing import Any

from kaflux.consumer.assignors import Subscription, decode_subscription, encode_subscription
from kaflux.protocol.messages.heartbeat import HeartbeatRequest
from kaflux.protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from kaflux.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kaflux.protocol.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment

from support.classic_membership_rig import (
    COOPERATIVE,
    HEARTBEAT_MS,
    MAX_POLL_MS,
    SESSION_MS,
    M,
    all_of,
    stable_group,
)
from support.fake_group_coordinator import (
    ILLEGAL_GENERATION,
    MEMBER_ID_REQUIRED,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    FakeGroupCoordinator,
    GroupDriver,
    GroupState,
)
from support.fakes import roundtrip

# -- the fake coordinator itself -------------------------------------------------------------------


def test_the_coordinator_holds_a_join_until_every_known_member_rejoined() -> None:
    driver, (a, b) = stable_group("a", "b", assignors=COOPERATIVE)
    b.polling = False
    b.auto_ack = False
    b.stopped = True  # b will not rejoin: the join completes at the rebalance timeout or b's expiry
    a.manager.request_rejoin("test")
    driver.run_until(lambda: a.state is M.JOINING)
    start = driver.now_ms
    driver.run_until(lambda: a.state is not M.JOINING, timeout_ms=MAX_POLL_MS + 1_000)
    assert (
        driver.group().state is GroupState.COMPLETING_REBALANCE or driver.group().state is GroupState.STABLE
    )
    assert driver.now_ms - start >= SESSION_MS - 2 * HEARTBEAT_MS
    assert list(driver.group().members) == [a.member_id]


def test_the_coordinator_answers_rebalance_in_progress_to_heartbeats_while_a_join_is_pending() -> None:
    driver, (a,) = stable_group("a", assignors=COOPERATIVE)
    b = driver.add_member("b", assignors=COOPERATIVE)
    driver.run_until(lambda: driver.group().state is GroupState.PREPARING_REBALANCE)
    driver.run_until(lambda: a.state is M.JOINING, timeout_ms=2 * HEARTBEAT_MS)
    assert a.sent(HeartbeatRequest)[-1].error_code == REBALANCE_IN_PROGRESS
    driver.settle()
    assert b.assignment()


def test_the_coordinator_expires_a_member_that_never_comes_back_with_its_member_id() -> None:
    driver = GroupDriver(topics={"t": 2})
    a = driver.add_member("a")
    driver.settle()
    b = driver.add_member("b")
    driver.hold(JoinGroupRequest, b)
    driver.run_until(lambda: bool(driver.group().pending))
    b.stopped = True
    driver.run_until(lambda: not driver.group().pending, timeout_ms=2 * SESSION_MS)
    driver.run(3 * HEARTBEAT_MS)
    assert driver.stable(a) and a.assignment() == all_of(2)


def test_the_driver_is_deterministic() -> None:
    def scenario() -> list[tuple[int, str, str, object]]:
        driver, _ = stable_group("a", "b", "c", assignors=COOPERATIVE, partitions=5)
        return [(t, who, kind, detail) for t, who, kind, detail in driver.log]

    first = scenario()
    assert first == scenario()
    assert len(first) > 50


# direct requests to the coordinator (generated classes, encoded and decoded at ``version``)


def call(
    coordinator: FakeGroupCoordinator, request: Any, now_ms: int, version: int | None = None
) -> list[Any]:
    """Send ``request`` to broker 0; the response(s) delivered so far (none while it is held)."""
    cls = type(request)
    v = cls.MAX_VERSION if version is None else version
    answers: list[Any] = []
    coordinator.handle(
        0, roundtrip(request, v), v, now_ms, lambda r: answers.append(roundtrip(r, v, cls.RESPONSE))
    )
    return answers


def join_request(member_id: str = "", *, rebalance_timeout_ms: int = 5_000) -> JoinGroupRequest:
    metadata = encode_subscription(Subscription(("t",)))
    return JoinGroupRequest(
        group_id="g",
        session_timeout_ms=SESSION_MS,
        rebalance_timeout_ms=rebalance_timeout_ms,
        member_id=member_id,
        protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol(name="range", metadata=metadata)],
    )


def commit_request(generation: int, member_id: str) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id="g",
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        topics=[
            OffsetCommitRequestTopic(
                name="t", partitions=[OffsetCommitRequestPartition(partition_index=0, committed_offset=9)]
            )
        ],
    )


def join_two(coordinator: FakeGroupCoordinator) -> tuple[str, str]:
    """Members x (leader) and y in a stable generation 1 of group ``g``; returns their ids."""
    (rx,) = call(coordinator, join_request(), 0)
    (ry,) = call(coordinator, join_request(), 0)
    assert rx.error_code == ry.error_code == MEMBER_ID_REQUIRED
    x, y = rx.member_id, ry.member_id
    assert call(coordinator, join_request(x), 0) == []  # held: y is pending
    (jy,) = call(coordinator, join_request(y), 0)
    assert jy.generation_id == 1 and jy.leader == x and jy.members == []
    assert call(coordinator, SyncGroupRequest(group_id="g", generation_id=1, member_id=y), 0) == []
    assignments = [
        SyncGroupRequestAssignment(member_id=x, assignment=b""),
        SyncGroupRequestAssignment(member_id=y, assignment=b""),
    ]
    (sx,) = call(
        coordinator, SyncGroupRequest(group_id="g", generation_id=1, member_id=x, assignments=assignments), 0
    )
    assert sx.error_code == 0
    assert coordinator.group("g").state is GroupState.STABLE
    return x, y


def test_the_coordinator_completes_a_join_at_the_rebalance_timeout_without_absent_members() -> None:
    coordinator = FakeGroupCoordinator()
    coordinator.cluster.create_topic("t", 2)
    x, y = join_two(coordinator)
    assert call(coordinator, join_request(x), 100) == []  # x rejoins: held until y rejoins
    for now in range(1_000, 5_100, 1_000):  # y stays alive but does not rejoin
        (beat,) = call(coordinator, HeartbeatRequest(group_id="g", generation_id=1, member_id=y), now)
        assert beat.error_code == REBALANCE_IN_PROGRESS
        coordinator.tick(now)
        assert coordinator.group("g").state is GroupState.PREPARING_REBALANCE
    coordinator.tick(5_100)  # 100 + rebalance timeout
    group = coordinator.group("g")
    assert group.state is GroupState.COMPLETING_REBALANCE
    assert group.generation == 2 and list(group.members) == [x]
    (beat,) = call(coordinator, HeartbeatRequest(group_id="g", generation_id=1, member_id=y), 5_200)
    assert beat.error_code == UNKNOWN_MEMBER_ID


def test_the_coordinator_validates_commits_as_kafka_does() -> None:
    coordinator = FakeGroupCoordinator()
    coordinator.cluster.create_topic("t", 2)
    # no group yet: a plain commit (no generation) is stored
    (ok,) = call(coordinator, commit_request(-1, ""), 0)
    assert ok.topics[0].partitions[0].error_code == 0
    x, _ = join_two(coordinator)
    codes = {
        "member": commit_request(1, x),
        "no generation in a non-empty group": commit_request(-1, ""),
        "stale generation": commit_request(0, x),
        "unknown member": commit_request(1, "nobody"),
    }
    answers = {k: call(coordinator, r, 10)[0].topics[0].partitions[0].error_code for k, r in codes.items()}
    assert answers == {
        "member": 0,
        "no generation in a non-empty group": UNKNOWN_MEMBER_ID,
        "stale generation": ILLEGAL_GENERATION,
        "unknown member": UNKNOWN_MEMBER_ID,
    }
    # while the leader computes the next generation's assignment, commits wait
    call(coordinator, join_request(x), 20)
    coordinator.remove_member("g", _, 20)
    assert coordinator.group("g").state is GroupState.COMPLETING_REBALANCE
    (busy,) = call(coordinator, commit_request(2, x), 30)
    assert busy.topics[0].partitions[0].error_code == REBALANCE_IN_PROGRESS


def test_the_coordinator_keeps_the_subscriptions_it_was_sent() -> None:
    driver, (a, b) = stable_group("a", "b", assignors=COOPERATIVE)
    group = driver.group()
    assert group.subscription(a.member_id).topics == ("t",)
    # a's last JoinGroup claimed what it kept; b joined last owning nothing
    claims = {
        m.name: set(decode_subscription(group.members[m.member_id].metadata(COOPERATIVE[0])).owned_partitions)
        for m in (a, b)
    }
    assert claims == {"a": a.assignment(), "b": set()}
    assert {mid: set(asg.partitions) for mid, asg in group.assignments().items()} == {
        a.member_id: a.assignment(),
        b.member_id: b.assignment(),
    }
