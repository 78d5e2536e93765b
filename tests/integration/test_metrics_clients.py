"""Consumer.metrics() and Producer.metrics() against known activity on Apache Kafka.

Windowed rates are checked with the windows of Java's Rate, from the registry's config (2
samples of 30 s): a rate is the sum over the elapsed window, which is the time since its
first value was recorded plus one whole window while less than one window elapsed. The test
cannot see the exact millisecond a client recorded its first value or measured, only that
each happened between two readings of the same monotonic clock the client uses; so it
brackets the elapsed time between those readings (plus 1 ms each side for the clients'
whole milliseconds) and checks the rate lies between the two rates that gives.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

import pytest

from kaflux import Consumer, Producer, TopicPartition
from kaflux.devbrokers.brokers import Broker
from kaflux.metrics.clients import (
    CONSUMER_METRICS,
    COORDINATOR_METRICS,
    FETCH_MANAGER_METRICS,
    KAFLUX_CONSUMER_METRICS,
    PRODUCER_METRICS,
    partition_group,
    producer_topic_group,
)
from kaflux.records import BatchBuilder

pytestmark = pytest.mark.integration

WAIT_S = 60.0  # a deadline, not a duration: a group join on a loaded CI machine can take long
WINDOW_MS = 30_000  # metrics.sample.window.ms (default); metrics.num.samples 2


def ms() -> float:
    """The clock the clients time their metrics with (monotonic), in ms."""
    return time.monotonic() * 1000


def expected_rate_bounds(total: float, first_from: float, first_to: float, at_from: float, at_to: float):
    """The rate Java's Rate gives for ``total`` recorded from a first value in
    [first_from, first_to] (ms) measured in [at_from, at_to]: the lowest and highest."""
    shortest = max(0.0, at_from - first_to - 1)
    longest = at_to - first_from + 1
    assert longest < WINDOW_MS, "the test ran past one window: the bounds below would not hold"
    return total / ((WINDOW_MS + longest) / 1000), total / ((WINDOW_MS + shortest) / 1000)


def produce_one_batch_per_record(broker: Broker, topic: str, count: int, value: bytes) -> None:
    with Producer({"bootstrap.servers": broker.bootstrap_servers}) as producer:
        for _ in range(count):
            producer.send(topic, value, partition=0).result(WAIT_S)  # one record, one batch


def produce(broker: Broker, topic: str, count: int) -> None:
    with Producer({"bootstrap.servers": broker.bootstrap_servers}) as producer:
        futures = [producer.send(topic, b"v%04d" % i, partition=0) for i in range(count)]
        producer.flush(WAIT_S)
    assert [f.result(0).offset for f in futures] == list(range(count))


def poll_until(
    consumer: Consumer, done: Callable[[int], bool], on_records: Callable[[], None] | None = None
) -> int:
    """Poll until ``done(records so far)``; ``on_records`` after each poll that returned some."""
    deadline = time.monotonic() + WAIT_S
    seen = 0
    while not done(seen):
        assert time.monotonic() < deadline, f"only {seen} records within {WAIT_S} s"
        records = consumer.poll(0.5)
        if records:
            seen += len(records)
            if on_records is not None:
                on_records()
    return seen


def test_records_and_bytes_consumed_rate_agree_with_what_was_consumed(kafka: Broker, topic_name: str) -> None:
    count, value = 50, b"x" * 100
    produce_one_batch_per_record(kafka, topic_name, count, value)
    # the size of each record's batch as it is on the wire: a single-record batch of the same
    # record (header fields have a fixed size; timestamp and offset deltas are 0)
    one = BatchBuilder(base_offset=0)
    one.append(1_000, None, value)
    batch_size = len(one.build())
    tp = TopicPartition(topic_name, 0)
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([tp])
        first: list[float] = []
        before_first = ms()
        poll_until(consumer, lambda n: n >= count, lambda: first or first.append(ms()))  # type: ignore[arg-type, func-returns-value]
        at_from = ms()
        metrics = consumer.metrics()
        at_to = ms()
    finally:
        consumer.close(5)
    fetch = metrics[FETCH_MANAGER_METRICS]
    assert fetch["records-consumed-total"] == count
    assert fetch["bytes-consumed-total"] == count * batch_size
    low, high = expected_rate_bounds(count, before_first, first[0], at_from, at_to)
    assert low <= fetch["records-consumed-rate"] <= high
    low, high = expected_rate_bounds(count * batch_size, before_first, first[0], at_from, at_to)
    assert low <= fetch["bytes-consumed-rate"] <= high
    # both were recorded at the same moments, so over the same window
    assert fetch["bytes-consumed-rate"] / fetch["records-consumed-rate"] == pytest.approx(batch_size)
    assert fetch["fetch-total"] >= 1 and fetch["fetch-latency-max"] >= fetch["fetch-latency-avg"] >= 0
    assert fetch["records-per-request-avg"] > 0
    assert metrics[KAFLUX_CONSUMER_METRICS]["records-returned"] == count
    assert metrics[partition_group(tp)]["records-lag"] == 0


def test_records_lag_is_the_end_offset_minus_the_position(kafka: Broker, topic_name: str) -> None:
    produced, per_poll = 100, 30
    produce(kafka, topic_name, produced)
    tp = TopicPartition(topic_name, 0)
    consumer = Consumer(
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "auto.offset.reset": "earliest",
            "max.poll.records": per_poll,
        }
    )
    try:
        consumer.assign([tp])
        end = consumer.end_offsets([tp], timeout=WAIT_S)[tp]
        assert end == produced
        lags: list[int] = []  # end offset - position after each poll that returned records
        consumed = poll_until(
            consumer, lambda n: n >= 2 * per_poll, lambda: lags.append(end - consumer.position(tp))
        )
        assert consumed < produced
        metrics = consumer.metrics()
        position = consumer.position(tp)
    finally:
        consumer.close(5)
    assert metrics[FETCH_MANAGER_METRICS]["records-lag-max"] == max(lags)
    partition = metrics[partition_group(tp)]
    assert partition["records-lag"] == end - position == produced - consumed
    assert partition["records-lag-max"] == max(lags)
    assert partition["records-lag-avg"] == pytest.approx(sum(lags) / len(lags))


def test_producer_record_send_rate_after_sending_n_records(kafka: Broker, topic_name: str) -> None:
    count = 200
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 20})
    try:
        before_first = ms()
        futures = [producer.send(topic_name, b"r%04d" % i, partition=0) for i in range(count)]
        producer.flush(WAIT_S)
        flushed = ms()
        assert all(f.result(0).offset >= 0 for f in futures)
        at_from = ms()
        metrics = producer.metrics()
        at_to = ms()
    finally:
        producer.close(5)
    values = metrics[PRODUCER_METRICS]
    assert values["record-send-total"] == count
    # the first Produce request went out between the first send() and the end of flush()
    low, high = expected_rate_bounds(count, before_first, flushed, at_from, at_to)
    assert low <= values["record-send-rate"] <= high
    assert values["record-error-total"] == 0 and values["record-retry-total"] == 0
    assert values["records-per-request-avg"] > 0 and values["batch-size-avg"] > 0
    assert values["request-latency-max"] >= values["request-latency-avg"] >= 0
    assert values["record-queue-time-max"] >= values["record-queue-time-avg"] >= 0
    assert values["buffer-available-bytes"] == values["buffer-total-bytes"], "everything acknowledged"
    topic = metrics[producer_topic_group(topic_name)]
    assert topic["record-send-total"] == count and topic["byte-total"] >= values["batch-size-max"]
    assert values["outgoing-byte-total"] > topic["byte-total"], "requests carry more than the batches"
    assert metrics["kaflux-producer-metrics"]["producer-epoch"] == 0


def test_group_commit_and_node_metrics(kafka: Broker, topic_name: str) -> None:
    produce(kafka, topic_name, 10)
    consumer = Consumer(
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "group.id": f"g-{topic_name}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic_name])
        poll_until(consumer, lambda n: n >= 10)
        consumer.commit_sync(timeout=WAIT_S)
        metrics = consumer.metrics()
    finally:
        consumer.close(5)
    group = metrics[COORDINATOR_METRICS]
    assert group["rebalance-total"] >= 1 and group["rebalance-latency-avg"] >= 0
    assert group["assigned-partitions"] == metrics[KAFLUX_CONSUMER_METRICS]["assigned-partitions"] >= 1
    assert group["commit-total"] == 1 and group["commit-latency-avg"] >= 0
    assert group["last-rebalance-seconds-ago"] >= 0
    nodes = [name for name in metrics if name.startswith("consumer-node-metrics,")]
    assert nodes, "a group per broker"
    assert any(metrics[name]["incoming-byte-total"] > 0 for name in nodes)
    client = metrics[CONSUMER_METRICS]
    assert client["incoming-byte-total"] == sum(metrics[name]["incoming-byte-total"] for name in nodes)
    assert client["request-total"] == sum(metrics[name]["request-total"] for name in nodes)
    assert client["time-between-poll-max"] >= client["time-between-poll-avg"] >= 0
    assert 0 <= client["poll-idle-ratio-avg"] <= 1 and client["last-poll-seconds-ago"] >= 0


def test_metrics_may_be_scraped_from_another_thread_while_the_application_polls(
    kafka: Broker, topic_name: str
) -> None:
    prometheus = pytest.importorskip("prometheus_client")
    from kaflux.metrics.prometheus import KafluxCollector

    produce(kafka, topic_name, 20)
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "auto.offset.reset": "earliest"})
    registry = prometheus.CollectorRegistry()
    registry.register(KafluxCollector(consumer))
    scrapes: list[str] = []
    errors: list[BaseException] = []
    polling = threading.Event()
    done = threading.Event()

    def scrape() -> None:
        polling.wait(WAIT_S)
        try:
            while not done.is_set():
                scrapes.append(prometheus.generate_latest(registry).decode())
        except BaseException as exc:
            errors.append(exc)

    scraper = threading.Thread(target=scrape)
    scraper.start()
    try:
        consumer.assign([TopicPartition(topic_name, 0)])
        polling.set()
        poll_until(consumer, lambda n: n >= 20 and len(scrapes) >= 3)
    finally:
        done.set()
        scraper.join(WAIT_S)
        consumer.close(5)
    assert errors == []
    last = consumer.metrics()
    assert last[FETCH_MANAGER_METRICS]["records-consumed-total"] == 20
    text = prometheus.generate_latest(registry).decode()  # closed: the last snapshot
    label = f'client_id="{consumer.client_id}"'
    assert f"kafka_consumer_fetch_manager_metrics_records_consumed_total{{{label}}} 20.0" in text
    assert "kafka_consumer_node_metrics_incoming_byte_total{" in text
    assert not math.isnan(last[CONSUMER_METRICS]["time-between-poll-avg"])
