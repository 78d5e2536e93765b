"""The real Consumer and Producer against a broker that answers a request and closes the
connection in the same write (a crash right after a response): the answer must be used, and
nothing may stall. Runs on :mod:`socket_fake_broker`, over loopback sockets."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from kaflux import Consumer, Producer, TopicPartition
from kaflux.protocol.messages.fetch import FetchRequest
from kaflux.protocol.messages.metadata import MetadataRequest
from kaflux.protocol.messages.produce import ProduceRequest

from support.fakes import FakeCluster
from support.socket_fake_broker import SocketFakeBroker

TP = TopicPartition("crash", 0)


@pytest.fixture
def broker() -> Iterator[SocketFakeBroker]:
    cluster = FakeCluster(1)
    cluster.create_topic(TP.topic, 1)
    srv = SocketFakeBroker(cluster)
    yield srv
    srv.close()


def test_consumer_reads_everything_when_fetch_responses_come_with_a_close(broker: SocketFakeBroker) -> None:
    for start in range(0, 2000, 100):
        broker.cluster.produce(TP, [b"v%d" % i for i in range(start, start + 100)])
    broker.close_after(FetchRequest, count=3)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "auto.offset.reset": "earliest",
            "max.partition.fetch.bytes": 4096,
        }
    )
    try:
        consumer.assign([TP])
        values: list[bytes | None] = []
        deadline = time.monotonic() + 20
        while len(values) < 2000 and time.monotonic() < deadline:
            values += [r.value for r in consumer.poll(0.5)]
    finally:
        consumer.close(timeout=5)
    assert broker.crashes == 3
    assert values == [b"v%d" % i for i in range(2000)]


def test_producer_future_resolves_when_the_produce_response_comes_with_a_close(
    broker: SocketFakeBroker,
) -> None:
    broker.close_after(ProduceRequest)
    with Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0}) as producer:
        metadata = producer.send(TP.topic, b"only", partition=0).result(timeout=10)
        assert metadata.offset == 0
    assert broker.crashes == 1
    assert [v for _, _, v in broker.cluster.records(TP)] == [b"only"]


def test_consumer_recovers_from_metadata_responses_with_a_wrong_correlation_id(
    broker: SocketFakeBroker,
) -> None:
    broker.cluster.produce(TP, [b"v%d" % i for i in range(1000)])
    broker.garble(MetadataRequest, count=2)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TP])
        values: list[bytes | None] = []
        deadline = time.monotonic() + 20
        while len(values) < 1000 and time.monotonic() < deadline:
            values += [r.value for r in consumer.poll(0.5)]
    finally:
        consumer.close(timeout=5)
    assert values == [b"v%d" % i for i in range(1000)]
    assert broker.connections >= 3, "each garbled answer closes its connection"
