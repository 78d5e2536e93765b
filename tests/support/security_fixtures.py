"""TLS and SASL test doubles as pytest fixtures, and wire-level helpers. Not a test module.

No broker here does TLS or SASL end to end (see docs/brokers.md), so the
fixtures put real parts together: Tansu (memory storage), stunnel4 as the TLS terminator
(:mod:`support.tls`) and the SASL front door (:mod:`support.sasl_front_door`). Tansu always
advertises the port the client must use, so every connection goes through the doubles.

Fixtures (imported by ``conftest.py``):

=========================  =========================================================================
``certs``                  session: a :class:`~support.certs.TestCerts` directory
``tls_tansu``              session: Tansu behind stunnel (server cert for 127.0.0.1/localhost); SSL
``mtls_tansu``             session: the same, but stunnel requires a client certificate from the CA
``tls_tansu_other_host``   session: stunnel serves the cert for ``other.example`` (host name check fails)
``sasl_tansu``             session: Tansu behind the SASL front door, users {"alice": "alice-secret"};
                           SASL_PLAINTEXT
``sasl_ssl_tansu``         session: stunnel -> front door -> Tansu; SASL_SSL
``make_sasl_tansu``        factory for a private front door with other options (session lifetime,
                           token validator, mechanisms, ``gssapi_keytab``, ``tls=True``); stopped
                           after the test
``kerberos``               session: a :class:`KerberosRealm`: an MIT KDC (:mod:`support.kdc`) for
                           KAFLUX.TEST, the brokers' service keytab (``kafka/localhost``,
                           ``kafka/127.0.0.1``) and the client ``alice`` with her keytab; the
                           process's Kerberos environment (KRB5_CONFIG...) points at it meanwhile
``gssapi_tansu``           session: Tansu behind the front door offering GSSAPI only; SASL_PLAINTEXT
``gssapi_ssl_tansu``       session: stunnel -> GSSAPI front door -> Tansu; SASL_SSL
=========================  =========================================================================

Each yields a :class:`SecureTansu`: ``.bootstrap_servers``, ``.security_protocol``, ``.certs``,
``.door`` (the front door, for its log), ``.username`` / ``.password`` and :meth:`SecureTansu.config`,
which returns the client settings (keys that kaflux and confluent-kafka share)::

    def test_scram_login(sasl_tansu):
        consumer = Consumer(sasl_tansu.config("SCRAM-SHA-512", **{"group.id": "g"}))

The session doubles are shared: do not stop them or change their door's settings; use
``make_sasl_tansu`` for that. Tests should not rely on the door's log being empty: take
``door.log_position()`` first and look at what came after.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import os
import secrets
import socket
import ssl
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kaflux.devbrokers.brokers import BrokerUnavailableError, TansuBroker
from kaflux.protocol.api import REQUESTS, ApiKey, request_header_version, response_header_version
from kaflux.protocol.messages.headers import RequestHeader, ResponseHeader
from kaflux.protocol.primitives import Reader, Writer

from support.certs import TestCerts, generate_certs
from support.kdc import KdcUnavailableError, TestKdc
from support.sasl_front_door import SaslFrontDoor
from support.tls import TlsTerminator, TlsUnavailableError, start_tansu_behind_tls

__all__ = [
    "SECURITY_FIXTURES",
    "USERS",
    "KerberosRealm",
    "ScramClient",
    "SecureTansu",
    "WireClient",
    "certs",
    "gssapi_ssl_tansu",
    "gssapi_tansu",
    "kerberos",
    "make_sasl_tansu",
    "mtls_tansu",
    "sasl_ssl_tansu",
    "sasl_tansu",
    "start_sasl_tansu",
    "start_tls_tansu",
    "tls_tansu",
    "tls_tansu_other_host",
]

#: The users of the front door in the shared fixtures.
USERS: dict[str, str] = {"alice": "alice-secret"}

#: Fixture names that start brokers (conftest marks tests using them as integration tests).
SECURITY_FIXTURES = frozenset(
    {
        "tls_tansu",
        "mtls_tansu",
        "tls_tansu_other_host",
        "sasl_tansu",
        "sasl_ssl_tansu",
        "make_sasl_tansu",
        "kerberos",
        "gssapi_tansu",
        "gssapi_ssl_tansu",
    }
)


@dataclass
class SecureTansu:
    """A Tansu broker reachable only through TLS and/or the SASL front door."""

    bootstrap_servers: str
    security_protocol: str  # "SSL", "SASL_PLAINTEXT" or "SASL_SSL"
    broker: TansuBroker
    certs: TestCerts | None = None
    terminator: TlsTerminator | None = None
    door: SaslFrontDoor | None = None
    users: dict[str, str] = field(default_factory=dict)
    #: mutual TLS: the client must present ``certs.client_cert``
    client_cert_required: bool = False
    username: str = "alice"
    password: str = "alice-secret"

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    def config(self, mechanism: str | None = None, **overrides: Any) -> dict[str, Any]:
        """Client settings for this double (kaflux and confluent-kafka spell them alike).

        With SASL, ``mechanism`` defaults to SCRAM-SHA-256 and the credentials are
        ``username``/``password``; OAUTHBEARER uses an unsecured JWT naming ``username``; GSSAPI
        names only the service (kafka): add ``sasl.kerberos.keytab``/``principal`` or a ticket cache.
        ``overrides`` (dotted keys as ``**{"group.id": "g"}``) win.
        """
        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers,
            "security.protocol": self.security_protocol,
        }
        if self.uses_tls:
            assert self.certs is not None
            config["ssl.ca.location"] = str(self.certs.ca_cert)
            if self.client_cert_required:
                config["ssl.certificate.location"] = str(self.certs.client_cert)
                config["ssl.key.location"] = str(self.certs.client_key)
                config["ssl.key.password"] = self.certs.client_key_password
        if self.door is not None:
            mechanism = (mechanism or "SCRAM-SHA-256").upper()
            config["sasl.mechanism"] = mechanism
            if mechanism == "OAUTHBEARER":
                config["sasl.oauthbearer.config"] = f"principal={self.username}"
                config["enable.sasl.oauthbearer.unsecure.jwt"] = True
            elif mechanism == "GSSAPI":
                config["sasl.kerberos.service.name"] = "kafka"
            else:
                config["sasl.username"] = self.username
                config["sasl.password"] = self.password
        config.update(overrides)
        return config

    def stop(self) -> None:
        """Stop every part: stunnel, the door, Tansu (and delete their work directories)."""
        if self.terminator is not None:
            self.terminator.cleanup()
        if self.door is not None:
            self.door.stop()
        self.broker.cleanup()


def start_tls_tansu(
    certs: TestCerts,
    *,
    cert: Path | None = None,
    key: Path | None = None,
    mutual: bool = False,
) -> SecureTansu:
    """Tansu behind stunnel serving ``cert``/``key`` (default: the 127.0.0.1 server certificate)."""
    broker, terminator = start_tansu_behind_tls(
        cert=cert or certs.server_cert,
        key=key or certs.server_key,
        client_ca=certs.ca_cert if mutual else None,
    )
    return SecureTansu(
        bootstrap_servers=terminator.bootstrap_servers,
        security_protocol="SSL",
        broker=broker,
        certs=certs,
        terminator=terminator,
        client_cert_required=mutual,
    )


def start_sasl_tansu(
    users: dict[str, str] | None = None, *, certs: TestCerts | None = None, **door_options: Any
) -> SecureTansu:
    """Tansu behind the SASL front door; with ``certs``, also behind stunnel (SASL_SSL)."""
    users = dict(USERS if users is None else users)
    door = SaslFrontDoor(users, **door_options).start()
    try:
        if certs is None:
            broker = TansuBroker(advertised_port=door.port).start()
            door.set_upstream(broker.port)
            return SecureTansu(
                bootstrap_servers=door.bootstrap_servers,
                security_protocol="SASL_PLAINTEXT",
                broker=broker,
                door=door,
                users=users,
            )
        broker, terminator = start_tansu_behind_tls(
            cert=certs.server_cert, key=certs.server_key, upstream_port=door.port
        )
        door.set_upstream(broker.port)
        return SecureTansu(
            bootstrap_servers=terminator.bootstrap_servers,
            security_protocol="SASL_SSL",
            broker=broker,
            certs=certs,
            terminator=terminator,
            door=door,
            users=users,
        )
    except BaseException:
        door.stop()
        raise


@contextlib.contextmanager
def _skip_if_unavailable() -> Iterator[None]:
    try:
        yield
    except (BrokerUnavailableError, TlsUnavailableError, KdcUnavailableError) as e:
        pytest.skip(f"security test double not available: {e}")


def _session_double(start: Callable[[], SecureTansu]) -> Iterator[SecureTansu]:
    with _skip_if_unavailable():
        double = start()
    try:
        yield double
    finally:
        double.stop()


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TestCerts:
    """CA, server, wrong-CA, other-host and client (encrypted key) certificates as PEM files."""
    return generate_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="session")
def tls_tansu(certs: TestCerts) -> Iterator[SecureTansu]:
    """Tansu advertised on a stunnel TLS port (SSL; trust ``certs.ca_cert``)."""
    yield from _session_double(lambda: start_tls_tansu(certs))


@pytest.fixture(scope="session")
def mtls_tansu(certs: TestCerts) -> Iterator[SecureTansu]:
    """Like ``tls_tansu``, but stunnel requires a client certificate signed by the test CA."""
    yield from _session_double(lambda: start_tls_tansu(certs, mutual=True))


@pytest.fixture(scope="session")
def tls_tansu_other_host(certs: TestCerts) -> Iterator[SecureTansu]:
    """Like ``tls_tansu``, but stunnel presents the certificate for ``other.example`` only."""
    yield from _session_double(
        lambda: start_tls_tansu(certs, cert=certs.other_host_cert, key=certs.other_host_key)
    )


@pytest.fixture(scope="session")
def sasl_tansu() -> Iterator[SecureTansu]:
    """Tansu behind the SASL front door (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER); SASL_PLAINTEXT."""
    yield from _session_double(start_sasl_tansu)


@pytest.fixture(scope="session")
def sasl_ssl_tansu(certs: TestCerts) -> Iterator[SecureTansu]:
    """stunnel (TLS) -> SASL front door -> Tansu; SASL_SSL."""
    yield from _session_double(lambda: start_sasl_tansu(certs=certs))


@pytest.fixture
def make_sasl_tansu(certs: TestCerts) -> Iterator[Callable[..., SecureTansu]]:
    """Factory: ``make_sasl_tansu(tls=False, users=None, **door_options)`` for a private double."""
    started: list[SecureTansu] = []

    def make(*, tls: bool = False, users: dict[str, str] | None = None, **door_options: Any) -> SecureTansu:
        with _skip_if_unavailable():
            double = start_sasl_tansu(users, certs=certs if tls else None, **door_options)
        started.append(double)
        return double

    yield make
    for double in started:
        double.stop()


# --- Kerberos ---------------------------------------------------------------------------------------------


@dataclass
class KerberosRealm:
    """A running test KDC with the brokers' service keytab and one client, ``alice``."""

    kdc: TestKdc
    service_keytab: Path
    client_keytab: Path
    client: str = "alice"

    @property
    def realm(self) -> str:
        return self.kdc.realm

    @property
    def client_principal(self) -> str:
        return self.kdc.principal(self.client)

    def keytab_config(self) -> dict[str, str]:
        """The kaflux settings of a keytab login as ``alice``."""
        return {
            "sasl.kerberos.keytab": str(self.client_keytab),
            "sasl.kerberos.principal": self.client_principal,
        }

    def kinit(self, ccache: Path) -> Path:
        """``kinit -k -t`` alice's keytab into ``ccache``: a ticket cache as a user's login makes."""
        return self.kdc.kinit(self.client, self.client_keytab, ccache)


