"""The admin client's consumer-group requests through AdminRequestManager, against a fake cluster
with injected time: FindCoordinator per group, ListGroups to every broker, DescribeGroups with
ConsumerGroupDescribe for KIP-848 groups, DeleteGroups, OffsetFetch and admin OffsetCommit,
retries on a moved or loading coordinator, errors and the deadline. [test]"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from kaflux.admin import AdminClient
from kaflux.admin.group_describe import DescribeGroupsApi
from kaflux.admin.groups import DeleteGroupsApi, ListGroupsApi, OffsetCommitApi, OffsetFetchApi
from kaflux.admin.results import ConsumerGroupListing, MemberDescription
from kaflux.consumer.assignors.consumer_protocol import Assignment, encode_assignment
from kaflux.errors import (
    GroupAuthorizationFailedError,
    GroupIdNotFoundError,
    InvalidArgumentError,
    KafkaTimeoutError,
    NonEmptyGroupError,
    UnknownMemberIdError,
    UnsupportedVersionError,
)
from kaflux.network.requests import UnsentRequest
from kaflux.protocol.api import CLIENT_VERSIONS, ApiKey
from kaflux.protocol.messages import consumer_group_describe as cgd
from kaflux.protocol.messages.delete_groups import (
    DeletableGroupResult,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
)
from kaflux.protocol.messages.describe_groups import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
)
from kaflux.protocol.messages.find_coordinator import FindCoordinatorRequest
from kaflux.protocol.messages.list_groups import ListedGroup, ListGroupsRequest, ListGroupsResponse
from kaflux.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from kaflux.protocol.messages.offset_fetch import OffsetFetchRequest
from kaflux.structs import Node, OffsetAndMetadata, TopicPartition

from support.admin_rig import DEADLINE, AdminRig
from support.fakes import (
    BACKOFF_MS,
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE,
    GROUP_AUTHORIZATION_FAILED,
    NOT_COORDINATOR,
    UNKNOWN_MEMBER_ID,
    Exchange,
    FakeCluster,
    FakeNetwork,
)
from support.socket_fake_broker import SocketFakeBroker

GROUP_ID_NOT_FOUND = 69
NON_EMPTY_GROUP = 68


@dataclass
class FakeGroup:
    """A group as the fake coordinator keeps it: members map member id -> assigned partitions."""

    state: str = "Stable"
    protocol_type: str = "consumer"
    protocol: str = "range"
    members: dict[str, list[TopicPartition]] = field(default_factory=dict)
    #: a KIP-848 group: DescribeGroups reports it Dead, ConsumerGroupDescribe describes it
    kip848: bool = False


class GroupsFakeCluster(FakeCluster):
    """A FakeCluster that also answers ListGroups, DescribeGroups, ConsumerGroupDescribe and
    DeleteGroups, and refuses an admin OffsetCommit to a group with members, as Kafka does."""

    def __init__(self, brokers: int = 1, **kwargs: Any) -> None:
        super().__init__(brokers, **kwargs)
        self.groups: dict[str, FakeGroup] = {}

    def add_group(self, group_id: str, coordinator: int = 0, **kwargs: Any) -> FakeGroup:
        self.groups[group_id] = group = FakeGroup(**kwargs)
        self.coordinators[group_id] = coordinator
        return group

    def handle(self, broker_id: int, request: Any, version: int) -> Any:
        handlers: dict[type[Any], Callable[..., Any]] = {
            ListGroupsRequest: self._list_groups,
            DescribeGroupsRequest: self._describe_groups,
            cgd.ConsumerGroupDescribeRequest: self._consumer_group_describe,
            DeleteGroupsRequest: self._delete_groups,
        }
        handler = handlers.get(type(request))
        if broker_id in self.brokers and broker_id not in self.stopped and handler is not None:
            self.handled.append((broker_id, request, version))
            return handler(broker_id, request, version)
        if isinstance(request, OffsetCommitRequest) and self._members_of(request.group_id, request.member_id):
            self.handled.append((broker_id, request, version))
            return self._refuse_commit(request)
        return super().handle(broker_id, request, version)

    def _members_of(self, group_id: str, member_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and bool(group.members) and member_id not in group.members

    def _refuse_commit(self, request: OffsetCommitRequest) -> OffsetCommitResponse:
        return OffsetCommitResponse(
            topics=[
                OffsetCommitResponseTopic(
                    name=t.name,
                    partitions=[
                        OffsetCommitResponsePartition(
                            partition_index=p.partition_index, error_code=UNKNOWN_MEMBER_ID
                        )
                        for p in t.partitions
                    ],
                )
                for t in request.topics
            ]
        )

    def _top_error(self, api: type[Any], node: int, group: str) -> int:
        error = self._fault(api, None, node)
        if not error and self.coordinator_for(group) != node:
            error = NOT_COORDINATOR
        return error

    def _list_groups(self, node: int, request: ListGroupsRequest, version: int) -> ListGroupsResponse:
        error = self._fault(ListGroupsRequest, None, node)
        if error:
            return ListGroupsResponse(error_code=error)
        return ListGroupsResponse(
            groups=[
                ListedGroup(
                    group_id=name,
                    protocol_type=group.protocol_type,
                    group_state=group.state,
                    group_type="consumer" if group.kip848 else "classic",
                )
                for name, group in sorted(self.groups.items())
                if self.coordinator_for(name) == node
            ]
        )

    def _describe_groups(
        self, node: int, request: DescribeGroupsRequest, version: int
    ) -> DescribeGroupsResponse:
        described = []
        for name in request.groups:
            error = self._top_error(DescribeGroupsRequest, node, name)
            group = self.groups.get(name)
            if error:
                described.append(DescribedGroup(error_code=error, group_id=name))
            elif group is None or group.kip848:
                described.append(DescribedGroup(group_id=name, group_state="Dead"))
            else:
                members = [
                    DescribedGroupMember(
                        member_id=member,
                        client_id=f"client-{member}",
                        client_host="/127.0.0.1",
                        member_assignment=encode_assignment(Assignment(tuple(parts))) if parts else b"",
                    )
                    for member, parts in group.members.items()
                ]
                described.append(
                    DescribedGroup(
                        group_id=name,
                        group_state=group.state,
                        protocol_type=group.protocol_type,
                        protocol_data=group.protocol,
                        members=members,
                    )
                )
        return DescribeGroupsResponse(groups=described)

    def _consumer_group_describe(
        self, node: int, request: cgd.ConsumerGroupDescribeRequest, version: int
    ) -> cgd.ConsumerGroupDescribeResponse:
        described = []
        for name in request.group_ids:
            error = self._top_error(cgd.ConsumerGroupDescribeRequest, node, name)
            group = self.groups.get(name)
            if not error and (group is None or not group.kip848):
                error = GROUP_ID_NOT_FOUND
            if error:
                described.append(cgd.DescribedGroup(error_code=error, group_id=name, error_message="no"))
                continue
            assert group is not None
            members = []
            for member, parts in group.members.items():
                by_topic: dict[str, list[int]] = {}
                for tp in parts:
                    by_topic.setdefault(tp.topic, []).append(tp.partition)
                assignment = cgd.Assignment(
                    topic_partitions=[
                        cgd.TopicPartitions(topic_name=t, partitions=p) for t, p in by_topic.items()
                    ]
                )
                members.append(
                    cgd.Member(
                        member_id=member, client_id="kip848", client_host="/10.0.0.1", assignment=assignment
                    )
                )
            described.append(
                cgd.DescribedGroup(
                    group_id=name, group_state=group.state, assignor_name=group.protocol, members=members
                )
            )
        return cgd.ConsumerGroupDescribeResponse(groups=described)

    def _delete_groups(self, node: int, request: DeleteGroupsRequest, version: int) -> DeleteGroupsResponse:
        results = []
        for name in request.groups_names:
            error = self._top_error(DeleteGroupsRequest, node, name)
            group = self.groups.get(name)
            if not error and group is None:
                error = GROUP_ID_NOT_FOUND
            elif not error and group is not None and group.members:
                error = NON_EMPTY_GROUP
            if not error:
                del self.groups[name]
                self.committed.pop(name, None)
            results.append(DeletableGroupResult(group_id=name, error_code=error))
        return DeleteGroupsResponse(results=results)


def versions_without(*keys: ApiKey, **limits: tuple[int, int]) -> dict[ApiKey, tuple[int, int]]:
    """The client's versions without ``keys``, and with ``limits`` (by ApiKey name)."""
    versions = {k: v for k, v in CLIENT_VERSIONS.items() if k not in keys}
    for name, limit in limits.items():
        versions[ApiKey[name]] = limit
    return versions


