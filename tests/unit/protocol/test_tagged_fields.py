"""Tagged fields: written only when non-default and in tag order; read in any order; unknown
tags skipped."""

from __future__ import annotations

import uuid

import pytest

from kaflux.errors import ProtocolError
from kaflux.protocol.messages.api_versions import ApiVersionsResponse
from kaflux.protocol.messages.create_topics import CreatableTopicResult, CreateTopicsResponse
from kaflux.protocol.messages.fetch import (
    EpochEndOffset,
    FetchableTopicResponse,
    FetchRequest,
    FetchResponse,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionData,
    ReplicaState,
    SnapshotId,
)
from kaflux.protocol.messages.heartbeat import HeartbeatResponse
from kaflux.protocol.primitives import Reader, Writer


def encode(obj: object, version: int) -> bytes:
    w = Writer()
    obj.encode(w, version)  # type: ignore[attr-defined]
    return w.getvalue()


def tagged_section(*fields: tuple[int, bytes]) -> bytes:
    w = Writer()
    w.unsigned_varint(len(fields))
    for tag, payload in fields:
        w.tagged_field(tag, payload)
    return w.getvalue()


def test_unknown_tags_at_the_top_level_are_skipped() -> None:
    resp = HeartbeatResponse(throttle_time_ms=12, error_code=27)
    data = encode(resp, 4)
    assert data.endswith(b"\x00")
    extended = data[:-1] + tagged_section((5, b"xyz"), (200, b"\x01" * 300), (0, b""))
    r = Reader(extended)
    assert HeartbeatResponse.decode(r, 4) == resp
    assert r.remaining() == 0


def test_unknown_tags_in_a_nested_struct_are_skipped_and_the_rest_is_intact() -> None:
    partition = PartitionData(partition_index=4, high_watermark=77, records=memoryview(b"batch"))
    body = encode(partition, 12)
    assert body.endswith(b"\x00")
    leader = encode(LeaderIdAndEpoch(leader_id=3, leader_epoch=9), 12)
    # Unknown tag 9 first, then known tag 1, then another unknown one; then bytes that
    # belong to whatever follows the struct.
    crafted = body[:-1] + tagged_section((9, b"future"), (1, leader), (4, b"")) + b"next"
    r = Reader(crafted)
    decoded = PartitionData.decode(r, 12)
    assert decoded == PartitionData(
        partition_index=4,
        high_watermark=77,
        records=memoryview(b"batch"),
        current_leader=LeaderIdAndEpoch(leader_id=3, leader_epoch=9),
    )
    assert r.remaining() == 4


def test_known_tags_may_arrive_in_any_order() -> None:
    leader = encode(LeaderIdAndEpoch(leader_id=3, leader_epoch=9), 12)
    epoch = encode(EpochEndOffset(epoch=5, end_offset=500), 12)
    body = encode(PartitionData(partition_index=1), 12)[:-1]
    crafted = body + tagged_section((1, leader), (0, epoch))
    decoded = PartitionData.decode(Reader(crafted), 12)
    assert decoded.current_leader == LeaderIdAndEpoch(leader_id=3, leader_epoch=9)
    assert decoded.diverging_epoch == EpochEndOffset(epoch=5, end_offset=500)


def fetch_response_v12_bytes(partition_bytes: bytes, top_level_tags: bytes = b"\x00") -> bytes:
    """A FetchResponse v12 with one topic holding one pre-encoded partition."""
    w = Writer()
    w.int32(0)  # throttle_time_ms
    w.int16(0)  # error_code
    w.int32(42)  # session_id
    w.array_length(1, True)
    w.compact_string("orders")
    w.array_length(1, True)
    w.raw(partition_bytes)
    w.empty_tagged_fields()  # topic's tagged fields
    w.raw(top_level_tags)
    return w.getvalue()


def test_unknown_tags_inside_a_whole_response() -> None:
    partition = PartitionData(partition_index=4, high_watermark=77, records=memoryview(b"batch"))
    body = encode(partition, 12)[:-1]
    leader = encode(LeaderIdAndEpoch(leader_id=3, leader_epoch=9), 12)
    crafted = body + tagged_section((9, b"future"), (1, leader), (4, b""))
    data = fetch_response_v12_bytes(crafted, tagged_section((3, b"\x00\x01"), (77, b"abc")))

    r = Reader(data)
    decoded = FetchResponse.decode(r, 12)
    assert r.remaining() == 0
    assert decoded.session_id == 42
    assert decoded.responses[0].topic == "orders"
    [got] = decoded.responses[0].partitions
    assert got.partition_index == 4
    assert got.high_watermark == 77
    assert got.records == b"batch"
    assert got.current_leader == LeaderIdAndEpoch(leader_id=3, leader_epoch=9)
    assert got.diverging_epoch == EpochEndOffset()
    assert got.snapshot_id == SnapshotId()


