"""Waiting on an event loop: the async driver of :mod:`kaflux.blocking`'s steps, and the guard
that keeps a client on one loop. [app: runs on the event loop's thread; the network thread only
schedules callbacks onto the loop with ``loop.call_soon_threadsafe``]

A blocking call's generator is the same one the sync client runs; :func:`run_async` sends it
the outcome of each step as the sync driver does, but waits by awaiting a loop future:

* a network-thread future (:class:`~kaflux.blocking.FutureWait`, :class:`~kaflux.blocking.DoneWait`)
  gets a done-callback that, on the network thread, hands the completion to the loop with
  ``call_soon_threadsafe``; a ``call_later`` timer bounds the wait;
* a signal (:class:`~kaflux.blocking.SignalWait`: data in the fetch buffer, room in the
  producer's buffer) calls a waiter that does the same;
* an awaitable (an ``async def`` rebalance listener) is awaited.

No executor and no thread: awaiting costs one callback on the loop. Cancelling the awaiting task
throws ``CancelledError`` into the generator, so its ``finally`` blocks run (the guard, the
wakeup registration) and it re-raises; the network thread's future is left alone (it may still
complete, as a cancelled Java call may still take effect) and nothing was taken from a buffer.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Generator
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

from kaflux.blocking import AwaitableWait, DoneWait, FutureWait, SignalWait, Step, Steps
from kaflux.errors import ConcurrentAccessError, KafkaTimeoutError
from kaflux.timeouts import explain

T = TypeVar("T")


def _settle(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _notifier(loop: asyncio.AbstractEventLoop, waiter: asyncio.Future[None]) -> Callable[[], None]:
    """A callable any thread may call to settle ``waiter`` on ``loop``."""

    def notify() -> None:
        try:
            loop.call_soon_threadsafe(_settle, waiter)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    return notify


async def _until_done(future: Future[Any], timeout_s: float) -> bool:
    """Wait on the loop until ``future`` is done or ``timeout_s`` passes; whether it is done."""
    if future.done():
        return True
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[None] = loop.create_future()
    notify = _notifier(loop, waiter)
    future.add_done_callback(lambda _: notify())
    timer = None if timeout_s == float("inf") else loop.call_later(max(0.0, timeout_s), _settle, waiter)
    try:
        await waiter
    finally:
        if timer is not None:
            timer.cancel()
    return future.done()


async def _until_signalled(step: SignalWait) -> None:
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[None] = loop.create_future()
    notify = _notifier(loop, waiter)
    signal = step.signal
    try:
        if signal.watch(notify):
            return
        timer = loop.call_later(max(0.0, step.timeout_s), _settle, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
    finally:
        signal.unwatch(notify)


async def wait_async(step: Step) -> Any:
    """Wait for one step on the running loop (its outcome, as :func:`kaflux.blocking.wait_sync`)."""
    if isinstance(step, FutureWait):
        if not await _until_done(step.future, step.timeout_s):
            message = f"{step.what} did not complete within {step.timeout_s:g} s"
            reason = step.why() if step.why is not None else None
            raise KafkaTimeoutError(message if reason is None else explain(message, reason))
        return step.future.result()
    if isinstance(step, DoneWait):
        return await _until_done(step.future, step.timeout_s)
    if isinstance(step, SignalWait):
        await _until_signalled(step)
        return None
    assert isinstance(step, AwaitableWait)
    return await step.awaitable


async def run_async(steps: Steps[T]) -> T:
    """Drive a blocking call on the running loop (see the module docstring)."""
    outcome: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = steps.send(outcome) if error is None else steps.throw(error)
        except StopIteration as stop:
            result: T = stop.value
            return result
        error = None
        try:
            outcome = await wait_async(step)
        except BaseException as exc:  # CancelledError included: the call's finally blocks run
            outcome, error = None, exc


class FutureAwaitable(Generic[T]):
    """An awaitable of a network-thread future, bridged to the loop only when awaited (so a
    send whose result nobody awaits costs nothing more). ``future`` is the future itself."""

    __slots__ = ("future",)

    def __init__(self, future: Future[T]) -> None:
        self.future = future

    def __await__(self) -> Generator[Any, None, T]:
        return self._wait().__await__()

    async def _wait(self) -> T:
        future = self.future
        if not future.done():
            await _until_done(future, float("inf"))
        return future.result()


class LoopGuard:
    """Keeps an async client on one event loop, and other threads off it while one of its
    coroutines is pending: either misuse raises :class:`~kaflux.errors.ConcurrentAccessError`
    at once. A client may move to a new loop once its loop is closed."""

    def __init__(self, client: str) -> None:
        self._client = client
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = -1
        self._pending = 0
        self._lock = threading.Lock()

    def check_thread(self) -> None:
        """For plain methods: refuse a thread other than the loop's while a coroutine is pending.
        (Lock-free: two int reads; a coroutine that starts or ends meanwhile makes no difference
        to a caller that is misusing the client either way.)"""
        if self._pending and threading.get_ident() != self._thread:
            raise ConcurrentAccessError(
                f"this {self._client} has a coroutine pending on its event loop; it may not be "
                "used from another thread meanwhile (call it from the loop's thread)"
            )

    def enter(self) -> None:
        """A coroutine starts on the running loop."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._loop is not loop:
                if self._loop is not None and not self._loop.is_closed():
                    raise ConcurrentAccessError(
                        f"this {self._client} belongs to another event loop; an async client may "
                        "be used from one event loop only (create one client per loop)"
                    )
                self._loop, self._thread = loop, threading.get_ident()
            self._pending += 1

    def exit(self) -> None:
        with self._lock:
            self._pending -= 1

    async def run(self, steps: Steps[T]) -> T:
        """Drive ``steps`` as one coroutine of this client."""
        try:
            self.enter()
        except BaseException:
            steps.close()
            raise
        try:
            return await run_async(steps)
        finally:
            self.exit()
