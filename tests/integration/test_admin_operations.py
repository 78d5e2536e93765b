"""AdminClient's operations calls on real brokers, confirmed with confluent-kafka where it can
read the same thing: configs described, altered and read back on Apache Kafka, noida-db and Tansu;
ACL calls on Kafka and noida-db without an authorizer (SECURITY_DISABLED) and on Tansu; SCRAM
credentials on Tansu; offset deletion on Kafka and noida-db (Tansu lacks OffsetDelete: the
unsupported path); transactions on Kafka and noida-db. The calls only Kafka offers, and ACLs
and SCRAM users that take effect, are in test_admin_on_kafka.py. Broker defects are strict xfails,
each shown with confluent-kafka doing the same.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kaflux import AdminClient, Producer, TopicPartition
from kaflux.admin import (
    AbortTransactionSpec,
    AclBinding,
    AclBindingFilter,
    AlterConfigOp,
    ConfigResource,
    ConfigSource,
    UserScramCredentialUpsertion,
)
from kaflux.devbrokers.brokers import Broker
from kaflux.errors import (
    KafkaTimeoutError,
    MalformedResponseError,
    ProducerFencedError,
    SecurityDisabledError,
    UnsupportedSaslMechanismError,
    UnsupportedVersionError,
)

ck = pytest.importorskip("confluent_kafka")
ck_admin = pytest.importorskip("confluent_kafka.admin")

pytestmark = pytest.mark.integration

WAIT_S = 15.0


@pytest.fixture
def admin(broker: Broker) -> Iterator[AdminClient]:
    client = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    try:
        yield client
    finally:
        client.close()


def _ck(broker: Broker) -> Any:
    return ck_admin.AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def _ck_alice_reads_orders() -> Any:
    """confluent-kafka's AclBinding("topic", "orders", "literal", "User:alice", "*", "read", "allow")."""
    return ck_admin.AclBinding(
        ck_admin.ResourceType.TOPIC,
        "orders",
        ck_admin.ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        ck_admin.AclOperation.READ,
        ck_admin.AclPermissionType.ALLOW,
    )


def test_topic_configs_are_altered_and_read_back(broker: Broker, admin: AdminClient, topic_name: str) -> None:
    admin.create_topics([topic_name])
    topic = ConfigResource("topic", topic_name)
    admin.incremental_alter_configs({topic: [AlterConfigOp("retention.ms", "123456", "set")]})
    entries = admin.describe_configs([topic])[topic]
    assert entries["retention.ms"].value == "123456"
    # confluent-kafka reads the same value back
    peer = _ck(broker)  # kept: its futures fail once the client is collected
    [future] = peer.describe_configs([ck_admin.ConfigResource("topic", topic_name)]).values()
    assert future.result(WAIT_S)["retention.ms"].value == "123456"


TANSU_VALIDATE_ONLY_DEFECT = "Tansu applies an IncrementalAlterConfigs sent with validate_only"
TANSU_CONFIG_NAMES_DEFECT = "Tansu drops the connection when DescribeConfigs names the configs it wants"


@pytest.mark.broker_defect("tansu", TANSU_VALIDATE_ONLY_DEFECT, raises=AssertionError)
def test_validate_only_changes_nothing(broker: Broker, admin: AdminClient, topic_name: str) -> None:
    admin.create_topics([topic_name])
    topic = ConfigResource("topic", topic_name)
    admin.incremental_alter_configs({topic: [AlterConfigOp("retention.ms", "123456", "set")]})
    _wait_applied(admin, topic, "retention.ms", "123456")
    admin.incremental_alter_configs(
        {topic: [AlterConfigOp("retention.ms", "999", "set")]}, validate_only=True
    )
    # A later real change, once visible, shows that everything before it was applied (Kafka applies
    # config changes in order, on each broker a moment after the controller answers).
    admin.incremental_alter_configs({topic: [AlterConfigOp("segment.ms", "7654321", "set")]})
    _wait_applied(admin, topic, "segment.ms", "7654321")
    assert admin.describe_configs([topic])[topic]["retention.ms"].value == "123456"


