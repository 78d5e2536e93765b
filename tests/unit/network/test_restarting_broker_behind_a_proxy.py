"""A plaintext broker that once answered, then (behind a proxy, while it restarts) has every new
connection accepted and closed unanswered, is unreachable for a while, not a TLS listener.

The TLS verdict (three connections in a row closed before ApiVersions: "its listener is most likely
TLS", an SslAuthenticationError) failed an idempotent producer's sends at once, where a retry after
the broker came back would have delivered them. Found by the 3-node Apache Kafka fault tests
(tests/integration/test_kafka_cluster_faults.py: SIGKILL a leader behind its proxy failed hundreds
of sends with SslAuthenticationError).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from kaflux import AdminClient, Producer, TopicPartition

from support.fakes import FakeCluster
from support.fault_proxy import FaultProxy
from support.socket_fake_broker import SocketFakeBroker

TP = TopicPartition("t", 0)


def _attempts(proxy: FaultProxy) -> int:
    stats = proxy.stats()
    return stats.connections_accepted + stats.connections_refused


@pytest.fixture
def proxied() -> Iterator[FaultProxy]:
    cluster = FakeCluster(1)
    cluster.create_topic(TP.topic, 1)
    broker = SocketFakeBroker(cluster)
    proxy = FaultProxy(("127.0.0.1", broker.port), rewrite_addresses=True).start()
    try:
        yield proxy
    finally:
        proxy.close()
        broker.close()


def test_sends_wait_for_a_broker_that_answered_before_instead_of_failing_as_tls(proxied: FaultProxy) -> None:
    config = {
        "bootstrap.servers": proxied.bootstrap_servers,
        "reconnect.backoff.ms": 20,
        "reconnect.backoff.max.ms": 50,
        "delivery.timeout.ms": 60_000,
    }
    with Producer(config) as producer:
        assert producer.send(TP.topic, b"before", partition=0).result(timeout=10).offset == 0
        proxied.refuse_connections("close")  # accept, then close at once: a broker restarting
        proxied.cut_connections()
        before = _attempts(proxied)
        during = producer.send(TP.topic, b"during", partition=0)
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and _attempts(proxied) - before < 10 and not during.done():
            time.sleep(0.05)
        assert not during.done(), f"failed while the broker was away: {during.exception()!r}"
        assert _attempts(proxied) - before >= 10  # many new connections closed unanswered
        proxied.reset()  # the broker is back
        assert during.result(timeout=10).offset == 1


def test_a_request_for_any_broker_waits_for_one_that_answered_before(proxied: FaultProxy) -> None:
    """The same for a request any broker may serve (here describe_cluster's Metadata): before the
    fix it failed with the SslAuthenticationError as soon as the only broker was called a TLS
    listener. (The producer no longer queues anything for a leader it cannot reach, so it does
    not meet this any more; every other client does.)"""
    config = {
        "bootstrap.servers": proxied.bootstrap_servers,
        "reconnect.backoff.ms": 20,
        "reconnect.backoff.max.ms": 50,
    }
    with AdminClient(config) as admin, ThreadPoolExecutor(1) as pool:
        assert admin.describe_cluster(timeout=10).nodes
        proxied.refuse_connections("close")
        proxied.cut_connections()
        before = _attempts(proxied)
        during = pool.submit(admin.list_topics, timeout=30)
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and _attempts(proxied) - before < 10 and not during.done():
            time.sleep(0.05)
        assert not during.done(), f"failed while the broker was away: {during.exception()!r}"
        assert _attempts(proxied) - before >= 10
        proxied.reset()
        assert TP.topic in during.result(timeout=20)
