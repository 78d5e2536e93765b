"""Interceptors (KIP-42) on real brokers, on every path: sync and asyncio producers and
consumers, ``send_arrow`` / ``poll_arrow``, commits (sync, async, auto, on close), and
interceptors that raise everywhere without breaking the client.

Every test takes the ``broker`` fixture (tansu and noida today; more kinds join by the fixture's
parameters)."""

from __future__ import annotations

import logging
import time

import pytest

from kaflux import Consumer, Producer, TopicPartition
from kaflux.aio import AsyncConsumer, AsyncProducer
from kaflux.devbrokers.brokers import Broker
from kaflux.structs import OffsetAndMetadata

from support.aio_helpers import run
from support.kafka_helpers import create_topic
from support.recording_interceptors import (
    CountingProducerInterceptor,
    RaisingEverywhere,
    RecordingConsumerInterceptor,
)

pytestmark = pytest.mark.integration

#: a deadline, not a duration: on Tansu a join alone takes half the default 45 s session
WAIT_S = 90.0


def _consumer_config(broker: Broker, group: str, **extra: object) -> dict[str, object]:
    return {
        "bootstrap.servers": broker.bootstrap_servers,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        **extra,
    }


def _poll_until(consumer: Consumer, count: int) -> list[object]:
    got: list[object] = []
    deadline = time.monotonic() + WAIT_S
    while len(got) < count and time.monotonic() < deadline:
        got += list(consumer.poll(0.5))
    return got


def test_sync_clients_run_every_hook(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 1)
    counting = CountingProducerInterceptor()
    callbacks: list[int] = []
    with Producer({"bootstrap.servers": broker.bootstrap_servers}, interceptors=[counting]) as producer:
        for value in (b"a", b"drop", b"c"):
            producer.send(topic_name, value, callback=lambda m, e: callbacks.append(m.offset))
        producer.flush(WAIT_S)
        # on_acknowledgement runs on the network thread, before the record's own callback
        assert [m.offset for m, e in counting.acknowledged if m is not None] == [0, 1, 2]
        assert all(e is None for _, e in counting.acknowledged)
        assert callbacks == [0, 1, 2]
        assert counting.ack_threads == {f"kaflux-producer-network-{producer.client_id}"}
    assert counting.sent == 3 and counting.closed == 1

    recording = RecordingConsumerInterceptor()
    consumer = Consumer(_consumer_config(broker, f"g-{topic_name}"), interceptors=[recording])
    consumer.subscribe([topic_name])
    try:
        records = _poll_until(consumer, 2)
        # on_consume saw all three (with the header on_send added) and dropped one
        assert [r.value for r in recording.consumed] == [b"a", b"drop", b"c"]
        assert all(("seen-by", b"counting") in r.headers for r in recording.consumed)
        assert [r.value for r in records] == [b"a", b"c"]  # type: ignore[attr-defined]
        consumer.commit_sync()
        tp = TopicPartition(topic_name, 0)
        # a commit carries the leader epoch of the last record consumed (Kafka's; a stand-in
        # may send none), as Java's does
        epoch = records[-1].leader_epoch  # type: ignore[attr-defined]
        assert recording.commits == [{tp: OffsetAndMetadata(3, "", epoch)}]
        done: list[object] = []
        consumer.commit_async({tp: OffsetAndMetadata(2)}, callback=lambda o, e: done.append(e))
        deadline = time.monotonic() + WAIT_S
        while not done and time.monotonic() < deadline:
            consumer.poll(0.1)
        assert done == [None]
        assert recording.commits[-1] == {tp: OffsetAndMetadata(2)}
        assert recording.threads == {"MainThread"}
    finally:
        consumer.close(WAIT_S)
    assert recording.closed == 1


