"""The Spark source's column decoders on Arrow batches, without Spark: Avro (fastavro, resolved
to the reader schema) and JSON (Arrow's JSON reader), good and bad records. [test]"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from kaflux.schema_registry import Schema, SchemaRegistryClient
from kaflux.schema_registry.avro import AvroSerializer
from kaflux.schema_registry.json_schema import JsonSchemaSerializer
from kaflux.serialization import SerializationContext
from pyspark_kaflux.schema_columns import (
    AvroColumnDecoder,
    JsonColumnDecoder,
    ProtobufColumnDecoder,
    RecordDecodeError,
    ResolvedFormat,
)

from support.schema_fixtures import ORDER_JSON_SCHEMA, USER_V1, USER_V2
from support.schema_registry import SchemaRegistryDouble

CTX = SerializationContext("t", "value")


def _batch(values: list[bytes | None]) -> pa.RecordBatch:
    n = len(values)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(values, pa.binary()),
            pa.array(["t"] * n),
            pa.array([0] * n, pa.int32()),
            pa.array(range(n)),
        ],
        names=["value", "topic", "partition", "offset"],
    )


def _format(
    registry: SchemaRegistryDouble, kind: str, text: str, schema_id: int, permissive: bool
) -> ResolvedFormat:
    return ResolvedFormat("value", kind, text, schema_id, (), (("url", registry.url),), permissive)


def test_json_values_decode_in_bulk_and_bad_ones_are_named_or_kept(registry: SchemaRegistryDouble) -> None:
    with SchemaRegistryClient({"url": registry.url}) as client:
        serializer = JsonSchemaSerializer(client, ORDER_JSON_SCHEMA)
        good = [
            serializer({"id": i, "items": [str(i)] * i, "note": None if i % 2 else "n"}, CTX)
            for i in range(4)
        ]
        schema_id = client.register_schema("t-value", Schema(ORDER_JSON_SCHEMA, "JSON"))
    bad_json = b"\x00" + schema_id.to_bytes(4, "big") + b'{"id": "x"'
    values = [good[0], None, b"plain", good[1], bad_json, good[2], good[3]]
    decoder = JsonColumnDecoder(_format(registry, "json", ORDER_JSON_SCHEMA, schema_id, permissive=True))
    decoded, raw = decoder.decode(_batch(values))
    assert decoded.to_pylist() == [
        {"id": 0, "items": [], "note": "n"},
        None,
        None,
        {"id": 1, "items": ["1"], "note": None},
        None,
        {"id": 2, "items": ["2", "2"], "note": "n"},
        {"id": 3, "items": ["3", "3", "3"], "note": None},
    ]
    assert raw is not None and raw.to_pylist() == [None, None, b"plain", None, bad_json, None, None]
    strict = JsonColumnDecoder(_format(registry, "json", ORDER_JSON_SCHEMA, schema_id, permissive=False))
    with pytest.raises(RecordDecodeError, match="t-0 offset 2"):
        strict.decode(_batch(values))
    assert strict.decode(_batch([good[0], None]))[0].to_pylist() == [
        {"id": 0, "items": [], "note": "n"},
        None,
    ]


def test_avro_values_resolve_to_the_reader_schema_and_bad_ones_are_named(
    registry: SchemaRegistryDouble,
) -> None:
    with SchemaRegistryClient({"url": registry.url}) as client:
        v1 = AvroSerializer(client, USER_V1)({"name": "ann"}, CTX)
        v2 = AvroSerializer(client, USER_V2)({"name": "bob", "age": 4}, CTX)
        assert v1 is not None and v2 is not None
        reader_id = int.from_bytes(v2[1:5], "big")
    truncated = v2[:-1]
    decoder = AvroColumnDecoder(_format(registry, "avro", USER_V2, reader_id, permissive=True))
    decoded, raw = decoder.decode(_batch([v1, v2, None, truncated, b"\x00\x00\x00\x00\x63xx"]))
    assert decoded.to_pylist() == [{"name": "ann", "age": -1}, {"name": "bob", "age": 4}, None, None, None]
    assert raw is not None and raw.to_pylist() == [None, None, None, truncated, b"\x00\x00\x00\x00\x63xx"]
    # all framed with the reader schema's id: the vectorised path
    assert decoder.decode(_batch([v2, None, v2]))[0].to_pylist() == [
        {"name": "bob", "age": 4},
        None,
        {"name": "bob", "age": 4},
    ]
    strict = AvroColumnDecoder(_format(registry, "avro", USER_V2, reader_id, permissive=False))
    with pytest.raises(RecordDecodeError, match="t-0 offset 1"):
        strict.decode(_batch([v2, truncated]))


def test_protobuf_values_decode_with_a_class_built_from_the_registry(registry: SchemaRegistryDouble) -> None:
    from kaflux.schema_registry.protobuf import ProtobufSerializer

    from support.protos import order_pb2

    order = order_pb2.Order(id=5, customer="c", items=["a", "b"], total=1.5, quantities={"a": 2})
    order.ship_to.city = "Oslo"
    with SchemaRegistryClient({"url": registry.url}) as client:
        data = ProtobufSerializer(client, order_pb2.Order)(order, CTX)
        empty = ProtobufSerializer(client, order_pb2.Order)(order_pb2.Order(), CTX)
        latest = client.get_latest_version("t-value")
    refs = tuple((r.name, r.subject, r.version) for r in latest.schema.references)
    fmt = ResolvedFormat(
        "value", "protobuf", latest.schema.schema_str, latest.schema_id, refs, (("url", registry.url),), True
    )
    decoder = ProtobufColumnDecoder(fmt)
    assert decoder.spark_type.simpleString() == (
        "struct<id:bigint,customer:string,items:array<string>,ship_to:struct<street:string,city:string>,"
        "quantities:map<string,int>,total:double>"
    )
    decoded, raw = decoder.decode(_batch([data, empty, None, b"junk"]))
    assert decoded.to_pylist() == [
        {
            "id": 5,
            "customer": "c",
            "items": ["a", "b"],
            "ship_to": {"street": "", "city": "Oslo"},
            "quantities": [("a", 2)],
            "total": 1.5,
        },
        {"id": 0, "customer": "", "items": [], "ship_to": None, "quantities": [], "total": 0.0},
        None,
        None,
    ]
    assert raw is not None and raw.to_pylist() == [None, None, None, b"junk"]


FLAT = {
    "type": "record",
    "name": "Flat",
    "fields": [
        {"name": "a", "type": "int"},
        {"name": "b", "type": ["null", "string"]},
        {"name": "c", "type": "double"},
        {"name": "d", "type": "boolean"},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["X", "Y"]}},
        {
            "name": "f",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "Sub",
                    "fields": [{"name": "g", "type": "long"}, {"name": "h", "type": "bytes"}],
                },
            ],
        },
        {"name": "t", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "fl", "type": "float"},
    ],
}


def _flat_record(i: int) -> dict[str, object]:
    import datetime as dt
    import uuid

    return {
        "a": (i * 2_654_435_761) % 2**32 - 2**31,
        "b": None if i % 3 == 0 else "héllo" * (i % 4),
        "c": i / 7,
        "d": i % 2 == 0,
        "e": "XY"[i % 2],
        "f": None
        if i % 5 == 0
        else {"g": (i * 11_400_714_819_323_198_485) % 2**64 - 2**63, "h": bytes([i % 256]) * (i % 3)},
        "t": dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=1001 * i),
        "day": dt.date(2020, 1, 1) + dt.timedelta(days=i),
        "u": str(uuid.UUID(int=i)),
        "fl": 0.25 * (i % 9),
    }


def test_the_vectorised_avro_decoder_matches_fastavro_and_refuses_malformed_records() -> None:
    import io

    import numpy as np
    from fastavro import parse_schema, schemaless_writer
    from pyspark.sql.pandas.types import to_arrow_type

    from pyspark_kaflux.avro_types import spark_type
    from pyspark_kaflux.avro_vector import compile_plan, decode

    named: dict[str, object] = {}
    parsed = parse_schema(FLAT, named_schemas=named)  # type: ignore[arg-type]
    target = to_arrow_type(spark_type(parsed, named), timezone="UTC")
    plan = compile_plan(parsed, named, target)
    assert plan is not None
    payloads: list[bytes | None] = []
    for i in range(500):
        out = io.BytesIO()
        schemaless_writer(out, parsed, _flat_record(i))
        payloads.append(out.getvalue())
    payloads.insert(7, None)

    def run(values: list[bytes | None]) -> pa.Array | None:
        array = pa.array(values, pa.binary())
        data = np.frombuffer(array.buffers()[2], dtype=np.uint8)
        offsets = np.frombuffer(array.buffers()[1], dtype=np.int32)[: len(array) + 1].astype(np.int64)
        return decode(plan, data, offsets[:-1], offsets[1:], array.is_valid().to_numpy(zero_copy_only=False))

    decoded = run(payloads)
    assert decoded is not None and decoded.type == target
    expected: list[object] = [_flat_record(i) for i in range(500)]
    expected.insert(7, None)
    assert decoded.to_pylist() == expected
    first = payloads[0]
    assert first is not None
    assert run([first, first[:-1]]) is None  # truncated
    assert run([first, first + b"\x00"]) is None  # bytes left over
    assert run([first, b"\x02" + first[1:]]) is None or run([first, b"\x02" + first[1:]]) == run(
        [first, first]
    )
    fixed = {"type": "fixed", "name": "F", "size": 4}
    assert compile_plan(parse_schema(fixed), {}, pa.binary()) is None  # record by record


NESTED = {
    "type": "record",
    "name": "Nested",
    "fields": [
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "counts", "type": {"type": "map", "values": "long"}},
        {
            "name": "subs",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "Item",
                    "fields": [
                        {"name": "n", "type": "int"},
                        {"name": "xs", "type": ["null", {"type": "array", "items": "double"}]},
                    ],
                },
            },
        },
        {"name": "last", "type": "string"},
    ],
}


def _nested_record(i: int) -> dict[str, object]:
    return {
        "tags": [f"t{j}" for j in range(i % 4)],
        "counts": {f"k{j}": j * i for j in range(i % 3)},
        "subs": [{"n": j, "xs": None if j % 2 else [j / 2] * (i % 3)} for j in range(i % 5)],
        "last": f"end-{i}",
    }


def _vector(schema: dict[str, object], values: list[bytes | None]) -> pa.Array | None:
    import numpy as np
    from fastavro import parse_schema
    from pyspark.sql.pandas.types import to_arrow_type

    from pyspark_kaflux.avro_types import spark_type
    from pyspark_kaflux.avro_vector import compile_plan, decode

    named: dict[str, object] = {}
    parsed = parse_schema(schema, named_schemas=named)  # type: ignore[arg-type]
    plan = compile_plan(parsed, named, to_arrow_type(spark_type(parsed, named), timezone="UTC"))
    assert plan is not None
    array = pa.array(values, pa.binary())
    data = np.frombuffer(array.buffers()[2], dtype=np.uint8)
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int32)[: len(array) + 1].astype(np.int64)
    return decode(plan, data, offsets[:-1], offsets[1:], array.is_valid().to_numpy(zero_copy_only=False))


def test_the_vectorised_decoder_reads_arrays_and_maps_in_row_order() -> None:
    import io

    from fastavro import parse_schema, schemaless_writer

    parsed = parse_schema(NESTED)
    payloads: list[bytes | None] = []
    for i in range(300):
        out = io.BytesIO()
        schemaless_writer(out, parsed, _nested_record(i))
        payloads.append(out.getvalue())
    payloads.insert(3, None)
    decoded = _vector(NESTED, payloads)  # type: ignore[arg-type]
    assert decoded is not None
    # Arrow gives a map as a list of (key, value) pairs
    expected: list[object] = [
        {**_nested_record(i), "counts": [(f"k{j}", j * i) for j in range(i % 3)]} for i in range(300)
    ]
    expected.insert(3, None)
    assert decoded.to_pylist() == expected
    # a block with a negative count carries its size in bytes: [1, 2] as count -2, size 2, 1, 2, end
    ints = {
        "type": "record",
        "name": "Ints",
        "fields": [{"name": "xs", "type": {"type": "array", "items": "int"}}],
    }
    sized = _vector(ints, [b"\x03\x04\x02\x04\x00", b"\x04\x02\x04\x00", b"\x00"])  # type: ignore[arg-type]
    assert sized is not None and sized.to_pylist() == [{"xs": [1, 2]}, {"xs": [1, 2]}, {"xs": []}]
    assert _vector(ints, [b"\x7e\x02\x00"]) is None  # type: ignore[arg-type]  # 63 items, in 2 bytes


def test_the_vectorised_decoder_reads_every_type_of_the_page_view() -> None:
    import io

    from fastavro import parse_schema, schemaless_writer

    from support.schema_fixtures import PAGE_VIEW, page_view

    parsed = parse_schema(PAGE_VIEW)
    payloads: list[bytes | None] = []
    for i in range(-50, 250):
        out = io.BytesIO()
        record = page_view(abs(i))
        if i < 0:
            record["price"] = -record["price"]  # negative decimals
        schemaless_writer(out, parsed, record)
        payloads.append(out.getvalue())
    decoded = _vector(PAGE_VIEW, payloads)  # type: ignore[arg-type]
    assert decoded is not None
    for i, row in zip(range(-50, 250), decoded.to_pylist(), strict=True):
        expected = page_view(abs(i))
        if i < 0:
            expected["price"] = -expected["price"]
        expected["session"] = str(expected["session"])
        expected["attributes"] = list(expected["attributes"].items())
        assert row == expected


def _header_framed_case(registry: SchemaRegistryDouble, kind: str) -> tuple[ResolvedFormat, Any, Any, Any]:
    """(format, serializer, header-framing serializer, a value) for ``kind``."""
    from kaflux.schema_registry.protobuf import ProtobufSerializer

    from support.protos import order_pb2

    header = {"schema.id.serializer": "header"}
    client = SchemaRegistryClient({"url": registry.url})
    if kind == "protobuf":
        order = order_pb2.Order(id=5, customer="c", items=["a"], total=1.5)
        serializer: Any = ProtobufSerializer(client, order_pb2.Order)
        framed: Any = ProtobufSerializer(client, order_pb2.Order, header)
        serializer(order, CTX)
        latest = client.get_latest_version("t-value")
        refs = tuple((r.name, r.subject, r.version) for r in latest.schema.references)
        fmt = ResolvedFormat(
            "value", kind, latest.schema.schema_str, latest.schema_id, refs, (("url", registry.url),), False
        )
        return fmt, serializer, framed, order
    text, value = (
        (USER_V1, {"name": "ann"}) if kind == "avro" else (ORDER_JSON_SCHEMA, {"id": 1, "items": []})
    )
    cls: Any = AvroSerializer if kind == "avro" else JsonSchemaSerializer
    serializer, framed = cls(client, text), cls(client, text, header)
    schema_id = int.from_bytes(serializer(value, CTX)[1:5], "big")
    return _format(registry, kind, text, schema_id, False), serializer, framed, value


@pytest.mark.parametrize("kind", ["avro", "json", "protobuf"])
def test_header_framed_records_decode_with_the_headers_column(
    registry: SchemaRegistryDouble, kind: str
) -> None:
    """With the headers column, a record whose value's schema GUID is in a __value_schema_id
    header (Confluent's header framing) decodes like a prefixed one; a key's header does not
    concern the value; a malformed header is named (FAILFAST) or kept raw (PERMISSIVE); without
    the headers column, the message says to include them."""
    from dataclasses import replace
    from types import SimpleNamespace

    from pyspark_kaflux.schema import headers_arrow_type
    from pyspark_kaflux.schema_columns import decode_batch, header_framed_rows

    fmt, serializer, framed, value = _header_framed_case(registry, kind)
    prefixed = serializer(value, CTX)
    headers: list[tuple[str, bytes | None]] = []
    bare = framed(value, SerializationContext("t", "value", headers))
    assert prefixed[:1] == b"\x00" and bare == prefixed[5:] if kind != "protobuf" else bare == prefixed[6:]
    malformed = [{"key": "__value_schema_id", "value": b"\x02" + bytes(16)}]
    key_only = [{"key": "__key_schema_id", "value": b"\x01" + bytes(16)}]
    header_rows = [None, [{"key": k, "value": v} for k, v in headers], None, key_only, malformed]
    values = [prefixed, bare, None, prefixed, bare]
    batch = pa.RecordBatch.from_arrays(
        [*_batch(values).columns, pa.array(header_rows, headers_arrow_type())],
        names=["value", "topic", "partition", "offset", "headers"],
    )
    assert header_framed_rows(batch, "value") == {1: headers[0][1], 4: malformed[0]["value"]}
    assert header_framed_rows(batch, "key") == {3: key_only[0]["value"]}
    assert header_framed_rows(_batch([prefixed]), "value") is None  # no headers column

    def options(permissive: bool) -> Any:
        return SimpleNamespace(resolved_formats=[replace(fmt, permissive=permissive)])

    with pytest.raises(
        RecordDecodeError, match=r"t-0 offset 4 as .*unknown magic byte 2 in the __value_schema_id header"
    ):
        decode_batch(batch, options(False))
    out = decode_batch(batch, options(True))
    decoded = out.column("value").to_pylist()
    assert decoded[4] is None
    assert out.column("value_raw").to_pylist() == [None, None, None, None, bare]
    assert decoded[0] == decoded[1] == decoded[3] is not None and decoded[2] is None
    if kind == "avro":
        assert decoded[1] == value
    # the first four alone: nothing to refuse
    assert decode_batch(batch.slice(0, 4), options(False)).column("value").to_pylist() == decoded[:4]
    without_headers = _batch([prefixed, bare])
    with pytest.raises(RecordDecodeError, match=r"t-0 offset 1 as .*no magic byte.*includeHeaders=true"):
        decode_batch(without_headers, options(False))
