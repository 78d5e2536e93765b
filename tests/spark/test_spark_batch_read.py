"""``spark.read.format("kaflux")``: schema, exact rows, offset ranges, headers, timestamps, splitting."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from kaflux.devbrokers.brokers import Broker
from pyspark_kaflux.schema import kafka_schema

from support.spark_helpers import Produced, create_topic, produce

pytestmark = [pytest.mark.spark, pytest.mark.integration]

LATEST_DEFECT = (
    "ListOffsets LATEST answers the last batch's base offset + 1, so endingOffsets=latest stops early"
)
TIMESTAMP_DEFECT = "ListOffsets by timestamp always answers offset 0"


def load(spark: Any, broker: Broker, **options: str) -> Any:
    reader = spark.read.format("kaflux").option("kafka.bootstrap.servers", broker.bootstrap_servers)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def expected(records: list[Produced], headers: bool = False) -> list[tuple[Any, ...]]:
    rows = []
    for r in records:
        row: tuple[Any, ...] = (r.key, r.value, r.topic, r.partition, r.offset, r.spark_timestamp, 0)
        if headers:
            row += (list(r.headers) or None,)
        rows.append(row)
    return sorted(rows, key=lambda row: (row[2], row[3], row[4]))


def collected(df: Any) -> list[tuple[Any, ...]]:
    rows = []
    for row in df.collect():
        values = list(row)
        if len(values) == 8:  # headers: list of Row(key, value) or None
            values[7] = None if values[7] is None else [(h.key, h.value) for h in values[7]]
        rows.append(tuple(values))
    return sorted(rows, key=lambda row: (row[2], row[3], row[4]))


@pytest.mark.broker_defect("tansu", reason=LATEST_DEFECT, raises=AssertionError)
def test_batch_read_returns_exactly_the_produced_rows(
    spark_session: Any, broker: Broker, topic_name: str
) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 3)
    records = produce(broker.bootstrap_servers, topic_name, 60, partitions=3)
    df = load(spark_session, broker, subscribe=topic_name)
    assert df.schema == kafka_schema(False)
    assert collected(df) == expected(records)


def test_offset_json_ranges_give_exactly_those_rows(
    spark_session: Any, broker: Broker, topic_name: str
) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 3)
    records = produce(broker.bootstrap_servers, topic_name, 45, partitions=3)  # 15 per partition
    starting = {topic_name: {"0": 2, "1": -2, "2": 7}}
    ending = {topic_name: {"0": 9, "1": 15, "2": 7}}
    df = load(
        spark_session,
        broker,
        assign=json.dumps({topic_name: [0, 1, 2]}),
        startingOffsets=json.dumps(starting),
        endingOffsets=json.dumps(ending),
    )
    want = [r for r in records if (2 <= r.offset < 9 if r.partition == 0 else r.partition == 1)]
    assert collected(df) == expected(want)


def test_include_headers(spark_session: Any, kafka: Broker, topic_name: str) -> None:
    create_topic(kafka.bootstrap_servers, topic_name, 2)
    records = produce(kafka.bootstrap_servers, topic_name, 12, partitions=2, headers=True)
    df = load(spark_session, kafka, subscribe=topic_name, includeHeaders="true")
    assert df.schema == kafka_schema(True)
    rows = collected(df)
    assert rows == expected(records, headers=True)
    assert any(row[7] is None for row in rows), "a record without headers has null headers"
    assert ("h2", None) in rows[0][7], "a header with a null value keeps it"


@pytest.mark.broker_defect("tansu", reason=TIMESTAMP_DEFECT, raises=AssertionError)
def test_starting_offsets_by_timestamp(spark_session: Any, broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 2)
    base = int(time.time() * 1000) - 60_000  # recent: brokers may drop records older than retention.ms
    records = produce(
        broker.bootstrap_servers, topic_name, 40, partitions=2, timestamps=[base + 100 * i for i in range(40)]
    )
    # Partition 0 holds even i (timestamps base + 0, 200, ...), partition 1 odd i (base + 100, 300, ...).
    by_partition = {topic_name: {"0": base + 1000, "1": base + 3050}}
    df = load(
        spark_session, broker, subscribe=topic_name, startingOffsetsByTimestamp=json.dumps(by_partition)
    )
    want = [r for r in records if r.timestamp >= (base + 1000 if r.partition == 0 else base + 3050)]
    assert collected(df) == expected(want)

    global_ts = load(spark_session, broker, subscribe=topic_name, startingTimestamp=str(base + 3500))
    assert collected(global_ts) == expected([r for r in records if r.timestamp >= base + 3500])

    # No record at or after the timestamp: an error by default, the end with strategy "latest".
    too_late = str(base + 10_000_000)
    with pytest.raises(Exception, match="No offset matched from request of topic-partition"):
        load(spark_session, broker, subscribe=topic_name, startingTimestamp=too_late).collect()
    assert (
        load(
            spark_session,
            broker,
            subscribe=topic_name,
            startingTimestamp=too_late,
            startingOffsetsByTimestampStrategy="latest",
        ).collect()
        == []
    )


def test_min_partitions_and_max_records_per_partition_split_ranges(
    spark_session: Any, kafka: Broker, topic_name: str
) -> None:
    create_topic(kafka.bootstrap_servers, topic_name, 2)
    records = produce(kafka.bootstrap_servers, topic_name, 100, partitions=2)
    plain = load(spark_session, kafka, subscribe=topic_name)
    assert plain.rdd.getNumPartitions() == 2
    split = load(spark_session, kafka, subscribe=topic_name, minPartitions="6")
    assert split.rdd.getNumPartitions() == 6
    assert collected(split) == expected(records)
    capped = load(spark_session, kafka, subscribe=topic_name, maxRecordsPerPartition="10")
    assert capped.rdd.getNumPartitions() == 10
    assert capped.count() == 100


def test_custom_schema_is_rejected(spark_session: Any, kafka: Broker) -> None:
    reader = (
        spark_session.read.format("kaflux")
        .schema("value string")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", "t")
    )
    with pytest.raises(Exception, match="fixed schema"):
        reader.load().collect()
