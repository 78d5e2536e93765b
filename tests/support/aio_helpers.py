"""Helpers of the kaflux.aio integration tests: running a coroutine on the default loop or
uvloop, topics, producing a known set of records, and a loop-lag probe. [test]"""

from __future__ import annotations

import asyncio
import gc
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import pytest

from kaflux import AdminClient, NewTopic, Producer, TopicPartition

T = TypeVar("T")
WAIT_S = 30.0
LOOPS = ["asyncio", "uvloop"]


def loop_factory(kind: str) -> Callable[[], asyncio.AbstractEventLoop]:
    if kind == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        return uvloop.new_event_loop  # type: ignore[no-any-return]
    return asyncio.new_event_loop


def run(coro: Coroutine[Any, Any, T], loop: str = "asyncio", timeout: float = 120.0) -> T:
    """Run ``coro`` to completion on a new loop of the given kind, bounded by ``timeout``."""

    async def bounded() -> T:
        return await asyncio.wait_for(coro, timeout)

    with asyncio.Runner(loop_factory=loop_factory(loop)) as runner:
        return runner.run(bounded())


def create_topic(bootstrap: str, partitions: int = 1, name: str | None = None) -> str:
    topic = name or f"kx-aio-{uuid.uuid4().hex[:10]}"
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions)], timeout=WAIT_S)
    return topic


def produce(bootstrap: str, topic: str, partitions: int, count: int, size: int = 0) -> list[bytes]:
    """``count`` distinct values, round-robin over the partitions (sync producer); the values."""
    pad = b"." * size
    values = [b"v%08d" % i + pad for i in range(count)]
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as producer:
        for i, value in enumerate(values):
            producer.send(topic, value, partition=i % partitions)
        producer.flush(WAIT_S)
    return values


def partitions_of(topic: str, count: int) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in range(count)]


class LagProbe:
    """A task ticking every ``tick_s``; ``max_gap_s`` is the longest it waited between ticks.

    From ``start()`` to ``stop()`` the objects that existed at ``start()`` are frozen out of the
    garbage collector (:func:`gc.freeze`): a pytest worker holds about a million of them, and a
    full collection that falls inside the measurement then stalls every thread for 0.1-1.8 s
    (measured), which is the test runner's lag, not the client's. Objects the measured code
    creates are collected as usual.
    """

    def __init__(self, tick_s: float = 0.005) -> None:
        self.tick_s = tick_s
        self.gaps: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(self.tick_s)
            now = time.perf_counter()
            self.gaps.append(now - last)
            last = now

    def start(self) -> None:
        gc.freeze()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass
        finally:
            gc.unfreeze()

    @property
    def max_gap_s(self) -> float:
        return max(self.gaps, default=0.0)

    def p99_s(self) -> float:
        ordered = sorted(self.gaps)
        return ordered[int(len(ordered) * 0.99)] if ordered else 0.0


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        await asyncio.sleep(0.05)
