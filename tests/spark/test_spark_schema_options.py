"""The typed-column options of the kaflux source and sink, and the Avro -> Spark type mapping
(no Spark session needed). [test]"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from fastavro import parse_schema
from pyspark.sql.pandas.types import to_arrow_type

from pyspark_kaflux.avro_types import AvroTypeError, spark_type
from pyspark_kaflux.options import (
    FormatOptions,
    KafluxOptionError,
    parse_format_options,
    parse_sink_options,
    parse_source_options,
)
from pyspark_kaflux.schema_sink import avro_schema_for

from support.schema_fixtures import PAGE_VIEW

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t"}


def test_binary_by_default_and_avro_with_the_registry_options() -> None:
    assert parse_source_options(BASE, streaming=False).formats is None
    options = {
        **BASE,
        "value.format": "AVRO",
        "schema.registry.url": "http://r:8081",
        "schema.registry.basic.auth.user.info": "u:p",
        "value.schema.id": "7",
        "decode.mode": "permissive",
    }
    parsed = parse_source_options(options, streaming=True)
    assert parsed.formats == FormatOptions(
        value_format="avro",
        registry=(("basic.auth.user.info", "u:p"), ("url", "http://r:8081")),
        value_schema_id=7,
        permissive=True,
    )
    assert parsed.ignored == ()
    assert parse_sink_options({**options, "topic": "out"}).formats == parsed.formats


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"value.format": "xml"}, "value.format"),
        ({"key.format": "avro", "decode.mode": "lenient"}, "decode.mode"),
        ({"value.subject": "s"}, "value.format"),
        ({"value.format": "avro", "value.schema.id": "x"}, "value.schema.id"),
    ],
)
def test_bad_options_are_named(options: dict[str, str], message: str) -> None:
    with pytest.raises(KafluxOptionError, match=message):
        parse_format_options({**BASE, **options})


def test_avro_types_map_to_spark_types_and_arrow() -> None:
    named: dict[str, object] = {}
    parsed = parse_schema(PAGE_VIEW, named_schemas=named)  # type: ignore[arg-type]
    spark = spark_type(parsed, named)
    assert spark.simpleString().startswith("struct<id:bigint,user:string,score:double,ratio:float")
    arrow = to_arrow_type(spark, timezone="UTC")
    assert arrow.field("price").type == pa.decimal128(10, 2)
    assert arrow.field("at_ms").type == pa.timestamp("us", tz="UTC")
    assert arrow.field("day").type == pa.date32()


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "record", "name": "R", "fields": [{"name": "u", "type": ["null", "int", "string"]}]},
        {"type": "record", "name": "N", "fields": [{"name": "next", "type": ["null", "N"]}]},
    ],
)
def test_unsupported_avro_types_are_refused_naming_the_field(schema: dict[str, object]) -> None:
    named: dict[str, object] = {}
    with pytest.raises(AvroTypeError, match=r"value\.(u|next)"):
        spark_type(parse_schema(schema, named_schemas=named), named)  # type: ignore[arg-type]


def test_the_sink_derives_an_avro_schema_from_the_column_type() -> None:
    arrow_type = pa.struct(
        [
            pa.field("id", pa.int64()),
            pa.field("tags", pa.list_(pa.string())),
            pa.field("m", pa.map_(pa.string(), pa.int32())),
            pa.field("when", pa.timestamp("us", tz="UTC")),
            pa.field("price", pa.decimal128(5, 1)),
        ]
    )
    schema = avro_schema_for(arrow_type, "value")
    parse_schema(json.loads(json.dumps(schema)))  # valid Avro
    assert schema["name"] == "Value"
    assert [f["type"][1] for f in schema["fields"]] == [
        "long",
        {"type": "array", "items": ["null", "string"]},
        {"type": "map", "values": ["null", "int"]},
        {"type": "long", "logicalType": "timestamp-micros"},
        {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 1},
    ]
