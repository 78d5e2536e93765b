"""kaflux.aio.driver: the same wait steps awaited on an event loop; cancellation; one loop."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from typing import Any

import pytest

from kaflux.aio.driver import FutureAwaitable, LoopGuard, run_async
from kaflux.blocking import AwaitableWait, DoneWait, FutureWait, SignalWait, Steps
from kaflux.consumer.fetch_buffer import FetchBuffer
from kaflux.errors import ConcurrentAccessError, KafkaError, KafkaTimeoutError


def doubled(future: Future[int], log: list[str], timeout: float = 5.0) -> Steps[int]:
    try:
        value: int = yield FutureWait(future, timeout, "doubled()")
        return value * 2
    finally:
        log.append("finally")


def test_a_future_completed_on_another_thread_resumes_the_coroutine_on_the_loop() -> None:
    async def main() -> tuple[int, int, int]:
        future: Future[int] = Future()
        threading.Timer(0.05, future.set_result, (4,)).start()
        threads = threading.active_count()
        value = await run_async(doubled(future, []))
        return value, threads, threading.active_count()

    value, before, after = asyncio.run(main())
    assert value == 8
    assert after <= before  # no executor thread was started to wait


def test_errors_and_timeouts_are_the_sync_drivers() -> None:
    async def main() -> list[str]:
        log: list[str] = []
        failed: Future[int] = Future()
        failed.set_exception(KafkaError("no"))
        with pytest.raises(KafkaError, match="no"):
            await run_async(doubled(failed, log))
        with pytest.raises(KafkaTimeoutError, match=r"doubled\(\) did not complete within 0.02 s"):
            await run_async(doubled(Future(), log, 0.02))
        return log

    assert asyncio.run(main()) == ["finally", "finally"]


def test_cancelling_runs_the_calls_finally_and_leaves_the_network_future_alone() -> None:
    async def main() -> tuple[list[str], Future[int]]:
        log: list[str] = []
        future: Future[int] = Future()
        task = asyncio.ensure_future(run_async(doubled(future, log)))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return log, future

    log, future = asyncio.run(main())
    assert log == ["finally"]
    assert not future.cancelled() and not future.done()
    future.set_result(1)  # the network thread may still complete it: no error


def test_done_wait_and_signal_wait_and_awaitables() -> None:
    buffer = FetchBuffer()

    def steps(future: Future[Any]) -> Steps[tuple[bool, bool, str]]:
        done_now = yield DoneWait(future, 0.01)
        yield SignalWait(buffer, 5.0)
        done_later = yield DoneWait(future, 5.0)
        awaited = yield AwaitableWait(asyncio.sleep(0, "slept"))
        return done_now, done_later, awaited

    async def main() -> tuple[bool, bool, str]:
        future: Future[int] = Future()

        def later() -> None:
            buffer.wakeup()  # from another thread: settles the loop's wait
            future.set_result(1)

        threading.Timer(0.05, later).start()
        return await run_async(steps(future))

    assert asyncio.run(main()) == (False, True, "slept")


def test_a_wakeup_before_the_wait_is_not_lost() -> None:
    buffer = FetchBuffer()
    buffer.wakeup()

    def steps() -> Steps[None]:
        yield SignalWait(buffer, 60.0)

    asyncio.run(asyncio.wait_for(run_async(steps()), 5.0))
    assert not buffer.watch(lambda: None)  # the wakeup was consumed by the wait


def test_future_awaitable_bridges_only_when_awaited() -> None:
    class Counting(Future[int]):
        callbacks = 0

        def add_done_callback(self, fn: Any) -> None:
            Counting.callbacks += 1
            super().add_done_callback(fn)

    async def wait(awaitable: FutureAwaitable[int]) -> int:
        return await awaitable

    async def main() -> int:
        future = Counting()
        awaitable = FutureAwaitable(future)
        await asyncio.sleep(0.01)
        assert Counting.callbacks == 0  # nothing is bridged until awaited
        waiting = asyncio.ensure_future(wait(awaitable))
        await asyncio.sleep(0.01)
        assert Counting.callbacks == 1 and not waiting.done()
        threading.Thread(target=future.set_result, args=(3,)).start()
        return await waiting

    assert asyncio.run(main()) == 3
    assert Counting.callbacks == 1


def test_the_guard_refuses_a_second_loop_and_other_threads_while_pending() -> None:
    guard = LoopGuard("Thing")

    def waiting(future: Future[int]) -> Steps[int]:
        return (yield FutureWait(future, 5.0, "waiting"))

    first = asyncio.new_event_loop()
    future: Future[int] = Future()
    task = first.create_task(guard.run(waiting(future)))
    first.run_until_complete(asyncio.sleep(0.01))
    errors: list[BaseException] = []

    def from_a_thread() -> None:
        try:
            guard.check_thread()
        except ConcurrentAccessError as error:
            errors.append(error)

        async def other_loop() -> None:
            await guard.run(waiting(Future()))

        try:
            asyncio.run(other_loop())
        except ConcurrentAccessError as error:
            errors.append(error)

    thread = threading.Thread(target=from_a_thread)
    thread.start()
    thread.join(5)
    assert [type(e) for e in errors] == [ConcurrentAccessError, ConcurrentAccessError]
    assert "coroutine pending" in str(errors[0]) and "another event loop" in str(errors[1])
    future.set_result(1)
    assert first.run_until_complete(task) == 1
    first.close()
    assert asyncio.run(guard.run(waiting(completed(2)))) == 2  # its loop closed: a new one may take it


def completed(value: int) -> Future[int]:
    future: Future[int] = Future()
    future.set_result(value)
    return future