#: the host names the brokers are reached by in the tests (Tansu advertises 127.0.0.1)
SERVICE_HOSTS = ("localhost", "127.0.0.1")


def start_kerberos_realm() -> tuple[KerberosRealm, dict[str, str | None]]:
    """A started KDC with principals and keytabs; and the environment variables it replaced."""
    kdc = TestKdc().start()
    try:
        service_keytab = kdc.path("kafka.keytab")
        for host in SERVICE_HOSTS:
            kdc.add_principal(f"kafka/{host}", keytab=service_keytab)
        client_keytab = kdc.path("alice.keytab")
        kdc.add_principal("alice", keytab=client_keytab)
    except BaseException:
        kdc.cleanup()
        raise
    saved = {key: os.environ.get(key) for key in kdc.environment()}
    os.environ.update(kdc.environment())
    return KerberosRealm(kdc, service_keytab, client_keytab), saved


@pytest.fixture(scope="session")
def kerberos() -> Iterator[KerberosRealm]:
    """An MIT KDC for KAFLUX.TEST; this process's Kerberos environment points at it meanwhile."""
    with _skip_if_unavailable():
        realm, saved = start_kerberos_realm()
    try:
        yield realm
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        realm.kdc.cleanup()


@pytest.fixture(scope="session")
def gssapi_tansu(kerberos: KerberosRealm) -> Iterator[SecureTansu]:
    """Tansu behind the SASL front door offering GSSAPI only (the KDC's service keytab); SASL_PLAINTEXT."""
    yield from _session_double(
        lambda: start_sasl_tansu(mechanisms=("GSSAPI",), gssapi_keytab=kerberos.service_keytab)
    )


