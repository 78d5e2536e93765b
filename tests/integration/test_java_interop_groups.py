"""Mixed groups of Apache Kafka's Java clients (kafka-clients 4.4) and kaflux, on Apache Kafka 4.4.

* A classic group (``cooperative-sticky`` on both sides) and a KIP-848 group
  (``group.protocol=consumer``), each with Java and kaflux members that come and go while records
  are produced: no partition is ever owned by two members at once (ownership intervals from both
  clients' rebalance listeners, on one monotonic clock), and, since every member commits after
  each poll and closes cleanly, every record is read exactly once by the group.
* A share group with a Java ``KafkaShareConsumer`` and a kaflux ``ShareConsumer``: both get
  records, and every record is delivered and accepted exactly once across the two.

The Java members run in their own JVMs (support/java_client.py).
"""

from __future__ import annotations

import collections
import threading
import time
import uuid
from collections.abc import Sequence

import pytest

from kaflux import AdminClient, ShareConsumer
from kaflux.admin import AlterConfigOp
from kaflux.admin.configs import ConfigResource, ConfigResourceType
from kaflux.devbrokers.brokers import Broker

from support.group_helpers import (
    Member,
    Ownership,
    ThreadMember,
    create_topic,
    describe,
    member_config,
    new_group,
    wait_converged,
    wait_until,
)
from support.java_client import JavaMember, JavaShareMember
from support.kafka_helpers import produce

pytestmark = pytest.mark.integration

PARTITIONS = 6
WAIT_S = 90.0


def _configs(protocol: str, bootstrap: str, group: str) -> dict[str, object]:
    if protocol == "classic":
        return member_config(bootstrap, group, "cooperative-sticky")
    # KIP-848: the broker assigns and times sessions; Java refuses the classic-only settings.
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": "consumer",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }


def _batch(topic_bootstrap: tuple[str, str], tag: str, per_partition: int) -> list[bytes]:
    bootstrap, topic = topic_bootstrap
    values = {p: [f"{tag}-{p}-{i}".encode() for i in range(per_partition)] for p in range(PARTITIONS)}
    produce(bootstrap, topic, values)
    return [v for vs in values.values() for v in vs]


def _read_once(members: Sequence[Member], expected: list[bytes]) -> None:
    seen = collections.Counter(r.value for m in members for r in m.records)
    missing = [v for v in expected if seen[v] == 0]
    duplicated = {v: n for v, n in seen.items() if n > 1}
    unexpected = set(seen) - set(expected)
    assert (missing[:10], len(missing), duplicated, unexpected) == ([], 0, {}, set())


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_mixed_java_and_kaflux_group_reads_every_record_once_while_members_come_and_go(
    kafka: Broker, topic_name: str, protocol: str
):
    bootstrap = kafka.bootstrap_servers
    create_topic(bootstrap, topic_name, PARTITIONS)
    group = new_group()
    config = _configs(protocol, bootstrap, group)
    where = (bootstrap, topic_name)
    expected = _batch(where, "before", 20)

    java1 = JavaMember(f"java-1-{protocol}", config, [topic_name])
    kx1 = ThreadMember(f"kx-1-{protocol}", config, [topic_name], commit=True).start()
    everyone: list[Member] = [java1, kx1]
    stopped: list[Member] = []
    try:
        wait_converged([java1, kx1], PARTITIONS, WAIT_S)
        expected += _batch(where, "two", 20)

        java2 = JavaMember(f"java-2-{protocol}", config, [topic_name])
        kx2 = ThreadMember(f"kx-2-{protocol}", config, [topic_name], commit=True).start()
        everyone += [java2, kx2]
        wait_converged(everyone, PARTITIONS, WAIT_S)
        expected += _batch(where, "four", 20)

        # The first two leave (cleanly: revoke, commit, leave) while records keep coming.
        java1.stop(WAIT_S)
        stopped.append(java1)
        expected += _batch(where, "three", 20)
        kx1.stop(WAIT_S)
        stopped.append(kx1)
        remaining: list[JavaMember | ThreadMember] = [java2, kx2]
        wait_converged(remaining, PARTITIONS, WAIT_S)
        expected += _batch(where, "after", 20)

        wait_until(
            lambda: {r.value for m in everyone for r in m.records} >= set(expected),
            WAIT_S,
            lambda: (
                f"{len({r.value for m in everyone for r in m.records})} of {len(expected)} read; "
                f"owners: {describe(remaining)}"
            ),
        )
        for last in remaining:
            last.stop(WAIT_S)
            stopped.append(last)
    finally:
        for left in everyone:
            if left not in stopped:
                if isinstance(left, JavaMember):
                    left.cleanup()
                elif isinstance(left, ThreadMember):
                    left.request_stop()
    kx1.check()
    kx2.check()
    assert Ownership.of(everyone).overlaps() == []
    _read_once(everyone, expected)
    # Both clients did real work in the group.
    for member in everyone:
        assert member.records, f"{member.name} read nothing"


