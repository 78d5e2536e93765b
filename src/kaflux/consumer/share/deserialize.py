"""Deserializing a share consumer's records in place. [app: runs the user's deserializers]

Split from :mod:`kaflux.consumer.share.consumer`: :class:`RecordDeserializers` holds the key and
value deserializers (each with or without a :class:`~kaflux.serialization.SerializationContext`)
and applies them to a chunk of decoded records, stopping at the first that fails.
"""

from __future__ import annotations

from typing import Any, Literal

from kaflux.consumer.completed_fetch import Deserializer
from kaflux.errors import RecordDeserializationError
from kaflux.records import ConsumerRecord
from kaflux.serialization import SerializationContext, takes_context
from kaflux.structs import TopicPartition


class RecordDeserializers:
    """A share consumer's key and value deserializers."""

    def __init__(self, key: Deserializer | None, value: Deserializer | None) -> None:
        self._key: Any = key
        self._value: Any = value
        self._key_takes_context = takes_context(key)
        self._value_takes_context = takes_context(value)

    def apply(
        self, records: list[ConsumerRecord], tp: TopicPartition
    ) -> tuple[ConsumerRecord, RecordDeserializationError] | None:
        """Deserialize keys and values in place; the first record that fails, with its error
        (it and the records after it are left as they were)."""
        kd, vd = self._key, self._value
        if kd is None and vd is None:
            return None
        topic = tp.topic
        for record in records:
            origin: Literal["key", "value"] = "key"
            try:
                if kd is not None:
                    key = (
                        kd(record.key, SerializationContext(topic, "key", record.headers or None))
                        if self._key_takes_context
                        else kd(record.key)
                    )
                else:
                    key = record.key
                origin = "value"
                if vd is not None:
                    value = (
                        vd(record.value, SerializationContext(topic, "value", record.headers or None))
                        if self._value_takes_context
                        else vd(record.value)
                    )
                else:
                    value = record.value
            except Exception as exc:
                error = RecordDeserializationError(
                    repr(exc),
                    topic=topic,
                    partition=tp.partition,
                    offset=record.offset,
                    origin=origin,
                    hint="The record was released to the share group, to be delivered again",
                )
                error.key, error.value = record.key, record.value
                error.timestamp, error.timestamp_type = record.timestamp, record.timestamp_type
                error.headers = list(record.headers) if record.headers is not None else None
                error.__cause__ = exc
                return record, error
            record.key, record.value = key, value
        return None
