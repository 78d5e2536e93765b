"""API keys, the versions kaflux implements, header versions and version negotiation. [pure]

Hand-written companion of the generated :mod:`kaflux.protocol.messages`: adding an API to
``tools/generate_messages.py`` also means adding it to :class:`ApiKey` and :data:`REQUESTS`
here (a unit test checks that the two agree).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum
from typing import Any, Final

from kaflux.errors import UnsupportedVersionError
from kaflux.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from kaflux.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from kaflux.protocol.messages.alter_configs import AlterConfigsRequest
from kaflux.protocol.messages.alter_partition_reassignments import AlterPartitionReassignmentsRequest
from kaflux.protocol.messages.alter_user_scram_credentials import AlterUserScramCredentialsRequest
from kaflux.protocol.messages.api_versions import ApiVersionsRequest
from kaflux.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from kaflux.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from kaflux.protocol.messages.create_acls import CreateAclsRequest
from kaflux.protocol.messages.create_partitions import CreatePartitionsRequest
from kaflux.protocol.messages.create_topics import CreateTopicsRequest
from kaflux.protocol.messages.delete_acls import DeleteAclsRequest
from kaflux.protocol.messages.delete_groups import DeleteGroupsRequest
from kaflux.protocol.messages.delete_records import DeleteRecordsRequest
from kaflux.protocol.messages.delete_topics import DeleteTopicsRequest
from kaflux.protocol.messages.describe_acls import DescribeAclsRequest
from kaflux.protocol.messages.describe_cluster import DescribeClusterRequest
from kaflux.protocol.messages.describe_configs import DescribeConfigsRequest
from kaflux.protocol.messages.describe_groups import DescribeGroupsRequest
from kaflux.protocol.messages.describe_log_dirs import DescribeLogDirsRequest
from kaflux.protocol.messages.describe_transactions import DescribeTransactionsRequest
from kaflux.protocol.messages.describe_user_scram_credentials import DescribeUserScramCredentialsRequest
from kaflux.protocol.messages.elect_leaders import ElectLeadersRequest
from kaflux.protocol.messages.end_txn import EndTxnRequest
from kaflux.protocol.messages.fetch import FetchRequest
from kaflux.protocol.messages.find_coordinator import FindCoordinatorRequest
from kaflux.protocol.messages.heartbeat import HeartbeatRequest
from kaflux.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from kaflux.protocol.messages.init_producer_id import InitProducerIdRequest
from kaflux.protocol.messages.join_group import JoinGroupRequest
from kaflux.protocol.messages.leave_group import LeaveGroupRequest
from kaflux.protocol.messages.list_groups import ListGroupsRequest
from kaflux.protocol.messages.list_offsets import ListOffsetsRequest
from kaflux.protocol.messages.list_partition_reassignments import ListPartitionReassignmentsRequest
from kaflux.protocol.messages.list_transactions import ListTransactionsRequest
from kaflux.protocol.messages.metadata import MetadataRequest
from kaflux.protocol.messages.offset_commit import OffsetCommitRequest
from kaflux.protocol.messages.offset_delete import OffsetDeleteRequest
from kaflux.protocol.messages.offset_fetch import OffsetFetchRequest
from kaflux.protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest
from kaflux.protocol.messages.produce import ProduceRequest
from kaflux.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from kaflux.protocol.messages.sasl_handshake import SaslHandshakeRequest
from kaflux.protocol.messages.share_acknowledge import ShareAcknowledgeRequest
from kaflux.protocol.messages.share_fetch import ShareFetchRequest
from kaflux.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from kaflux.protocol.messages.sync_group import SyncGroupRequest
from kaflux.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from kaflux.protocol.messages.write_txn_markers import WriteTxnMarkersRequest

__all__ = [
    "CLIENT_VERSIONS",
    "REQUESTS",
    "ApiKey",
    "negotiate",
    "request_header_version",
    "response_header_version",
    "version_for",
]


class ApiKey(IntEnum):
    """The Kafka APIs kaflux implements, by wire API key."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_CLUSTER = 60
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79


