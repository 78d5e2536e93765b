"""A :class:`fakes.FakeCluster` served over real loopback sockets (optionally TLS), for tests of
the real clients against broker behaviour no real broker here shows on demand. Not a test module. [test: one
daemon thread per connection]

It answers ApiVersions with the cluster's versions and everything else with
``FakeCluster.handle``. Faults: :meth:`SocketFakeBroker.close_after` makes the broker send
the response to the next ``count`` requests of a kind and close the connection in the same
write, as a crashing broker does, so the answer and the close arrive in one read;
:meth:`SocketFakeBroker.garble` answers the next requests of a kind with a wrong correlation id.
"""

from __future__ import annotations

import socket
import ssl
import struct
import threading
from typing import Any

from kaflux.protocol.api import REQUESTS, ApiKey, request_header_version, response_header_version
from kaflux.protocol.messages.api_versions import ApiVersion, ApiVersionsRequest, ApiVersionsResponse
from kaflux.protocol.messages.headers import RequestHeader, ResponseHeader
from kaflux.protocol.primitives import Reader, Writer
from kaflux.structs import Node

from support.fakes import FakeCluster

_SIZE = struct.Struct(">i")
#: Kafka's socket.request.max.bytes default
MAX_REQUEST_BYTES = 100 * 1024 * 1024


def read_exactly(conn: socket.socket, stop: threading.Event, n: int) -> bytes | None:
    """``n`` bytes from a socket with a short timeout; None when it closes or ``stop`` is set."""
    data = b""
    while len(data) < n:
        if stop.is_set():
            return None
        try:
            chunk = conn.recv(n - len(data))
        except TimeoutError:
            continue
        except OSError:
            return None
        if not chunk:
            return None
        data += chunk
    return data


class SocketFakeBroker:
    """Broker 0 of ``cluster`` (a one-broker FakeCluster) on a free 127.0.0.1 port."""

    def __init__(self, cluster: FakeCluster, *, ssl_context: ssl.SSLContext | None = None) -> None:
        self.cluster = cluster
        self._ssl_context = ssl_context
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self.port: int = self._listener.getsockname()[1]
        cluster.brokers[0] = Node(0, "127.0.0.1", self.port)
        self.bootstrap_servers = f"127.0.0.1:{self.port}"
        self._lock = threading.Lock()
        self._close_after: dict[type[Any], int] = {}
        self._garble: dict[type[Any], int] = {}
        #: connections accepted, and connections closed by a close_after fault
        self.connections = 0
        self.crashes = 0
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        accept = threading.Thread(target=self._accept, name="socket-fake-broker", daemon=True)
        accept.start()
        self._threads.append(accept)

    def close_after(self, request_type: type[Any], count: int = 1) -> None:
        """Answer the next ``count`` requests of ``request_type`` and close each connection
        in the same write."""
        with self._lock:
            self._close_after[request_type] = self._close_after.get(request_type, 0) + count

    def garble(self, request_type: type[Any], count: int = 1) -> None:
        """Answer the next ``count`` requests of ``request_type`` with a wrong correlation id."""
        with self._lock:
            self._garble[request_type] = self._garble.get(request_type, 0) + count

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(5)
        self._listener.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self.connections += 1
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _serve(self, conn: socket.socket) -> None:
        if self._ssl_context is not None:
            conn.settimeout(5)
            try:
                conn = self._ssl_context.wrap_socket(conn, server_side=True)
            except (ssl.SSLError, OSError):
                conn.close()
                return  # the client refused us, or does not speak TLS
        with conn:
            conn.settimeout(0.05)
            while True:
                size = read_exactly(conn, self._stop, 4)
                if size is not None and not 0 <= _SIZE.unpack(size)[0] <= MAX_REQUEST_BYTES:
                    return  # as Kafka: an oversized request (e.g. a TLS hello) closes the connection
                body = read_exactly(conn, self._stop, _SIZE.unpack(size)[0]) if size is not None else None
                if body is None:
                    return
                api_key, version = struct.unpack_from(">hh", body)
                reader = Reader(body)
                header = RequestHeader.decode(reader, request_header_version(api_key, version))
                request = REQUESTS[ApiKey(api_key)].decode(reader, version)
                if isinstance(request, ApiVersionsRequest):
                    response: Any = ApiVersionsResponse(
                        api_keys=[
                            ApiVersion(api_key=int(k), min_version=lo, max_version=hi)
                            for k, (lo, hi) in self.cluster.api_versions.items()
                        ]
                    )
                else:
                    with self._lock:
                        response = self.cluster.handle(0, request, version)
                        crash = self._close_after.get(type(request), 0) > 0
                        if crash:
                            self._close_after[type(request)] -= 1
                            self.crashes += 1
                        if self._garble.get(type(request), 0) > 0:
                            self._garble[type(request)] -= 1
                            header.correlation_id += 1000
                if response is None:
                    continue
                w = Writer()
                ResponseHeader(correlation_id=header.correlation_id).encode(
                    w, response_header_version(api_key, version)
                )
                response.encode(w, version)
                payload = w.getvalue()
                try:
                    conn.sendall(_SIZE.pack(len(payload)) + payload)
                except OSError:
                    return
                if not isinstance(request, ApiVersionsRequest) and crash:
                    conn.shutdown(socket.SHUT_RDWR)
                    return
