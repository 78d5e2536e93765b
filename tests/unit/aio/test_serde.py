"""kaflux.aio.serde: async deserializers awaited on polled records; a failure returns the records
before it and moves each partition back to its first record not returned. [test]"""

from __future__ import annotations

import asyncio

import pytest

from kaflux.aio.serde import deserialize, is_async
from kaflux.consumer.consumer_record import ConsumerRecord, ConsumerRecords
from kaflux.errors import DeserializerUnavailableError, KafkaTimeoutError, RecordDeserializationError
from kaflux.serialization import SerializationContext
from kaflux.structs import TopicPartition

A, B = TopicPartition("t", 0), TopicPartition("t", 1)


class Seeks:
    def __init__(self) -> None:
        self.seeks: list[tuple[TopicPartition, int]] = []

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.seeks.append((tp, offset))


def _records() -> ConsumerRecords:
    def record(tp: TopicPartition, offset: int) -> ConsumerRecord:
        return ConsumerRecord(
            tp.topic, tp.partition, offset, 0, 0, None, f"{tp.partition}:{offset}".encode(), [], None, -1
        )

    return ConsumerRecords({A: [record(A, 5), record(A, 6), record(A, 7)], B: [record(B, 1), record(B, 2)]})


def _failing_at(bad: bytes, error: Exception) -> object:
    async def value(data: bytes, ctx: SerializationContext) -> str:
        assert ctx.topic == "t" and ctx.field == "value"
        if data == bad:
            raise error
        return data.decode().upper()

    return value


def test_records_before_a_failure_are_returned_and_the_rest_rewound() -> None:
    seeks = Seeks()
    got = asyncio.run(deserialize(_records(), None, _failing_at(b"0:6", ValueError("bad")), seeks))  # type: ignore[arg-type]
    assert [r.value for r in got] == ["0:5"]
    assert seeks.seeks == [(A, 6), (B, 1)]


def test_a_failure_on_the_first_record_raises_the_sync_consumers_errors() -> None:
    seeks = Seeks()
    with pytest.raises(RecordDeserializationError) as bad:
        asyncio.run(deserialize(_records(), None, _failing_at(b"0:5", ValueError("bad")), seeks))  # type: ignore[arg-type]
    assert (bad.value.offset, bad.value.origin) == (5, "value")
    with pytest.raises(DeserializerUnavailableError) as outage:
        asyncio.run(deserialize(_records(), None, _failing_at(b"0:5", KafkaTimeoutError("no answer")), seeks))  # type: ignore[arg-type]
    assert outage.value.offset == 5 and "reads it again" in str(outage.value)
    assert seeks.seeks == [(A, 5), (B, 1)] * 2


def test_a_failure_in_a_later_partition_keeps_the_earlier_partitions_records() -> None:
    seeks = Seeks()
    got = asyncio.run(deserialize(_records(), None, _failing_at(b"1:2", ValueError("bad")), seeks))  # type: ignore[arg-type]
    assert [r.value for r in got] == ["0:5", "0:6", "0:7", "1:1"]
    assert seeks.seeks == [(B, 2)]


def test_only_coroutine_callables_are_async() -> None:
    async def f(data: bytes, ctx: SerializationContext) -> bytes:
        return data

    class C:
        async def __call__(self, data: bytes, ctx: SerializationContext) -> bytes:
            return data

    assert is_async(f) and is_async(C())
    assert not is_async(None) and not is_async(bytes.decode) and not is_async(lambda d: d)
