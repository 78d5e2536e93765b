"""``kaflux.aio`` on real brokers: AsyncProducer (every coroutine, a full buffer, transactions),
AsyncAdminClient (every call), exactly one thread per client, a loop that never stalls, and
misuse refused at once."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

from kaflux import Consumer, NewTopic, OffsetAndMetadata, Producer, TopicPartition
from kaflux.aio import AsyncAdminClient, AsyncConsumer, AsyncProducer
from kaflux.devbrokers.brokers import Broker
from kaflux.errors import (
    ConcurrentAccessError,
    InvalidTxnStateError,
    KafkaTimeoutError,
    UnknownTopicOrPartitionError,
)

from support.aio_helpers import LOOPS, WAIT_S, LagProbe, create_topic, eventually, partitions_of, produce, run

pytestmark = pytest.mark.integration


def read_all(bootstrap: str, topic: str, partitions: int, count: int, **extra: object) -> list[bytes]:
    """Every value of ``topic`` with a sync consumer, until ``count`` arrived."""
    settings = {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest", **extra}
    got: list[bytes] = []
    with Consumer(settings) as consumer:
        consumer.assign(partitions_of(topic, partitions))
        deadline = time.monotonic() + WAIT_S
        while len(got) < count:
            assert time.monotonic() < deadline, f"{len(got)} of {count}"
            got += [r.value for r in consumer.poll(0.5)]
    return got


# -- AsyncProducer -------------------------------------------------------------------------------


@pytest.mark.parametrize("loop", LOOPS)
def test_every_producer_coroutine(broker: Broker, loop: str) -> None:
    topic = create_topic(broker.bootstrap_servers, 2)

    async def main() -> list[Any]:
        settings = {"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5}
        async with AsyncProducer(settings, value_serializer=str.encode) as producer:
            assert len(await producer.partitions_for(topic)) == 2
            pending = [await producer.send(topic, f"s{i}", partition=i % 2) for i in range(100)]
            first = await producer.send_and_wait(topic, "w", partition=0)
            assert first.topic == topic and first.partition == 0 and first.offset >= 0
            batch = pa.record_batch({"value": pa.array([b"a%d" % i for i in range(50)], pa.binary())})
            arrow = await producer.send_arrow(topic, batch)
            await producer.flush(WAIT_S)
            metas = [await p for p in pending] + [await a for a in arrow]
            metrics = await producer.metrics(1.0)
            assert metrics["producer-metrics"]["record-send-total"] >= 150
        return metas

    metas = run(main(), loop)
    by_partition: dict[int, list[int]] = {}
    for meta in metas[:100]:
        by_partition.setdefault(meta.partition, []).append(meta.offset)
    assert all(offsets == sorted(offsets) for offsets in by_partition.values())
    got = read_all(broker.bootstrap_servers, topic, 2, 151)
    assert sorted(v for v in got if v.startswith(b"s")) == sorted(b"s%d" % i for i in range(100))
    assert sum(1 for v in got if v.startswith(b"a")) == 50


@pytest.mark.parametrize("loop", LOOPS)
def test_send_waits_on_the_loop_while_the_buffer_is_full(kafka: Broker, loop: str) -> None:
    """A 64 KiB buffer.memory with 16 KiB batches of 4 KiB records: sends wait for room on the
    loop (a 5 ms ticker keeps ticking), and every record is delivered."""
    topic = create_topic(kafka.bootstrap_servers, 1)
    count = 2000
    settings = {
        "bootstrap.servers": kafka.bootstrap_servers,
        "buffer.memory": 65536,
        "batch.size": 16384,
        "linger.ms": 1,
    }

    async def main() -> tuple[float, int]:
        probe = LagProbe()
        probe.start()
        async with AsyncProducer(settings) as producer:
            await producer.partitions_for(topic)
            ticks_before = len(probe.gaps)
            futures = [await producer.send(topic, b"%06d" % i + b"." * 4096) for i in range(count)]
            ticks_while_sending = len(probe.gaps) - ticks_before
            await producer.flush(WAIT_S)
            offsets = [(await f).offset for f in futures]
        await probe.stop()
        assert offsets == list(range(count))
        return probe.max_gap_s, ticks_while_sending

    max_gap, ticks = run(main(), loop)
    assert max_gap < 0.1, f"the loop stalled {max_gap * 1000:.0f} ms"
    # 8 MB through a 64 KiB buffer: the sends spend most of their time waiting for room, and the
    # ticker runs meanwhile. A send that blocked the loop while it waited would leave only the
    # one turn per YIELD_EVERY sends (2 here).
    assert ticks >= 10, f"the ticker ran {ticks} times while 2000 sends waited for buffer room"


def test_send_gives_up_after_max_block_ms_when_the_buffer_stays_full(
    fresh_broker: Callable[[str], Broker],
) -> None:
    broker = fresh_broker("tansu")
    topic = create_topic(broker.bootstrap_servers, 1)
    settings = {
        "bootstrap.servers": broker.bootstrap_servers,
        "buffer.memory": 32768,
        "batch.size": 16384,
        "linger.ms": 60_000,  # nothing is sent before the buffer fills
        "max.block.ms": 300,
        "delivery.timeout.ms": 120_000,
    }

    async def main() -> None:
        producer = AsyncProducer(settings)
        await producer.partitions_for(topic)
        broker.stop()  # nothing will drain the buffer
        probe = LagProbe()
        probe.start()
        started = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match=r"buffer\.memory"):
            for _ in range(100):
                await producer.send(topic, b"x" * 15000, partition=0)
        waited = time.monotonic() - started
        await probe.stop()
        assert 0.25 <= waited < 3.0
        assert probe.max_gap_s < 0.1
        await producer.close(0.5)

    run(main())


@pytest.mark.parametrize("where", ["kafka", "noida", "mock"])
def test_transactions(request: pytest.FixtureRequest, where: str) -> None:
    broker: Any = request.getfixturevalue("mock_cluster" if where == "mock" else where)
    bootstrap = broker.bootstrap_servers
    if where == "mock":
        topic = f"kx-aio-txn-{uuid.uuid4().hex[:8]}"
        with Producer({"bootstrap.servers": bootstrap, "enable.idempotence": False}) as creator:
            creator.send(topic, b"create", partition=1).result(WAIT_S)  # the mock makes 4 partitions
    else:
        topic = create_topic(bootstrap, 1)
    group = f"kx-aio-txn-{uuid.uuid4().hex[:8]}"
    tp = TopicPartition(topic, 0)

    async def main() -> str | None:
        settings = {"bootstrap.servers": bootstrap, "transactional.id": f"kx-tid-{uuid.uuid4().hex}"}
        async with AsyncProducer({**settings, "linger.ms": 5}) as producer:
            with pytest.raises(InvalidTxnStateError):
                await producer.commit_transaction(5)
            await producer.init_transactions(WAIT_S)
            producer.begin_transaction()
            await producer.send(topic, b"committed-1", partition=0)
            await producer.send(topic, b"committed-2", partition=0)
            meta = GroupMeta(group)
            await producer.send_offsets_to_transaction({tp: OffsetAndMetadata(2)}, meta, WAIT_S)
            await producer.commit_transaction(WAIT_S)
            producer.begin_transaction()
            await producer.send(topic, b"aborted", partition=0)
            await producer.flush(WAIT_S)
            await producer.abort_transaction(WAIT_S)
            producer.begin_transaction()
            await producer.send(topic, b"committed-3", partition=0)
            await producer.commit_transaction(WAIT_S)
            return producer.transaction_state

    assert run(main()) == "READY"
    if where != "mock":  # the mock serves aborted records and drops transactional offsets (docs/brokers.md)
        got = read_all(bootstrap, topic, 1, 3, **{"isolation.level": "read_committed"})
        assert got == [b"committed-1", b"committed-2", b"committed-3"]
        with Consumer({"bootstrap.servers": bootstrap, "group.id": group}) as consumer:
            committed = consumer.committed([tp], WAIT_S)[tp]
        assert committed is not None and committed.offset == 2


class GroupMeta:
    """What send_offsets_to_transaction needs of a consumer's group metadata (no member)."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.generation_id = -1
        self.member_id = ""
        self.group_instance_id = None