def _wait_applied(admin: AdminClient, topic: ConfigResource, name: str, value: str) -> None:
    """Wait until ``describe_configs`` shows ``name`` = ``value`` (fails after WAIT_S)."""
    deadline = time.monotonic() + WAIT_S
    while admin.describe_configs([topic])[topic][name].value != value:
        assert time.monotonic() < deadline, f"{name}={value} not applied within {WAIT_S} s"
        time.sleep(0.1)


@pytest.mark.broker_defect("tansu", TANSU_CONFIG_NAMES_DEFECT, raises=KafkaTimeoutError)
def test_only_the_named_configs_are_described(broker: Broker, admin: AdminClient, topic_name: str) -> None:
    admin.create_topics([topic_name])
    topic = ConfigResource("topic", topic_name)
    entries = admin.describe_configs([topic], names=["retention.ms"], timeout=5)[topic]
    assert list(entries) == ["retention.ms"]


def test_confluent_kafka_meets_the_same_tansu_config_defects(tansu: Broker, topic_name: str) -> None:
    """The proof for the two defects above, with librdkafka's client: a validate_only change is
    applied, and naming a config gets no answer."""
    peer = _ck(tansu)
    peer.create_topics([ck_admin.NewTopic(topic_name, 1, 1)])[topic_name].result(WAIT_S)
    change = ck_admin.ConfigEntry("retention.ms", "999", incremental_operation=ck_admin.AlterConfigOpType.SET)
    resource = ck_admin.ConfigResource("topic", topic_name, incremental_configs=[change])
    [done] = peer.incremental_alter_configs([resource], validate_only=True).values()
    done.result(WAIT_S)
    [future] = peer.describe_configs([ck_admin.ConfigResource("topic", topic_name)]).values()
    assert future.result(WAIT_S)["retention.ms"].value == "999"


@pytest.mark.parametrize("broker", ["kafka", "noida"], indirect=True)
def test_the_broker_reports_where_each_topic_config_comes_from(broker: Broker, topic_name: str) -> None:
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        admin.create_topics([topic_name])
        topic = ConfigResource("topic", topic_name)
        admin.incremental_alter_configs({topic: [AlterConfigOp("retention.ms", "60000")]})
        entries = admin.describe_configs([topic])[topic]
        assert entries["retention.ms"].source is ConfigSource.DYNAMIC_TOPIC_CONFIG
        defaults = [e for e in entries.values() if e.name != "retention.ms"]
        assert defaults and all(e.source is not ConfigSource.DYNAMIC_TOPIC_CONFIG for e in defaults)
        admin.incremental_alter_configs({topic: [AlterConfigOp("retention.ms", None, "delete")]})
        after = admin.describe_configs([topic], names=["retention.ms"])[topic]["retention.ms"]
        assert after.source is not ConfigSource.DYNAMIC_TOPIC_CONFIG and after.value != "60000"


@pytest.mark.parametrize("broker", ["kafka", "noida"], indirect=True)
def test_acls_on_a_broker_without_authorizer_say_so(broker: Broker) -> None:
    binding = AclBinding("topic", "orders", "literal", "User:alice", "*", "read", "allow")
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        for call in (
            lambda: admin.create_acls([binding]),
            lambda: admin.describe_acls(AclBindingFilter.any()),
            lambda: admin.delete_acls([AclBindingFilter.of(binding)]),
        ):
            with pytest.raises(SecurityDisabledError, match="no authorizer"):
                call()
    # confluent-kafka gets the same answer from noida for CreateAcls
    ck_binding = _ck_alice_reads_orders()
    peer = _ck(broker)
    [future] = peer.create_acls([ck_binding]).values()
    with pytest.raises(ck.KafkaException, match=r"(?i)authorizer|security"):
        future.result(WAIT_S)