def test_auto_commit_reports_to_on_commit_on_the_polling_thread(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 1)
    with Producer({"bootstrap.servers": broker.bootstrap_servers}) as producer:
        for i in range(5):
            producer.send(topic_name, b"%d" % i)
        producer.flush(WAIT_S)
    recording = RecordingConsumerInterceptor()
    config = _consumer_config(
        broker, f"g-{topic_name}", **{"enable.auto.commit": True, "auto.commit.interval.ms": 100}
    )
    consumer = Consumer(config, interceptors=[recording])
    consumer.subscribe([topic_name])
    tp = TopicPartition(topic_name, 0)
    try:
        records = _poll_until(consumer, 5)
        assert len(records) == 5
        expected = {tp: OffsetAndMetadata(5, "", records[-1].leader_epoch)}  # type: ignore[attr-defined]
        deadline = time.monotonic() + WAIT_S
        while expected not in recording.commits and time.monotonic() < deadline:
            consumer.poll(0.1)
        assert expected in recording.commits
        assert recording.threads == {"MainThread"}
    finally:
        consumer.close(WAIT_S)
    assert recording.closed == 1


def test_the_auto_commit_of_close_reaches_on_commit(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 1)
    with Producer({"bootstrap.servers": broker.bootstrap_servers}) as producer:
        for i in range(4):
            producer.send(topic_name, b"%d" % i)
        producer.flush(WAIT_S)
    recording = RecordingConsumerInterceptor()
    config = _consumer_config(
        broker, f"g-{topic_name}", **{"enable.auto.commit": True, "auto.commit.interval.ms": 600_000}
    )
    consumer = Consumer(config, interceptors=[recording])
    consumer.subscribe([topic_name])
    try:
        records = _poll_until(consumer, 4)
        assert len(records) == 4
        assert recording.commits == []  # the interval is far off: nothing committed yet
    finally:
        consumer.close(WAIT_S)  # leaving the group commits the consumed positions first
    epoch = records[-1].leader_epoch  # type: ignore[attr-defined]
    assert recording.commits == [{TopicPartition(topic_name, 0): OffsetAndMetadata(4, "", epoch)}]
    assert recording.closed == 1


def test_interceptors_that_raise_everywhere_break_nothing(
    broker: Broker, topic_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 1)
    with caplog.at_level(logging.WARNING, logger="kaflux.interceptors"):
        with Producer(
            {"bootstrap.servers": broker.bootstrap_servers}, interceptors=[RaisingEverywhere()]
        ) as producer:
            metadata = producer.send(topic_name, b"x").result(WAIT_S)
        assert metadata.offset == 0
        consumer = Consumer(_consumer_config(broker, f"g-{topic_name}"), interceptors=[RaisingEverywhere()])
        consumer.subscribe([topic_name])
        try:
            records = _poll_until(consumer, 1)
            assert [r.value for r in records] == [b"x"]  # type: ignore[attr-defined]
            consumer.commit_sync()
            assert consumer.committed([TopicPartition(topic_name, 0)])[TopicPartition(topic_name, 0)] == (
                OffsetAndMetadata(1, "", records[-1].leader_epoch)  # type: ignore[attr-defined]
            )
        finally:
            consumer.close(WAIT_S)
    for hook in ("on_send", "on_acknowledgement", "on_consume", "on_commit", "close"):
        assert f"RaisingEverywhere.{hook} raised" in caplog.text


def test_asyncio_clients_run_the_hooks_of_the_shared_core(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 1)
    counting = CountingProducerInterceptor()
    recording = RecordingConsumerInterceptor()

    epochs: list[int | None] = []

    async def scenario() -> list[bytes]:
        async with AsyncProducer(
            {"bootstrap.servers": broker.bootstrap_servers}, interceptors=[counting]
        ) as producer:
            for value in (b"a", b"drop", b"c"):
                await producer.send(topic_name, value)
            await producer.flush(WAIT_S)
        config = _consumer_config(broker, f"g-{topic_name}")
        values: list[bytes] = []
        async with AsyncConsumer(config, interceptors=[recording]) as consumer:
            consumer.subscribe([topic_name])
            deadline = time.monotonic() + WAIT_S
            while len(values) < 2 and time.monotonic() < deadline:
                for r in await consumer.poll(0.5):
                    values.append(r.value)
                    epochs.append(r.leader_epoch)
            await consumer.commit_sync()
        return values

    assert run(scenario()) == [b"a", b"c"]
    assert counting.sent == 3 and len(counting.acknowledged) == 3 and counting.closed == 1
    assert all(("seen-by", b"counting") in r.headers for r in recording.consumed)
    assert recording.commits == [{TopicPartition(topic_name, 0): OffsetAndMetadata(3, "", epochs[-1])}]
    assert recording.closed == 1


