"""NetworkThread: one pass (events, managers, I/O, expiry) and the close sequence."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import pytest

from kaflux.errors import IllegalStateError, KafkaConnectionError
from kaflux.network.network_thread import FAILED_MANAGER_RETRY_MS, NetworkThread
from kaflux.network.requests import MAX_POLL_TIMEOUT_MS, PollResult, RequestManager, UnsentRequest
from kaflux.protocol.messages.metadata import MetadataRequest


@dataclass
class Log:
    entries: list[tuple[Any, ...]] = field(default_factory=list)

    def __call__(self, *entry: Any) -> None:
        self.entries.append(entry)

    def kinds(self) -> list[str]:
        return [e[0] for e in self.entries]


class FakeClient:
    def __init__(self, log: Log) -> None:
        self.log = log
        self.woken = threading.Event()

    def wakeup(self) -> None:
        self.log("wakeup")
        self.woken.set()

    def in_flight_count(self, node_id: int | None = None) -> int:
        return 0


class FakeDelegate:
    """Records what the loop asks of the delegate; ``poll`` waits until woken (bounded)."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.client = FakeClient(log)
        self.closed_with: Exception | None = None
        #: requests added and not yet answered; ``answer`` says whether poll answers them
        self.pending: list[UnsentRequest] = []
        self.answer = True

    def add(self, request: UnsentRequest, now_ms: int) -> None:
        self.log("add", request)
        self.pending.append(request)

    def add_all(self, requests: list[UnsentRequest], now_ms: int) -> None:
        for request in requests:
            self.add(request, now_ms)

    def poll(self, timeout_ms: int, now_ms: int, clock: Callable[[], int]) -> None:
        self.log("io", timeout_ms)
        if self.answer and self.pending:
            answered, self.pending = self.pending, []
            for request in answered:
                request.handler(None)  # type: ignore[arg-type]
            return
        self.client.woken.wait(min(timeout_ms, 1_000) / 1000)
        self.client.woken.clear()

    def fail_unreachable(self, now_ms: int) -> None:
        pass

    def has_unsent(self) -> bool:
        return False

    def close(self, error: Exception) -> None:
        self.log("delegate-close")
        self.closed_with = error


class FakeManager(RequestManager):
    def __init__(
        self,
        log: Log,
        name: str,
        wait_ms: int,
        unsent: list[UnsentRequest[Any]] | None = None,
        app_wait_ms: int = MAX_POLL_TIMEOUT_MS,
    ) -> None:
        self.log, self.name, self.wait_ms, self.unsent = log, name, wait_ms, unsent or []
        self.app_wait_ms = app_wait_ms
        self.closing: list[UnsentRequest[Any]] = []

    def maximum_time_to_wait(self, now_ms: int) -> int:
        return self.app_wait_ms

    def poll(self, now_ms: int) -> PollResult:
        self.log("poll", self.name)
        return PollResult(self.wait_ms, list(self.unsent))

    def poll_on_close(self, now_ms: int) -> PollResult:
        self.log("poll_on_close", self.name)
        return PollResult(unsent=list(self.closing))


@dataclass
class Poison:
    """An event the fake processor fails on (with ``error``: a bug by default)."""

    future: Future[Any] = field(default_factory=Future)
    error: Exception = field(default_factory=lambda: ValueError("cannot process"))


class FakeProcessor:
    def __init__(self, log: Log) -> None:
        self.log = log
        self.failed_with: Exception | None = None
        self.deadline_ms: int | None = None

    def process(self, event: Any, now_ms: int) -> None:
        if isinstance(event, Poison):
            raise event.error
        self.log("process", event)

    def expire(self, now_ms: int) -> None:
        self.log("expire")

    def next_deadline_ms(self) -> int | None:
        return self.deadline_ms

    def fail_all(self, error: Exception) -> None:
        self.log("fail_all")
        self.failed_with = error


def unsent() -> UnsentRequest:
    return UnsentRequest(MetadataRequest(), None, lambda _: None)


def thread_with(log: Log, *managers: FakeManager) -> tuple[NetworkThread, FakeDelegate, FakeProcessor]:
    delegate, processor = FakeDelegate(log), FakeProcessor(log)
    thread = NetworkThread("test-network", delegate, list(managers), processor)  # type: ignore[arg-type]
    return thread, delegate, processor


def test_one_pass_drains_events_then_polls_managers_then_does_io_then_expires() -> None:
    log = Log()
    request = unsent()
    thread, _, _ = thread_with(
        log,
        FakeManager(log, "m1", 300, [request], app_wait_ms=700),
        FakeManager(log, "m2", 40, app_wait_ms=900),
    )
    thread.submit("e1", wake=False)
    thread.submit("e2", wake=False)
    thread.run_once()
    assert log.entries == [
        ("process", "e1"),
        ("process", "e2"),
        ("poll", "m1"),
        ("add", request),
        ("poll", "m2"),
        ("io", 40),
        ("expire",),
    ]
    assert thread.max_time_to_wait_ms == 700, "the application waits as long as every manager allows"
    assert thread.loop_count == 1


class BrokenManager(FakeManager):
    def poll(self, now_ms: int) -> PollResult:
        self.log("poll", self.name)
        raise IllegalStateError("a bug in this manager")


