"""Windowed statistics with the semantics of Java's ``org.apache.kafka.common.metrics.stats``. [pure]

Every stat takes the time of each value (``now_ms``) from its caller and reads no clock.

Sampled stats (:class:`Avg`, :class:`Max`, :class:`Min`, :class:`WindowedSum`,
:class:`WindowedCount`) keep up to ``samples + 1`` samples of ``window_ms`` each
(``metrics.num.samples`` and ``metrics.sample.window.ms``; the extra one is Java's
"overlapping sample"). A value goes into the current sample; a sample is complete once
``window_ms`` passed since it started, and the next value then starts a new one, reusing the
oldest slot. When measured, a sample whose last value is ``samples * window_ms`` old or more
is obsolete: it is reset (it starts again, empty, at the time of the measurement). The
measure combines the samples that are left: :class:`Avg` the sum of the values over their
count, :class:`Max` / :class:`Min` the extreme value, both NaN when no value is left;
:class:`WindowedSum` the sum (0.0 when empty).

:class:`Rate` divides a windowed sum (or count) by the elapsed window in its time unit
(seconds by default): the time since the oldest sample started, but never less than
``samples - 1`` whole windows plus the part of the current window elapsed so far
(``(samples - 1 - full) * window_ms`` is added when fewer than ``samples - 1`` whole windows
elapsed), and at least 1 ms. So with the defaults (2 samples of 30 s), 100 records recorded
at t=0 measure 100 / 30 s at t=0 and 100 / 40 s at t=10 s.

Cumulative stats (:class:`CumulativeSum`, :class:`CumulativeCount`) and :class:`Value` (the
last value, 0.0 before any) ignore windows.

Measuring mutates the samples (obsolete ones are reset), as Java's does: only the owner of a
stat may measure it (see :mod:`kaflux.metrics.registry`).

Batches. :meth:`SampledStat.accept_until_ms` is the time before which a value would go into the
current sample without starting a new one; values recorded before then may be folded into one
:meth:`~SampledStat.record_batch` (their sum, count, maximum, minimum, last value and the time
of the last one), which leaves the stat exactly as recording them one by one would (the
sensors of :mod:`kaflux.metrics.registry` do this, to keep recording cheap).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "Avg",
    "CumulativeCount",
    "CumulativeSum",
    "Max",
    "MeasurableStat",
    "MetricConfig",
    "Min",
    "Rate",
    "SampledStat",
    "Value",
    "WindowedCount",
    "WindowedSum",
]

#: Java's defaults: ``metrics.num.samples`` and ``metrics.sample.window.ms``
DEFAULT_NUM_SAMPLES = 2
DEFAULT_SAMPLE_WINDOW_MS = 30_000
SECOND_MS = 1000
HOUR_MS = 3_600_000


@dataclass(frozen=True, slots=True)
class MetricConfig:
    """How the sampled stats of one registry window their values."""

    #: ``metrics.num.samples``: the samples a sampled stat combines
    samples: int = DEFAULT_NUM_SAMPLES
    #: ``metrics.sample.window.ms``: the time one sample covers
    window_ms: int = DEFAULT_SAMPLE_WINDOW_MS

    def __post_init__(self) -> None:
        if self.samples < 1:
            raise ValueError(f"the number of samples must be at least 1, got {self.samples}")
        if self.window_ms < 1:
            raise ValueError(f"the sample window must be at least 1 ms, got {self.window_ms}")


#: accept_until_ms() of a stat without windows: any time
NO_LIMIT_MS = 2**63
#: accept_until_ms() of a sampled stat without a sample: none (the next value starts one)
NOT_NOW_MS = -(2**63)


class MeasurableStat(Protocol):
    """What a registry records into and measures."""

    def record(self, value: float, now_ms: int) -> None: ...

    def record_batch(
        self, total: float, count: int, high: float, low: float, last: float, last_ms: int
    ) -> None:
        """Record ``count`` values (``total`` their sum, ``high`` / ``low`` the largest and
        smallest, ``last`` the last one, recorded at ``last_ms``), all recorded before
        :meth:`accept_until_ms`, as if one by one."""
        ...

    def accept_until_ms(self) -> int:
        """Values recorded before this time need no new sample (see the module docstring)."""
        ...

    def measure(self, now_ms: int) -> float: ...


class _Sample:
    __slots__ = ("count", "last_event_ms", "start_ms", "value")

    def __init__(self, initial: float, now_ms: int) -> None:
        self.value = initial
        self.count = 0
        self.start_ms = now_ms
        self.last_event_ms = now_ms

    def reset(self, initial: float, now_ms: int) -> None:
        self.value = initial
        self.count = 0
        self.start_ms = now_ms
        self.last_event_ms = now_ms


class SampledStat:
    """A value combined over the live samples of a time window (Java's ``SampledStat``)."""

    __slots__ = ("_config", "_current", "_initial", "_samples")

    #: the value of an empty sample
    INITIAL = 0.0

    def __init__(self, config: MetricConfig) -> None:
        self._config = config
        self._initial = self.INITIAL
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        samples = self._samples
        if not samples:
            samples.append(_Sample(self._initial, now_ms))
        sample = samples[self._current]
        if now_ms - sample.start_ms >= self._config.window_ms:
            sample = self._advance(now_ms)
        self._update(sample, value)
        sample.count += 1
        sample.last_event_ms = now_ms

    def _advance(self, now_ms: int) -> _Sample:
        samples = self._samples
        self._current = (self._current + 1) % (self._config.samples + 1)
        if self._current >= len(samples):
            sample = _Sample(self._initial, now_ms)
            samples.append(sample)
            return sample
        sample = samples[self._current]
        sample.reset(self._initial, now_ms)
        return sample

    def _update(self, sample: _Sample, value: float) -> None:
        sample.value += value

    def accept_until_ms(self) -> int:
        if not self._samples:
            return NOT_NOW_MS
        return self._samples[self._current].start_ms + self._config.window_ms

    def record_batch(
        self, total: float, count: int, high: float, low: float, last: float, last_ms: int
    ) -> None:
        sample = self._samples[self._current]
        self._update_batch(sample, total, count, high, low)
        sample.count += count
        sample.last_event_ms = last_ms

    def _update_batch(self, sample: _Sample, total: float, count: int, high: float, low: float) -> None:
        sample.value += total

    def purge_obsolete(self, now_ms: int) -> None:
        """Reset the samples whose last value is ``samples * window_ms`` old or more."""
        expire_age = self._config.samples * self._config.window_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire_age:
                sample.reset(self._initial, now_ms)

    def oldest_start_ms(self, now_ms: int) -> int:
        """When the oldest sample started (a first, empty sample starts now if there is none)."""
        if not self._samples:
            self._samples.append(_Sample(self._initial, now_ms))
        return min(sample.start_ms for sample in self._samples)

    def measure(self, now_ms: int) -> float:
        self.purge_obsolete(now_ms)
        return self._combine()

    def _combine(self) -> float:
        raise NotImplementedError


class WindowedSum(SampledStat):
    """The sum of the values in the live samples."""

    __slots__ = ()

    def _combine(self) -> float:
        return sum(sample.value for sample in self._samples)


class WindowedCount(WindowedSum):
    """The number of values in the live samples (each value counts 1)."""

    __slots__ = ()

    def _update(self, sample: _Sample, value: float) -> None:
        sample.value += 1.0

    def _update_batch(self, sample: _Sample, total: float, count: int, high: float, low: float) -> None:
        sample.value += count


class Avg(SampledStat):
    """The mean of the values in the live samples; NaN when there is none."""

    __slots__ = ()

    def _combine(self) -> float:
        count = sum(sample.count for sample in self._samples)
        if count == 0:
            return math.nan
        return sum(sample.value for sample in self._samples) / count


class Max(SampledStat):
    """The largest value in the live samples; NaN when there is none."""

    __slots__ = ()
    INITIAL = -math.inf

    def _update(self, sample: _Sample, value: float) -> None:
        if value > sample.value:
            sample.value = value

    def _update_batch(self, sample: _Sample, total: float, count: int, high: float, low: float) -> None:
        if high > sample.value:
            sample.value = high

    def _combine(self) -> float:
        if not any(sample.count for sample in self._samples):
            return math.nan
        return max(sample.value for sample in self._samples)


class Min(SampledStat):
    """The smallest value in the live samples; NaN when there is none."""

    __slots__ = ()
    INITIAL = math.inf

    def _update(self, sample: _Sample, value: float) -> None:
        if value < sample.value:
            sample.value = value

    def _update_batch(self, sample: _Sample, total: float, count: int, high: float, low: float) -> None:
        if low < sample.value:
            sample.value = low

    def _combine(self) -> float:
        if not any(sample.count for sample in self._samples):
            return math.nan
        return min(sample.value for sample in self._samples)


class Rate:
    """A windowed sum (or count) per unit of time (Java's ``Rate``): per second by default."""

    __slots__ = ("_config", "_stat", "_unit_ms")

    def __init__(
        self, config: MetricConfig, stat: WindowedSum | None = None, unit_ms: int = SECOND_MS
    ) -> None:
        self._config = config
        self._stat = stat if stat is not None else WindowedSum(config)
        self._unit_ms = unit_ms

    def record(self, value: float, now_ms: int) -> None:
        self._stat.record(value, now_ms)

    def record_batch(
        self, total: float, count: int, high: float, low: float, last: float, last_ms: int
    ) -> None:
        self._stat.record_batch(total, count, high, low, last, last_ms)

    def accept_until_ms(self) -> int:
        return self._stat.accept_until_ms()

    def window_ms(self, now_ms: int) -> int:
        """The elapsed window the rate divides by, in ms (see the module docstring)."""
        stat = self._stat
        stat.purge_obsolete(now_ms)
        elapsed = now_ms - stat.oldest_start_ms(now_ms)
        window = self._config.window_ms
        full_windows = elapsed // window
        min_full_windows = self._config.samples - 1
        if full_windows < min_full_windows:
            elapsed += (min_full_windows - full_windows) * window
        return max(elapsed, 1)

    def measure(self, now_ms: int) -> float:
        total = self._stat.measure(now_ms)
        return total / (self.window_ms(now_ms) / self._unit_ms)


class CumulativeSum:
    """The sum of every value ever recorded."""

    __slots__ = ("_total",)

    def __init__(self) -> None:
        self._total = 0.0

    def record(self, value: float, now_ms: int) -> None:
        self._total += value

    def record_batch(
        self, total: float, count: int, high: float, low: float, last: float, last_ms: int
    ) -> None:
        self._total += total

    def accept_until_ms(self) -> int:
        return NO_LIMIT_MS

    def measure(self, now_ms: int) -> float:
        return self._total


class CumulativeCount(CumulativeSum):
    """How many values were ever recorded."""

    __slots__ = ()

    def record(self, value: float, now_ms: int) -> None:
        self._total += 1.0

    def record_batch(
        self, total: float, count: int, high: float, low: float, last: float, last_ms: int
    ) -> None:
        self._total += count


class Value:
    """The last value recorded (0.0 before any)."""

    __slots__ = ("_value",)

    def __init__(self) -> None:
        self._value = 0.0

    def record(self, value: float, now_ms: int) -> None:
        self._value = value

    def record_batch(
        self, total: float, count: int, high: float, low: float, last: float, last_ms: int
    ) -> None:
        self._value = last

    def accept_until_ms(self) -> int:
        return NO_LIMIT_MS

    def measure(self, now_ms: int) -> float:
        return self._value
