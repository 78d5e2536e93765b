"""Byte-for-byte agreement with two independent Kafka protocol implementations.

* kafka-python 3.0.12 builds its protocol classes at run time from its own copy of Kafka's
  JSON specs (``kafka.protocol``); ``Message.encode(version=...)`` returns the body bytes.
* kio 0.6.5 has one frozen dataclass per message and version (``kio.schema.<api>.v<N>``),
  serialised by ``kio.serial.entity_writer``; it only carries the version floors of Kafka 4.x.

Both oracles carry newer specs than ours; released versions never change on the wire, so
they must agree with us on every version we both implement.
"""

from __future__ import annotations

import importlib
import io
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kaflux.protocol.messages import consumer_group_heartbeat as CGH
from kaflux.protocol.messages import fetch as F
from kaflux.protocol.messages import join_group as J
from kaflux.protocol.messages import list_offsets as L
from kaflux.protocol.messages import metadata as M
from kaflux.protocol.messages import offset_commit as O
from kaflux.protocol.primitives import Reader, Writer

from support.protocol_testutil import (
    kafka_python_classes,
    message_strategy,
    specs_available,
    to_kafka_python,
    to_kio,
    top_level_classes,
)

kafka_protocol = pytest.importorskip("kafka.protocol")
kio_serial = pytest.importorskip("kio.serial")

from kafka.protocol.api_data import ApiData  # noqa: E402
from kafka.protocol.consumer import (  # noqa: E402
    FetchRequest as KpFetchRequest,
)
from kafka.protocol.consumer import (  # noqa: E402
    FetchResponse as KpFetchResponse,
)
from kafka.protocol.consumer import (  # noqa: E402
    JoinGroupRequest as KpJoinGroupRequest,
)
from kafka.protocol.consumer import (  # noqa: E402
    ListOffsetsRequest as KpListOffsetsRequest,
)
from kafka.protocol.consumer import (  # noqa: E402
    OffsetCommitRequest as KpOffsetCommitRequest,
)
from kafka.protocol.metadata import MetadataRequest as KpMetadataRequest  # noqa: E402
from kafka.protocol.metadata import MetadataResponse as KpMetadataResponse  # noqa: E402
from kio.serial import entity_writer  # noqa: E402

TOPIC_ID = uuid.UUID("6f2b1c3e-9a4d-4e21-8c7b-1d2e3f405162")
OTHER_ID = uuid.UUID("0a1b2c3d-4e5f-4061-8273-94a5b6c7d8e9")


def ours(obj: Any, version: int) -> bytes:
    w = Writer()
    obj.encode(w, version)
    return w.getvalue()


def kafka_python(obj: Any, kp_cls: Any, version: int) -> bytes:
    kp_obj = to_kafka_python(obj, kp_cls)
    if isinstance(kp_obj, ApiData):  # "data" schemas: kafka-python prepends the version unless told not to
        return bytes(kp_obj.encode(version=version, header=False))
    return bytes(kp_obj.encode(version=version))


def kio_bytes(obj: Any, api: str, kind: str, version: int) -> bytes:
    module = importlib.import_module(f"kio.schema.{api}.v{version}.{kind}")
    kio_cls = getattr(module, type(obj).__name__)
    buf = io.BytesIO()
    entity_writer(kio_cls)(buf, to_kio(obj, kio_cls))
    return buf.getvalue()


# --------------------------------------------------------------------------- requests


def metadata_request(v: int) -> M.MetadataRequest:
    topics = [
        M.MetadataRequestTopic(name="orders", topic_id=TOPIC_ID if v >= 10 else uuid.UUID(int=0)),
        M.MetadataRequestTopic(name="payments-ü", topic_id=uuid.UUID(int=0)),
    ]
    return M.MetadataRequest(
        topics=topics,
        allow_auto_topic_creation=v < 4,
        include_cluster_authorized_operations=8 <= v <= 10,
        include_topic_authorized_operations=v >= 8,
    )


def fetch_request(v: int) -> F.FetchRequest:
    partitions = [
        F.FetchPartition(
            partition=p,
            current_leader_epoch=7 if v >= 9 else -1,
            fetch_offset=1_000_000_000_000 + p,
            last_fetched_epoch=6 if v >= 12 else -1,
            log_start_offset=12 if v >= 5 else -1,
            partition_max_bytes=1 << 20,
        )
        for p in (0, 3, 11)
    ]
    return F.FetchRequest(
        replica_id=-1,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=50 << 20,
        isolation_level=1 if v >= 4 else 0,
        session_id=123 if v >= 7 else 0,
        session_epoch=4 if v >= 7 else -1,
        topics=[
            F.FetchTopic(
                topic="orders" if v < 13 else "",
                topic_id=TOPIC_ID if v >= 13 else uuid.UUID(int=0),
                partitions=partitions,
            ),
        ],
        forgotten_topics_data=(
            [
                F.ForgottenTopic(
                    topic="old" if v < 13 else "",
                    topic_id=OTHER_ID if v >= 13 else uuid.UUID(int=0),
                    partitions=[2, 5],
                )
            ]
            if v >= 7
            else []
        ),
        rack_id="rack-1" if v >= 11 else "",
        cluster_id="cluster-x" if v >= 12 else None,
    )


