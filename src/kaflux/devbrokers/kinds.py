"""Every dev broker by name: ``start_broker("kafka")``, ``"noida"`` or ``"tansu"``. [io]

Apache Kafka (``"kafka"``) is the reference broker; noida-db and Tansu are stand-ins (single
binaries from pip packages, so they need no Java). librdkafka's mock cluster is not started by
name here: it is :class:`kaflux.devbrokers.mock_cluster.MockCluster`.
"""

from __future__ import annotations

import os
from typing import Any

from kaflux.devbrokers.apache_kafka import KafkaBroker
from kaflux.devbrokers.brokers import Broker, NoidaBroker, TansuBroker

__all__ = ["BROKER_KINDS", "start_broker"]

#: The kinds :func:`start_broker` knows, the reference broker first.
BROKER_KINDS: tuple[str, ...] = ("kafka", "tansu", "noida")

_CLASSES: dict[str, type[Broker]] = {"kafka": KafkaBroker, "tansu": TansuBroker, "noida": NoidaBroker}


def start_broker(
    kind: str,
    *,
    timeout: float | None = None,
    port: int | None = None,
    workdir: str | os.PathLike[str] | None = None,
    **options: Any,
) -> Broker:
    """Create and start a broker of ``kind`` (one of :data:`BROKER_KINDS`); returns it running.

    ``options`` go to the kind's class (e.g. ``kafka_home=`` or ``security=`` for ``"kafka"``).
    ``timeout`` defaults to the kind's ``start_timeout`` (30 s; 120 s for Apache Kafka's JVM).
    """
    try:
        cls = _CLASSES[kind]
    except KeyError:
        raise ValueError(f"unknown broker kind {kind!r}; expected one of {BROKER_KINDS}") from None
    broker = cls(port=port, workdir=workdir, **options)
    try:
        return broker.start(timeout)
    except BaseException:
        broker.cleanup()
        raise
