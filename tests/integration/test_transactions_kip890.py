"""Transactions v2 (KIP-890) on Apache Kafka, and the v1 fallback.

Three clusters: Kafka 4.4 as formatted by default (``transaction.version=2``), Kafka 4.4
formatted with ``transaction.version=1``, and Kafka 3.9.2 (no transactions v2). On each:

* the producer picks the protocol the cluster finalized (it logs the switch to v2);
* read-process-write is exactly once: a worker child process is SIGKILLed in the middle of a
  transaction, a second one with the same ``transactional.id`` fences it and finishes the work,
  and a ``read_committed`` reader finds every input exactly once in the output, and the group's
  committed offset at the end of the input.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kaflux import AdminClient, Consumer, GroupMetadata, NewTopic, OffsetAndMetadata, Producer, TopicPartition
from kaflux.devbrokers import Broker, BrokerUnavailableError, start_broker
from kaflux.errors import KafkaTimeoutError

from support.java_client import JavaProducer

pytestmark = pytest.mark.integration

WORKER = Path(__file__).parent.parent / "support" / "eos_worker.py"
TOTAL = 60


@pytest.fixture(scope="module")
def kafka_tv1() -> Iterator[Broker]:
    """Kafka 4.4 formatted with transaction.version=1."""
    yield from _private("kafka", features={"transaction.version": 1})


@pytest.fixture(scope="module")
def kafka_392() -> Iterator[Broker]:
    """Kafka 3.9.2: transactions v1 only."""
    yield from _private("kafka", version="3.9.2")


def _private(kind: str, **options: Any) -> Iterator[Broker]:
    try:
        broker = start_broker(kind, timeout=240.0, **options)
    except BrokerUnavailableError as e:
        pytest.skip(f"{kind} {options} not available: {e}")
    try:
        yield broker
    finally:
        broker.cleanup()


#: (fixture, whether transactions v2 is expected)
CLUSTERS = [("kafka", True), ("kafka_tv1", False), ("kafka_392", False)]


@pytest.fixture(params=CLUSTERS, ids=["kafka-4.4-tv2", "kafka-4.4-tv1", "kafka-3.9.2"])
def cluster(request: pytest.FixtureRequest) -> tuple[str, bool]:
    name, v2 = request.param
    broker: Broker = request.getfixturevalue(name)
    return broker.bootstrap_servers, v2


def make_topics(bootstrap: str, *names: str) -> None:
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(n, 1, 1) for n in names], timeout=60.0)


def read_committed(bootstrap: str, topic: str, expected: int, timeout_s: float = 60.0) -> list[bytes]:
    values: list[bytes] = []
    tp = TopicPartition(topic, 0)
    with Consumer(
        {"bootstrap.servers": bootstrap, "isolation.level": "read_committed", "auto.offset.reset": "earliest"}
    ) as consumer:
        consumer.assign([tp])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and len(values) < expected:
            values += [r.value or b"" for r in consumer.poll(0.5)]
        # nothing more comes after the expected count
        values += [r.value or b"" for r in consumer.poll(2.0)]
    return values


def test_the_producer_uses_the_transaction_version_the_cluster_finalized(
    cluster: tuple[str, bool], caplog: pytest.LogCaptureFixture
) -> None:
    bootstrap, v2 = cluster
    topic = f"kx-890-{uuid.uuid4().hex[:8]}"
    make_topics(bootstrap, topic)
    caplog.set_level(logging.INFO, logger="kaflux.producer")
    with Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex[:8]}"}
    ) as producer:
        producer.init_transactions(60.0)
        for n in range(5):
            producer.begin_transaction()
            producer.send(topic, b"v%d" % n, partition=0)
            producer.commit_transaction(60.0)
        producer.begin_transaction()
        producer.send(topic, b"aborted", partition=0)
        producer.flush(30.0)
        producer.abort_transaction(60.0)
    switched = any("transactions v2 (KIP-890)" in r.getMessage() for r in caplog.records)
    assert switched == v2
    assert read_committed(bootstrap, topic, 5) == [b"v%d" % n for n in range(5)]


def test_read_process_write_is_exactly_once_across_a_sigkilled_producer(cluster: tuple[str, bool]) -> None:
    bootstrap, _ = cluster
    suffix = uuid.uuid4().hex[:8]
    source, sink, group, txn_id = f"kx-in-{suffix}", f"kx-out-{suffix}", f"g-{suffix}", f"eos-{suffix}"
    make_topics(bootstrap, source, sink)
    inputs = [b"r%03d" % n for n in range(TOTAL)]
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for value in inputs:
            producer.send(source, value, partition=0)
        producer.flush(30.0)

    def worker(pause: float) -> subprocess.Popen[str]:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        return subprocess.Popen(
            [sys.executable, str(WORKER), bootstrap, source, sink, group, txn_id, str(TOTAL), str(pause)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )

    first = worker(0.5)
    try:
        assert first.stdout is not None
        # let it commit twice, then kill it inside its third transaction
        for _ in range(2):
            line = first.stdout.readline()
            assert line.startswith("committed"), f"the worker stopped early: {line!r}"
        time.sleep(0.3)
        os.kill(first.pid, signal.SIGKILL)
    finally:
        if first.poll() is None:
            first.kill()
        first.wait(30)
        if first.stdout is not None:
            first.stdout.close()
    assert first.returncode == -signal.SIGKILL
    second = worker(0.0)
    try:
        out, _ = second.communicate(timeout=180)
    finally:
        if second.poll() is None:
            second.kill()
            second.wait(30)
    assert second.returncode == 0, out
    assert read_committed(bootstrap, sink, TOTAL) == [v.upper() for v in inputs]
    with Consumer({"bootstrap.servers": bootstrap, "group.id": group}) as consumer:
        committed = consumer.committed([TopicPartition(source, 0)], 30.0)
    offset = committed[TopicPartition(source, 0)]
    assert offset is not None and offset.offset == TOTAL


def test_offsets_of_a_missing_topic_time_out_and_the_abort_gives_them_up(kafka: Broker) -> None:
    """Kafka 4.4 (transactions v2) answers TxnOffsetCommit for a topic it does not know with
    UNKNOWN_TOPIC_OR_PARTITION, on a connection it keeps open; kaflux retries as Java's
    TxnOffsetCommitHandler does, so send_offsets_to_transaction() times out. The transaction can
    then be aborted (the abort used to wait behind the retries forever) and the producer goes on.
    Java's producer differs only in that it asks Metadata for the offsets' topic, which this broker
    (auto.create.topics.enable) answers by creating it, after which the offsets are accepted."""
    bootstrap = kafka.bootstrap_servers
    suffix = uuid.uuid4().hex[:8]
    sink, missing = f"kx-out-{suffix}", f"kx-missing-{suffix}"
    make_topics(bootstrap, sink)
    group = GroupMetadata(f"g-{suffix}")
    with Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{suffix}"}) as producer:
        producer.init_transactions(60.0)
        producer.begin_transaction()
        producer.send(sink, b"aborted", partition=0)
        started = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match="send_offsets_to_transaction"):
            producer.send_offsets_to_transaction(
                {TopicPartition(missing, 0): OffsetAndMetadata(5)}, group, 3.0
            )
        assert time.monotonic() - started < 30.0
        producer.abort_transaction(60.0)
        producer.begin_transaction()
        producer.send(sink, b"committed", partition=0)
        producer.send_offsets_to_transaction({TopicPartition(sink, 0): OffsetAndMetadata(1)}, group, 60.0)
        producer.commit_transaction(60.0)
    assert read_committed(bootstrap, sink, 1) == [b"committed"]
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        assert missing not in admin.list_topics(timeout=30), "kaflux does not create the offsets' topic"

    java = JavaProducer(bootstrap, sink, {"transactional.id": f"jtx-{suffix}", "max.block.ms": 30_000})
    with java:
        java.op("begin")
        assert java.try_op("send_offsets", group=f"jg-{suffix}", offsets=[[missing, 0, 5]]) is None
        java.op("abort")
        java.finish()
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        assert missing in admin.list_topics(timeout=30), "Java's Metadata request created the topic"
