"""The async Schema Registry serdes in AsyncProducer and AsyncConsumer on a real broker: round
trips, header framing, a slow registry that never blocks the loop, and an outage that loses no
record. [test]"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from kaflux import Consumer, TopicPartition
from kaflux.aio import AsyncConsumer, AsyncProducer
from kaflux.devbrokers.brokers import Broker
from kaflux.errors import DeserializerUnavailableError
from kaflux.schema_registry import AsyncSchemaRegistryClient, SchemaRegistryClient
from kaflux.schema_registry.avro import AsyncAvroDeserializer, AsyncAvroSerializer, AvroDeserializer
from kaflux.schema_registry.json_schema import AsyncJsonSchemaDeserializer, AsyncJsonSchemaSerializer

from support.aio_helpers import LOOPS, WAIT_S, create_topic, run
from support.schema_fixtures import ORDER_JSON_SCHEMA, USER_V1
from support.schema_registry import SchemaRegistryDouble

pytestmark = pytest.mark.integration


def _config(broker: Broker) -> dict[str, object]:
    return {"bootstrap.servers": broker.bootstrap_servers, "auto.offset.reset": "earliest"}


async def _read(consumer: AsyncConsumer, count: int) -> list[Any]:
    values: list[Any] = []
    deadline = time.monotonic() + WAIT_S
    while len(values) < count and time.monotonic() < deadline:
        values.extend(record.value for record in await consumer.poll(0.5))
    return values


@pytest.mark.parametrize("loop", LOOPS)
def test_async_serdes_round_trip_and_the_sync_deserializer_reads_the_same_records(
    tansu: Broker, registry: SchemaRegistryDouble, loop: str
) -> None:
    topic = create_topic(tansu.bootstrap_servers)
    users = [{"name": f"u{i}"} for i in range(50)]

    async def main() -> list[Any]:
        async with AsyncSchemaRegistryClient({"url": registry.url}) as client:
            serializer = AsyncAvroSerializer(client, USER_V1, {"schema.id.serializer": "header"})
            async with AsyncProducer(
                {"bootstrap.servers": tansu.bootstrap_servers}, value_serializer=serializer
            ) as p:
                for user in users:
                    await p.send(topic, user)
                await p.flush(WAIT_S)
            async with AsyncConsumer(
                _config(tansu), value_deserializer=AsyncAvroDeserializer(client)
            ) as consumer:
                consumer.assign([TopicPartition(topic, 0)])
                return await _read(consumer, len(users))

    assert run(main(), loop) == users
    with (
        SchemaRegistryClient({"url": registry.url}) as sync_client,
        Consumer(_config(tansu), value_deserializer=AvroDeserializer(sync_client)) as sync,
    ):
        sync.assign([TopicPartition(topic, 0)])
        got: list[Any] = []
        deadline = time.monotonic() + WAIT_S
        while len(got) < len(users) and time.monotonic() < deadline:
            got.extend(r.value for r in sync.poll(0.5))
        assert got == users


#: The shared 2-core test machine alone stalls an idle event loop by more than 50 ms now and then
#: (57 ms measured over 2 s at load 18), so the loop-lag test makes up to this many attempts and
#: passes when one stays under 50 ms; a loop that our code blocks fails every attempt.
LAG_ATTEMPTS = 3


def test_a_slow_registry_does_not_stall_the_loop_while_poll_decodes_a_new_schema(
    tansu: Broker, registry: SchemaRegistryDouble
) -> None:
    """Issue 31: the registry answers after 2 s; a 10 ms ticker on the same loop keeps ticking
    (lag under 50 ms) while poll() awaits the writer's schema of the first record."""
    topic = create_topic(tansu.bootstrap_servers)
    order = {"id": 1, "items": ["x"]}

    async def produce() -> None:
        async with AsyncSchemaRegistryClient({"url": registry.url}) as client:
            serializer = AsyncJsonSchemaSerializer(client, ORDER_JSON_SCHEMA)
            async with AsyncProducer(
                {"bootstrap.servers": tansu.bootstrap_servers}, value_serializer=serializer
            ) as p:
                await p.send(topic, order)
                await p.flush(WAIT_S)

    async def attempt() -> tuple[list[Any], float, float]:
        lag = 0.0
        done = asyncio.Event()

        async def ticker() -> None:
            nonlocal lag
            while not done.is_set():
                before = time.monotonic()
                await asyncio.sleep(0.01)
                lag = max(lag, time.monotonic() - before - 0.01)

        async with (
            AsyncSchemaRegistryClient({"url": registry.url}) as reader,  # nothing cached
            AsyncConsumer(_config(tansu), value_deserializer=AsyncJsonSchemaDeserializer(reader)) as consumer,
        ):
            consumer.assign([TopicPartition(topic, 0)])
            registry.hang()
            timer = threading.Timer(2.0, registry.recover)
            timer.start()
            ticks = asyncio.create_task(ticker())
            start = time.monotonic()
            try:
                values = await _read(consumer, 1)
            finally:
                timer.cancel()
                registry.recover()
                done.set()
                await ticks
        return values, time.monotonic() - start, lag

    run(produce())
    lags = []
    for _ in range(LAG_ATTEMPTS):
        values, took, lag = run(attempt())
        assert values == [order]
        assert took >= 1.9  # poll() did wait for the registry
        lags.append(lag)
        if lag < 0.05:
            break
    assert min(lags) < 0.05, f"the loop was blocked for {[round(x * 1000) for x in lags]} ms"


def test_an_outage_raises_the_outage_error_and_the_record_comes_after_recovery(
    tansu: Broker, registry: SchemaRegistryDouble
) -> None:
    topic = create_topic(tansu.bootstrap_servers)
    users = [{"name": n} for n in ("a", "b", "c")]

    async def main() -> tuple[DeserializerUnavailableError, float, int, list[Any]]:
        async with AsyncSchemaRegistryClient({"url": registry.url}) as client:
            serializer = AsyncAvroSerializer(client, USER_V1)
            async with AsyncProducer(
                {"bootstrap.servers": tansu.bootstrap_servers}, value_serializer=serializer
            ) as p:
                for user in users:
                    await p.send(topic, user)
                await p.flush(WAIT_S)
        tp = TopicPartition(topic, 0)
        async with (
            AsyncSchemaRegistryClient({"url": registry.url, "timeout": 1.5}) as reader,
            AsyncConsumer(_config(tansu), value_deserializer=AsyncAvroDeserializer(reader)) as consumer,
        ):
            consumer.assign([tp])
            registry.hang()
            deadline = time.monotonic() + WAIT_S
            with pytest.raises(DeserializerUnavailableError) as info:
                while time.monotonic() < deadline:
                    started = time.monotonic()
                    assert list(await consumer.poll(1.0)) == []
            took = time.monotonic() - started
            position = await consumer.position(tp)
            registry.recover()
            return info.value, took, position, await _read(consumer, 3)

    error, took, position, values = run(main())
    assert took < 1.5 + 3.0
    assert (error.offset, error.origin) == (0, "value")
    assert f"the Schema Registry at {registry.url} did not answer" in str(error)
    assert position == 0
    assert values == users
