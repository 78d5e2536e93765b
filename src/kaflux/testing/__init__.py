"""Helpers for testing code that talks to Kafka: real brokers run as child processes. [io]

Not imported by ``kaflux`` itself. See :mod:`kaflux.testing.brokers`.
"""

from kaflux.testing.brokers import (
    BROKER_KINDS,
    Broker,
    BrokerStartError,
    BrokerUnavailableError,
    NoidaBroker,
    TansuBroker,
    start_broker,
)

__all__ = [
    "BROKER_KINDS",
    "Broker",
    "BrokerStartError",
    "BrokerUnavailableError",
    "NoidaBroker",
    "TansuBroker",
    "start_broker",
]
