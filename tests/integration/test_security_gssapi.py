"""kaflux's clients over SASL GSSAPI (Kerberos) against Tansu behind the SASL front door's GSSAPI
acceptor, with tickets from a real MIT KDC (support/kdc.py; the door is proven with kafka-python in
support/test_security_doubles.py): keytab logins, ticket-cache logins, Java's Krb5LoginModule line,
SASL_PLAINTEXT and SASL_SSL, re-authentication with a new security context, and every failure
(no ticket, unknown service or client principal, missing keytab, unreachable KDC, a KDC whose clock
is an hour off) as a clear error."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kaflux import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from kaflux.errors import AuthenticationError, ConfigError

from support.group_helpers import WAIT_S
from support.kdc import TestKdc
from support.secure_round_trips import group_round_trip, kaflux_round_trip, produce_across_sessions
from support.security_fixtures import KerberosRealm, SecureTansu

pytestmark = pytest.mark.integration

QUICK_S = 5.0
RECORDS = 10
#: RFC 4752: "no security layer" and a largest buffer of 0
NO_SECURITY_LAYER = b"\x01\x00\x00\x00"


def _round_trip(config: dict[str, Any], topic: str) -> None:
    """AdminClient creates ``topic``, Producer writes RECORDS records, Consumer reads them back."""
    kaflux_round_trip(config, topic, RECORDS)


def _assert_logged_in_as_alice(double: SecureTansu, kerberos: KerberosRealm, since: int) -> None:
    door = double.door
    assert door is not None
    login = door.wait_for_login(mechanism="GSSAPI", success=True, since=since, timeout=WAIT_S)
    assert login.user == kerberos.client_principal
    # Java's client: the client principal as authorization id, no security layer, buffer 0
    assert login.authorization_id == kerberos.client_principal
    assert login.security_layer == NO_SECURITY_LAYER
    assert [r for r in door.logins(since) if not r.success] == []


@pytest.mark.parametrize("double_name", ["gssapi_tansu", "gssapi_ssl_tansu"])
def test_keytab_login_round_trip(
    request: pytest.FixtureRequest, kerberos: KerberosRealm, topic_name: str, double_name: str
) -> None:
    double: SecureTansu = request.getfixturevalue(double_name)
    assert double.door is not None
    since = double.door.log_position()
    _round_trip(double.config("GSSAPI", **kerberos.keytab_config()), topic_name)
    _assert_logged_in_as_alice(double, kerberos, since)


def test_ticket_cache_login_after_kinit(
    gssapi_tansu: SecureTansu,
    kerberos: KerberosRealm,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    topic_name: str,
) -> None:
    ccache = kerberos.kinit(tmp_path / "alice.ccache")
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{ccache}")
    assert gssapi_tansu.door is not None
    since = gssapi_tansu.door.log_position()
    # Java's defaults: security.protocol SASL_PLAINTEXT with no mechanism is GSSAPI, service "kafka";
    # the bootstrap server by name, the broker as Tansu advertises it (127.0.0.1)
    bootstrap = gssapi_tansu.bootstrap_servers.replace("127.0.0.1", "localhost")
    config = {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT"}
    _round_trip(config, topic_name)
    _assert_logged_in_as_alice(gssapi_tansu, kerberos, since)
    # each connection asked for the service principal of the host it connected to, and the
    # service tickets were cached next to kinit's TGT
    tickets = kerberos.kdc.klist(ccache)
    assert f"kafka/localhost@{kerberos.realm}" in tickets
    assert f"kafka/127.0.0.1@{kerberos.realm}" in tickets


def test_java_krb5_login_module_line(
    gssapi_tansu: SecureTansu, kerberos: KerberosRealm, topic_name: str
) -> None:
    jaas = (
        "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
        f'keyTab="{kerberos.client_keytab}" principal="{kerberos.client_principal}";'
    )
    assert gssapi_tansu.door is not None
    since = gssapi_tansu.door.log_position()
    _round_trip(gssapi_tansu.config("GSSAPI", **{"sasl.jaas.config": jaas}), topic_name)
    _assert_logged_in_as_alice(gssapi_tansu, kerberos, since)


def test_java_ticket_cache_line_names_the_cache(
    gssapi_tansu: SecureTansu, kerberos: KerberosRealm, tmp_path: Path, topic_name: str
) -> None:
    # the default cache (KRB5CCNAME) is empty: the JAAS line names the cache kinit filled
    ccache = kerberos.kinit(tmp_path / "named.ccache")
    jaas = (
        f'com.sun.security.auth.module.Krb5LoginModule required useTicketCache=true ticketCache="{ccache}";'
    )
    assert gssapi_tansu.door is not None
    since = gssapi_tansu.door.log_position()
    _round_trip(gssapi_tansu.config("GSSAPI", **{"sasl.jaas.config": jaas}), topic_name)
    _assert_logged_in_as_alice(gssapi_tansu, kerberos, since)
    assert f"kafka/127.0.0.1@{kerberos.realm}" in kerberos.kdc.klist(ccache)


def test_a_group_consumer_over_gssapi_sasl_ssl(
    gssapi_ssl_tansu: SecureTansu, kerberos: KerberosRealm, topic_name: str
) -> None:
    group_round_trip(gssapi_ssl_tansu.config("GSSAPI", **kerberos.keytab_config()), topic_name)


def test_the_client_re_authenticates_with_a_new_context(
    make_sasl_tansu: Callable[..., SecureTansu], kerberos: KerberosRealm, topic_name: str
) -> None:
    # KIP-368: the door ends GSSAPI sessions after 1.5 s (Kafka's connections.max.reauth.ms); each
    # re-authentication is a whole new exchange with a new acceptor, which only a new initiator
    # security context (a new AP-REQ) can satisfy
    double = make_sasl_tansu(
        mechanisms=("GSSAPI",), gssapi_keytab=kerberos.service_keytab, session_lifetime_ms=1500
    )
    door = double.door
    assert door is not None
    sent = produce_across_sessions(double.config("GSSAPI", **kerberos.keytab_config()), topic_name)
    reauths = [r for r in door.logins() if r.reauthentication]
    assert reauths, "no re-authentication within 4 s of 1.5 s sessions"
    for record in reauths:
        assert record.success and record.mechanism == "GSSAPI" and record.user == kerberos.client_principal
        assert record.security_layer == NO_SECURITY_LAYER
    assert [c for c in door.connections() if "expired" in c.close_reason] == []
    assert sent > 10


# -- failures -------------------------------------------------------------------------------------


def _each_call_refused(config: dict[str, Any], *needles: str) -> None:
    """Every blocking call of every client fails within QUICK_S with an AuthenticationError that
    says ``needles``."""
    admin = AdminClient(config)
    consumer = Consumer({**config, "auto.offset.reset": "earliest"})
    producer = Producer(config)
    calls: list[Callable[[], object]] = [
        lambda: admin.list_topics(timeout=30),
        lambda: consumer.list_topics(timeout=30),
        lambda: [consumer.poll(0.2) for _ in range(150)],
        lambda: producer.send("any", b"x").result(timeout=30),
    ]
    try:
        consumer.assign([TopicPartition("any", 0)])
        for call in calls:
            start = time.monotonic()
            with pytest.raises(AuthenticationError) as info:
                call()
            assert time.monotonic() - start < QUICK_S
            for needle in needles:
                assert needle in str(info.value)
    finally:
        admin.close(1)
        consumer.close(timeout=1)
        producer.close(1)


def test_a_wrong_service_name_is_refused_quickly_and_says_what_to_check(
    gssapi_tansu: SecureTansu, kerberos: KerberosRealm
) -> None:
    config = gssapi_tansu.config(
        "GSSAPI", **kerberos.keytab_config(), **{"sasl.kerberos.service.name": "kfk"}
    )
    _each_call_refused(
        config,
        "GSSAPI",
        f"kfk/127.0.0.1@{kerberos.realm} not found in Kerberos database",
        "sasl.kerberos.service.name",
        gssapi_tansu.bootstrap_servers,
    )


@pytest.mark.parametrize("client", [Producer, Consumer, AdminClient])
def test_no_ticket_fails_the_constructor_with_run_kinit(
    gssapi_tansu: SecureTansu, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, client: Any
) -> None:
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path / 'empty.ccache'}")
    start = time.monotonic()
    with pytest.raises(AuthenticationError) as info:
        client(gssapi_tansu.config("GSSAPI"))
    assert time.monotonic() - start < QUICK_S
    text = str(info.value)
    assert "No Kerberos credentials available" in text and "run kinit" in text
    assert "sasl.kerberos.keytab" in text


def test_a_missing_keytab_is_a_config_error(
    gssapi_tansu: SecureTansu, kerberos: KerberosRealm, tmp_path: Path
) -> None:
    config = gssapi_tansu.config(
        "GSSAPI",
        **{"sasl.kerberos.keytab": str(tmp_path / "absent.keytab"), "sasl.kerberos.principal": "alice"},
    )
    with pytest.raises(ConfigError, match="does not exist") as info:
        Producer(config)
    assert info.value.key == "sasl.kerberos.keytab"


def test_a_client_principal_the_kdc_does_not_know_fails_the_constructor(
    gssapi_tansu: SecureTansu, kerberos: KerberosRealm, tmp_path: Path
) -> None:
    name = f"gone-{uuid.uuid4().hex[:6]}"
    keytab = kerberos.kdc.add_principal(name, keytab=tmp_path / "gone.keytab")
    kerberos.kdc.delete_principal(name)  # the keytab outlives its principal
    config = gssapi_tansu.config(
        "GSSAPI",
        **{"sasl.kerberos.keytab": str(keytab), "sasl.kerberos.principal": kerberos.kdc.principal(name)},
    )
    with pytest.raises(AuthenticationError) as info:
        Consumer(config)
    text = str(info.value)
    assert f"Client '{name}@{kerberos.realm}' not found in Kerberos database" in text
    assert "sasl.kerberos.principal" in text


def test_a_keytab_without_the_principal_s_keys_fails_the_constructor(
    gssapi_tansu: SecureTansu, kerberos: KerberosRealm
) -> None:
    config = gssapi_tansu.config(
        "GSSAPI",
        **{"sasl.kerberos.keytab": str(kerberos.client_keytab), "sasl.kerberos.principal": "kafka/localhost"},
    )
    with pytest.raises(AuthenticationError, match=r"klist -k -t"):
        Producer(config)


def test_an_unreachable_kdc_fails_the_constructor_and_says_so(
    gssapi_tansu: SecureTansu, kerberos: KerberosRealm, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # the same realm, its KDC on a port where nothing listens
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead_port = s.getsockname()[1]
    conf = kerberos.kdc.krb5_conf.read_text().replace(f":{kerberos.kdc.port}", f":{dead_port}")
    (tmp_path / "krb5.conf").write_text(conf)
    monkeypatch.setenv("KRB5_CONFIG", str(tmp_path / "krb5.conf"))
    start = time.monotonic()
    with pytest.raises(AuthenticationError) as info:
        Producer(gssapi_tansu.config("GSSAPI", **kerberos.keytab_config()))
    assert time.monotonic() - start < QUICK_S
    text = str(info.value)
    assert f"Cannot contact any KDC for realm '{kerberos.realm}'" in text and "KDC is unreachable" in text


def test_clock_skew_fails_the_constructor_and_says_so(
    gssapi_tansu: SecureTansu, kerberos: KerberosRealm, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a KDC an hour behind this host (faketime), and a client that must prove its key with a
    # timestamp (pre-authentication); kdc_timesync = 0: MIT's clients otherwise adopt the KDC's
    # clock for their tickets, and the skew would surface later, at the broker
    kdc = TestKdc(realm="SKEW.TEST", clock_offset="-1h").start()
    try:
        keytab = kdc.add_principal("alice", keytab=kdc.path("alice.keytab"), requires_preauth=True)
        conf = kdc.krb5_conf.read_text().replace("[libdefaults]\n", "[libdefaults]\n  kdc_timesync = 0\n")
        kdc.krb5_conf.write_text(conf)
        monkeypatch.setenv("KRB5_CONFIG", str(kdc.krb5_conf))
        config = gssapi_tansu.config(
            "GSSAPI", **{"sasl.kerberos.keytab": str(keytab), "sasl.kerberos.principal": "alice@SKEW.TEST"}
        )
        start = time.monotonic()
        with pytest.raises(AuthenticationError) as info:
            Producer(config)
        assert time.monotonic() - start < QUICK_S
    finally:
        kdc.cleanup()
    text = str(info.value)
    assert "Clock skew too great" in text and "synchronise them (NTP)" in text


def test_keytab_tickets_are_fetched_again_when_they_expire(
    make_sasl_tansu: Callable[..., SecureTansu], monkeypatch: pytest.MonkeyPatch, topic_name: str
) -> None:
    # a realm whose tickets for alice live 6 s; the door ends sessions after 1.5 s. A producer
    # that keeps sending for 15 s re-authenticates on tickets fetched again from its keytab
    kdc = TestKdc(realm="SHORT.TEST").start()
    try:
        service_keytab = kdc.path("kafka.keytab")
        kdc.add_principal("kafka/127.0.0.1", keytab=service_keytab)
        client_keytab = kdc.add_principal("alice", keytab=kdc.path("alice.keytab"))
        kdc.set_max_life("alice", 6)
        monkeypatch.setenv("KRB5_CONFIG", str(kdc.krb5_conf))
        double = make_sasl_tansu(
            mechanisms=("GSSAPI",), gssapi_keytab=service_keytab, session_lifetime_ms=1500
        )
        door = double.door
        assert door is not None
        config = double.config(
            "GSSAPI",
            **{"sasl.kerberos.keytab": str(client_keytab), "sasl.kerberos.principal": "alice@SHORT.TEST"},
        )
        with AdminClient(config) as admin:
            admin.create_topics([NewTopic(topic_name, 1)], timeout=WAIT_S)
        with Producer({**config, "linger.ms": 0}) as producer:
            start = time.monotonic()
            sent = 0
            while time.monotonic() - start < 15.0:
                producer.send(topic_name, b"t%d" % sent, partition=0).result(timeout=WAIT_S)
                sent += 1
                time.sleep(0.05)
        tgs_requests = kdc.log_tail(200_000).count("TGS_REQ")
        as_requests = kdc.log_tail(200_000).count("AS_REQ")
    finally:
        kdc.cleanup()
    logins = door.logins()
    assert all(r.success for r in logins), [r.reason for r in logins if not r.success]
    assert len([r for r in logins if r.reauthentication]) >= 6
    # the producer's TGT (6 s) was fetched again from the keytab, and service tickets with it
    assert as_requests >= 3 and tgs_requests >= 3, (as_requests, tgs_requests)
