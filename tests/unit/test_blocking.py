"""kaflux.blocking: a blocking call written once as wait steps, driven on the calling thread."""

from __future__ import annotations

import inspect
import threading
from concurrent.futures import Future
from typing import Any

import pytest

from kaflux.blocking import AwaitableWait, DoneWait, FutureWait, SignalWait, Steps, blocking, run_sync
from kaflux.consumer.fetch_buffer import FetchBuffer
from kaflux.errors import KafkaError, KafkaTimeoutError


class Client:
    def __init__(self) -> None:
        self.log: list[str] = []

    @blocking
    def call(self, future: Future[int], timeout: float = 1.0) -> Steps[int]:
        """Doubles what the future holds."""
        try:
            value: int = yield FutureWait(future, timeout, "call()")
            return value * 2
        finally:
            self.log.append("finally")


def completed(value: int) -> Future[int]:
    future: Future[int] = Future()
    future.set_result(value)
    return future


def test_the_sync_driver_sends_each_outcome_back_and_returns_the_result() -> None:
    client = Client()
    assert client.call(completed(21)) == 42
    assert client.log == ["finally"]


def test_an_error_is_thrown_into_the_call_so_its_finally_runs() -> None:
    client = Client()
    failed: Future[int] = Future()
    failed.set_exception(KafkaError("no"))
    with pytest.raises(KafkaError, match="no"):
        client.call(failed)
    with pytest.raises(KafkaTimeoutError, match=r"call\(\) did not complete within 0.01 s"):
        client.call(Future(), 0.01)
    assert client.log == ["finally", "finally"]


def test_a_future_completed_by_another_thread_ends_the_wait() -> None:
    future: Future[int] = Future()
    threading.Timer(0.05, future.set_result, (5,)).start()
    assert Client().call(future, 5.0) == 10


def test_the_blocking_method_keeps_its_name_doc_signature_and_steps() -> None:
    client = Client()
    assert client.call.__name__ == "call"
    assert client.call.__doc__ == "Doubles what the future holds."
    assert list(inspect.signature(client.call).parameters) == ["future", "timeout"]
    steps = Client.call.steps(client, completed(1))
    step = next(steps)
    assert isinstance(step, FutureWait) and step.what == "call()"
    with pytest.raises(StopIteration) as stop:
        steps.send(1)
    assert stop.value.value == 2


def test_done_wait_reports_whether_the_future_finished_without_raising_its_error() -> None:
    def steps(future: Future[Any]) -> Steps[bool]:
        return (yield DoneWait(future, 0.01))

    failed: Future[int] = Future()
    failed.set_exception(KafkaError("kept"))
    assert run_sync(steps(failed)) is True
    assert run_sync(steps(Future())) is False


def test_a_signal_wait_blocks_until_the_buffer_is_woken() -> None:
    buffer = FetchBuffer()

    def steps() -> Steps[None]:
        yield SignalWait(buffer, 5.0)

    threading.Timer(0.05, buffer.wakeup).start()
    run_sync(steps())  # returns well before 5 s (the test's timeout would catch a hang)


def test_an_async_listener_under_the_sync_driver_is_refused_and_closed() -> None:
    ran: list[str] = []

    async def listener() -> None:
        ran.append("ran")

    coroutine = listener()

    def steps() -> Steps[None]:
        yield AwaitableWait(coroutine)

    with pytest.raises(TypeError, match=r"kaflux\.aio\.AsyncConsumer"):
        run_sync(steps())
    assert ran == []
    assert inspect.getcoroutinestate(coroutine) == inspect.CORO_CLOSED
