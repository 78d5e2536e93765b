"""The fault proxy's address rewriting (:func:`support.fault_proxy.rewrite_broker_addresses`): in every
version of Metadata and FindCoordinator responses, the broker's port is replaced and nothing else changes."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from kaflux.errors import KafkaError
from kaflux.protocol.api import ApiKey, response_header_version
from kaflux.protocol.messages.find_coordinator import Coordinator, FindCoordinatorResponse
from kaflux.protocol.messages.headers import ResponseHeader
from kaflux.protocol.messages.metadata import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from kaflux.protocol.primitives import Reader, Writer

from support.fault_proxy import rewrite_broker_addresses

BROKER_PORT = 19092
PROXY = ("127.0.0.1", 40000)


def frame(api_key: int, version: int, body: Any, correlation_id: int = 42) -> bytes:
    w = Writer()
    header_version = response_header_version(api_key, version)
    ResponseHeader(correlation_id=correlation_id).encode(w, header_version)
    body.encode(w, version)
    payload = w.getvalue()
    return struct.pack(">i", len(payload)) + payload


def decode(api_key: int, version: int, data: bytes, cls: type[Any]) -> tuple[int, object]:
    (size,) = struct.unpack_from(">i", data)
    assert size == len(data) - 4
    reader = Reader(memoryview(data)[4:])
    header = ResponseHeader.decode(reader, response_header_version(api_key, version))
    return header.correlation_id, cls.decode(reader, version)


@pytest.mark.parametrize("version", range(MetadataResponse.MIN_VERSION, MetadataResponse.MAX_VERSION + 1))
def test_metadata_brokers_point_at_the_proxy(version: int) -> None:
    body = MetadataResponse(
        brokers=[
            MetadataResponseBroker(node_id=1, host="127.0.0.1", port=BROKER_PORT),
            MetadataResponseBroker(node_id=2, host="127.0.0.1", port=BROKER_PORT + 1),  # another broker
        ],
        topics=[
            MetadataResponseTopic(
                name="t", partitions=[MetadataResponsePartition(partition_index=0, leader_id=1)]
            )
        ],
    )
    original = frame(ApiKey.METADATA, version, body)
    rewritten = rewrite_broker_addresses(original, ApiKey.METADATA, version, {BROKER_PORT: PROXY})
    correlation_id, result = decode(ApiKey.METADATA, version, rewritten, MetadataResponse)
    assert correlation_id == 42
    assert isinstance(result, MetadataResponse)
    assert [(b.node_id, b.host, b.port) for b in result.brokers] == [
        (1, *PROXY),
        (2, "127.0.0.1", BROKER_PORT + 1),
    ]
    assert result.topics[0].partitions[0].leader_id == 1


@pytest.mark.parametrize(
    "version", range(FindCoordinatorResponse.MIN_VERSION, FindCoordinatorResponse.MAX_VERSION + 1)
)
def test_find_coordinator_points_at_the_proxy(version: int) -> None:
    if version < 4:
        body = FindCoordinatorResponse(node_id=1, host="127.0.0.1", port=BROKER_PORT)
    else:
        body = FindCoordinatorResponse(
            coordinators=[Coordinator(key="g", node_id=1, host="127.0.0.1", port=BROKER_PORT)]
        )
    original = frame(ApiKey.FIND_COORDINATOR, version, body)
    rewritten = rewrite_broker_addresses(original, ApiKey.FIND_COORDINATOR, version, {BROKER_PORT: PROXY})
    _, result = decode(ApiKey.FIND_COORDINATOR, version, rewritten, FindCoordinatorResponse)
    assert isinstance(result, FindCoordinatorResponse)
    if version < 4:
        assert (result.node_id, result.host, result.port) == (1, *PROXY)
    else:
        assert [(c.key, c.node_id, c.host, c.port) for c in result.coordinators] == [("g", 1, *PROXY)]


def test_a_frame_without_the_port_is_returned_as_is() -> None:
    body = MetadataResponse(brokers=[MetadataResponseBroker(node_id=1, host="h", port=1)])
    original = frame(ApiKey.METADATA, 12, body)
    assert rewrite_broker_addresses(original, ApiKey.METADATA, 12, {BROKER_PORT: PROXY}) is original


def test_an_undecodable_frame_raises_a_kaflux_error() -> None:
    with pytest.raises(KafkaError):
        rewrite_broker_addresses(b"\x00\x00\x00\x06\x00\x00\x00\x01\xff\xff", ApiKey.METADATA, 12, {})