def test_a_manager_that_raises_does_not_starve_the_others_or_the_io(caplog: pytest.LogCaptureFixture) -> None:
    log = Log()
    request = unsent()
    thread, _, _ = thread_with(
        log, BrokenManager(log, "broken", 300), FakeManager(log, "m", 5_000, [request])
    )
    for _ in range(2):
        thread.run_once()
    assert log.entries[:4] == [
        ("poll", "broken"),
        ("poll", "m"),
        ("add", request),
        ("io", FAILED_MANAGER_RETRY_MS),
    ]
    assert thread.loop_count == 2
    tracebacks = [r for r in caplog.records if r.exc_info and r.levelno >= logging.ERROR]
    assert len(tracebacks) == 1, "one traceback per broken manager, not one per pass"
    assert "BrokenManager.poll failed" in tracebacks[0].getMessage()


def test_io_wait_is_capped_when_no_manager_needs_a_pass_sooner() -> None:
    log = Log()
    thread, _, _ = thread_with(log, FakeManager(log, "m", 10 * MAX_POLL_TIMEOUT_MS))
    thread.delegate.client.woken.set()  # type: ignore[attr-defined]
    thread.run_once()
    assert ("io", MAX_POLL_TIMEOUT_MS) in log.entries


def test_io_wait_ends_in_time_to_expire_the_next_overdue_event(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kaflux.network.network_thread.monotonic_ms", lambda: 10_000)
    log = Log()
    thread, _, processor = thread_with(log, FakeManager(log, "m", 3_000))
    processor.deadline_ms = 10_250
    thread.delegate.client.woken.set()  # type: ignore[attr-defined]
    thread.run_once()
    assert ("io", 250) in log.entries
    processor.deadline_ms = 9_000  # already overdue: do not wait at all
    thread.delegate.client.woken.set()  # type: ignore[attr-defined]
    thread.run_once()
    assert log.entries[-2] == ("io", 0)


def test_event_that_fails_to_process_fails_its_future_and_the_rest_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = Log()
    bad = Poison()
    thread, _, _ = thread_with(log)
    thread.submit(bad, wake=False)
    thread.submit("good", wake=False)
    thread.delegate.client.woken.set()  # type: ignore[attr-defined]
    thread.run_once()
    with pytest.raises(ValueError, match="cannot process"):
        bad.future.result(0)
    assert ("process", "good") in log.entries
    assert "failed to process" in caplog.text


def test_a_user_error_fails_its_future_without_an_error_log(caplog: pytest.LogCaptureFixture) -> None:
    log = Log()
    misuse = Poison(error=IllegalStateError("assign() while subscribed"))
    thread, _, _ = thread_with(log)
    thread.submit(misuse, wake=False)
    thread.delegate.client.woken.set()  # type: ignore[attr-defined]
    with caplog.at_level(logging.DEBUG, logger="kaflux"):
        thread.run_once()
    with pytest.raises(IllegalStateError):
        misuse.future.result(0)
    assert [r.levelno for r in caplog.records if "assign()" in r.getMessage()] == [logging.DEBUG]
    assert not any(r.exc_info for r in caplog.records)


def test_submit_wakes_the_loop_unless_told_not_to() -> None:
    log = Log()
    thread, _, _ = thread_with(log)
    thread.submit("quiet", wake=False)
    assert log.kinds() == []
    thread.submit("loud")
    assert log.kinds() == ["wakeup"]


def test_wakeup_before_wakes_only_a_loop_sleeping_past_the_due_time() -> None:
    log = Log()
    thread, _, _ = thread_with(log)
    thread.sleeping_until_ms = 1_000
    thread.wakeup_before(1_000)
    assert log.kinds() == []
    thread.wakeup_before(999)
    assert log.kinds() == ["wakeup"]


def test_close_runs_poll_on_close_then_fails_everything_left() -> None:
    log = Log()
    manager = FakeManager(log, "m", 1_000)
    farewell = unsent()
    manager.closing = [farewell]
    thread, delegate, processor = thread_with(log, manager)
    thread.start()
    assert thread.close(timeout_s=5.0) is True
    thread.join(5)
    assert not thread.is_alive()
    tail = [e for e in log.entries[log.kinds().index("poll_on_close") :] if e[0] != "io"]
    assert tail == [("poll_on_close", "m"), ("add", farewell), ("delegate-close",), ("fail_all",)]
    assert isinstance(delegate.closed_with, KafkaConnectionError)
    assert processor.failed_with is delegate.closed_with


def test_close_waits_for_the_closing_requests_only_until_they_are_answered() -> None:
    log = Log()
    manager = FakeManager(log, "m", 1_000)
    answered: list[object] = []
    manager.closing = [UnsentRequest(MetadataRequest(), None, answered.append)]
    thread, delegate, _ = thread_with(log, manager)
    delegate.answer = False
    thread.start()
    closer = threading.Thread(target=thread.close, args=(30.0,), daemon=True)
    closer.start()
    with pytest.raises(AssertionError):  # not answered yet: the close keeps waiting
        _wait(lambda: not thread.is_alive(), 0.5)
    delegate.answer = True
    delegate.client.wakeup()
    _wait(lambda: not thread.is_alive(), 5.0)
    assert answered == [None]


def test_close_does_not_wait_for_requests_queued_before_it() -> None:
    log = Log()
    manager = FakeManager(log, "m", 1_000, unsent=[unsent()])
    thread, delegate, _ = thread_with(log, manager)
    delegate.answer = False
    thread.start()
    _wait(lambda: "add" in log.kinds(), 5.0)
    assert thread.close(timeout_s=30.0) is True
    thread.join(5)
    assert not thread.is_alive()


def _wait(condition: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        threading.Event().wait(0.01)


def test_close_of_a_thread_never_started_returns_at_once() -> None:
    thread, _, _ = thread_with(Log())
    assert thread.close(timeout_s=0.0) is True
