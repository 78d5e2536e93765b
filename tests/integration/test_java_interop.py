"""Interop with Apache Kafka's own Java clients (kafka-clients 4.4) on Apache Kafka 4.4.

The Java side is tests/support/java/KafluxJavaHarness.java, compiled once at test time (see
support/java_client.py). Each way, for records and transactions:

* records: every codec, headers (null, empty, repeated, binary), null keys and null values, explicit
  timestamps: what one client writes the other reads byte-exactly, at the same offsets;
* transactions: committed transactions are read by the other client with read_committed, aborted ones
  are invisible to it (and visible with read_uncommitted, so the aborted records were really written);
* admin: the Java ``Admin`` and kaflux's ``AdminClient`` describe the same groups (members and their
  assignments), the same committed offsets and the same topic configs.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

import pytest

from kaflux import AdminClient, Consumer, NewTopic, OffsetAndMetadata, Producer, TopicPartition
from kaflux.admin.configs import ConfigResource, ConfigResourceType
from kaflux.consumer.consumer_record import CREATE_TIME
from kaflux.devbrokers.brokers import Broker

from support.group_helpers import ThreadMember, member_config, new_group, wait_until
from support.java_client import JavaMember, JavaProducer, java_admin, java_consume, unb64
from support.kafka_helpers import produce

pytestmark = pytest.mark.integration

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
WAIT_S = 60.0


@dataclass(frozen=True)
class Rec:
    partition: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


def sample_records(partitions: int, count: int = 90) -> list[Rec]:
    """Edge cases first (null and empty keys and values, null/empty/duplicate/binary headers), then
    compressible bulk with some null keys and null values."""
    base_ts = int(time.time() * 1000) - 120_000
    specials: list[tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]] = [
        (None, None, ()),
        (None, b"", ()),
        (b"", None, (("only-null", None),)),
        (b"k", b"v", (("dup", b"1"), ("dup", b"2"), ("dup", None), ("empty", b""))),
        (bytes(range(256)), bytes(range(255, -1, -1)), (("bin", bytes(range(256))),)),
        ("ключ".encode(), "значение ✓".encode(), (("заголовок", "✓".encode()),)),
    ]
    out = [Rec(i % partitions, k, v, h, base_ts + i) for i, (k, v, h) in enumerate(specials)]
    for i in range(len(specials), count):
        key = None if i % 7 == 0 else f"key-{i % 11}".encode()
        value = None if i % 13 == 0 else (f"record-{i:04d} " * (1 + i % 30)).encode()
        headers: tuple[tuple[str, bytes | None], ...] = (
            (("seq", str(i).encode()), ("n", None)) if i % 4 == 0 else ()
        )
        out.append(Rec(i % partitions, key, value, headers, base_ts + 3 * i))
    return out


def create_topic(broker: Broker, topic: str, partitions: int, config: dict[str, str] | None = None) -> None:
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(topic, partitions, config=config or {})], timeout=WAIT_S)


def kaflux_read(bootstrap: str, topic: str, partitions: int, count: int, **config: str) -> list[Any]:
    """Every record of ``topic`` from the start, with a kaflux Consumer (assign), until ``count``."""
    out: list[Any] = []
    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest", **config}) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        deadline = time.monotonic() + WAIT_S
        while len(out) < count:
            assert time.monotonic() < deadline, f"kaflux read {len(out)} of {count} records of {topic}"
            out.extend(consumer.poll(0.5))
    return out


def kaflux_read_all_committed(bootstrap: str, topic: str, partitions: int, **config: str) -> list[Any]:
    """Read up to the end offsets (the last stable offsets under read_committed) and a bit beyond,
    so that a record that should be invisible has had the chance to show up."""
    out: list[Any] = []
    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest", **config}) as consumer:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        ends = consumer.end_offsets(tps, WAIT_S)
        deadline = time.monotonic() + WAIT_S
        while any(consumer.position(tp, WAIT_S) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, f"kaflux did not reach the end offsets {ends} of {topic}"
            out.extend(consumer.poll(0.5))
        out.extend(consumer.poll(1.0))
    return out


# --- records: Java -> kaflux ----------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_java_produced_records_are_read_byte_exactly_by_kaflux(kafka: Broker, topic_name: str, codec: str):
    partitions = 2
    create_topic(kafka, topic_name, partitions)
    records = sample_records(partitions)
    producer = JavaProducer(kafka.bootstrap_servers, topic_name, {"compression.type": codec, "linger.ms": 20})
    with producer:
        for r in records:
            producer.send_record(
                r.key, r.value, partition=r.partition, headers=r.headers, timestamp=r.timestamp
            )
        acks = producer.op("flush")
        producer.finish()
    assert (-1, -1) not in acks

    got = kaflux_read(kafka.bootstrap_servers, topic_name, partitions, len(records))
    assert len(got) == len(records)
    by_offset = {(g.partition, g.offset): g for g in got}
    for r, (partition, offset) in zip(records, acks, strict=True):
        g = by_offset[(partition, offset)]
        assert (g.partition, g.key, g.value, tuple(g.headers), g.timestamp, g.timestamp_type) == (
            r.partition,
            r.key,
            r.value,
            r.headers,
            r.timestamp,
            CREATE_TIME,
        )
    null_both = by_offset[acks[0]]
    assert null_both.key is None and null_both.value is None  # null, not b""
    empty_value = by_offset[acks[1]]
    assert empty_value.value == b"" and empty_value.key is None


# --- records: kaflux -> Java ----------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_kaflux_produced_records_are_read_byte_exactly_by_java(kafka: Broker, topic_name: str, codec: str):
    partitions = 2
    create_topic(kafka, topic_name, partitions)
    records = sample_records(partitions)
    with Producer(
        {"bootstrap.servers": kafka.bootstrap_servers, "compression.type": codec, "linger.ms": 20}
    ) as p:
        futures = [
            p.send(
                topic_name,
                r.value,
                key=r.key,
                headers=list(r.headers),
                partition=r.partition,
                timestamp=r.timestamp,
            )
            for r in records
        ]
        p.flush(WAIT_S)
    metas = [f.result(timeout=0) for f in futures]

    got = java_consume(
        kafka.bootstrap_servers,
        max_records=len(records),
        assign=[(topic_name, p) for p in range(partitions)],
        config={"group.id": f"kx-{uuid.uuid4().hex[:8]}", "enable.auto.commit": "false"},
    )
    assert len(got) == len(records)
    by_offset = {(g["partition"], g["offset"]): g for g in got}
    for r, meta in zip(records, metas, strict=True):
        g = by_offset[(meta.partition, meta.offset)]
        headers = tuple((k, unb64(v)) for k, v in g["headers"])
        assert (g["partition"], unb64(g["key"]), unb64(g["value"]), headers, g["timestamp"]) == (
            r.partition,
            r.key,
            r.value,
            r.headers,
            r.timestamp,
        )
        assert g["timestamp_type"] == "CreateTime"
    first = by_offset[(metas[0].partition, metas[0].offset)]
    assert first["key"] is None and first["value"] is None
    assert by_offset[(metas[1].partition, metas[1].offset)]["value"] == ""  # b"" stays empty, not null


# --- transactions ---------------------------------------------------------------------------------


def _txn_plan(prefix: str) -> list[tuple[str, list[bytes]]]:
    """Three transactions: committed, aborted, committed (values say which)."""
    return [
        ("commit", [f"{prefix}-c1-{i}".encode() for i in range(10)]),
        ("abort", [f"{prefix}-aborted-{i}".encode() for i in range(10)]),
        ("commit", [f"{prefix}-c2-{i}".encode() for i in range(10)]),
    ]


def test_java_transactions_are_read_committed_by_kaflux(kafka: Broker, topic_name: str):
    partitions = 2
    create_topic(kafka, topic_name, partitions)
    plan = _txn_plan("java")
    producer = JavaProducer(
        kafka.bootstrap_servers,
        topic_name,
        {"transactional.id": f"kx-java-{uuid.uuid4().hex[:8]}", "enable.idempotence": "true", "acks": "all"},
    )
    with producer:
        for outcome, values in plan:
            producer.op("begin")
            for i, v in enumerate(values):
                producer.send_record(None, v, partition=i % partitions)
            producer.op("flush")  # written before the outcome: an abort would drop unsent batches
            producer.op(outcome)
        producer.finish()
    committed = [v for outcome, values in plan if outcome == "commit" for v in values]
    everything = [v for _, values in plan for v in values]

    seen = kaflux_read_all_committed(
        kafka.bootstrap_servers, topic_name, partitions, **{"isolation.level": "read_committed"}
    )
    assert sorted(r.value for r in seen) == sorted(committed)
    for p in range(partitions):  # in order within each partition
        mine = [r.value for r in seen if r.partition == p]
        assert mine == [v for v in committed if v in set(mine)]
    uncommitted = kaflux_read_all_committed(kafka.bootstrap_servers, topic_name, partitions)
    assert sorted(r.value for r in uncommitted) == sorted(everything)  # the aborted records were written


def test_kaflux_transactions_are_read_committed_by_java(kafka: Broker, topic_name: str):
    partitions = 2
    create_topic(kafka, topic_name, partitions)
    plan = _txn_plan("kaflux")
    config = {
        "bootstrap.servers": kafka.bootstrap_servers,
        "transactional.id": f"kx-py-{uuid.uuid4().hex[:8]}",
    }
    with Producer(config) as producer:
        producer.init_transactions(WAIT_S)
        for outcome, values in plan:
            producer.begin_transaction()
            for i, v in enumerate(values):
                producer.send(topic_name, v, partition=i % partitions)
            producer.flush(WAIT_S)  # written before the outcome: an abort would drop unsent batches
            if outcome == "commit":
                producer.commit_transaction(WAIT_S)
            else:
                producer.abort_transaction(WAIT_S)
    committed = [v for outcome, values in plan if outcome == "commit" for v in values]
    everything = [v for _, values in plan for v in values]
    assign = [(topic_name, p) for p in range(partitions)]

    # Ask for one record more than were committed: Java must time out with exactly the committed ones.
    seen = java_consume(
        kafka.bootstrap_servers,
        max_records=len(committed) + 1,
        assign=assign,
        config={"isolation.level": "read_committed"},
        timeout=8,
    )
    assert sorted(unb64(r["value"]) or b"" for r in seen) == sorted(committed)
    raw = java_consume(
        kafka.bootstrap_servers,
        max_records=len(everything),
        assign=assign,
        config={"isolation.level": "read_uncommitted"},
    )
    assert sorted(unb64(r["value"]) or b"" for r in raw) == sorted(everything)


# --- admin ----------------------------------------------------------------------------------------


def test_java_admin_and_kaflux_admin_see_the_same_groups_offsets_and_configs(kafka: Broker, topic_name: str):
    partitions = 4
    topic_config = {"retention.ms": "3600000", "segment.bytes": "10485760", "max.message.bytes": "200000"}
    create_topic(kafka, topic_name, partitions, topic_config)
    bootstrap = kafka.bootstrap_servers
    produce(bootstrap, topic_name, {p: [f"v{p}-{i}".encode() for i in range(10)] for p in range(partitions)})
    group = new_group()
    config = member_config(bootstrap, group, "cooperative-sticky")
    kx = ThreadMember("kx-admin-member", config, [topic_name])
    java = JavaMember("java-admin-member", config, [topic_name])
    kx.start()
    try:
        wait_until(
            lambda: (
                java.died() is None
                and len(kx.owned) + len(java.owned) == partitions
                and kx.owned
                and java.owned
            ),
            WAIT_S,
            lambda: f"owned: kaflux {sorted(kx.owned)}, java {sorted(java.owned)}",
        )
        # Commit known offsets from kaflux (the Java member commits what it consumed).
        offsets = {TopicPartition(topic_name, p): OffsetAndMetadata(3 + p) for p in sorted(kx.owned)}
        kx.call(lambda c: c.commit_sync(offsets, WAIT_S))
        wait_until(
            lambda: len(java.records) >= 10 * len(java.owned),
            WAIT_S,
            lambda: (
                f"the Java member read {len(java.records)} records of {sorted(java.owned)}: "
                f"{java.events} {java.proc.stderr_tail()}"
            ),
        )

        with AdminClient({"bootstrap.servers": bootstrap}) as admin:

            def both() -> tuple[dict[str, Any], dict[str, Any]]:
                listing = {g.group_id: g for g in admin.list_consumer_groups(WAIT_S)}
                desc = admin.describe_consumer_groups([group], WAIT_S)[group]
                mine = {
                    "listed": group in listing,
                    "state": desc.state.lower(),
                    "protocol": desc.protocol,
                    "members": {
                        m.client_id: sorted(tp.partition for tp in m.assignment) for m in desc.members
                    },
                    "offsets": {
                        tp.partition: om.offset
                        for tp, om in admin.list_consumer_group_offsets(group, timeout=WAIT_S).items()
                    },
                }
                answers = java_admin(
                    bootstrap,
                    [
                        {"op": "list_groups"},
                        {"op": "describe_groups", "groups": [group]},
                        {"op": "group_offsets", "group": group},
                    ],
                )
                jdesc = answers[1]["groups"][group]
                theirs = {
                    "listed": group in {g["group_id"] for g in answers[0]["groups"]},
                    "state": jdesc["state"].lower(),
                    "protocol": jdesc["assignor"],
                    "members": {
                        m["client_id"]: sorted(p for _, p in m["assignment"]) for m in jdesc["members"]
                    },
                    "offsets": {p: o for _, p, o in answers[2]["offsets"]},
                }
                return mine, theirs

            mine, theirs = both()
            if mine != theirs:  # a commit may have landed between the two reads: look once more
                mine, theirs = both()
            assert mine == theirs
            assert mine["listed"] and mine["state"] == "stable" and mine["protocol"] == "cooperative-sticky"
            assert set(mine["members"]) == {"kx-admin-member", "java-admin-member"}
            assert sorted(p for ps in mine["members"].values() for p in ps) == list(range(partitions))
            for p in kx.owned:
                assert mine["offsets"][p] == 3 + p

            # Topic configs: every entry, its value, source and flags, the same both ways.
            resource = ConfigResource(ConfigResourceType.TOPIC, topic_name)
            entries = admin.describe_configs([resource], timeout=WAIT_S)[resource]
        (jconf,) = java_admin(bootstrap, [{"op": "topic_configs", "topic": topic_name}])
        kx_configs = {
            name: {
                "value": e.value,
                "source": e.source.name,
                "read_only": e.is_read_only,
                "sensitive": e.is_sensitive,
            }
            for name, e in entries.items()
        }
        java_configs = {
            name: {
                "value": c["value"],
                "source": c["source"],
                "read_only": c["read_only"],
                "sensitive": c["sensitive"],
            }
            for name, c in jconf["configs"].items()
        }
        assert kx_configs == java_configs
        for name, value in topic_config.items():
            assert kx_configs[name]["value"] == value and kx_configs[name]["source"] == "DYNAMIC_TOPIC_CONFIG"
    finally:
        kx.request_stop()
        if java.died() is None:
            java.stop()
        else:
            java.cleanup()
        kx.stop()
