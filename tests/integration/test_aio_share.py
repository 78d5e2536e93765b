"""``kaflux.aio.AsyncShareConsumer`` on librdkafka's share-capable mock cluster: implicit and
explicit acknowledgement, per-partition commit results, ``async for``, cancelled polls under
load, one thread per client, and misuse.

A share group starts at the latest offset, so every test waits until its members joined (and
the assignment stopped changing) before it produces.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator

import confluent_kafka
import pytest

from kaflux import AcknowledgeType, ConsumerRecord, TopicPartition
from kaflux.aio import AsyncShareConsumer
from kaflux.errors import ConcurrentAccessError, WakeupError

from support.aio_helpers import LOOPS, WAIT_S, run
from support.share_mock import ShareMockCluster

pytestmark = pytest.mark.integration

PARTITIONS = 4  # the mock creates every topic with 4 partitions
SETTLED_S = 2.5  # the mock's heartbeat interval here is 1 s
QUIET_S = 3.0  # a record delivered twice would show up within this


@pytest.fixture(scope="module")
def share_mock() -> Iterator[ShareMockCluster]:
    with ShareMockCluster() as cluster:
        yield cluster


def _names() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"aio-share-topic-{suffix}", f"aio-share-group-{suffix}"


class Feed:
    """A confluent-kafka producer; the first record creates the topic (4 partitions)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
        self.send([b"create"], partition=0)

    def send(self, values: list[bytes], partition: int | None = None) -> None:
        for value in values:
            if partition is None:
                self.producer.produce(self.topic, value)
            else:
                self.producer.produce(self.topic, value, partition=partition)
        assert self.producer.flush(10) == 0


def _consumer(bootstrap: str, group: str, **extra: object) -> AsyncShareConsumer:
    config: dict[str, object] = {"bootstrap.servers": bootstrap, "group.id": group}
    config.update({k.replace("_", "."): v for k, v in extra.items()})
    return AsyncShareConsumer(config)


async def _joined(*consumers: AsyncShareConsumer) -> None:
    """Until every member is STABLE with partitions of its own, all 4 held, and no change for
    :data:`SETTLED_S`; nothing may arrive meanwhile (nothing is produced yet)."""
    deadline = time.monotonic() + WAIT_S
    last: list[frozenset[TopicPartition]] = []
    since = time.monotonic()
    while time.monotonic() < deadline:
        states = []
        for consumer in consumers:
            assert await consumer.poll(0.02) == []
            states.append(await consumer.group_state())
        now = [s.assignment for s in states]
        if now != last:
            last, since = now, time.monotonic()
        held = [tp for a in now for tp in a]
        settled = all(s.state == "STABLE" and s.assignment for s in states)
        if settled and len(held) == len(set(held)) == PARTITIONS and time.monotonic() - since >= SETTLED_S:
            return
    raise AssertionError(f"the share group did not settle within {WAIT_S} s: {last}")


def _values(prefix: str, count: int) -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(count)]


def _send_spread(feed: Feed, values: list[bytes]) -> None:
    for p in range(PARTITIONS):
        feed.send(values[p::PARTITIONS], partition=p)


async def _poll_until(consumer: AsyncShareConsumer, count: int) -> list[ConsumerRecord]:
    got: list[ConsumerRecord] = []
    deadline = time.monotonic() + WAIT_S
    while len(got) < count:
        assert time.monotonic() < deadline, f"{len(got)} of {count} records"
        got += await consumer.poll(0.2)
    return got


@pytest.mark.parametrize("loop", LOOPS)
def test_implicit_two_members_on_one_loop_read_every_record_once_with_count_one(
    share_mock: ShareMockCluster, loop: str
) -> None:
    topic, group = _names()
    feed = Feed(share_mock.bootstrap_servers, topic)
    values = _values("rec", 400)

    async def main() -> dict[str, list[ConsumerRecord]]:
        got: dict[str, list[ConsumerRecord]] = {"a": [], "b": []}
        a = _consumer(share_mock.bootstrap_servers, group)
        b = _consumer(share_mock.bootstrap_servers, group)
        async with a, b:
            a.subscribe([topic])
            b.subscribe([topic])
            await _joined(a, b)
            await asyncio.to_thread(_send_spread, feed, values)

            async def read(name: str, consumer: AsyncShareConsumer, until: float) -> None:
                while time.monotonic() < until:
                    got[name] += [r for r in await consumer.poll(0.2) if r.value.startswith(b"rec-")]
                    if len(got["a"]) + len(got["b"]) >= len(values) and until > time.monotonic() + QUIET_S:
                        until = time.monotonic() + QUIET_S  # then keep polling: no redelivery shows up

            end = time.monotonic() + WAIT_S
            await asyncio.gather(read("a", a, end), read("b", b, end))
        return got

    got = run(main(), loop)
    records = got["a"] + got["b"]
    counts = Counter(r.value for r in records)
    assert set(counts) == set(values)
    assert max(counts.values()) == 1, [v for v, n in counts.items() if n > 1]
    assert {r.delivery_count for r in records} == {1}
    assert got["a"] and got["b"], {n: len(g) for n, g in got.items()}  # both members shared the work


