"""``AdminClient.remove_members_from_consumer_group`` with real group members: static members
(``group.instance.id``) whose consumers stopped (a static member leaves no LeaveGroup behind) are
removed, and the group rebalances at once instead of waiting for their sessions. On noida-db
(fast joins; it never expires a member on its own) and on Tansu (LeaveGroup v0-5 too, slow
joins); librdkafka's mock offers LeaveGroup v0-4 but no DescribeGroups, so naming members works
there and removing every member cannot.

Broker defects, each shown first with kafka-python's ``remove_group_members`` (confluent-kafka
has no such call): Tansu does not remove a member named by its group.instance.id alone; neither
broker answers FENCED_INSTANCE_ID for an instance id named with another member's id.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import Callable, Iterator

import pytest

from kaflux import AdminClient
from kaflux.admin import MemberToRemove
from kaflux.aio import AsyncAdminClient
from kaflux.devbrokers.brokers import Broker, TansuBroker
from kaflux.devbrokers.mock_cluster import MockCluster
from kaflux.errors import FencedInstanceIdError, UnknownMemberIdError, UnsupportedVersionError

from support.group_helpers import (
    WAIT_S,
    ThreadMember,
    create_topic,
    describe,
    member_config,
    new_group,
    produce,
    stop_all,
    wait_converged,
    wait_until,
)

kafka_admin = pytest.importorskip("kafka.admin")
kafka_errors = pytest.importorskip("kafka.errors")

pytestmark = pytest.mark.integration

TANSU_INSTANCE_ID_DEFECT = (
    "LeaveGroup naming a static member by group.instance.id alone does not remove it: UNKNOWN_MEMBER_ID, "
    "or a null members array no client can read"
)
FENCED_DEFECT = (
    "LeaveGroup naming a group.instance.id with another member id answers UNKNOWN_MEMBER_ID, not "
    "FENCED_INSTANCE_ID"
)
MOCK_LEAVE_DEFECT = (
    "LeaveGroup v3+ (members named) is read and answered in the v0-2 layout: UNKNOWN_MEMBER_ID and no "
    "members array"
)
PARTITIONS = 4
#: far longer than the test: only the removal can take a stopped static member's partitions away
LONG_SESSION_MS = 60_000


def static(bootstrap: str, group: str, topic: str, instance: str, session_ms: int) -> ThreadMember:
    config = member_config(
        bootstrap,
        group,
        "range",
        session_timeout_ms=session_ms,
        heartbeat_interval_ms=500,
        group_instance_id=instance,
    )
    return ThreadMember(instance, config, [topic])


def instance_ids(admin: AdminClient, group: str) -> list[str]:
    return sorted(m.group_instance_id or "" for m in admin.describe_consumer_groups([group])[group].members)


def member_ids(admin: AdminClient, group: str) -> list[str]:
    """The member ids (Tansu's DescribeGroups reports no instance ids)."""
    return sorted(m.member_id for m in admin.describe_consumer_groups([group])[group].members)


def peer_remove(bootstrap: str, group: str, instance_id: str | None, member_id: str | None = None) -> object:
    """kafka-python's answer for one member (its error class; kafka.errors.NoError when removed),
    or the exception it raised."""
    peer = kafka_admin.KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    try:
        member = kafka_admin.MemberToRemove(member_id=member_id, group_instance_id=instance_id)
        [answer] = peer.remove_group_members(group, [member]).values()
        return answer
    except Exception as exc:  # the answer itself, for the assertion to show
        return exc
    finally:
        peer.close()


def raw_leave_group_members_count(bootstrap: str, group: str, member_id: str) -> int | None:
    """Send LeaveGroup v3 naming ``member_id`` to every broker of ``bootstrap`` by hand and
    return the length of the ``members`` array the coordinator answered (-1: null; None: the
    answer ends before it)."""
    group_b, member_b, client = group.encode(), member_id.encode(), b"raw-probe"
    body = (
        struct.pack(">hhih", 13, 3, 7, len(client))
        + client
        + struct.pack(">h", len(group_b))
        + group_b
        + struct.pack(">ih", 1, len(member_b))
        + member_b
        + struct.pack(">h", -1)  # group_instance_id: null
    )
    for address in bootstrap.split(","):
        host, port = address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            sock.sendall(struct.pack(">i", len(body)) + body)
            data = b""
            while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
                chunk = sock.recv(65536)
                assert chunk, "the broker closed the connection"
                data += chunk
        (error_code,) = struct.unpack(">h", data[12:14])
        if error_code != 16:  # NOT_COORDINATOR: another broker coordinates the group
            return int(struct.unpack(">i", data[14:18])[0]) if len(data) >= 18 else None
    raise AssertionError(f"no broker of {bootstrap} coordinates group {group!r}")


def stopped_static_group(bootstrap: str, topic: str, names: tuple[str, ...], session_ms: int) -> str:
    """A group whose static members ``names`` joined, converged and stopped (their places kept)."""
    create_topic(bootstrap, topic, PARTITIONS)
    group = new_group()
    members = [static(bootstrap, group, topic, name, session_ms).start() for name in names]
    try:
        wait_converged(members, PARTITIONS, timeout=WAIT_S + session_ms / 1000)
    finally:
        stop_all(members)
    for m in members:
        m.check()
    return group


@pytest.fixture
def group_admin(broker: Broker) -> Iterator[AdminClient]:
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        yield admin


@pytest.mark.parametrize("broker", ["kafka", "noida"], indirect=True)
def test_removing_a_stopped_static_member_rebalances_the_group_at_once(
    broker: Broker, group_admin: AdminClient, topic_name: str
) -> None:
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic_name, PARTITIONS)
    group = new_group()
    a = static(bootstrap, group, topic_name, "A", LONG_SESSION_MS).start()
    b = static(bootstrap, group, topic_name, "B", LONG_SESSION_MS).start()
    members = [a, b]
    try:
        wait_converged(members, PARTITIONS)
        b.stop()  # no LeaveGroup: the group keeps B's place and its partitions
        assert len(a.owned) < PARTITIONS and instance_ids(group_admin, group) == ["A", "B"]

        removed = group_admin.remove_members_from_consumer_group(
            group, ["B"], reason="host lost", timeout=WAIT_S
        )
        removed_at = time.monotonic()
        assert removed == [MemberToRemove("B")]
        wait_until(lambda: a.owned == frozenset(range(PARTITIONS)), WAIT_S, lambda: describe([a]))
        assert time.monotonic() - removed_at < LONG_SESSION_MS / 1000 / 2, "rebalanced by the removal"
        assert instance_ids(group_admin, group) == ["A"]

        with pytest.raises(UnknownMemberIdError, match=r"has no member with group\.instance\.id 'B'") as gone:
            group_admin.remove_members_from_consumer_group(group, ["B"], timeout=WAIT_S)
        assert "describe_consumer_groups() lists the members" in str(gone.value)
    finally:
        stop_all(members)
    for m in members:
        m.check()


