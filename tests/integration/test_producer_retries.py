"""The idempotent producer (the default) under forced retries: connections cut in the middle of
Produce requests, after the broker wrote them, before their answers, through
:class:`support.fault_proxy.FaultProxy` in front of noida-db. Every record must land exactly
once, in send order within its partition."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from kaflux import Consumer, Producer, TopicPartition
from kaflux.devbrokers.brokers import BrokerUnavailableError
from kaflux.protocol.api import ApiKey

from support.scenarios import ProxiedBroker, create_topic, start_proxied_broker, unique_name

pytestmark = pytest.mark.integration

WAIT_S = 30.0
PARTITIONS = 3


@pytest.fixture(scope="module")
def proxied() -> Iterator[ProxiedBroker]:
    """noida-db behind a fault proxy (which rewrites its address), for this module."""
    try:
        broker = start_proxied_broker("noida")
    except BrokerUnavailableError as e:
        pytest.skip(f"noida broker not available: {e}")
    try:
        yield broker
    finally:
        broker.close()


@pytest.fixture
def proxy(proxied: ProxiedBroker) -> Iterator[ProxiedBroker]:
    proxied.proxy.reset()
    yield proxied
    proxied.proxy.reset()


def read_partitions(bootstrap: str, topic: str, count: int) -> dict[int, list[bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        out: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        seen = 0
        deadline = time.monotonic() + WAIT_S
        while seen < count:
            assert time.monotonic() < deadline, f"read {seen} of {count} records"
            for record in consumer.poll(0.5):
                out[record.partition].append(record.value)
                seen += 1
        assert list(consumer.poll(0.5)) == [], "more records than were sent"
        return out
    finally:
        consumer.close(5)


@pytest.mark.parametrize(
    "fault",
    ["cut_mid_request", "cut_after_request", "cut_before_response", "cut_mid_response"],
)
def test_records_land_once_and_in_order_when_produce_connections_are_cut(
    proxy: ProxiedBroker, fault: str
) -> None:
    topic = unique_name("kx-idem")
    create_topic(proxy.bootstrap_servers, topic, PARTITIONS)
    config = {
        "bootstrap.servers": proxy.bootstrap_servers,
        "linger.ms": 2,
        "batch.size": 2048,  # many batches, so that several are in flight when a cut comes
        "request.timeout.ms": 5000,
        "retry.backoff.ms": 20,
    }
    sent: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    with Producer(config) as producer:
        producer.send(topic, b"warm-up", partition=0).result(WAIT_S)
        sent[0].append(b"warm-up")
        armed = getattr(proxy.proxy, fault)(ApiKey.PRODUCE, times=4)
        futures = []
        for i in range(3000):
            value = b"%05d-" % i + b"x" * 40
            futures.append(producer.send(topic, value, partition=i % PARTITIONS))
            sent[i % PARTITIONS].append(value)
        producer.flush(WAIT_S)
        assert armed.fired == 4, f"the proxy cut {armed.fired} of 4 times"
        errors = [f.exception(0) for f in futures if f.exception(0) is not None]
        assert errors == []
        assert producer.metrics()["kaflux-producer-metrics"]["producer-epoch"] == 0, (
            "nothing here calls for an epoch bump"
        )
    # no duplicates and no reordering within a partition: the log is exactly what was sent
    assert read_partitions(proxy.bootstrap_servers, topic, sum(map(len, sent.values()))) == sent
