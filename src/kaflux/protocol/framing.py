"""Sans-IO core of one broker connection: framing, headers and correlation ids. [pure]

:class:`BrokerProtocol` never touches a socket. The I/O shell (``network.connection``)

* calls :meth:`BrokerProtocol.send_request` to frame a request, then writes
  :meth:`BrokerProtocol.pending_output` to the socket and reports :meth:`output_sent`
  (the view must be released before that, ``with`` it: a view kept alive by a traceback,
  which ``ssl.SSLSocket.send`` leaves holding its argument, would pin the buffer);
* asks :meth:`BrokerProtocol.recv_buffer` for the exact ``memoryview`` to ``recv_into``, and
  reports with :meth:`BrokerProtocol.data_received`, which returns the responses completed.

Receiving is zero-copy: each response body is read straight into its own ``bytearray`` and
decoded from a ``memoryview`` over it, so ``records`` fields of Fetch responses are slices of
that buffer and no byte is copied before the record decoder reads it.

Kafka answers requests on one connection in order; a response whose correlation id is not
the oldest in flight is a protocol violation and the connection must be closed.
"""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeVar

from kaflux.errors import (
    MalformedResponseError,
    ProtocolError,
    ResponseTooLargeError,
    UnsupportedVersionBrokerError,
)
from kaflux.protocol.api import ApiKey, request_header_version, response_header_version
from kaflux.protocol.messages.headers import RequestHeader, ResponseHeader
from kaflux.protocol.primitives import Reader, Writer

_SIZE = struct.Struct(">i")

#: A response larger than this is refused as a protocol violation (``receive.message.max.bytes``;
#: the same 100 MB default as librdkafka, and about Kafka's own 100 MiB socket request limit).
DEFAULT_MAX_RESPONSE_BYTES = 100_000_000

#: A frame's body buffer starts at most this large and grows (doubling) only as bytes arrive,
#: so a huge or hostile length prefix costs memory only for data actually received.
INITIAL_BODY_BYTES = 8 * 1024 * 1024

_API_VERSIONS_KEY = 18
_ERROR_CODE = struct.Struct(">h")


def _peek_error_code(reader: Reader) -> int | None:
    """The int16 at the reader's position (ApiVersions responses start with error_code)."""
    if reader.remaining() < 2:
        return None
    (code,) = _ERROR_CODE.unpack_from(reader.buf, reader.pos)
    return int(code)


#: the response type a request is answered with
R_co = TypeVar("R_co", covariant=True)


class RequestMessage(Protocol[R_co]):
    """What framing needs of a generated request class. Its parameter is the response class,
    read from the generated ``RESPONSE`` attribute, so that the type checker can tell which
    response belongs to which request."""

    API_KEY: ClassVar[int]

    @property
    def RESPONSE(self) -> type[R_co]: ...

    def encode(self, w: Writer, version: int) -> None: ...


@dataclass(slots=True)
class InFlightRequest:
    """A request written to the connection and awaiting its response."""

    correlation_id: int
    api_key: int
    api_version: int
    request: Any
    context: Any


@dataclass(slots=True)
class ReceivedResponse:
    """A complete response, decoded, matched with the request that caused it."""

    in_flight: InFlightRequest
    body: Any
    size: int


