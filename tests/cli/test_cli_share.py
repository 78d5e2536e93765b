"""``kaflux share consume`` on librdkafka's mock cluster (started with share-group timings by
``tests/share_mock.py``)."""

from __future__ import annotations

import json
import subprocess
import time
import uuid

import confluent_kafka
import pytest

from support.cli_helpers import WAIT_S, cli_env, json_lines, kaflux_command, run_kaflux
from support.share_mock import ShareMockCluster

pytestmark = pytest.mark.integration


def test_share_consume_releases_then_accepts_with_delivery_counts() -> None:
    topic, group = f"cli-share-{uuid.uuid4().hex[:8]}", f"cli-share-group-{uuid.uuid4().hex[:8]}"
    with ShareMockCluster() as cluster:
        b = cluster.bootstrap_servers
        producer = confluent_kafka.Producer({"bootstrap.servers": b})
        producer.produce(topic, b"create", partition=0)  # the mock creates the topic
        producer.flush(10)
        first = subprocess.Popen(
            [*kaflux_command(), "share", "consume", "-g", group, topic, "--ack", "release", "-n", "1",
             "--timeout", str(WAIT_S), "-b", b],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(),
        )  # fmt: skip
        try:
            # A share group starts at the latest offset: probe until the member reads one.
            probes: list[bytes] = []
            deadline = time.monotonic() + WAIT_S
            while first.poll() is None:
                assert time.monotonic() < deadline, "kaflux share consume read no record"
                probes.append(f"probe-{len(probes)}".encode())
                producer.produce(topic, probes[-1], partition=0)
                producer.flush(10)
                time.sleep(0.3)
            out, err = first.communicate(timeout=WAIT_S)
        finally:
            if first.poll() is None:
                first.kill()
                first.communicate()
        assert first.returncode == 0, err.decode()
        (released,) = [json.loads(line) for line in out.decode().splitlines()]
        assert released["delivery_count"] == 1 and released["value"].startswith("probe-")

        # Probes produced before the group existed are not the group's; the rest are.
        readable = [p.decode() for p in probes[probes.index(released["value"].encode()) :]]
        again = json_lines(
            run_kaflux("share", "consume", "-g", group, topic, "--ack", "accept", "-n", str(len(readable)),
                       "--timeout", str(WAIT_S), "-b", b)
        )  # fmt: skip
        counts = {r["value"]: r["delivery_count"] for r in again}
        assert set(counts) == set(readable)
        assert counts[released["value"]] == 2  # released by the first run: delivered again

        rest = run_kaflux("share", "consume", "-g", group, topic, "--timeout", "3", "-b", b)
        assert rest.returncode == 0 and rest.stdout == b""  # accepted: never again


def test_share_consume_refuses_consumer_group_settings_by_name() -> None:
    result = run_kaflux(
        "share", "consume", "-g", "g", "t", "-b", "127.0.0.1:9", "-X", "enable.auto.commit=false"
    )
    assert result.returncode == 1
    assert "enable.auto.commit" in result.stderr.decode() and "consumer groups" in result.stderr.decode()
