"""Exactly-once read-process-write across a coordinator broker SIGKILLed in a 3-node Apache Kafka
4.4 cluster (issue 29).

The cluster (one per module and transaction version: ``transaction.version`` 2, Kafka 4.4's
default, then 1) is three combined broker+controller nodes. Every topic, the internal ones
included, has 3 replicas and ``min.insync.replicas=2`` (``__transaction_state`` from
``transaction.state.log.min.isr``, ``__consumer_offsets`` from the broker default set below), so
a node can die without a write being refused or a committed one lost.

A read-process-write loop runs in the test: a ``read_committed`` consumer (manual assignment,
group offsets committed only through the producer) reads an input topic; each poll's records
are written to an output topic in one transaction with ``send_offsets_to_transaction``. In the
middle of the stream, with a transaction open (its records written, not committed yet), the
broker that is the coordinator (the transaction coordinator of the ``transactional.id``, or the
group's coordinator) is SIGKILLed. The loop does nothing special: its next calls must succeed
once the client found the new coordinator. The broker is restarted while the loop goes on; the
second half of the input is written only after that, so the loop works across the restart too.

The books: the output, read ``read_committed``, holds every input record exactly once, and the
group's committed offsets are the input's end offsets.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from kaflux import AdminClient, Consumer, NewTopic, OffsetAndMetadata, Producer, TopicPartition
from kaflux.admin.configs import ConfigResource
from kaflux.devbrokers.apache_kafka import KafkaCluster
from kaflux.devbrokers.brokers import BrokerUnavailableError

# One worker runs them all (CI: pytest-xdist --dist loadgroup), so that one cluster serves the module.
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("kafka-cluster-eos")]

PARTITIONS = 3
HALF = 150  # input records written before the loop starts, and again after the restart
WAIT_S = 180.0
NODES = [1, 2, 3]
INTERNAL_TOPICS = ("__transaction_state", "__consumer_offsets")
REQUEST_TIMEOUT_S = 30.0  # the clients' request.timeout.ms (the default)


@pytest.fixture(scope="module", params=[2, 1], ids=["tv2", "tv1"])
def cluster(request: pytest.FixtureRequest) -> Iterator[KafkaCluster]:
    try:
        cluster = KafkaCluster(
            3,
            config={"min.insync.replicas": 2},
            features={"transaction.version": request.param},
        )
    except BrokerUnavailableError as e:
        pytest.skip(f"Apache Kafka is not available: {e}")
    try:
        cluster.start(timeout=240)
        with AdminClient({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
            finalized = admin.describe_features(timeout=60).finalized_features
        assert finalized["transaction.version"].max_version_level == request.param
        yield cluster
    finally:
        cluster.cleanup()


def _admin(cluster: KafkaCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap_servers})


def _isr(cluster: KafkaCluster, topics: list[str]) -> dict[TopicPartition, list[int]]:
    with _admin(cluster) as admin:
        described = admin.describe_topics(topics, timeout=30)
    return {
        TopicPartition(name, p.partition): sorted(p.isr)
        for name, d in described.items()
        for p in d.partitions
    }


def _wait_full_isr(cluster: KafkaCluster, topics: list[str], deadline: float) -> None:
    last: object = None
    while True:
        try:
            last = _isr(cluster, topics)
            if all(isr == NODES for isr in last.values()):
                return
        except Exception as e:  # a node may still be starting
            last = e
        assert time.monotonic() < deadline, f"the ISR of {topics} did not become {NODES}: {last}"
        time.sleep(0.5)


def _internal_topics_ready(cluster: KafkaCluster) -> None:
    """Both internal topics exist (a transaction and a group were used once), with 3 replicas
    in sync and ``min.insync.replicas=2``: one node may die."""
    deadline = time.monotonic() + WAIT_S
    _wait_full_isr(cluster, list(INTERNAL_TOPICS), deadline)
    with _admin(cluster) as admin:
        configs = admin.describe_configs(
            [ConfigResource("topic", t) for t in INTERNAL_TOPICS], names=["min.insync.replicas"], timeout=30
        )
    for resource, entries in configs.items():
        assert entries["min.insync.replicas"].value == "2", resource


def _create_topics(cluster: KafkaCluster, *names: str) -> None:
    with _admin(cluster) as admin:
        admin.create_topics(
            [NewTopic(n, PARTITIONS, 3, config={"min.insync.replicas": "2"}) for n in names],
            timeout=60,
        )
    _wait_full_isr(cluster, list(names), time.monotonic() + WAIT_S)


def _write_inputs(cluster: KafkaCluster, topic: str, values: list[bytes]) -> None:
    with Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"}) as producer:
        futures = [producer.send(topic, v, partition=n % PARTITIONS) for n, v in enumerate(values)]
        producer.flush(WAIT_S)
    for f in futures:
        f.result(0)


def _warm_up(cluster: KafkaCluster) -> None:
    """Create both internal topics (a first transaction with offsets does): the test then
    starts on a cluster whose coordinators are loaded."""
    suffix = uuid.uuid4().hex[:8]
    topic = f"kx-warm-{suffix}"
    _create_topics(cluster, topic)
    with (
        Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": f"warm-{suffix}"}) as p,
        Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": f"warm-{suffix}"}) as c,
    ):
        p.init_transactions(WAIT_S)
        p.begin_transaction()
        p.send(topic, b"warm", partition=0)
        p.send_offsets_to_transaction({TopicPartition(topic, 0): OffsetAndMetadata(1)}, c.group_metadata())
        p.commit_transaction(WAIT_S)


@dataclass
class Books:
    processed: list[bytes] = field(default_factory=list)
    commits: int = 0
    commit_times: list[float] = field(default_factory=list)  # when each commit returned


def _read_committed(cluster: KafkaCluster, topic: str, expected: int) -> list[bytes]:
    values: list[bytes] = []
    with Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    ) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and len(values) < expected:
            values += [r.value or b"" for r in consumer.poll(0.5)]
        values += [r.value or b"" for r in consumer.poll(3.0)]  # and nothing more
    return values


def _coordinators(cluster: KafkaCluster, txn_id: str, group: str) -> tuple[int, int]:
    with _admin(cluster) as admin:
        (txn,) = admin.describe_transactions([txn_id], timeout=30).values()
        (described,) = admin.describe_consumer_groups([group], timeout=30).values()
    return txn.coordinator_id, described.coordinator.node_id


def _restart_then_write(
    cluster: KafkaCluster,
    node_id: int,
    topic: str,
    values: list[bytes],
    figures: dict[str, object],
    errors: list[BaseException],
    done: threading.Event,
) -> None:
    """Restart the killed node (the loop goes on meanwhile), then write more input."""
    try:
        began = time.monotonic()
        cluster.node(node_id).restart(timeout=240)
        figures["restart took"] = time.monotonic() - began
        _write_inputs(cluster, topic, values)
    except BaseException as e:  # reported by the test
        errors.append(e)
    finally:
        done.set()


@pytest.mark.parametrize("victim", ["transaction", "group"])
def test_read_process_write_stays_exactly_once_across_a_sigkilled_coordinator(
    cluster: KafkaCluster, victim: str
) -> None:
    _warm_up(cluster)
    _internal_topics_ready(cluster)
    suffix = uuid.uuid4().hex[:8]
    source, sink, group, txn_id = f"kx-in-{suffix}", f"kx-out-{suffix}", f"g-{suffix}", f"eos-{suffix}"
    _create_topics(cluster, source, sink)
    inputs = [b"r%04d" % n for n in range(2 * HALF)]
    _write_inputs(cluster, source, inputs[:HALF])
    source_tps = [TopicPartition(source, p) for p in range(PARTITIONS)]

    books = Books()
    killed = threading.Event()  # set by the loop once it killed the coordinator
    restart_done = threading.Event()
    restart_errors: list[BaseException] = []
    figures: dict[str, object] = {}

    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": group,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "max.poll.records": 10,
        }
    )
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": txn_id})
    restarter: threading.Thread | None = None
    try:
        producer.init_transactions(WAIT_S)
        consumer.assign(source_tps)
        deadline = time.monotonic() + 2 * WAIT_S
        killed_node: int | None = None
        killed_at = 0.0
        commits_at_kill = 0
        while len(books.processed) < 2 * HALF:
            assert time.monotonic() < deadline, f"the loop processed {len(books.processed)} of {2 * HALF}"
            records = consumer.poll(0.5)
            if not records:
                continue
            producer.begin_transaction()
            offsets: dict[TopicPartition, OffsetAndMetadata] = {}
            for record in records:
                producer.send(sink, record.value, partition=record.partition)
                offsets[TopicPartition(record.topic, record.partition)] = OffsetAndMetadata(record.offset + 1)
            if books.commits == 3 and killed_node is None:
                # mid-stream, with this transaction open and its records written: kill the coordinator
                producer.flush(WAIT_S)
                txn_coordinator, group_coordinator = _coordinators(cluster, txn_id, group)
                figures["transaction coordinator"] = txn_coordinator
                figures["group coordinator"] = group_coordinator
                killed_node = txn_coordinator if victim == "transaction" else group_coordinator
                cluster.node(killed_node).kill()
                killed_at = time.monotonic()
                commits_at_kill = books.commits
                killed.set()
            producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
            producer.commit_transaction(WAIT_S)
            books.commits += 1
            books.commit_times.append(time.monotonic())
            books.processed += [r.value or b"" for r in records]
            if killed_node is not None and restarter is None and books.commits >= commits_at_kill + 3:
                # the loop got on without the node: restart it while the loop goes on, then
                # write the second half of the input
                restarter = threading.Thread(
                    target=_restart_then_write,
                    args=(cluster, killed_node, source, inputs[HALF:], figures, restart_errors, restart_done),
                    name="restart-coordinator",
                )
                restarter.start()
            assert not restart_errors, restart_errors
        assert killed.is_set(), "the loop ended before the fault"
        first_after = books.commit_times[commits_at_kill]
        figures["first commit after the kill"] = first_after - killed_at
        # The new coordinator takes over once the controller fences the dead node
        # (broker.session.timeout.ms, 9 s) and elects new leaders; the client must not add a
        # request.timeout.ms (30 s) of its own waiting for the dead broker (it did: 42 s).
        assert first_after - killed_at < REQUEST_TIMEOUT_S, figures
        figures["commits"] = books.commits
    finally:
        if restarter is not None:
            restarter.join(WAIT_S + 60)
        producer.close(30.0)
        consumer.close(30.0)
    assert restart_done.is_set() and not restart_errors, restart_errors
    print(
        f"\n[eos] kill the {victim} coordinator: "
        + ", ".join(f"{k} {v:.2f} s" if isinstance(v, float) else f"{k} {v}" for k, v in figures.items())
    )

    # the books
    assert sorted(books.processed) == inputs, "the loop itself read something twice or missed it"
    output = _read_committed(cluster, sink, len(inputs))
    counts = Counter(output)
    assert sorted(set(inputs) - set(counts)) == [], "input records missing from the output"
    assert {v: n for v, n in counts.items() if n > 1} == {}, "input records written twice"
    assert sorted(output) == inputs
    with _admin(cluster) as admin:
        committed = admin.list_consumer_group_offsets(group, timeout=30)
    with Consumer({"bootstrap.servers": cluster.bootstrap_servers}) as reader:
        ends = reader.end_offsets(source_tps, 30.0)
    assert {tp: om.offset for tp, om in committed.items()} == ends
    _wait_full_isr(cluster, list(INTERNAL_TOPICS), time.monotonic() + WAIT_S)
