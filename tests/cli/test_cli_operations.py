"""``kaflux configs``, ``acls``, ``users`` and ``transactions`` run as the installed executable
against Apache Kafka 4.4 (SCRAM users on Tansu too; noida-db's missing SCRAM API)."""

from __future__ import annotations

import uuid

import pytest

from kaflux import Producer
from kaflux.devbrokers import Broker

from support.cli_helpers import create_topic, json_out, ok, run_kaflux

pytestmark = pytest.mark.integration


def test_configs_alter_and_describe_a_topic(kafka: Broker, topic_name: str) -> None:
    b = ("-b", kafka.bootstrap_servers)
    create_topic(kafka.bootstrap_servers, topic_name, 1)
    altered = run_kaflux("configs", "alter", topic_name, "--set", "retention.ms=4242", *b)
    ok(altered)
    assert f"changed 1 config(s) of topic {topic_name}" in altered.stderr.decode()
    described = json_out(run_kaflux("configs", "describe", topic_name, "--format", "json", *b))
    assert {"name": "retention.ms", "value": "4242", "source": "DYNAMIC_TOPIC_CONFIG"}.items() <= next(
        d for d in described if d["name"] == "retention.ms"
    ).items()
    ok(run_kaflux("configs", "alter", topic_name, "--delete", "retention.ms", *b))
    after = json_out(run_kaflux("configs", "describe", topic_name, "--all", "--format", "json", *b))
    assert next(d for d in after if d["name"] == "retention.ms")["value"] != "4242"
    both = run_kaflux("configs", "describe", topic_name, "--broker", "1", *b)
    assert both.returncode != 0 and "one of the two" in both.stderr.decode()


def test_acls_on_a_broker_without_authorizer_is_one_clear_line(kafka: Broker) -> None:
    result = run_kaflux("acls", "list", "-b", kafka.bootstrap_servers)
    err = result.stderr.decode()
    assert result.returncode == 1 and err.count("\n") == 1
    assert "no authorizer" in err
    bad = run_kaflux("acls", "create", "--resource-type", "topic", "-b", kafka.bootstrap_servers)
    assert bad.returncode != 0 and "--resource-name" in bad.stderr.decode()
    deleted = run_kaflux("acls", "delete", "--principal", "User:alice", "-b", kafka.bootstrap_servers)
    assert deleted.returncode == 1 and "no authorizer" in deleted.stderr.decode()
    unbounded = run_kaflux("acls", "delete", "-b", kafka.bootstrap_servers)
    assert unbounded.returncode != 0 and "which ACLs" in unbounded.stderr.decode()


@pytest.mark.parametrize("kind", ["kafka", "tansu"])
def test_users_set_password_and_delete(kind: str, request: pytest.FixtureRequest) -> None:
    broker: Broker = request.getfixturevalue(kind)
    user = f"u{uuid.uuid4().hex[:8]}"
    b = ("-b", broker.bootstrap_servers)
    done = run_kaflux(
        "users", "set-password", user, "--mechanism", "SCRAM-SHA-256", *b, input=b"pw-secret-1\n"
    )
    ok(done)
    assert f"set the SCRAM-SHA-256 password of {user}" in done.stderr.decode()
    assert "pw-secret-1" not in done.stderr.decode() + done.stdout.decode()
    if kind == "kafka":  # Tansu cannot describe SCRAM users (docs/brokers.md)
        listed = run_kaflux("users", "list", *b)
        ok(listed)
        assert user in listed.stdout.decode()
    ok(run_kaflux("users", "delete", user, "--mechanism", "SCRAM-SHA-256", *b))


def test_users_list_on_noida_is_unsupported_in_one_line(noida: Broker) -> None:
    result = run_kaflux("users", "list", "-b", noida.bootstrap_servers)
    err = result.stderr.decode()
    assert result.returncode == 1 and err.count("\n") == 1
    assert "DESCRIBE_USER_SCRAM_CREDENTIALS" in err


def test_transactions_list_describe_and_abort(kafka: Broker, topic_name: str) -> None:
    b = ("-b", kafka.bootstrap_servers)
    tid = f"tx-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": tid})
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic_name, b"x").result(15)
        listed = json_out(run_kaflux("transactions", "list", "--format", "json", *b))
        assert tid in [t["transactional_id"] for t in listed]
        [described] = json_out(run_kaflux("transactions", "describe", tid, "--format", "json", *b))
        assert described["state"] == "Ongoing" and f"{topic_name}-0" in described["partitions"]
        aborted = run_kaflux("transactions", "abort", tid, *b)
        ok(aborted)
        assert f"fenced {tid}" in aborted.stderr.decode()
    finally:
        producer.close(5)
