"""The admin calls the stand-ins cannot show, each working end to end on Apache Kafka 4.4.

- SCRAM users made with ``alter_user_scram_credentials`` then log in over SASL_PLAINTEXT, and
  over SASL_SSL to Kafka's own TLS listener (a client not trusting its certificate is refused);
  ACLs made with ``create_acls`` authorize a produce, and without one the produce and the group
  join fail with ``TopicAuthorizationFailedError`` / ``GroupAuthorizationFailedError`` naming the
  topic or the group (one node with the ``StandardAuthorizer``; the plain listener's ANONYMOUS is
  a super user, so the set-up needs no credentials).
- ``abort_transaction`` ends a hanging transaction: the last stable offset moves past it.
- On a 3-node cluster (racks, one module-scoped cluster for these tests): a reassignment moves a
  replica to the node that had none, and ``elect_leaders`` makes the preferred replica the leader.

``describe_producers`` and ``remove_members_from_consumer_group`` (with FENCED_INSTANCE_ID) run on
Kafka in test_admin_producers.py and test_admin_remove_members.py.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest

from kaflux import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from kaflux.admin import (
    AbortTransactionSpec,
    AclBinding,
    AclBindingFilter,
    OffsetSpec,
    UserScramCredentialUpsertion,
)
from kaflux.devbrokers.apache_kafka import KafkaBroker, KafkaCluster, KafkaSecurity
from kaflux.devbrokers.brokers import Broker, BrokerUnavailableError
from kaflux.errors import (
    ElectionNotNeededError,
    GroupAuthorizationFailedError,
    SaslAuthenticationFailedError,
    SslAuthenticationError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)

from support.certs import TestCerts

pytestmark = pytest.mark.integration

WAIT_S = 30.0
_START_S = 180.0

T = TypeVar("T")


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = WAIT_S) -> T:
    """``probe()``'s first answer that is not None, polled until ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found is not None:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(0.1)


# --- SCRAM users and ACLs: one node with SASL_PLAINTEXT and the StandardAuthorizer ------------------------


@pytest.fixture(scope="module")
def secure_kafka(certs: TestCerts) -> Iterator[KafkaBroker]:
    """SCRAM users, the authorizer and TLS: SASL_PLAINTEXT, SSL and SASL_SSL listeners."""
    security = KafkaSecurity(
        scram_users={"admin": "admin-secret"},
        authorizer=True,
        ssl_certificate=str(certs.server_cert),
        ssl_key=str(certs.server_key),
    )
    try:
        broker = KafkaBroker(security=security)
        broker.start(_START_S)
    except BrokerUnavailableError as e:
        pytest.skip(f"Apache Kafka not available (Java 17 and the Kafka jars are needed): {e}")
    try:
        yield broker
    finally:
        broker.kill()  # throw-away data: no graceful shutdown to wait for
        broker.cleanup()


def _new_user(admin: AdminClient) -> tuple[str, str]:
    user, password = f"u{uuid.uuid4().hex[:8]}", "pw-" + uuid.uuid4().hex
    admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(user, "SCRAM-SHA-256", password)], timeout=WAIT_S
    )
    return user, password


