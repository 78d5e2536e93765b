"""A response above ``receive.message.max.bytes`` is not dropped silently (issue 24, D2).

The real Consumer reads from :mod:`socket_fake_broker` with a small ``receive.message.max.bytes``;
the partition starts with a record batch larger than that (a broker returns the first batch
whole, whatever the fetch size). Each such Fetch response fails its connection: ``poll()`` raises
:class:`~kaflux.errors.ResponseTooLargeError` naming the limit, the size and the broker, once per
failed fetch, and keeps working (after a seek past the large batch it reads the rest); the
network thread logs a WARNING, at most one per broker per interval.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest

from kaflux import Consumer, TopicPartition
from kaflux.errors import ResponseTooLargeError

from support.fakes import FakeCluster
from support.socket_fake_broker import SocketFakeBroker

TP = TopicPartition("big", 0)
LIMIT = 100_000
BIG = 300_000


@pytest.fixture
def broker() -> Iterator[SocketFakeBroker]:
    cluster = FakeCluster(1)
    cluster.create_topic(TP.topic, 1)
    cluster.produce(TP, [b"x" * BIG])
    cluster.produce(TP, [b"small-%d" % i for i in range(10)])
    srv = SocketFakeBroker(cluster)
    yield srv
    srv.close()


def test_poll_raises_an_oversized_response_once_per_occurrence_and_keeps_running(
    broker: SocketFakeBroker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="kaflux")
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "auto.offset.reset": "earliest",
            "receive.message.max.bytes": LIMIT,
            # (the consumer's frame limit is at least fetch.max.bytes + 512, as librdkafka's)
            "fetch.max.bytes": LIMIT // 2,
            "max.partition.fetch.bytes": LIMIT // 2,
            "reconnect.backoff.ms": 10,
            "retry.backoff.ms": 10,
        }
    )
    raised: list[ResponseTooLargeError] = []
    try:
        consumer.assign([TP])
        deadline = time.monotonic() + 20
        while len(raised) < 3:
            assert time.monotonic() < deadline, f"raised {len(raised)} times"
            try:
                records = consumer.poll(0.2)
            except ResponseTooLargeError as exc:
                raised.append(exc)
                continue
            assert not list(records), "no record can be read past the oversized response"
        # every raise is one failed fetch: each closed the connection (plus the bootstrap one)
        assert len(raised) <= broker.connections
        message = str(raised[0])
        assert "receive.message.max.bytes=100000" in message
        assert f"127.0.0.1:{broker.port}" in message
        assert raised[0].limit == LIMIT
        assert raised[0].size > BIG
        assert raised[0].broker.startswith(f"127.0.0.1:{broker.port}")
        warnings = [
            r
            for r in caplog.records
            if r.levelno == logging.WARNING and "receive.message.max.bytes" in r.getMessage()
        ]
        assert len(warnings) == 1, "one WARNING per broker per interval, however often it happens"
        assert str(raised[0].size) in warnings[0].getMessage()
        # still running: past the large batch, the rest is read
        consumer.seek(TP, 1)
        values: list[bytes | None] = []
        deadline = time.monotonic() + 20
        while len(values) < 10:
            assert time.monotonic() < deadline, f"read {values}"
            try:
                values += [r.value for r in consumer.poll(0.2)]
            except ResponseTooLargeError:
                continue  # a fetch of offset 0 that was already in flight when we sought
        assert values == [b"small-%d" % i for i in range(10)]
    finally:
        consumer.close(timeout=5)
