"""The client's view of the cluster: brokers, topics, partition leaders. [bg, pure]

Updated from Metadata responses by the metadata request manager on the network thread.
Readers on other threads get immutable snapshots through events, never this object.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from kaflux.structs import Node, PartitionInfo, TopicPartition

ZERO_UUID = uuid.UUID(int=0)

#: Coordinator connections get their own node ids (and so their own sockets), like Java's
#: ``Integer.MAX_VALUE - nodeId``: a Fetch parked on the broker for fetch.max.wait.ms must not
#: delay a commit or a heartbeat queued behind it on the same connection.
_COORDINATOR_ID_BASE = 2**31 - 1


def coordinator_node_id(broker_id: int) -> int:
    """The node id used for the coordinator connection to ``broker_id``."""
    return _COORDINATOR_ID_BASE - broker_id


def is_coordinator_node_id(node_id: int) -> bool:
    return node_id > _COORDINATOR_ID_BASE // 2


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """One topic's metadata."""

    name: str
    topic_id: uuid.UUID
    is_internal: bool
    partitions: dict[int, PartitionInfo]
    error_code: int = 0


@dataclass(slots=True)
class ClusterMetadata:
    """Brokers and topics as last reported, plus what the client wants refreshed."""

    bootstrap: list[tuple[str, int]]
    brokers: dict[int, Node] = field(default_factory=dict)
    topics: dict[str, TopicInfo] = field(default_factory=dict)
    cluster_id: str | None = None
    controller_id: int = -1
    #: coordinators found by FindCoordinator, by their coordinator node id
    coordinators: dict[int, Node] = field(default_factory=dict)
    #: bumped on every update so observers can tell something changed
    version: int = 0
    last_refresh_ms: int = -1
    #: the cluster's finalized feature levels (e.g. ``transaction.version``), from the ApiVersions
    #: answer with the highest finalized-features epoch seen (as Java's ``ApiVersions``)
    finalized_features: dict[str, int] = field(default_factory=dict)
    finalized_features_epoch: int = -1

    def rebootstrap(self) -> None:
        """Forget the brokers (KIP-899): requests go to the bootstrap addresses again until a
        metadata response names the brokers; a refresh is due at once."""
        self.brokers = {}
        self.coordinators = {}
        self.last_refresh_ms = -1
        self.version += 1

    def update_finalized_features(self, features: dict[str, int], epoch: int) -> None:
        """A broker reported the finalized features at ``epoch``: keep the newest report."""
        if epoch > self.finalized_features_epoch:
            self.finalized_features = dict(features)
            self.finalized_features_epoch = epoch

    def feature_level(self, name: str) -> int:
        """The finalized level of feature ``name`` (0: not finalized, or not known yet)."""
        return self.finalized_features.get(name, 0)

    def node(self, node_id: int) -> Node | None:
        """The broker ``node_id``; bootstrap entries have ids -1, -2, ...; coordinator
        connections have ids from :func:`coordinator_node_id`."""
        if is_coordinator_node_id(node_id):
            return self.brokers.get(_COORDINATOR_ID_BASE - node_id) or self.coordinators.get(node_id)
        if node_id < 0:
            index = -node_id - 1
            if index < len(self.bootstrap):
                host, port = self.bootstrap[index]
                return Node(node_id, host, port)
            return None
        return self.brokers.get(node_id)

    def known_node_ids(self) -> list[int]:
        """Broker ids from metadata, or the bootstrap ids before the first update."""
        if self.brokers:
            return sorted(self.brokers)
        return [-(i + 1) for i in range(len(self.bootstrap))]

    def leader_for(self, tp: TopicPartition) -> int | None:
        """The leader broker id of ``tp`` if known and online."""
        topic = self.topics.get(tp.topic)
        if topic is None:
            return None
        info = topic.partitions.get(tp.partition)
        if info is None or info.leader < 0 or info.leader not in self.brokers:
            return None
        return info.leader

    def leader_epoch(self, tp: TopicPartition) -> int | None:
        """The leader epoch of ``tp`` if known."""
        topic = self.topics.get(tp.topic)
        info = topic.partitions.get(tp.partition) if topic else None
        return info.leader_epoch if info is not None and info.leader_epoch >= 0 else None

    def partitions_for(self, topic: str) -> list[PartitionInfo] | None:
        """Partition infos of ``topic`` sorted by partition, or None if unknown."""
        info = self.topics.get(topic)
        if info is None:
            return None
        return [info.partitions[p] for p in sorted(info.partitions)]

    def topic_id(self, topic: str) -> uuid.UUID | None:
        """The topic's id (None if unknown or the broker reported none)."""
        info = self.topics.get(topic)
        if info is None or info.topic_id == ZERO_UUID:
            return None
        return info.topic_id

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic with ``topic_id``."""
        for info in self.topics.values():
            if info.topic_id == topic_id:
                return info.name
        return None

    def update(
        self,
        brokers: dict[int, Node],
        topics: dict[str, TopicInfo],
        *,
        cluster_id: str | None,
        controller_id: int,
        now_ms: int,
        full: bool,
    ) -> None:
        """Apply a Metadata response. ``full`` replaces all topics, else merges these.

        A partition reported with an older leader epoch than the one known (the answering
        broker has not heard of the election yet, or the leader came from a Fetch or Produce
        response, KIP-951) keeps what is known, as Java's ``Metadata`` does: leadership never
        goes back in time. A topic with a new id (deleted and re-created) starts afresh.
        """
        topics = {name: self._without_stale_leaders(info) for name, info in topics.items()}
        self.brokers = brokers
        if full:
            self.topics = dict(topics)
        else:
            self.topics.update(topics)
        self.cluster_id = cluster_id
        self.controller_id = controller_id
        self.last_refresh_ms = now_ms
        self.version += 1

    def _without_stale_leaders(self, info: TopicInfo) -> TopicInfo:
        known = self.topics.get(info.name)
        if known is None or (
            known.topic_id != info.topic_id and ZERO_UUID not in (known.topic_id, info.topic_id)
        ):
            return info
        kept = dict(info.partitions)
        for index, partition in info.partitions.items():
            old = known.partitions.get(index)
            if old is not None and 0 <= partition.leader_epoch < old.leader_epoch:
                kept[index] = old
        return info if kept == info.partitions else replace(info, partitions=kept)

    def update_partition_leadership(
        self, leaders: Mapping[TopicPartition, tuple[int, int]], nodes: Iterable[Node] = ()
    ) -> set[TopicPartition]:
        """Apply the current leaders a Fetch or Produce response carried with
        NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH (KIP-951): ``leaders`` maps partitions to
        ``(leader id, leader epoch)``, ``nodes`` are the brokers the response described.

        As Java's ``Metadata.updatePartitionLeadership``, a partition is updated only if its
        leader and epoch are both given, the epoch is newer than the known one, the leader is
        a known broker or one of ``nodes``, and the partition itself is known. The brokers of
        ``nodes`` are added (or refreshed) only when some partition was updated. Returns the
        partitions updated; the caller still asks for a metadata refresh.
        """
        merged = dict(self.brokers)
        merged.update({n.node_id: n for n in nodes if n.node_id >= 0})
        updated: set[TopicPartition] = set()
        for tp, (leader, epoch) in leaders.items():
            topic = self.topics.get(tp.topic)
            info = topic.partitions.get(tp.partition) if topic is not None else None
            if topic is None or info is None or leader < 0 or epoch < 0 or leader not in merged:
                continue
            if info.leader_epoch >= 0 and epoch <= info.leader_epoch:
                continue
            partitions = dict(topic.partitions)
            partitions[tp.partition] = info._replace(leader=leader, leader_epoch=epoch)
            self.topics[tp.topic] = replace(topic, partitions=partitions)
            updated.add(tp)
        if updated:
            self.brokers = merged
            self.version += 1
        return updated

    def forget_topics(self, names: set[str]) -> None:
        """Drop topics the client no longer cares about or that no longer exist."""
        for name in names:
            self.topics.pop(name, None)
        self.version += 1
