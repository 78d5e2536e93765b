"""Protobuf values as Spark struct columns (``value.format=protobuf``). [io; driver and executors]

No generated class is needed: the message type is built from the registry's schema (asked for
in the serialized form, a base64 ``FileDescriptorProto``, with its imports resolved through the
schema references) in a private descriptor pool. The column's message is the first message of
the schema's file (Confluent's message index ``[0]``).

=================================  =====================================
Protobuf                           Spark
=================================  =====================================
message                            struct of its fields (null when unset)
repeated / map<K, V>               array / map
int32, sint32, sfixed32            int
int64, uint32, uint64, sint64 ...  bigint
float, double, bool                float, double, boolean
string, enum (its name)            string
bytes                              binary
=================================  =====================================
"""

from __future__ import annotations

import base64
import importlib
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from kaflux.schema_registry.client import Schema, SchemaRegistryClient

__all__ = ["message_class_for", "proto_spark_type", "to_row"]


def _add_well_known(pool: Any, name: str) -> None:
    from google.protobuf import descriptor_pool

    module = "google.protobuf." + name.removeprefix("google/protobuf/").removesuffix(".proto") + "_pb2"
    importlib.import_module(module)  # registers the file in the default pool
    pool.AddSerializedFile(descriptor_pool.Default().FindFileByName(name).serialized_pb)


def message_class_for(client: SchemaRegistryClient, schema: Schema) -> Any:
    """The message class of the first message of ``schema`` (a serialized Protobuf schema)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(current: Schema) -> Any:
        for ref in current.references:
            if ref.name not in added:
                add(client.get_version(ref.subject, ref.version, fmt="serialized").schema)
        try:
            proto = descriptor_pb2.FileDescriptorProto.FromString(
                base64.b64decode(current.schema_str, validate=True)
            )
        except ValueError as exc:
            raise ValueError(
                "the registry did not return the Protobuf schema in its serialized form (base64 "
                f"FileDescriptorProto): {exc}"
            ) from exc
        for dependency in proto.dependency:
            if dependency not in added and dependency.startswith("google/protobuf/"):
                _add_well_known(pool, dependency)
                added.add(dependency)
        pool.Add(proto)
        added.add(proto.name)
        return proto

    proto = add(schema)
    if not proto.message_type:
        raise ValueError(f"the Protobuf schema {proto.name} declares no message")
    package = f"{proto.package}." if proto.package else ""
    descriptor = pool.FindMessageTypeByName(package + proto.message_type[0].name)
    return message_factory.GetMessageClass(descriptor)


def proto_spark_type(descriptor: Any, _seen: frozenset[str] = frozenset()) -> DataType:
    """The Spark type of a message descriptor."""
    from google.protobuf.descriptor import FieldDescriptor as F

    if descriptor.full_name in _seen:
        raise ValueError(f"{descriptor.full_name} contains itself; recursive messages have no Spark type")
    seen = _seen | {descriptor.full_name}

    def scalar(field: Any) -> DataType:
        t = field.type
        if t == F.TYPE_MESSAGE:
            return proto_spark_type(field.message_type, seen)
        if t in (F.TYPE_INT32, F.TYPE_SINT32, F.TYPE_SFIXED32):
            return IntegerType()
        if t in (
            F.TYPE_INT64,
            F.TYPE_SINT64,
            F.TYPE_SFIXED64,
            F.TYPE_UINT32,
            F.TYPE_UINT64,
            F.TYPE_FIXED32,
            F.TYPE_FIXED64,
        ):
            return LongType()
        if t == F.TYPE_FLOAT:
            return FloatType()
        if t == F.TYPE_DOUBLE:
            return DoubleType()
        if t == F.TYPE_BOOL:
            return BooleanType()
        if t in (F.TYPE_STRING, F.TYPE_ENUM):
            return StringType()
        if t == F.TYPE_BYTES:
            return BinaryType()
        raise ValueError(f"{field.full_name}: Protobuf type {t} is not supported")

    fields = []
    for field in descriptor.fields:
        if _is_map(field):
            entry = field.message_type
            data_type: DataType = MapType(
                scalar(entry.fields_by_name["key"]), scalar(entry.fields_by_name["value"])
            )
        elif _is_repeated(field):
            data_type = ArrayType(scalar(field))
        else:
            data_type = scalar(field)
        fields.append(StructField(field.name, data_type))
    return StructType(fields)


def _is_repeated(field: Any) -> bool:
    repeated = getattr(field, "is_repeated", None)
    if repeated is not None:
        return bool(repeated)
    return bool(field.label == field.LABEL_REPEATED)


def _is_map(field: Any) -> bool:
    return bool(
        _is_repeated(field) and field.message_type is not None and field.message_type.GetOptions().map_entry
    )


def to_row(message: Any) -> dict[str, Any]:
    """``message`` as the dict Arrow builds the struct from (unset message fields are None)."""
    from google.protobuf.descriptor import FieldDescriptor as F

    out: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        if _is_map(field):
            value_field = field.message_type.fields_by_name["value"]
            if value_field.type == F.TYPE_MESSAGE:
                out[field.name] = {k: to_row(v) for k, v in value.items()}
            elif value_field.type == F.TYPE_ENUM:
                names = value_field.enum_type.values_by_number
                out[field.name] = {k: names[v].name if v in names else str(v) for k, v in value.items()}
            else:
                out[field.name] = dict(value)
        elif _is_repeated(field):
            if field.type == F.TYPE_MESSAGE:
                out[field.name] = [to_row(v) for v in value]
            elif field.type == F.TYPE_ENUM:
                names = field.enum_type.values_by_number
                out[field.name] = [names[v].name if v in names else str(v) for v in value]
            else:
                out[field.name] = list(value)
        elif field.type == F.TYPE_MESSAGE:
            out[field.name] = to_row(value) if message.HasField(field.name) else None
        elif field.type == F.TYPE_ENUM:
            names = field.enum_type.values_by_number
            out[field.name] = names[value].name if value in names else str(value)
        else:
            out[field.name] = value
    return out
