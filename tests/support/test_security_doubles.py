"""The TLS and SASL test doubles, checked with confluent-kafka as the client, and the security
behaviour of the real brokers here (noida-db's PLAIN, Tansu's ``--authentication``).

The doubles (see security_fixtures.py): stunnel4 terminates TLS in front of Tansu; the SASL front door
logs clients in (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER, and GSSAPI against a real MIT KDC, proven with
kafka-python, as confluent-kafka's wheels lack Kerberos) and forwards to Tansu. Tansu advertises the
port of whatever stands in front of it, so every connection the client makes goes through the double.
"""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from kaflux.devbrokers.brokers import Broker, BrokerUnavailableError, TansuBroker
from kaflux.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from kaflux.protocol.messages.sasl_handshake import SaslHandshakeRequest

from support import tls as tls_module
from support.certs import OTHER_HOST_NAME, TestCerts
from support.group_helpers import wait_until
from support.sasl_front_door import InvalidTokenError, OAuthToken, unsecured_jwt_validator
from support.security_fixtures import SERVICE_HOSTS, KerberosRealm, ScramClient, SecureTansu, WireClient

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]  # noqa: E402

pytestmark = pytest.mark.integration

WAIT_S = 10.0  # bound on every wait for a client outcome
SASL_MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


# --- helpers ----------------------------------------------------------------------------------------------