class EncodingFakeNetwork(FakeNetwork):
    """A FakeNetwork that fails a request which cannot be encoded at the negotiated version
    with its error, as the network client does, instead of raising."""

    def send(self, unsent: UnsentRequest[Any], now_ms: int) -> Exchange:
        try:
            return super().send(unsent, now_ms)
        except UnsupportedVersionError as exc:
            exchange = self.exchanges[-1]
            exchange.error = exc
            return exchange


class Rig(AdminRig):
    """The admin rig over a network that encodes every request at its negotiated version."""

    def __init__(self, fake: FakeCluster) -> None:
        super().__init__(fake, EncodingFakeNetwork(fake))


def tps(topic: str, *partitions: int) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in partitions]


# -- ListGroups --------------------------------------------------------------------------------


def test_list_groups_asks_every_broker_and_keeps_consumer_groups() -> None:
    fake = GroupsFakeCluster(3)
    fake.add_group("a", 0)
    fake.add_group("b", 1, state="Empty")
    fake.add_group("c", 2, protocol_type="connect")
    fake.add_group("d", 2, protocol_type="", state="Empty")
    rig = Rig(fake)
    result = rig.run(ListGroupsApi()).values()
    assert sorted(broker for broker, _ in rig.sent(ListGroupsRequest)) == [0, 1, 2]
    assert result == {
        0: [ConsumerGroupListing("a", "Stable", "consumer", "classic")],
        1: [ConsumerGroupListing("b", "Empty", "consumer", "classic")],
        2: [ConsumerGroupListing("d", "Empty", "", "classic")],
    }


