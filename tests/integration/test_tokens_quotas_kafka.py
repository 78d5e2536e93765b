"""Delegation tokens (KIP-48) and client quotas (KIP-546) on Apache Kafka 4.4 with SCRAM users and
a delegation-token secret: create, describe, renew and expire a token; a client logs in with it
over SCRAM (``tokenauth="true"``) and is refused with a clear error once it expired; a produce
quota's throttling shows in the producer's ``produce-throttle-time-avg``. [test]"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest

from kaflux import AdminClient, Producer
from kaflux.admin import ClientQuotaAlteration, ClientQuotaEntity, ClientQuotaFilterComponent, NewTopic
from kaflux.devbrokers.apache_kafka import KafkaBroker, KafkaSecurity
from kaflux.devbrokers.brokers import BrokerUnavailableError
from kaflux.errors import AuthenticationError

pytestmark = pytest.mark.integration

WAIT_S = 60.0
T = TypeVar("T")
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule required"


@pytest.fixture(scope="module")
def secured() -> Iterator[KafkaBroker]:
    security = KafkaSecurity(scram_users={"admin": "admin-secret", "alice": "alice-secret"})
    config = {
        "delegation.token.secret.key": "kaflux-test-token-secret",
        "delegation.token.expiry.time.ms": 60_000,
    }
    try:
        broker = KafkaBroker(security=security, config=config)
        broker.start(timeout=180)
    except BrokerUnavailableError as e:
        pytest.skip(f"Apache Kafka is not available: {e}")
    try:
        yield broker
    finally:
        broker.stop()
        broker.cleanup()


def _eventually(what: str, check: Callable[[], T]) -> T:
    """``check()`` once it is truthy: the controller's change reaches the broker's cache soon after."""
    deadline = time.monotonic() + WAIT_S
    while not (value := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)
    return value


def _scram(broker: KafkaBroker, user: str, password: str, **extra: object) -> dict[str, object]:
    return {
        "bootstrap.servers": broker.listener("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": f'{SCRAM} username="{user}" password="{password}";',
        **extra,
    }


def test_delegation_token_life(secured: KafkaBroker) -> None:
    with AdminClient(_scram(secured, "alice", "alice-secret")) as alice:
        token = alice.create_delegation_token(renewers=["User:admin"], timeout=WAIT_S)
        info = token.token_info
        assert info.owner == "User:alice" and info.token_requester == "User:alice"
        assert info.renewers == ("User:admin",)
        assert info.issue_timestamp_ms < info.expiry_timestamp_ms <= info.max_timestamp_ms
        listed = _eventually(
            "the token to be listed", lambda: alice.describe_delegation_tokens(["User:alice"], timeout=WAIT_S)
        )
        assert [t.token_info.token_id for t in listed] == [info.token_id]
        assert listed[0].hmac == token.hmac

        # a client logs in with the token: SCRAM with tokenauth=true, token id and base64 HMAC
        with AdminClient(
            {**_scram(secured, "x", "y"), "sasl.jaas.config": token.jaas_config(), "client.id": "by-token"}
        ) as by_token:
            assert by_token.describe_cluster(timeout=WAIT_S).nodes

        with AdminClient(_scram(secured, "admin", "admin-secret")) as admin:
            renewed = admin.renew_delegation_token(token.hmac, renew_period=30, timeout=WAIT_S)
        assert renewed > info.issue_timestamp_ms

        expired_at = alice.expire_delegation_token(token.hmac, timeout=WAIT_S)
        assert expired_at <= int(time.time() * 1000) + 1000

    def login_refused() -> AuthenticationError | None:
        config = {**_scram(secured, "x", "y"), "sasl.jaas.config": token.jaas_config()}
        with AdminClient({**config, "default.api.timeout.ms": 10_000}) as late:
            try:
                late.describe_cluster(timeout=10)
            except AuthenticationError as error:
                return error
        return None  # the broker has not applied the expiry yet

    refused = _eventually("the expired token's login to be refused", login_refused)
    print(f"\nan expired token's login: {refused}")
    assert "with a delegation token" in str(refused) and "may have expired" in str(refused)


def test_a_produce_quota_throttles_and_shows_in_the_metrics(secured: KafkaBroker) -> None:
    client_id = f"quota-{uuid.uuid4().hex[:6]}"
    entity = ClientQuotaEntity({"client-id": client_id})
    topic = f"quota-{uuid.uuid4().hex[:6]}"
    plain = {"bootstrap.servers": secured.bootstrap_servers}
    with AdminClient(plain) as admin:
        admin.create_topics([NewTopic(topic, 1)], timeout=WAIT_S)
        admin.alter_client_quotas(
            [ClientQuotaAlteration(entity, {"producer_byte_rate": 20_000})], timeout=WAIT_S
        )
        only = [ClientQuotaFilterComponent.of_entity("client-id", client_id)]
        found = _eventually("the quota", lambda: admin.describe_client_quotas(only, timeout=WAIT_S))
        assert found == {entity: {"producer_byte_rate": 20_000.0}}
    try:
        with Producer({**plain, "client.id": client_id, "linger.ms": 5}) as producer:
            value = b"q" * 10_000
            for _ in range(40):  # 400 kB at 20 kB/s: the broker throttles
                producer.send(topic, value)
            producer.flush(WAIT_S * 2)
            metrics = producer.metrics()
        throttle = metrics["producer-metrics"]["produce-throttle-time-avg"]
        print(
            f"\nproduce-throttle-time-avg {throttle:.0f} ms, "
            f"max {metrics['producer-metrics']['produce-throttle-time-max']:.0f} ms"
        )
        assert throttle > 0
    finally:
        with AdminClient(plain) as admin:
            admin.alter_client_quotas(
                [ClientQuotaAlteration(entity, {"producer_byte_rate": None})], timeout=WAIT_S
            )
            # the broker answers from its metadata cache, which the removal reaches soon after
            _eventually(
                "the quota to be removed", lambda: admin.describe_client_quotas(only, timeout=WAIT_S) == {}
            )
