"""``kaflux topics`` and ``kaflux groups`` run as the installed executable against Apache Kafka 4.4."""

from __future__ import annotations

import time

import pytest

from kaflux import Consumer, TopicPartition
from kaflux.devbrokers import Broker

from support.cli_helpers import WAIT_S, create_topic, json_out, ok, produce, run_kaflux

pytestmark = pytest.mark.integration


def test_topics_create_list_describe_delete(kafka: Broker, topic_name: str) -> None:
    b = ("-b", kafka.bootstrap_servers)
    created = run_kaflux(
        "topics", "create", topic_name, "--partitions", "2", "--config", "retention.ms=600000", *b
    )
    ok(created)
    assert f"created topic {topic_name}" in created.stderr.decode()
    produce(kafka.bootstrap_servers, topic_name, {1: [b"r%d" % i for i in range(5)]})

    listed = json_out(run_kaflux("topics", "list", *b))  # stdout is no terminal: JSON by default
    assert {"name": topic_name, "partitions": 2, "replication_factor": 1} in listed

    [described] = json_out(run_kaflux("topics", "describe", topic_name, "--format", "json", *b))
    assert described["name"] == topic_name and described["is_internal"] is False
    partitions = described["partitions"]
    assert [p["partition"] for p in partitions] == [0, 1]
    for p in partitions:
        assert isinstance(p["leader"], int) and p["replicas"] == [p["leader"]] and p["isr"] == [p["leader"]]
    assert [(p["low_watermark"], p["high_watermark"]) for p in partitions] == [(0, 0), (0, 5)]

    again = run_kaflux("topics", "create", topic_name, *b)
    assert again.returncode == 1 and again.stderr.decode().count("\n") == 1
    assert "TopicAlreadyExistsError" in again.stderr.decode()
    ok(run_kaflux("topics", "create", topic_name, "--if-not-exists", *b))

    ok(run_kaflux("topics", "delete", topic_name, *b))
    assert topic_name not in {t["name"] for t in json_out(run_kaflux("topics", "list", *b))}
    missing = run_kaflux("topics", "describe", topic_name, "--format", "json", *b)
    assert missing.returncode != 0 and missing.stderr.decode().count("\n") == 1


def _committed_group(bootstrap: str, topic: str, group: str, offsets: dict[int, int]) -> None:
    """Commit ``offsets`` (partition -> offset) for ``group``, then leave (the group is Empty)."""
    with Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    ) as consumer:
        consumer.commit_sync({TopicPartition(topic, p): o for p, o in offsets.items()}, timeout=WAIT_S)


def _committed(bootstrap: str, topic: str, group: str, partitions: int) -> dict[int, int | None]:
    with Consumer({"bootstrap.servers": bootstrap, "group.id": group}) as consumer:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=WAIT_S)
    return {tp.partition: None if meta is None else meta.offset for tp, meta in found.items()}


def test_group_lag_is_end_offset_minus_committed(kafka: Broker, topic_name: str) -> None:
    b = kafka.bootstrap_servers
    create_topic(b, topic_name, 3)
    produce(b, topic_name, {0: [b"x"] * 10, 1: [b"y"] * 6, 2: [b"z"] * 2})
    group = f"{topic_name}-g"
    _committed_group(b, topic_name, group, {0: 4, 1: 6})  # partition 2: nothing committed

    with Consumer({"bootstrap.servers": b, "group.id": group}) as consumer:
        tps = [TopicPartition(topic_name, p) for p in range(3)]
        committed = {tp: meta.offset for tp, meta in consumer.committed(tps, timeout=WAIT_S).items() if meta}
        ends = consumer.end_offsets(tps, timeout=WAIT_S)
    expected = {tp.partition: ends[tp] - offset for tp, offset in committed.items()}

    lag = json_out(run_kaflux("groups", "lag", group, "--format", "json", "-b", b))
    assert lag["group"] == group
    assert {r["partition"]: r["lag"] for r in lag["partitions"]} == expected == {0: 6, 1: 0}
    assert {r["partition"]: (r["committed"], r["end_offset"]) for r in lag["partitions"]} == {
        0: (4, 10),
        1: (6, 6),
    }
    assert lag["total_lag"] == sum(expected.values())


def test_reset_offsets_is_a_dry_run_unless_executed(kafka: Broker, topic_name: str) -> None:
    b = kafka.bootstrap_servers
    create_topic(b, topic_name, 2)
    produce(b, topic_name, {0: [b"x"] * 10, 1: [b"y"] * 6})
    group = f"{topic_name}-g"
    _committed_group(b, topic_name, group, {0: 4, 1: 6})
    before = _committed(b, topic_name, group, 2)
    assert before == {0: 4, 1: 6}

    def plan(*args: str) -> dict[int, tuple[int | None, int]]:
        result = json_out(run_kaflux("groups", "reset-offsets", group, *args, "--format", "json", "-b", b))
        return {r["partition"]: (r["current_offset"], r["new_offset"]) for r in result["partitions"]}

    assert plan("--topic", topic_name, "--to-earliest") == {0: (4, 0), 1: (6, 0)}
    assert plan("--all-topics", "--shift-by", "-5") == {0: (4, 0), 1: (6, 1)}
    assert plan("--all-topics", "--to-latest", "--dry-run") == {0: (4, 10), 1: (6, 6)}
    assert _committed(b, topic_name, group, 2) == before  # nothing changed

    executed = json_out(
        run_kaflux(
            "groups", "reset-offsets", group, "--topic", f"{topic_name}:0", "--shift-by", "3",
            "--execute", "--format", "json", "-b", b,
        )
    )  # fmt: skip
    assert executed["executed"] is True
    assert _committed(b, topic_name, group, 2) == {0: 7, 1: 6}

    usage = run_kaflux("groups", "reset-offsets", group, "--all-topics", "-b", b)
    assert usage.returncode == 2 and usage.stderr.decode().count("\n") == 1


