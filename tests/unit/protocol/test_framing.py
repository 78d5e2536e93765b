"""BrokerProtocol, the sans-IO framing of one connection: frames split anywhere, bounded
allocation for large or hostile length prefixes, and no request lost to a bad response."""

from __future__ import annotations

import struct
import tracemalloc

import pytest

from kaflux.errors import MalformedResponseError, ProtocolError
from kaflux.protocol.api import response_header_version
from kaflux.protocol.framing import INITIAL_BODY_BYTES, BrokerProtocol
from kaflux.protocol.messages.headers import ResponseHeader
from kaflux.protocol.messages.metadata import MetadataRequest, MetadataResponse, MetadataResponseBroker
from kaflux.protocol.primitives import Writer

VERSION = 9


def _response_frame(correlation_id: int, response: MetadataResponse, *, pad_host: int = 0) -> bytes:
    w = Writer()
    ResponseHeader(correlation_id=correlation_id).encode(w, response_header_version(3, VERSION))
    response.encode(w, VERSION)
    payload = w.getvalue()
    return struct.pack(">i", len(payload)) + payload


def _feed(protocol: BrokerProtocol, data: bytes, chunk: int) -> list[object]:
    """Write ``data`` into the protocol's receive buffers ``chunk`` bytes at a time."""
    out: list[object] = []
    pos = 0
    while pos < len(data):
        with protocol.recv_buffer() as view:  # released before the next call, as recv_into does
            n = min(len(view), chunk, len(data) - pos)
            view[:n] = data[pos : pos + n]
        pos += n
        out += [r.body for r in protocol.data_received(n)]
    return out


def _metadata(host: str = "h") -> MetadataResponse:
    return MetadataResponse(brokers=[MetadataResponseBroker(node_id=1, host=host, port=9)], cluster_id="c")


@pytest.mark.parametrize("chunk", [1, 3, 7, 4096])
def test_responses_decode_whatever_the_read_boundaries(chunk: int) -> None:
    protocol = BrokerProtocol("t")
    first = protocol.send_request(MetadataRequest(topics=None), VERSION)
    second = protocol.send_request(MetadataRequest(topics=None), VERSION)
    data = _response_frame(first.correlation_id, _metadata("a")) + _response_frame(
        second.correlation_id, _metadata("b")
    )
    bodies = _feed(protocol, data, chunk)
    assert [b.brokers[0].host for b in bodies] == ["a", "b"]  # type: ignore[attr-defined]
    assert protocol.in_flight_count() == 0


def test_a_large_frame_grows_its_buffer_only_as_bytes_arrive() -> None:
    protocol = BrokerProtocol("t")
    request = protocol.send_request(MetadataRequest(topics=None), VERSION)
    big_host = "x" * (3 * INITIAL_BODY_BYTES)
    data = _response_frame(request.correlation_id, _metadata(big_host))
    _feed(protocol, data[:4], 4)
    assert len(protocol.recv_buffer()) == INITIAL_BODY_BYTES
    (body,) = _feed(protocol, data[4:], 1 << 20)
    assert body.brokers[0].host == big_host  # type: ignore[attr-defined]


def test_a_hostile_length_prefix_allocates_only_for_the_bytes_received() -> None:
    protocol = BrokerProtocol("t", max_response_bytes=2**31 - 1)
    protocol.send_request(MetadataRequest(topics=None), VERSION)
    tracemalloc.start()
    try:
        _feed(protocol, struct.pack(">i", 496 * 1024 * 1024) + b"\x00" * 1000, 1000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * INITIAL_BODY_BYTES, f"peak {peak} B for 1000 received bytes"


def test_a_frame_over_the_limit_is_refused_and_its_request_stays_to_be_failed() -> None:
    protocol = BrokerProtocol("t", max_response_bytes=1_000_000)
    request = protocol.send_request(MetadataRequest(topics=None), VERSION)
    with pytest.raises(ProtocolError, match=r"1000001 is out of range \(receive.message.max.bytes=1000000\)"):
        _feed(protocol, struct.pack(">i", 1_000_001), 4)
    assert protocol.fail_all() == [request]


@pytest.mark.parametrize(
    "frame",
    [
        pytest.param(lambda cid: _response_frame(cid + 1, _metadata()), id="wrong-correlation-id"),
        pytest.param(lambda cid: struct.pack(">ii", 7, cid) + b"\xff\xff\xff", id="undecodable-body"),
    ],
)
def test_a_bad_response_leaves_its_request_in_flight_for_the_connection_to_fail(frame: object) -> None:
    protocol = BrokerProtocol("t")
    request = protocol.send_request(MetadataRequest(topics=None), VERSION)
    with pytest.raises(ProtocolError):
        _feed(protocol, frame(request.correlation_id), 4096)  # type: ignore[operator]
    assert protocol.fail_all() == [request]


def test_an_undecodable_body_behind_the_right_correlation_id_names_its_request() -> None:
    protocol = BrokerProtocol("t")
    request = protocol.send_request(MetadataRequest(topics=None), VERSION)
    with pytest.raises(
        MalformedResponseError, match=r"METADATA v\d+ response could not be decoded"
    ) as caught:
        _feed(protocol, struct.pack(">ii", 7, request.correlation_id) + b"\x00\xff\xff\xff", 4096)
    assert caught.value.correlation_id == request.correlation_id
    assert protocol.fail_all() == [request]


def test_a_response_for_another_request_is_not_called_malformed() -> None:
    protocol = BrokerProtocol("t")
    request = protocol.send_request(MetadataRequest(topics=None), VERSION)
    with pytest.raises(ProtocolError) as caught:
        _feed(protocol, _response_frame(request.correlation_id + 1, _metadata()), 4096)
    assert not isinstance(caught.value, MalformedResponseError)