# -- AsyncAdminClient --------------------------------------------------------------------------


@pytest.mark.parametrize("loop", LOOPS)
def test_every_admin_call_is_a_coroutine(kafka: Broker, loop: str) -> None:
    topic = f"kx-aio-admin-{uuid.uuid4().hex[:8]}"
    group = f"kx-aio-admin-{uuid.uuid4().hex[:8]}"
    tp = TopicPartition(topic, 0)

    async def main() -> None:
        async with AsyncAdminClient({"bootstrap.servers": kafka.bootstrap_servers}) as admin:
            # Kafka answers a topic change once its controller committed it; the broker's metadata
            # cache, which answers ListTopics and DescribeTopics, gets it a moment later
            await admin.create_topics([NewTopic(topic, 1)], timeout=WAIT_S)

            async def listed() -> bool:
                return topic in await admin.list_topics(timeout=WAIT_S)

            await eventually(listed, WAIT_S, f"{topic} listed")
            cluster = await admin.describe_cluster(WAIT_S)
            assert cluster.nodes
            await admin.create_partitions({topic: 2}, WAIT_S)

            async def two_partitions() -> bool:
                return len((await admin.describe_topics([topic], WAIT_S))[topic].partitions) == 2

            await eventually(two_partitions, WAIT_S, f"{topic} described with 2 partitions")
            await admin.alter_consumer_group_offsets(group, {tp: 0}, WAIT_S)
            assert (await admin.list_consumer_group_offsets(group, timeout=WAIT_S))[tp].offset == 0
            assert group in {g.group_id for g in await admin.list_consumer_groups(WAIT_S)}
            assert group in await admin.describe_consumer_groups([group], WAIT_S)
            assert (await admin.delete_consumer_groups([group], WAIT_S))[group] is None
            produce(kafka.bootstrap_servers, topic, 1, 3)
            assert await admin.delete_records({tp: 2}, WAIT_S) == {tp: 2}
            await admin.delete_topics([topic], timeout=WAIT_S)
            with pytest.raises(UnknownTopicOrPartitionError):
                await admin.delete_topics([topic], timeout=WAIT_S)
            with pytest.raises(AttributeError, match="no call 'create_topic'"):
                admin.create_topic  # noqa: B018 - a typo gets a clear error

    run(main(), loop)


