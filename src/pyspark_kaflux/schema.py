"""The fixed schemas of the kaflux source and the checks on a sink's input schema. [pure]

The read schema is exactly Spark's Kafka source schema, so a job switches from
``format("kafka")`` to ``format("kaflux")`` without touching its columns::

    key binary, value binary, topic string, partition int, offset long,
    timestamp timestamp, timestampType int [, headers array<struct<key string, value binary>>]

:func:`arrow_schema` is the same schema as PyArrow types: what ``read()`` yields must equal
``pyspark.sql.pandas.types.to_arrow_schema(schema, timezone="UTC")`` (``int32`` for INT,
``timestamp[us, tz=UTC]`` for TIMESTAMP, ``binary``/``string``, not the large variants).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "SinkSchemaError",
    "arrow_schema",
    "check_sink_schema",
    "headers_arrow_type",
    "kafka_schema",
]

_HEADERS_SPARK_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())]), containsNull=True
)


def kafka_schema(include_headers: bool) -> StructType:
    """Spark's Kafka source schema, with the ``headers`` column when ``include_headers``."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", _HEADERS_SPARK_TYPE))
    return StructType(fields)


@functools.cache
def headers_arrow_type() -> pa.ListType:
    """Arrow type of the ``headers`` column: a list of ``{key: string, value: binary}`` structs.

    pyarrow is imported here, not with the module: the driver-side planners need only the
    Spark schema (:func:`kafka_schema`)."""
    import pyarrow as pa

    return pa.list_(
        pa.field("element", pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
    )


def arrow_schema(include_headers: bool) -> pa.Schema:
    """:func:`kafka_schema` as the Arrow schema Spark expects from ``read()``."""
    import pyarrow as pa

    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", headers_arrow_type()))
    return pa.schema(fields)


class SinkSchemaError(ValueError):
    """The DataFrame given to the kaflux sink has a column of the wrong type or lacks one."""


def _is_headers_type(data_type: Any) -> bool:
    if not isinstance(data_type, ArrayType) or not isinstance(data_type.elementType, StructType):
        return False
    fields = data_type.elementType.fields
    return (
        len(fields) == 2
        and fields[0].name == "key"
        and isinstance(fields[0].dataType, StringType)
        and fields[1].name == "value"
        and isinstance(fields[1].dataType, BinaryType)
    )


def check_sink_schema(schema: StructType, topic_option: str | None) -> None:
    """Check the sink's input columns as Spark's ``KafkaWriter.validateQuery`` does.

    ``value`` (string or binary) is required; ``key`` (string or binary), ``partition`` (int)
    and ``headers`` (``array<struct<key string, value binary>>``) are optional; ``topic``
    (string) is required unless the ``topic`` option is set, which then wins over the column.

    Raises:
        SinkSchemaError: naming the column and the type it must have.
    """
    by_name = {f.name: f.dataType for f in schema.fields}
    if topic_option is None:
        if "topic" not in by_name:
            raise SinkSchemaError(
                "topic option required when no 'topic' attribute is present. "
                "Use the topic option for setting a topic."
            )
        if not isinstance(by_name["topic"], StringType):
            raise SinkSchemaError(
                f"topic attribute type must be a string, got {by_name['topic'].simpleString()}"
            )
    if "value" not in by_name:
        raise SinkSchemaError("Required attribute 'value' not found")
    for column in ("key", "value"):
        data_type = by_name.get(column)
        if data_type is not None and not isinstance(data_type, (StringType, BinaryType)):
            raise SinkSchemaError(
                f"{column} attribute type must be a string or binary, got {data_type.simpleString()}"
            )
    partition_type = by_name.get("partition")
    if partition_type is not None and not isinstance(partition_type, IntegerType):
        raise SinkSchemaError(f"partition attribute type must be an int, got {partition_type.simpleString()}")
    headers_type = by_name.get("headers")
    if headers_type is not None and not _is_headers_type(headers_type):
        raise SinkSchemaError(
            "headers attribute type must be array<struct<key:string,value:binary>>, "
            f"got {headers_type.simpleString()}"
        )