def round_trip(config: Mapping[str, Any], topic: str, count: int = 5) -> list[bytes]:
    """Create ``topic``, produce ``count`` records and read them back, all through ``config``."""
    errors: list[KafkaError] = []
    common = {**config, "error_cb": errors.append}
    admin = AdminClient(common)
    admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=WAIT_S)[topic].result(WAIT_S)
    producer = Producer(common)
    expected = [f"value-{i}".encode() for i in range(count)]
    for value in expected:
        producer.produce(topic, value)
    assert producer.flush(WAIT_S) == 0, f"undelivered records; client errors: {errors}"
    consumer = Consumer({**common, "group.id": topic, "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + WAIT_S
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                got.append(message.value())  # type: ignore[arg-type]
    finally:
        consumer.close()
    assert got == expected, f"read {got}; client errors: {errors}"
    return got


def first_error(config: Mapping[str, Any], matches: Callable[[KafkaError], bool]) -> KafkaError:
    """The first client error (from ``error_cb``) that ``matches``, within WAIT_S seconds."""
    errors: list[KafkaError] = []
    producer = Producer({**config, "error_cb": errors.append})
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        producer.poll(0.1)
        for error in errors:
            if matches(error):
                return error
    raise AssertionError(f"no matching client error within {WAIT_S} s; errors: {errors}")


def is_authentication_error(error: KafkaError) -> bool:
    return bool(error.code() == KafkaError._AUTHENTICATION)


def is_certificate_error(error: KafkaError) -> bool:
    return "certificate verify failed" in error.str()


# --- certificates -----------------------------------------------------------------------------------------


def test_generated_certificates(certs: TestCerts) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    def load(path: Any) -> x509.Certificate:
        return x509.load_pem_x509_certificate(path.read_bytes())

    ca, server, other = load(certs.ca_cert), load(certs.server_cert), load(certs.other_host_cert)
    client, wrong_ca = load(certs.client_cert), load(certs.wrong_ca_cert)
    for leaf in (server, other, client):
        leaf.verify_directly_issued_by(ca)
    with pytest.raises(ValueError):
        server.verify_directly_issued_by(wrong_ca)
    sans = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert sans.get_values_for_type(x509.DNSName) == ["localhost"]
    other_sans = other.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert other_sans.get_values_for_type(x509.DNSName) == [OTHER_HOST_NAME]
    key_pem = certs.client_key.read_bytes()
    assert key_pem.startswith(b"-----BEGIN ENCRYPTED PRIVATE KEY-----")
    with pytest.raises(TypeError):
        load_pem_private_key(key_pem, password=None)
    load_pem_private_key(key_pem, password=certs.client_key_password.encode())
    # Python's ssl module (which kaflux uses) loads the chain with the password.
    ssl.create_default_context().load_cert_chain(
        certs.client_cert, certs.client_key, password=certs.client_key_password
    )


# --- (a) TLS through stunnel ------------------------------------------------------------------------------


def test_tls_round_trip_with_the_right_ca(tls_tansu: SecureTansu, topic_name: str) -> None:
    assert tls_tansu.terminator is not None and tls_tansu.terminator.pid is not None
    assert tls_tansu.bootstrap_servers.endswith(f":{tls_tansu.broker.advertised_port}")
    round_trip(tls_tansu.config(), topic_name)


def test_tls_plaintext_port_of_the_broker_is_not_what_clients_get(tls_tansu: SecureTansu) -> None:
    # Metadata through the terminator names the terminator's port, not the broker's own.
    assert tls_tansu.terminator is not None
    brokers = AdminClient(tls_tansu.config()).list_topics(timeout=WAIT_S).brokers
    assert {b.port for b in brokers.values()} == {tls_tansu.terminator.port}


def test_tls_terminator_moves_on_when_its_port_is_taken(
    certs: TestCerts, monkeypatch: pytest.MonkeyPatch, topic_name: str
) -> None:
    # Another process takes the port Tansu was told to advertise before stunnel binds it: Tansu is
    # restarted advertising a new port, and stunnel binds that one.
    with socket.create_server(("127.0.0.1", 0)) as squatter:
        taken = squatter.getsockname()[1]
        ports = iter([taken])
        real_free_port = tls_module._free_port  # type: ignore[attr-defined]
        monkeypatch.setattr(tls_module, "_free_port", lambda: next(ports, None) or real_free_port())
        broker, terminator = tls_module.start_tansu_behind_tls(cert=certs.server_cert, key=certs.server_key)
    try:
        assert terminator.port != taken and broker.advertised_port == terminator.port
        config = {
            "bootstrap.servers": terminator.bootstrap_servers,
            "security.protocol": "SSL",
            "ssl.ca.location": str(certs.ca_cert),
        }
        round_trip(config, topic_name)
    finally:
        terminator.cleanup()
        broker.cleanup()


def test_tls_port_refuses_plaintext(tls_tansu: SecureTansu) -> None:
    config = tls_tansu.config(**{"security.protocol": "PLAINTEXT"})
    first_error(config, lambda e: e.code() in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN))


def test_tls_refuses_a_server_the_client_ca_did_not_sign(tls_tansu: SecureTansu, certs: TestCerts) -> None:
    config = tls_tansu.config(**{"ssl.ca.location": str(certs.wrong_ca_cert)})
    error = first_error(config, is_certificate_error)  # "certificate verify failed"
    # librdkafka files the same handshake failure under either code, depending on which of its
    # paths reports it first (seen as _TRANSPORT once in CI), as with the client certificate below.
    assert error.code() in (KafkaError._SSL, KafkaError._TRANSPORT), error


def test_tls_other_host_certificate_fails_host_name_verification(tls_tansu_other_host: SecureTansu) -> None:
    first_error(tls_tansu_other_host.config(), is_certificate_error)


def test_tls_other_host_certificate_passes_without_endpoint_identification(
    tls_tansu_other_host: SecureTansu, topic_name: str
) -> None:
    round_trip(tls_tansu_other_host.config(**{"ssl.endpoint.identification.algorithm": "none"}), topic_name)


def test_mutual_tls_with_a_client_certificate_and_key_password(
    mtls_tansu: SecureTansu, topic_name: str
) -> None:
    config = mtls_tansu.config()
    assert config["ssl.key.password"] and config["ssl.certificate.location"]
    round_trip(config, topic_name)


def test_mutual_tls_refuses_a_client_without_a_certificate(mtls_tansu: SecureTansu) -> None:
    config = {
        k: v
        for k, v in mtls_tansu.config().items()
        if k not in ("ssl.certificate.location", "ssl.key.location", "ssl.key.password")
    }
    error = first_error(config, lambda e: "certificate required" in e.str())  # TLS 1.3 alert 116
    assert error.code() in (KafkaError._SSL, KafkaError._TRANSPORT), error
    terminator = mtls_tansu.terminator
    assert terminator is not None
    # stunnel may log the handshake's failure just after the client saw the alert (one CI run
    # read "Peer certificate required" and not yet the error line): wait for it, bounded
    wait_until(
        lambda: "peer did not return a certificate" in terminator.log_tail(50_000),
        WAIT_S,
        lambda: f"stunnel's log ends with: {terminator.log_tail(2_000)}",
    )


# --- (b) the SASL front door, SASL_PLAINTEXT --------------------------------------------------------------


@pytest.mark.parametrize("mechanism", [*SASL_MECHANISMS, "OAUTHBEARER"])
def test_front_door_login_then_produce_and_consume(
    sasl_tansu: SecureTansu, topic_name: str, mechanism: str
) -> None:
    door = sasl_tansu.door
    assert door is not None
    since = door.log_position()
    round_trip(sasl_tansu.config(mechanism), topic_name)
    login = door.wait_for_login(user="alice", mechanism=mechanism, success=True, since=since, timeout=WAIT_S)
    assert login.reason == "ok"
    failures = [r for r in door.logins(since) if not r.success]
    assert failures == []


@pytest.mark.parametrize("mechanism", SASL_MECHANISMS)
def test_front_door_rejects_a_wrong_password(sasl_tansu: SecureTansu, mechanism: str) -> None:
    door = sasl_tansu.door
    assert door is not None
    since = door.log_position()
    error = first_error(sasl_tansu.config(mechanism, **{"sasl.password": "wrong"}), is_authentication_error)
    expected = "invalid-password" if mechanism == "PLAIN" else "invalid-proof"
    assert expected in error.str()
    record = door.wait_for_login(mechanism=mechanism, success=False, since=since, timeout=WAIT_S)
    assert (record.user, record.reason) == ("alice", expected)
    assert not [r for r in door.logins(since) if r.success]


@pytest.mark.parametrize("mechanism", SASL_MECHANISMS)
def test_front_door_rejects_an_unknown_user(sasl_tansu: SecureTansu, mechanism: str) -> None:
    door = sasl_tansu.door
    assert door is not None
    since = door.log_position()
    config = sasl_tansu.config(mechanism, **{"sasl.username": "mallory", "sasl.password": "alice-secret"})
    error = first_error(config, is_authentication_error)
    assert "unknown-user" in error.str()
    record = door.wait_for_login(user="mallory", success=False, since=since, timeout=WAIT_S)
    assert record.reason == "unknown-user"


def test_front_door_rejects_a_refused_oauth_token(make_sasl_tansu: Callable[..., SecureTansu]) -> None:
    unsecured = unsecured_jwt_validator()

    def validator(token: str, extensions: Mapping[str, str]) -> OAuthToken:
        accepted = unsecured(token, extensions)
        if accepted.principal != "alice":
            raise InvalidTokenError(f"{accepted.principal} may not log in")
        return accepted

    double = make_sasl_tansu(token_validator=validator)
    config = double.config("OAUTHBEARER", **{"sasl.oauthbearer.config": "principal=mallory"})
    error = first_error(config, is_authentication_error)
    assert "mallory may not log in" in error.str()
    assert double.door is not None
    record = double.door.wait_for_login(mechanism="OAUTHBEARER", timeout=WAIT_S)
    assert not record.success and record.user == "mallory"


def test_front_door_refuses_a_client_that_does_not_log_in(sasl_tansu: SecureTansu) -> None:
    door = sasl_tansu.door
    assert door is not None
    known = {c.connection_id for c in door.connections()}
    config = {"bootstrap.servers": sasl_tansu.bootstrap_servers, "security.protocol": "PLAINTEXT"}
    first_error(config, lambda e: e.code() in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN))
    refused = [c for c in door.connections() if c.connection_id not in known]
    assert refused, "the client never reached the door"
    record = door.wait_for_closed(refused[0].connection_id, timeout=WAIT_S)
    assert "before authentication" in record.close_reason and record.principal is None