# -- one thread per client ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["consumer", "producer", "admin"])
@pytest.mark.parametrize("loop", LOOPS)
def test_each_client_adds_exactly_one_thread(kafka: Broker, kind: str, loop: str) -> None:
    topic = create_topic(kafka.bootstrap_servers, 1)
    produce(kafka.bootstrap_servers, topic, 1, 100)
    bootstrap = kafka.bootstrap_servers

    async def main() -> tuple[int, int, int, set[str]]:
        await asyncio.sleep(0)
        before = threading.active_count()
        names_before = {t.name for t in threading.enumerate()}
        client: Any
        if kind == "consumer":
            client = AsyncConsumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"})
            client.assign([TopicPartition(topic, 0)])
            got = 0
            while got < 100:
                got += len(await client.poll(1.0))
            await client.end_offsets([TopicPartition(topic, 0)], WAIT_S)
            await client.poll(0.1)
        elif kind == "producer":
            client = AsyncProducer({"bootstrap.servers": bootstrap})
            await (await client.send(topic, b"x"))
            await client.flush(WAIT_S)
        else:
            client = AsyncAdminClient({"bootstrap.servers": bootstrap})
            await client.describe_cluster(WAIT_S)
            await client.list_topics(timeout=WAIT_S)
        during = threading.active_count()
        new = {t.name for t in threading.enumerate()} - names_before
        await client.close()
        deadline = time.monotonic() + 2  # the thread ends right after it says it stopped
        while threading.active_count() > before and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        return before, during, threading.active_count(), new

    before, during, after, new = run(main(), loop)
    assert during == before + 1, new
    assert len(new) == 1 and next(iter(new)).startswith(f"kaflux-{kind}-network-"), new
    assert after == before


# -- the loop is never blocked -------------------------------------------------------------------


