"""The real clients over TLS to :mod:`socket_fake_broker` with generated certificates: the
happy path with and without a client certificate, and every refusal as an
SslAuthenticationError within 5 s that says what to check (a wrong CA, another host's
certificate, a listener that is not TLS, a TLS listener reached without TLS)."""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kaflux import AdminClient, Consumer, Producer, TopicPartition
from kaflux.errors import ConfigError, SslAuthenticationError

from support.certs import TestCerts
from support.fakes import FakeCluster
from support.socket_fake_broker import SocketFakeBroker

TP = TopicPartition("secure", 0)
QUICK_S = 5.0


def _server_context(*, cert: Path, key: Path, client_ca: Path | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    if client_ca is not None:
        context.load_verify_locations(client_ca)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


BrokerFactory = Callable[..., SocketFakeBroker]


@pytest.fixture
def serve(certs: TestCerts) -> Iterator[BrokerFactory]:
    started: list[SocketFakeBroker] = []

    def make(
        *, tls: bool = True, cert: Path | None = None, key: Path | None = None, mutual: bool = False
    ) -> SocketFakeBroker:
        cluster = FakeCluster(1)
        cluster.create_topic(TP.topic, 1)
        cluster.produce(TP, [b"a", b"b"])
        context = None
        if tls:
            context = _server_context(
                cert=cert or certs.server_cert,
                key=key or certs.server_key,
                client_ca=certs.ca_cert if mutual else None,
            )
        started.append(SocketFakeBroker(cluster, ssl_context=context))
        return started[-1]

    yield make
    for broker in started:
        broker.close()


def _tls(certs: TestCerts, broker: SocketFakeBroker, **extra: object) -> dict[str, object]:
    return {
        "bootstrap.servers": broker.bootstrap_servers,
        "security.protocol": "SSL",
        "ssl.ca.location": str(certs.ca_cert),
        **extra,
    }


def _read_all(config: dict[str, object]) -> list[bytes | None]:
    consumer = Consumer({**config, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TP])
        values: list[bytes | None] = []
        deadline = time.monotonic() + 10
        while len(values) < 2 and time.monotonic() < deadline:
            values += [r.value for r in consumer.poll(0.2)]
        return values
    finally:
        consumer.close(timeout=5)


def test_consume_and_produce_over_tls(certs: TestCerts, serve: BrokerFactory) -> None:
    broker = serve()
    config = _tls(certs, broker)
    assert _read_all(config) == [b"a", b"b"]
    with Producer({**config, "linger.ms": 0}) as producer:
        assert producer.send(TP.topic, b"c", partition=0).result(timeout=10).offset == 2


def test_mutual_tls_with_a_password_protected_key(certs: TestCerts, serve: BrokerFactory) -> None:
    broker = serve(mutual=True)
    config = _tls(
        certs,
        broker,
        **{
            "ssl.certificate.location": str(certs.client_cert),
            "ssl.key.location": str(certs.client_key),
            "ssl.key.password": certs.client_key_password,
        },
    )
    assert _read_all(config) == [b"a", b"b"]


def test_a_wrong_key_password_is_a_config_error_naming_the_setting(certs: TestCerts) -> None:
    with pytest.raises(ConfigError, match=r"ssl\.key\.password") as info:
        Consumer(
            {
                "bootstrap.servers": "127.0.0.1:9",
                "security.protocol": "SSL",
                "ssl.certificate.location": str(certs.client_cert),
                "ssl.key.location": str(certs.client_key),
                "ssl.key.password": "not-the-password",
            }
        )
    assert "not-the-password" not in str(info.value)


def _refused_quickly(call: Callable[[], object]) -> SslAuthenticationError:
    start = time.monotonic()
    with pytest.raises(SslAuthenticationError) as info:
        call()
    assert time.monotonic() - start < QUICK_S
    return info.value


def _each_blocking_call(config: dict[str, object]) -> Iterator[Callable[[], object]]:
    admin = AdminClient(config)
    consumer = Consumer({**config, "auto.offset.reset": "earliest"})
    producer = Producer(config)
    try:
        consumer.assign([TP])
        yield lambda: admin.list_topics(timeout=30)
        yield lambda: consumer.list_topics(timeout=30)
        yield lambda: [consumer.poll(0.2) for _ in range(100)]
        yield lambda: producer.send(TP.topic, b"x").result(timeout=30)
    finally:
        admin.close(1)
        consumer.close(timeout=1)
        producer.close(1)


def test_a_broker_certificate_from_an_untrusted_ca_is_refused(certs: TestCerts, serve: BrokerFactory) -> None:
    broker = serve()
    config = _tls(certs, broker, **{"ssl.ca.location": str(certs.wrong_ca_cert)})
    for call in _each_blocking_call(config):
        error = _refused_quickly(call)
        assert "ssl.ca.location" in str(error) and broker.bootstrap_servers in str(error)


def _list_topics(config: dict[str, object]) -> object:
    """list_topics() with an admin client that is closed afterwards (a client left open keeps
    reconnecting on its network thread for the rest of the test run)."""
    with AdminClient(config) as admin:
        return admin.list_topics(timeout=30)


def test_a_certificate_for_another_host_is_refused_unless_the_check_is_off(
    certs: TestCerts, serve: BrokerFactory
) -> None:
    broker = serve(cert=certs.other_host_cert, key=certs.other_host_key)
    error = _refused_quickly(lambda: _list_topics(_tls(certs, broker)))
    assert "ssl.endpoint.identification.algorithm" in str(error)
    unchecked = _tls(certs, broker, **{"ssl.endpoint.identification.algorithm": "none"})
    assert _read_all(unchecked) == [b"a", b"b"]


def test_a_tls_client_at_a_plaintext_listener_is_told_so(certs: TestCerts, serve: BrokerFactory) -> None:
    broker = serve(tls=False)
    error = _refused_quickly(lambda: _list_topics(_tls(certs, broker)))
    assert "security.protocol" in str(error)


def test_a_plaintext_client_at_a_tls_listener_is_told_so(serve: BrokerFactory) -> None:
    broker = serve()
    error = _refused_quickly(lambda: _list_topics({"bootstrap.servers": broker.bootstrap_servers}))
    assert "TLS" in str(error) and "security.protocol=SSL" in str(error)