def _as(broker: KafkaBroker, user: str, password: str) -> dict[str, object]:
    return {
        "bootstrap.servers": broker.listener("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": password,
    }


def test_a_user_made_with_alter_user_scram_credentials_logs_in(
    secure_kafka: KafkaBroker, topic_name: str
) -> None:
    with AdminClient({"bootstrap.servers": secure_kafka.bootstrap_servers}) as admin:
        user, password = _new_user(admin)
        described = admin.describe_user_scram_credentials([user], timeout=WAIT_S)
        assert [c.mechanism.label for c in described[user].credential_infos] == ["SCRAM-SHA-256"]
        admin.create_topics([NewTopic(topic_name, 1)], timeout=WAIT_S)
        admin.create_acls(
            [AclBinding("topic", topic_name, "literal", f"User:{user}", "*", "describe", "allow")],
            timeout=WAIT_S,
        )
    # The new user logs in and sees the topic it may describe (the broker's SCRAM exchange, real).
    with AdminClient(_as(secure_kafka, user, password)) as as_user:

        def listed() -> bool | None:
            return True if topic_name in as_user.list_topics(timeout=WAIT_S) else None

        wait_for(f"{user} sees {topic_name}", listed)
    # A wrong password is refused by the broker, named as an authentication failure.
    with AdminClient(_as(secure_kafka, user, "wrong")) as wrong:
        with pytest.raises(SaslAuthenticationFailedError):
            wrong.list_topics(timeout=WAIT_S)


def test_a_scram_user_produces_and_consumes_over_sasl_ssl(
    secure_kafka: KafkaBroker, certs: TestCerts, topic_name: str
) -> None:
    """TLS to Kafka's own listener (no stunnel in between), SCRAM-SHA-512 inside it."""
    with AdminClient({"bootstrap.servers": secure_kafka.bootstrap_servers}) as admin:
        user, password = f"u{uuid.uuid4().hex[:8]}", "pw-" + uuid.uuid4().hex
        admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion(user, "SCRAM-SHA-512", password)], timeout=WAIT_S
        )
        admin.create_topics([NewTopic(topic_name, 1)], timeout=WAIT_S)
        bindings = [
            AclBinding("topic", topic_name, "literal", f"User:{user}", "*", op, "allow")
            for op in ("write", "read")
        ]
        admin.create_acls(bindings, timeout=WAIT_S)
        wait_for(
            "the ACLs on the broker",
            lambda: (
                True
                if len(admin.describe_acls(AclBindingFilter.of(bindings[1]), timeout=WAIT_S)) == 1
                else None
            ),
        )
    config: dict[str, object] = {
        "bootstrap.servers": secure_kafka.listener("SASL_SSL"),
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(certs.ca_cert),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": user,
        "sasl.password": password,
    }
    tp = TopicPartition(topic_name, 0)
    with Producer({**config, "enable.idempotence": False}) as producer:
        offsets = [
            producer.send(topic_name, b"tls-%d" % i, partition=0).result(WAIT_S).offset for i in range(3)
        ]
    assert offsets == [0, 1, 2]
    with Consumer(config) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        values: list[bytes | None] = []

        def three() -> bool | None:
            values.extend(r.value for r in consumer.poll(0.2))
            return True if len(values) >= 3 else None

        wait_for("three records", three)
    assert values == [b"tls-0", b"tls-1", b"tls-2"]


def test_a_tls_client_that_does_not_trust_kafkas_certificate_is_refused(
    secure_kafka: KafkaBroker, certs: TestCerts
) -> None:
    config = {
        "bootstrap.servers": secure_kafka.listener("SSL"),
        "security.protocol": "SSL",
        "ssl.ca.location": str(certs.wrong_ca_cert),
    }
    with AdminClient(config) as admin, pytest.raises(SslAuthenticationError):
        admin.list_topics(timeout=10)
    trusted = {**config, "ssl.ca.location": str(certs.ca_cert)}
    with AdminClient(trusted) as admin:
        assert admin.list_topics(timeout=WAIT_S) is not None  # the SSL listener itself works