def test_groups_list_describe_and_delete(kafka: Broker, topic_name: str) -> None:
    b = kafka.bootstrap_servers
    create_topic(b, topic_name, 2)
    group = f"{topic_name}-g"
    _committed_group(b, topic_name, group, {0: 0, 1: 0})

    member = Consumer({"bootstrap.servers": b, "group.id": group, "client.id": "cli-test-member"})
    try:
        member.subscribe([topic_name])
        deadline = time.monotonic() + WAIT_S
        while not member.assignment():  # the join completes inside poll()
            assert time.monotonic() < deadline, "the member got no assignment"
            member.poll(0.1)
        listed = json_out(run_kaflux("groups", "list", "--format", "json", "-b", b))
        assert group in {g["group_id"] for g in listed}
        described = json_out(run_kaflux("groups", "describe", group, "--format", "json", "-b", b))
        assert described["group_id"] == group and described["state"] == "Stable"
        [m] = described["members"]
        assert m["client_id"] == "cli-test-member"
        assert m["assignment"] == [{"topic": topic_name, "partition": p} for p in (0, 1)]

        active = run_kaflux(
            "groups", "reset-offsets", group, "--all-topics", "--to-latest", "--execute", "-b", b
        )
        assert active.returncode == 1 and "active" in active.stderr.decode()
    finally:
        member.close()

    ok(run_kaflux("groups", "delete", group, "-b", b))
    assert group not in {
        g["group_id"] for g in json_out(run_kaflux("groups", "list", "--format", "json", "-b", b))
    }


def test_topics_offsets_looks_up_each_partitions_offset(kafka: Broker, topic_name: str) -> None:
    b = ("-b", kafka.bootstrap_servers)
    create_topic(kafka.bootstrap_servers, topic_name, 2)
    produce(kafka.bootstrap_servers, topic_name, {1: [b"r%d" % i for i in range(5)]})

    latest = json_out(run_kaflux("topics", "offsets", topic_name, "--format", "json", *b))
    assert [(r["partition"], r["offset"]) for r in latest] == [(0, 0), (1, 5)]
    earliest = json_out(
        run_kaflux("topics", "offsets", topic_name, "--spec", "earliest", "--partition", "1", *b)
    )
    assert [(r["partition"], r["offset"], r["timestamp"]) for r in earliest] == [(1, 0, -1)]
    newest = json_out(
        run_kaflux("topics", "offsets", topic_name, "--spec", "max-timestamp", "--partition", "1", *b)
    )
    [newest_row] = newest  # the records share a time or nearly: any of them may be the newest
    assert 0 <= newest_row["offset"] <= 4 and newest_row["timestamp"] > 0
    future = json_out(run_kaflux("topics", "offsets", topic_name, "--spec", str(2**62), *b))
    assert [r["offset"] for r in future] == [-1, -1]

    bad = run_kaflux("topics", "offsets", topic_name, "--spec", "newest", *b)
    assert bad.returncode == 2 and "max-timestamp" in bad.stderr.decode()


def test_groups_remove_members_removes_a_stopped_static_member(kafka: Broker, topic_name: str) -> None:
    b = kafka.bootstrap_servers
    create_topic(b, topic_name, 2)
    group = f"{topic_name}-g"
    member = Consumer({"bootstrap.servers": b, "group.id": group, "group.instance.id": "host-7"})
    try:
        member.subscribe([topic_name])
        deadline = time.monotonic() + WAIT_S
        while not member.assignment():
            assert time.monotonic() < deadline, "the member got no assignment"
            member.poll(0.1)
    finally:
        member.close()  # a static member leaves no LeaveGroup: its place is kept
    described = json_out(run_kaflux("groups", "describe", group, "--format", "json", "-b", b))
    assert [m["group_instance_id"] for m in described["members"]] == ["host-7"]

    usage = run_kaflux("groups", "remove-members", group, "-b", b)
    assert usage.returncode == 2 and "--all" in usage.stderr.decode()
    removed = run_kaflux("groups", "remove-members", group, "host-7", "--reason", "host lost", "-b", b)
    ok(removed)
    assert f"removed the member with group.instance.id 'host-7' from group {group}" in removed.stderr.decode()
    assert json_out(run_kaflux("groups", "describe", group, "--format", "json", "-b", b))["members"] == []
    again = run_kaflux("groups", "remove-members", group, "host-7", "-b", b)
    assert again.returncode == 1 and "UnknownMemberIdError" in again.stderr.decode()
    ok(run_kaflux("groups", "remove-members", group, "--all", "-b", b))
