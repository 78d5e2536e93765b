"""The driver side of the streaming source, without Spark: initial offsets, admission control
(``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger`` + ``maxTriggerDelay``), Trigger.AvailableNow and
the data-loss checks of micro-batch planning. Runs on Apache Kafka 4.4, the reference broker."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from kaflux.devbrokers.brokers import Broker
from pyspark_kaflux import client_cache
from pyspark_kaflux.input_partition import KafkaInputPartition
from pyspark_kaflux.offsets import DataLossError
from pyspark_kaflux.options import parse_source_options
from pyspark_kaflux.stream_reader import KafluxStreamReader

from support.spark_helpers import create_topic, delete_topic, produce

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _close_cached_clients() -> Iterator[None]:
    yield
    client_cache.close_all()


def reader(kafka: Broker, **options: str) -> KafluxStreamReader:
    base = {"kafka.bootstrap.servers": kafka.bootstrap_servers}
    return KafluxStreamReader(parse_source_options({**base, **options}, streaming=True))


def total(start: dict[str, dict[str, int]], end: dict[str, dict[str, int]]) -> int:
    return sum(end[t][p] - start.get(t, {}).get(p, 0) for t in end for p in end[t])


def test_initial_offsets(kafka: Broker, topic_name: str) -> None:
    create_topic(kafka.bootstrap_servers, topic_name, 2)
    produce(kafka.bootstrap_servers, topic_name, 10, partitions=2)
    assert reader(kafka, subscribe=topic_name).initialOffset() == {topic_name: {"0": 5, "1": 5}}
    earliest = reader(kafka, subscribe=topic_name, startingOffsets="earliest").initialOffset()
    assert json.dumps(earliest) == json.dumps({topic_name: {"0": 0, "1": 0}})
    specific = json.dumps({topic_name: {"1": -1, "0": 3}})
    assert reader(kafka, subscribe=topic_name, startingOffsets=specific).initialOffset() == {
        topic_name: {"0": 3, "1": 5}
    }
    with pytest.raises(ValueError, match="you must specify all TopicPartitions"):
        reader(
            kafka, subscribe=topic_name, startingOffsets=json.dumps({topic_name: {"0": 1}})
        ).initialOffset()


def test_max_offsets_per_trigger_and_available_now(kafka: Broker, topic_name: str) -> None:
    create_topic(kafka.bootstrap_servers, topic_name, 3)
    produce(kafka.bootstrap_servers, topic_name, 90, partitions=3)
    source = reader(kafka, subscribe=topic_name, startingOffsets="earliest", maxOffsetsPerTrigger="20")
    assert source.getDefaultReadLimit() == ReadMaxRows(20)
    source.prepareForTriggerAvailableNow()
    produce(kafka.bootstrap_servers, topic_name, 30, partitions=3, start=90)  # after the target: not read
    start = source.initialOffset()
    sizes = []
    while True:
        end = source.latestOffset(start, ReadMaxRows(20))
        if end == start:
            break
        sizes.append(total(start, end))
        assert len(source.partitions(start, end)) >= 1
        start = end
    assert sizes == [20, 20, 20, 20, 10]
    assert start == {topic_name: {"0": 30, "1": 30, "2": 30}}
    assert source.reportLatestOffset() == {topic_name: {"0": 30, "1": 30, "2": 30}}
    assert reader(kafka, subscribe=topic_name).latestOffset(start, ReadAllAvailable()) == {
        topic_name: {"0": 40, "1": 40, "2": 40}
    }


def test_min_offsets_per_trigger_waits_until_max_trigger_delay(kafka: Broker, topic_name: str) -> None:
    create_topic(kafka.bootstrap_servers, topic_name, 1)
    # the delay also bounds how long produce() may take between two triggers that must skip:
    # seconds, for a loaded CI machine
    source = reader(kafka, subscribe=topic_name, minOffsetsPerTrigger="10", maxTriggerDelay="4000ms")
    assert source.getDefaultReadLimit() == ReadMinRows(10)
    start = source.initialOffset()
    produce(kafka.bootstrap_servers, topic_name, 4, partitions=1)
    assert source.latestOffset(start, ReadMinRows(10)) == start, "4 < 10 offsets: skip this trigger"
    time.sleep(4.1)
    end = source.latestOffset(start, ReadMinRows(10))
    assert end == {topic_name: {"0": 4}}, "maxTriggerDelay passed: run with what there is"
    produce(kafka.bootstrap_servers, topic_name, 3, partitions=1, start=4)
    assert source.latestOffset(end, ReadMinRows(10)) == end
    produce(kafka.bootstrap_servers, topic_name, 7, partitions=1, start=7)
    assert source.latestOffset(end, ReadMinRows(10)) == {topic_name: {"0": 14}}, "10 offsets are enough"


def test_new_partitions_start_at_earliest_and_deleted_ones_are_data_loss(
    kafka: Broker, topic_name: str
) -> None:
    first, second = f"{topic_name}-a", f"{topic_name}-b"
    create_topic(kafka.bootstrap_servers, first, 1)
    produce(kafka.bootstrap_servers, first, 3, partitions=1)
    source = reader(kafka, subscribePattern=f"{topic_name}-.*", startingOffsets="latest")
    start = source.initialOffset()
    assert start == {first: {"0": 3}}
    create_topic(kafka.bootstrap_servers, second, 2)
    produce(kafka.bootstrap_servers, second, 6, partitions=2)
    end = source.latestOffset(start, ReadAllAvailable())
    assert end == {first: {"0": 3}, second: {"0": 3, "1": 3}}
    ranges = [p.offset_range for p in source.partitions(start, end) if isinstance(p, KafkaInputPartition)]
    assert [(r.topic, r.partition, r.start, r.end) for r in ranges] == [(second, 0, 0, 3), (second, 1, 0, 3)]

    delete_topic(kafka.bootstrap_servers, first)
    after = source.latestOffset(end, ReadAllAvailable())
    assert first not in after
    with pytest.raises(DataLossError, match=rf"\[{first}-0\] are gone.*failOnDataLoss"):
        source.partitions(end, after)
    lenient = reader(kafka, subscribePattern=f"{topic_name}-.*", failOnDataLoss="false")
    assert lenient.partitions(end, after) == []