def test_front_door_reauthentication_with_confluent(
    make_sasl_tansu: Callable[..., SecureTansu], topic_name: str
) -> None:
    # KIP-368: the door grants 2 s sessions; librdkafka re-authenticates on the open connections.
    double = make_sasl_tansu(session_lifetime_ms=2000)
    door = double.door
    assert door is not None
    config = double.config("SCRAM-SHA-512")
    round_trip(config, topic_name)
    producer = Producer(config)
    producer.produce(topic_name, b"before")
    assert producer.flush(WAIT_S) == 0
    since = door.log_position()
    record = door.wait_for_login(reauthentication=True, since=since, timeout=WAIT_S)
    assert record.success and record.user == "alice" and record.session_lifetime_ms == 2000
    producer.produce(topic_name, b"after")
    assert producer.flush(WAIT_S) == 0
    expired = [c for c in door.connections() if "expired" in c.close_reason]
    assert expired == [], "a connection was used past its session"


# --- (c) SASL_SSL: stunnel in front of the front door -----------------------------------------------------


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_ssl_scram_round_trip(sasl_ssl_tansu: SecureTansu, topic_name: str, mechanism: str) -> None:
    door = sasl_ssl_tansu.door
    assert door is not None and sasl_ssl_tansu.security_protocol == "SASL_SSL"
    since = door.log_position()
    round_trip(sasl_ssl_tansu.config(mechanism), topic_name)
    assert door.wait_for_login(mechanism=mechanism, success=True, since=since, timeout=WAIT_S).user == "alice"