def test_explicit_release_redelivers_with_count_two_and_commits_report_each_partition(
    share_mock: ShareMockCluster,
) -> None:
    topic, group = _names()
    feed = Feed(share_mock.bootstrap_servers, topic)
    values = _values("job", 8)
    callbacks: list[tuple[dict[TopicPartition, set[int]], object, int]] = []

    async def main() -> list[ConsumerRecord]:
        consumer = _consumer(share_mock.bootstrap_servers, group, share_acknowledgement_mode="explicit")
        async with consumer:
            consumer.set_acknowledgement_commit_callback(
                lambda offsets, error: callbacks.append((offsets, error, threading.get_ident()))
            )
            consumer.subscribe([topic])
            await _joined(consumer)
            await asyncio.to_thread(_send_spread, feed, values)

            got: list[ConsumerRecord] = []

            async def read_until(delivery_count: int) -> None:
                """RELEASE first deliveries, ACCEPT later ones, each before the next poll."""
                deadline = time.monotonic() + WAIT_S
                while sum(r.delivery_count == delivery_count for r in got) < len(values):
                    assert time.monotonic() < deadline, [(r.value, r.delivery_count) for r in got]
                    for record in await consumer.poll(0.2):
                        first = record.delivery_count == 1
                        ack = AcknowledgeType.RELEASE if first else AcknowledgeType.ACCEPT
                        consumer.acknowledge(record, ack)
                        got.append(record)

            await read_until(1)
            released = await consumer.commit_sync(WAIT_S)
            every = {TopicPartition(topic, p) for p in range(PARTITIONS)}
            # one result per partition with acknowledgements still pending (earlier polls' went
            # with the ShareFetch that followed them), none an error
            assert released and set(released) <= every and set(released.values()) == {None}, released
            assert callbacks and callbacks[-1][2] == threading.get_ident()  # on the loop's thread

            await read_until(2)
            accepted = await consumer.commit_async()
            assert accepted and set(accepted) <= every and set(accepted.values()) == {None}, accepted
            quiet = time.monotonic() + QUIET_S
            while time.monotonic() < quiet:
                assert [r for r in await consumer.poll(0.2) if r.value.startswith(b"job-")] == []
            acked: dict[TopicPartition, set[int]] = {}
            for offsets_by_tp, _, _ in callbacks:
                for tp, offsets in offsets_by_tp.items():
                    acked.setdefault(tp, set()).update(offsets)
            assert all(r.offset in acked[r.topic_partition] for r in got)  # the callback said so
            return got

    got = run(main())
    assert Counter((r.value, r.delivery_count) for r in got) == Counter(
        [(v, 1) for v in values] + [(v, 2) for v in values]
    )  # each record once released (count 1), redelivered once (count 2), then accepted: never again
    assert all(error is None for _, error, _ in callbacks), callbacks


@pytest.mark.parametrize("loop", LOOPS)
def test_async_for_reads_every_record_once_and_ends_when_closed(
    share_mock: ShareMockCluster, loop: str
) -> None:
    topic, group = _names()
    feed = Feed(share_mock.bootstrap_servers, topic)
    values = _values("iter", 100)

    async def main() -> tuple[list[ConsumerRecord], list[ConsumerRecord]]:
        got: list[ConsumerRecord] = []
        consumer = _consumer(share_mock.bootstrap_servers, group)
        consumer.subscribe([topic])
        await _joined(consumer)
        await asyncio.to_thread(_send_spread, feed, values)
        async for record in consumer:
            got.append(record)
            if len(got) == len(values):
                break
        await consumer.close()
        after = [record async for record in consumer]  # closed: the iteration ends at once
        return got, after

    got, after = run(main(), loop)
    assert sorted(r.value for r in got) == sorted(values)
    assert {r.delivery_count for r in got} == {1}
    assert after == []