def test_a_malformed_answer_fails_the_call_at_once(tansu: Broker) -> None:
    """Tansu answers CreateAcls with a null ``results`` array, which no client can read: the
    call fails at once with MalformedResponseError naming the API and the broker, instead of
    retrying to its deadline (60 s here) for an answer that would be the same."""
    binding = AclBinding("topic", "orders", "literal", "User:alice", "*", "read", "allow")
    with AdminClient({"bootstrap.servers": tansu.bootstrap_servers}) as admin:
        started = time.monotonic()
        with pytest.raises(MalformedResponseError, match=r"CREATE_ACLS v\d+ response could not be decoded"):
            admin.create_acls([binding])
        assert time.monotonic() - started < 5.0
        assert admin.list_topics(timeout=WAIT_S) is not None  # the client carries on
    # confluent-kafka cannot read that answer either
    ck_binding = _ck_alice_reads_orders()
    [future] = _ck(tansu).create_acls([ck_binding], request_timeout=5).values()
    with pytest.raises(ck.KafkaException):
        future.result(WAIT_S)


def test_scram_credentials_are_created_on_tansu(tansu: Broker) -> None:
    user = f"u{uuid.uuid4().hex[:8]}"
    with AdminClient({"bootstrap.servers": tansu.bootstrap_servers}) as admin:
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(user, "SCRAM-SHA-256", "pw-1234")])


TANSU_SCRAM_DESCRIBE_DEFECT = (
    "Tansu answers DescribeUserScramCredentials with a null results array, which the spec does not allow"
)


@pytest.mark.xfail(strict=True, raises=MalformedResponseError, reason=TANSU_SCRAM_DESCRIBE_DEFECT)
def test_scram_credentials_are_described_on_tansu(tansu: Broker) -> None:
    user = f"u{uuid.uuid4().hex[:8]}"
    with AdminClient({"bootstrap.servers": tansu.bootstrap_servers}) as admin:
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(user, "SCRAM-SHA-512", "pw-1234")])
        described = admin.describe_user_scram_credentials([user], timeout=5)
    assert [c.mechanism.label for c in described[user].credential_infos] == ["SCRAM-SHA-512"]


def test_confluent_kafka_cannot_describe_tansu_scram_credentials_either(tansu: Broker) -> None:
    """The proof for the strict xfail above: librdkafka fails on Tansu's answer too."""
    peer = _ck(tansu)
    future = peer.describe_user_scram_credentials(["nobody"], request_timeout=5)
    with pytest.raises(Exception):  # noqa: B017  (librdkafka's parse error or timeout)
        future.result(10)


def test_scram_calls_on_noida_are_unsupported_naming_the_api(noida: Broker) -> None:
    with AdminClient({"bootstrap.servers": noida.bootstrap_servers}) as admin:
        with pytest.raises(
            UnsupportedVersionError,
            match=r"DESCRIBE_USER_SCRAM_CREDENTIALS.*127\.0\.0\.1|127\.0\.0\.1.*DESCRIBE_USER_SCRAM",
        ):
            admin.describe_user_scram_credentials(timeout=5)


@pytest.mark.parametrize("broker", ["kafka", "noida"], indirect=True)
def test_group_offsets_are_deleted(broker: Broker, topic_name: str) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        admin.create_topics([topic_name])
        with Producer({"bootstrap.servers": broker.bootstrap_servers}) as producer:
            producer.send(topic_name, b"x", partition=0).result(WAIT_S)
        admin.alter_consumer_group_offsets(group, {TopicPartition(topic_name, 0): 1})
        result = admin.delete_consumer_group_offsets(group, [TopicPartition(topic_name, 0)])
        assert result == {TopicPartition(topic_name, 0): None}
        assert admin.list_consumer_group_offsets(group) == {}
    # confluent-kafka sees no committed offset either
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group})
    try:
        [committed] = consumer.committed([ck.TopicPartition(topic_name, 0)], timeout=WAIT_S)
        assert committed.offset < 0
    finally:
        consumer.close()


