"""What the consumer's application thread records into its metrics registry. [app]

Once per ``poll()``: the time between polls and what the poll returned (records, bytes, lag,
per partition), through :class:`~kaflux.metrics.clients.PollMetrics`; and kaflux's own gauges
(no Java equivalent) in ``kaflux-consumer-metrics``, read when measured.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from kaflux.consumer.fetch_collector import FetchCollector
from kaflux.consumer.subscription_state import FetchState, SubscriptionState
from kaflux.metrics.clients import KAFLUX_CONSUMER_METRICS, PollMetrics
from kaflux.metrics.registry import MetricsRegistry


def _gauge_of(read: Callable[[], int]) -> Callable[[int], float]:
    """A gauge (a function of the time) reading a counter."""
    return lambda now_ms: float(read())


def add_kaflux_gauges(
    registry: MetricsRegistry,
    *,
    records_returned: Callable[[], int],
    fetch_requests: Callable[[], int],
    fetch_buffer_bytes: Callable[[], int],
    network_loops: Callable[[], int],
    subscription: SubscriptionState,
) -> None:
    """kaflux's own counters (no Java equivalent), in ``kaflux-consumer-metrics``."""
    gauges: dict[str, Callable[[], int]] = {
        "records-returned": records_returned,
        "fetch-requests": fetch_requests,
        "fetch-buffer-bytes": fetch_buffer_bytes,
        "network-loops": network_loops,
        "assigned-partitions": lambda: len(subscription.assigned_partitions()),
        "partitions-awaiting-position": lambda: (
            len(subscription.partitions_in_state(FetchState.AWAIT_RESET))
            + len(subscription.partitions_in_state(FetchState.INITIALIZING))
        ),
    }
    for name, read in gauges.items():
        registry.add_gauge(KAFLUX_CONSUMER_METRICS, name, _gauge_of(read))


class PollRecorder:
    """Records each poll: its start, and at its end what the collector tallied."""

    def __init__(
        self, metrics: PollMetrics, subscription: SubscriptionState, collector: FetchCollector
    ) -> None:
        self._metrics = metrics
        self._subscription = subscription
        self._collector = collector
        self._assignment = -1

    def poll_started(self, now_ms: float) -> None:
        self._metrics.poll_started(now_ms)

    def poll_ended(self) -> None:
        """The metrics of the poll that ends: once per poll, whatever it returned."""
        version = self._subscription.assignment_version
        if version != self._assignment:
            self._assignment = version
            self._metrics.retain_partitions(self._subscription.assigned_partitions())
        tally = self._collector.tally
        now_ms = time.monotonic() * 1000
        if tally is None or not tally.records:
            self._metrics.poll_ended(now_ms)
        else:
            self._metrics.poll_ended(now_ms, tally.records, tally.bytes, tally.lags)
            tally.reset()
