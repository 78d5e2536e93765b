"""``df.write.format("kaflux")`` / ``df.writeStream.format("kaflux")``: what the sink writes, read back by
``kaflux.Consumer``."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from kaflux import AdminClient
from kaflux.devbrokers.brokers import Broker

from support.spark_helpers import WAIT_S, consume_all, create_topic, produce

pytestmark = [pytest.mark.spark, pytest.mark.integration]

SINK_SCHEMA = (
    "key string, value binary, topic string, partition int, headers array<struct<key:string,value:binary>>"
)


def write(df: Any, broker: Broker, **options: str) -> None:
    writer = (
        df.write.format("kaflux").mode("append").option("kafka.bootstrap.servers", broker.bootstrap_servers)
    )
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save()


def test_batch_sink_round_trip(spark_session: Any, broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 3)
    rows = [
        (
            None if i % 5 == 0 else f"key-{i}",
            b"value-%d" % i,
            topic_name,
            i % 3,
            [("n", b"%d" % i), ("empty", None)] if i % 2 else None,
        )
        for i in range(40)
    ]
    write(spark_session.createDataFrame(rows, SINK_SCHEMA).repartition(2), broker)
    got = consume_all(broker.bootstrap_servers, topic_name, len(rows), 3)
    want = sorted(
        ((p, None if k is None else k.encode(), v, list(h) if h else []) for k, v, _, p, h in rows), key=repr
    )
    assert sorted(((r.partition, r.key, r.value, list(r.headers)) for r in got), key=repr) == want


def test_topic_option_overrides_the_topic_column_and_strings_are_utf8(
    spark_session: Any, kafka: Broker, topic_name: str
) -> None:
    create_topic(kafka.bootstrap_servers, topic_name, 1)
    decoy = f"kx-decoy-{uuid.uuid4().hex[:8]}"
    df = spark_session.createDataFrame(
        [(decoy, f"é-{i}", f"k{i}") for i in range(5)], "topic string, value string, key string"
    )
    write(df, kafka, topic=topic_name)
    got = consume_all(kafka.bootstrap_servers, topic_name, 5, 1)
    assert sorted((r.key, r.value) for r in got) == [(f"k{i}".encode(), f"é-{i}".encode()) for i in range(5)]
    with AdminClient({"bootstrap.servers": kafka.bootstrap_servers}) as admin:
        assert decoy not in admin.list_topics(timeout=WAIT_S)


def test_sink_rejects_bad_input(spark_session: Any, kafka: Broker, topic_name: str) -> None:
    create_topic(kafka.bootstrap_servers, topic_name, 1)
    values = spark_session.createDataFrame([("a",)], "value string")
    with pytest.raises(Exception, match="topic option required when no 'topic' attribute is present"):
        write(values, kafka)
    with pytest.raises(Exception, match="value attribute type must be a string or binary"):
        write(spark_session.createDataFrame([(1,)], "value int"), kafka, topic=topic_name)
    with pytest.raises(Exception, match="Overwrite is not allowed"):
        values.write.format("kaflux").mode("overwrite").option(
            "kafka.bootstrap.servers", kafka.bootstrap_servers
        ).option("topic", topic_name).save()
    with pytest.raises(Exception, match="Null topic present in the data"):
        write(spark_session.createDataFrame([(None, "a")], "topic string, value string"), kafka)


def test_stream_sink_copies_a_topic(
    spark_session: Any, kafka: Broker, topic_name: str, tmp_path: Path
) -> None:
    source, target = f"{topic_name}-in", f"{topic_name}-out"
    create_topic(kafka.bootstrap_servers, source, 2)
    create_topic(kafka.bootstrap_servers, target, 2)
    produced = produce(kafka.bootstrap_servers, source, 30, partitions=2, headers=True)
    query = (
        spark_session.readStream.format("kaflux")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .option("maxOffsetsPerTrigger", "10")
        .load()
        .select("key", "value", "partition", "headers")
        .writeStream.format("kaflux")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("topic", target)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    assert [p["numInputRows"] for p in query.recentProgress] == [10, 10, 10]
    got = consume_all(kafka.bootstrap_servers, target, 30, 2)
    assert sorted(((r.partition, r.key, r.value, list(r.headers)) for r in got), key=repr) == sorted(
        ((p.partition, p.key, p.value, list(p.headers)) for p in produced), key=repr
    )


def test_the_sink_producer_is_idempotent_unless_the_option_turns_it_off() -> None:
    from pyspark_kaflux.options import parse_sink_options

    base = {"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "t"}
    assert parse_sink_options(base).idempotent is True
    assert parse_sink_options({**base, "kafka.enable.idempotence": "false"}).idempotent is False
    # Java's rule: left at its default, idempotence gives way to a conflicting setting
    assert parse_sink_options({**base, "kafka.acks": "1"}).idempotent is False
    with pytest.raises(Exception, match="idempotence"):
        parse_sink_options({**base, "kafka.acks": "1", "kafka.enable.idempotence": "true"})


@pytest.mark.parametrize("idempotence", ["true", "false"])
def test_rows_for_several_topics_go_to_each_topic(
    spark_session: Any, kafka: Broker, topic_name: str, idempotence: str
) -> None:
    topics = [f"{topic_name}-a", f"{topic_name}-b"]
    for topic in topics:
        create_topic(kafka.bootstrap_servers, topic, 2)
    rows = [(f"k{i}", b"v%d" % i, topics[i % 2]) for i in range(200)]
    df = spark_session.createDataFrame(rows, "key string, value binary, topic string").repartition(3)
    write(df, kafka, **{"kafka.enable.idempotence": idempotence})
    for index, topic in enumerate(topics):
        got = consume_all(kafka.bootstrap_servers, topic, 100, 2)
        assert sorted(r.value for r in got) == sorted(v for _, v, t in rows if t == topics[index])