def list_offsets_request(v: int) -> L.ListOffsetsRequest:
    return L.ListOffsetsRequest(
        replica_id=-1,
        isolation_level=1 if v >= 2 else 0,
        topics=[
            L.ListOffsetsTopic(
                name="orders",
                partitions=[
                    L.ListOffsetsPartition(
                        partition_index=p,
                        current_leader_epoch=9 if v >= 4 else -1,
                        timestamp=ts,
                        max_num_offsets=1,
                    )
                    for p, ts in ((0, -1), (1, -2), (2, 1_700_000_000_000))
                ],
            )
        ],
        timeout_ms=30_000 if v >= 10 else 0,
    )


def offset_commit_request(v: int) -> O.OffsetCommitRequest:
    return O.OffsetCommitRequest(
        group_id="group-a",
        generation_id_or_member_epoch=42 if v >= 1 else -1,
        member_id="consumer-1-abc" if v >= 1 else "",
        group_instance_id="static-7" if v >= 7 else None,
        retention_time_ms=-1,
        topics=[
            O.OffsetCommitRequestTopic(
                name="orders",
                partitions=[
                    O.OffsetCommitRequestPartition(
                        partition_index=p,
                        committed_offset=10_000 + p,
                        committed_leader_epoch=3 if v >= 6 else -1,
                        commit_timestamp=-1,
                        committed_metadata=meta,
                    )
                    for p, meta in ((0, "meta"), (4, None), (9, ""))
                ],
            )
        ],
    )


def join_group_request(v: int) -> J.JoinGroupRequest:
    return J.JoinGroupRequest(
        group_id="group-a",
        session_timeout_ms=45_000,
        rebalance_timeout_ms=300_000 if v >= 1 else -1,
        member_id="",
        group_instance_id="static-7" if v >= 5 else None,
        protocol_type="consumer",
        protocols=[
            J.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x01\x00\x00\x00\x01\x00\x06orders"),
            J.JoinGroupRequestProtocol(name="cooperative-sticky", metadata=b""),
        ],
        reason="rebalance needed" if v >= 8 else None,
    )


# (builder, kafka-python class, kio api name, versions to check against kafka-python, kio)
REQUESTS = {
    "Metadata": (
        metadata_request,
        KpMetadataRequest,
        "metadata",
        [0, 1, 4, 8, 9, 10, 11, 12],
        [1, 4, 9, 10, 12],
    ),
    "Fetch": (
        fetch_request,
        KpFetchRequest,
        "fetch",
        [0, 4, 7, 11, 12, 13, 15, 16, 17],
        [4, 7, 12, 13, 15, 17],
    ),
    "ListOffsets": (
        list_offsets_request,
        KpListOffsetsRequest,
        "list_offsets",
        [0, 1, 2, 4, 6, 7, 9, 10],
        [1, 2, 6, 9, 10],
    ),
    "OffsetCommit": (
        offset_commit_request,
        KpOffsetCommitRequest,
        "offset_commit",
        [0, 1, 2, 5, 6, 7, 8, 9],
        [2, 5, 7, 8, 9],
    ),
    "JoinGroup": (
        join_group_request,
        KpJoinGroupRequest,
        "join_group",
        [0, 1, 2, 5, 6, 7, 8, 9],
        [0, 5, 6, 9],
    ),
}

KP_CASES = [pytest.param(name, v, id=f"{name}-v{v}") for name, spec in REQUESTS.items() for v in spec[3]]
KIO_CASES = [pytest.param(name, v, id=f"{name}-v{v}") for name, spec in REQUESTS.items() for v in spec[4]]


@pytest.mark.parametrize(("name", "version"), KP_CASES)
def test_request_matches_kafka_python(name: str, version: int) -> None:
    build, kp_cls, _, _, _ = REQUESTS[name]
    obj = build(version)
    assert ours(obj, version) == kafka_python(obj, kp_cls, version)


@pytest.mark.parametrize(("name", "version"), KIO_CASES)
def test_request_matches_kio(name: str, version: int) -> None:
    build, _, api, _, _ = REQUESTS[name]
    obj = build(version)
    assert ours(obj, version) == kio_bytes(obj, api, "request", version)


