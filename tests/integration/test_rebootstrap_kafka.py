"""Rebootstrap (KIP-899): every broker the client knows goes dead while its bootstrap address
(a fault proxy) leads to a live cluster; with the default metadata.recovery.strategy=rebootstrap
the client starts again from bootstrap.servers and goes on by itself."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from kaflux import AdminClient, NewTopic, Producer

from support.fault_proxy import FaultProxy

pytestmark = pytest.mark.integration


def _create(bootstrap: str, topic: str) -> None:
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)], timeout=60.0)


def test_a_producer_whose_known_brokers_all_died_rebootstraps_to_the_live_cluster(
    fresh_broker: Callable[[str], Any],
) -> None:
    first = fresh_broker("kafka")
    host, port = first.bootstrap_servers.rsplit(":", 1)
    topic = f"kx-reboot-{uuid.uuid4().hex[:8]}"
    _create(first.bootstrap_servers, topic)
    with FaultProxy((host, int(port))) as proxy:
        config = {"bootstrap.servers": proxy.bootstrap_servers, "reconnect.backoff.max.ms": 200}
        with Producer(config) as producer:
            assert producer.send(topic, b"one", partition=0).result(60.0).offset == 0
            # the only broker it knows (by its own address, from metadata) goes away for good;
            # the bootstrap address now leads to another cluster
            first.stop()
            second = fresh_broker("kafka")
            _create(second.bootstrap_servers, topic)
            host2, port2 = second.bootstrap_servers.rsplit(":", 1)
            proxy.set_upstream(host2, int(port2))
            assert producer.send(topic, b"two", partition=0).result(90.0).offset == 0
