"""Reachability: failed connections logged at once and throttled per address; the text a timed-out
blocking call adds. Injected time, no sockets (issue 18)."""

from __future__ import annotations

import logging

import pytest

from kaflux.errors import KafkaConnectionError
from kaflux.network.reachability import WARN_INTERVAL_MS, Reachability

REFUSED = KafkaConnectionError("connect to 127.0.0.1:9 failed: ECONNREFUSED")


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_the_first_failure_is_a_warning_naming_the_address_and_the_cause(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "kaflux.network")
    Reachability("consumer-1").failed("127.0.0.1:9", REFUSED, now_ms=1_000)
    assert warnings(caplog) == [
        "consumer-1: cannot connect to broker 127.0.0.1:9: connect to 127.0.0.1:9 failed: ECONNREFUSED; "
        "retrying with backoff"
    ]


def test_later_failures_of_one_address_are_throttled_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "kaflux.network")
    reach = Reachability("c")
    for step in range(50):  # a failure every 100 ms: backoff steps far shorter than the interval
        reach.failed("127.0.0.1:9", REFUSED, now_ms=step * 100)
    assert len(warnings(caplog)) == 1
    reach.failed("127.0.0.1:9", REFUSED, now_ms=WARN_INTERVAL_MS)
    lines = warnings(caplog)
    assert len(lines) == 2 and "(50 failed attempts since the last warning)" in lines[1]


def test_each_address_has_its_own_throttle(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "kaflux.network")
    reach = Reachability("c")
    reach.failed("127.0.0.1:9", REFUSED, now_ms=0)
    reach.failed("127.0.0.1:10", REFUSED, now_ms=1)
    reach.failed("127.0.0.1:9", REFUSED, now_ms=2)
    assert [line.split()[5] for line in warnings(caplog)] == ["127.0.0.1:9:", "127.0.0.1:10:"]


def test_unreachable_names_every_address_tried_with_its_last_error() -> None:
    reach = Reachability("c")
    assert reach.unreachable() is None  # nothing tried yet
    reach.failed("127.0.0.1:9", REFUSED, now_ms=0)
    reach.failed("127.0.0.1:10", KafkaConnectionError("connection to 127.0.0.1:10 not established"), now_ms=0)
    assert reach.unreachable() == (
        "no broker reachable at 127.0.0.1:9 (connect to 127.0.0.1:9 failed: ECONNREFUSED), "
        "127.0.0.1:10 (connection to 127.0.0.1:10 not established)"
    )


def test_a_ready_connection_ends_the_report_and_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "kaflux.network")
    reach = Reachability("c")
    reach.failed("127.0.0.1:9", REFUSED, now_ms=0)
    reach.failed("127.0.0.1:10", REFUSED, now_ms=0)
    reach.ready("127.0.0.1:10")
    assert reach.unreachable() is None  # one broker answers: a timeout is not about reachability
    assert "connected to broker 127.0.0.1:10 after 1 failed attempts" in caplog.text
    reach.closed("127.0.0.1:10")
    assert reach.unreachable() is not None and "127.0.0.1:9" in str(reach.unreachable())
    reach.failed("127.0.0.1:9", REFUSED, now_ms=1)  # still throttled after the reconnection elsewhere
    assert len(warnings(caplog)) == 2


def test_a_broken_ready_connection_is_called_lost(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "kaflux.network")
    reach = Reachability("c")
    reach.ready("127.0.0.1:9")
    reach.closed("127.0.0.1:9")
    reach.failed(
        "127.0.0.1:9", KafkaConnectionError("broker closed the connection"), now_ms=0, established=True
    )
    assert warnings(caplog) == [
        "c: lost the connection to broker 127.0.0.1:9: broker closed the connection; retrying with backoff"
    ]
