"""The fault proxy's TLS framing (``framing="tls"``): in front of a TLS echo server, it forwards
TLS records untouched, counts them by content type, and its cuts break the handshake or a large
write, as resets when ``rst_cuts`` is set. The client is Python's ``ssl`` (independent of kaflux)."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator

import pytest

from support.certs import TestCerts
from support.fault_proxy import TLS_APPLICATION_DATA, TLS_HANDSHAKE, FaultProxy

WAIT_S = 10.0


class EchoServer:
    """A TLS server on 127.0.0.1 echoing what each connection sends, one thread per connection."""

    def __init__(self, certs: TestCerts) -> None:
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._context.load_cert_chain(certs.server_cert, certs.server_key)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self.port = int(self._listener.getsockname()[1])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(WAIT_S)
        try:
            with self._context.wrap_socket(conn, server_side=True) as tls:
                while data := tls.recv(65536):
                    tls.sendall(data)
        except (OSError, ssl.SSLError):
            pass

    def close(self) -> None:
        self._stop.set()
        self._thread.join(WAIT_S)
        self._listener.close()


@pytest.fixture
def relay(certs: TestCerts) -> Iterator[FaultProxy]:
    server = EchoServer(certs)
    proxy = FaultProxy(("127.0.0.1", server.port), framing="tls", rst_cuts=True).start()
    yield proxy
    proxy.close()
    server.close()


def _connect(proxy: FaultProxy, certs: TestCerts) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=str(certs.ca_cert))
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=WAIT_S)
    return context.wrap_socket(sock, server_hostname="127.0.0.1")


def _echo(tls: ssl.SSLSocket, data: bytes) -> bytes:
    tls.sendall(data)
    got = b""
    while len(got) < len(data):
        chunk = tls.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


def test_records_are_forwarded_untouched_and_counted_by_content_type(
    relay: FaultProxy, certs: TestCerts
) -> None:
    with _connect(relay, certs) as tls:
        assert _echo(tls, b"hello") == b"hello"
        assert _echo(tls, b"x" * 50_000) == b"x" * 50_000
    stats = relay.stats()
    assert stats.requests_of(TLS_HANDSHAKE) >= 1 and stats.responses_of(TLS_HANDSHAKE) >= 1
    assert stats.requests_of(TLS_APPLICATION_DATA) >= 4  # 50 kB are several 16 kB records


def test_a_cut_during_the_handshake_is_a_reset(relay: FaultProxy, certs: TestCerts) -> None:
    fault = relay.cut_mid_response(TLS_HANDSHAKE)
    with pytest.raises(ConnectionResetError):
        _connect(relay, certs)
    assert fault.fired == 1
    with _connect(relay, certs) as tls:  # the next connection is not touched
        assert _echo(tls, b"again") == b"again"


def test_a_large_write_is_cut_halfway_and_small_ones_pass(relay: FaultProxy, certs: TestCerts) -> None:
    fault = relay.cut_mid_request(TLS_APPLICATION_DATA, min_bytes=8000)
    with _connect(relay, certs) as tls:
        assert _echo(tls, b"small") == b"small"
        assert fault.fired == 0
        try:
            echoed = _echo(tls, b"y" * 40_000)
        except (ConnectionResetError, ssl.SSLError):
            echoed = b""
        assert len(echoed) < 40_000, "the large write went through whole"
    assert fault.fired == 1
