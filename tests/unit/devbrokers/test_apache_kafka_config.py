"""kaflux.devbrokers.apache_kafka without a JVM: jar look-up, cluster ids, server.properties."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from kaflux.devbrokers import apache_kafka
from kaflux.devbrokers.apache_kafka import KafkaBroker, KafkaSecurity, kafka_classpath
from kaflux.devbrokers.brokers import BrokerUnavailableError


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A directory shaped like an unpacked Kafka distribution (the jars are never run here)."""
    (tmp_path / "kafka" / "libs").mkdir(parents=True)
    (tmp_path / "kafka" / "libs" / "kafka_2.13-4.4.0.jar").write_bytes(b"")
    return tmp_path / "kafka"


def test_a_cluster_id_never_starts_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    # 0xF8 encodes to "-" first in URL-safe base64: kafka-storage would take "-t -x..." for an option.
    ids = iter([uuid.UUID(bytes=b"\xf8" + b"\x00" * 15), uuid.UUID(bytes=b"\x10" * 16)])
    monkeypatch.setattr(uuid, "uuid4", lambda: next(ids))
    cluster_id = apache_kafka._new_cluster_id()
    assert cluster_id == "EBAQEBAQEBAQEBAQEBAQEA" and len(cluster_id) == 22


def test_without_jars_the_error_says_how_to_get_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFLUX_KAFKA_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("KAFLUX_KAFKA_HOME", raising=False)
    with pytest.raises(BrokerUnavailableError, match=r"python -m kaflux.devbrokers resolve 4\.4\.0") as e:
        kafka_classpath("4.4.0")
    assert "--kafka-home" in str(e.value)


def test_a_cache_with_a_missing_jar_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFLUX_KAFKA_CACHE", str(tmp_path))
    monkeypatch.delenv("KAFLUX_KAFKA_HOME", raising=False)
    (tmp_path / "4.4.0").mkdir()
    (tmp_path / "4.4.0" / "classpath.txt").write_text(str(tmp_path / "gone.jar"))
    with pytest.raises(BrokerUnavailableError):
        kafka_classpath("4.4.0")


def test_a_single_node_is_a_combined_kraft_node_with_one_replica(home: Path, tmp_path: Path) -> None:
    broker = KafkaBroker(kafka_home=home, workdir=tmp_path / "w", port=9999, controller_port=9998)
    props = broker.server_properties(9999)
    assert props["process.roles"] == "broker,controller"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:9998"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:9999,CONTROLLER://127.0.0.1:9998"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9999"
    assert props["offsets.topic.replication.factor"] == "1"
    assert "broker.rack" not in props and "authorizer.class.name" not in props
    assert broker.classpath == [str(home / "libs" / "kafka_2.13-4.4.0.jar")]


def test_security_adds_listeners_scram_and_the_authorizer(home: Path, tmp_path: Path) -> None:
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    security = KafkaSecurity(
        scram_users={"admin": "s"}, ssl_certificate=str(cert), ssl_key=str(key), authorizer=True
    )
    broker = KafkaBroker(kafka_home=home, workdir=tmp_path / "w", port=1, security=security, rack="r2")
    props = broker.server_properties(1)
    protocols = dict(kv.split(":") for kv in props["listener.security.protocol.map"].split(","))
    assert protocols == {
        "CONTROLLER": "PLAINTEXT",
        "PLAINTEXT": "PLAINTEXT",
        "SASL_PLAINTEXT": "SASL_PLAINTEXT",
        "SSL": "SSL",
        "SASL_SSL": "SASL_SSL",
    }
    for name in ("SASL_PLAINTEXT", "SSL", "SASL_SSL"):
        assert f"{name}://{broker.listener(name)}" in props["advertised.listeners"]
    assert props["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"].endswith("required ;")
    assert props["super.users"] == "User:ANONYMOUS;User:admin"
    assert props["allow.everyone.if.no.acl.found"] == "false"
    assert props["broker.rack"] == "r2" and "RackAware" in props["replica.selector.class"]
    with pytest.raises(ValueError, match="has no GSSAPI listener"):
        broker.listener("GSSAPI")


def test_a_cluster_shares_one_quorum_and_sets_a_rack_per_node(home: Path, tmp_path: Path) -> None:
    cluster = apache_kafka.KafkaCluster(3, kafka_home=home, workdir=tmp_path)
    voters = {n.server_properties(n.port)["controller.quorum.voters"] for n in cluster.nodes}
    assert len(voters) == 1 and voters.pop().count("@127.0.0.1:") == 3
    assert [n.server_properties(n.port)["broker.rack"] for n in cluster.nodes] == [
        "rack-1",
        "rack-2",
        "rack-3",
    ]
    props = cluster.node(2).server_properties(cluster.node(2).port)
    assert props["node.id"] == "2" and props["offsets.topic.replication.factor"] == "3"
    assert props["transaction.state.log.min.isr"] == "2"
    assert cluster.bootstrap_servers.count(",") == 2