def session_ms(broker: Broker) -> int:
    """Long on noida; Tansu holds each join for half the session, so shorter there."""
    return 12_000 if isinstance(broker, TansuBroker) else LONG_SESSION_MS


@pytest.mark.broker_defect("tansu", reason=TANSU_INSTANCE_ID_DEFECT, raises=AssertionError)
def test_a_static_member_is_removed_by_its_instance_id_alone(broker: Broker, topic_name: str) -> None:
    bootstrap = broker.bootstrap_servers
    group = stopped_static_group(bootstrap, topic_name, ("P", "K"), session_ms(broker))
    assert peer_remove(bootstrap, group, "P") is kafka_errors.NoError  # the broker's answer (wrong on Tansu)
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        assert len(member_ids(admin, group)) == 1
        assert admin.remove_members_from_consumer_group(group, ["K"], timeout=WAIT_S) == [MemberToRemove("K")]
        assert member_ids(admin, group) == []


@pytest.mark.broker_defect("tansu", reason=FENCED_DEFECT, raises=AssertionError)
@pytest.mark.broker_defect("noida", reason=FENCED_DEFECT, raises=AssertionError)
def test_an_instance_id_with_another_members_id_is_fenced_and_not_removed(
    broker: Broker, topic_name: str
) -> None:
    bootstrap = broker.bootstrap_servers
    group = stopped_static_group(bootstrap, topic_name, ("A",), session_ms(broker))
    answer = peer_remove(bootstrap, group, "A", member_id="not-a-member-of-this-group")
    assert answer is kafka_errors.FencedInstanceIdError  # the broker's answer (wrong on both)
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        wrong = MemberToRemove("A", member_id="not-a-member-of-this-group")
        with pytest.raises(FencedInstanceIdError, match="belongs to another member id"):
            admin.remove_members_from_consumer_group(group, [wrong], timeout=WAIT_S)
        assert len(member_ids(admin, group)) == 1