def test_an_acl_authorizes_a_produce_and_its_absence_names_the_topic(
    secure_kafka: KafkaBroker, topic_name: str
) -> None:
    allowed, denied = f"{topic_name}-ok", f"{topic_name}-no"
    with AdminClient({"bootstrap.servers": secure_kafka.bootstrap_servers}) as admin:
        user, password = _new_user(admin)
        admin.create_topics([NewTopic(allowed, 1), NewTopic(denied, 1)], timeout=WAIT_S)
        write = AclBinding("topic", allowed, "literal", f"User:{user}", "*", "write", "allow")
        admin.create_acls([write], timeout=WAIT_S)
        # CreateAcls answers once the controller has the ACL; the broker's authorizer has it a
        # moment later, when DescribeAcls (answered by that broker) lists it.
        wait_for(
            "the ACL on the broker",
            lambda: (
                True if write in admin.describe_acls(AclBindingFilter.of(write), timeout=WAIT_S) else None
            ),
        )
    config = {
        **_as(secure_kafka, user, password),
        "enable.idempotence": False,
        "delivery.timeout.ms": 20_000,
        "request.timeout.ms": 10_000,
    }
    with Producer(config) as producer:
        metadata = producer.send(allowed, b"authorized", partition=0).result(WAIT_S)
        assert metadata.offset == 0
        with pytest.raises(TopicAuthorizationFailedError, match=denied):
            producer.send(denied, b"not authorized", partition=0).result(WAIT_S)


def test_a_group_without_an_acl_is_refused_naming_the_group(
    secure_kafka: KafkaBroker, topic_name: str
) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    with AdminClient({"bootstrap.servers": secure_kafka.bootstrap_servers}) as admin:
        user, password = _new_user(admin)
        admin.create_topics([NewTopic(topic_name, 1)], timeout=WAIT_S)
        admin.create_acls(
            [AclBinding("topic", topic_name, "literal", f"User:{user}", "*", "read", "allow")], timeout=WAIT_S
        )
    consumer = Consumer({**_as(secure_kafka, user, password), "group.id": group})
    try:
        consumer.subscribe([topic_name])
        with pytest.raises(GroupAuthorizationFailedError, match=group):
            deadline = time.monotonic() + WAIT_S
            while time.monotonic() < deadline:
                consumer.poll(0.5)
    finally:
        consumer.close(5)


# --- a hanging transaction, aborted ----------------------------------------------------------------------


def test_abort_transaction_ends_a_hanging_transaction(kafka: Broker, topic_name: str) -> None:
    bootstrap = kafka.bootstrap_servers
    tp = TopicPartition(topic_name, 0)
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic_name, 1)], timeout=WAIT_S)
        hanging = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic_name}-txn"})
        try:
            hanging.init_transactions(WAIT_S)
            hanging.begin_transaction()
            for i in range(3):
                hanging.send(topic_name, b"open-%d" % i, partition=0)
            hanging.flush(WAIT_S)
            [state] = admin.describe_producers([tp], timeout=WAIT_S)[tp]
            assert state.current_transaction_start_offset == 0
            stable = admin.list_offsets({tp: OffsetSpec.latest()}, isolation_level="read_committed")
            assert stable[tp].offset == 0  # the open transaction holds the last stable offset back

            spec = AbortTransactionSpec(
                tp, state.producer_id, state.producer_epoch, state.coordinator_epoch or 0
            )
            admin.abort_transaction(spec, timeout=WAIT_S)

            [after] = admin.describe_producers([tp], timeout=WAIT_S)[tp]
            assert after.current_transaction_start_offset is None
            latest = admin.list_offsets({tp: OffsetSpec.latest()}, timeout=WAIT_S)[tp].offset
            assert latest == 4  # three records and the abort marker
            stable = admin.list_offsets({tp: OffsetSpec.latest()}, isolation_level="read_committed")
            assert stable[tp].offset == latest
            # A read_committed consumer reads nothing of the aborted transaction and does not wait
            # on it. (Checked before the producer closes: its close aborts again, a second marker.)
            with Consumer({"bootstrap.servers": bootstrap, "isolation.level": "read_committed"}) as consumer:
                consumer.assign([tp])
                consumer.seek(tp, 0)
                seen: list[bytes | None] = []

                def past_the_marker() -> bool | None:
                    seen.extend(r.value for r in consumer.poll(0.2))
                    return True if consumer.position(tp) == 4 else None

                wait_for("the consumer past the abort marker", past_the_marker)
                assert seen == []
        finally:
            hanging.close(0)


