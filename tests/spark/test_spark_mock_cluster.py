"""``format("kaflux")`` against a three-broker cluster: librdkafka's mock cluster, whose partition
leaders are spread over its brokers. The source uses no group, so it needs nothing of KIP-848;
what it needs is per-leader fetching and offsets lookups across nodes."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from kaflux import Consumer
from kaflux.devbrokers.mock_cluster import MockCluster

from support.spark_helpers import produce

pytestmark = [pytest.mark.spark, pytest.mark.integration]

#: the mock creates a topic with 4 partitions when it is first produced to
PARTITIONS = 4


def _leaders(bootstrap: str, topic: str) -> set[int]:
    with Consumer({"bootstrap.servers": bootstrap}) as consumer:
        infos = consumer.partitions_for(topic, timeout=30) or []
    return {info.leader for info in infos}


def _topic_with_spread_leaders(bootstrap: str, count: int) -> tuple[str, list[Any]]:
    """A new topic holding ``count`` records, whose partitions the mock happened to give leaders
    on more than one broker (it picks them at random: all on one broker is a 1-in-27 case)."""
    for _ in range(5):
        topic = f"kx-spark-mock-{uuid.uuid4().hex[:8]}"
        records = produce(bootstrap, topic, count, partitions=PARTITIONS)
        if len(_leaders(bootstrap, topic)) > 1:
            return topic, records
    raise AssertionError("the mock put every partition of five topics on one broker")


def _reader(spark: Any, bootstrap: str, topic: str, stream: bool = False) -> Any:
    reader = spark.readStream if stream else spark.read
    return (
        reader.format("kaflux")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )


def test_batch_read_over_leaders_on_three_brokers_returns_exactly_the_produced_rows(
    spark_session: Any, mock_cluster: MockCluster
) -> None:
    bootstrap = mock_cluster.bootstrap_servers
    topic, records = _topic_with_spread_leaders(bootstrap, 200)
    rows = (
        _reader(spark_session, bootstrap, topic)
        .load()
        .select("partition", "offset", "key", "value")
        .collect()
    )
    assert sorted((r.partition, r.offset, r.key, r.value) for r in rows) == sorted(
        (p.partition, p.offset, p.key, p.value) for p in records
    )


def test_available_now_stream_over_three_brokers_writes_every_record_once(
    spark_session: Any, mock_cluster: MockCluster, tmp_path: Path
) -> None:
    bootstrap = mock_cluster.bootstrap_servers
    topic, records = _topic_with_spread_leaders(bootstrap, 300)
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    query = (
        _reader(spark_session, bootstrap, topic, stream=True)
        .option("maxOffsetsPerTrigger", "100")
        .load()
        .select("partition", "offset", "value")
        .writeStream.format("parquet")
        .option("path", out)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120), "the availableNow run did not finish"
    assert query.exception() is None
    rows = spark_session.read.parquet(out).collect()
    keys = [(r.partition, r.offset) for r in rows]
    assert len(keys) == len(set(keys)), "a record was written twice"
    assert {(r.partition, r.offset, r.value) for r in rows} == {
        (p.partition, p.offset, p.value) for p in records
    }
    assert max(p["numInputRows"] for p in query.recentProgress) <= 100