def test_sasl_ssl_rejects_a_wrong_password(sasl_ssl_tansu: SecureTansu) -> None:
    config = sasl_ssl_tansu.config("SCRAM-SHA-256", **{"sasl.password": "wrong"})
    assert "invalid-proof" in first_error(config, is_authentication_error).str()


def test_sasl_ssl_needs_tls(sasl_ssl_tansu: SecureTansu) -> None:
    # SASL without TLS against the TLS port: the client never gets to log in.
    config = sasl_ssl_tansu.config("SCRAM-SHA-256", **{"security.protocol": "SASL_PLAINTEXT"})
    door = sasl_ssl_tansu.door
    assert door is not None
    since = door.log_position()
    first_error(config, lambda e: e.code() in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN))
    assert door.logins(since) == []


# --- (d) noida-db: SASL PLAIN with any password -----------------------------------------------------------


def test_noida_accepts_sasl_plain_with_any_password(noida: Broker, topic_name: str) -> None:
    # No flag needed: noida-db's Kafka service answers SaslHandshake/SaslAuthenticate and takes any PLAIN
    # password (brokers.md section 5). So it can check a client's PLAIN exchange, not its credentials.
    config = {
        "bootstrap.servers": noida.bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "anyone",
        "sasl.password": "any password at all",
    }
    round_trip(config, topic_name)


# --- (e) Tansu --authentication: SCRAM ends in e=unknown-user ---------------------------------------------


@pytest.fixture(scope="module")
def tansu_authentication() -> Iterator[TansuBroker]:
    try:
        broker = TansuBroker(extra_args=["--authentication"]).start()
    except BrokerUnavailableError as e:
        pytest.skip(f"tansu not available: {e}")
    yield broker
    broker.cleanup()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_tansu_authentication_answers_scram_with_unknown_user(
    tansu_authentication: TansuBroker, mechanism: str
) -> None:
    config = {
        "bootstrap.servers": tansu_authentication.bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
    }
    assert "unknown-user" in first_error(config, is_authentication_error).str()