# --- share groups ---------------------------------------------------------------------------------


class KafluxShareThread:
    """A kaflux ShareConsumer polling on its own thread (implicit acknowledgement: each poll's
    records are accepted by ``commit_sync`` right after it)."""

    def __init__(self, name: str, config: dict[str, object], topic: str) -> None:
        self.name = name
        self.config = {"client.id": name, **config}
        self.topic = topic
        self.values: list[bytes] = []
        self.errors: list[BaseException] = []
        self.commit_errors: list[object] = []
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"share-{name}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            with ShareConsumer(self.config) as consumer:
                consumer.subscribe([self.topic])
                while not self._stop.is_set():
                    records = consumer.poll(0.2)
                    if records:
                        self.values.extend(r.value or b"" for r in records)
                        result = consumer.commit_sync(WAIT_S)
                        self.commit_errors.extend(e for e in result.values() if e is not None)
        except BaseException as e:
            self.errors.append(e)

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive(), f"{self.name} did not stop"


def test_share_group_of_java_and_kaflux_delivers_every_record_once(kafka: Broker, topic_name: str):
    bootstrap = kafka.bootstrap_servers
    partitions = 4
    create_topic(bootstrap, topic_name, partitions)
    group = f"kx-share-{uuid.uuid4().hex[:10]}"
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        # Share groups start at the latest offset by default: read from the beginning.
        admin.incremental_alter_configs(
            {
                ConfigResource(ConfigResourceType.GROUP, group): [
                    AlterConfigOp("share.auto.offset.reset", "earliest")
                ]
            },
            timeout=WAIT_S,
        )
    expected = [f"share-{p}-{i}".encode() for p in range(partitions) for i in range(150)]
    produce(bootstrap, topic_name, {p: expected[p * 150 : (p + 1) * 150] for p in range(partitions)})

    config: dict[str, object] = {"bootstrap.servers": bootstrap, "group.id": group}
    java = JavaShareMember("java-share", config, [topic_name])
    kx = KafluxShareThread("kx-share", config, topic_name)
    try:
        # Both must make progress: produce more until each has some, then until all are read.
        more = 0
        deadline = time.monotonic() + WAIT_S
        while not (java.records and kx.values):
            assert time.monotonic() < deadline, (
                f"java got {len(java.records)}, kaflux {len(kx.values)}; "
                f"errors {kx.errors} {java.proc.errors}"
            )
            assert java.died() is None, java.died()
            batch = [f"share-more-{more}-{p}".encode() for p in range(partitions)]
            produce(bootstrap, topic_name, {p: [batch[p]] for p in range(partitions)})
            expected += batch
            more += 1
            time.sleep(0.5)

        def read() -> collections.Counter[bytes]:
            return collections.Counter([r.value for r in java.records] + list(kx.values))

        wait_until(
            lambda: set(read()) >= set(expected),
            WAIT_S,
            lambda: (
                f"{len(set(read()))} of {len(expected)}: java {len(java.records)}, kaflux {len(kx.values)}"
            ),
        )
        time.sleep(2.0)  # a redelivery (a duplicate) would show up now
    finally:
        kx.stop()
        if java.died() is None:
            java.stop(WAIT_S)
        else:
            java.cleanup()
    assert kx.errors == [] and kx.commit_errors == [] and java.ack_errors == []
    counts = collections.Counter([r.value for r in java.records] + list(kx.values))
    assert {v: n for v, n in counts.items() if n > 1} == {}
    assert set(counts) == set(expected)
    assert java.records and kx.values
