"""The share fetch buffer as a :class:`kaflux.blocking.Signal`: how an event loop waits for
acquired records with no thread of its own, and how the blocking driver does. [test]"""

from __future__ import annotations

from kaflux.blocking import SignalWait, Steps, run_sync
from kaflux.consumer.share.fetch_buffer import ShareCompletedFetch, ShareFetchBuffer
from kaflux.structs import TopicPartition


def _fetch() -> ShareCompletedFetch:
    return ShareCompletedFetch(TopicPartition("jobs", 0), 1, memoryview(b"abc"), [(0, 0, 1)])


def test_a_watcher_is_called_on_data_and_on_wakeup_until_unwatched() -> None:
    buffer = ShareFetchBuffer()
    calls: list[str] = []

    def waiter() -> None:
        calls.append("called")

    assert buffer.watch(waiter) is False  # nothing there yet: wait
    buffer.add([_fetch()])
    assert calls == ["called"]
    buffer.wakeup()
    assert calls == ["called", "called"]
    buffer.unwatch(waiter)
    buffer.add([_fetch()])
    buffer.wakeup()
    assert calls == ["called", "called"]  # not called once unwatched


def test_watch_says_when_there_is_no_need_to_wait_and_consumes_the_wakeup() -> None:
    buffer = ShareFetchBuffer()
    buffer.wakeup()
    assert buffer.watch(lambda: None) is True  # a wakeup came first
    assert buffer.watch(lambda: None) is False  # ... and was consumed
    buffer.add([_fetch()])
    assert buffer.watch(lambda: None) is True  # data is there
    fetch = buffer.take()
    assert fetch is not None
    assert buffer.watch(lambda: None) is False  # taken: nothing queued any more


def test_the_blocking_driver_waits_on_the_buffer_through_await_signal() -> None:
    buffer = ShareFetchBuffer()
    buffer.add([_fetch()])

    def steps() -> Steps[bool]:
        yield SignalWait(buffer, 5.0)  # data is there: returns at once
        return not buffer.is_empty()

    assert run_sync(steps()) is True
    assert buffer.await_signal(0.0) is True
