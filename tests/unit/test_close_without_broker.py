"""close() with the broker unreachable waits only for work that is pending: with nothing to
deliver or commit it returns at once, as confluent-kafka's does, not after request.timeout.ms."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator

import pytest

from kaflux import Consumer, Producer, TopicPartition
from kaflux.closeable import Closeable
from kaflux.errors import KafkaError

from support.fakes import FakeCluster
from support.socket_fake_broker import SocketFakeBroker

#: far below request.timeout.ms (30 s) and the default close timeout (30 s)
PROMPT_S = 3.0


@pytest.fixture
def unreachable() -> Iterator[str]:
    """A loopback port that refuses connections (bound, not listening)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    yield f"127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


def _idle_consumer(servers: str) -> Closeable:
    return Consumer({"bootstrap.servers": servers})


def _assigned_consumer(servers: str) -> Closeable:
    consumer = Consumer({"bootstrap.servers": servers})
    consumer.assign([TopicPartition("t", 0)])
    consumer.poll(0.3)
    return consumer


def _group_consumer(servers: str) -> Closeable:
    consumer = Consumer({"bootstrap.servers": servers, "group.id": "g"})
    consumer.subscribe(["t"])
    consumer.poll(0.3)
    return consumer


def _idle_producer(servers: str) -> Closeable:
    return Producer({"bootstrap.servers": servers})


@pytest.mark.parametrize(
    "make",
    [_idle_consumer, _assigned_consumer, _group_consumer, _idle_producer],
    ids=["idle-consumer", "assigned-consumer", "group-consumer", "idle-producer"],
)
def test_default_close_returns_promptly_when_nothing_is_pending(
    unreachable: str, make: Callable[[str], Closeable]
) -> None:
    client = make(unreachable)
    start = time.monotonic()
    client.close()
    assert time.monotonic() - start < PROMPT_S


def test_producer_close_still_waits_for_undelivered_records_up_to_its_timeout() -> None:
    cluster = FakeCluster(1)
    cluster.create_topic("t", 1)
    broker = SocketFakeBroker(cluster)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    try:
        producer.send("t", b"delivered").result(timeout=10)  # metadata known from here on
    finally:
        broker.close()  # the broker goes away: nothing can be delivered now
    future = producer.send("t", b"pending")
    start = time.monotonic()
    producer.close(timeout=2.0)
    elapsed = time.monotonic() - start
    assert 1.5 <= elapsed < 2.0 + PROMPT_S
    with pytest.raises(KafkaError, match="closed"):
        future.result(timeout=1)
