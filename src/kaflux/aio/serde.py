"""Async (de)serializers for ``AsyncConsumer`` / ``AsyncProducer``: awaited on the loop. [app: event loop]

A serializer or deserializer whose ``__call__`` is a coroutine function (kaflux's
``AsyncAvroDeserializer`` and friends, confluent-kafka's async serdes, or any ``async def
f(data, ctx)``) cannot run inside the sync client's collect step, so the asyncio clients await
it themselves, always as ``await f(data_or_value, SerializationContext(...))``:

* the consumer awaits the deserializers on each record ``poll()`` collected. If one fails on
  a record, the records before it are returned and every partition's position is moved back
  to its first record not returned (that record included), so the next ``poll()`` reads it
  again, as the sync consumer's position stays at a record its deserializer failed on. The
  error is the sync consumer's: :class:`~kaflux.errors.DeserializerUnavailableError` for an
  outage (the Schema Registry did not answer), else
  :class:`~kaflux.errors.RecordDeserializationError`;
* the producer awaits the serializers before it queues the record (with a header list the
  serializer may add to: header framing puts the schema's GUID there).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from kaflux.consumer.consumer_record import ConsumerRecord, ConsumerRecords
from kaflux.errors import deserialization_error
from kaflux.serialization import SerializationContext
from kaflux.structs import TopicPartition

AsyncSerde = Callable[[Any, SerializationContext], Awaitable[Any]]


class Seeker(Protocol):
    def seek(self, tp: TopicPartition, offset: int) -> None: ...


def is_async(fn: object) -> bool:
    """Whether ``fn`` is an async serializer or deserializer (its call is a coroutine)."""
    if fn is None or not callable(fn):
        return False
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)


async def deserialize(
    records: ConsumerRecords, key: AsyncSerde | None, value: AsyncSerde | None, consumer: Seeker
) -> ConsumerRecords:
    """``records`` with their keys and values awaited through ``key`` / ``value`` (see the
    module's docstring for a failure)."""
    done: dict[TopicPartition, list[ConsumerRecord]] = {}
    by_partition: dict[TopicPartition, list[ConsumerRecord]] = {}
    for record in records:  # in the order poll() returned them
        by_partition.setdefault(TopicPartition(record.topic, record.partition), []).append(record)
    partitions = list(by_partition.items())
    for n, (tp, batch) in enumerate(partitions):
        out = done[tp] = []
        for record in batch:
            field: Any = "key"
            try:
                # both first, so a failure leaves the record as it was
                new_key = record.key if key is None else await key(record.key, _ctx(tp, "key", record))
                field = "value"
                new_value = (
                    record.value if value is None else await value(record.value, _ctx(tp, "value", record))
                )
            except Exception as exc:
                consumer.seek(tp, record.offset)
                for later_tp, later in partitions[n + 1 :]:
                    consumer.seek(later_tp, later[0].offset)
                if not out:
                    del done[tp]
                if done:
                    return ConsumerRecords(done)  # the error comes with the next poll()
                raise deserialization_error(
                    exc, topic=tp.topic, partition=tp.partition, offset=record.offset, origin=field
                ) from exc
            record.key, record.value = new_key, new_value
            out.append(record)
    return ConsumerRecords(done)


def _ctx(tp: TopicPartition, field: Any, record: ConsumerRecord) -> SerializationContext:
    return SerializationContext(tp.topic, field, record.headers or None)