@pytest.fixture(scope="session")
def gssapi_ssl_tansu(kerberos: KerberosRealm, certs: TestCerts) -> Iterator[SecureTansu]:
    """stunnel (TLS) -> GSSAPI front door -> Tansu; SASL_SSL."""
    yield from _session_double(
        lambda: start_sasl_tansu(certs=certs, mechanisms=("GSSAPI",), gssapi_keytab=kerberos.service_keytab)
    )


# --- wire-level helpers ----------------------------------------------------------------------------------

_SIZE = struct.Struct(">i")


class WireClient:
    """A blocking Kafka-protocol connection for tests: send requests, read answers, see closes.

    Every read is bounded by ``timeout`` seconds (TimeoutError past it).
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
        timeout: float = 5.0,
        client_id: str = "kaflux-wire-test",
    ) -> None:
        sock = socket.create_connection((host, port), timeout=timeout)
        if ssl_context is not None:
            sock = ssl_context.wrap_socket(sock, server_hostname=server_hostname or host)
        self.sock = sock
        self.timeout = timeout
        self.client_id = client_id
        self._next_id = 1

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, request: Any, version: int, *, correlation_id: int | None = None) -> int:
        """Send ``request`` (a generated request object) at ``version``; returns its correlation id."""
        if correlation_id is None:
            correlation_id, self._next_id = self._next_id, self._next_id + 1
        api_key = int(request.API_KEY)
        w = Writer()
        RequestHeader(api_key, version, correlation_id, self.client_id).encode(
            w, request_header_version(api_key, version)
        )
        request.encode(w, version)
        self.send_frame(w.getvalue())
        return correlation_id

    def send_frame(self, body: bytes) -> None:
        self.sock.sendall(_SIZE.pack(len(body)) + body)

    def recv_frame(self) -> bytes | None:
        """The next frame's body; None when the peer closed the connection at a frame boundary."""
        prefix = self._recv_exactly(4)
        if prefix is None:
            return None
        body = self._recv_exactly(_SIZE.unpack(prefix)[0])
        if body is None:
            raise ConnectionError("connection closed in the middle of a frame")
        return body

    def receive(self, api_key: int, version: int) -> tuple[int, Any]:
        """Read the next answer, decoded as ``api_key`` at ``version``: ``(correlation_id, response)``."""
        body = self.recv_frame()
        if body is None:
            raise ConnectionError("the connection was closed instead of answering")
        reader = Reader(body)
        header = ResponseHeader.decode(reader, response_header_version(api_key, version))
        return header.correlation_id, REQUESTS[ApiKey(api_key)].RESPONSE.decode(reader, version)

    def call(self, request: Any, version: int) -> Any:
        """Send ``request`` and return its decoded answer."""
        correlation_id = self.send(request, version)
        got, response = self.receive(int(request.API_KEY), version)
        assert got == correlation_id, f"answer for correlation id {got}, expected {correlation_id}"
        return response

    def closed_by_peer(self) -> bool:
        """True when the peer closes the connection (within ``timeout``) without sending anything more."""
        self.sock.settimeout(self.timeout)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True

    def _recv_exactly(self, n: int) -> bytes | None:
        deadline = time.monotonic() + self.timeout
        data = bytearray()
        while len(data) < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no complete frame within {self.timeout} s")
            self.sock.settimeout(remaining)
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                if data:
                    raise ConnectionError("connection closed in the middle of a frame")
                return None
            data += chunk
        return bytes(data)


