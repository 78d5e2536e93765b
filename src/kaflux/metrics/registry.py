"""Sensors and the registry of one thread's metrics. [pure: takes now_ms; the lock, if any, is injected]

As in Java, a :class:`Sensor` is a named handle that code records values into
(``sensor.record(value, now_ms)``); it feeds every stat added to it, and each stat is published
under a metric ``(group, name)``: one ``record(n)`` on a sensor with ``add_meter`` and
``add_avg`` updates a rate, a total and an average at once. A gauge is a function of
``now_ms`` evaluated when the registry is measured.

:meth:`MetricsRegistry.snapshot` measures everything into ``{group: {name: value}}``. A group
with tags is written as Java's group name followed by ``,tag=value`` pairs, in Java's tag order:
``"consumer-node-metrics,node-id=node-1"``,
``"consumer-fetch-manager-metrics,topic=orders,partition=0"`` (see :func:`tagged_group`).

Ownership. Each kaflux client thread records into a registry of its own, so no lock is shared
between a client's two threads. Measuring resets obsolete samples (Java's semantics), so only
the owner may measure, unless the registry was given a ``lock``: then every record, every new
sensor and the measuring part of a snapshot take it (it is a leaf lock: nothing is called out
of the registry while it is held; gauges are evaluated after it is released), and any thread
may take snapshots. The consumer's application-thread registry has one, so that
``Consumer.metrics()`` may be called from another thread (a Prometheus scrape).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from kaflux.metrics.stats import (
    HOUR_MS,
    NOT_NOW_MS,
    Avg,
    CumulativeCount,
    CumulativeSum,
    Max,
    MeasurableStat,
    MetricConfig,
    Min,
    Rate,
    Value,
    WindowedCount,
    WindowedSum,
)

__all__ = ["Gauge", "MetricsRegistry", "Sensor", "Snapshot", "merge_snapshots", "split_group", "tagged_group"]

#: ``{group: {name: value}}``
Snapshot = dict[str, dict[str, float]]
#: a metric computed when measured, from the time of the measurement
Gauge = Callable[[int], float]


def tagged_group(group: str, tags: Iterable[tuple[str, object]]) -> str:
    """``group`` with its tags appended as ``,key=value`` pairs, in the order given."""
    return ",".join([group, *(f"{key}={value}" for key, value in tags)])


def split_group(key: str) -> tuple[str, dict[str, str]]:
    """The group name and tags of a :func:`tagged_group` key."""
    name, *pairs = key.split(",")
    tags: dict[str, str] = {}
    for pair in pairs:
        tag, _, value = pair.partition("=")
        tags[tag] = value
    return name, tags


def merge_snapshots(*snapshots: Mapping[str, Mapping[str, float]]) -> Snapshot:
    """One snapshot of several (later ones win on a name both have)."""
    merged: Snapshot = {}
    for snapshot in snapshots:
        for group, values in snapshot.items():
            merged.setdefault(group, {}).update(values)
    return merged


class Sensor:
    """A named handle recording values into every stat added to it.

    Recording is cheap: values that fall in the current sample of every stat (recorded before
    the earliest :meth:`~kaflux.metrics.stats.SampledStat.accept_until_ms`) are only summed
    here, and handed to the stats as one batch when a value falls past that time or the
    registry is measured; the stats end exactly as if each value had been recorded alone.
    """

    __slots__ = (
        "_lock",
        "_pending_count",
        "_pending_high",
        "_pending_last",
        "_pending_low",
        "_pending_ms",
        "_pending_total",
        "_registry",
        "_stats",
        "_until_ms",
        "name",
    )

    def __init__(
        self, registry: MetricsRegistry, name: str, lock: AbstractContextManager[Any] | None
    ) -> None:
        self.name = name
        self._registry = registry
        self._lock = lock
        self._stats: tuple[MeasurableStat, ...] = ()
        #: values before this time go into the pending batch
        self._until_ms = NOT_NOW_MS
        self._pending_count = 0
        self._pending_total = 0.0
        self._pending_high = -math.inf
        self._pending_low = math.inf
        self._pending_last = 0.0
        self._pending_ms = 0

    def record(self, value: float, now_ms: int) -> None:
        """Record ``value`` at ``now_ms`` into every stat of the sensor."""
        lock = self._lock
        if lock is None:
            self.record_held(value, now_ms)
            return
        with lock:
            self.record_held(value, now_ms)

    def record_held(self, value: float, now_ms: int) -> None:
        """:meth:`record`, the caller holding the registry's :meth:`MetricsRegistry.guard`."""
        if now_ms < self._until_ms:
            self._pending_count += 1
            self._pending_total += value
            if value > self._pending_high:
                self._pending_high = value
            if value < self._pending_low:
                self._pending_low = value
            self._pending_last = value
            self._pending_ms = now_ms
            return
        self.flush()
        stats = self._stats
        for stat in stats:
            stat.record(value, now_ms)
        self._until_ms = min((stat.accept_until_ms() for stat in stats), default=NOT_NOW_MS)

    def flush(self) -> None:
        """Hand the pending values to the stats (the registry's lock held, if it has one)."""
        count = self._pending_count
        if not count:
            return
        total, high, low = self._pending_total, self._pending_high, self._pending_low
        last, last_ms = self._pending_last, self._pending_ms
        for stat in self._stats:
            stat.record_batch(total, count, high, low, last, last_ms)
        self._pending_count = 0
        self._pending_total = 0.0
        self._pending_high = -math.inf
        self._pending_low = math.inf

    def invalidate(self) -> None:
        """The stats were measured (which may reset samples): the next value goes to them
        directly (the registry's lock held, if it has one)."""
        self._until_ms = NOT_NOW_MS

    # -- building ------------------------------------------------------------------------------

    def add(self, group: str, name: str, stat: MeasurableStat) -> Sensor:
        """Publish ``stat`` as ``(group, name)`` and feed it every value recorded."""
        self._registry.register_stat(group, name, stat, self.name)
        with self._lock if self._lock is not None else nullcontext():
            self.flush()
            self.invalidate()
            self._stats = (*self._stats, stat)
        return self

    def add_avg(self, group: str, name: str) -> Sensor:
        return self.add(group, name, Avg(self._registry.config))

    def add_max(self, group: str, name: str) -> Sensor:
        return self.add(group, name, Max(self._registry.config))

    def add_min(self, group: str, name: str) -> Sensor:
        return self.add(group, name, Min(self._registry.config))

    def add_value(self, group: str, name: str) -> Sensor:
        return self.add(group, name, Value())

    def add_total(self, group: str, name: str) -> Sensor:
        return self.add(group, name, CumulativeSum())

    def add_count(self, group: str, name: str) -> Sensor:
        return self.add(group, name, CumulativeCount())

    def add_meter(self, group: str, rate_name: str, total_name: str, *, count: bool = False) -> Sensor:
        """Java's ``Meter``: a per-second rate and a cumulative total of the values (with
        ``count``: of the number of values recorded)."""
        config = self._registry.config
        if count:
            self.add(group, rate_name, Rate(config, WindowedCount(config)))
            return self.add(group, total_name, CumulativeCount())
        self.add(group, rate_name, Rate(config, WindowedSum(config)))
        return self.add(group, total_name, CumulativeSum())

    def add_hourly_count_rate(self, group: str, name: str) -> Sensor:
        """The number of values recorded per hour (``Rate(HOURS, WindowedCount)``)."""
        config = self._registry.config
        return self.add(group, name, Rate(config, WindowedCount(config), unit_ms=HOUR_MS))