def test_offset_delete_on_tansu_is_unsupported_naming_the_broker(tansu: Broker, topic_name: str) -> None:
    with AdminClient({"bootstrap.servers": tansu.bootstrap_servers}) as admin:
        admin.create_topics([topic_name])
        with pytest.raises(UnsupportedVersionError, match="OFFSET_DELETE") as caught:
            admin.delete_consumer_group_offsets("g", [TopicPartition(topic_name, 0)], timeout=5)
        assert tansu.bootstrap_servers.split(":")[-1] in str(caught.value)
    # not kaflux's choice: Tansu does not offer OffsetDelete (API key 47) at all
    assert 47 not in tansu.api_versions()


@pytest.mark.parametrize("broker", ["kafka", "noida"], indirect=True)
def test_transactions_are_listed_described_and_fenced(broker: Broker, topic_name: str) -> None:
    tid = f"tx-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": tid})
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic_name, b"in a transaction").result(WAIT_S)
        with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
            listed = {t.transactional_id: t for t in admin.list_transactions()}
            assert tid in listed
            described = admin.describe_transactions([tid])[tid]
            assert described.producer_id == listed[tid].producer_id
            assert described.state == "Ongoing"
            assert TopicPartition(topic_name, 0) in described.partitions
            fenced = admin.fence_producers([tid])[tid]
            assert fenced.producer_id == described.producer_id and fenced.epoch > described.producer_epoch
        with pytest.raises(ProducerFencedError):
            producer.commit_transaction()
    finally:
        producer.close(5)


def test_kafka_python_meets_tansu_dropping_a_describe_that_names_configs(
    tansu: Broker, topic_name: str
) -> None:
    """The proof for the names defect (librdkafka cannot name configs; kafka-python can)."""
    kafka_admin = pytest.importorskip("kafka.admin")
    kafka_errors = pytest.importorskip("kafka.errors")
    peer = kafka_admin.KafkaAdminClient(bootstrap_servers=tansu.bootstrap_servers, request_timeout_ms=5000)
    try:
        peer.create_topics([kafka_admin.NewTopic(topic_name, 1, 1)])
        named = kafka_admin.ConfigResource(
            kafka_admin.ConfigResourceType.TOPIC, topic_name, {"retention.ms": None}
        )
        with pytest.raises(kafka_errors.KafkaConnectionError):
            peer.describe_configs([named])
    finally:
        peer.close()


@pytest.mark.parametrize("broker", ["kafka", "noida"], indirect=True)
def test_legacy_alter_configs_replaces_the_dynamic_configs(broker: Broker, topic_name: str) -> None:
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        admin.create_topics([topic_name])
        topic = ConfigResource("topic", topic_name)
        admin.incremental_alter_configs({topic: [AlterConfigOp("retention.ms", "60000")]})
        admin.alter_configs({topic: {"cleanup.policy": "compact"}})
        entries = admin.describe_configs([topic])[topic]
        assert entries["cleanup.policy"].value == "compact"
        assert entries["retention.ms"].value != "60000"  # left out, so back to its default


@pytest.mark.parametrize("broker", ["kafka", "noida"], indirect=True)
def test_log_dirs_list_the_topics_replicas(broker: Broker, topic_name: str) -> None:
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        admin.create_topics([topic_name])
        [broker_id] = [n.node_id for n in admin.describe_cluster().nodes]
        # Kafka's CreateTopics answers once the controller has the topic; the broker makes the
        # replica's log when the metadata reaches it, a moment later.
        deadline = time.monotonic() + WAIT_S
        while True:
            dirs = admin.describe_log_dirs([broker_id])[broker_id]
            replicas = {tp for d in dirs.values() for tp in d.replicas}
            if TopicPartition(topic_name, 0) in replicas or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    assert TopicPartition(topic_name, 0) in replicas