class ScramClient:
    """The client side of SCRAM (RFC 5802), for driving servers in tests. No channel binding."""

    def __init__(self, mechanism: str, user: str, password: str, *, nonce: str | None = None) -> None:
        self.hash = {"SCRAM-SHA-1": "sha1", "SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
        self.user = user
        self.password = password
        self.nonce = nonce or base64.b64encode(secrets.token_bytes(18)).decode()
        self.client_first_bare = f"n={user.replace('=', '=3D').replace(',', '=2C')},r={self.nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self.client_first_bare}".encode()

    def final(self, server_first: bytes, *, tamper: bool = False) -> bytes:
        """The client-final message for ``server_first``; ``tamper`` flips a bit of the proof."""
        attrs = dict(item.split("=", 1) for item in server_first.decode().split(","))
        salted = hashlib.pbkdf2_hmac(
            self.hash, self.password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"])
        )
        without_proof = f"c=biws,r={attrs['r']}"
        auth_message = f"{self.client_first_bare},{server_first.decode()},{without_proof}".encode()
        client_key = hmac.new(salted, b"Client Key", self.hash).digest()
        stored_key = hashlib.new(self.hash, client_key).digest()
        signature = hmac.new(stored_key, auth_message, self.hash).digest()
        proof = bytearray(a ^ b for a, b in zip(client_key, signature, strict=True))
        if tamper:
            proof[0] ^= 0x01
        server_key = hmac.new(salted, b"Server Key", self.hash).digest()
        self._server_signature = hmac.new(server_key, auth_message, self.hash).digest()
        return f"{without_proof},p={base64.b64encode(bytes(proof)).decode()}".encode()

    def server_final_ok(self, server_final: bytes) -> bool:
        """Whether ``server_final`` is ``v=`` with the signature the server must have computed."""
        return server_final == b"v=" + base64.b64encode(self._server_signature)