def test_list_groups_before_v4_reports_no_state_and_before_v5_no_type() -> None:
    fake = GroupsFakeCluster(1, api_versions=versions_without(LIST_GROUPS=(0, 3)))
    fake.add_group("a")
    result = Rig(fake).run(ListGroupsApi()).values()
    assert result == {0: [ConsumerGroupListing("a", None, "consumer", None)]}


def test_list_groups_retries_a_loading_coordinator_and_raises_a_refusal() -> None:
    fake = GroupsFakeCluster(2)
    fake.add_group("a", 1)
    fake.inject(ListGroupsRequest, COORDINATOR_LOAD_IN_PROGRESS, node=1)
    rig = Rig(fake)
    assert rig.run(ListGroupsApi()).values()[1] == [
        ConsumerGroupListing("a", "Stable", "consumer", "classic")
    ]
    assert len(rig.sent(ListGroupsRequest)) == 3

    fake.inject(ListGroupsRequest, 31, node=0)  # CLUSTER_AUTHORIZATION_FAILED
    result = rig.run(ListGroupsApi())
    assert set(result.failed) == {0} and "ListGroups on broker 0" in str(result.failed[0])


# -- DescribeGroups / ConsumerGroupDescribe ---------------------------------------------------


def test_describe_finds_each_coordinator_and_decodes_the_assignments() -> None:
    fake = GroupsFakeCluster(3)
    fake.add_group("a", 1, members={"m1": tps("t", 0, 1), "m2": []})
    fake.add_group("b", 2, protocol="roundrobin", members={"m3": tps("u", 0)})
    rig = Rig(fake)
    result = rig.run(DescribeGroupsApi(["a", "b"])).values()
    assert sorted(r.key for _, r in rig.sent(FindCoordinatorRequest)) == ["a", "b"]
    assert sorted((b, r.groups) for b, r in rig.sent(DescribeGroupsRequest)) == [(1, ["a"]), (2, ["b"])]
    a, b = result["a"], result["b"]
    assert (a.state, a.protocol_type, a.protocol) == ("Stable", "consumer", "range")
    assert a.coordinator == Node(1, "broker1.fake", 9093)
    assert a.members == [
        MemberDescription("m1", None, "client-m1", "/127.0.0.1", frozenset(tps("t", 0, 1))),
        MemberDescription("m2", None, "client-m2", "/127.0.0.1", frozenset()),
    ]
    assert b.protocol == "roundrobin" and b.coordinator.node_id == 2
    assert not rig.sent(cgd.ConsumerGroupDescribeRequest), "classic groups need no second request"


