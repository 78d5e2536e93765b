"""kaflux.metrics: Java's sampled-stat semantics with injected time, the registry, the sensors
of each client, and the wiring that records into them (collector tally, fetch responses,
membership, event processor, the bound on Consumer.metrics())."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kaflux import Consumer
from kaflux.config import ConsumerConfig, ProducerConfig
from kaflux.consumer.completed_fetch import CompletedFetch
from kaflux.consumer.event_processor import ApplicationEventProcessor
from kaflux.consumer.events import MetricsSnapshotEvent
from kaflux.consumer.fetch_buffer import FetchBuffer
from kaflux.consumer.fetch_collector import FetchCollector
from kaflux.consumer.fetch_request_manager import count_records
from kaflux.consumer.member_state import MemberState
from kaflux.consumer.subscription_state import FetchPosition, ResetStrategy, SubscriptionState
from kaflux.errors import ConfigError
from kaflux.metrics import (
    Avg,
    CumulativeCount,
    CumulativeSum,
    Max,
    MetricConfig,
    MetricsRegistry,
    Min,
    Rate,
    Value,
    WindowedCount,
    WindowedSum,
    merge_snapshots,
    split_group,
    tagged_group,
)
from kaflux.metrics.clients import (
    CONSUMER_METRICS,
    COORDINATOR_METRICS,
    FETCH_MANAGER_METRICS,
    KAFLUX_CONSUMER_METRICS,
    PRODUCER_METRICS,
    CoordinatorMetrics,
    FetchMetrics,
    NetworkMetrics,
    PollMetrics,
    ProducerMetrics,
    node_group,
    partition_group,
    producer_topic_group,
)
from kaflux.metrics.stats import HOUR_MS
from kaflux.records import CONTROL_COMMIT, BatchBuilder, build_control_batch
from kaflux.structs import TopicPartition

from support.fake_consumer_group_coordinator import ConsumerGroupDriver
from support.fake_group_coordinator import GroupDriver

WINDOW = 30_000  # Java's default metrics.sample.window.ms
CONFIG = MetricConfig()  # 2 samples of 30 s
TP = TopicPartition("t", 0)


def hundred_records_of_ten_bytes(*stats: Any) -> None:
    """100 records of 10 bytes, one every 300 ms from t=0 (the last at 29.7 s): one window."""
    for i in range(100):
        for stat in stats:
            stat.record(10, i * 300)


# -- Java's sampled stats ----------------------------------------------------------------------------


def test_rate_of_100_records_of_10_bytes_in_one_window_as_java_reports_it() -> None:
    byte_rate = Rate(CONFIG, WindowedSum(CONFIG))
    record_rate = Rate(CONFIG, WindowedCount(CONFIG))
    hundred_records_of_ten_bytes(byte_rate, record_rate)
    # elapsed 29.7 s: less than (samples - 1) = 1 whole window, so one window is added
    assert byte_rate.window_ms(29_700) == 29_700 + WINDOW
    assert byte_rate.measure(29_700) == pytest.approx(1000 / 59.7)
    assert record_rate.measure(29_700) == pytest.approx(100 / 59.7)
    # exactly one window elapsed: 1000 bytes / 30 s, 100 records / 30 s
    assert byte_rate.measure(30_000) == pytest.approx(1000 / 30)
    assert record_rate.measure(30_000) == pytest.approx(100 / 30)
    # nothing more recorded: the window stretches with time...
    assert byte_rate.measure(45_000) == pytest.approx(1000 / 45)
    assert byte_rate.measure(89_699) == pytest.approx(1000 / 89.699)
    # ...until the sample's last value is samples * window old: then it is gone
    assert byte_rate.measure(89_700) == 0.0
    assert record_rate.measure(89_700) == 0.0


def test_a_rate_measured_early_is_padded_to_samples_minus_one_windows() -> None:
    rate = Rate(CONFIG)
    rate.record(100, 0)
    assert rate.measure(0) == pytest.approx(100 / 30)  # 0 ms elapsed + one window
    assert rate.measure(10_000) == pytest.approx(100 / 40)
    with_five = Rate(MetricConfig(samples=5, window_ms=1000))
    with_five.record(100, 0)
    assert with_five.measure(500) == pytest.approx(100 / 4.5)  # 4 windows added


def test_a_rate_measured_before_its_first_value_starts_its_window_then_as_java() -> None:
    rate = Rate(CONFIG)
    assert rate.measure(5_000) == 0.0  # creates an empty sample starting at 5 s
    rate.record(30, 10_000)  # goes into that sample
    assert rate.window_ms(10_000) == 5_000 + WINDOW
    assert rate.measure(10_000) == pytest.approx(30 / 35)


def test_the_overlapping_sample_and_the_purge_of_obsolete_samples() -> None:
    config = MetricConfig(samples=2, window_ms=1000)
    total = WindowedSum(config)
    rate = Rate(config, WindowedSum(config))
    for t in (0, 1000, 2000, 3000):  # a new sample each time; samples + 1 = 3 slots, reused
        total.record(1, t)
        rate.record(1, t)
    # at 3 s: the slot of t=0 holds t=3000; the sample of t=1000 is obsolete (2 s old)
    assert total.measure(3000) == 2.0
    # the oldest live sample started at 2 s: 1 s elapsed, which is samples - 1 windows
    assert rate.window_ms(3000) == 1000
    assert rate.measure(3000) == pytest.approx(2.0)


def test_avg_max_min_over_the_live_samples_and_nan_without_values() -> None:
    avg, high, low = Avg(CONFIG), Max(CONFIG), Min(CONFIG)
    for stat in (avg, high, low):
        assert math.isnan(stat.measure(0))
    for t, value in ((0, 4.0), (10_000, 8.0), (40_000, 6.0)):  # the last one in a new sample
        for stat in (avg, high, low):
            stat.record(value, t)
    assert avg.measure(40_000) == pytest.approx(6.0)
    assert high.measure(40_000) == 8.0
    assert low.measure(40_000) == 4.0
    # at 70 s the first sample (last value at 10 s) is 60 s = 2 windows old: obsolete
    assert avg.measure(70_000) == 6.0
    assert high.measure(70_000) == 6.0
    assert low.measure(70_000) == 6.0
    # at 100 s nothing is left
    assert math.isnan(avg.measure(100_000))
    assert math.isnan(high.measure(100_000))


def test_cumulative_stats_value_and_an_hourly_rate() -> None:
    total, count, value = CumulativeSum(), CumulativeCount(), Value()
    assert value.measure(0) == 0.0
    for t, v in ((0, 5.0), (100_000, 7.0)):
        for stat in (total, count, value):
            stat.record(v, t)
    assert (total.measure(10**9), count.measure(10**9), value.measure(10**9)) == (12.0, 2.0, 7.0)
    per_hour = Rate(CONFIG, WindowedCount(CONFIG), unit_ms=HOUR_MS)
    for _ in range(3):
        per_hour.record(1, 0)
    assert per_hour.measure(0) == pytest.approx(3 / (WINDOW / HOUR_MS))  # 360 per hour


@pytest.mark.parametrize(("samples", "window_ms"), [(0, 1000), (2, 0)])
def test_metric_config_needs_a_sample_and_a_window(samples: int, window_ms: int) -> None:
    with pytest.raises(ValueError):
        MetricConfig(samples=samples, window_ms=window_ms)


_OPS = st.lists(
    st.tuples(st.sampled_from(["record", "measure"]), st.integers(0, 2_500), st.integers(-50, 50)),
    max_size=80,
)


@settings(max_examples=300, deadline=None)
@given(ops=_OPS, samples=st.integers(1, 3), window_ms=st.integers(1, 1_000))
def test_a_sensor_batching_values_ends_exactly_as_stats_recorded_one_by_one(
    ops: list[tuple[str, int, int]], samples: int, window_ms: int
) -> None:
    """The sensor's cheap path (values of one sample summed before they reach the stats) is
    exact: every metric equals that of stats fed each value alone, at every measurement."""
    config = MetricConfig(samples=samples, window_ms=window_ms)
    registry = MetricsRegistry(config)
    sensor = registry.sensor("s")
    kinds: dict[str, Callable[[], Any]] = {
        "avg": lambda: Avg(config),
        "max": lambda: Max(config),
        "min": lambda: Min(config),
        "sum": lambda: WindowedSum(config),
        "count": lambda: WindowedCount(config),
        "rate": lambda: Rate(config, WindowedSum(config)),
        "count-rate": lambda: Rate(config, WindowedCount(config)),
        "total": CumulativeSum,
        "n": CumulativeCount,
        "value": Value,
    }
    plain: dict[str, Any] = {}
    for name, make in kinds.items():
        sensor.add("g", name, make())
        plain[name] = make()
    now = 0
    for op, step, value in ops:
        now += step
        if op == "record":
            sensor.record(value, now)
            for stat in plain.values():
                stat.record(value, now)
        else:
            expected = {name: stat.measure(now) for name, stat in plain.items()}
            got = registry.snapshot(now)["g"]
            for name in kinds:
                assert got[name] == pytest.approx(expected[name], nan_ok=True), name


# -- the registry -----------------------------------------------------------------------------------------


def test_a_snapshot_is_group_to_name_to_float_with_tagged_groups() -> None:
    registry = MetricsRegistry()
    group = tagged_group("consumer-node-metrics", [("node-id", "node-1")])
    assert group == "consumer-node-metrics,node-id=node-1"
    assert split_group(group) == ("consumer-node-metrics", {"node-id": "node-1"})
    registry.sensor("latency").add_avg(group, "request-latency-avg").add_max(group, "request-latency-max")
    registry.sensor("latency").record(3, 0)
    registry.get_sensor("latency").record(5, 1)  # type: ignore[union-attr]
    registry.add_gauge("g", "answer", lambda now_ms: 42)
    registry.add_gauge("g", "broken", lambda now_ms: 1 / 0)
    snapshot = registry.snapshot(2)
    assert snapshot == {group: {"request-latency-avg": 4.0, "request-latency-max": 5.0}, "g": snapshot["g"]}
    assert snapshot["g"]["answer"] == 42.0 and isinstance(snapshot[group]["request-latency-max"], float)
    assert math.isnan(snapshot["g"]["broken"]), "a failing gauge must not break the snapshot"
    assert registry.measure(group, "request-latency-max", 2) == 5.0
    with pytest.raises(ValueError, match="registered already"):
        registry.sensor("other").add_avg(group, "request-latency-avg")
    registry.remove_sensor("latency")
    assert group not in registry.snapshot(3)
    assert merge_snapshots({"a": {"x": 1.0}}, {"a": {"y": 2.0}, "b": {}}) == {
        "a": {"x": 1.0, "y": 2.0},
        "b": {},
    }


def test_a_locked_registry_may_be_measured_while_its_owner_records() -> None:
    registry = MetricsRegistry(lock=threading.Lock())
    sensor = registry.sensor("s").add_meter("g", "rate", "total")
    done = threading.Event()
    errors: list[BaseException] = []

    def scrape() -> None:
        try:
            while not done.is_set():
                registry.snapshot(int(time.monotonic() * 1000))
                time.sleep(0.0005)  # a scraper, not a busy loop holding the lock
        except BaseException as exc:  # pragma: no cover - the failure being tested for
            errors.append(exc)

    reader = threading.Thread(target=scrape)
    reader.start()
    for i in range(20_000):
        sensor.record(1, i // 10)
        if i % 1000 == 0:  # new sensors while another thread measures
            registry.sensor(f"s{i}").add_avg("g", f"avg{i}").record(i, i // 10)
    done.set()
    reader.join()
    assert errors == []
    assert registry.snapshot(2000)["g"]["total"] == 20_000.0


def test_metrics_settings_have_java_defaults_and_are_validated() -> None:
    boot = {"bootstrap.servers": "127.0.0.1:9092"}
    for config in (ConsumerConfig.from_dict(boot), ProducerConfig.from_dict(boot)):
        assert config.to_dict()["metrics.sample.window.ms"] == 30_000
        assert config.to_dict()["metrics.num.samples"] == 2
    parsed = ConsumerConfig.from_dict({**boot, "metrics.sample.window.ms": "1000", "metrics.num.samples": 3})
    assert (parsed.metrics_sample_window_ms, parsed.metrics_num_samples) == (1000, 3)
    for key in ("metrics.sample.window.ms", "metrics.num.samples"):
        with pytest.raises(ConfigError, match=key):
            ConsumerConfig.from_dict({**boot, key: 0})


# -- the sensors of the clients ------------------------------------------------------------------------------


def test_poll_metrics_time_between_polls_idle_ratio_and_last_poll() -> None:
    registry = MetricsRegistry()
    metrics = PollMetrics(registry)
    assert registry.snapshot(0)[CONSUMER_METRICS]["last-poll-seconds-ago"] == -1.0
    # poll 1: 0..10 ms; the application works 30 ms; poll 2: 40..50 ms; then 150..160 ms
    for start, end in ((0.0, 10.0), (40.0, 50.0), (150.0, 160.0)):
        metrics.poll_started(start)
        metrics.poll_ended(end)
    values = registry.snapshot(2_160)[CONSUMER_METRICS]
    assert values["time-between-poll-avg"] == pytest.approx((0 + 40 + 110) / 3)  # Java: 0 first
    assert values["time-between-poll-max"] == 110.0
    # in poll / (in poll + since the last poll's start): 10/10, 10/50, 10/120
    assert values["poll-idle-ratio-avg"] == pytest.approx((1 + 10 / 50 + 10 / 120) / 3)
    assert values["last-poll-seconds-ago"] == 2.0  # whole seconds, as Java


def test_poll_metrics_records_consumed_and_lag_per_partition() -> None:
    registry = MetricsRegistry()
    metrics = PollMetrics(registry)
    dotted = TopicPartition("orders.v1", 3)
    metrics.poll_started(0.0)
    metrics.poll_ended(1.0, 500, 20_000, {TP: 70, dotted: 5})
    metrics.poll_started(2.0)
    metrics.poll_ended(3.0, 100, 0, {TP: 40})
    snapshot = registry.snapshot(3)
    fetch = snapshot[FETCH_MANAGER_METRICS]
    assert fetch["records-consumed-total"] == 600.0
    # first value at 1 ms, measured at 3 ms: 2 ms elapsed, plus one window
    assert fetch["records-consumed-rate"] == pytest.approx(600 / 30.002)
    assert fetch["bytes-consumed-total"] == 20_000.0
    assert fetch["records-lag-max"] == 70.0
    assert partition_group(dotted) == "consumer-fetch-manager-metrics,topic=orders_v1,partition=3"
    assert snapshot[partition_group(TP)] == {
        "records-lag": 40.0,
        "records-lag-max": 70.0,
        "records-lag-avg": 55.0,
    }
    assert snapshot[partition_group(dotted)]["records-lag"] == 5.0
    metrics.retain_partitions([TP])
    assert partition_group(dotted) not in registry.snapshot(4)


def test_coordinator_metrics_time_rebalances_by_the_last_tick() -> None:
    registry = MetricsRegistry()
    metrics = CoordinatorMetrics(registry, assigned_partitions=lambda: 6)
    values = registry.snapshot(0)[COORDINATOR_METRICS]
    assert values["last-heartbeat-seconds-ago"] == -1.0 and values["last-rebalance-seconds-ago"] == -1.0
    assert math.isnan(values["rebalance-latency-avg"]) and values["assigned-partitions"] == 6.0
    metrics.tick(1_000)
    metrics.rebalance_started()
    metrics.tick(900)  # time never goes back
    metrics.tick(1_250)
    metrics.rebalance_ended()
    metrics.tick(2_000)
    metrics.rebalance_started()
    metrics.tick(2_100)
    metrics.rebalance_failed()
    metrics.rebalance_ended()  # no rebalance under way: nothing
    metrics.heartbeat_sent(2_200)
    metrics.heartbeat_answered(7, 2_207)
    metrics.commit_answered(12, 2_300)
    values = registry.snapshot(5_300)[COORDINATOR_METRICS]
    assert values["rebalance-latency-avg"] == 250.0 and values["rebalance-total"] == 1.0
    assert values["rebalance-latency-total"] == 250.0 and values["failed-rebalance-total"] == 1.0
    # the first snapshot (at 0) started the rate's window, as measuring does in Java: 5.3 s
    # elapsed, plus one window
    assert values["rebalance-rate-per-hour"] == pytest.approx(1 / ((5_300 + WINDOW) / HOUR_MS))
    assert values["last-rebalance-seconds-ago"] == 4.0
    assert values["last-heartbeat-seconds-ago"] == 3.0
    assert values["heartbeat-response-time-max"] == 7.0 and values["heartbeat-total"] == 1.0
    assert values["commit-latency-avg"] == 12.0 and values["commit-total"] == 1.0


def test_network_and_fetch_and_producer_sensors_use_java_groups_and_names() -> None:
    registry = MetricsRegistry()
    network = NetworkMetrics(registry, "producer", connection_count=lambda: 2)
    network.request_sent(1, 0)
    network.bytes_sent(1, 300, 0)
    network.bytes_received(1, 900, 5)
    network.response_received(1, 5, 5)
    fetch = FetchMetrics(registry)
    fetch.fetch_answered(latency_ms=8, size=4_000, records=40, throttle_ms=0, now_ms=10)
    producer = ProducerMetrics(
        registry, requests_in_flight=lambda: 1, buffer_total_bytes=1000, buffer_available_bytes=lambda: 600
    )
    producer.batch_sent("t", records=10, size=500, queue_time_ms=4, now_ms=10)
    producer.batch_sent("t", records=30, size=1_500, queue_time_ms=6, now_ms=10)
    producer.request_sent(records=40, now_ms=10)
    producer.request_answered(latency_ms=3, throttle_ms=0, now_ms=13)
    producer.records_failed("t", 10, 20)
    producer.records_retried("t", 30, 20)
    snapshot = registry.snapshot(30_000)
    node = snapshot[node_group("producer", 1)]
    assert node_group("producer", 1) == "producer-node-metrics,node-id=node-1"
    assert node["outgoing-byte-total"] == 300.0 and node["incoming-byte-total"] == 900.0
    assert node["request-latency-avg"] == 5.0 and node["request-total"] == 1.0
    assert node["outgoing-byte-rate"] == pytest.approx(300 / 30)  # one whole window elapsed
    client = snapshot[PRODUCER_METRICS]
    assert client["incoming-byte-total"] == 900.0 and client["connection-count"] == 2.0
    assert client["record-send-total"] == 40.0 and client["records-per-request-avg"] == 40.0
    assert client["batch-size-avg"] == 1000.0 and client["batch-size-max"] == 1500.0
    assert client["record-queue-time-avg"] == 5.0 and client["request-latency-avg"] == 3.0
    assert client["record-error-total"] == 10.0 and client["record-retry-total"] == 30.0
    assert (client["requests-in-flight"], client["buffer-available-bytes"], client["buffer-total-bytes"]) == (
        1.0,
        600.0,
        1000.0,
    )
    topic = snapshot[producer_topic_group("t")]
    assert topic["byte-total"] == 2000.0 and topic["record-send-total"] == 40.0
    assert snapshot[FETCH_MANAGER_METRICS]["records-per-request-avg"] == 40.0
    assert snapshot[FETCH_MANAGER_METRICS]["fetch-latency-max"] == 8.0


# -- recording points ------------------------------------------------------------------------------------


def batch(base: int, count: int, value: bytes = b"v" * 10) -> bytes:
    builder = BatchBuilder(base_offset=base)
    for i in range(count):
        builder.append(1_000 + i, None, value)
    return builder.build()


def test_count_records_reads_batch_headers_only() -> None:
    commit = build_control_batch(
        CONTROL_COMMIT, producer_id=1, producer_epoch=0, timestamp_ms=5, base_offset=10
    )
    data = batch(0, 10) + commit + batch(11, 5)
    assert count_records(memoryview(data), 0) == 15  # the control batch is not counted
    assert count_records(memoryview(data), 4) == 11  # from the fetch offset, in the first batch
    assert count_records(memoryview(data), 13) == 3
    assert count_records(memoryview(data[:-7]), 0) == 10  # a batch cut off by a size limit
    assert count_records(memoryview(b""), 0) == 0


def test_the_collector_tallies_records_bytes_once_per_fetch_and_lag() -> None:
    subscription = SubscriptionState(ResetStrategy.EARLIEST)
    subscription.assign_from_user([TP])
    subscription.seek(TP, FetchPosition(0))
    buffer = FetchBuffer()
    data = batch(0, 50) + batch(50, 50)
    buffer.add(
        [CompletedFetch(TP, 0, subscription.position_version(TP), memoryview(data), high_watermark=130)]
    )
    collector = FetchCollector(subscription, buffer, max_poll_records=30, tally=True)
    tally = collector.tally
    assert tally is not None
    assert len(collector.collect()[TP]) == 30
    assert (tally.records, tally.bytes, tally.lags) == (30, len(data), {TP: 100})
    tally.reset()
    assert len(collector.collect()[TP]) == 30
    assert len(collector.collect()[TP]) == 30
    assert (tally.records, tally.bytes, tally.lags) == (60, 0, {TP: 40})
    assert FetchCollector(subscription, buffer, max_poll_records=1).tally is None


def test_the_membership_times_a_classic_rebalance_from_joining_to_stable() -> None:
    driver = GroupDriver(topics={"t": 6})
    member = driver.add_member("a")
    registry = MetricsRegistry()
    member.manager.metrics = CoordinatorMetrics(registry)
    driver.settle()
    joined = max(t for t, _, target in member.transitions if target is MemberState.JOINING)
    stable = max(t for t, _, target in member.transitions if target is MemberState.STABLE)
    values = registry.snapshot(driver.now_ms)[COORDINATOR_METRICS]
    assert values["rebalance-total"] == 1.0
    assert values["rebalance-latency-avg"] == stable - joined
    driver.run(5_000)
    values = registry.snapshot(driver.now_ms)[COORDINATOR_METRICS]
    assert values["heartbeat-total"] >= 4.0  # every heartbeat.interval.ms (1 s)
    assert 0.0 <= values["last-heartbeat-seconds-ago"] <= 1.0


def test_the_membership_times_a_kip848_rebalance_from_reconciling_to_acknowledging() -> None:
    driver = ConsumerGroupDriver(topics={"t": 6})
    member = driver.add_member("a")
    registry = MetricsRegistry()
    member.manager.metrics = CoordinatorMetrics(registry)
    driver.settle()
    reconciling = max(t for t, _, target in member.transitions if target is MemberState.RECONCILING)
    acknowledging = max(t for t, _, target in member.transitions if target is MemberState.ACKNOWLEDGING)
    values = registry.snapshot(driver.now_ms)[COORDINATOR_METRICS]
    assert values["rebalance-total"] == 1.0
    assert values["rebalance-latency-avg"] == acknowledging - reconciling
    assert values["heartbeat-total"] >= 2.0  # the join and the acknowledgement


def test_the_event_processor_answers_a_snapshot_event_from_the_network_threads_registry() -> None:
    registry = MetricsRegistry()
    registry.sensor("s").add_total("g", "total").record(5, 0)
    processor = ApplicationEventProcessor(
        SubscriptionState(ResetStrategy.EARLIEST),
        mock.Mock(),
        None,
        mock.Mock(),
        None,
        allow_auto_create_topics=False,
        metrics=registry,
    )
    event = MetricsSnapshotEvent(10)
    processor.process(event, 1)
    assert event.future.result(0) == {"g": {"total": 5.0}}


def test_metrics_waits_for_the_network_thread_at_most_its_timeout() -> None:
    consumer = Consumer({"bootstrap.servers": "127.0.0.1:9", "reconnect.backoff.ms": 1000})
    try:
        full = consumer.metrics()
        assert {CONSUMER_METRICS, FETCH_MANAGER_METRICS, KAFLUX_CONSUMER_METRICS} <= set(full)
        assert "outgoing-byte-rate" in full[CONSUMER_METRICS], "the network thread's half"
        submit = consumer._thread.submit

        def lose_snapshots(event: Any, *, wake: bool = True) -> None:
            if not isinstance(event, MetricsSnapshotEvent):
                submit(event, wake=wake)

        with mock.patch.object(consumer._thread, "submit", lose_snapshots):
            start = time.monotonic()
            late = consumer.metrics(timeout=0.2)
            assert time.monotonic() - start < 1.0
        # this thread's metrics now, the network thread's from the last snapshot
        assert set(late) == set(full)
        assert late[CONSUMER_METRICS]["outgoing-byte-rate"] == full[CONSUMER_METRICS]["outgoing-byte-rate"]
    finally:
        consumer.close(1)
    start = time.monotonic()
    assert set(consumer.metrics(timeout=5)) == set(full), "closed: no wait, the last snapshot"
    assert time.monotonic() - start < 1.0


def test_prometheus_collector_exposes_every_value_with_tags_as_labels() -> None:
    pytest.importorskip("prometheus_client")
    from prometheus_client import CollectorRegistry, generate_latest

    from kaflux.metrics.prometheus import KafluxCollector

    class Client:
        client_id = "c-1"

        def metrics(self, timeout: float = 0.5) -> dict[str, dict[str, float]]:
            return {
                FETCH_MANAGER_METRICS: {"records-lag-max": 70.0, "fetch-latency-avg": math.nan},
                partition_group(TP): {"records-lag-max": 40.0},
                node_group("consumer", 1): {"incoming-byte-rate": 12.5},
            }

    registry = CollectorRegistry()
    registry.register(KafluxCollector(Client()))
    text = generate_latest(registry).decode()
    assert 'kafka_consumer_fetch_manager_metrics_records_lag_max{client_id="c-1"} 70.0' in text
    assert (
        'kafka_consumer_fetch_manager_metrics_records_lag_max{client_id="c-1",partition="0",topic="t"} 40.0'
        in text
    )
    assert 'kafka_consumer_node_metrics_incoming_byte_rate{client_id="c-1",node_id="node-1"} 12.5' in text
    assert 'kafka_consumer_fetch_manager_metrics_fetch_latency_avg{client_id="c-1"} NaN' in text


def test_a_producer_has_the_client_id_the_prometheus_collector_labels_with() -> None:
    from kaflux import Producer

    producer = Producer({"bootstrap.servers": "127.0.0.1:9", "client.id": "p-7"})
    try:
        assert producer.client_id == "p-7"
        assert "producer-metrics" in producer.metrics()
    finally:
        producer.close(0)


def test_without_a_registry_a_snapshot_event_gets_an_empty_snapshot() -> None:
    processor = ApplicationEventProcessor(
        SubscriptionState(ResetStrategy.EARLIEST),
        mock.Mock(),
        None,
        mock.Mock(),
        None,
        allow_auto_create_topics=False,
    )
    event = MetricsSnapshotEvent(10)
    processor.process(event, 1)
    assert event.future.result(0) == {}
