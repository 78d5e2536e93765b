"""Failures on a manually assigned topic are not silent (over loopback sockets, on
:mod:`socket_fake_broker`): an unauthorized topic raises from poll(), an unknown one is logged
(rate-limited) and a timeout names the partition and the cause."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest

from kaflux import Consumer, TopicPartition
from kaflux.errors import KafkaTimeoutError, TopicAuthorizationFailedError
from kaflux.protocol.messages.metadata import MetadataRequest

from support.fakes import FakeCluster
from support.socket_fake_broker import SocketFakeBroker

TOPIC_AUTHORIZATION_FAILED = 29


@pytest.fixture
def broker() -> Iterator[SocketFakeBroker]:
    cluster = FakeCluster(1)
    cluster.create_topic("known", 1)
    srv = SocketFakeBroker(cluster)
    yield srv
    srv.close()


def _consumer(broker: SocketFakeBroker) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "auto.offset.reset": "earliest",
            "retry.backoff.ms": 20,
            "retry.backoff.max.ms": 50,
        }
    )


def test_an_unauthorized_topic_raises_from_poll(broker: SocketFakeBroker) -> None:
    broker.cluster.inject(MetadataRequest, TOPIC_AUTHORIZATION_FAILED, count=-1)
    consumer = _consumer(broker)
    try:
        consumer.assign([TopicPartition("known", 0)])
        deadline = time.monotonic() + 10
        with pytest.raises(TopicAuthorizationFailedError, match="'known'"):
            while time.monotonic() < deadline:
                consumer.poll(0.2)
    finally:
        consumer.close(timeout=5)


def test_an_unknown_topic_is_logged_once_and_named_in_a_position_timeout(
    broker: SocketFakeBroker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="kaflux")
    consumer = _consumer(broker)
    tp = TopicPartition("no-such-topic", 0)
    try:
        consumer.assign([tp])
        with pytest.raises(KafkaTimeoutError) as raised:
            consumer.position(tp, timeout=1.5)
    finally:
        consumer.close(timeout=5)
    message = str(raised.value)
    assert "no-such-topic-0" in message
    assert "UnknownTopicOrPartitionError" in message
    assert "Event" not in message, "the message names an internal event class"
    refreshes = sum(isinstance(r, MetadataRequest) for _, r, _ in broker.cluster.handled)
    warnings = [r for r in caplog.records if "no-such-topic" in r.getMessage()]
    assert refreshes >= 3, "metadata was refreshed several times"
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert warnings[0].levelno == logging.WARNING