def test_describe_looks_the_coordinator_up_again_when_it_moved() -> None:
    fake = GroupsFakeCluster(2)
    fake.add_group("a", 0)
    rig = Rig(fake)
    op = rig.submit(DescribeGroupsApi(["a"]))
    rig.side.net.run([rig.manager], 1)  # FindCoordinator: broker 0
    fake.coordinators["a"] = 1  # moves before DescribeGroups arrives
    rig.side.net.run([rig.manager], 2)
    assert not op.future.done()
    rig.side.net.run([rig.manager], 2 + BACKOFF_MS)  # FindCoordinator again: broker 1
    rig.side.net.run([rig.manager], 2 + BACKOFF_MS)
    assert [b for b, _ in rig.sent(DescribeGroupsRequest)] == [0, 1]
    assert op.future.result(0).values()["a"].coordinator.node_id == 1


def test_a_kip848_group_is_described_with_consumer_group_describe() -> None:
    fake = GroupsFakeCluster(1)
    fake.add_group("new", kip848=True, protocol="uniform", state="Reconciling", members={"x": tps("t", 2)})
    rig = Rig(fake)
    description = rig.run(DescribeGroupsApi(["new"])).values()["new"]
    assert [r.groups for _, r in rig.sent(DescribeGroupsRequest)] == [["new"]]
    assert [r.group_ids for _, r in rig.sent(cgd.ConsumerGroupDescribeRequest)] == [["new"]]
    assert (description.state, description.protocol_type, description.protocol) == (
        "Reconciling",
        "consumer",
        "uniform",
    )
    assert description.members == [
        MemberDescription("x", None, "kip848", "/10.0.0.1", frozenset(tps("t", 2)))
    ]


def test_an_absent_group_is_dead_as_describe_groups_says() -> None:
    rig = Rig(GroupsFakeCluster(1))
    description = rig.run(DescribeGroupsApi(["nope"])).values()["nope"]
    assert (description.state, description.protocol_type, description.members) == ("Dead", "", [])
    assert len(rig.sent(cgd.ConsumerGroupDescribeRequest)) == 1


def test_without_consumer_group_describe_the_describe_groups_answer_stands() -> None:
    fake = GroupsFakeCluster(1, api_versions=versions_without(ApiKey.CONSUMER_GROUP_DESCRIBE))
    fake.add_group("new", kip848=True)
    description = Rig(fake).run(DescribeGroupsApi(["new"])).values()["new"]
    assert description.state == "Dead"


def test_without_describe_groups_consumer_group_describe_is_asked() -> None:
    fake = GroupsFakeCluster(1, api_versions=versions_without(ApiKey.DESCRIBE_GROUPS))
    fake.add_group("new", kip848=True, members={"x": []})
    rig = Rig(fake)
    assert rig.run(DescribeGroupsApi(["new"])).values()["new"].members[0].member_id == "x"


def test_a_coordinator_that_can_describe_no_group_fails_with_unsupported_version() -> None:
    fake = GroupsFakeCluster(
        1, api_versions=versions_without(ApiKey.DESCRIBE_GROUPS, ApiKey.CONSUMER_GROUP_DESCRIBE)
    )
    result = Rig(fake).run(DescribeGroupsApi(["g"]))
    with pytest.raises(UnsupportedVersionError, match="neither DescribeGroups nor ConsumerGroupDescribe"):
        result.values()


def test_a_group_of_another_protocol_is_not_a_consumer_group() -> None:
    fake = GroupsFakeCluster(1)
    fake.add_group("connect-cluster", protocol_type="connect")
    with pytest.raises(InvalidArgumentError, match=r"not a consumer group.*'connect'"):
        Rig(fake).run(DescribeGroupsApi(["connect-cluster"])).values()


def test_a_refusal_fails_the_group_with_its_error_class() -> None:
    fake = GroupsFakeCluster(1)
    fake.add_group("a")
    fake.inject(DescribeGroupsRequest, GROUP_AUTHORIZATION_FAILED)
    with pytest.raises(GroupAuthorizationFailedError, match="group 'a'"):
        Rig(fake).run(DescribeGroupsApi(["a"])).values()