def test_oracle_cases_are_not_trivial() -> None:
    # Guard against a builder silently producing near-empty messages.
    for name, (build, *_rest) in REQUESTS.items():
        for v in (0, 9):
            cls: Any = type(build(v))
            if cls.MIN_VERSION <= v <= cls.MAX_VERSION:
                assert len(ours(build(v), v)) >= 25, name


# Every generated class kafka-python also has (all but ConsumerGroupHeartbeat, which it lacks,
# and the headers, whose kafka-python API is not per version), at every version.
KP_HYPOTHESIS = [
    pytest.param(cls.__name__, kafka_python_classes()[cls.__name__], v, id=f"{cls.__name__}-v{v}")
    for cls in top_level_classes()
    if cls.__name__ in kafka_python_classes() and not cls.__name__.endswith("Header")
    for v in range(cls.MIN_VERSION, cls.MAX_VERSION + 1)
]


def test_kafka_python_covers_nearly_every_generated_class() -> None:
    covered = {p.values[0] for p in KP_HYPOTHESIS}
    missing = {cls.__name__ for cls in top_level_classes()} - covered
    assert missing == {
        "ConsumerGroupDescribeRequest",
        "ConsumerGroupDescribeResponse",
        "ConsumerGroupHeartbeatRequest",
        "ConsumerGroupHeartbeatResponse",
        "RequestHeader",
        "ResponseHeader",
        # share groups (KIP-932): kafka-python has none; the mock cluster is their oracle
        "ShareAcknowledgeRequest",
        "ShareAcknowledgeResponse",
        "ShareFetchRequest",
        "ShareFetchResponse",
        "ShareGroupHeartbeatRequest",
        "ShareGroupHeartbeatResponse",
        # share-group admin (KIP-932), delegation tokens and telemetry (KIP-714): kafka-python has
        # none; Apache Kafka 4.4 in the integration tests is their oracle
        "AlterShareGroupOffsetsRequest",
        "AlterShareGroupOffsetsResponse",
        "DeleteShareGroupOffsetsRequest",
        "DeleteShareGroupOffsetsResponse",
        "DescribeShareGroupOffsetsRequest",
        "DescribeShareGroupOffsetsResponse",
        "ShareGroupDescribeRequest",
        "ShareGroupDescribeResponse",
        "CreateDelegationTokenRequest",
        "CreateDelegationTokenResponse",
        "DescribeDelegationTokenRequest",
        "DescribeDelegationTokenResponse",
        "ExpireDelegationTokenRequest",
        "ExpireDelegationTokenResponse",
        "RenewDelegationTokenRequest",
        "RenewDelegationTokenResponse",
        "GetTelemetrySubscriptionsRequest",
        "GetTelemetrySubscriptionsResponse",
        "PushTelemetryRequest",
        "PushTelemetryResponse",
    }


@pytest.mark.skipif(not specs_available(), reason="Kafka message specs not found")
@pytest.mark.parametrize(("cls_name", "kp_cls", "version"), KP_HYPOTHESIS)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_messages_match_kafka_python(
    cls_name: str, kp_cls: Any, version: int, data: st.DataObject
) -> None:
    obj = data.draw(message_strategy(cls_name, version))
    assert ours(obj, version) == kafka_python(obj, kp_cls, version)


# --------------------------------------------------------------------------- responses


def metadata_response(v: int) -> M.MetadataResponse:
    return M.MetadataResponse(
        throttle_time_ms=5 if v >= 3 else 0,
        brokers=[
            M.MetadataResponseBroker(
                node_id=n, host=f"broker-{n}.example", port=9092 + n, rack="r1" if v >= 1 else None
            )
            for n in (1, 2, 3)
        ],
        cluster_id="kafka-cluster-1" if v >= 2 else None,
        controller_id=2 if v >= 1 else -1,
        topics=[
            M.MetadataResponseTopic(
                error_code=0,
                name="orders",
                topic_id=TOPIC_ID if v >= 10 else uuid.UUID(int=0),
                is_internal=False,
                partitions=[
                    M.MetadataResponsePartition(
                        error_code=0,
                        partition_index=p,
                        leader_id=1 + p % 3,
                        leader_epoch=11 if v >= 7 else -1,
                        replica_nodes=[1, 2, 3],
                        isr_nodes=[1, 2],
                        offline_replicas=[3] if v >= 5 else [],
                    )
                    for p in range(4)
                ],
                topic_authorized_operations=0b1011 if v >= 8 else -2147483648,
            )
        ],
        cluster_authorized_operations=7 if 8 <= v <= 10 else -2147483648,
    )