@pytest.mark.parametrize("broker", ["kafka", "tansu"], indirect=True)
def test_partition_reassignments_are_listed(broker: Broker, topic_name: str) -> None:
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        admin.create_topics([topic_name])
        listed = admin.list_partition_reassignments([TopicPartition(topic_name, 0)])
    assert all(isinstance(r.replicas, list) for r in listed.values())


@pytest.mark.parametrize(
    ("call", "api", "key"),
    [
        (lambda a, t: a.elect_leaders("preferred", [TopicPartition(t, 0)], timeout=5), "ELECT_LEADERS", 43),
        (
            lambda a, t: a.alter_partition_reassignments({TopicPartition(t, 0): [1]}, timeout=5),
            "ALTER_PARTITION_REASSIGNMENTS",
            45,
        ),
        (
            lambda a, t: a.abort_transaction(AbortTransactionSpec(TopicPartition(t, 0), 7, 0, 0), timeout=5),
            "WRITE_TXN_MARKERS",
            27,
        ),
    ],
    ids=["elect_leaders", "alter_partition_reassignments", "abort_transaction"],
)
@pytest.mark.parametrize("broker", ["tansu", "noida"], indirect=True)
def test_calls_no_stand_in_offers_raise_unsupported_naming_api_and_broker(
    broker: Broker, topic_name: str, call: Any, api: str, key: int
) -> None:
    """Apache Kafka offers all three: they work there (test_admin_on_kafka.py)."""
    assert key not in broker.api_versions()  # neither stand-in offers it: kaflux must say so
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        admin.create_topics([topic_name])
        started = time.monotonic()
        with pytest.raises(UnsupportedVersionError, match=api) as caught:
            call(admin, topic_name)
        assert time.monotonic() - started < 5
    assert broker.bootstrap_servers.rsplit(":", 1)[1] in str(caught.value)


TANSU_SCRAM_LOGIN_DEFECT = (
    "Tansu stores a SCRAM credential from AlterUserScramCredentials, but its SaslHandshake then refuses "
    "SCRAM-SHA-256/512 as an unsupported mechanism while listing that very mechanism as enabled"
)


@pytest.mark.xfail(strict=True, raises=UnsupportedSaslMechanismError, reason=TANSU_SCRAM_LOGIN_DEFECT)
def test_a_user_created_on_tansu_can_log_in(tansu: Broker) -> None:
    user = f"u{uuid.uuid4().hex[:8]}"
    with AdminClient({"bootstrap.servers": tansu.bootstrap_servers}) as admin:
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(user, "SCRAM-SHA-256", "pw-123456")])
    config = {
        "bootstrap.servers": tansu.bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": "pw-123456",
    }
    with AdminClient(config) as admin:
        admin.list_topics(timeout=5)


def test_confluent_kafka_cannot_log_in_with_a_user_created_on_tansu_either(tansu: Broker) -> None:
    """The proof for the strict xfail above, with librdkafka's client."""
    user = f"u{uuid.uuid4().hex[:8]}"
    with AdminClient({"bootstrap.servers": tansu.bootstrap_servers}) as admin:
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(user, "SCRAM-SHA-256", "pw-123456")])
    errors: list[str] = []
    peer = ck_admin.AdminClient(
        {
            "bootstrap.servers": tansu.bootstrap_servers,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": user,
            "sasl.password": "pw-123456",
            "error_cb": lambda error: errors.append(error.str()),
        }
    )
    with pytest.raises(ck.KafkaException):
        peer.list_topics(timeout=5)
    deadline = time.monotonic() + WAIT_S
    while not any("mechanism" in e.lower() for e in errors) and time.monotonic() < deadline:
        peer.poll(0.2)  # serves error_cb
    assert any("mechanism" in e.lower() for e in errors), errors