def test_a_coordinator_never_found_times_out_naming_the_group_and_the_last_error() -> None:
    fake = GroupsFakeCluster(1)
    fake.inject(FindCoordinatorRequest, COORDINATOR_NOT_AVAILABLE, count=-1)
    rig = Rig(fake)
    result = rig.run(DescribeGroupsApi(["a"]), "describe_consumer_groups()")
    assert rig.now >= DEADLINE
    with pytest.raises(KafkaTimeoutError, match=r"describe_consumer_groups\(\) did not complete") as info:
        result.values()
    assert "group 'a'" in str(info.value) and "CoordinatorNotAvailableError" in str(info.value)
    assert isinstance(info.value.__cause__, Exception)


# -- DeleteGroups -----------------------------------------------------------------------------


def test_delete_groups_reports_each_group() -> None:
    fake = GroupsFakeCluster(2)
    fake.add_group("empty", 0, state="Empty")
    fake.add_group("busy", 1, members={"m": []})
    fake.commit("empty", TopicPartition("t", 0), 5)
    fake.inject(DeleteGroupsRequest, COORDINATOR_LOAD_IN_PROGRESS, node=0)
    rig = Rig(fake)
    result = rig.run(DeleteGroupsApi(["empty", "busy", "nope"]))
    assert result.completed == {"empty": None}
    assert "empty" not in fake.groups and "empty" not in fake.committed
    assert isinstance(result.failed["busy"], NonEmptyGroupError)
    assert "stop its consumers" in str(result.failed["busy"])
    assert isinstance(result.failed["nope"], GroupIdNotFoundError)


# -- offsets ----------------------------------------------------------------------------------


def _committed(fake: FakeCluster) -> None:
    fake.commit("g", TopicPartition("t", 0), 10, "meta", leader_epoch=3)
    fake.commit("g", TopicPartition("u", 1), 4)


def test_offset_fetch_of_all_partitions_uses_the_list_of_groups() -> None:
    fake = GroupsFakeCluster(2)
    fake.coordinators["g"] = 1
    _committed(fake)
    rig = Rig(fake)
    offsets = rig.run(OffsetFetchApi("g", None)).values()["g"]
    assert offsets == {
        TopicPartition("t", 0): OffsetAndMetadata(10, "meta", 3),
        TopicPartition("u", 1): OffsetAndMetadata(4, "", None),
    }
    ((broker, request),) = rig.sent(OffsetFetchRequest)
    assert broker == 1 and request.groups[0].group_id == "g" and request.groups[0].topics is None


def test_offset_fetch_falls_back_to_one_group_where_there_is_no_v8() -> None:
    fake = GroupsFakeCluster(1, api_versions=versions_without(OFFSET_FETCH=(0, 7)))
    _committed(fake)
    rig = Rig(fake)
    wanted = [TopicPartition("t", 0), TopicPartition("t", 1)]
    offsets = rig.run(OffsetFetchApi("g", wanted)).values()["g"]
    assert offsets == {TopicPartition("t", 0): OffsetAndMetadata(10, "meta", 3)}, "no commit: left out"
    ((_, request),) = rig.sent(OffsetFetchRequest)
    assert request.group_id == "g" and [(t.name, t.partition_indexes) for t in request.topics] == [
        ("t", [0, 1])
    ]


def test_offset_fetch_raises_a_refusal() -> None:
    fake = GroupsFakeCluster(1)
    fake.inject(OffsetFetchRequest, GROUP_AUTHORIZATION_FAILED)
    with pytest.raises(GroupAuthorizationFailedError):
        Rig(fake).run(OffsetFetchApi("g", None)).values()


