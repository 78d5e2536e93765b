"""The SASL front door test double: its mechanisms against the RFCs' test vectors (GSSAPI against
python-gssapi's initiator and the test KDC), and its Kafka behaviour in front of the in-memory fake
broker (served on a loopback socket)."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from kaflux.protocol.api import CLIENT_VERSIONS, ApiKey
from kaflux.protocol.messages.api_versions import ApiVersionsRequest
from kaflux.protocol.messages.metadata import MetadataRequest
from kaflux.protocol.messages.produce import ProduceRequest
from kaflux.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from kaflux.protocol.messages.sasl_handshake import SaslHandshakeRequest

from support.fakes import FakeCluster
from support.kdc import TestKdc
from support.sasl_front_door import (
    GssapiServer,
    InvalidTokenError,
    OAuthBearerServer,
    OAuthToken,
    PlainServer,
    SaslFrontDoor,
    ScramCredential,
    ScramServer,
    gssapi_acceptor_factory,
    saslprep,
    unsecured_jwt_validator,
)
from support.security_fixtures import KerberosRealm, ScramClient, WireClient
from support.socket_fake_broker import SocketFakeBroker

# --- SCRAM: RFC test vectors ---------------------------------------------------------------------------

# RFC 7677 section 3: SCRAM-SHA-256, user "user", password "pencil".
RFC7677: dict[str, Any] = {
    "client_first": b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
    "server_nonce": "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
    "salt": "W22ZaJ0SNY7soEsUEjb6gQ==",
    "server_first": b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
    "client_final": b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
    "server_final": b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
}

# RFC 5802 section 5: SCRAM-SHA-1, user "user", password "pencil".
RFC5802: dict[str, Any] = {
    "client_first": b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL",
    "server_nonce": "3rfcNHYJY1ZVvWVs7j",
    "salt": "QSXCR+Q6sek8bf92",
    "server_first": b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
    "client_final": b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
    "server_final": b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ=",
}


def _vector_server(mechanism: str, vector: Mapping[str, object]) -> ScramServer:
    credential = ScramCredential.from_password(
        mechanism, "pencil", salt=base64.b64decode(str(vector["salt"])), iterations=4096
    )
    return ScramServer(
        mechanism,
        {"user": credential}.get,
        server_nonce=lambda: str(vector["server_nonce"]),
    )


@pytest.mark.parametrize(
    ("mechanism", "vector"),
    [("SCRAM-SHA-256", RFC7677), ("SCRAM-SHA-1", RFC5802)],
    ids=["rfc7677", "rfc5802"],
)
def test_scram_server_reproduces_the_rfc_exchange(mechanism: str, vector: dict[str, bytes]) -> None:
    server = _vector_server(mechanism, vector)

    first = server.step(vector["client_first"])
    assert first.challenge == vector["server_first"]
    assert not first.complete and first.failure is None

    final = server.step(vector["client_final"])
    assert final.failure is None
    assert final.complete and final.principal == "user"
    assert final.challenge == vector["server_final"]


def test_scram_server_rejects_a_tampered_proof() -> None:
    server = _vector_server("SCRAM-SHA-256", RFC7677)
    server.step(RFC7677["client_first"])
    head, proof = RFC7677["client_final"].rsplit(b",p=", 1)
    raw = bytearray(base64.b64decode(proof))
    raw[-1] ^= 0x01
    step = server.step(head + b",p=" + base64.b64encode(bytes(raw)))
    assert not step.complete
    assert step.failure == "invalid-proof"
    assert step.challenge == b"e=invalid-proof"


def test_scram_server_rejects_a_proof_over_another_nonce() -> None:
    # The RFC's proof is bound to the RFC's nonce: a server that picked another nonce must refuse it.
    server = _vector_server("SCRAM-SHA-256", RFC7677)
    server.step(RFC7677["client_first"])
    other = ScramServer("SCRAM-SHA-256", server._credentials, server_nonce=lambda: "another-nonce")
    other.step(RFC7677["client_first"])
    assert other.step(RFC7677["client_final"]).failure == "other-error"  # r= does not match


def test_scram_unknown_user_gets_a_salt_then_unknown_user() -> None:
    server = ScramServer("SCRAM-SHA-512", {}.get)  # type: ignore[arg-type]
    client = ScramClient("SCRAM-SHA-512", "nobody", "x")
    server_first = server.step(client.first())
    assert server_first.failure is None and b",s=" in server_first.challenge
    final = server.step(client.final(server_first.challenge))
    assert final.failure == "unknown-user" and final.challenge == b"e=unknown-user"
    assert server.user == "nobody"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_round_trip_with_a_client(mechanism: str) -> None:
    credential = ScramCredential.from_password(mechanism, "s3cret, with = signs")
    server = ScramServer(mechanism, {"al,i=ce": credential}.get)
    client = ScramClient(mechanism, "al,i=ce", "s3cret, with = signs")
    final = server.step(client.final(server.step(client.first()).challenge))
    assert final.complete and final.principal == "al,i=ce"
    assert client.server_final_ok(final.challenge)


@pytest.mark.parametrize(
    ("client_first", "reason"),
    [
        (b"p=tls-unique,,n=user,r=abc", "channel-binding-not-supported"),
        (b"n,,m=ext,n=user,r=abc", "extensions-not-supported"),
        (b"n,,n=us=er,r=abc", "invalid-username-encoding"),
        (b"n,a=other,n=user,r=abc", "other-error"),
        (b"n,,r=abc,n=user", "invalid-encoding"),
        (b"x,,n=user,r=abc", "invalid-encoding"),
        (b"\xff\xfe", "invalid-encoding"),
    ],
)
def test_scram_client_first_errors(client_first: bytes, reason: str) -> None:
    server = _vector_server("SCRAM-SHA-256", RFC7677)
    step = server.step(client_first)
    assert step.failure == reason
    assert step.challenge == f"e={reason}".encode()


def test_scram_accepts_extensions_after_the_nonce() -> None:
    server = _vector_server("SCRAM-SHA-256", RFC7677)
    assert server.step(b"n,,n=user,r=abc,tokenauth=true").failure is None  # as Kafka's delegation tokens


def test_scram_client_final_channel_binding_must_match_the_gs2_header() -> None:
    server = _vector_server("SCRAM-SHA-256", RFC7677)
    server.step(b"y,,n=user,r=rOprNGfwEbeRWgbNEkqO")  # "y": client could bind, thinks we cannot
    step = server.step(RFC7677["client_final"])  # c=biws is "n,,"
    assert step.failure == "channel-bindings-dont-match"


def test_scram_accepts_the_authzid_of_the_user_itself() -> None:
    credential = ScramCredential.from_password("SCRAM-SHA-256", "pw")
    server = ScramServer("SCRAM-SHA-256", {"bob": credential}.get)
    step = server.step(b"n,a=bob,n=bob,r=abcdef")
    assert step.failure is None


def test_scram_iterations_below_4096_are_refused() -> None:
    with pytest.raises(ValueError, match="4096"):
        SaslFrontDoor({"a": "b"}, scram_iterations=1000)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I\u00adX", "IX"),  # RFC 4013 section 3 examples
        ("user", "user"),
        ("USER", "USER"),
        ("\u00aa", "a"),
        ("\u2168", "IX"),
        ("a\u00a0b", "a b"),
    ],
)
def test_saslprep_rfc4013_examples(text: str, expected: str) -> None:
    assert saslprep(text) == expected


@pytest.mark.parametrize("text", ["\u0007", "\u0627\u0031"])
def test_saslprep_refuses_prohibited_and_bidi_violations(text: str) -> None:
    with pytest.raises(ValueError):
        saslprep(text)


# --- PLAIN ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "complete", "reason"),
    [
        (b"\0alice\0alice-secret", True, None),
        (b"alice\0alice\0alice-secret", True, None),
        (b"\0alice\0wrong", False, "invalid-password"),
        (b"\0bob\0alice-secret", False, "unknown-user"),
        (b"bob\0alice\0alice-secret", False, "authorization-id-mismatch"),
        (b"alice\0alice-secret", False, "invalid-message"),
        (b"\0\0alice-secret", False, "invalid-message"),
        (b"\0alice\0", False, "invalid-message"),
    ],
)
def test_plain_server(message: bytes, complete: bool, reason: str | None) -> None:
    step = PlainServer({"alice": "alice-secret"}).step(message)
    assert step.complete is complete
    assert step.failure == reason
    if complete:
        assert step.principal == "alice" and step.challenge == b""


# --- OAUTHBEARER ------------------------------------------------------------------------------------------


def unsecured_jwt(claims: dict[str, object], header: dict[str, object] | None = None) -> str:
    def part(value: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part(header or {'alg': 'none'})}.{part(claims)}."


def bearer_message(token: str, gs2: str = "n,,", extra: str = "") -> bytes:
    return f"{gs2}\x01auth=Bearer {token}\x01{extra}\x01".encode()


NOW = 1_800_000_000.0


def fixed_clock() -> float:
    return NOW


def test_oauthbearer_accepts_a_valid_unsecured_jwt() -> None:
    server = OAuthBearerServer(unsecured_jwt_validator(clock=fixed_clock))
    token = unsecured_jwt({"sub": "alice", "iat": NOW - 10, "exp": NOW + 60})
    step = server.step(bearer_message(token, extra="host=localhost\x01port=9092\x01"))
    assert step.complete and step.principal == "alice" and step.expires_at == NOW + 60
    assert step.challenge == b""


@pytest.mark.parametrize(
    ("token", "gs2"),
    [
        (unsecured_jwt({"sub": "alice", "exp": NOW - 1}), "n,,"),  # expired
        (unsecured_jwt({"sub": "alice"}), "n,,"),  # no exp
        (unsecured_jwt({"exp": NOW + 60}), "n,,"),  # no sub
        (unsecured_jwt({"sub": "alice", "exp": NOW + 60}, {"alg": "HS256"}), "n,,"),  # not unsecured
        (unsecured_jwt({"sub": "alice", "exp": NOW + 60}) + "c2ln", "n,,"),  # has a signature
        (unsecured_jwt({"sub": "alice", "exp": NOW + 60, "iat": NOW + 600}), "n,,"),  # issued in future
        ("not-a-jwt", "n,,"),
        (unsecured_jwt({"sub": "alice", "exp": NOW + 60}), "n,a=bob,"),  # authzid is someone else
    ],
)
def test_oauthbearer_rejects_with_an_error_challenge_then_fails(token: str, gs2: str) -> None:
    server = OAuthBearerServer(unsecured_jwt_validator(clock=fixed_clock))
    step = server.step(bearer_message(token, gs2))
    assert not step.complete and step.failure is None  # RFC 7628 3.2.2: first an error challenge
    assert json.loads(step.challenge)["status"] == "invalid_token"
    final = server.step(b"\x01")
    assert final.failure is not None and not final.complete


@pytest.mark.parametrize(
    "message",
    [
        b"n,,\x01auth=Basic abc\x01\x01",
        b"n,,\x01auth=Bearer x\x01",  # missing the final kvsep
        b"n,,auth=Bearer x\x01\x01",  # missing the kvsep after the gs2 header
        b"n,,\x01host=x\x01\x01",  # no auth
        b"n,,\x011bad=x\x01auth=Bearer x\x01\x01",
    ],
)
def test_oauthbearer_malformed_messages_fail_at_once(message: bytes) -> None:
    step = OAuthBearerServer(unsecured_jwt_validator(clock=fixed_clock)).step(message)
    assert step.failure is not None


def test_oauthbearer_custom_validator_sees_extensions() -> None:
    seen: list[tuple[str, dict[str, str]]] = []

    def validator(token: str, extensions: Mapping[str, str]) -> OAuthToken:
        seen.append((token, dict(extensions)))
        raise InvalidTokenError("no", status="insufficient_scope")

    server = OAuthBearerServer(validator)
    step = server.step(bearer_message("opaque", extra="traceId=42\x01"))
    assert json.loads(step.challenge) == {"status": "insufficient_scope"}
    assert seen == [("opaque", {"traceId": "42"})]


# --- the door in front of the fake broker -----------------------------------------------------------------

HANDSHAKE_V = 1
AUTH_V = 2


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def fake_upstream() -> Iterator[SocketFakeBroker]:
    versions: dict[ApiKey, tuple[int, int]] = {
        k: v for k, v in CLIENT_VERSIONS.items() if k not in (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)
    }
    cluster = FakeCluster(api_versions=versions)
    cluster.create_topic("t", 2)
    broker = SocketFakeBroker(cluster)
    yield broker
    broker.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def door(fake_upstream: SocketFakeBroker, clock: FakeClock) -> Iterator[SaslFrontDoor]:
    with SaslFrontDoor(
        {"alice": "alice-secret", "bob": "bob-secret"}, upstream=fake_upstream.port, clock=clock
    ) as d:
        yield d


def connect(door: SaslFrontDoor) -> WireClient:
    return WireClient("127.0.0.1", door.port, timeout=5.0)


def scram_login(client: WireClient, user: str = "alice", password: str = "alice-secret") -> object:
    mechanism = "SCRAM-SHA-256"
    assert client.call(SaslHandshakeRequest(mechanism=mechanism), HANDSHAKE_V).error_code == 0
    scram = ScramClient(mechanism, user, password)
    first = client.call(SaslAuthenticateRequest(auth_bytes=scram.first()), AUTH_V)
    assert first.error_code == 0, first.error_message
    final = client.call(SaslAuthenticateRequest(auth_bytes=scram.final(first.auth_bytes)), AUTH_V)
    if final.error_code == 0:
        assert scram.server_final_ok(final.auth_bytes)
    return final


def metadata_ok(client: WireClient) -> bool:
    response = client.call(MetadataRequest(topics=None), 1)
    return any(t.name == "t" for t in response.topics)


def test_api_versions_before_login_is_forwarded_and_advertises_sasl(door: SaslFrontDoor) -> None:
    with connect(door) as client:
        response = client.call(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
        versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert versions[ApiKey.SASL_HANDSHAKE] == (0, 1)
        assert versions[ApiKey.SASL_AUTHENTICATE] == (0, 2)
        assert versions[ApiKey.FETCH] == CLIENT_VERSIONS[ApiKey.FETCH]  # the upstream's list


def test_any_other_request_before_login_closes_the_connection(door: SaslFrontDoor) -> None:
    with connect(door) as client:
        client.send(MetadataRequest(topics=None), 1)
        assert client.closed_by_peer()
    (record,) = door.connections()
    record = door.wait_for_closed(record.connection_id)
    assert "before authentication" in record.close_reason
    assert record.forwarded_requests == 0


def test_scram_login_then_forwarding(door: SaslFrontDoor) -> None:
    with connect(door) as client:
        assert scram_login(client).error_code == 0  # type: ignore[attr-defined]
        assert metadata_ok(client)
    login = door.wait_for_login(user="alice", success=True)
    assert login.mechanism == "SCRAM-SHA-256" and not login.reauthentication
    assert door.connections()[0].principal == "alice"


def test_wrong_password_gets_error_58_and_a_close(door: SaslFrontDoor) -> None:
    with connect(door) as client:
        final = scram_login(client, password="nope")
        assert final.error_code == 58  # type: ignore[attr-defined]
        assert "invalid-proof" in final.error_message  # type: ignore[attr-defined]
        assert final.auth_bytes == b"e=invalid-proof"  # type: ignore[attr-defined]
        assert client.closed_by_peer()
    assert door.wait_for_login(success=False).reason == "invalid-proof"


def test_unsupported_mechanism_is_refused_with_the_list(door: SaslFrontDoor) -> None:
    with connect(door) as client:
        response = client.call(SaslHandshakeRequest(mechanism="GSSAPI"), HANDSHAKE_V)
        assert response.error_code == 33
        assert response.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
        assert client.closed_by_peer()


def test_authenticate_without_handshake_is_an_illegal_state(door: SaslFrontDoor) -> None:
    with connect(door) as client:
        response = client.call(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), AUTH_V)
        assert response.error_code == 34
        assert client.closed_by_peer()


@pytest.mark.parametrize("auth_version", [0, 1, 2])
def test_plain_login_at_every_authenticate_version(door: SaslFrontDoor, auth_version: int) -> None:
    door.session_lifetime_ms = 60_000
    with connect(door) as client:
        assert client.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        response = client.call(SaslAuthenticateRequest(auth_bytes=b"\0bob\0bob-secret"), auth_version)
        assert response.error_code == 0
        assert response.session_lifetime_ms == (60_000 if auth_version >= 1 else 0)
        assert metadata_ok(client)


def test_handshake_v0_takes_raw_tokens(door: SaslFrontDoor) -> None:
    with connect(door) as client:
        assert client.call(SaslHandshakeRequest(mechanism="PLAIN"), 0).error_code == 0
        client.send_frame(b"\0alice\0alice-secret")  # a bare token, no request header
        assert client.recv_frame() == b""  # a bare, empty answer
        assert metadata_ok(client)
    assert door.wait_for_login(user="alice", mechanism="PLAIN").success


def test_reauthentication_on_an_open_connection(door: SaslFrontDoor, clock: FakeClock) -> None:
    door.session_lifetime_ms = 1000
    with connect(door) as client:
        assert scram_login(client).session_lifetime_ms == 1000  # type: ignore[attr-defined]
        assert metadata_ok(client)
        clock.now += 0.9
        # Re-authenticate while a forwarded request is still unanswered: answers keep request order.
        metadata_id = client.send(MetadataRequest(topics=None), 1)
        handshake_id = client.send(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), HANDSHAKE_V)
        assert client.receive(ApiKey.METADATA, 1)[0] == metadata_id
        got, handshake = client.receive(ApiKey.SASL_HANDSHAKE, HANDSHAKE_V)
        assert got == handshake_id and handshake.error_code == 0
        scram = ScramClient("SCRAM-SHA-256", "alice", "alice-secret")
        first = client.call(SaslAuthenticateRequest(auth_bytes=scram.first()), AUTH_V)
        final = client.call(SaslAuthenticateRequest(auth_bytes=scram.final(first.auth_bytes)), AUTH_V)
        assert final.error_code == 0 and final.session_lifetime_ms == 1000
        clock.now += 0.9  # past the first session's end, inside the second's
        assert metadata_ok(client)
    record = door.wait_for_login(reauthentication=True)
    assert record.success and record.user == "alice"


def test_an_expired_session_closes_on_the_next_request(door: SaslFrontDoor, clock: FakeClock) -> None:
    door.session_lifetime_ms = 500
    with connect(door) as client:
        scram_login(client)
        assert metadata_ok(client)
        clock.now += 0.5
        client.send(MetadataRequest(topics=None), 1)
        assert client.closed_by_peer()
    record = door.wait_for_closed(door.connections()[0].connection_id)
    assert "expired" in record.close_reason


def test_reauthentication_must_keep_the_principal(door: SaslFrontDoor) -> None:
    with connect(door) as client:
        scram_login(client)
        final = scram_login(client, user="bob", password="bob-secret")
        assert final.error_code == 58  # type: ignore[attr-defined]
        assert client.closed_by_peer()
    record = door.wait_for_login(reauthentication=True)
    assert not record.success and "principal" in record.reason


def test_reauthentication_must_keep_the_mechanism(door: SaslFrontDoor) -> None:
    with connect(door) as client:
        scram_login(client)
        response = client.call(SaslHandshakeRequest(mechanism="PLAIN"), HANDSHAKE_V)
        assert response.error_code == 33 and response.mechanisms == ["SCRAM-SHA-256"]
        assert client.closed_by_peer()


def test_produce_without_acks_gets_no_answer_and_does_not_block_the_next(door: SaslFrontDoor) -> None:
    with connect(door) as client:
        scram_login(client)
        for version in (3, 9):  # nullable string and compact (flexible) transactional id before acks
            client.send(
                ProduceRequest(transactional_id="tx-1", acks=0, timeout_ms=1000, topic_data=[]), version
            )
        assert metadata_ok(client)


def test_oauthbearer_session_ends_with_the_token(door: SaslFrontDoor) -> None:
    door.session_lifetime_ms = 3_600_000
    token = unsecured_jwt({"sub": "carol", "iat": time.time(), "exp": time.time() + 30})
    with connect(door) as client:
        assert client.call(SaslHandshakeRequest(mechanism="OAUTHBEARER"), HANDSHAKE_V).error_code == 0
        response = client.call(SaslAuthenticateRequest(auth_bytes=bearer_message(token)), AUTH_V)
        assert response.error_code == 0
        assert 25_000 <= response.session_lifetime_ms <= 30_000
        assert metadata_ok(client)
    assert door.wait_for_login(mechanism="OAUTHBEARER").user == "carol"


def test_oauthbearer_failure_goes_through_the_error_challenge(door: SaslFrontDoor) -> None:
    token = unsecured_jwt({"sub": "carol", "exp": time.time() - 5})
    with connect(door) as client:
        client.call(SaslHandshakeRequest(mechanism="OAUTHBEARER"), HANDSHAKE_V)
        challenge = client.call(SaslAuthenticateRequest(auth_bytes=bearer_message(token)), AUTH_V)
        assert challenge.error_code == 0 and json.loads(challenge.auth_bytes)["status"] == "invalid_token"
        final = client.call(SaslAuthenticateRequest(auth_bytes=b"\x01"), AUTH_V)
        assert final.error_code == 58 and "expired" in final.error_message
        assert client.closed_by_peer()
    record = door.wait_for_login(mechanism="OAUTHBEARER")
    assert not record.success and record.user == "carol"


def test_stop_closes_open_connections(fake_upstream: SocketFakeBroker) -> None:
    door = SaslFrontDoor({"alice": "alice-secret"}, upstream=fake_upstream.port).start()
    client = connect(door)
    scram_login(client)
    door.stop()
    assert client.closed_by_peer()
    client.close()
    assert all(c.closed_at is not None for c in door.connections())


# --- GSSAPI: the acceptor against python-gssapi's initiator, tickets from the test KDC --------------------


def _gss_initiator(kerberos: KerberosRealm, host: str = "127.0.0.1") -> Any:
    import gssapi

    credentials = gssapi.Credentials(
        name=gssapi.Name(kerberos.client_principal, gssapi.NameType.kerberos_principal),
        usage="initiate",
        store={"client_keytab": str(kerberos.client_keytab), "ccache": "MEMORY:door-test"},
    )
    return gssapi.SecurityContext(
        name=gssapi.Name(f"kafka@{host}", gssapi.NameType.hostbased_service),
        creds=credentials,
        usage="initiate",
        flags=gssapi.RequirementFlag.mutual_authentication,
    )


def _gss_server(kerberos: KerberosRealm) -> GssapiServer:
    return GssapiServer(*gssapi_acceptor_factory(kerberos.service_keytab))


def _gss_establish(server: GssapiServer, client: Any) -> bytes:
    """Run the context tokens; returns the server's wrapped security-layer offer."""
    step = server.step(client.step(None))
    assert step.failure is None and not step.complete and step.challenge  # the AP-REP
    assert client.step(step.challenge) is None and client.complete
    offer = server.step(b"")  # the client's empty message after its context is established
    assert offer.failure is None and not offer.complete
    return offer.challenge


