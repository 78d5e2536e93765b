"""KafkaBroker's ``advertised_port``: clients are sent to another port (a proxy's), the nodes keep
talking to each other directly on a listener of their own. Pure: only ``server.properties`` is
looked at, no JVM starts (the jars must be resolved, as ``scripts/bootstrap.sh --test`` does)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from kaflux.devbrokers.apache_kafka import KafkaBroker, KafkaCluster
from kaflux.devbrokers.brokers import BrokerUnavailableError


@pytest.fixture
def make_broker() -> Iterator[Callable[..., KafkaBroker]]:
    made: list[KafkaBroker] = []

    def make(**kwargs: object) -> KafkaBroker:
        try:
            broker = KafkaBroker(**kwargs)  # type: ignore[arg-type]
        except BrokerUnavailableError as e:
            pytest.skip(f"Apache Kafka's jars are not resolved here: {e}")
        made.append(broker)
        return broker

    yield make
    for broker in made:
        broker.cleanup()  # its work directory


def test_without_advertised_port_the_plain_listener_is_advertised_and_used_between_nodes(
    make_broker: Callable[..., KafkaBroker],
) -> None:
    broker = make_broker(port=19092, controller_port=19093)
    props = broker.server_properties(19092)
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:19092"
    assert props["inter.broker.listener.name"] == "PLAINTEXT"
    assert broker.internal_port is None


def test_advertised_port_sends_clients_elsewhere_and_keeps_replication_direct(
    make_broker: Callable[..., KafkaBroker],
) -> None:
    broker = make_broker(port=19092, controller_port=19093, advertised_port=29092)
    internal = broker.internal_port
    assert internal is not None and internal not in (19092, 19093, 29092)
    props = broker.server_properties(19092)
    assert props["listeners"] == (
        f"PLAINTEXT://127.0.0.1:19092,INTERNAL://127.0.0.1:{internal},CONTROLLER://127.0.0.1:19093"
    )
    assert props["advertised.listeners"] == f"PLAINTEXT://127.0.0.1:29092,INTERNAL://127.0.0.1:{internal}"
    assert props["inter.broker.listener.name"] == "INTERNAL"
    assert "INTERNAL:PLAINTEXT" in props["listener.security.protocol.map"].split(",")
    assert broker.bootstrap_servers == "127.0.0.1:19092"  # the node's own port, not the proxy's


def test_a_cluster_needs_one_advertised_port_per_node() -> None:
    with pytest.raises(ValueError, match="3 nodes need 3 advertised ports, got 2"):
        KafkaCluster(3, advertised_ports=[1, 2])