def test_an_admin_commit_has_no_member_and_generation_minus_one() -> None:
    fake = GroupsFakeCluster(2)
    fake.coordinators["g"] = 1
    fake.inject(OffsetCommitRequest, NOT_COORDINATOR, node=1)  # looked up again, then accepted
    rig = Rig(fake)
    offsets = {
        TopicPartition("t", 0): OffsetAndMetadata(7, "m", 2),
        TopicPartition("t", 1): OffsetAndMetadata(1),
    }
    assert rig.run(OffsetCommitApi("g", offsets)).values() == {"g": None}
    assert len(rig.sent(FindCoordinatorRequest)) == 2
    request = rig.sent(OffsetCommitRequest)[-1][1]
    assert (request.generation_id_or_member_epoch, request.member_id) == (-1, "")
    stored = fake.committed["g"][TopicPartition("t", 0)]
    assert (stored.offset, stored.metadata, stored.leader_epoch) == (7, "m", 2)


def test_an_admin_commit_to_a_group_with_members_is_refused_saying_why() -> None:
    fake = GroupsFakeCluster(1)
    fake.add_group("g", members={"m": []})
    result = Rig(fake).run(OffsetCommitApi("g", {TopicPartition("t", 0): OffsetAndMetadata(1)}))
    with pytest.raises(UnknownMemberIdError, match=r"has active members.*stop its consumers"):
        result.values()


# -- the AdminClient over a socket --------------------------------------------------------------


@pytest.fixture
def served() -> Iterator[tuple[GroupsFakeCluster, AdminClient]]:
    """A one-broker GroupsFakeCluster over loopback, and an AdminClient on it."""
    fake = GroupsFakeCluster(1)
    broker = SocketFakeBroker(fake)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers, "retry.backoff.ms": 10})
    try:
        yield fake, admin
    finally:
        admin.close()
        broker.close()


def test_the_client_lists_describes_and_deletes_groups(served: tuple[GroupsFakeCluster, AdminClient]) -> None:
    fake, admin = served
    fake.add_group("busy", members={"m": tps("t", 0)})
    fake.add_group("idle", state="Empty")
    assert admin.list_consumer_groups(timeout=5) == [
        ConsumerGroupListing("busy", "Stable", "consumer", "classic"),
        ConsumerGroupListing("idle", "Empty", "consumer", "classic"),
    ]
    described = admin.describe_consumer_groups(iter(["idle", "busy"]), timeout=5)
    assert list(described) == ["idle", "busy"]
    assert described["busy"].members[0].assignment == frozenset(tps("t", 0))
    assert described["busy"].coordinator.node_id == 0
    deleted = admin.delete_consumer_groups(["idle", "busy", "nope"], timeout=5)
    assert deleted["idle"] is None
    assert isinstance(deleted["busy"], NonEmptyGroupError)
    assert isinstance(deleted["nope"], GroupIdNotFoundError)
    assert admin.describe_consumer_groups([], timeout=5) == {} and admin.delete_consumer_groups([]) == {}


def test_the_client_alters_and_lists_offsets(served: tuple[GroupsFakeCluster, AdminClient]) -> None:
    fake, admin = served
    admin.alter_consumer_group_offsets(
        "g", {TopicPartition("t", 0): 5, TopicPartition("t", 1): OffsetAndMetadata(9, "x")}, timeout=5
    )
    assert admin.list_consumer_group_offsets("g", timeout=5) == {
        TopicPartition("t", 0): OffsetAndMetadata(5, "", None),
        TopicPartition("t", 1): OffsetAndMetadata(9, "x", None),
    }
    assert admin.list_consumer_group_offsets("g", [TopicPartition("t", 1)], timeout=5) == {
        TopicPartition("t", 1): OffsetAndMetadata(9, "x", None)
    }
    fake.add_group("g", members={"m": []})
    with pytest.raises(UnknownMemberIdError, match="has active members"):
        admin.alter_consumer_group_offsets("g", {TopicPartition("t", 0): 1}, timeout=5)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda a: a.describe_consumer_groups("group"), "not one string"),
        (lambda a: a.delete_consumer_groups([""]), "non-empty string"),
        (lambda a: a.list_consumer_group_offsets("g", [("t", "0")]), "expected TopicPartition"),
        (lambda a: a.alter_consumer_group_offsets("g", {TopicPartition("t", 0): -1}), "must be an int >= 0"),
        (lambda a: a.list_consumer_groups(timeout=-1), "must not be negative"),
    ],
)
def test_the_client_checks_its_arguments(
    served: tuple[GroupsFakeCluster, AdminClient], call: Callable[[AdminClient], object], message: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        call(served[1])