def test_gssapi_server_offers_no_security_layer_and_takes_the_client_principal(
    kerberos: KerberosRealm,
) -> None:
    server, client = _gss_server(kerberos), _gss_initiator(kerberos)
    offer = client.unwrap(_gss_establish(server, client)).message
    assert offer == b"\x01\x01\x00\x00"  # RFC 4752: "no security layer" only, a 64 KiB buffer
    reply = b"\x01\x00\x00\x00" + b"somebody-else"
    done = server.step(client.wrap(reply, False).message)
    assert done.complete and done.failure is None
    # Kafka's broker: the principal is the Kerberos client's; the authorization id is only logged
    assert done.principal == kerberos.client_principal and server.user == kerberos.client_principal
    assert done.authorization_id == "somebody-else" and done.security_layer == b"\x01\x00\x00\x00"


@pytest.mark.parametrize(
    ("reply", "reason"), [(b"\x02\x00\x10\x00", "security-layer-not-offered"), (b"\x01", "invalid")]
)
def test_gssapi_server_refuses_a_layer_it_did_not_offer(
    kerberos: KerberosRealm, reply: bytes, reason: str
) -> None:
    server, client = _gss_server(kerberos), _gss_initiator(kerberos)
    _gss_establish(server, client)
    step = server.step(client.wrap(reply, False).message)
    assert not step.complete and step.failure is not None and step.failure.startswith(reason)


