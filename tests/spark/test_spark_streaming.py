"""``spark.readStream.format("kaflux")`` end to end: restarts from a checkpoint while records keep coming,
admission control, topics appearing and disappearing. On Apache Kafka 4.4, the reference broker
(Tansu's ListOffsets LATEST is wrong)."""

from __future__ import annotations

import re
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from kaflux import Producer
from kaflux.devbrokers.brokers import Broker

from support.spark_helpers import Produced, create_topic, delete_topic, produce, wait_until

pytestmark = [pytest.mark.spark, pytest.mark.integration]

MAX_OFFSETS = 100


def stream(spark: Any, broker: Broker, **options: str) -> Any:
    reader = spark.readStream.format("kaflux").option("kafka.bootstrap.servers", broker.bootstrap_servers)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def to_memory(df: Any, **trigger: Any) -> tuple[Any, str]:
    name = f"kx_{uuid.uuid4().hex[:12]}"
    query = df.writeStream.format("memory").queryName(name).trigger(**trigger).start()
    return query, name


class ProducerThread(threading.Thread):
    """Produces ``per_round`` records every ``interval`` seconds until stopped; remembers them all."""

    def __init__(self, broker: Broker, topic: str, partitions: int, per_round: int, interval: float) -> None:
        super().__init__(name="kx-test-producer", daemon=True)
        self.broker, self.topic, self.partitions = broker, topic, partitions
        self.per_round, self.interval = per_round, interval
        self.produced: list[Produced] = []
        self.error: BaseException | None = None
        self._stop_event = threading.Event()

    def run(self) -> None:
        try:
            with Producer({"bootstrap.servers": self.broker.bootstrap_servers, "linger.ms": 5}) as producer:
                while not self._stop_event.is_set():
                    self.produced += produce(
                        self.broker.bootstrap_servers,
                        self.topic,
                        self.per_round,
                        partitions=self.partitions,
                        start=len(self.produced),
                        producer=producer,
                    )
                    self._stop_event.wait(self.interval)
        except BaseException as e:  # reported by the test
            self.error = e

    def finish(self) -> list[Produced]:
        self._stop_event.set()
        self.join(60)
        assert self.error is None, f"the producer thread failed: {self.error!r}"
        return self.produced


def test_parquet_stream_survives_restarts_without_loss_or_duplicates(
    spark_session: Any, kafka: Broker, topic_name: str, tmp_path: Path
) -> None:
    create_topic(kafka.bootstrap_servers, topic_name, 3)
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    backlog = produce(kafka.bootstrap_servers, topic_name, 3 * MAX_OFFSETS, partitions=3)
    producer = ProducerThread(kafka, topic_name, 3, per_round=5, interval=0.05)

    def start(max_offsets: int, **trigger: Any) -> Any:
        df = stream(
            spark_session,
            kafka,
            subscribe=topic_name,
            startingOffsets="earliest",
            maxOffsetsPerTrigger=str(max_offsets),
        )
        return (
            df.select("partition", "offset", "value")
            .writeStream.format("parquet")
            .option("path", out)
            .option("checkpointLocation", checkpoint)
            .trigger(**trigger)
            .start()
        )

    sizes: list[int] = []
    try:
        for run in range(4):  # the first run and three restarts, all while records keep coming
            query = start(MAX_OFFSETS, processingTime="200 milliseconds")
            before = len(query.recentProgress)
            assert wait_until(lambda q=query, b=before: len(q.recentProgress) >= b + 2, timeout=60)  # type: ignore[misc]
            if run == 0:
                producer.start()
            query.stop()
            sizes += [p["numInputRows"] for p in query.recentProgress]
    finally:
        produced = backlog + producer.finish()
    # Drain what is left (Trigger.AvailableNow, with a larger cap to finish sooner).
    drain = start(10 * MAX_OFFSETS, availableNow=True)
    assert drain.awaitTermination(120), "the availableNow run did not finish"
    drain_sizes = [p["numInputRows"] for p in drain.recentProgress]

    rows = spark_session.read.parquet(out).collect()
    keys = [(r.partition, r.offset) for r in rows]
    assert len(keys) == len(set(keys)), "a record was written twice"
    assert {(r.partition, r.offset, r.value) for r in rows} == {
        (p.partition, p.offset, p.value) for p in produced
    }
    assert max(sizes) == MAX_OFFSETS, f"every micro-batch is capped by maxOffsetsPerTrigger: {sizes}"
    assert max(drain_sizes) <= 10 * MAX_OFFSETS, drain_sizes
    assert len(produced) > 4 * MAX_OFFSETS


