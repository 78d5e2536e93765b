"""Client metrics with the names and meanings of Java's client metrics. [pure: takes now_ms]

``Consumer.metrics()`` and ``Producer.metrics()`` return ``{group: {name: value}}``, with
Java's group and metric names (``"consumer-fetch-manager-metrics"``: ``"records-lag-max"``,
...); a group with tags is the group name followed by ``,tag=value`` pairs
(``"consumer-node-metrics,node-id=node-1"``). Windowed rates, averages and maxima follow
Java's sampled stats (:mod:`kaflux.metrics.stats`), windowed by ``metrics.num.samples`` and
``metrics.sample.window.ms``. :mod:`kaflux.metrics.prometheus` (the ``kaflux[prometheus]``
extra) exposes them to ``prometheus_client``.
"""

from kaflux.metrics.registry import (
    Gauge,
    MetricsRegistry,
    Sensor,
    Snapshot,
    merge_snapshots,
    split_group,
    tagged_group,
)
from kaflux.metrics.stats import (
    Avg,
    CumulativeCount,
    CumulativeSum,
    Max,
    MetricConfig,
    Min,
    Rate,
    SampledStat,
    Value,
    WindowedCount,
    WindowedSum,
)

__all__ = [
    "Avg",
    "CumulativeCount",
    "CumulativeSum",
    "Gauge",
    "Max",
    "MetricConfig",
    "MetricsRegistry",
    "Min",
    "Rate",
    "SampledStat",
    "Sensor",
    "Snapshot",
    "Value",
    "WindowedCount",
    "WindowedSum",
    "merge_snapshots",
    "split_group",
    "tagged_group",
]
