"""``kaflux produce`` and ``kaflux consume`` run as the installed executable against Apache Kafka 4.4;
client-setting errors; the progress bar on a terminal."""

from __future__ import annotations

import base64
import json
import os
import pty
import signal
import subprocess
import threading
from collections import Counter
from pathlib import Path

import pytest

from kaflux import Consumer, TopicPartition
from kaflux.devbrokers import Broker

from support.cli_helpers import (
    WAIT_S,
    LineReader,
    cli_env,
    create_topic,
    json_lines,
    kaflux_command,
    ok,
    produce,
    run_kaflux,
)

pytestmark = pytest.mark.integration


def test_produce_lines_then_consume_them_as_json(kafka: Broker, topic_name: str) -> None:
    b = kafka.bootstrap_servers
    ok(run_kaflux("topics", "create", topic_name, "--partitions", "3", "-b", b))
    lines = [f"line {i}".encode() for i in range(40)] + [b"caf\xc3\xa9", b"\xff\xfe binary", b""]
    result = run_kaflux(
        "produce", topic_name, "-b", b, "--compression", "lz4", input=b"\n".join(lines) + b"\n"
    )
    ok(result)
    assert f"produced {len(lines)} records to {topic_name}" in result.stderr.decode()

    records = json_lines(
        run_kaflux(
            "consume", topic_name, "--from-beginning", "-n", str(len(lines)), "--format", "json",
            "--timeout", str(WAIT_S), env={"KAFLUX_BOOTSTRAP_SERVERS": b},
        )
    )  # fmt: skip
    assert len(records) == len(lines)
    assert {r["topic"] for r in records} == {topic_name}
    assert set(records[0]) >= {"topic", "partition", "offset", "timestamp", "key", "value", "headers"}
    values = []
    for r in records:
        assert r["key"] is None and r["key_encoding"] is None and r["headers"] == []
        if r["value_encoding"] == "base64":
            values.append(base64.b64decode(r["value"]))
        else:
            assert r["value_encoding"] == "utf-8"
            values.append(r["value"].encode())
    assert Counter(values) == Counter(lines)
    binary = next(r for r in records if r["value_encoding"] == "base64")
    assert base64.b64decode(binary["value"]) == b"\xff\xfe binary"
    by_partition: dict[int, list[int]] = {}
    for r in records:
        by_partition.setdefault(r["partition"], []).append(r["offset"])
    assert all(offsets == list(range(len(offsets))) for offsets in by_partition.values())


def test_json_records_round_trip_through_produce_and_consume(kafka: Broker, topic_name: str) -> None:
    b = kafka.bootstrap_servers
    create_topic(b, topic_name, 2)
    copy = f"{topic_name}-copy"
    create_topic(b, copy, 2)
    envelopes = [
        {"key": "k1", "value": {"user": "ann", "n": 1}, "headers": [{"key": "h", "value": "v"}]},
        {"value": {"user": "bob", "n": 2}, "headers": {"trace": None}},
        {"key": "/w==", "key_encoding": "base64", "value": "plain text", "partition": 1},
        {"key": "k4", "value": None},
    ]
    text = "\n".join(json.dumps(e) for e in envelopes) + "\n"
    ok(run_kaflux("produce", topic_name, "--json", "--key-field", "user", "-b", b, input=text.encode()))

    consume = ("--from-beginning", "-n", "4", "--timeout", str(WAIT_S), "-b", b)
    first = json_lines(run_kaflux("consume", topic_name, *consume))
    by_key = {(r["key"], r["key_encoding"]): r for r in first}
    assert by_key["k1", "utf-8"]["value"] == '{"user":"ann","n":1}'
    assert by_key["k1", "utf-8"]["headers"] == [{"key": "h", "value": "v", "value_encoding": "utf-8"}]
    assert by_key["bob", "utf-8"]["headers"] == [{"key": "trace", "value": None, "value_encoding": None}]
    assert by_key["/w==", "base64"]["partition"] == 1 and by_key["/w==", "base64"]["value"] == "plain text"
    assert by_key["k4", "utf-8"]["value"] is None

    # consume's output is produce --json's input: the copy holds the same records
    ok(
        run_kaflux(
            "produce", copy, "--json", "-b", b, input=ok(run_kaflux("consume", topic_name, *consume)).encode()
        )
    )
    second = json_lines(run_kaflux("consume", copy, *consume))

    def content(records: list[dict[str, object]]) -> list[tuple[object, ...]]:
        fields = ("partition", "key", "key_encoding", "value", "value_encoding", "headers")
        return sorted(tuple(json.dumps(r[f]) for f in fields) for r in records)

    assert content(second) == content(first)


