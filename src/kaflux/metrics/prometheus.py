"""A ``prometheus_client`` collector for a kaflux client's metrics. [app: runs on the thread that
scrapes, which may be any thread: ``metrics()`` allows it]

Needs the ``kaflux[prometheus]`` extra (``prometheus_client``)::

    from prometheus_client import REGISTRY, start_http_server
    from kaflux.metrics.prometheus import KafluxCollector

    REGISTRY.register(KafluxCollector(consumer))
    start_http_server(8000)

Each scrape calls the client's ``metrics()`` (bounded by ``timeout``; see
``Consumer.metrics``) and exposes every value as a gauge, named as the JMX exporter names
Java's client metrics: ``<namespace>_<group>_<name>`` with dashes made underscores
(``kafka_consumer_fetch_manager_metrics_records_lag_max``). Labels: ``client_id``, and the
group's tags (``node_id``, ``topic``, ``partition``). A metric that exists both with and
without tags (``records-lag-max`` for the consumer and per partition) is one family whose
samples have different labels, as the JMX exporter exposes it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Protocol

from prometheus_client.core import Metric  # type: ignore[import-not-found,unused-ignore]  # the extra

from kaflux.metrics.registry import split_group

__all__ = ["KafluxCollector"]

_INVALID = re.compile(r"[^a-zA-Z0-9_]")


class MetricsSource(Protocol):
    """A kaflux client: a ``Consumer`` or a ``Producer``."""

    client_id: str

    def metrics(self, timeout: float = ...) -> Mapping[str, Mapping[str, float]]: ...


def _name(*parts: str) -> str:
    return _INVALID.sub("_", "_".join(part for part in parts if part))


class KafluxCollector:
    """Exposes ``client.metrics()`` to a ``prometheus_client`` registry."""

    def __init__(self, client: MetricsSource, *, namespace: str = "kafka", timeout: float = 0.5) -> None:
        """``namespace``: the prefix of every metric name; ``timeout``: the most each scrape
        waits for the client's network thread (seconds)."""
        self._client = client
        self._namespace = namespace
        self._timeout = timeout

    def describe(self) -> list[Metric]:
        """Nothing: the metrics are known only once the client measures them (so registering
        does not call metrics())."""
        return []

    def collect(self) -> Iterator[Metric]:
        client_id = self._client.client_id
        families: dict[str, Metric] = {}
        for group_key, values in self._client.metrics(self._timeout).items():
            group, tags = split_group(group_key)
            labels = {"client_id": client_id, **{_name(tag): value for tag, value in tags.items()}}
            for metric, value in values.items():
                name = _name(self._namespace, group, metric)
                family = families.get(name)
                if family is None:
                    family = families[name] = Metric(name, f"kaflux {group} {metric}", "gauge")
                family.add_sample(name, labels, float(value))
        yield from families.values()
