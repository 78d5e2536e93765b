"""ClusterMetadata: node lookup (bootstrap, brokers, coordinators), leaders and updates."""

from __future__ import annotations

import uuid

import pytest

from kaflux.network.cluster import (
    ZERO_UUID,
    ClusterMetadata,
    TopicInfo,
    coordinator_node_id,
    is_coordinator_node_id,
)
from kaflux.structs import Node, PartitionInfo, TopicPartition

BROKERS = {1: Node(1, "b1", 9092), 2: Node(2, "b2", 9092)}
ORDERS_ID = uuid.UUID(int=7)


def topic(name: str, leaders: dict[int, int], topic_id: uuid.UUID = ORDERS_ID, epoch: int = 3) -> TopicInfo:
    partitions = {
        p: PartitionInfo(name, p, leader, epoch, (leader,), (leader,)) for p, leader in leaders.items()
    }
    return TopicInfo(name, topic_id, False, partitions)


def updated(**topics: TopicInfo) -> ClusterMetadata:
    cluster = ClusterMetadata([("boot1", 9092), ("boot2", 9093)])
    cluster.update(dict(BROKERS), topics, cluster_id="c", controller_id=1, now_ms=10, full=True)
    return cluster


def test_bootstrap_nodes_have_negative_ids_before_the_first_update() -> None:
    cluster = ClusterMetadata([("boot1", 9092), ("boot2", 9093)])
    assert cluster.known_node_ids() == [-1, -2]
    assert cluster.node(-2) == Node(-2, "boot2", 9093)
    assert cluster.node(-3) is None


def test_known_nodes_are_the_brokers_after_an_update() -> None:
    assert updated().known_node_ids() == [1, 2]


def test_coordinator_node_id_round_trips_and_does_not_collide_with_brokers() -> None:
    node_id = coordinator_node_id(2)
    assert is_coordinator_node_id(node_id)
    assert not is_coordinator_node_id(2)
    assert not is_coordinator_node_id(-1)
    assert node_id not in (1, 2)


def test_coordinator_node_resolves_to_its_broker_address() -> None:
    assert updated().node(coordinator_node_id(2)) == Node(2, "b2", 9092)


def test_coordinator_not_in_metadata_resolves_from_find_coordinator_results() -> None:
    cluster = updated()
    cluster.coordinators[coordinator_node_id(9)] = Node(9, "b9", 9099)
    assert cluster.node(coordinator_node_id(9)) == Node(9, "b9", 9099)


def test_leader_for_a_known_partition() -> None:
    assert updated(orders=topic("orders", {0: 1, 1: 2})).leader_for(TopicPartition("orders", 1)) == 2


@pytest.mark.parametrize(
    "tp", [TopicPartition("unknown", 0), TopicPartition("orders", 5), TopicPartition("orders", 1)]
)
def test_leader_is_unknown_for_missing_partitions_and_offline_leaders(tp: TopicPartition) -> None:
    cluster = updated(orders=topic("orders", {0: 1, 1: -1}))
    assert cluster.leader_for(tp) is None


def test_leader_not_among_the_brokers_is_unknown() -> None:
    assert updated(orders=topic("orders", {0: 5})).leader_for(TopicPartition("orders", 0)) is None


def test_leader_epoch() -> None:
    cluster = updated(orders=topic("orders", {0: 1}, epoch=4), old=topic("old", {0: 1}, epoch=-1))
    assert cluster.leader_epoch(TopicPartition("orders", 0)) == 4
    assert cluster.leader_epoch(TopicPartition("old", 0)) is None
    assert cluster.leader_epoch(TopicPartition("nope", 0)) is None


def test_partitions_are_listed_in_partition_order() -> None:
    cluster = updated(orders=topic("orders", {2: 1, 0: 2, 1: 1}))
    partitions = cluster.partitions_for("orders")
    assert partitions is not None
    assert [p.partition for p in partitions] == [0, 1, 2]
    assert cluster.partitions_for("nope") is None