def test_gssapi_server_refuses_a_forged_token(kerberos: KerberosRealm) -> None:
    step = _gss_server(kerberos).step(b"\x60\x10not a kerberos token")
    assert not step.complete and step.failure is not None and step.failure.startswith("gss-error:")


def test_gssapi_needs_a_keytab() -> None:
    with pytest.raises(ValueError, match="gssapi_keytab"):
        SaslFrontDoor({}, mechanisms=("GSSAPI",))


def _processes_in(directory: Path) -> list[int]:
    """PIDs of the processes whose working directory is ``directory`` (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if os.readlink(entry / "cwd") == str(directory):
                    found.append(int(entry.name))
    return found


@pytest.mark.parametrize("clock_offset", [None, "-1h"])
def test_the_kdc_stops_by_pid_and_leaves_no_process(
    kerberos: KerberosRealm, clock_offset: str | None
) -> None:
    kdc = TestKdc(realm="OTHER.TEST", clock_offset=clock_offset).start()
    pid = kdc.pid
    assert pid is not None and kdc.is_alive()
    assert _processes_in(kdc.workdir) == [pid]  # krb5kdc itself, no wrapper in between
    kdc.stop()
    assert not kdc.is_alive() and kdc.pid is None
    assert _processes_in(kdc.workdir) == []
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    workdir = kdc.workdir
    kdc.cleanup()
    assert not workdir.exists()