class BrokerProtocol:
    """Frames requests and parses responses for one broker connection."""

    def __init__(self, client_id: str | None, *, max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES):
        self._client_id = client_id
        self._max_response_bytes = max_response_bytes
        self._next_correlation_id = 0
        self._in_flight: deque[InFlightRequest] = deque()
        self._out = bytearray()
        self._size_buf = bytearray(4)
        self._body: bytearray | None = None
        #: the size of the frame being received (the body buffer may still be smaller)
        self._frame_size = 0
        self._filled = 0

    # -- sending -------------------------------------------------------------------------

    def send_request(
        self,
        request: RequestMessage[Any],
        api_version: int,
        context: Any = None,
        *,
        expect_response: bool = True,
    ) -> InFlightRequest:
        """Frame ``request`` at ``api_version`` and queue its bytes for sending.

        ``expect_response=False`` is for the one request Kafka never answers (Produce with
        ``acks=0``): it is not tracked as in flight.
        """
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
        header = RequestHeader(
            request_api_key=request.API_KEY,
            request_api_version=api_version,
            correlation_id=correlation_id,
            client_id=self._client_id,
        )
        w = Writer()
        header.encode(w, request_header_version(request.API_KEY, api_version))
        request.encode(w, api_version)
        payload = w.getvalue()
        self._out += _SIZE.pack(len(payload))
        self._out += payload
        in_flight = InFlightRequest(correlation_id, request.API_KEY, api_version, request, context)
        if expect_response:
            self._in_flight.append(in_flight)
        return in_flight

    def pending_output(self) -> memoryview:
        """Bytes waiting to be written to the socket (may be empty).

        Use it in a ``with`` block and write inside it: leaving the block releases the view,
        even when the write raises and the exception's frames still hold it (as those of
        ``ssl.SSLSocket.send`` do). An unreleased view would keep the buffer from being
        trimmed by :meth:`output_sent`."""
        return memoryview(self._out)

    def output_sent(self, count: int) -> None:
        """Record that the first ``count`` bytes of :meth:`pending_output` were written."""
        del self._out[:count]

    def has_pending_output(self) -> bool:
        """Whether bytes are waiting to be written."""
        return bool(self._out)

    # -- receiving -----------------------------------------------------------------------

    def in_flight_count(self) -> int:
        """Requests sent (or queued) whose response has not arrived."""
        return len(self._in_flight)

    def in_flight(self) -> list[InFlightRequest]:
        """The requests awaiting responses, oldest first."""
        return list(self._in_flight)

    def recv_buffer(self) -> memoryview:
        """The writable view the next ``recv_into`` must fill (never empty)."""
        if self._body is None:
            return memoryview(self._size_buf)[self._filled :]
        if self._filled == len(self._body):
            # A large frame: grow the buffer only as its bytes arrive.
            grow = min(len(self._body), self._frame_size - len(self._body))
            self._body += bytes(grow)
        return memoryview(self._body)[self._filled :]

    def data_received(self, count: int) -> list[ReceivedResponse]:
        """Account for ``count`` bytes written into :meth:`recv_buffer`.

        Returns the responses this completed (at most one per call, since the buffer handed
        out never spans two frames). Raises ProtocolError on a malformed or unexpected frame;
        the request it answered then stays in flight, so the caller fails it with the
        connection (:meth:`fail_all`) and it is never lost.
        """
        self._filled += count
        if self._body is None:
            if self._filled < 4:
                return []
            (size,) = _SIZE.unpack(self._size_buf)
            if size > self._max_response_bytes:
                raise ResponseTooLargeError(
                    f"response frame size {size} is out of range (receive.message.max.bytes="
                    f"{self._max_response_bytes}); raise receive.message.max.bytes if responses "
                    "this large are expected",
                    size=size,
                    limit=self._max_response_bytes,
                )
            if size < 4:
                raise ProtocolError(
                    f"response frame size {size} is out of range (receive.message.max.bytes="
                    f"{self._max_response_bytes}); the broker is not speaking the Kafka protocol, or "
                    "raise receive.message.max.bytes if responses this large are expected"
                )
            self._frame_size = size
            self._body = bytearray(min(size, INITIAL_BODY_BYTES))
            self._filled = 0
            return []
        if self._filled < self._frame_size:
            return []
        body, self._body, self._filled = self._body, None, 0
        return [self._decode(body)]

    def _decode(self, body: bytearray) -> ReceivedResponse:
        if not self._in_flight:
            raise ProtocolError("received a response with no request in flight")
        # Leave the request in flight until its response is known good: on any error the
        # connection fails it (fail_all) instead of losing it.
        expected = self._in_flight[0]
        reader = Reader(memoryview(body))
        try:
            header = ResponseHeader.decode(
                reader, response_header_version(expected.api_key, expected.api_version)
            )
            if header.correlation_id != expected.correlation_id:
                raise ProtocolError(
                    f"correlation id {header.correlation_id} does not match the oldest request in "
                    f"flight ({expected.correlation_id}, api key {expected.api_key})"
                )
        except ProtocolError:
            raise
        except (ValueError, UnicodeDecodeError, struct.error, IndexError, OverflowError) as exc:
            raise ProtocolError(
                f"malformed response header to api key {expected.api_key} v{expected.api_version}: {exc}"
            ) from exc
        try:
            decoded = self._decode_body(expected, reader)
        except (
            ProtocolError,
            ValueError,
            UnicodeDecodeError,
            struct.error,
            IndexError,
            OverflowError,
        ) as exc:
            # The frame and its correlation id are sound: the body is what the broker got wrong.
            raise MalformedResponseError(
                f"its {_api_name(expected.api_key)} v{expected.api_version} response could not be "
                f"decoded ({exc}); the broker sent a malformed answer, which a retry would get again",
                correlation_id=expected.correlation_id,
            ) from exc
        self._in_flight.popleft()
        return ReceivedResponse(expected, decoded, len(body))

    @staticmethod
    def _decode_body(expected: InFlightRequest, reader: Reader) -> Any:
        response_class = type(expected.request).RESPONSE
        start = reader.pos
        try:
            return response_class.decode(reader, expected.api_version)
        except (ProtocolError, ValueError, UnicodeDecodeError, struct.error, IndexError, OverflowError):
            if expected.api_key != _API_VERSIONS_KEY or expected.api_version == 0:
                raise
            # As Java: an ApiVersions version the broker does not know is answered with
            # UNSUPPORTED_VERSION in the requested layout by some brokers, in v0's by others.
            reader.pos = start
            if _peek_error_code(reader) != UnsupportedVersionBrokerError.code:
                raise
            return response_class.decode(reader, 0)

    def fail_all(self) -> list[InFlightRequest]:
        """Forget every request in flight (the connection closed); returns them."""
        failed = list(self._in_flight)
        self._in_flight.clear()
        # A new buffer, not clear(): this must never raise, even if a view of the old one
        # is still alive somewhere (clear() would raise BufferError then).
        self._out = bytearray()
        self._body = None
        self._frame_size = 0
        self._filled = 0
        return failed


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"api key {api_key}"
