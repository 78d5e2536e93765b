"""A cluster nobody listens at: every client says so at once and names it when it gives up
(issue 18). The consumer, the producer, the admin client and the ``kaflux`` command each log one
WARNING naming the address within 5 s, no more while the interval runs (throttled), and their
timed-out blocking calls name the address and its last error. (The command:
tests/cli/test_cli_unreachable.py.)"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable

import pytest

from kaflux import AdminClient, Consumer, Producer, TopicPartition
from kaflux.errors import KafkaTimeoutError

#: reconnect quickly, so that the throttle (not the backoff) is what keeps the log quiet
FAST_RETRY = {"reconnect.backoff.ms": 10, "reconnect.backoff.max.ms": 50}


@pytest.fixture
def closed_address() -> str:
    """host:port of a loopback port that refuses connections (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"127.0.0.1:{port}"


def warnings_about(caplog: pytest.LogCaptureFixture, address: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and r.name == "kaflux.network" and address in r.getMessage()
    ]


def wait_for(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def check_logged_once_and_named(caplog: pytest.LogCaptureFixture, address: str, error: str) -> None:
    lines = warnings_about(caplog, address)
    assert len(lines) == 1, lines  # dozens of failed attempts by now: one line (throttled)
    assert "ECONNREFUSED" in lines[0]
    assert f"no broker reachable at {address} (" in error and "ECONNREFUSED" in error


def test_consumer(caplog: pytest.LogCaptureFixture, closed_address: str) -> None:
    caplog.set_level(logging.WARNING, "kaflux.network")
    started = time.monotonic()
    consumer = Consumer({"bootstrap.servers": closed_address, **FAST_RETRY})
    try:
        tp = TopicPartition("orders", 0)
        consumer.assign([tp])
        consumer.poll(0.2)  # starts the connection attempts
        assert wait_for(lambda: bool(warnings_about(caplog, closed_address)), 5.0)
        assert time.monotonic() - started < 5.0
        with pytest.raises(KafkaTimeoutError) as info:
            consumer.position(tp, timeout=2.0)
    finally:
        consumer.close(timeout=1.0)
    check_logged_once_and_named(caplog, closed_address, str(info.value))


def test_producer_send_says_no_broker_is_reachable_instead_of_blaming_the_topic(
    caplog: pytest.LogCaptureFixture, closed_address: str
) -> None:
    caplog.set_level(logging.WARNING, "kaflux.network")
    producer = Producer({"bootstrap.servers": closed_address, "max.block.ms": 2500, **FAST_RETRY})
    try:
        with pytest.raises(KafkaTimeoutError) as info:
            producer.send("orders", b"x")
        assert wait_for(lambda: bool(warnings_about(caplog, closed_address)), 0.1)
    finally:
        producer.close(timeout=1.0)
    check_logged_once_and_named(caplog, closed_address, str(info.value))
    assert "create it first" not in str(info.value)


def test_admin_client(caplog: pytest.LogCaptureFixture, closed_address: str) -> None:
    caplog.set_level(logging.WARNING, "kaflux.network")
    started = time.monotonic()
    with AdminClient({"bootstrap.servers": closed_address, **FAST_RETRY}) as admin:
        with pytest.raises(KafkaTimeoutError) as info:
            admin.list_topics(timeout=2.5)
    assert time.monotonic() - started < 5.0
    check_logged_once_and_named(caplog, closed_address, str(info.value))
