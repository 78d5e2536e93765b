"""The admin client's share-group requests and ListGroups of every type, through
AdminRequestManager against a fake cluster with injected time: the requests each call sends, how
answers and errors become results, and a coordinator that moved. [test]"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from kaflux.admin.groups import ListAllGroupsApi
from kaflux.admin.results import GroupListing
from kaflux.admin.share_groups import (
    AlterShareGroupOffsetsApi,
    DeleteShareGroupOffsetsApi,
    DescribeShareGroupOffsetsApi,
    ShareGroupDescribeApi,
    ShareMemberDescription,
    SharePartitionOffsetInfo,
)
from kaflux.errors import GroupIdNotFoundError, NonEmptyGroupError, UnknownTopicOrPartitionError
from kaflux.protocol.messages import alter_share_group_offsets as asgo
from kaflux.protocol.messages import delete_share_group_offsets as dsgo
from kaflux.protocol.messages import describe_share_group_offsets as desc
from kaflux.protocol.messages import share_group_describe as sgd
from kaflux.protocol.messages.list_groups import ListedGroup, ListGroupsRequest, ListGroupsResponse
from kaflux.structs import TopicPartition

from support.admin_rig import AdminRig
from support.fakes import NOT_COORDINATOR, FakeCluster

GROUP_ID_NOT_FOUND = 69
NON_EMPTY_GROUP = 68
UNKNOWN_TOPIC_OR_PARTITION = 3


class ShareFakeCluster(FakeCluster):
    """A FakeCluster whose coordinator keeps share groups: members (id -> partitions) and start
    offsets (partition -> (start offset, lag)); ListGroups lists them with consumer groups."""

    def __init__(self, brokers: int = 1) -> None:
        super().__init__(brokers)
        self.members: dict[str, dict[str, list[TopicPartition]]] = {}
        self.offsets: dict[str, dict[TopicPartition, tuple[int, int]]] = {}
        #: answer NOT_COORDINATOR this many times first
        self.moved = 0

    def handle(self, broker_id: int, request: Any, version: int) -> Any:
        handlers: dict[type[Any], Callable[[Any], Any]] = {
            sgd.ShareGroupDescribeRequest: self._describe,
            desc.DescribeShareGroupOffsetsRequest: self._describe_offsets,
            asgo.AlterShareGroupOffsetsRequest: self._alter,
            dsgo.DeleteShareGroupOffsetsRequest: self._delete,
            ListGroupsRequest: self._list,
        }
        handler = handlers.get(type(request))
        if handler is None:
            return super().handle(broker_id, request, version)
        self.handled.append((broker_id, request, version))
        return handler(request)

    def _moved(self) -> bool:
        if self.moved:
            self.moved -= 1
            return True
        return False

    def _list(self, request: ListGroupsRequest) -> ListGroupsResponse:
        groups = [
            ListedGroup("s", "share", "Stable", "share"),
            ListedGroup("c", "consumer", "Empty", "consumer"),
        ]
        wanted = {t.lower() for t in request.types_filter}
        return ListGroupsResponse(groups=[g for g in groups if not wanted or g.group_type in wanted])

    def _describe(self, request: sgd.ShareGroupDescribeRequest) -> sgd.ShareGroupDescribeResponse:
        out = []
        for name in request.group_ids:
            if self._moved():
                out.append(sgd.DescribedGroup(group_id=name, error_code=NOT_COORDINATOR))
            elif name not in self.members:
                out.append(sgd.DescribedGroup(group_id=name, error_code=GROUP_ID_NOT_FOUND))
            else:
                members = [
                    sgd.Member(
                        member_id=m,
                        rack_id="rack-1",
                        member_epoch=3,
                        client_id=f"client-{m}",
                        client_host="/127.0.0.1",
                        assignment=sgd.Assignment(
                            [sgd.TopicPartitions(uuid.uuid4(), tp.topic, [tp.partition]) for tp in parts]
                        ),
                    )
                    for m, parts in self.members[name].items()
                ]
                out.append(
                    sgd.DescribedGroup(
                        group_id=name,
                        group_state="Stable",
                        group_epoch=4,
                        assignment_epoch=4,
                        members=members,
                    )
                )
        return sgd.ShareGroupDescribeResponse(groups=out)

    def _describe_offsets(
        self, request: desc.DescribeShareGroupOffsetsRequest
    ) -> desc.DescribeShareGroupOffsetsResponse:
        (group,) = request.groups
        offsets = self.offsets.get(group.group_id)
        if offsets is None:
            return desc.DescribeShareGroupOffsetsResponse(
                groups=[
                    desc.DescribeShareGroupOffsetsResponseGroup(group.group_id, error_code=GROUP_ID_NOT_FOUND)
                ]
            )
        by_topic: dict[str, list[desc.DescribeShareGroupOffsetsResponsePartition]] = {}
        for tp, (start, lag) in sorted(offsets.items()):
            if group.topics is None or any(
                t.topic_name == tp.topic and tp.partition in t.partitions for t in group.topics
            ):
                by_topic.setdefault(tp.topic, []).append(
                    desc.DescribeShareGroupOffsetsResponsePartition(
                        tp.partition, start, 0 if start >= 0 else -1, lag
                    )
                )
        topics = [
            desc.DescribeShareGroupOffsetsResponseTopic(t, uuid.uuid4(), p) for t, p in by_topic.items()
        ]
        return desc.DescribeShareGroupOffsetsResponse(
            groups=[desc.DescribeShareGroupOffsetsResponseGroup(group.group_id, topics)]
        )

    def _alter(self, request: asgo.AlterShareGroupOffsetsRequest) -> asgo.AlterShareGroupOffsetsResponse:
        if self.members.get(request.group_id):
            return asgo.AlterShareGroupOffsetsResponse(error_code=NON_EMPTY_GROUP)
        responses = []
        for topic in request.topics:
            parts = []
            for p in topic.partitions:
                tp = TopicPartition(topic.topic_name, p.partition_index)
                known = tp in self.offsets.get(request.group_id, {})
                if known:
                    self.offsets[request.group_id][tp] = (p.start_offset, -1)
                parts.append(
                    asgo.AlterShareGroupOffsetsResponsePartition(
                        p.partition_index, 0 if known else UNKNOWN_TOPIC_OR_PARTITION
                    )
                )
            responses.append(asgo.AlterShareGroupOffsetsResponseTopic(topic.topic_name, uuid.uuid4(), parts))
        return asgo.AlterShareGroupOffsetsResponse(responses=responses)

    def _delete(self, request: dsgo.DeleteShareGroupOffsetsRequest) -> dsgo.DeleteShareGroupOffsetsResponse:
        if self.members.get(request.group_id):
            return dsgo.DeleteShareGroupOffsetsResponse(error_code=NON_EMPTY_GROUP)
        offsets = self.offsets.get(request.group_id, {})
        responses = []
        for topic in request.topics:
            known = [tp for tp in offsets if tp.topic == topic.topic_name]
            for tp in known:
                del offsets[tp]
            code = 0 if known else UNKNOWN_TOPIC_OR_PARTITION
            responses.append(dsgo.DeleteShareGroupOffsetsResponseTopic(topic.topic_name, uuid.uuid4(), code))
        return dsgo.DeleteShareGroupOffsetsResponse(responses=responses)


T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def test_list_all_groups_sends_the_type_filter_and_keeps_every_type() -> None:
    rig = AdminRig(ShareFakeCluster(2))
    everything = rig.run(ListAllGroupsApi([], [])).values()
    assert everything[0] == [
        GroupListing("s", "share", "share", "Stable"),
        GroupListing("c", "consumer", "consumer", "Empty"),
    ]
    shares = rig.run(ListAllGroupsApi(["share"], ["Stable"])).values()
    assert shares == {b: [GroupListing("s", "share", "share", "Stable")] for b in (0, 1)}
    (_, sent), *_ = rig.sent(ListGroupsRequest)[-2:]
    assert sent.types_filter == ["share"] and sent.states_filter == ["Stable"]


def test_describe_share_groups_reads_members_and_looks_a_moved_coordinator_up_again() -> None:
    fake = ShareFakeCluster()
    fake.members["g"] = {"m1": [T0, T1]}
    fake.moved = 1
    described = AdminRig(fake).run(ShareGroupDescribeApi(["g"])).values()["g"]
    assert (described.state, described.group_epoch, described.target_assignment_epoch) == ("Stable", 4, 4)
    assert described.coordinator.node_id == 0
    assert described.members == [
        ShareMemberDescription("m1", "client-m1", "/127.0.0.1", "rack-1", 3, frozenset({T0, T1}))
    ]
    assert len([r for r in fake.handled if isinstance(r[1], sgd.ShareGroupDescribeRequest)]) == 2


def test_describe_share_groups_fails_an_unknown_group() -> None:
    result = AdminRig(ShareFakeCluster()).run(ShareGroupDescribeApi(["nope"]))
    with pytest.raises(GroupIdNotFoundError, match="not a share group"):
        result.values()


def test_share_group_offsets_leave_out_unstarted_partitions_and_read_the_lag() -> None:
    fake = ShareFakeCluster()
    fake.offsets["g"] = {T0: (7, 3), T1: (-1, -1), TopicPartition("u", 0): (2, -1)}
    rig = AdminRig(fake)
    assert rig.run(DescribeShareGroupOffsetsApi("g", None)).values()["g"] == {
        T0: SharePartitionOffsetInfo(7, 0, 3),
        TopicPartition("u", 0): SharePartitionOffsetInfo(2, 0, None),
    }
    assert rig.run(DescribeShareGroupOffsetsApi("g", [T0])).values()["g"] == {
        T0: SharePartitionOffsetInfo(7, 0, 3)
    }
    (_, sent) = rig.sent(desc.DescribeShareGroupOffsetsRequest)[-1]
    assert sent.groups[0].topics == [desc.DescribeShareGroupOffsetsRequestTopic("t", [0])]


def test_alter_share_group_offsets_reports_each_partition_and_refuses_a_group_with_members() -> None:
    fake = ShareFakeCluster()
    fake.offsets["g"] = {T0: (7, 0)}
    rig = AdminRig(fake)
    result = rig.run(AlterShareGroupOffsetsApi("g", {T0: 2, TopicPartition("x", 0): 1})).values()["g"]
    assert result[T0] is None
    assert isinstance(result[TopicPartition("x", 0)], UnknownTopicOrPartitionError)
    assert fake.offsets["g"][T0] == (2, -1)
    fake.members["g"] = {"m": [T0]}
    with pytest.raises(NonEmptyGroupError, match="close its share consumers"):
        rig.run(AlterShareGroupOffsetsApi("g", {T0: 0})).values()


def test_delete_share_group_offsets_reports_each_topic() -> None:
    fake = ShareFakeCluster()
    fake.offsets["g"] = {T0: (7, 0), T1: (1, 0)}
    result = AdminRig(fake).run(DeleteShareGroupOffsetsApi("g", ["t", "x"])).values()["g"]
    assert result["t"] is None and isinstance(result["x"], UnknownTopicOrPartitionError)
    assert fake.offsets["g"] == {}
