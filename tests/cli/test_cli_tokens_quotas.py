"""``kaflux tokens`` and ``kaflux quotas`` against Apache Kafka 4.4 with SCRAM users and a
delegation-token secret. [test]"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kaflux.devbrokers.apache_kafka import KafkaBroker, KafkaSecurity
from kaflux.devbrokers.brokers import BrokerUnavailableError

from support.cli_helpers import json_out, ok, run_kaflux

pytestmark = pytest.mark.integration

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule required"


@pytest.fixture(scope="module")
def secured() -> Iterator[KafkaBroker]:
    security = KafkaSecurity(scram_users={"alice": "alice-secret"})
    try:
        broker = KafkaBroker(security=security, config={"delegation.token.secret.key": "cli-token-secret"})
        broker.start(timeout=180)
    except BrokerUnavailableError as e:
        pytest.skip(f"Apache Kafka is not available: {e}")
    try:
        yield broker
    finally:
        broker.stop()
        broker.cleanup()


def test_tokens_and_quotas_commands(secured: KafkaBroker, tmp_path: Path) -> None:
    props = tmp_path / "alice.properties"
    props.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
        f'sasl.jaas.config={SCRAM} username="alice" password="alice-secret";\n'
    )
    b = ("-b", secured.listener("SASL_PLAINTEXT"), "--config", str(props))
    created = json.loads(ok(run_kaflux("tokens", "create", "--max-lifetime", "3600", *b)))
    assert created["owner"] == "User:alice" and 'tokenauth="true"' in created["sasl_jaas_config"]
    deadline = time.monotonic() + 60
    while created["token_id"] not in {t["token_id"] for t in json_out(run_kaflux("tokens", "describe", *b))}:
        assert time.monotonic() < deadline, "the token was not listed"
        time.sleep(0.3)
    assert int(ok(run_kaflux("tokens", "renew", created["hmac"], "--period", "600", *b))) > 0
    assert int(ok(run_kaflux("tokens", "expire", created["hmac"], *b))) > 0

    plain = ("-b", secured.bootstrap_servers)
    client = f"cli-quota-{uuid.uuid4().hex[:6]}"
    ok(run_kaflux("quotas", "alter", "--client-id", client, "--set", "producer_byte_rate=4096", *plain))
    deadline = time.monotonic() + 60
    while True:
        shown = json_out(run_kaflux("quotas", "describe", "--client-id", client, "--format", "json", *plain))
        if shown:
            break
        assert time.monotonic() < deadline, "the quota was not shown"
        time.sleep(0.3)
    assert shown == [{"entity": {"client-id": client}, "quotas": {"producer_byte_rate": 4096.0}}]
    bad = run_kaflux("quotas", "alter", "--client-id", client, "--set", "producer_byte_rate=lots", *plain)
    assert bad.returncode == 2 and "KEY=NUMBER" in bad.stderr.decode()
    ok(run_kaflux("quotas", "alter", "--client-id", client, "--delete", "producer_byte_rate", *plain))
