"""``kaflux consume -g`` commits what reached stdout, nothing more (issue 32, point 1): a reader
that falls behind while SIGINT or SIGTERM lands, and a reader that goes away (``| head``). Each
test runs the real command against a real broker and compares the group's committed offsets with
the complete lines the reader got. [test]"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import time
import uuid

import pytest

from kaflux import Consumer, TopicPartition
from kaflux.devbrokers import Broker

from support.cli_helpers import WAIT_S, cli_env, create_topic, kaflux_command, produce

PARTITIONS = 2
PER_PARTITION = 1500  # ~500 kB of JSON lines a partition: a poll's worth overfills a pipe
VALUE = b"v" * 300
F_GETPIPE_SZ = 1032  # Linux


@pytest.fixture(scope="module")
def loaded_topic(noida: Broker) -> str:
    topic = f"commits-{uuid.uuid4().hex[:8]}"
    create_topic(noida.bootstrap_servers, topic, PARTITIONS)
    produce(noida.bootstrap_servers, topic, {p: [VALUE] * PER_PARTITION for p in range(PARTITIONS)})
    return topic


def start_consume(bootstrap: str, topic: str, group: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*kaflux_command(), "consume", topic, "-g", group, "--from-beginning", "-b", bootstrap],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(),
    )


def complete_lines(data: bytes) -> list[dict[str, int]]:
    """The records of the complete lines in ``data`` (a partial last line is not a record)."""
    return [json.loads(line) for line in data.split(b"\n")[:-1]]


def received_per_partition(records: list[dict[str, int]]) -> dict[int, int]:
    """How many records the reader got of each partition, checking they are 0, 1, 2... in order."""
    offsets: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    for record in records:
        offsets[record["partition"]].append(record["offset"])
    for partition, got in offsets.items():
        assert got == list(range(len(got))), f"partition {partition}: a gap or a repeat"
    return {p: len(got) for p, got in offsets.items()}


def committed(bootstrap: str, topic: str, group: str) -> dict[int, int]:
    """The group's committed offset of each partition (0 where it has none)."""
    with Consumer({"bootstrap.servers": bootstrap, "group.id": group}) as consumer:
        found = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=WAIT_S)
    return {tp.partition: 0 if offset is None else offset.offset for tp, offset in found.items()}


def read_slowly(child: subprocess.Popen[bytes], until_lines: int, deadline: float) -> bytes:
    """Read the child's stdout 4 kB at a time with a pause between reads (a reader that falls
    behind: the pipe stays full), until ``until_lines`` lines arrived or the stream ended."""
    assert child.stdout is not None
    fd = child.stdout.fileno()
    data = bytearray()
    while data.count(b"\n") < until_lines:
        assert time.monotonic() < deadline, f"only {len(complete_lines(bytes(data)))} lines arrived"
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
        time.sleep(0.005)
    return bytes(data)


def finish(child: subprocess.Popen[bytes]) -> str:
    try:
        child.wait(timeout=WAIT_S)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.stderr is not None
    stderr = child.stderr.read().decode(errors="replace")
    child.stderr.close()
    assert child.stdout is not None
    child.stdout.close()
    return stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_a_slow_reader_lags_commits_exactly_what_the_reader_got(
    noida: Broker, loaded_topic: str, sig: signal.Signals
) -> None:
    bootstrap = noida.bootstrap_servers
    group = f"g-{uuid.uuid4().hex[:8]}"
    child = start_consume(bootstrap, loaded_topic, group)
    deadline = time.monotonic() + WAIT_S
    try:
        data = read_slowly(child, until_lines=200, deadline=deadline)
        child.send_signal(sig)
        data += read_slowly(child, until_lines=PARTITIONS * PER_PARTITION + 1, deadline=deadline)
    finally:
        stderr = finish(child)
    assert child.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert data.endswith(b"\n"), "the last record was cut short"
    got = received_per_partition(complete_lines(data))
    assert sum(got.values()) < PARTITIONS * PER_PARTITION  # the signal stopped it early
    assert committed(bootstrap, loaded_topic, group) == got


def test_a_reader_that_goes_away_gets_no_commit_of_what_it_never_could_read(
    noida: Broker, loaded_topic: str
) -> None:
    bootstrap = noida.bootstrap_servers
    group = f"g-{uuid.uuid4().hex[:8]}"
    child = start_consume(bootstrap, loaded_topic, group)
    assert child.stdout is not None
    pipe_size = fcntl.fcntl(child.stdout.fileno(), F_GETPIPE_SZ)
    try:
        data = read_slowly(child, until_lines=100, deadline=time.monotonic() + WAIT_S)
        child.stdout.close()  # as `| head` does: later writes fail with EPIPE
    finally:
        stderr = finish(child)
    assert child.returncode == 0, stderr
    assert stderr == ""  # quiet
    records = complete_lines(data)
    got = received_per_partition(records)
    commits = committed(bootstrap, loaded_topic, group)
    lines = data.split(b"\n")
    shortest = min(len(line) + 1 for line in lines[:-1])
    for partition in range(PARTITIONS):
        assert commits[partition] >= got[partition]  # what was read was written
    # What was written and not read whole can only be what the pipe held when it was closed, and
    # the partial line the reader had read of the next record.
    unread = pipe_size + len(lines[-1])
    assert (sum(commits.values()) - sum(got.values())) * shortest <= unread


def test_a_reader_that_goes_away_while_nothing_arrives_ends_the_command(noida: Broker) -> None:
    """`kaflux consume -g G | head -3` on a quiet topic: the command learns the reader left
    without having to write, exits quietly and commits what reached the pipe."""
    bootstrap = noida.bootstrap_servers
    topic = f"quiet-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    produce(bootstrap, topic, {0: [b"r"] * 10})  # well within a pipe's buffer
    group = f"g-{uuid.uuid4().hex[:8]}"
    child = start_consume(bootstrap, topic, group)
    assert child.stdout is not None
    try:
        data = read_slowly(child, until_lines=3, deadline=time.monotonic() + WAIT_S)
        child.stdout.close()
    finally:
        stderr = finish(child)
    assert child.returncode == 0, stderr
    assert stderr == ""
    assert len(complete_lines(data)) >= 3
    with Consumer({"bootstrap.servers": bootstrap, "group.id": group}) as consumer:
        found = consumer.committed([TopicPartition(topic, 0)], timeout=WAIT_S)
    offset = found[TopicPartition(topic, 0)]
    assert offset is not None and offset.offset == 10  # all ten were written to the pipe
