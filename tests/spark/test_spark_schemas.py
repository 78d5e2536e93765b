"""``format("kaflux")`` with ``value.format=avro``: typed struct columns from the Schema Registry,
in batch and availableNow streams, bad records, and the Avro sink read back by confluent-kafka. [test]"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from typing import Any

import pytest

from kaflux import Producer
from kaflux.devbrokers.brokers import Broker
from kaflux.schema_registry import SchemaRegistryClient
from kaflux.schema_registry.avro import AvroSerializer

from support.schema_fixtures import PAGE_VIEW_STR, USER_V1, USER_V2, page_view
from support.schema_registry import SchemaRegistryDouble
from support.spark_helpers import create_topic

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.schema_registry import SchemaRegistryClient as CkRegistry  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroDeserializer as CkAvroDeserializer  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroSerializer as CkAvroSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField  # noqa: E402
from confluent_kafka.serialization import SerializationContext as CkContext  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.integration]
COUNT = 40


def _produce_page_views(
    broker: Broker, registry: SchemaRegistryDouble, topic: str, count: int = COUNT
) -> None:
    create_topic(broker.bootstrap_servers, topic, 1)
    with CkRegistry({"url": registry.url}) as peer:
        serializer = CkAvroSerializer(peer, PAGE_VIEW_STR)
        producer = ck.Producer({"bootstrap.servers": broker.bootstrap_servers})
        for i in range(count):
            producer.produce(topic, serializer(page_view(i), CkContext(topic, MessageField.VALUE)))
        assert producer.flush(20) == 0


def _as_spark(value: Any) -> Any:
    """A decoded Avro value as Spark collects it (UTC session: naive UTC datetimes)."""
    if isinstance(value, dict):
        return {k: _as_spark(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_spark(v) for v in value]
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


def _collected(row_value: Any) -> Any:
    value = row_value.asDict(recursive=True)
    value["raw"] = bytes(value["raw"])
    return value


def _read(spark: Any, broker: Broker, registry: SchemaRegistryDouble, topic: str, **options: str) -> Any:
    reader = (
        spark.read.format("kaflux")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", topic)
        .option("value.format", "avro")
        .option("schema.registry.url", registry.url)
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_batch_read_gives_typed_struct_columns_with_exact_values(
    spark_session: Any, kafka: Broker, registry: SchemaRegistryDouble, topic_name: str
) -> None:
    _produce_page_views(kafka, registry, topic_name)
    df = _read(spark_session, kafka, registry, topic_name)
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:bigint,user:string,score:double,ratio:float,active:boolean,count:int,raw:binary,"
        "tags:array<string>,attributes:map<string,bigint>,referrer:string,"
        "address:struct<street:string,zip:int>,previous:struct<street:string,zip:int>,"
        "price:decimal(10,2),day:date,at_ms:timestamp,at_us:timestamp,session:string>"
    )
    rows = df.orderBy("offset").collect()
    assert [_collected(r.value) for r in rows] == [_as_spark(page_view(i)) for i in range(COUNT)]
    assert [r.offset for r in rows] == list(range(COUNT))
    # the typed columns work in SQL like any struct
    assert df.where("value.active AND value.attributes['clicks'] > 10").count() == len(
        [i for i in range(COUNT) if i % 2 == 0 and i > 10]
    )


def test_available_now_stream_gives_the_same_rows(
    spark_session: Any, kafka: Broker, registry: SchemaRegistryDouble, topic_name: str, tmp_path: Any
) -> None:
    _produce_page_views(kafka, registry, topic_name)
    stream = (
        spark_session.readStream.format("kaflux")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", topic_name)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "15")
        .option("value.format", "avro")
        .option("schema.registry.url", registry.url)
        .load()
    )
    name = "avro_" + topic_name.replace("-", "_")[-20:]
    query = (
        stream.select("offset", "value")
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    rows = spark_session.sql(f"SELECT * FROM {name} ORDER BY offset").collect()
    assert [_collected(r.value) for r in rows] == [_as_spark(page_view(i)) for i in range(COUNT)]


def test_v1_records_read_with_the_latest_v2_schema_get_the_default(
    spark_session: Any, kafka: Broker, registry: SchemaRegistryDouble, topic_name: str
) -> None:
    create_topic(kafka.bootstrap_servers, topic_name, 1)
    with SchemaRegistryClient({"url": registry.url}) as client:
        v1, v2 = AvroSerializer(client, USER_V1), AvroSerializer(client, USER_V2)
        with Producer({"bootstrap.servers": kafka.bootstrap_servers}) as producer:
            from kaflux.serialization import SerializationContext

            ctx = SerializationContext(topic_name, "value")
            producer.send(topic_name, v1({"name": "ann"}, ctx))
            producer.send(topic_name, v2({"name": "bob", "age": 3}, ctx))
            producer.flush(20)
    rows = _read(spark_session, kafka, registry, topic_name).orderBy("offset").collect()
    assert [r.value.asDict() for r in rows] == [{"name": "ann", "age": -1}, {"name": "bob", "age": 3}]


def test_an_undecodable_record_fails_naming_its_offset_or_is_kept_raw_in_permissive_mode(
    spark_session: Any, kafka: Broker, registry: SchemaRegistryDouble, topic_name: str
) -> None:
    _produce_page_views(kafka, registry, topic_name, count=3)
    with Producer({"bootstrap.servers": kafka.bootstrap_servers}) as producer:
        producer.send(topic_name, b"not avro")
        producer.flush(20)
    with pytest.raises(Exception, match=rf"{topic_name}-0 offset 3"):
        _read(spark_session, kafka, registry, topic_name).collect()
    rows = _read(spark_session, kafka, registry, topic_name, **{"decode.mode": "PERMISSIVE"}).orderBy(
        "offset"
    )
    collected = rows.select("offset", "value", "value_raw").collect()
    assert [r.value is None for r in collected] == [False, False, False, True]
    assert [r.value_raw for r in collected] == [None, None, None, bytearray(b"not avro")]


def test_the_sink_writes_avro_that_confluent_kafka_reads_back(
    spark_session: Any, kafka: Broker, registry: SchemaRegistryDouble, topic_name: str
) -> None:
    source, target = topic_name, topic_name + "-out"
    _produce_page_views(kafka, registry, source)
    create_topic(kafka.bootstrap_servers, target, 1)
    df = _read(spark_session, kafka, registry, source).orderBy("offset").select("value")
    (
        df.write.format("kaflux")
        .mode("append")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("topic", target)
        .option("value.format", "avro")
        .option("schema.registry.url", registry.url)
        .save()
    )
    consumer = ck.Consumer(
        {"bootstrap.servers": kafka.bootstrap_servers, "group.id": target, "auto.offset.reset": "earliest"}
    )
    values: list[Any] = []
    with CkRegistry({"url": registry.url}) as peer:
        deserializer = CkAvroDeserializer(peer)
        try:
            consumer.subscribe([target])
            deadline = time.monotonic() + 30
            while len(values) < COUNT and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    values.append(deserializer(message.value(), CkContext(target, MessageField.VALUE)))
        finally:
            consumer.close()
    assert sorted(values, key=lambda v: v["id"]) == [_as_spark_avro(page_view(i)) for i in range(COUNT)]


def _as_spark_avro(value: dict[str, Any]) -> dict[str, Any]:
    """What comes back through Spark: the same record, but the uuid, which Spark holds as a string
    (the sink's schema is derived from the struct type)."""
    out = dict(value)
    out["session"] = str(value["session"])
    return out


def test_the_main_job_reads_avro_page_views(
    spark_session: Any, kafka: Broker, registry: SchemaRegistryDouble, topic_name: str, tmp_path: Any
) -> None:
    import contextlib
    import io

    from pyspark_kaflux.pipeline import parse_args, run

    argv = ["--format", "avro", "--schema-registry-url", registry.url, "--topic", topic_name]
    argv += ["--partitions", "2", "--records", "3000", "--rate", "20000", "--output", str(tmp_path)]
    argv += ["--timeout", "150"]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = run(spark_session, kafka.bootstrap_servers, parse_args(argv))
    assert code == 0, printed.getvalue()
    assert "done: 3,000 events" in printed.getvalue()
    with SchemaRegistryClient({"url": registry.url}) as client:
        assert client.get_latest_version(f"{topic_name}-value").schema.schema_str.find("PageView") > 0


def test_format_avro_needs_a_registry() -> None:
    from pyspark_kaflux.pipeline import parse_args

    with pytest.raises(SystemExit):
        parse_args(["--format", "avro"])


def test_json_schema_values_read_as_a_struct(
    spark_session: Any, kafka: Broker, registry: SchemaRegistryDouble, topic_name: str
) -> None:
    from kaflux.schema_registry.json_schema import JsonSchemaSerializer

    from support.schema_fixtures import ORDER_JSON_SCHEMA

    create_topic(kafka.bootstrap_servers, topic_name, 1)
    orders = [
        {"id": i, "items": [f"item-{i}"] * (i % 3), "note": None if i % 2 else "gift"} for i in range(20)
    ]
    with SchemaRegistryClient({"url": registry.url}) as client:
        serializer = JsonSchemaSerializer(client, ORDER_JSON_SCHEMA)
        with Producer(
            {"bootstrap.servers": kafka.bootstrap_servers}, value_serializer=serializer
        ) as producer:
            for order in orders:
                producer.send(topic_name, order)
            producer.flush(20)
    df = _read(spark_session, kafka, registry, topic_name, **{"value.format": "json"})
    assert df.schema["value"].dataType.simpleString() == "struct<id:bigint,items:array<string>,note:string>"
    assert [r.value.asDict() for r in df.orderBy("offset").collect()] == orders


def test_a_pinned_reader_schema_and_an_avro_key(
    spark_session: Any, kafka: Broker, registry: SchemaRegistryDouble, topic_name: str
) -> None:
    from kaflux.serialization import SerializationContext

    create_topic(kafka.bootstrap_servers, topic_name, 1)
    with SchemaRegistryClient({"url": registry.url}) as client:
        key_serializer = AvroSerializer(client, USER_V1)
        v1, v2 = AvroSerializer(client, USER_V1), AvroSerializer(client, USER_V2)
        value_ctx, key_ctx = (
            SerializationContext(topic_name, "value"),
            SerializationContext(topic_name, "key"),
        )
        with Producer({"bootstrap.servers": kafka.bootstrap_servers}) as producer:
            producer.send(
                topic_name, v1({"name": "ann"}, value_ctx), key=key_serializer({"name": "k1"}, key_ctx)
            )
            producer.send(
                topic_name,
                v2({"name": "bob", "age": 3}, value_ctx),
                key=key_serializer({"name": "k2"}, key_ctx),
            )
            producer.flush(20)
        v1_id = client.get_version(f"{topic_name}-value", 1).schema_id
    df = _read(
        spark_session, kafka, registry, topic_name, **{"value.schema.id": str(v1_id), "key.format": "avro"}
    )
    assert df.schema["value"].dataType.simpleString() == "struct<name:string>"
    rows = df.orderBy("offset").collect()
    assert [(r.key.name, r.value.name) for r in rows] == [("k1", "ann"), ("k2", "bob")]
    by_subject = _read(spark_session, kafka, registry, topic_name, **{"value.subject": f"{topic_name}-value"})
    assert by_subject.schema["value"].dataType.simpleString() == "struct<name:string,age:int>"


def test_each_query_takes_the_latest_schema_when_it_starts(
    spark_session: Any, kafka: Broker, registry: SchemaRegistryDouble, topic_name: str
) -> None:
    from kaflux.schema_registry import Schema
    from kaflux.serialization import SerializationContext

    create_topic(kafka.bootstrap_servers, topic_name, 1)
    with SchemaRegistryClient({"url": registry.url}) as client:
        with Producer({"bootstrap.servers": kafka.bootstrap_servers}) as producer:
            producer.send(
                topic_name,
                AvroSerializer(client, USER_V1)({"name": "ann"}, SerializationContext(topic_name, "value")),
            )
            producer.flush(20)
        first = _read(spark_session, kafka, registry, topic_name)
        assert [r.value.asDict() for r in first.collect()] == [{"name": "ann"}]
        client.register_schema(f"{topic_name}-value", Schema(USER_V2))
    second = _read(spark_session, kafka, registry, topic_name)
    assert [r.value.asDict() for r in second.collect()] == [{"name": "ann", "age": -1}]


def test_header_framed_avro_from_confluent_kafka_reads_with_the_headers_column(
    spark_session: Any, kafka: Broker, registry: SchemaRegistryDouble, topic_name: str
) -> None:
    """A topic mixing prefix framing and confluent-kafka's header framing (the schema GUID in
    a __value_schema_id header): with includeHeaders=true every value decodes, exactly;
    without the headers column the header-framed ones fail, saying to include them."""
    from confluent_kafka.schema_registry import header_schema_id_serializer

    create_topic(kafka.bootstrap_servers, topic_name, 1)
    with CkRegistry({"url": registry.url}) as peer:
        prefixed = CkAvroSerializer(peer, PAGE_VIEW_STR)
        in_header = CkAvroSerializer(
            peer, PAGE_VIEW_STR, conf={"schema.id.serializer": header_schema_id_serializer}
        )
        producer = ck.Producer({"bootstrap.servers": kafka.bootstrap_servers})
        for i in range(COUNT):
            headers: list[tuple[str, str | bytes | None]] = []
            serializer = in_header if i % 2 else prefixed
            value = serializer(page_view(i), CkContext(topic_name, MessageField.VALUE, headers))
            producer.produce(topic_name, value, headers=headers)
        assert producer.flush(20) == 0
    df = _read(spark_session, kafka, registry, topic_name, includeHeaders="true")
    rows = df.orderBy("offset").collect()
    assert [_collected(r.value) for r in rows] == [_as_spark(page_view(i)) for i in range(COUNT)]
    assert [[h.key for h in r.headers or []] for r in rows[:2]] == [[], ["__value_schema_id"]]
    with pytest.raises(
        Exception, match=rf"{topic_name}-0 offset 1 as Avro: no magic byte.*includeHeaders=true"
    ):
        _read(spark_session, kafka, registry, topic_name).collect()
