"""KIP-881 through the classic membership: the leader gives its assignor the racks of each
partition's replicas, from the metadata it already has, and members send their ``client.rack``
in the subscription (ConsumerProtocolSubscription v3). [test]"""

from __future__ import annotations

import pytest

from kaflux.consumer.assignors import decode_subscription
from kaflux.protocol.messages.join_group import JoinGroupRequest
from kaflux.structs import Node, TopicPartition

from support.classic_membership_rig import tps
from support.fake_group_coordinator import FakeGroupCoordinator, GroupDriver
from support.fakes import FakeCluster


def racked_driver(partitions: int = 6) -> GroupDriver:
    """Three brokers in racks r0, r1, r2; topic "t" has one replica per partition, partition
    ``p`` on broker ``p % 3`` (the fake cluster's round robin)."""
    cluster = FakeCluster(brokers=3)
    for i, node in list(cluster.brokers.items()):
        cluster.brokers[i] = Node(node.node_id, node.host, node.port, f"r{i}")
    return GroupDriver(FakeGroupCoordinator(cluster=cluster), topics={"t": partitions})


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky", "sticky"])
def test_the_leader_assigns_each_member_the_partitions_in_its_rack(assignor: str) -> None:
    driver = racked_driver()
    # Joining in the reverse order of the racks: without racks the leader's range assignment
    # (by member id) or the sticky one would not line up with them.
    members = {}
    for rack in ("r2", "r1", "r0"):
        members[rack] = driver.add_member(f"m-{rack}", assignors=(assignor,), client_rack=rack)
        driver.settle()
    assert members["r0"].assignment() == tps(0, 3)
    assert members["r1"].assignment() == tps(1, 4)
    assert members["r2"].assignment() == tps(2, 5)


def test_members_send_their_rack_and_none_without_client_rack() -> None:
    driver = racked_driver()
    racked = driver.add_member("a", client_rack="r1")
    plain = driver.add_member("b")
    driver.settle()
    for member, rack in ((racked, "r1"), (plain, None)):
        join = member.sent(JoinGroupRequest)[-1].request
        assert decode_subscription(join.protocols[0].metadata).rack_id == rack


def test_without_broker_racks_the_assignment_is_the_plain_one() -> None:
    driver = GroupDriver(topics={"t": 6})  # brokers without racks
    a = driver.add_member("a", client_rack="r0")
    b = driver.add_member("b", client_rack="r1")
    driver.settle()
    first, second = sorted((a, b), key=lambda m: m.member_id)
    assert first.assignment() == tps(0, 1, 2)
    assert second.assignment() == tps(3, 4, 5)


def _move_replica(driver: GroupDriver, partition: int, node: int) -> None:
    part = driver.coordinator.cluster.partition(TopicPartition("t", partition))
    part.leader = node
    part.leader_epoch += 1


def test_the_leader_rejoins_when_replica_racks_change() -> None:
    driver = racked_driver()
    members = {}
    for rack in ("r0", "r1", "r2"):
        members[rack] = driver.add_member(
            f"m-{rack}", client_rack=rack, metadata_max_age_ms=1_000, session_timeout_ms=30_000
        )
        driver.settle()
    generation = driver.group().generation
    driver.run(5_000)  # metadata refreshes with the same racks: nothing happens
    assert driver.group().generation == generation
    assert members["r0"].assignment() == tps(0, 3)

    _move_replica(driver, 3, 2)  # partition 3 moves from r0 to r2
    _move_replica(driver, 2, 0)  # and partition 2 from r2 to r0
    driver.run(5_000)
    driver.settle()
    assert driver.group().generation > generation
    assert members["r0"].assignment() == tps(0, 2)
    assert members["r1"].assignment() == tps(1, 4)
    assert members["r2"].assignment() == tps(3, 5)


def test_without_member_racks_replica_racks_do_not_cause_a_rebalance() -> None:
    driver = racked_driver()
    for name in ("a", "b"):
        driver.add_member(name, metadata_max_age_ms=1_000, session_timeout_ms=30_000)
        driver.settle()
    generation = driver.group().generation
    _move_replica(driver, 0, 1)
    driver.run(5_000)
    driver.settle()
    assert driver.group().generation == generation