def test_subscribe_pattern_picks_up_a_topic_created_while_running(
    spark_session: Any, kafka: Broker, topic_name: str
) -> None:
    first, second = f"{topic_name}-a", f"{topic_name}-b"
    create_topic(kafka.bootstrap_servers, first, 2)
    produce(kafka.bootstrap_servers, first, 10, partitions=2)
    df = stream(
        spark_session, kafka, subscribePattern=re.escape(topic_name) + "-.*", startingOffsets="earliest"
    )
    query, table = to_memory(df.select("topic", "partition", "offset"), processingTime="200 milliseconds")
    query.processAllAvailable()
    assert spark_session.table(table).count() == 10
    create_topic(kafka.bootstrap_servers, second, 3)
    produce(kafka.bootstrap_servers, second, 9, partitions=3)
    assert wait_until(lambda: spark_session.table(table).where(f"topic = '{second}'").count() >= 9)
    rows = spark_session.table(table).collect()
    assert len(rows) == 19 and len({tuple(r) for r in rows}) == 19
    query.stop()


def test_fail_on_data_loss_true_fails_the_query_when_its_topic_is_deleted(
    spark_session: Any, kafka: Broker, topic_name: str
) -> None:
    from pyspark.errors import StreamingQueryException

    create_topic(kafka.bootstrap_servers, topic_name, 1)
    produce(kafka.bootstrap_servers, topic_name, 5, partitions=1)
    df = stream(spark_session, kafka, subscribe=topic_name, startingOffsets="earliest")
    query, table = to_memory(df, processingTime="200 milliseconds")
    query.processAllAvailable()
    assert spark_session.table(table).count() == 5
    delete_topic(kafka.bootstrap_servers, topic_name)
    with pytest.raises(StreamingQueryException, match=r"are gone[\s\S]*failOnDataLoss"):
        query.awaitTermination(60)


def test_fail_on_data_loss_false_continues_when_a_topic_is_deleted(
    spark_session: Any, kafka: Broker, topic_name: str
) -> None:
    doomed, kept = f"{topic_name}-doomed", f"{topic_name}-kept"
    for topic in (doomed, kept):
        create_topic(kafka.bootstrap_servers, topic, 1)
        produce(kafka.bootstrap_servers, topic, 5, partitions=1)
    # An offset lookup that still includes the deleted partition waits for the lookup timeout
    # before the source finds the partition gone; keep that wait well inside WAIT_S (its 30 s
    # default alone would take the whole of it, so the test raced the broker's metadata).
    df = stream(
        spark_session,
        kafka,
        subscribe=f"{doomed},{kept}",
        startingOffsets="earliest",
        failOnDataLoss="false",
        **{"kafka.default.api.timeout.ms": "3000"},
    )
    query, table = to_memory(df.select("topic", "offset"), processingTime="200 milliseconds")
    query.processAllAvailable()
    assert spark_session.table(table).count() == 10
    delete_topic(kafka.bootstrap_servers, doomed)
    produce(kafka.bootstrap_servers, kept, 5, partitions=1, start=5)
    assert wait_until(lambda: spark_session.table(table).where(f"topic = '{kept}'").count() >= 10)
    time.sleep(1.0)
    assert query.isActive and query.exception() is None
    assert sorted(r.offset for r in spark_session.table(table).where(f"topic = '{kept}'").collect()) == list(
        range(10)
    )
    query.stop()
