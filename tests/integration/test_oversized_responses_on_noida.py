"""noida-db ignores fetch size limits, so a consumer of a topic with more data than its
``receive.message.max.bytes`` gets responses above it (issue 24, D2). Such a response must not be
dropped silently: ``poll()`` raises :class:`~kaflux.errors.ResponseTooLargeError` naming the limit,
the size and the broker, and the consumer keeps working (a larger limit then reads everything)."""

from __future__ import annotations

import time
import uuid

import pytest

from kaflux import Consumer, Producer, TopicPartition
from kaflux.devbrokers.brokers import Broker
from kaflux.errors import ResponseTooLargeError

from support.scenarios import create_topic

pytestmark = pytest.mark.integration

LIMIT = 1_000_000
RECORDS = 300
VALUE = b"v" * 10_000  # 3 MB in all: three times the limit


def test_poll_raises_when_noida_answers_above_receive_message_max_bytes(noida: Broker) -> None:
    topic = f"kx-oversized-{uuid.uuid4().hex[:10]}"
    create_topic(noida.bootstrap_servers, topic, 1)
    with Producer({"bootstrap.servers": noida.bootstrap_servers, "linger.ms": 50}) as producer:
        for _ in range(RECORDS):
            producer.send(topic, VALUE, partition=0)
        producer.flush(30)
    tp = TopicPartition(topic, 0)
    small = Consumer(
        {
            "bootstrap.servers": noida.bootstrap_servers,
            "auto.offset.reset": "earliest",
            "receive.message.max.bytes": LIMIT,
            "fetch.max.bytes": LIMIT // 2,
            "max.partition.fetch.bytes": LIMIT // 2,
        }
    )
    try:
        small.assign([tp])
        raised: list[ResponseTooLargeError] = []
        deadline = time.monotonic() + 20
        while len(raised) < 2:
            assert time.monotonic() < deadline, f"raised {len(raised)} times in 20 s"
            try:
                assert len(small.poll(0.5)) == 0
            except ResponseTooLargeError as exc:
                raised.append(exc)
        assert f"receive.message.max.bytes={LIMIT}" in str(raised[0])
        assert raised[0].size > LIMIT
        assert noida.bootstrap_servers.split(",")[0] in raised[0].broker
    finally:
        small.close(5)
    # the same data with a limit above the whole topic reads through
    large = Consumer({"bootstrap.servers": noida.bootstrap_servers, "auto.offset.reset": "earliest"})
    try:
        large.assign([tp])
        count = 0
        deadline = time.monotonic() + 20
        while count < RECORDS:
            assert time.monotonic() < deadline, f"read {count} of {RECORDS}"
            count += len(large.poll(0.5))
    finally:
        large.close(5)