# Values are the generated request classes; each has API_KEY, MIN_VERSION, MAX_VERSION,
# FLEXIBLE_VERSION, RESPONSE (the response class), encode() and decode().
REQUESTS: Final[dict[ApiKey, type[Any]]] = {
    ApiKey.PRODUCE: ProduceRequest,
    ApiKey.FETCH: FetchRequest,
    ApiKey.LIST_OFFSETS: ListOffsetsRequest,
    ApiKey.METADATA: MetadataRequest,
    ApiKey.OFFSET_COMMIT: OffsetCommitRequest,
    ApiKey.OFFSET_FETCH: OffsetFetchRequest,
    ApiKey.FIND_COORDINATOR: FindCoordinatorRequest,
    ApiKey.JOIN_GROUP: JoinGroupRequest,
    ApiKey.HEARTBEAT: HeartbeatRequest,
    ApiKey.LEAVE_GROUP: LeaveGroupRequest,
    ApiKey.SYNC_GROUP: SyncGroupRequest,
    ApiKey.DESCRIBE_GROUPS: DescribeGroupsRequest,
    ApiKey.LIST_GROUPS: ListGroupsRequest,
    ApiKey.SASL_HANDSHAKE: SaslHandshakeRequest,
    ApiKey.API_VERSIONS: ApiVersionsRequest,
    ApiKey.CREATE_TOPICS: CreateTopicsRequest,
    ApiKey.DELETE_TOPICS: DeleteTopicsRequest,
    ApiKey.INIT_PRODUCER_ID: InitProducerIdRequest,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: OffsetForLeaderEpochRequest,
    ApiKey.ADD_PARTITIONS_TO_TXN: AddPartitionsToTxnRequest,
    ApiKey.ADD_OFFSETS_TO_TXN: AddOffsetsToTxnRequest,
    ApiKey.END_TXN: EndTxnRequest,
    ApiKey.TXN_OFFSET_COMMIT: TxnOffsetCommitRequest,
    ApiKey.SASL_AUTHENTICATE: SaslAuthenticateRequest,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: ConsumerGroupHeartbeatRequest,
    ApiKey.DELETE_RECORDS: DeleteRecordsRequest,
    ApiKey.CREATE_PARTITIONS: CreatePartitionsRequest,
    ApiKey.DELETE_GROUPS: DeleteGroupsRequest,
    ApiKey.DESCRIBE_CLUSTER: DescribeClusterRequest,
    ApiKey.CONSUMER_GROUP_DESCRIBE: ConsumerGroupDescribeRequest,
    ApiKey.DESCRIBE_ACLS: DescribeAclsRequest,
    ApiKey.CREATE_ACLS: CreateAclsRequest,
    ApiKey.DELETE_ACLS: DeleteAclsRequest,
    ApiKey.DESCRIBE_CONFIGS: DescribeConfigsRequest,
    ApiKey.ALTER_CONFIGS: AlterConfigsRequest,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: IncrementalAlterConfigsRequest,
    ApiKey.DESCRIBE_LOG_DIRS: DescribeLogDirsRequest,
    ApiKey.ELECT_LEADERS: ElectLeadersRequest,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: AlterPartitionReassignmentsRequest,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: ListPartitionReassignmentsRequest,
    ApiKey.OFFSET_DELETE: OffsetDeleteRequest,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: DescribeUserScramCredentialsRequest,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: AlterUserScramCredentialsRequest,
    ApiKey.DESCRIBE_TRANSACTIONS: DescribeTransactionsRequest,
    ApiKey.LIST_TRANSACTIONS: ListTransactionsRequest,
    ApiKey.WRITE_TXN_MARKERS: WriteTxnMarkersRequest,
    ApiKey.SHARE_GROUP_HEARTBEAT: ShareGroupHeartbeatRequest,
    ApiKey.SHARE_FETCH: ShareFetchRequest,
    ApiKey.SHARE_ACKNOWLEDGE: ShareAcknowledgeRequest,
}

CLIENT_VERSIONS: Final[dict[ApiKey, tuple[int, int]]] = {
    key: (int(cls.MIN_VERSION), int(cls.MAX_VERSION)) for key, cls in REQUESTS.items()
}
"""Inclusive ``(min, max)`` version range kaflux implements per API (the full spec range)."""


def _request_class(api_key: int) -> type[Any]:
    try:
        return REQUESTS[ApiKey(api_key)]
    except ValueError:
        raise UnsupportedVersionError(f"kaflux does not implement API key {api_key}") from None


def _is_flexible(flexible_version: int | None, api_version: int) -> bool:
    return flexible_version is not None and api_version >= flexible_version


def request_header_version(api_key: int, api_version: int) -> int:
    """RequestHeader version for a request: 2 for flexible request versions, else 1."""
    cls = _request_class(api_key)
    return 2 if _is_flexible(cls.FLEXIBLE_VERSION, api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """ResponseHeader version for a response: 1 for flexible response versions, else 0.

    ApiVersions responses always use header v0, even in flexible versions: a client that
    sent a version the broker does not know must still be able to read the answer.
    """
    if api_key == ApiKey.API_VERSIONS:
        return 0
    cls = _request_class(api_key)
    return 1 if _is_flexible(cls.RESPONSE.FLEXIBLE_VERSION, api_version) else 0


def negotiate(broker: Mapping[int, tuple[int, int]]) -> dict[ApiKey, int]:
    """Pick, per API, the highest version both kaflux and the broker support.

    ``broker`` maps API key to the broker's inclusive ``(min, max)`` range, as listed in
    an ApiVersions response. APIs the broker does not list, and APIs whose ranges do not
    overlap, are absent from the result; API keys kaflux does not know are ignored.
    """
    chosen: dict[ApiKey, int] = {}
    for key, (lo, hi) in CLIENT_VERSIONS.items():
        theirs = broker.get(key)
        if theirs is None:
            continue
        top = min(hi, theirs[1])
        if top >= max(lo, theirs[0]):
            chosen[key] = top
    return chosen


def version_for(negotiated: Mapping[ApiKey, int], api_key: ApiKey) -> int:
    """The negotiated version of ``api_key``.

    Raises:
        UnsupportedVersionError: the broker supports no version kaflux implements.
    """
    try:
        return negotiated[api_key]
    except KeyError:
        lo, hi = CLIENT_VERSIONS[api_key]
        raise UnsupportedVersionError(
            f"the broker supports no version of {api_key.name} (API key {int(api_key)}) that "
            f"kaflux implements (versions {lo}-{hi}); upgrade the broker or use a broker that "
            "offers this API"
        ) from None
