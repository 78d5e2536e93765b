"""The (de)serializer protocol: plain callables, or objects that also see the record's context. [pure]

``Producer(key_serializer=..., value_serializer=...)`` and ``Consumer(key_deserializer=...,
value_deserializer=...)`` take either

* a plain one-argument callable, ``fn(value) -> bytes`` / ``fn(data) -> object``; or
* an instance of :class:`Serializer` / :class:`Deserializer` (such as the schema registry's
  ``AvroSerializer``), called as ``serializer(value, ctx)`` with a :class:`SerializationContext`:
  the topic, whether the bytes are the record's key or its value, and the record's headers.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from kaflux.errors import KafkaError

Field = Literal["key", "value"]


@dataclass(frozen=True, slots=True)
class SerializationContext:
    """What a (de)serializer knows of the record: its topic, which of its fields the bytes
    are, and its headers.

    On the consumer side ``headers`` is None when the record has none. On the producer side
    (``Producer.send``, ``AsyncProducer.send``) it is always a list, which the key and value
    serializers may append to: what it holds after them is sent with the record (a Schema
    Registry serializer with ``schema.id.serializer="header"`` adds the schema's GUID so).
    """

    topic: str
    field: Field
    headers: Sequence[tuple[str, bytes | None]] | None = None


class SerializationError(KafkaError, ValueError):
    """A value could not be serialized (e.g. it does not match its schema)."""


class Serializer(ABC):
    """A serializer that sees the record's context; ``None`` stays ``None``."""

    @abstractmethod
    def __call__(self, value: Any, ctx: SerializationContext) -> bytes | None:
        """The bytes for ``value``, the ``ctx.field`` of a record to ``ctx.topic``."""


class Deserializer(ABC):
    """A deserializer that sees the record's context; ``None`` (a null key or value) may be
    passed."""

    @abstractmethod
    def __call__(self, data: bytes | None, ctx: SerializationContext) -> Any:
        """The object ``data`` (``ctx.field`` of a record of ``ctx.topic``) stands for."""


def takes_context(fn: object) -> bool:
    """Whether ``fn`` is called with a :class:`SerializationContext` as its second argument."""
    return isinstance(fn, (Serializer, Deserializer))
