"""``kaflux share list / describe / offsets / alter-offsets / delete-offsets / delete`` and
``kaflux groups list --type`` against Apache Kafka 4.4. [test]"""

from __future__ import annotations

import time
import uuid

import pytest

from kaflux import Producer, ShareConsumer
from kaflux.admin import AdminClient, NewTopic
from kaflux.devbrokers.brokers import Broker

from support.cli_helpers import json_out, ok, run_kaflux
from support.kafka_helpers import set_group_configs

pytestmark = pytest.mark.integration

WAIT_S = 60.0


def test_share_group_commands(kafka: Broker) -> None:
    b = kafka.bootstrap_servers
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"cli-share-{suffix}", f"cli-share-group-{suffix}"
    with AdminClient({"bootstrap.servers": b}) as admin:
        admin.create_topics([NewTopic(topic, 1)], timeout=WAIT_S)
        # at "latest" Kafka fixes the start offset at the share partition's first fetch, which
        # may come after the records produced once the member saw its assignment
        set_group_configs(admin, group, {"share.auto.offset.reset": "earliest"})
    with ShareConsumer({"bootstrap.servers": b, "group.id": group, "client.id": "cli-sharer"}) as member:
        member.subscribe([topic])
        deadline = time.monotonic() + WAIT_S
        while not member.group_state().assignment:
            assert time.monotonic() < deadline, "the share member got no assignment"
            member.poll(0.2)
        with Producer({"bootstrap.servers": b}) as producer:
            for i in range(3):
                producer.send(topic, f"v{i}".encode())
        got = 0
        while got < 3:
            assert time.monotonic() < deadline + WAIT_S, "the records did not arrive"
            got += len(member.poll(0.5))
        member.commit_sync(WAIT_S)

        listed = json_out(run_kaflux("share", "list", "--format", "json", "-b", b))
        assert {"group_id": group, "state": "Stable"} in listed
        typed = json_out(run_kaflux("groups", "list", "--type", "share", "--format", "json", "-b", b))
        assert {g["group_id"]: g["group_type"] for g in typed}[group] == "share"
        described = json_out(run_kaflux("share", "describe", group, "--format", "json", "-b", b))
        [m] = described["members"]
        assert m["client_id"] == "cli-sharer" and m["assignment"] == [{"topic": topic, "partition": 0}]
        busy = run_kaflux("share", "alter-offsets", group, f"{topic}:0=0", "-b", b)
        assert busy.returncode == 1 and "close its share consumers" in busy.stderr.decode()

    ok(run_kaflux("share", "alter-offsets", group, f"{topic}:0=1", "-b", b))
    shown = json_out(run_kaflux("share", "offsets", group, "--format", "json", "-b", b))
    assert shown["partitions"] == [
        {"topic": topic, "partition": 0, "start_offset": 1, "leader_epoch": 0, "lag": 2}
    ]
    assert shown["total_lag"] == 2
    ok(run_kaflux("share", "delete-offsets", group, topic, "-b", b))
    assert json_out(run_kaflux("share", "offsets", group, "--format", "json", "-b", b))["partitions"] == []
    ok(run_kaflux("share", "delete", group, "-b", b))
    gone = run_kaflux("share", "delete", group, "-b", b)
    assert gone.returncode == 1 and group in gone.stderr.decode()