def test_removing_every_member_describes_the_group_first(broker: Broker, topic_name: str) -> None:
    bootstrap = broker.bootstrap_servers
    group = stopped_static_group(bootstrap, topic_name, ("A", "B"), session_ms(broker))
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        before = member_ids(admin, group)
        assert len(before) == 2, "the stopped static members keep their places"
        removed = admin.remove_members_from_consumer_group(group, reason="decommissioned", timeout=WAIT_S)
        assert sorted(m.member_id for m in removed) == before
        assert member_ids(admin, group) == []
        assert admin.describe_consumer_groups([group])[group].state == "Empty"
        assert admin.remove_members_from_consumer_group(group, timeout=WAIT_S) == [], "nothing left"


def test_removing_every_member_on_the_mock_needs_describe_groups(mock_cluster: MockCluster) -> None:
    with AdminClient({"bootstrap.servers": mock_cluster.bootstrap_servers}) as admin:
        with pytest.raises(UnsupportedVersionError, match="DescribeGroups"):
            admin.remove_members_from_consumer_group(new_group(), timeout=WAIT_S)


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=f"mock cluster defect: {MOCK_LEAVE_DEFECT}")
def test_a_running_member_is_removed_on_the_mock(mock_cluster: MockCluster, topic_name: str) -> None:
    """The member is confluent-kafka's: the mock drops kaflux's JoinGroup v6 (docs/brokers.md)."""
    ck = pytest.importorskip("confluent_kafka")
    bootstrap = mock_cluster.bootstrap_servers
    produce(bootstrap, topic_name, {0: [b"x"]})  # the mock creates the topic (4 partitions)
    group = new_group()
    member = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "session.timeout.ms": 6000})
    try:
        member.subscribe([topic_name])

        def poll_until(done: Callable[[], bool], what: str) -> None:
            deadline = time.monotonic() + WAIT_S
            while not done():
                assert time.monotonic() < deadline, what
                member.poll(0.2)

        poll_until(lambda: bool(member.assignment()), "the peer member got no assignment")
        first_id = member.memberid()
        # No peer client here can send LeaveGroup v3+ to the mock (kafka-python cannot bootstrap
        # it, librdkafka has no such call): the proof reads the coordinator's answer off the wire.
        assert raw_leave_group_members_count(bootstrap, group, first_id) == 1  # None on the mock
        with AdminClient({"bootstrap.servers": bootstrap}) as admin:
            gone = MemberToRemove(member_id=first_id)
            assert admin.remove_members_from_consumer_group(group, [gone], timeout=5.0) == [gone]
        # the member was removed while running: it learns so and joins again with a new id
        poll_until(
            lambda: member.memberid() not in (first_id, "") and bool(member.assignment()),
            "the removed member did not join again",
        )
    finally:
        member.close()


@pytest.mark.parametrize("broker", ["kafka", "noida"], indirect=True)
def test_the_asyncio_client_removes_members(broker: Broker, topic_name: str) -> None:
    bootstrap = broker.bootstrap_servers
    group = stopped_static_group(bootstrap, topic_name, ("A",), LONG_SESSION_MS)

    async def main() -> list[MemberToRemove]:
        async with AsyncAdminClient({"bootstrap.servers": bootstrap}) as admin:
            result: list[MemberToRemove] = await admin.remove_members_from_consumer_group(
                group, ["A"], timeout=WAIT_S
            )
            return result

    assert asyncio.run(main()) == [MemberToRemove("A")]
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        assert member_ids(admin, group) == []
