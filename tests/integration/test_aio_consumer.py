"""``kaflux.aio.AsyncConsumer`` on real brokers: every coroutine, ``async for``, coroutine
listeners in a two-member group on one loop, and cancellation under load."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from kaflux import Consumer, ConsumerRebalanceListener, OffsetAndMetadata, Producer, TopicPartition
from kaflux.aio import AsyncConsumer, AsyncConsumerRebalanceListener
from kaflux.devbrokers.brokers import Broker
from kaflux.devbrokers.mock_cluster import MockCluster
from kaflux.errors import IllegalStateError

from support.aio_helpers import LOOPS, WAIT_S, create_topic, eventually, partitions_of, produce, run
from support.group_helpers import GROUP_TIMINGS

pytestmark = pytest.mark.integration


def config(bootstrap: str, **extra: object) -> dict[str, object]:
    return {
        "bootstrap.servers": bootstrap,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        **{k.replace("_", "."): v for k, v in extra.items()},
    }


@pytest.mark.parametrize("loop", LOOPS)
def test_every_coroutine_answers_as_the_sync_consumer_does(broker: Broker, loop: str) -> None:
    topic = create_topic(broker.bootstrap_servers, 2)
    values = produce(broker.bootstrap_servers, topic, 2, 300)
    tps = partitions_of(topic, 2)
    group = f"kx-aio-{topic}"
    with Consumer(config(broker.bootstrap_servers, group_id=group)) as sync:
        sync.assign(tps)
        expected = {
            "end": sync.end_offsets(tps, WAIT_S),
            "beginning": sync.beginning_offsets(tps, WAIT_S),
            "times": sync.offsets_for_times({tps[0]: 0}, WAIT_S),
            "partitions": sync.partitions_for(topic, WAIT_S),
        }

    async def main() -> None:
        async with AsyncConsumer(config(broker.bootstrap_servers, group_id=group, max_poll_records=50)) as c:
            c.assign(tps)
            assert c.assignment() == set(tps)
            assert await c.end_offsets(tps, WAIT_S) == expected["end"]
            assert await c.beginning_offsets(tps, WAIT_S) == expected["beginning"]
            assert await c.offsets_for_times({tps[0]: 0}, WAIT_S) == expected["times"]
            assert await c.partitions_for(topic, WAIT_S) == expected["partitions"]
            assert topic in await c.list_topics(WAIT_S)
            assert await c.position(tps[0], WAIT_S) == 0
            got: list[bytes] = []
            deadline = time.monotonic() + WAIT_S
            while len(got) < 100:
                assert time.monotonic() < deadline
                batch = await c.poll(1.0)
                assert len(batch) <= 50  # max.poll.records bounds the work per call
                got += [r.value for r in batch]
            batch_arrow = await c.poll_arrow(1.0)
            got += batch_arrow.column("value").to_pylist()
            await c.commit_sync(timeout=WAIT_S)
            committed = await c.committed(tps, WAIT_S)
            positions = {tp: await c.position(tp, WAIT_S) for tp in tps}
            assert {tp: (m.offset if m else 0) for tp, m in committed.items()} == positions
            assert sum(positions.values()) == len(got)
            # commit_async returns an awaitable of what it committed
            c.seek(tps[0], 1)
            assert await c.commit_async({tps[0]: 1}) == {tps[0]: OffsetAndMetadata(1)}
            assert (await c.committed([tps[0]], WAIT_S))[tps[0]].offset == 1  # type: ignore[union-attr]
            c.pause([tps[1]])
            assert c.paused() == {tps[1]}
            c.resume([tps[1]])
            c.seek_to_beginning([tps[0]])
            assert await c.position(tps[0], WAIT_S) == 0
            metrics = await c.metrics(1.0)
            assert metrics["kaflux-consumer-metrics"]["records-returned"] == len(got)
            assert set(got) <= set(values)
            assert len(set(got)) == len(got)
        with pytest.raises(IllegalStateError):
            await c.poll(0)

    run(main(), loop)


@pytest.mark.parametrize("loop", LOOPS)
def test_async_for_yields_every_record_once_and_ends_when_closed(kafka: Broker, loop: str) -> None:
    topic = create_topic(kafka.bootstrap_servers, 3)
    values = produce(kafka.bootstrap_servers, topic, 3, 2000)

    async def main() -> list[bytes]:
        consumer = AsyncConsumer(config(kafka.bootstrap_servers))
        consumer.assign(partitions_of(topic, 3))
        got: list[bytes] = []

        async def read() -> None:
            async for record in consumer:
                got.append(record.value)
                if len(got) == len(values):
                    await consumer.close()  # the loop ends at its next turn

        await asyncio.wait_for(read(), WAIT_S)
        return got

    got = run(main(), loop)
    assert sorted(got) == values


class RecordingAsyncListener(AsyncConsumerRebalanceListener):
    """Awaits inside each callback and records what it saw, and on which thread."""

    def __init__(self, name: str, log: list[tuple[str, str, frozenset[int]]]) -> None:
        self.name = name
        self.log = log
        self.threads: set[int] = set()
        self.owned: set[int] = set()

    async def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        await asyncio.sleep(0.05)  # a real await: the rebalance waits for it
        self.threads.add(threading.get_ident())
        self.owned |= {tp.partition for tp in partitions}
        self.log.append((self.name, "assigned", frozenset(tp.partition for tp in partitions)))

    async def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        await asyncio.sleep(0.05)
        self.threads.add(threading.get_ident())
        self.owned -= {tp.partition for tp in partitions}
        self.log.append((self.name, "revoked", frozenset(tp.partition for tp in partitions)))


GROUPS = [
    pytest.param("kafka", "classic", "cooperative-sticky", id="kafka-classic-cooperative"),
    pytest.param("kafka", "consumer", None, id="kafka-kip848"),
    pytest.param("tansu", "classic", "cooperative-sticky", id="tansu-classic-cooperative"),
    pytest.param("tansu", "classic", "range", id="tansu-classic-eager"),
    pytest.param("mock", "consumer", None, id="mock-kip848"),
]


@pytest.mark.parametrize(("where", "protocol", "strategy"), GROUPS)
def test_coroutine_listeners_of_two_members_on_one_loop(
    request: pytest.FixtureRequest, where: str, protocol: str, strategy: str | None
) -> None:
    partitions = 4
    if where == "mock":
        cluster: MockCluster = request.getfixturevalue("mock_cluster")
        bootstrap = cluster.bootstrap_servers
        topic = f"kx-aio-{time.monotonic_ns()}"
        with Producer({"bootstrap.servers": bootstrap}) as p:  # the mock creates 4 partitions
            p.send(topic, b"create", partition=0).result(WAIT_S)
    else:
        bootstrap = request.getfixturevalue(where).bootstrap_servers
        topic = create_topic(bootstrap, partitions)
    extra: dict[str, object] = {"group.protocol": protocol}
    if strategy is not None:
        extra.update({"partition.assignment.strategy": strategy, **GROUP_TIMINGS})
    group = f"kx-aio-group-{time.monotonic_ns()}"
    log: list[tuple[str, str, frozenset[int]]] = []

    async def main() -> tuple[RecordingAsyncListener, RecordingAsyncListener]:
        a = AsyncConsumer(config(bootstrap, group_id=group, **{k: v for k, v in extra.items()}))
        b = AsyncConsumer(config(bootstrap, group_id=group, **{k: v for k, v in extra.items()}))
        la, lb = RecordingAsyncListener("A", log), RecordingAsyncListener("B", log)
        stop = asyncio.Event()

        async def member(consumer: AsyncConsumer) -> None:
            while not stop.is_set():
                await consumer.poll(0.2)

        a.subscribe([topic], listener=la)
        task_a = asyncio.create_task(member(a))
        await eventually(lambda: _true(la.owned == set(range(partitions))), WAIT_S, f"A owns {la.owned}")
        b.subscribe([topic], listener=lb)
        task_b = asyncio.create_task(member(b))

        async def split() -> bool:
            owned_a = {tp.partition for tp in a.assignment()}
            owned_b = {tp.partition for tp in b.assignment()}
            return (
                bool(owned_a)
                and bool(owned_b)
                and owned_a | owned_b == set(range(partitions))
                and not owned_a & owned_b
                and la.owned == owned_a
                and lb.owned == owned_b
            )

        await eventually(split, WAIT_S, f"the two members never split the partitions: {log}")
        state = await a.group_state(WAIT_S)
        assert state.group_id == group and state.protocol == protocol and state.generation >= 0
        assert state.assignment == a.assignment()
        assert a.group_metadata().member_id == state.member_id
        stop.set()
        await asyncio.gather(task_a, task_b)
        await a.close(10)  # the revocation callback on leaving is awaited too
        await b.close(10)
        return la, lb

    la, lb = run(main(), "asyncio")
    assert la.threads == lb.threads and len(la.threads) == 1  # every callback ran on the loop
    # A is told its first non-empty assignment is every partition; Apache Kafka's KIP-848
    # coordinator may first answer A's join with nothing, which is reported too (as Java does)
    first = next(i for i, (_, _, parts) in enumerate(log) if parts)
    assert log[first] == ("A", "assigned", frozenset(range(partitions))), log
    assert all(entry == ("A", "assigned", frozenset()) for entry in log[:first]), log
    assert any(name == "B" and kind == "assigned" and parts for name, kind, parts in log)
    assert any(name == "A" and kind == "revoked" and parts for name, kind, parts in log)
    # every partition A gave up was revoked (awaited) before B was told it had it
    first_b = next(i for i, (n, k, parts) in enumerate(log) if n == "B" and k == "assigned" and parts)
    moved = log[first_b][2]
    revoked_before = set().union(*[p for n, k, p in log[:first_b] if n == "A" and k == "revoked"])
    assert moved <= revoked_before, log


async def _true(value: bool) -> bool:
    return value


def test_a_plain_listener_still_works_under_the_async_consumer(kafka: Broker) -> None:
    topic = create_topic(kafka.bootstrap_servers, 2)
    seen: list[set[TopicPartition]] = []

    class Plain(ConsumerRebalanceListener):
        def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
            seen.append(partitions)

    async def main() -> None:
        settings = config(kafka.bootstrap_servers, group_id=f"g-{topic}", **GROUP_TIMINGS)
        async with AsyncConsumer(settings) as c:
            c.subscribe([topic], listener=Plain())
            deadline = time.monotonic() + WAIT_S
            while not seen:
                assert time.monotonic() < deadline, "never assigned"
                await c.poll(0.2)
            leaving = c.unsubscribe()  # local state at once; the leave goes on in a task
            await leaving
            assert c.assignment() == set()

    run(main())
    assert seen[0] == set(partitions_of(topic, 2))


@pytest.mark.parametrize("loop", LOOPS)
def test_cancelled_polls_under_load_lose_and_repeat_nothing(kafka: Broker, loop: str) -> None:
    """wait_for(poll(), short timeout) while a producer thread keeps sending: every record
    arrives exactly once, in order per partition, and positions match what was returned."""
    partitions, count = 2, 20_000
    topic = create_topic(kafka.bootstrap_servers, partitions)
    sent: list[bytes] = []

    def send() -> None:
        with Producer({"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 2}) as producer:
            for i in range(count):
                value = b"v%08d" % i
                producer.send(topic, value, partition=i % partitions)
                sent.append(value)
                if i % 500 == 0:
                    time.sleep(0.002)  # records keep arriving while the consumer polls
            producer.flush(WAIT_S)

    async def main() -> tuple[list[tuple[int, int, bytes]], int, dict[TopicPartition, int]]:
        got: list[tuple[int, int, bytes]] = []
        cancelled = 0
        async with AsyncConsumer(config(kafka.bootstrap_servers, max_poll_records=100)) as consumer:
            consumer.assign(partitions_of(topic, partitions))
            producer = threading.Thread(target=send)
            producer.start()
            deadline = time.monotonic() + 90
            while len(got) < count:
                assert time.monotonic() < deadline, f"{len(got)} of {count} records"
                try:
                    records = await asyncio.wait_for(consumer.poll(1.0), timeout=0.003)
                except TimeoutError:
                    cancelled += 1
                    continue
                got += [(r.partition, r.offset, r.value) for r in records]
            await asyncio.to_thread(producer.join, WAIT_S)
            positions = {tp: await consumer.position(tp, WAIT_S) for tp in partitions_of(topic, partitions)}
        return got, cancelled, positions

    got, cancelled, positions = run(main(), loop)
    assert cancelled > 0, "no poll was cancelled: the test proved nothing"
    values = [v for _, _, v in got]
    assert len(values) == len(set(values)) == count
    assert sorted(values) == sorted(sent)
    for p in range(partitions):
        offsets = [o for part, o, _ in got if part == p]
        assert offsets == list(range(len(offsets)))  # no gap, no duplicate
        assert positions[TopicPartition(topic, p)] == len(offsets)


def test_a_cancelled_commit_sync_leaves_the_consumer_usable(kafka: Broker) -> None:
    topic = create_topic(kafka.bootstrap_servers, 1)
    produce(kafka.bootstrap_servers, topic, 1, 10)
    tp = TopicPartition(topic, 0)

    async def main() -> None:
        async with AsyncConsumer(config(kafka.bootstrap_servers, group_id=f"g-{topic}")) as c:
            c.assign([tp])
            while not await c.poll(1.0):
                pass
            task = asyncio.ensure_future(c.commit_sync(timeout=WAIT_S))
            await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await c.commit_sync(timeout=WAIT_S)  # usable at once, and the commit lands
            committed = (await c.committed([tp], WAIT_S))[tp]
            assert committed is not None and committed.offset == await c.position(tp, WAIT_S)

    run(main())
