"""Avro schemas as Spark and Arrow types. [pure]

:func:`spark_type` maps a parsed Avro schema (fastavro's form: full names, named types in
``named``) to the Spark type Spark's own ``from_avro`` gives it:

========================================  ======================================
Avro                                      Spark
========================================  ======================================
record                                    struct of its fields
array / map                               array / map<string, ...>
union of null and one type                that type, nullable
int, long, float, double, boolean         int, bigint, float, double, boolean
string, enum / bytes, fixed               string / binary
decimal (bytes or fixed)                  decimal(precision, scale)
date                                      date
timestamp-millis, timestamp-micros        timestamp (UTC)
uuid                                      string
========================================  ======================================

Other unions and recursive records are refused with an error naming the field.
:func:`strip_logical_types` drops every logical type but decimal from a schema's JSON: records
are then decoded into plain ints and strings that Arrow converts in bulk (dates and
timestamps are cast from their numbers; ``timestamp-millis`` via ``timestamp[ms]``).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

__all__ = [
    "AvroTypeError",
    "json_schema_spark_type",
    "millis_arrow_type",
    "spark_type",
    "strip_logical_types",
]

_PRIMITIVES: dict[str, DataType] = {
    "int": IntegerType(),
    "long": LongType(),
    "float": FloatType(),
    "double": DoubleType(),
    "boolean": BooleanType(),
    "string": StringType(),
    "bytes": BinaryType(),
}


class AvroTypeError(ValueError):
    """An Avro schema has a type with no Spark equivalent here."""


def spark_type(
    schema: Any, named: dict[str, Any], path: str = "value", _seen: frozenset[str] = frozenset()
) -> DataType:
    """The Spark type of the (fastavro-parsed) Avro ``schema``; ``path`` names it in errors."""
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return _PRIMITIVES[schema]
        if schema == "null":
            raise AvroTypeError(f"{path}: a field of type null alone has no Spark type")
        if schema not in named:
            raise AvroTypeError(f"{path}: unknown Avro type {schema!r}")
        return spark_type(named[schema], named, path, _seen)
    if isinstance(schema, list):
        members = [m for m in schema if m != "null"]
        if len(members) != 1:
            raise AvroTypeError(
                f"{path}: unions other than [null, T] are not supported (got {len(members)} non-null types)"
            )
        return spark_type(members[0], named, path, _seen)
    if not isinstance(schema, dict):
        raise AvroTypeError(f"{path}: not an Avro schema: {schema!r}")
    logical = schema.get("logicalType")
    kind = schema.get("type")
    if logical == "decimal" and kind in ("bytes", "fixed"):
        return DecimalType(int(schema["precision"]), int(schema.get("scale", 0)))
    if logical == "date" and kind == "int":
        return DateType()
    if logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
        return TimestampType()
    if logical == "uuid" and kind == "string":
        return StringType()
    if kind == "record":
        name = str(schema.get("name"))
        if name in _seen:
            raise AvroTypeError(
                f"{path}: the record {name} contains itself; recursive types have no Spark type"
            )
        seen = _seen | {name}
        return StructType(
            [
                StructField(f["name"], spark_type(f["type"], named, f"{path}.{f['name']}", seen))
                for f in schema["fields"]
            ]
        )
    if kind == "enum":
        return StringType()
    if kind == "fixed":
        return BinaryType()
    if kind == "array":
        return ArrayType(spark_type(schema["items"], named, f"{path}[]", _seen))
    if kind == "map":
        return MapType(StringType(), spark_type(schema["values"], named, f"{path}{{}}", _seen))
    return spark_type(kind, named, path, _seen)


def strip_logical_types(schema: Any) -> Any:
    """``schema`` (JSON form) without logical types other than decimal."""
    if isinstance(schema, list):
        return [strip_logical_types(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strip_logical_types(v) for k, v in schema.items()}
    if out.get("logicalType") not in (None, "decimal"):
        del out["logicalType"]
    return out


def millis_arrow_type(
    schema: Any, named: dict[str, Any], target: Any, _seen: frozenset[str] = frozenset()
) -> Any:
    """The Arrow type to build decoded records into before a cast to ``target`` (Spark's Arrow
    type for ``schema``): ``target`` with ``timestamp[ms]`` where the schema has a
    ``timestamp-millis`` (Arrow takes the numbers as they are, in the type's unit)."""
    import pyarrow as pa

    if isinstance(schema, str):
        if schema in named and schema not in _seen:
            return millis_arrow_type(named[schema], named, target, _seen | {schema})
        return target
    if isinstance(schema, list):
        members = [m for m in schema if m != "null"]
        return millis_arrow_type(members[0], named, target, _seen) if len(members) == 1 else target
    if not isinstance(schema, dict):
        return target
    kind = schema.get("type")
    if schema.get("logicalType") == "timestamp-millis" and kind == "long":
        return pa.timestamp("ms", tz="UTC")
    if kind == "record":
        return pa.struct(
            [
                pa.field(t.name, millis_arrow_type(f["type"], named, t.type, _seen), t.nullable)
                for f, t in zip(schema["fields"], target, strict=True)
            ]
        )
    if kind == "array":
        value = target.value_field
        return pa.list_(value.with_type(millis_arrow_type(schema["items"], named, value.type, _seen)))
    if kind == "map":
        item = target.item_field
        return pa.map_(
            target.key_field, item.with_type(millis_arrow_type(schema["values"], named, item.type, _seen))
        )
    if isinstance(kind, (str, dict, list)) and kind not in ("enum", "fixed"):
        return millis_arrow_type(kind, named, target, _seen)
    return target


_JSON_PRIMITIVES: dict[str, DataType] = {
    "string": StringType(),
    "integer": LongType(),
    "number": DoubleType(),
    "boolean": BooleanType(),
}


def json_schema_spark_type(schema: Any, path: str = "value") -> DataType:
    """The Spark type of a JSON Schema (``value.format=json``): objects with ``properties`` are
    structs (in the order the schema lists them), arrays with ``items`` arrays, ``integer``
    bigint, ``number`` double; ``["T", "null"]`` is a nullable T. ``$ref``, ``oneOf`` and
    friends are refused naming the field."""
    if not isinstance(schema, dict):
        raise AvroTypeError(f"{path}: not a JSON Schema: {schema!r}")
    kind = schema.get("type")
    if isinstance(kind, list):
        members = [k for k in kind if k != "null"]
        if len(members) != 1:
            raise AvroTypeError(f"{path}: a type list other than [T, null] is not supported: {kind}")
        kind = members[0]
    if kind == "object":
        properties = schema.get("properties")
        if not isinstance(properties, dict):
            raise AvroTypeError(f"{path}: an object needs 'properties' to become a struct")
        return StructType(
            [
                StructField(name, json_schema_spark_type(sub, f"{path}.{name}"))
                for name, sub in properties.items()
            ]
        )
    if kind == "array":
        return ArrayType(json_schema_spark_type(schema.get("items"), f"{path}[]"))
    if isinstance(kind, str) and kind in _JSON_PRIMITIVES:
        return _JSON_PRIMITIVES[kind]
    raise AvroTypeError(f"{path}: JSON Schema type {kind!r} (or a $ref/oneOf/anyOf) is not supported")