class MetricsRegistry:
    """The sensors, stats and gauges of one thread (see the module docstring)."""

    def __init__(
        self, config: MetricConfig | None = None, *, lock: AbstractContextManager[Any] | None = None
    ) -> None:
        self.config = config if config is not None else MetricConfig()
        self._lock = lock
        self._sensors: dict[str, Sensor] = {}
        #: (group, name) -> stat, and the sensor that feeds it
        self._stats: dict[tuple[str, str], tuple[MeasurableStat, str]] = {}
        self._gauges: dict[tuple[str, str], Gauge] = {}

    def guard(self) -> AbstractContextManager[Any]:
        """The registry's lock (a no-op without one): hold it around several
        :meth:`Sensor.record_held` calls to take it once for all of them."""
        return self._lock if self._lock is not None else nullcontext()

    # -- sensors and gauges ------------------------------------------------------------------------

    def sensor(self, name: str) -> Sensor:
        """The sensor called ``name``, created (without stats) if there is none."""
        with self.guard():
            sensor = self._sensors.get(name)
            if sensor is None:
                sensor = self._sensors[name] = Sensor(self, name, self._lock)
            return sensor

    def get_sensor(self, name: str) -> Sensor | None:
        """The sensor called ``name``, if there is one."""
        with self.guard():
            return self._sensors.get(name)

    def register_stat(self, group: str, name: str, stat: MeasurableStat, sensor: str) -> None:
        """Publish ``stat`` as ``(group, name)``, fed by the sensor called ``sensor`` (use
        :meth:`Sensor.add`, which also feeds it)."""
        with self.guard():
            key = (group, name)
            if key in self._stats or key in self._gauges:
                raise ValueError(f"metric {name!r} of group {group!r} is registered already")
            self._stats[key] = (stat, sensor)

    def remove_sensor(self, name: str) -> None:
        """Drop the sensor called ``name`` and the metrics it feeds (no-op if unknown)."""
        with self.guard():
            if self._sensors.pop(name, None) is None:
                return
            self._stats = {key: entry for key, entry in self._stats.items() if entry[1] != name}

    def add_gauge(self, group: str, name: str, gauge: Gauge) -> None:
        """Publish ``gauge(now_ms)`` as ``(group, name)``. It runs outside the registry's
        lock, on the thread taking the snapshot."""
        with self.guard():
            key = (group, name)
            if key in self._stats or key in self._gauges:
                raise ValueError(f"metric {name!r} of group {group!r} is registered already")
            self._gauges[key] = gauge

    def remove_gauge(self, group: str, name: str) -> None:
        with self.guard():
            self._gauges.pop((group, name), None)

    # -- measuring ------------------------------------------------------------------------------

    def measure(self, group: str, name: str, now_ms: int) -> float:
        """One metric's value now; raises KeyError if there is no such metric."""
        with self.guard():
            entry = self._stats.get((group, name))
            if entry is not None:
                sensor = self._sensors[entry[1]]
                sensor.flush()
                sensor.invalidate()
                return float(entry[0].measure(now_ms))
            gauge = self._gauges[(group, name)]
        return gauge(now_ms)

    def snapshot(self, now_ms: int) -> Snapshot:
        """Every metric's value at ``now_ms``, as ``{group: {name: value}}``."""
        out: Snapshot = {}
        with self.guard():
            for sensor in self._sensors.values():
                sensor.flush()
                sensor.invalidate()
            for (group, name), (stat, _) in self._stats.items():
                out.setdefault(group, {})[name] = float(stat.measure(now_ms))
            gauges = list(self._gauges.items())
        for (group, name), gauge in gauges:
            try:
                value = float(gauge(now_ms))
            except Exception:  # a gauge must not break metrics(); its value is unknown
                value = math.nan
            out.setdefault(group, {})[name] = value
        return out