def test_topic_ids_and_names() -> None:
    cluster = updated(orders=topic("orders", {0: 1}), legacy=topic("legacy", {0: 1}, topic_id=ZERO_UUID))
    assert cluster.topic_id("orders") == ORDERS_ID
    assert cluster.topic_id("legacy") is None
    assert cluster.topic_name(ORDERS_ID) == "orders"
    assert cluster.topic_name(uuid.UUID(int=99)) is None


def test_full_update_replaces_topics_and_partial_update_merges() -> None:
    cluster = updated(orders=topic("orders", {0: 1}))
    cluster.update(
        dict(BROKERS), {"logs": topic("logs", {0: 2})}, cluster_id="c", controller_id=1, now_ms=20, full=False
    )
    assert set(cluster.topics) == {"orders", "logs"}
    cluster.update(
        dict(BROKERS), {"logs": topic("logs", {0: 2})}, cluster_id="c", controller_id=1, now_ms=30, full=True
    )
    assert set(cluster.topics) == {"logs"}
    assert cluster.last_refresh_ms == 30


def test_every_change_bumps_the_version() -> None:
    cluster = updated(orders=topic("orders", {0: 1}))
    before = cluster.version
    cluster.forget_topics({"orders"})
    assert "orders" not in cluster.topics
    assert cluster.version == before + 1


# -- leaders from Fetch and Produce responses (KIP-951) ----------------------------------------------


def test_a_newer_leader_from_a_response_replaces_the_known_one_and_adds_its_broker() -> None:
    cluster = updated(orders=topic("orders", {0: 1, 1: 1}, epoch=3))
    version = cluster.version
    tp = TopicPartition("orders", 0)
    moved = cluster.update_partition_leadership({tp: (9, 4)}, [Node(9, "b9", 9099)])
    assert moved == {tp}
    assert (cluster.leader_for(tp), cluster.leader_epoch(tp)) == (9, 4)
    assert cluster.node(9) == Node(9, "b9", 9099)
    assert cluster.leader_for(TopicPartition("orders", 1)) == 1
    assert cluster.version == version + 1


@pytest.mark.parametrize(
    "leader",
    [(2, 3), (2, 2), (9, 4), (2, -1), (-1, 4)],
    ids=["same-epoch", "older-epoch", "unknown-broker", "no-epoch", "no-leader"],
)
def test_a_response_leader_that_is_not_newer_or_not_reachable_is_ignored(leader: tuple[int, int]) -> None:
    cluster = updated(orders=topic("orders", {0: 1}, epoch=3))
    version = cluster.version
    tp = TopicPartition("orders", 0)
    assert cluster.update_partition_leadership({tp: leader}) == set()
    assert (cluster.leader_for(tp), cluster.leader_epoch(tp), cluster.version) == (1, 3, version)
    assert cluster.update_partition_leadership({TopicPartition("nope", 0): (2, 9)}) == set()


def test_metadata_with_an_older_leader_epoch_does_not_take_leadership_back() -> None:
    cluster = updated(orders=topic("orders", {0: 1, 1: 1}, epoch=3))
    tp = TopicPartition("orders", 0)
    cluster.update_partition_leadership({tp: (2, 5)})
    cluster.update(
        dict(BROKERS),
        {"orders": topic("orders", {0: 1, 1: 2}, epoch=4)},
        cluster_id="c",
        controller_id=1,
        now_ms=20,
        full=True,
    )
    assert (cluster.leader_for(tp), cluster.leader_epoch(tp)) == (2, 5)  # kept: epoch 4 < 5
    assert cluster.leader_for(TopicPartition("orders", 1)) == 2  # epoch 4 > 3: taken
    recreated = topic("orders", {0: 1, 1: 1}, topic_id=uuid.UUID(int=8), epoch=0)
    cluster.update(
        dict(BROKERS), {"orders": recreated}, cluster_id="c", controller_id=1, now_ms=30, full=True
    )
    assert (cluster.leader_for(tp), cluster.leader_epoch(tp)) == (1, 0)  # a new topic starts afresh
