"""AsyncSchemaRegistryClient and the async serdes on the registry double: every call, retries,
the deadline, and a slow registry never blocking the event loop. [test]"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from kaflux.schema_registry import (
    AsyncSchemaRegistryClient,
    Schema,
    SchemaRegistryClient,
    SchemaRegistryError,
)
from kaflux.schema_registry.avro import AsyncAvroDeserializer, AvroSerializer
from kaflux.serialization import SerializationContext

from support.schema_fixtures import PAGE_VIEW_STR, USER_V1, USER_V2, page_view
from support.schema_registry import SchemaRegistryDouble


def test_every_call(registry: SchemaRegistryDouble) -> None:
    async def main() -> list[Any]:
        async with AsyncSchemaRegistryClient({"url": registry.url}) as client:
            schema_id = await client.register_schema("users-value", Schema(USER_V1))
            v2 = await client.register_schema_full_response("users-value", Schema(USER_V2))
            return [
                schema_id,
                await client.get_schema(schema_id),
                (await client.get_schema_by_guid(v2.guid or "")).schema_str,
                (await client.lookup_schema("users-value", Schema(USER_V1))).version,
                (await client.get_latest_version("users-value")).schema_id,
                (await client.get_version("users-value", 1)).schema_id,
                await client.get_versions("users-value"),
                await client.get_subjects(),
                await client.set_compatibility("users-value", "full"),
                await client.get_compatibility("users-value"),
                await client.test_compatibility("users-value", Schema(USER_V2)),
                await client.delete_subject("users-value"),
            ]

    assert asyncio.run(main()) == [
        1,
        Schema(USER_V1),
        USER_V2,
        1,
        2,
        1,
        [1, 2],
        ["users-value"],
        "FULL",
        "FULL",
        True,
        [1, 2],
    ]


def test_transient_errors_are_retried_and_cached_answers_make_no_request(
    registry: SchemaRegistryDouble,
) -> None:
    registry.fail_next(2, status=503)

    async def main() -> None:
        config = {"url": registry.url, "retries.wait.ms": 10, "max.retries": 3}
        async with AsyncSchemaRegistryClient(config) as client:
            schema_id = await client.register_schema("users-value", Schema(USER_V1))
            before = registry.request_count
            assert await client.get_schema(schema_id) == Schema(USER_V1)
            assert await client.register_schema("users-value", Schema(USER_V1)) == schema_id
            assert registry.request_count == before

    asyncio.run(main())
    assert registry.requests[:3] == [("POST", "/subjects/users-value/versions")] * 3


def test_a_hanging_registry_is_given_up_on_at_the_timeout(registry: SchemaRegistryDouble) -> None:
    registry.hang()

    async def main() -> SchemaRegistryError:
        async with AsyncSchemaRegistryClient({"url": registry.url, "timeout": 1.0}) as client:
            with pytest.raises(SchemaRegistryError) as info:
                await client.get_schema(1)
            return info.value

    start = time.monotonic()
    error = asyncio.run(main())
    assert time.monotonic() - start < 2.5
    assert error.retriable and f"the Schema Registry at {registry.url} did not answer" in str(error)


#: The shared 2-core test machine alone stalls an idle event loop by more than 50 ms now and then
#: (57 ms measured over 2 s at load 18), so a loop-lag test makes up to this many attempts and
#: passes when one stays under 50 ms; a loop that our code blocks fails every attempt.
LAG_ATTEMPTS = 3


def test_a_slow_registry_does_not_block_the_loop_while_a_new_schema_is_fetched(
    registry: SchemaRegistryDouble,
) -> None:
    """Issue 31: with the registry answering after 2 s, another coroutine's 10 ms ticks go on
    (loop lag under 50 ms) while the first record of a new schema is decoded."""
    ctx = SerializationContext("views", "value", [])
    with SchemaRegistryClient({"url": registry.url}) as writer:
        data = AvroSerializer(writer, PAGE_VIEW_STR)(page_view(5), ctx)

    async def attempt() -> tuple[Any, float, float]:
        lag = 0.0
        done = asyncio.Event()

        async def ticker() -> None:
            nonlocal lag
            while not done.is_set():
                before = time.monotonic()
                await asyncio.sleep(0.01)
                lag = max(lag, time.monotonic() - before - 0.01)

        ticks = asyncio.create_task(ticker())
        await asyncio.sleep(0.05)
        registry.hang()
        answer_after = threading.Timer(2.0, registry.recover)
        try:
            async with AsyncSchemaRegistryClient(
                {"url": registry.url, "timeout": 10}
            ) as client:  # nothing cached
                start = time.monotonic()
                answer_after.start()
                value = await AsyncAvroDeserializer(client)(data, ctx)
                took = time.monotonic() - start
        finally:
            answer_after.cancel()
            registry.recover()
            done.set()
            await ticks
        return value, took, lag

    lags = []
    for _ in range(LAG_ATTEMPTS):
        value, took, lag = asyncio.run(attempt())
        assert value == page_view(5)
        assert took >= 1.9  # it did wait for the registry
        lags.append(lag)
        if lag < 0.05:
            break
    assert min(lags) < 0.05, f"the loop was blocked for {[round(x * 1000) for x in lags]} ms"