@pytest.mark.parametrize("loop", LOOPS)
def test_the_loop_never_stalls_while_the_consumer_waits_or_reads_a_backlog(kafka: Broker, loop: str) -> None:
    partitions, count = 3, 100_000
    topic = create_topic(kafka.bootstrap_servers, partitions)

    async def main() -> tuple[float, float, int]:
        consumer = AsyncConsumer(
            {"bootstrap.servers": kafka.bootstrap_servers, "auto.offset.reset": "earliest"}
        )
        consumer.assign(partitions_of(topic, partitions))
        waiting = LagProbe()
        waiting.start()
        assert not await consumer.poll(1.0)  # nothing there: a second of waiting
        await waiting.stop()
        await asyncio.to_thread(produce, kafka.bootstrap_servers, topic, partitions, count)
        reading = LagProbe()
        reading.start()
        got = 0
        async for _ in consumer:
            got += 1
            if got == count:
                break
        await reading.stop()
        await consumer.close()
        return waiting.max_gap_s, reading.max_gap_s, len(reading.gaps)

    waiting_gap, reading_gap, ticks = run(main(), loop)
    assert waiting_gap < 0.1, f"waiting: the loop stalled {waiting_gap * 1000:.0f} ms"
    assert reading_gap < 0.1, f"reading: the loop stalled {reading_gap * 1000:.0f} ms"
    assert ticks > 1  # the ticker did run while the backlog was read


# -- misuse ----------------------------------------------------------------------------------------


def test_a_client_on_two_event_loops_is_refused(kafka: Broker) -> None:
    consumer = AsyncConsumer({"bootstrap.servers": kafka.bootstrap_servers})
    producer = AsyncProducer({"bootstrap.servers": kafka.bootstrap_servers})
    admin = AsyncAdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    other = asyncio.new_event_loop()
    thread = threading.Thread(target=other.run_forever, daemon=True)
    thread.start()
    try:

        async def use_all() -> None:
            await consumer.list_topics(WAIT_S)
            await producer.metrics(0.5)
            await admin.describe_cluster(WAIT_S)

        asyncio.run_coroutine_threadsafe(use_all(), other).result(WAIT_S)  # bound to `other`

        async def elsewhere() -> None:
            for call in (
                lambda: consumer.list_topics(WAIT_S),
                lambda: producer.flush(1),
                lambda: admin.describe_cluster(WAIT_S),
            ):
                with pytest.raises(ConcurrentAccessError, match="another event loop"):
                    await call()

        run(elsewhere())
    finally:
        other.call_soon_threadsafe(other.stop)
        thread.join(WAIT_S)
        other.close()
        consumer_close = consumer.close()
        run(_close_all(consumer_close, producer.close(5), admin.close()))


async def _close_all(*closing: Any) -> None:
    for close in closing:
        await close


def test_a_thread_is_refused_while_a_coroutine_of_the_loop_is_pending(kafka: Broker) -> None:
    topic = create_topic(kafka.bootstrap_servers, 1)

    async def main() -> list[str]:
        consumer = AsyncConsumer({"bootstrap.servers": kafka.bootstrap_servers})
        consumer.assign([TopicPartition(topic, 0)])
        errors: list[str] = []
        polling = asyncio.ensure_future(consumer.poll(WAIT_S))  # cancelled below: only a bound
        await asyncio.sleep(0.1)  # the poll is waiting for records

        def from_a_thread() -> None:
            for call in (consumer.assignment, lambda: consumer.seek(TopicPartition(topic, 0), 0)):
                try:
                    call()
                except ConcurrentAccessError as error:
                    errors.append(str(error))

        await asyncio.to_thread(from_a_thread)
        assert not polling.done()
        polling.cancel()
        await asyncio.gather(polling, return_exceptions=True)
        await asyncio.to_thread(consumer.assignment)  # nothing pending now: allowed, as sync
        await consumer.close()
        return errors

    errors = run(main())
    assert len(errors) == 2 and all("coroutine pending" in e for e in errors), errors


def test_a_producer_thread_is_refused_while_a_coroutine_is_pending(
    fresh_broker: Callable[[str], Broker],
) -> None:
    broker = fresh_broker("tansu")
    topic = create_topic(broker.bootstrap_servers, 1)

    async def main() -> None:
        producer = AsyncProducer({"bootstrap.servers": broker.bootstrap_servers})
        await producer.partitions_for(topic)
        broker.stop()  # the flush below stays pending
        await producer.send(topic, b"x")
        flushing = asyncio.ensure_future(producer.flush(WAIT_S))
        await asyncio.sleep(0.05)

        def from_a_thread() -> None:
            producer.begin_transaction()

        with pytest.raises(ConcurrentAccessError, match="coroutine pending"):
            await asyncio.to_thread(from_a_thread)
        assert not flushing.done()
        flushing.cancel()
        await asyncio.gather(flushing, return_exceptions=True)
        await producer.close(0.5)

    run(main())