# --- reassignment and leader election on three nodes ------------------------------------------------------


@pytest.fixture(scope="module")
def kafka_cluster() -> Iterator[KafkaCluster]:
    try:
        cluster = KafkaCluster(3)
    except BrokerUnavailableError as e:
        pytest.skip(f"Apache Kafka not available (Java 17 and the Kafka jars are needed): {e}")
    try:
        cluster.start(_START_S)
        yield cluster
    finally:
        for node in cluster.nodes:  # throw-away data: a graceful shutdown of three nodes takes ~15 s
            node.kill()
        cluster.cleanup()


def _partition(admin: AdminClient, tp: TopicPartition) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """(leader, replicas, isr) of ``tp``."""
    [p] = [
        p
        for p in admin.describe_topics([tp.topic], timeout=WAIT_S)[tp.topic].partitions
        if p.partition == tp.partition
    ]
    return p.leader, tuple(p.replicas), tuple(p.isr)


def _reassigned(admin: AdminClient, tp: TopicPartition, replicas: list[int]) -> None:
    assert admin.alter_partition_reassignments({tp: replicas}, timeout=WAIT_S) == {tp: None}

    def done() -> bool | None:
        _, now, isr = _partition(admin, tp)
        moving = admin.list_partition_reassignments([tp], timeout=WAIT_S)
        return True if not moving and now == tuple(replicas) and set(isr) == set(replicas) else None

    wait_for(f"{tp} on {replicas}", done)


def test_a_reassignment_moves_a_replica_and_elect_leaders_makes_the_preferred_one_lead(
    kafka_cluster: KafkaCluster, topic_name: str
) -> None:
    tp = TopicPartition(topic_name, 0)
    with AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(topic_name, 1, replication_factor=2)], timeout=WAIT_S)

        # A node other than the controller may not know the new topic yet (Kafka's metadata
        # reaches each broker a moment after CreateTopics answers): wait until one that is asked
        # names a leader.
        def led() -> tuple[int, tuple[int, ...], tuple[int, ...]] | None:
            try:
                found = _partition(admin, tp)
            except UnknownTopicOrPartitionError:
                return None
            return found if found[0] >= 0 else None

        wait_for("a leader", led)
        with Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "acks": "all"}) as producer:
            for i in range(5):
                producer.send(topic_name, b"r-%d" % i, partition=0)
            producer.flush(WAIT_S)
        leader, replicas, _ = _partition(admin, tp)
        [spare] = {1, 2, 3} - set(replicas)
        [kept] = set(replicas) - {leader}

        # Move the leader's replica to the node that had none.
        _reassigned(admin, tp, [kept, spare])
        assert _partition(admin, tp)[0] == kept
        assert TopicPartition(topic_name, 0) in {
            r for d in admin.describe_log_dirs([spare], timeout=WAIT_S)[spare].values() for r in d.replicas
        }
        # Already led by its preferred replica: nothing to elect.
        assert isinstance(admin.elect_leaders("preferred", [tp], timeout=WAIT_S)[tp], ElectionNotNeededError)

        # Make `spare` the preferred replica; the leader stays until elect_leaders moves it.
        _reassigned(admin, tp, [spare, kept])
        assert _partition(admin, tp)[0] == kept
        assert admin.elect_leaders("preferred", [tp], timeout=WAIT_S) == {tp: None}
        wait_for(f"{spare} leads {tp}", lambda: True if _partition(admin, tp)[0] == spare else None)
    # The records moved with the replica: the new leader serves all five.
    with Consumer({"bootstrap.servers": kafka_cluster.bootstrap_servers}) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        values: list[bytes] = []
        deadline = time.monotonic() + WAIT_S
        while len(values) < 5 and time.monotonic() < deadline:
            values += [r.value for r in consumer.poll(0.5) if r.value is not None]
    assert values == [b"r-%d" % i for i in range(5)]
