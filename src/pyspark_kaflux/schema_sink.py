"""The sink's typed columns: a struct ``value`` or ``key`` written as Avro. [io; executors]

With ``value.format=avro`` the sink's ``value`` column may be a struct; each row is serialised
with :class:`kaflux.schema_registry.avro.AvroSerializer` in Confluent's wire format. The schema
is ``value.schema.id``, else the latest version of ``value.subject``, else one derived from the
column's type (:func:`avro_schema_for`, every field nullable) and registered under
``<topic>-value``.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pyarrow as pa

from kaflux.schema_registry.avro import AvroSerializer
from kaflux.schema_registry.client import Schema
from kaflux.serialization import SerializationContext
from pyspark_kaflux.options import FormatOptions, KafluxOptionError

__all__ = ["avro_schema_for", "serialize_columns"]


def avro_schema_for(arrow_type: pa.DataType, name: str, names: set[str] | None = None) -> Any:
    """An Avro schema (JSON form) for values of ``arrow_type``; records are named after their
    column or field (``name``), made unique."""
    names = set() if names is None else names
    t = arrow_type
    if pa.types.is_struct(t):
        record = name[:1].upper() + name[1:]
        while record in names:
            record += "_"
        names.add(record)
        fields = [
            {"name": f.name, "type": ["null", avro_schema_for(f.type, f.name, names)], "default": None}
            for f in t
        ]
        return {"type": "record", "name": record, "fields": fields}
    if pa.types.is_map(t):
        if not pa.types.is_string(t.key_type):
            raise KafluxOptionError(f"value.format=avro: Avro maps have string keys; {name} has {t.key_type}")
        return {"type": "map", "values": ["null", avro_schema_for(t.item_type, name, names)]}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return {"type": "array", "items": ["null", avro_schema_for(t.value_type, name, names)]}
    if pa.types.is_decimal(t):
        return {"type": "bytes", "logicalType": "decimal", "precision": t.precision, "scale": t.scale}
    if pa.types.is_date32(t):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_timestamp(t):
        return {"type": "long", "logicalType": "timestamp-micros"}
    for check, avro in (
        (pa.types.is_boolean, "boolean"),
        (pa.types.is_int8, "int"),
        (pa.types.is_int16, "int"),
        (pa.types.is_int32, "int"),
        (pa.types.is_int64, "long"),
        (pa.types.is_float32, "float"),
        (pa.types.is_float64, "double"),
        (pa.types.is_string, "string"),
        (pa.types.is_large_string, "string"),
        (pa.types.is_binary, "bytes"),
        (pa.types.is_large_binary, "bytes"),
    ):
        if check(t):
            return avro
    raise KafluxOptionError(f"value.format=avro: the column {name} has type {t}, which has no Avro type here")


def _has_map(t: pa.DataType) -> bool:
    if pa.types.is_map(t):
        return True
    if pa.types.is_struct(t):
        return any(_has_map(f.type) for f in t)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _has_map(t.value_type)
    return False


def _maps_to_dicts(value: Any, t: pa.DataType) -> Any:
    """Arrow's Python form of a map (a list of pairs) as the dict Avro writes."""
    if value is None:
        return None
    if pa.types.is_map(t):
        return {k: _maps_to_dicts(v, t.item_type) for k, v in value}
    if pa.types.is_struct(t):
        return {f.name: _maps_to_dicts(value[f.name], f.type) for f in t}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [_maps_to_dicts(v, t.value_type) for v in value]
    return value


_serializers: dict[tuple[Any, ...], AvroSerializer] = {}
_lock = threading.Lock()


def _serializer(fmt: FormatOptions, column: str, arrow_type: pa.DataType) -> AvroSerializer:
    key = (fmt, column, str(arrow_type))
    with _lock:
        found = _serializers.get(key)
    if found is not None:
        return found
    from pyspark_kaflux.schema_columns import registry_client

    if not fmt.registry:
        raise KafluxOptionError(f"Option '{column}.format=avro' needs 'schema.registry.url'")
    client = registry_client(fmt.registry)
    schema_id = fmt.key_schema_id if column == "key" else fmt.value_schema_id
    subject = fmt.key_subject if column == "key" else fmt.value_subject
    schema: Schema
    conf: dict[str, object] = {}
    if schema_id is not None:
        schema = client.get_schema(schema_id)
        conf = {"auto.register.schemas": False, "subject.name.strategy": lambda ctx, name: subject or ""}
    elif subject is not None:
        schema = client.get_latest_version(subject).schema
        conf = {"auto.register.schemas": False, "subject.name.strategy": lambda ctx, name: subject}
    else:
        schema = Schema(json.dumps(avro_schema_for(arrow_type, column)))
    serializer = AvroSerializer(client, schema, conf)
    with _lock:
        _serializers[key] = serializer
    return serializer


def serialize_columns(fmt: FormatOptions, topic: str, batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` with its avro-formatted struct columns serialised to binary."""
    columns, names = list(batch.columns), list(batch.schema.names)
    for column in ("key", "value"):
        kind = fmt.key_format if column == "key" else fmt.value_format
        if column not in names or kind == "binary":
            continue
        if kind != "avro":
            raise KafluxOptionError(f"Option '{column}.format': the sink writes binary or avro, not {kind}")
        array = batch.column(column)
        serializer = _serializer(fmt, column, array.type)
        ctx = SerializationContext(topic, "key" if column == "key" else "value")
        values = array.to_pylist()
        if _has_map(array.type):
            values = [_maps_to_dicts(v, array.type) for v in values]
        columns[names.index(column)] = pa.array([serializer(v, ctx) for v in values], type=pa.binary())
    return pa.RecordBatch.from_arrays(columns, names=names)
