"""Bad timeouts fail at once with InvalidArgumentError (a KafkaError and a ValueError): NaN used
to make poll() spin a core forever, and a negative one raised a bare ValueError."""

from __future__ import annotations

import math
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kaflux import AdminClient, Consumer, Producer, TopicPartition
from kaflux.errors import InvalidArgumentError, KafkaError
from kaflux.timeouts import MAX_TIMEOUT_S, timeout_seconds

BAD = [math.nan, -1, -0.001, "1", True]


@pytest.mark.parametrize("bad", BAD, ids=repr)
def test_timeout_seconds_rejects_bad_values(bad: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="timeout"):
        timeout_seconds(bad, 1.0)


def test_timeout_seconds_defaults_and_clamps() -> None:
    assert timeout_seconds(None, 7.0) == 7.0
    assert timeout_seconds(0, 7.0) == 0.0
    assert timeout_seconds(2, 7.0) == 2.0
    assert timeout_seconds(math.inf, 7.0) == MAX_TIMEOUT_S


def test_invalid_argument_error_is_a_kafka_error_and_a_value_error() -> None:
    assert issubclass(InvalidArgumentError, KafkaError)
    assert issubclass(InvalidArgumentError, ValueError)


@pytest.fixture
def servers() -> Iterator[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    yield f"127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


def _raises_at_once(call: Callable[[], object]) -> BaseException | None:
    """Run ``call`` on a helper thread; return what it raised (fail if it does not return)."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(5)
    assert outcome, "the call did not return within 5 s"
    return outcome[0]


@pytest.mark.parametrize("bad", [math.nan, -1], ids=repr)
def test_consumer_calls_reject_bad_timeouts_at_once(servers: str, bad: float) -> None:
    consumer = Consumer({"bootstrap.servers": servers})
    try:
        consumer.assign([TopicPartition("t", 0)])
        for call in (
            lambda: consumer.poll(bad),
            lambda: consumer.position(TopicPartition("t", 0), timeout=bad),
            lambda: consumer.list_topics(timeout=bad),
            lambda: consumer.close(timeout=bad),
        ):
            assert isinstance(_raises_at_once(call), InvalidArgumentError)
    finally:
        consumer.close(timeout=1)


@pytest.mark.parametrize("bad", [math.nan, -1], ids=repr)
def test_producer_and_admin_calls_reject_bad_timeouts_at_once(servers: str, bad: float) -> None:
    producer = Producer({"bootstrap.servers": servers})
    admin = AdminClient({"bootstrap.servers": servers})
    try:
        for call in (
            lambda: producer.flush(bad),
            lambda: producer.close(bad),
            lambda: admin.list_topics(timeout=bad),
            lambda: admin.close(bad),
        ):
            assert isinstance(_raises_at_once(call), InvalidArgumentError)
    finally:
        producer.close(1)
        admin.close(1)
