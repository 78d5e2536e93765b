"""Client telemetry (KIP-714): Java's metric names, the OTLP encoding (read back with
opentelemetry-proto, the reference decoder) and the push cycle of TelemetryRequestManager with
injected time and hand-made broker answers. [test]"""

from __future__ import annotations

import gzip
import random
import uuid
from typing import Any

import pytest

from kaflux.errors import UnsupportedVersionError
from kaflux.metrics.telemetry import encode_metrics, select_metrics, telemetry_name
from kaflux.network.requests import ClientResponse, UnsentRequest
from kaflux.network.telemetry_manager import TelemetryRequestManager
from kaflux.protocol.messages.get_telemetry_subscriptions import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
)
from kaflux.protocol.messages.push_telemetry import PushTelemetryRequest, PushTelemetryResponse

SNAPSHOT = {
    "producer-metrics": {"record-send-rate": 12.5, "record-send-total": 40.0, "batch-size-avg": float("nan")},
    "producer-node-metrics,node-id=node-1": {"request-total": 3.0},
    "consumer-metrics": {"poll-idle-ratio-avg": 0.5},
}


def test_names_follow_javas_client_telemetry_convention() -> None:
    assert telemetry_name("producer-metrics", "record-send-rate") == (
        "org.apache.kafka.producer.record.send.rate",
        {},
    )
    assert telemetry_name("producer-node-metrics,node-id=node-1", "request-total") == (
        "org.apache.kafka.producer.node.request.total",
        {"node_id": "node-1"},
    )


def test_a_subscription_selects_by_prefix_and_nan_is_left_out() -> None:
    chosen = select_metrics(SNAPSHOT, ["org.apache.kafka.producer."])
    assert [m[0] for m in chosen] == [
        "org.apache.kafka.producer.record.send.rate",
        "org.apache.kafka.producer.record.send.total",
        "org.apache.kafka.producer.node.request.total",
    ]
    assert len(select_metrics(SNAPSHOT, ["*"])) == 4
    assert select_metrics(SNAPSHOT, ["org.apache.kafka.admin."]) == []


def test_the_encoding_is_otlp_metrics_data() -> None:
    metrics_pb2 = pytest.importorskip("opentelemetry.proto.metrics.v1.metrics_pb2")
    payload = encode_metrics(
        select_metrics(SNAPSHOT, ["*"]),
        resource={"client_id": "p-1"},
        now_ns=2_000,
        start_ns=1_000,
        delta=False,
    )
    data = metrics_pb2.MetricsData.FromString(payload)
    (rm,) = data.resource_metrics
    assert {a.key: a.value.string_value for a in rm.resource.attributes} == {"client_id": "p-1"}
    (sm,) = rm.scope_metrics
    by_name = {m.name: m for m in sm.metrics}
    rate = by_name["org.apache.kafka.producer.record.send.rate"]
    assert rate.WhichOneof("data") == "gauge" and rate.gauge.data_points[0].as_double == 12.5
    total = by_name["org.apache.kafka.producer.node.request.total"]
    assert total.WhichOneof("data") == "sum" and total.sum.is_monotonic
    assert total.sum.aggregation_temporality == metrics_pb2.AGGREGATION_TEMPORALITY_CUMULATIVE
    (point,) = total.sum.data_points
    assert point.as_double == 3.0 and (point.start_time_unix_nano, point.time_unix_nano) == (1_000, 2_000)
    assert {a.key: a.value.string_value for a in point.attributes} == {"node_id": "node-1"}


def _answer(unsent: UnsentRequest[Any], body: Any, now_ms: int, error: Any = None) -> None:
    unsent.handler(ClientResponse(None, body, error, 0, now_ms))  # type: ignore[arg-type]


def _manager(snapshot: dict[str, dict[str, float]]) -> TelemetryRequestManager:
    return TelemetryRequestManager(
        lambda now_ms: snapshot, {"client_id": "c"}, rng=random.Random(7), wall_ns=lambda: 5_000
    )


def test_subscribe_then_push_compressed_every_interval_and_terminate_on_close() -> None:
    snapshot = {"producer-metrics": {"record-send-total": 10.0}}
    manager = _manager(snapshot)
    (ask,) = manager.poll(0).unsent
    assert isinstance(ask.request, GetTelemetrySubscriptionsRequest)
    assert manager.poll(1).unsent == []  # one request at a time
    instance = uuid.uuid4()
    sub = GetTelemetrySubscriptionsResponse(
        client_instance_id=instance,
        subscription_id=9,
        accepted_compression_types=[1],
        push_interval_ms=1000,
        delta_temporality=True,
        requested_metrics=["org.apache.kafka.producer."],
    )
    _answer(ask, sub, 10)
    first_push_at = 10 + manager.poll(10).time_until_next_poll_ms
    assert 510 <= first_push_at <= 1510  # 0.5-1.5 push intervals: clients spread out
    (push,) = manager.poll(first_push_at).unsent
    request = push.request
    assert isinstance(request, PushTelemetryRequest)
    assert (request.client_instance_id, request.subscription_id, request.compression_type) == (instance, 9, 1)
    assert b"org.apache.kafka.producer.record.send.total" in gzip.decompress(request.metrics)
    _answer(push, PushTelemetryResponse(), first_push_at)
    assert manager.pushes == 1
    assert manager.poll(first_push_at + 999).unsent == []
    snapshot["producer-metrics"]["record-send-total"] = 15.0
    (second,) = manager.poll(first_push_at + 1000).unsent
    metrics_pb2 = pytest.importorskip("opentelemetry.proto.metrics.v1.metrics_pb2")
    assert isinstance(second.request, PushTelemetryRequest)
    data = metrics_pb2.MetricsData.FromString(gzip.decompress(second.request.metrics))
    (metric,) = data.resource_metrics[0].scope_metrics[0].metrics
    assert metric.sum.data_points[0].as_double == 5.0  # a delta, as the subscription asked
    _answer(second, PushTelemetryResponse(), first_push_at + 1000)
    (last,) = manager.poll_on_close(first_push_at + 1001).unsent
    assert isinstance(last.request, PushTelemetryRequest) and last.request.terminating
    assert manager.poll(first_push_at + 5000).unsent == []


def test_an_unknown_subscription_asks_again_and_an_api_less_broker_turns_it_off() -> None:
    manager = _manager({})
    (ask,) = manager.poll(0).unsent
    sub = GetTelemetrySubscriptionsResponse(
        client_instance_id=uuid.uuid4(), subscription_id=1, push_interval_ms=100, requested_metrics=["*"]
    )
    _answer(ask, sub, 0)
    (push,) = manager.poll(200).unsent
    _answer(push, PushTelemetryResponse(error_code=106), 200)  # UNKNOWN_SUBSCRIPTION_ID
    (again,) = manager.poll(200).unsent
    assert isinstance(again.request, GetTelemetrySubscriptionsRequest)
    assert again.request.client_instance_id == sub.client_instance_id

    off = _manager({})
    (ask,) = off.poll(0).unsent
    _answer(ask, None, 0, UnsupportedVersionError("no GetTelemetrySubscriptions"))
    assert off.poll(100_000).unsent == [] and off.poll_on_close(100_000).unsent == []