def fetch_response(v: int) -> F.FetchResponse:
    records = b"\x00" * 12 + b"\x01\x02\x03 record batch bytes"
    return F.FetchResponse(
        throttle_time_ms=3 if v >= 1 else 0,
        error_code=0,
        session_id=77 if v >= 7 else 0,
        responses=[
            F.FetchableTopicResponse(
                topic="orders" if v < 13 else "",
                topic_id=TOPIC_ID if v >= 13 else uuid.UUID(int=0),
                partitions=[
                    F.PartitionData(
                        partition_index=p,
                        error_code=0,
                        high_watermark=5000 + p,
                        last_stable_offset=4990 + p if v >= 4 else -1,
                        log_start_offset=100 if v >= 5 else -1,
                        aborted_transactions=[F.AbortedTransaction(producer_id=9, first_offset=4000)]
                        if v >= 4
                        else [],
                        preferred_read_replica=-1,
                        current_leader=(
                            F.LeaderIdAndEpoch(leader_id=2, leader_epoch=8)
                            if v >= 12 and p == 1
                            else F.LeaderIdAndEpoch()
                        ),
                        records=memoryview(records) if p != 2 else None,
                    )
                    for p in range(3)
                ],
            )
        ],
    )


@pytest.mark.parametrize("version", [0, 1, 4, 7, 9, 10, 12])
def test_decode_kafka_python_metadata_response(version: int) -> None:
    expected = metadata_response(version)
    data = kafka_python(expected, KpMetadataResponse, version)
    r = Reader(data)
    assert M.MetadataResponse.decode(r, version) == expected
    assert r.remaining() == 0


@pytest.mark.parametrize("version", [0, 4, 7, 11, 12, 13, 16])
def test_decode_kafka_python_fetch_response(version: int) -> None:
    expected = fetch_response(version)
    data = kafka_python(expected, KpFetchResponse, version)
    r = Reader(data)
    decoded = F.FetchResponse.decode(r, version)
    assert decoded == expected
    assert r.remaining() == 0
    records = decoded.responses[0].partitions[0].records
    assert isinstance(records, memoryview)
    assert records.obj is data


@pytest.mark.parametrize("version", [4, 12, 13])
def test_decode_kio_fetch_response(version: int) -> None:
    expected = fetch_response(version)
    data = kio_bytes(expected, "fetch", "response", version)
    assert F.FetchResponse.decode(Reader(data), version) == expected
    assert ours(expected, version) == data


@pytest.mark.parametrize("version", [1, 9, 12])
def test_decode_kio_metadata_response(version: int) -> None:
    expected = metadata_response(version)
    data = kio_bytes(expected, "metadata", "response", version)
    assert M.MetadataResponse.decode(Reader(data), version) == expected
    assert ours(expected, version) == data


# kafka-python lacks ConsumerGroupHeartbeat (KIP-848); kio has it.


def cgh_request(v: int) -> CGH.ConsumerGroupHeartbeatRequest:
    return CGH.ConsumerGroupHeartbeatRequest(
        group_id="group-a",
        member_id="m-1",
        member_epoch=3,
        instance_id=None,
        rack_id="rack-2",
        rebalance_timeout_ms=300_000,
        subscribed_topic_names=["orders", "payments"],
        subscribed_topic_regex="^audit-.*" if v >= 1 else None,
        server_assignor="uniform",
        topic_partitions=[
            CGH.ConsumerGroupHeartbeatRequestTopicPartitions(topic_id=TOPIC_ID, partitions=[0, 2, 4]),
        ],
    )


def cgh_response(assigned: bool) -> CGH.ConsumerGroupHeartbeatResponse:
    return CGH.ConsumerGroupHeartbeatResponse(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        member_id="m-1",
        member_epoch=4,
        heartbeat_interval_ms=5000,
        assignment=(
            CGH.Assignment(
                topic_partitions=[
                    CGH.ConsumerGroupHeartbeatResponseTopicPartitions(topic_id=TOPIC_ID, partitions=[1]),
                    CGH.ConsumerGroupHeartbeatResponseTopicPartitions(topic_id=OTHER_ID, partitions=[]),
                ]
            )
            if assigned
            else None
        ),
    )


@pytest.mark.parametrize("version", [0, 1])
def test_consumer_group_heartbeat_request_matches_kio(version: int) -> None:
    obj = cgh_request(version)
    assert ours(obj, version) == kio_bytes(obj, "consumer_group_heartbeat", "request", version)


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("assigned", [True, False])
def test_decode_kio_consumer_group_heartbeat_response(version: int, assigned: bool) -> None:
    expected = cgh_response(assigned)
    data = kio_bytes(expected, "consumer_group_heartbeat", "response", version)
    assert CGH.ConsumerGroupHeartbeatResponse.decode(Reader(data), version) == expected
    assert ours(expected, version) == data
