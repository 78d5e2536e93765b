"""``kaflux.Consumer`` in assign mode: exact delivery per codec, max.poll.records, pause/resume."""

from __future__ import annotations

import time

import pytest

from kaflux import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from kaflux.devbrokers.brokers import Broker

pytestmark = pytest.mark.integration

WAIT_S = 15.0
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def create_topic(broker: Broker, topic: str, partitions: int) -> None:
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(topic, partitions)], timeout=WAIT_S)


def produce(
    broker: Broker, topic: str, values_by_partition: dict[int, list[bytes]], **config: object
) -> None:
    """Send with kaflux, in several small batches per partition, and check every offset."""
    settings = {"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5, "batch.size": 1500, **config}
    with Producer(settings) as producer:
        futures = {
            p: [producer.send(topic, v, key=b"k%d" % i, partition=p) for i, v in enumerate(values)]
            for p, values in values_by_partition.items()
        }
        producer.flush(WAIT_S)
    for fs in futures.values():
        offsets = [f.result(timeout=0).offset for f in fs]
        assert offsets == list(range(offsets[0], offsets[0] + len(fs)))


def poll_until(consumer: Consumer, count: int, timeout: float = WAIT_S) -> list:
    """Poll until at least ``count`` records arrived (all records returned are kept)."""
    deadline = time.monotonic() + timeout
    out: list = []
    while len(out) < count:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"got {len(out)} of {count} records within {timeout} s"
        out.extend(consumer.poll(min(1.0, remaining)))
    return out


def new_consumer(broker: Broker, **config: object) -> Consumer:
    return Consumer(
        {"bootstrap.servers": broker.bootstrap_servers, "auto.offset.reset": "earliest", **config}
    )


@pytest.mark.parametrize("codec", CODECS)
def test_assign_and_poll_return_exactly_the_produced_records_in_order(
    broker: Broker, topic_name: str, codec: str
):
    partitions = 3
    create_topic(broker, topic_name, partitions)
    wave1 = {
        p: [b"w1-p%d-%04d-" % (p, i) * (1 + i % 9) for i in range(60 + 10 * p)] for p in range(partitions)
    }
    wave2 = {p: [b"w2-p%d-%04d" % (p, i) for i in range(25)] for p in range(partitions)}
    produce(broker, topic_name, wave1, **{"compression.type": codec})
    consumer = new_consumer(broker, **{"max.partition.fetch.bytes": 4096})
    try:
        consumer.assign([TopicPartition(topic_name, p) for p in range(partitions)])
        got = poll_until(consumer, sum(len(v) for v in wave1.values()))
        # A second wave, produced while the consumer is already at the end of the log.
        produce(broker, topic_name, wave2, **{"compression.type": codec})
        got += poll_until(consumer, sum(len(v) for v in wave2.values()))
    finally:
        consumer.close()
    for p in range(partitions):
        expected = wave1[p] + wave2[p]
        mine = [r for r in got if r.partition == p]
        assert [r.offset for r in mine] == list(range(len(expected)))
        assert [r.value for r in mine] == expected
        assert [r.key for r in mine] == [b"k%d" % i for i in range(len(wave1[p]))] + [
            b"k%d" % i for i in range(len(wave2[p]))
        ]
        assert {r.topic for r in mine} == {topic_name}


def test_max_poll_records_bounds_every_poll(broker: Broker, topic_name: str):
    create_topic(broker, topic_name, 2)
    produce(broker, topic_name, {0: [b"a%d" % i for i in range(60)], 1: [b"b%d" % i for i in range(40)]})
    consumer = new_consumer(broker, **{"max.poll.records": 7})
    sizes: list[int] = []
    got: list = []
    try:
        consumer.assign([TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)])
        deadline = time.monotonic() + WAIT_S
        while len(got) < 100:
            assert time.monotonic() < deadline, f"got {len(got)} of 100 records"
            batch = consumer.poll(1.0)
            sizes.append(len(batch))
            got.extend(batch)
    finally:
        consumer.close()
    assert max(sizes) == 7, sizes  # the bound was reached (more was buffered) ...
    assert all(n <= 7 for n in sizes), sizes  # ... and never exceeded
    assert len(got) == 100
    for p, n in ((0, 60), (1, 40)):
        assert [r.offset for r in got if r.partition == p] == list(range(n))


def test_paused_partition_returns_nothing_and_resumes_at_the_right_offset(broker: Broker, topic_name: str):
    create_topic(broker, topic_name, 2)
    p0, p1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
    # Large batches, so one fetch of p0 buffers more than a poll returns.
    produce(
        broker,
        topic_name,
        {0: [b"a%d" % i for i in range(40)], 1: [b"b%d" % i for i in range(40)]},
        **{"batch.size": 1 << 20},
    )
    consumer = new_consumer(broker, **{"max.poll.records": 3})
    got: list = []
    try:
        consumer.assign([p0, p1])
        deadline = time.monotonic() + WAIT_S
        while not any(r.partition == 0 for r in got):
            assert time.monotonic() < deadline, "no record of partition 0 arrived"
            got.extend(consumer.poll(1.0))
        consumer.pause([p0])
        assert consumer.paused() == {p0}
        paused_at = consumer.position(p0)
        assert paused_at == sum(1 for r in got if r.partition == 0)
        # Records that arrive while paused must not be lost either.
        produce(broker, topic_name, {0: [b"late%d" % i for i in range(10)]})

        while sum(1 for r in got if r.partition == 1) < 40:
            assert time.monotonic() < deadline, "partition 1 was not fully read while partition 0 was paused"
            batch = list(consumer.poll(1.0))
            assert [r for r in batch if r.partition == 0] == [], "a paused partition returned records"
            got.extend(batch)
        # Partition 1 is drained; a paused partition 0 (with buffered data) must still return nothing.
        assert list(consumer.poll(0.3)) == []
        assert consumer.position(p0) == paused_at

        consumer.resume([p0])
        assert consumer.paused() == set()
        while sum(1 for r in got if r.partition == 0) < 50:
            assert time.monotonic() < deadline, "partition 0 did not resume"
            got.extend(consumer.poll(1.0))
    finally:
        consumer.close()
    assert [r.offset for r in got if r.partition == 0] == list(range(50))
    assert [r.value for r in got if r.partition == 0] == [b"a%d" % i for i in range(40)] + [
        b"late%d" % i for i in range(10)
    ]
    assert [r.offset for r in got if r.partition == 1] == list(range(40))


def test_poll_sleeps_while_only_paused_data_is_buffered(kafka: Broker, topic_name: str):
    broker = kafka  # broker-independent client behaviour
    create_topic(broker, topic_name, 1)
    tp = TopicPartition(topic_name, 0)
    produce(broker, topic_name, {0: [b"r%d" % i for i in range(50)]}, **{"batch.size": 1 << 20})
    consumer = new_consumer(broker, **{"max.poll.records": 2})
    try:
        consumer.assign([tp])
        assert len(poll_until(consumer, 1)) == 2  # the rest of the fetched batch stays buffered
        consumer.pause([tp])
        cpu_before = time.thread_time()
        assert list(consumer.poll(1.0)) == []
        cpu_used = time.thread_time() - cpu_before
    finally:
        consumer.close()
    assert cpu_used < 0.2, f"poll(1.0) used {cpu_used:.2f} s of CPU on the calling thread"
