"""Broker-side regex subscriptions (KIP-848 SubscriptionPattern) on Apache Kafka 4.4."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from kaflux import AdminClient, Consumer, NewTopic, Producer, SubscriptionPattern, TopicPartition
from kaflux.errors import IllegalStateError, InvalidRegularExpressionError

pytestmark = pytest.mark.integration


def _create(bootstrap: str, *names: str) -> None:
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(n, 1, 1) for n in names], timeout=60.0)


def _produce(bootstrap: str, topic: str, value: bytes) -> None:
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        producer.send(topic, value, partition=0).result(30.0)


def _consumer(bootstrap: str, **extra: Any) -> Consumer:
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": f"g-re-{uuid.uuid4().hex[:8]}",
        "group.protocol": "consumer",
        "auto.offset.reset": "earliest",
    }
    config.update(extra)
    return Consumer(config)


def test_the_coordinator_resolves_the_pattern_and_assigns_topics_created_later(kafka: Any) -> None:
    bootstrap = kafka.bootstrap_servers
    prefix = f"kx-re-{uuid.uuid4().hex[:8]}"
    _create(bootstrap, f"{prefix}-a", f"{prefix}-other")
    _produce(bootstrap, f"{prefix}-a", b"a")
    _produce(bootstrap, f"{prefix}-other", b"other")
    with _consumer(bootstrap) as consumer:
        consumer.subscribe(pattern=SubscriptionPattern(f"{prefix}-[ab]"))
        seen: dict[str, bytes] = {}
        deadline = time.monotonic() + 60
        while "a" not in seen and time.monotonic() < deadline:
            seen.update({r.topic[-1]: r.value or b"" for r in consumer.poll(0.5)})
        assert seen == {"a": b"a"}
        # a topic created now: the coordinator adds it to the assignment
        _create(bootstrap, f"{prefix}-b")
        _produce(bootstrap, f"{prefix}-b", b"b")
        deadline = time.monotonic() + 90
        while "b" not in seen and time.monotonic() < deadline:
            seen.update({r.topic[-1]: r.value or b"" for r in consumer.poll(0.5)})
        assert seen == {"a": b"a", "b": b"b"}
        assert consumer.assignment() == {TopicPartition(f"{prefix}-a", 0), TopicPartition(f"{prefix}-b", 0)}


def test_a_pattern_the_broker_refuses_fails_poll_clearly(kafka: Any) -> None:
    with _consumer(kafka.bootstrap_servers) as consumer:
        consumer.subscribe(pattern=SubscriptionPattern("kx-(?=lookahead)"))
        deadline = time.monotonic() + 60
        with pytest.raises(InvalidRegularExpressionError, match="RE2J"):
            while time.monotonic() < deadline:
                consumer.poll(0.5)


def test_a_subscription_pattern_needs_the_consumer_protocol(kafka: Any) -> None:
    with _consumer(kafka.bootstrap_servers, **{"group.protocol": "classic"}) as consumer:
        with pytest.raises(IllegalStateError, match=r"group\.protocol=consumer"):
            consumer.subscribe(pattern=SubscriptionPattern("x.*"))