def test_arrow_paths_run_the_batch_hooks(broker: Broker, topic_name: str) -> None:
    pa = pytest.importorskip("pyarrow")
    create_topic(broker.bootstrap_servers, topic_name, 1)
    counting = CountingProducerInterceptor()
    with Producer({"bootstrap.servers": broker.bootstrap_servers}, interceptors=[counting]) as producer:
        futures = producer.send_arrow(topic_name, pa.record_batch({"value": [b"1", b"2", b"3"]}))
        producer.flush(WAIT_S)
        [batch_metadata] = [f.result(0) for f in futures]
    assert counting.batches == 1
    assert counting.batch_acknowledged == [(batch_metadata, None)]
    recording = RecordingConsumerInterceptor()
    consumer = Consumer(_consumer_config(broker, f"g-{topic_name}"), interceptors=[recording])
    consumer.assign([TopicPartition(topic_name, 0)])
    consumer.seek(TopicPartition(topic_name, 0), 0)
    try:
        rows = 0
        deadline = time.monotonic() + WAIT_S
        while rows < 3 and time.monotonic() < deadline:
            rows += consumer.poll_arrow(0.5).num_rows
        assert rows == 3
        assert sum(recording.batches) == 3
        assert 0 not in recording.batches  # an empty poll is not reported
    finally:
        consumer.close(WAIT_S)


def test_interceptor_classes_config_gives_a_consumer_its_interceptor(broker: Broker, topic_name: str) -> None:
    consumer = Consumer(
        _consumer_config(
            broker, f"g-{topic_name}", **{"interceptor.classes": "support.recording_interceptors.Interceptor"}
        )
    )
    try:
        assert consumer._interceptors is not None
        assert type(consumer._interceptors.interceptors[0]).__name__ == "Interceptor"
    finally:
        consumer.close(WAIT_S)


def test_share_consumers_sync_and_asyncio_run_on_consume_and_on_acknowledge() -> None:
    from kaflux import ShareConsumer
    from kaflux.aio import AsyncShareConsumer

    from support.share_mock import ShareMockCluster

    topic = f"kx-share-interceptors-{time.time_ns()}"
    with ShareMockCluster(auto_offset_reset="earliest") as cluster:
        with Producer({"bootstrap.servers": cluster.bootstrap_servers}) as producer:
            for value in (b"a", b"drop", b"c"):
                producer.send(topic, value, partition=0)
            producer.flush(WAIT_S)
        config = {"bootstrap.servers": cluster.bootstrap_servers, "group.id": f"g-{topic}"}
        recording = RecordingConsumerInterceptor()
        consumer = ShareConsumer(config, interceptors=[recording])
        consumer.subscribe([topic])
        try:
            got: list[bytes] = []
            deadline = time.monotonic() + WAIT_S
            while len(recording.consumed) < 3 and time.monotonic() < deadline:
                got += [r.value for r in consumer.poll(0.5)]
            assert got == [b"a", b"c"]
            assert [r.delivery_count for r in recording.consumed] == [1, 1, 1]
            results = consumer.commit_sync(WAIT_S)  # accepts the three (implicit mode)
            assert results == {TopicPartition(topic, 0): None}
            assert recording.acknowledged == [({TopicPartition(topic, 0): {0, 1, 2}}, None)]
        finally:
            consumer.close(WAIT_S)
        assert recording.closed == 1

        with Producer({"bootstrap.servers": cluster.bootstrap_servers}) as producer:
            producer.send(topic, b"d", partition=0).result(WAIT_S)
        in_loop = RecordingConsumerInterceptor()

        async def scenario() -> list[bytes]:
            values: list[bytes] = []
            async with AsyncShareConsumer(
                {**config, "group.id": f"g2-{topic}"}, interceptors=[in_loop]
            ) as aconsumer:
                aconsumer.subscribe([topic])
                deadline = time.monotonic() + WAIT_S
                while len(in_loop.consumed) < 4 and time.monotonic() < deadline:
                    values += [r.value for r in await aconsumer.poll(0.5)]
            return values

        assert run(scenario()) == [b"a", b"c", b"d"]
    assert in_loop.closed == 1