def test_tansu_authentication_scram_exchange_on_the_wire(tansu_authentication: TansuBroker) -> None:
    # The same exchange by hand: Tansu sends a server-first message, then e=unknown-user (its SCRAM
    # credential store is empty: AlterUserScramCredentials is a no-op in this build).
    with WireClient("127.0.0.1", tansu_authentication.port, timeout=WAIT_S) as client:
        handshake = client.call(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 1)
        assert handshake.error_code == 0 and "SCRAM-SHA-256" in handshake.mechanisms
        assert "PLAIN" not in handshake.mechanisms
        scram = ScramClient("SCRAM-SHA-256", "alice", "alice-secret")
        first = client.call(SaslAuthenticateRequest(auth_bytes=scram.first()), 2)
        assert first.error_code == 0 and first.auth_bytes.startswith(f"r={scram.nonce}".encode())
        final = client.call(SaslAuthenticateRequest(auth_bytes=scram.final(first.auth_bytes)), 2)
        assert final.auth_bytes == b"e=unknown-user", final


# --- (e) GSSAPI (Kerberos): the front door's acceptor, a real MIT KDC, kafka-python as the peer ----------
# confluent-kafka's wheels are built without Kerberos; kafka-python logs in with python-gssapi, from the
# default ticket cache (KRB5CCNAME).

#: kafka-python 3.0 reads its protocol schemas with importlib.resources' deprecated open_text (the
#: warning is attributed to importlib, so pyproject's kafka.* filter does not catch it)
kafka_python_warnings = pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning")


def kafka_python_round_trip(double: SecureTansu, topic: str, **extra: Any) -> list[bytes]:
    """kafka-python creates ``topic``, produces three records and reads them back over GSSAPI."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KafkaNewTopic

    common: dict[str, Any] = {
        "bootstrap_servers": double.bootstrap_servers,
        "security_protocol": double.security_protocol,
        "sasl_mechanism": "GSSAPI",
        "sasl_kerberos_service_name": "kafka",
        "request_timeout_ms": int(WAIT_S * 1000),
        **extra,
    }
    if double.uses_tls:
        assert double.certs is not None
        common["ssl_cafile"] = str(double.certs.ca_cert)
    admin = KafkaAdminClient(**common)
    try:
        admin.create_topics([KafkaNewTopic(topic, 1, 1)])
    finally:
        admin.close()
    producer = KafkaProducer(**common)
    expected = [f"kerberos-{i}".encode() for i in range(3)]
    try:
        for value in expected:
            producer.send(topic, value).get(timeout=WAIT_S)
    finally:
        producer.close(timeout=WAIT_S)
    consumer = KafkaConsumer(**common, enable_auto_commit=False, consumer_timeout_ms=int(WAIT_S * 1000))
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek(TopicPartition(topic, 0), 0)
        got: list[bytes] = []
        deadline = time.monotonic() + WAIT_S
        while len(got) < len(expected) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                got.extend(record.value for record in records)
    finally:
        consumer.close()
    assert got == expected
    return got


def kinit_default_cache(kerberos: KerberosRealm, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """``kinit -k -t`` alice into a cache of this test, made this process's default (KRB5CCNAME)."""
    ccache = kerberos.kinit(tmp_path / "alice.ccache")
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{ccache}")
    return ccache


def test_the_kdc_issues_tickets_for_the_client_and_the_brokers(
    kerberos: KerberosRealm, tmp_path: Path
) -> None:
    ccache = kerberos.kinit(tmp_path / "alice.ccache")
    assert f"Default principal: alice@{kerberos.realm}" in kerberos.kdc.klist(ccache)
    keys = kerberos.kdc.klist_keytab(kerberos.service_keytab)
    for host in SERVICE_HOSTS:
        assert f"kafka/{host}@{kerberos.realm}" in keys
    assert kerberos.kdc.pid is not None