def test_consume_in_a_group_until_ctrl_c_commits_what_it_printed(kafka: Broker, topic_name: str) -> None:
    b = kafka.bootstrap_servers
    create_topic(b, topic_name, 2)
    produce(b, topic_name, {0: [b"a"] * 5, 1: [b"b"] * 3})
    group = f"{topic_name}-group"
    with subprocess.Popen(
        [*kaflux_command(), "consume", topic_name, "-g", group, "--from-beginning", "-b", b],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(),
    ) as child:
        try:
            assert child.stdout is not None and child.stderr is not None
            stdout, errors = LineReader(child.stdout), LineReader(child.stderr)
            printed = [json.loads(stdout.next_line()) for _ in range(8)]
            child.send_signal(signal.SIGINT)
            child.wait(timeout=WAIT_S)
            stderr = errors.rest()
            assert stdout.rest() == b""
        finally:
            if child.poll() is None:
                child.kill()
    assert child.returncode == 130, stderr.decode()  # an interrupt exits 130, as in every command
    assert b"Traceback" not in stderr
    assert sorted((r["partition"], r["offset"]) for r in printed) == [(0, i) for i in range(5)] + [
        (1, i) for i in range(3)
    ]
    with Consumer({"bootstrap.servers": b, "group.id": group}) as consumer:
        committed = consumer.committed([TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)])
    assert {tp.partition: meta.offset if meta else None for tp, meta in committed.items()} == {0: 5, 1: 3}


def test_bad_client_settings_end_in_one_line_errors(tmp_path: Path) -> None:
    cases = [
        (("consume", "t", "-b", "127.0.0.1:9", "-X", "fetch.max.byte=1"), "fetch.max.byte"),
        (("produce", "t", "-b", "127.0.0.1:9", "-X", "no.such.setting=x"), "no.such.setting"),
        (("topics", "list", "-b", "127.0.0.1:9", "-X", "broken"), "KEY=VALUE"),
        (("topics", "list"), "bootstrap servers"),
    ]
    properties = tmp_path / "client.properties"
    properties.write_text("# client settings\nbootstrap.servers = 127.0.0.1:9\nsasl.mechanizm: PLAIN\n")
    cases.append((("groups", "list", "--config", str(properties)), "sasl.mechanizm"))
    for args, named in cases:
        result = run_kaflux(*args, input=b"")
        stderr = result.stderr.decode()
        assert result.returncode != 0, args
        assert stderr.count("\n") == 1 and stderr.startswith("kaflux: error: "), (args, stderr)
        assert named in stderr and "Traceback" not in stderr, (args, stderr)
        assert result.stdout == b""


def test_consume_with_count_draws_a_progress_bar_on_a_terminal_and_clears_it(
    kafka: Broker, topic_name: str
) -> None:
    b = kafka.bootstrap_servers
    create_topic(b, topic_name, 1)
    produce(b, topic_name, {0: [b"x%d" % i for i in range(300)]})
    master, slave = pty.openpty()
    drawn = bytearray()

    def read_terminal() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every writer closed the terminal
                return
            if not chunk:
                return
            drawn.extend(chunk)

    reader = threading.Thread(target=read_terminal, daemon=True)
    reader.start()
    try:
        child = subprocess.Popen(
            [*kaflux_command(), "consume", topic_name, "--from-beginning", "-n", "300", "-b", b],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=slave,
            env=cli_env({"TERM": "xterm-256color", "NO_COLOR": ""}),
        )
        os.close(slave)
        stdout, _ = child.communicate(timeout=WAIT_S)
        reader.join(WAIT_S)
    finally:
        os.close(master)
    assert child.returncode == 0, drawn.decode(errors="replace")
    assert len(stdout.splitlines()) == 300  # the records go to stdout, the bar does not
    text = bytes(drawn)
    assert b"consuming kx-" in text and b"300/300" in text
    assert b"\x1b[?25l" in text  # rich hides the cursor while the bar is live
    # transient: after its last frame the bar is erased (cursor shown, line cleared), nothing after
    last_frame = text.rindex(b"300/300")
    assert text.endswith(b"\x1b[2K") and b"\x1b[?25h" in text[last_frame:]