@pytest.mark.parametrize("loop", LOOPS)
def test_cancelled_polls_under_load_lose_and_repeat_nothing(share_mock: ShareMockCluster, loop: str) -> None:
    """wait_for(poll(), 3 ms) while a producer thread keeps sending: every record arrives
    exactly once, with delivery count 1 (nothing was released by a cancellation)."""
    topic, group = _names()
    feed = Feed(share_mock.bootstrap_servers, topic)
    values = _values("load", 5000)

    def send() -> None:
        for i in range(0, len(values), 250):
            _send_spread(feed, values[i : i + 250])  # records keep arriving while the consumer polls

    async def main() -> tuple[list[ConsumerRecord], int]:
        got: list[ConsumerRecord] = []
        cancelled = 0
        async with _consumer(share_mock.bootstrap_servers, group, max_poll_records=100) as consumer:
            consumer.subscribe([topic])
            await _joined(consumer)
            producer = threading.Thread(target=send)
            producer.start()
            deadline = time.monotonic() + 90
            quiet_until: float | None = None
            while quiet_until is None or time.monotonic() < quiet_until:
                assert time.monotonic() < deadline, f"{len(got)} of {len(values)} records"
                try:
                    records = await asyncio.wait_for(consumer.poll(1.0), timeout=0.003)
                except TimeoutError:
                    cancelled += 1
                    continue
                got += [r for r in records if r.value.startswith(b"load-")]
                if quiet_until is None and len(got) >= len(values):
                    quiet_until = time.monotonic() + QUIET_S  # keep polling: no redelivery shows up
            await asyncio.to_thread(producer.join, WAIT_S)
        return got, cancelled

    got, cancelled = run(main(), loop)
    assert cancelled > 0, "no poll was cancelled: the test proved nothing"
    counts = Counter(r.value for r in got)
    assert set(counts) == set(values)
    assert max(counts.values()) == 1, [v for v, n in counts.items() if n > 1][:10]
    assert {r.delivery_count for r in got} == {1}


@pytest.mark.parametrize("loop", LOOPS)
def test_the_client_adds_exactly_one_thread(share_mock: ShareMockCluster, loop: str) -> None:
    topic, group = _names()
    feed = Feed(share_mock.bootstrap_servers, topic)

    async def main() -> tuple[int, int, int, set[str]]:
        await asyncio.sleep(0)
        before = threading.active_count()
        names_before = {t.name for t in threading.enumerate()}
        consumer = _consumer(share_mock.bootstrap_servers, group)
        consumer.subscribe([topic])
        await _joined(consumer)
        feed.send(_values("t", 20), partition=1)
        await _poll_until(consumer, 20)
        await consumer.commit_sync(WAIT_S)
        await consumer.metrics()
        during = threading.active_count()
        new = {t.name for t in threading.enumerate()} - names_before
        await consumer.close()
        deadline = time.monotonic() + 2  # the thread ends right after it says it stopped
        while threading.active_count() > before and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        return before, during, threading.active_count(), new

    before, during, after, new = run(main(), loop)
    assert during == before + 1, new
    assert len(new) == 1 and next(iter(new)).startswith("kaflux-share-consumer-network-"), new
    assert after == before


def test_misuse_from_a_second_loop_or_another_thread_is_refused(share_mock: ShareMockCluster) -> None:
    topic, group = _names()
    consumer = _consumer(share_mock.bootstrap_servers, group)
    other = asyncio.new_event_loop()
    thread = threading.Thread(target=other.run_forever, daemon=True)
    thread.start()
    try:
        asyncio.run_coroutine_threadsafe(consumer.metrics(), other).result(WAIT_S)  # bound to `other`

        async def elsewhere() -> None:
            with pytest.raises(ConcurrentAccessError, match="another event loop"):
                await consumer.commit_sync(WAIT_S)

        run(elsewhere())
    finally:
        other.call_soon_threadsafe(other.stop)
        thread.join(WAIT_S)
        other.close()  # the first loop is gone: the client may move to a new one

    async def pending() -> None:
        consumer.subscribe([topic])
        task = asyncio.ensure_future(consumer.poll(WAIT_S))
        await asyncio.sleep(0.2)  # the poll waits for records (nothing is produced)
        assert not task.done()
        errors: list[BaseException] = []

        def from_a_thread() -> None:
            for call in (consumer.subscription, lambda: consumer.subscribe([topic])):
                try:
                    call()
                except ConcurrentAccessError as error:
                    errors.append(error)

        await asyncio.to_thread(from_a_thread)
        assert len(errors) == 2 and all("coroutine pending" in str(e) for e in errors), errors
        consumer.wakeup()  # any thread may; here the loop's
        with pytest.raises(WakeupError):
            await task
        assert await asyncio.to_thread(consumer.subscription) == {topic}  # nothing pending: allowed
        await consumer.close()

    run(pending())
