"""Client metrics in the OTLP encoding a broker's client-telemetry plugin reads (KIP-714). [pure]

A kaflux metric ``<group>`` / ``<name>`` is named as Java's ``KafkaMetricsCollector`` names it:
``org.apache.kafka.`` + the group without its ``-metrics`` suffix + ``.`` + the name, every ``-``
a ``.`` (``producer-metrics`` / ``record-send-rate`` is ``org.apache.kafka.producer.record.send.rate``);
a group's tags (``node-id=node-1``) become the data point's attributes. Totals and counts
(``...-total``) are monotonic sums, cumulative or, when the subscription asks for it, deltas
since the previous push; every other metric is a gauge. A subscription's requested metrics are
name prefixes (``""`` / ``"*"``: every metric).

The message is OTLP's ``MetricsData`` protobuf (opentelemetry-proto's ``metrics.proto``), written
here field by field (a few wire types suffice), so kaflux needs no protobuf runtime.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable, Mapping

from kaflux.metrics.registry import split_group

__all__ = ["TelemetryMetric", "encode_metrics", "select_metrics", "telemetry_name"]

#: the prefix of every client metric's telemetry name (Java's ``KafkaMetricsCollector``)
DOMAIN = "org.apache.kafka"

TelemetryMetric = tuple[str, dict[str, str], float, bool]
"""(telemetry name, attributes, value, is a monotonic sum)"""


def telemetry_name(group_key: str, name: str) -> tuple[str, dict[str, str]]:
    """``("producer-node-metrics,node-id=node-1", "request-rate")`` ->
    ``("org.apache.kafka.producer.node.request.rate", {"node_id": "node-1"})``."""
    group, tags = split_group(group_key)
    if group.endswith("-metrics"):
        group = group[: -len("-metrics")]
    full = f"{DOMAIN}.{group}.{name}".replace("-", ".")
    return full, {k.replace("-", "_"): v for k, v in tags.items()}


def _is_sum(name: str) -> bool:
    return name.endswith("-total") or name.endswith("-count")


def select_metrics(
    snapshot: Mapping[str, Mapping[str, float]], requested: Iterable[str]
) -> list[TelemetryMetric]:
    """The metrics of ``snapshot`` the subscription asks for (prefix match), NaN left out."""
    prefixes = [p for p in requested]
    everything = any(p in ("", "*") for p in prefixes)
    out: list[TelemetryMetric] = []
    for group_key, values in sorted(snapshot.items()):
        for name, value in sorted(values.items()):
            if value is None or (isinstance(value, float) and math.isnan(value)):
                continue
            full, attributes = telemetry_name(group_key, name)
            if everything or any(full.startswith(p) for p in prefixes):
                out.append((full, attributes, float(value), _is_sum(name)))
    return out


# -- protobuf, the few wire types OTLP's MetricsData needs ------------------------------------------


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _len_field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _string(number: int, text: str) -> bytes:
    return _len_field(number, text.encode())


def _fixed64(number: int, value: int) -> bytes:
    return _varint(number << 3 | 1) + struct.pack("<Q", value)


def _double(number: int, value: float) -> bytes:
    return _varint(number << 3 | 1) + struct.pack("<d", value)


def _enum(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _key_value(key: str, value: str) -> bytes:
    any_value = _string(1, value)  # AnyValue.string_value
    return _string(1, key) + _len_field(2, any_value)


_CUMULATIVE, _DELTA = 2, 1  # AggregationTemporality


def encode_metrics(
    metrics: Iterable[TelemetryMetric],
    *,
    resource: Mapping[str, str],
    now_ns: int,
    start_ns: int,
    delta: bool,
) -> bytes:
    """OTLP ``MetricsData``: one ResourceMetrics (``resource`` as its attributes), one
    ScopeMetrics, a Metric per entry (a Gauge, or a monotonic Sum with ``delta`` or cumulative
    temporality starting at ``start_ns``), each with one NumberDataPoint."""
    encoded = bytearray()
    for name, attributes, value, is_sum in metrics:
        point = b"".join(_len_field(7, _key_value(k, v)) for k, v in sorted(attributes.items()))
        point += _fixed64(2, start_ns) + _fixed64(3, now_ns) + _double(4, value)
        if is_sum:
            body = _len_field(1, point) + _enum(2, _DELTA if delta else _CUMULATIVE) + _enum(3, 1)
            metric = _string(1, name) + _len_field(7, body)  # Metric.sum
        else:
            metric = _string(1, name) + _len_field(5, _len_field(1, point))  # Metric.gauge
        encoded += _len_field(2, metric)  # ScopeMetrics.metrics
    scope = _len_field(1, _string(1, "kaflux"))  # ScopeMetrics.scope: InstrumentationScope.name
    scope_metrics = scope + bytes(encoded)
    resource_msg = b"".join(_len_field(1, _key_value(k, v)) for k, v in sorted(resource.items()))
    resource_metrics = _len_field(1, resource_msg) + _len_field(2, scope_metrics)
    return _len_field(1, resource_metrics)  # MetricsData.resource_metrics
