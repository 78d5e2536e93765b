"""``close()`` with a group membership operation (KIP-1092) on Apache Kafka 4.4, with both group
protocols: the coordinator's own description of the group (``describe_consumer_groups``) shows a
dynamic member closed with REMAIN_IN_GROUP still listed, and a static member closed with
LEAVE_GROUP gone at once, long before its session could have expired. Each test also closes a
member with DEFAULT, which must do the opposite, so that neither observation can come from the
description lagging or the session expiring.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from kaflux import AdminClient, CloseOptions, Consumer, GroupMembershipOperation
from kaflux.aio import AsyncConsumer
from kaflux.devbrokers.brokers import Broker

from support.group_helpers import WAIT_S, create_topic, new_group, wait_until

pytestmark = pytest.mark.integration

PARTITIONS = 4
#: the classic session: long enough that "gone at once" cannot be its expiry (the consumer
#: protocol's is the broker's group.consumer.session.timeout.ms, 45 s by default)
CLASSIC_SESSION_MS = 60_000
#: how soon after close() a member that left must be gone from the description: well within
#: either protocol's session (so not its expiry), yet room for a loaded CI machine
GONE_WITHIN_S = 20.0


def _config(bootstrap: str, group: str, protocol: str, instance_id: str | None = None) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": protocol,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    if protocol == "classic":
        config.update({"session.timeout.ms": CLASSIC_SESSION_MS, "heartbeat.interval.ms": 1000})
    if instance_id is not None:
        config["group.instance.id"] = instance_id
    return config


def _members(admin: AdminClient, group: str) -> list[tuple[str, str | None]]:
    """(member id, group.instance.id) of each member the coordinator lists."""
    description = admin.describe_consumer_groups([group], timeout=WAIT_S)[group]
    return [(m.member_id, m.group_instance_id) for m in description.members]


def _joined(consumers: list[Consumer], admin: AdminClient, group: str) -> None:
    """Poll every consumer until each has partitions and the coordinator lists them all."""

    def ready() -> bool:
        for consumer in consumers:
            consumer.poll(0.1)
        listed = {member for member, _ in _members(admin, group)}
        return all(c.assignment() and c.group_metadata().member_id in listed for c in consumers)

    wait_until(ready, WAIT_S + CLASSIC_SESSION_MS / 1000, lambda: f"not all joined: {_members(admin, group)}")


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_dynamic_member_closed_with_remain_in_group_is_still_listed(
    kafka: Broker, topic_name: str, protocol: str
) -> None:
    create_topic(kafka.bootstrap_servers, topic_name, PARTITIONS)
    group = new_group()
    with AdminClient({"bootstrap.servers": kafka.bootstrap_servers}) as admin:
        remaining = Consumer(_config(kafka.bootstrap_servers, group, protocol))
        leaving = Consumer(_config(kafka.bootstrap_servers, group, protocol))
        consumers = [remaining, leaving]
        try:
            for consumer in consumers:
                consumer.subscribe([topic_name])
            _joined(consumers, admin, group)
            remaining_id = remaining.group_metadata().member_id
            leaving_id = leaving.group_metadata().member_id

            remaining.close(
                CloseOptions(timeout=WAIT_S, group_membership=GroupMembershipOperation.REMAIN_IN_GROUP)
            )
            closed_at = time.monotonic()
            leaving.close(timeout=WAIT_S)  # DEFAULT: a dynamic member leaves
            wait_until(
                lambda: leaving_id not in {m for m, _ in _members(admin, group)},
                GONE_WITHIN_S,
                lambda: f"the member closed with DEFAULT is still listed: {_members(admin, group)}",
            )
            listed = {m for m, _ in _members(admin, group)}
            assert time.monotonic() - closed_at < CLASSIC_SESSION_MS / 1000 / 2  # its session runs on
            assert remaining_id in listed, f"{remaining_id} was removed: {listed}"
        finally:
            for consumer in consumers:
                consumer.close(0)


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_static_member_closed_with_leave_group_is_gone_at_once(
    kafka: Broker, topic_name: str, protocol: str
) -> None:
    create_topic(kafka.bootstrap_servers, topic_name, PARTITIONS)
    group = new_group()
    with AdminClient({"bootstrap.servers": kafka.bootstrap_servers}) as admin:
        leaving = Consumer(_config(kafka.bootstrap_servers, group, protocol, instance_id="leaves"))
        staying = Consumer(_config(kafka.bootstrap_servers, group, protocol, instance_id="stays"))
        consumers = [leaving, staying]
        try:
            for consumer in consumers:
                consumer.subscribe([topic_name])
            _joined(consumers, admin, group)
            assert sorted(i or "" for _, i in _members(admin, group)) == ["leaves", "stays"]

            staying.close(timeout=WAIT_S)  # DEFAULT: a static member keeps its place
            started = time.monotonic()
            leaving.close(group_membership=GroupMembershipOperation.LEAVE_GROUP, timeout=WAIT_S)
            wait_until(
                lambda: "leaves" not in {i for _, i in _members(admin, group)},
                GONE_WITHIN_S,
                lambda: (
                    f"the static member closed with LEAVE_GROUP is still listed: {_members(admin, group)}"
                ),
            )
            assert time.monotonic() - started < GONE_WITHIN_S < CLASSIC_SESSION_MS / 1000
            assert "stays" in {i for _, i in _members(admin, group)}  # kept until its session expires
        finally:
            for consumer in consumers:
                consumer.close(0)


def test_the_asyncio_consumer_takes_the_same_close_options(kafka: Broker, topic_name: str) -> None:
    create_topic(kafka.bootstrap_servers, topic_name, PARTITIONS)
    group = new_group()

    async def main(admin: AdminClient) -> None:
        consumer = AsyncConsumer(_config(kafka.bootstrap_servers, group, "consumer", instance_id="async"))
        try:
            consumer.subscribe([topic_name])
            deadline = time.monotonic() + WAIT_S
            while not consumer.assignment() and time.monotonic() < deadline:
                await consumer.poll(0.2)
            assert consumer.assignment(), "the asyncio consumer got no partitions"
            assert "async" in {i for _, i in _members(admin, group)}
            await consumer.close(
                CloseOptions(timeout=WAIT_S, group_membership=GroupMembershipOperation.LEAVE_GROUP)
            )
        finally:
            await consumer.close(0)

    with AdminClient({"bootstrap.servers": kafka.bootstrap_servers}) as admin:
        asyncio.run(main(admin))
        wait_until(
            lambda: "async" not in {i for _, i in _members(admin, group)},
            GONE_WITHIN_S,
            lambda: (
                f"the asyncio static member closed with LEAVE_GROUP is still listed: {_members(admin, group)}"
            ),
        )