@kafka_python_warnings
@pytest.mark.parametrize("double_name", ["gssapi_tansu", "gssapi_ssl_tansu"])
def test_front_door_gssapi_login_with_kafka_python(
    request: pytest.FixtureRequest,
    kerberos: KerberosRealm,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    topic_name: str,
    double_name: str,
) -> None:
    double: SecureTansu = request.getfixturevalue(double_name)
    door = double.door
    assert door is not None
    kinit_default_cache(kerberos, monkeypatch, tmp_path)
    since = door.log_position()
    kafka_python_round_trip(double, topic_name)
    login = door.wait_for_login(mechanism="GSSAPI", success=True, since=since, timeout=WAIT_S)
    # the Kerberos client principal, whatever authorization id the client sends (kafka-python sends
    # the service name), as Kafka's broker does; and "no security layer" chosen
    assert login.user == kerberos.client_principal
    assert login.authorization_id is not None and login.security_layer is not None
    assert login.security_layer[0] == 1
    assert [r for r in door.logins(since) if not r.success] == []


@kafka_python_warnings
def test_front_door_gssapi_refuses_a_ticket_its_keytab_cannot_read(
    make_sasl_tansu: Callable[..., SecureTansu],
    kerberos: KerberosRealm,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    topic_name: str,
) -> None:
    # the door holds only kafka/localhost's key; kafka-python, connecting to 127.0.0.1, brings a
    # ticket for kafka/127.0.0.1: the acceptor cannot decrypt it, and the login fails
    keytab = kerberos.kdc.export_keytab(tmp_path / "localhost-only.keytab", "kafka/localhost")
    double = make_sasl_tansu(mechanisms=("GSSAPI",), gssapi_keytab=keytab)
    door = double.door
    assert door is not None
    kinit_default_cache(kerberos, monkeypatch, tmp_path)
    from kafka.errors import KafkaError as KafkaPythonError

    with pytest.raises((KafkaPythonError, OSError)):
        kafka_python_round_trip(double, topic_name, bootstrap_timeout_ms=3000)
    record = door.wait_for_login(mechanism="GSSAPI", success=False, timeout=WAIT_S)
    assert record.reason.startswith("gss-error:"), record.reason
    assert not [r for r in door.logins() if r.success]


@kafka_python_warnings
def test_front_door_gssapi_client_without_a_ticket_never_logs_in(
    gssapi_tansu: SecureTansu, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, topic_name: str
) -> None:
    door = gssapi_tansu.door
    assert door is not None
    since = door.log_position()
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path / 'empty.ccache'}")
    from kafka.errors import KafkaError as KafkaPythonError

    with pytest.raises((KafkaPythonError, OSError, RuntimeError)):
        kafka_python_round_trip(gssapi_tansu, topic_name, bootstrap_timeout_ms=3000)
    assert not [r for r in door.logins(since) if r.success]


@kafka_python_warnings
def test_front_door_gssapi_reauthentication_with_kafka_python(
    make_sasl_tansu: Callable[..., SecureTansu],
    kerberos: KerberosRealm,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    topic_name: str,
) -> None:
    # the door ends GSSAPI sessions after 1.5 s (KIP-368); kafka-python re-authenticates with a new context
    double = make_sasl_tansu(
        mechanisms=("GSSAPI",), gssapi_keytab=kerberos.service_keytab, session_lifetime_ms=1500
    )
    door = double.door
    assert door is not None
    kinit_default_cache(kerberos, monkeypatch, tmp_path)
    kafka_python_round_trip(double, topic_name)
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=double.bootstrap_servers,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="GSSAPI",
        sasl_kerberos_service_name="kafka",
    )
    try:
        producer.send(topic_name, b"before").get(timeout=WAIT_S)
        since = door.log_position()
        record = door.wait_for_login(reauthentication=True, since=since, timeout=WAIT_S)
        assert record.success and record.mechanism == "GSSAPI" and record.user == kerberos.client_principal
        producer.send(topic_name, b"after").get(timeout=WAIT_S)
    finally:
        producer.close(timeout=WAIT_S)