def test_known_tag_with_trailing_bytes_is_tolerated() -> None:
    # A newer writer may append data to a tagged value; the declared size is authoritative.
    leader = encode(LeaderIdAndEpoch(leader_id=3, leader_epoch=9), 12) + b"\x99\x98"
    body = encode(PartitionData(), 12)[:-1] + tagged_section((1, leader))
    r = Reader(body + b"tail")
    assert PartitionData.decode(r, 12).current_leader.leader_id == 3
    assert r.remaining() == 4


def test_known_tag_overrunning_its_size_is_an_error() -> None:
    leader = encode(LeaderIdAndEpoch(leader_id=3, leader_epoch=9), 12)
    w = Writer()
    w.unsigned_varint(1)
    w.unsigned_varint(1)  # tag 1 ...
    w.unsigned_varint(2)  # ... claims 2 bytes but the struct is longer
    w.raw(leader)
    body = encode(PartitionData(), 12)[:-1] + w.getvalue()
    with pytest.raises(ProtocolError, match="overran"):
        PartitionData.decode(Reader(body), 12)


def test_truncated_unknown_tag_is_an_error() -> None:
    data = encode(HeartbeatResponse(), 4)[:-1] + b"\x01\x05\x10abc"
    with pytest.raises(ProtocolError, match="decoding HeartbeatResponse v4"):
        HeartbeatResponse.decode(Reader(data), 4)


def test_default_tagged_fields_are_not_written() -> None:
    assert encode(PartitionData(), 12).endswith(b"\xff\xff\xff\xff\x00\x00")  # ... -1 replica, null, 0 tags
    assert encode(FetchResponse(), 16) == bytes.fromhex("00000000 0000 00000000 01 00")
    assert encode(FetchRequest(), 12).endswith(b"\x00")


def test_non_default_tagged_fields_are_written_in_tag_order() -> None:
    p = PartitionData(
        snapshot_id=SnapshotId(end_offset=10, epoch=2),
        diverging_epoch=EpochEndOffset(epoch=1, end_offset=5),
    )
    data = encode(p, 12)
    r = Reader(data)
    r.skip(4 + 2 + 8 + 8 + 8)
    assert r.array_length(True) == 0
    r.skip(4)
    assert r.records(True) is None
    assert r.unsigned_varint() == 2
    assert r.tagged_field_header() == (0, 13)  # int32 + int64 + its own empty tag section
    assert EpochEndOffset.decode(r, 12) == EpochEndOffset(epoch=1, end_offset=5)
    assert r.tagged_field_header() == (2, 13)
    assert SnapshotId.decode(r, 12) == SnapshotId(end_offset=10, epoch=2)
    assert r.remaining() == 0
    assert PartitionData.decode(Reader(data), 12) == p


def test_tagged_top_level_fields_round_trip() -> None:
    req = FetchRequest(cluster_id="c1", replica_state=ReplicaState(replica_id=4, replica_epoch=2))
    data = encode(req, 15)
    assert FetchRequest.decode(Reader(data), 15) == req
    resp = FetchResponse(
        responses=[FetchableTopicResponse(topic_id=uuid.uuid4())],
        node_endpoints=[NodeEndpoint(node_id=1, host="h", port=9092, rack=None)],
    )
    assert FetchResponse.decode(Reader(encode(resp, 16)), 16) == resp
    # In v12-15 NodeEndpoints does not exist (and is not ignorable).
    with pytest.raises(Exception, match="node_endpoints"):
        encode(resp, 15)


def test_tagged_scalars_round_trip() -> None:
    resp = ApiVersionsResponse(finalized_features_epoch=12, zk_migration_ready=True)
    data = encode(resp, 3)
    assert data.endswith(tagged_section((1, (12).to_bytes(8, "big")), (3, b"\x01")))
    assert ApiVersionsResponse.decode(Reader(data), 3) == resp
    result = CreatableTopicResult(name="t", topic_config_error_code=29, num_partitions=3)
    resp2 = CreateTopicsResponse(topics=[result])
    data = encode(resp2, 5)
    assert tagged_section((0, b"\x00\x1d")) in data
    assert CreateTopicsResponse.decode(Reader(data), 5) == resp2
