"""Subject name strategies: under which subject a record's schema is registered. [pure]

Each takes the record's :class:`~kaflux.serialization.SerializationContext` and the schema's
full record name (None for a schema without one) and returns the subject, as Confluent's
``TopicNameStrategy``, ``RecordNameStrategy`` and ``TopicRecordNameStrategy`` do.
"""

from __future__ import annotations

from collections.abc import Callable

from kaflux.serialization import SerializationContext

SubjectNameStrategy = Callable[[SerializationContext, str | None], str]


def topic_subject_name_strategy(ctx: SerializationContext, record_name: str | None) -> str:
    """``<topic>-key`` or ``<topic>-value`` (the default)."""
    return f"{ctx.topic}-{ctx.field}"


def record_subject_name_strategy(ctx: SerializationContext, record_name: str | None) -> str:
    """The record's full name, whatever the topic."""
    if not record_name:
        raise ValueError("record_subject_name_strategy needs a named schema (an Avro record, a message)")
    return record_name


def topic_record_subject_name_strategy(ctx: SerializationContext, record_name: str | None) -> str:
    """``<topic>-<record full name>``."""
    if not record_name:
        raise ValueError(
            "topic_record_subject_name_strategy needs a named schema (an Avro record, a message)"
        )
    return f"{ctx.topic}-{record_name}"
