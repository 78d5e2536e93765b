"""The admin client's operations requests (configs, ACLs, SCRAM users, transactions, log dirs,
reassignments) through AdminRequestManager against a fake cluster with injected time: what is
sent where, and how each answer is read. [test]"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import pytest

from kaflux.admin import (
    AbortTransactionSpec,
    AclBinding,
    AclBindingFilter,
    AlterConfigOp,
    ConfigResource,
    ConfigSource,
    PartitionReassignment,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kaflux.admin.acls import CreateAclsApi, DeleteAclsApi, DescribeAclsApi
from kaflux.admin.configs import DescribeConfigsApi, IncrementalAlterConfigsApi, LegacyAlterConfigsApi
from kaflux.admin.replicas import (
    AlterReassignmentsApi,
    DescribeLogDirsApi,
    ElectLeadersApi,
    ListReassignmentsApi,
)
from kaflux.admin.scram import AlterScramCredentialsApi, DescribeScramCredentialsApi, ScramMechanism
from kaflux.admin.transactions import (
    AbortTransactionApi,
    DescribeTransactionsApi,
    FenceProducersApi,
    ListTransactionsApi,
    OffsetDeleteApi,
)
from kaflux.errors import (
    ElectionNotNeededError,
    GroupSubscribedToTopicError,
    InvalidArgumentError,
    SecurityDisabledError,
    TransactionalIdNotFoundError,
    UnknownTopicOrPartitionError,
)
from kaflux.protocol.messages.alter_configs import AlterConfigsRequest as LegacyAlterConfigsRequest
from kaflux.protocol.messages.alter_configs import (
    AlterConfigsResourceResponse as LegacyAlterConfigsResourceResponse,
)
from kaflux.protocol.messages.alter_configs import AlterConfigsResponse as LegacyAlterConfigsResponse
from kaflux.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)
from kaflux.protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
)
from kaflux.protocol.messages.create_acls import AclCreationResult, CreateAclsRequest, CreateAclsResponse
from kaflux.protocol.messages.delete_acls import (
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsRequest,
    DeleteAclsResponse,
)
from kaflux.protocol.messages.describe_acls import (
    AclDescription,
    DescribeAclsRequest,
    DescribeAclsResource,
    DescribeAclsResponse,
)
from kaflux.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)
from kaflux.protocol.messages.describe_log_dirs import (
    DescribeLogDirsPartition,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)
from kaflux.protocol.messages.describe_transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    TopicData,
    TransactionState,
)
from kaflux.protocol.messages.describe_user_scram_credentials import (
    CredentialInfo,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResult,
)
from kaflux.protocol.messages.elect_leaders import (
    ElectLeadersRequest,
    ElectLeadersResponse,
    PartitionResult,
    ReplicaElectionResult,
)
from kaflux.protocol.messages.find_coordinator import FindCoordinatorRequest
from kaflux.protocol.messages.incremental_alter_configs import (
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kaflux.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from kaflux.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
)
from kaflux.protocol.messages.list_transactions import ListTransactionsRequest, ListTransactionsResponse
from kaflux.protocol.messages.list_transactions import TransactionState as ListedTransaction
from kaflux.protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from kaflux.protocol.messages.write_txn_markers import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from kaflux.structs import TopicPartition

from support.admin_rig import AdminRig
from support.fakes import FakeCluster

SECURITY_DISABLED = 54
UNKNOWN_TOPIC = 3
TRANSACTIONAL_ID_NOT_FOUND = 105
GROUP_SUBSCRIBED_TO_TOPIC = 86
INVALID_REPLICA_ASSIGNMENT = 39
ELECTION_NOT_NEEDED = 84


class OpsFakeCluster(FakeCluster):
    """A FakeCluster that keeps topic configs, ACLs (unless ``authorizer`` is off), SCRAM
    credentials and transactions, and answers the operations requests about them."""

    def __init__(self, brokers: int = 3, *, authorizer: bool = True) -> None:
        super().__init__(brokers)
        self.configs: dict[str, dict[str, str]] = {}
        self.acls: list[tuple[int, str, int, str, str, int, int]] = []
        self.authorizer = authorizer
        self.scram: dict[str, dict[int, tuple[int, bytes, bytes]]] = {}
        self.transactions: dict[str, TransactionState] = {}

    def handle(self, broker_id: int, request: Any, version: int) -> Any:
        handlers: dict[type, Callable[[int, Any, int], Any]] = {
            DescribeConfigsRequest: self._describe_configs,
            IncrementalAlterConfigsRequest: self._alter_configs,
            CreateAclsRequest: self._create_acls,
            DescribeAclsRequest: self._describe_acls,
            DeleteAclsRequest: self._delete_acls,
            AlterUserScramCredentialsRequest: self._alter_scram,
            DescribeTransactionsRequest: self._describe_txns,
            InitProducerIdRequest: self._init_producer_id,
            DescribeLogDirsRequest: self._log_dirs,
            OffsetDeleteRequest: self._offset_delete,
            AlterPartitionReassignmentsRequest: self._reassign,
        }
        handler = handlers.get(type(request))
        if handler is None:
            return super().handle(broker_id, request, version)
        self.handled.append((broker_id, request, version))
        return handler(broker_id, request, version)

    def _describe_configs(self, node: int, request: DescribeConfigsRequest, version: int) -> Any:
        results = []
        for r in request.resources:
            if r.resource_type == 2 and r.resource_name not in self.topics:
                results.append(
                    DescribeConfigsResult(
                        error_code=UNKNOWN_TOPIC, resource_type=2, resource_name=r.resource_name
                    )
                )
                continue
            configs = [
                DescribeConfigsResourceResult(
                    name="retention.ms",
                    value=self.configs.get(r.resource_name, {}).get("retention.ms", "604800000"),
                    config_source=1 if "retention.ms" in self.configs.get(r.resource_name, {}) else 5,
                    synonyms=[DescribeConfigsSynonym(name="log.retention.ms", value="604800000", source=4)]
                    if request.include_synonyms
                    else [],
                ),
                DescribeConfigsResourceResult(
                    name="sasl.jaas.config", value=None, is_sensitive=True, read_only=True, config_source=4
                ),
            ]
            results.append(
                DescribeConfigsResult(
                    resource_type=r.resource_type, resource_name=r.resource_name, configs=configs
                )
            )
        return DescribeConfigsResponse(results=results)

    def _alter_configs(self, node: int, request: IncrementalAlterConfigsRequest, version: int) -> Any:
        responses = []
        for r in request.resources:
            if not request.validate_only:
                stored = self.configs.setdefault(r.resource_name, {})
                for c in r.configs:
                    if c.config_operation == 0:
                        stored[c.name] = str(c.value)
                    elif c.config_operation == 1:
                        stored.pop(c.name, None)
            responses.append(
                AlterConfigsResourceResponse(resource_type=r.resource_type, resource_name=r.resource_name)
            )
        return IncrementalAlterConfigsResponse(responses=responses)

    def _create_acls(self, node: int, request: CreateAclsRequest, version: int) -> Any:
        if not self.authorizer:
            return CreateAclsResponse(
                results=[AclCreationResult(error_code=SECURITY_DISABLED) for _ in request.creations]
            )
        for c in request.creations:
            self.acls.append(
                (
                    c.resource_type,
                    c.resource_name,
                    c.resource_pattern_type,
                    c.principal,
                    c.host,
                    c.operation,
                    c.permission_type,
                )
            )
        return CreateAclsResponse(results=[AclCreationResult() for _ in request.creations])

    def _matches(self, acl: tuple[int, str, int, str, str, int, int], f: Any) -> bool:
        return (
            f.resource_type_filter in (1, acl[0])
            and f.resource_name_filter in (None, acl[1])
            and f.pattern_type_filter in (1, acl[2])
            and f.principal_filter in (None, acl[3])
            and f.host_filter in (None, acl[4])
            and f.operation in (1, acl[5])
            and f.permission_type in (1, acl[6])
        )

    def _describe_acls(self, node: int, request: DescribeAclsRequest, version: int) -> Any:
        if not self.authorizer:
            return DescribeAclsResponse(
                error_code=SECURITY_DISABLED, error_message="No Authorizer is configured."
            )
        return DescribeAclsResponse(
            resources=[
                DescribeAclsResource(
                    resource_type=a[0],
                    resource_name=a[1],
                    pattern_type=a[2],
                    acls=[AclDescription(principal=a[3], host=a[4], operation=a[5], permission_type=a[6])],
                )
                for a in self.acls
                if self._matches(a, request)
            ]
        )

    def _delete_acls(self, node: int, request: DeleteAclsRequest, version: int) -> Any:
        results = []
        for f in request.filters:
            matched = [a for a in self.acls if self._matches(a, f)]
            self.acls = [a for a in self.acls if a not in matched]
            results.append(
                DeleteAclsFilterResult(
                    matching_acls=[
                        DeleteAclsMatchingAcl(
                            resource_type=a[0],
                            resource_name=a[1],
                            pattern_type=a[2],
                            principal=a[3],
                            host=a[4],
                            operation=a[5],
                            permission_type=a[6],
                        )
                        for a in matched
                    ]
                )
            )
        return DeleteAclsResponse(filter_results=results)

    def _alter_scram(self, node: int, request: AlterUserScramCredentialsRequest, version: int) -> Any:
        users = []
        for u in request.upsertions:
            self.scram.setdefault(u.name, {})[u.mechanism] = (u.iterations, u.salt, u.salted_password)
            users.append(u.name)
        for d in request.deletions:
            self.scram.get(d.name, {}).pop(d.mechanism, None)
            users.append(d.name)
        return AlterUserScramCredentialsResponse(
            results=[AlterUserScramCredentialsResult(user=u) for u in dict.fromkeys(users)]
        )

    def _describe_txns(self, node: int, request: DescribeTransactionsRequest, version: int) -> Any:
        return DescribeTransactionsResponse(
            transaction_states=[
                self.transactions.get(t)
                or TransactionState(transactional_id=t, error_code=TRANSACTIONAL_ID_NOT_FOUND)
                for t in request.transactional_ids
            ]
        )

    def _init_producer_id(self, node: int, request: InitProducerIdRequest, version: int) -> Any:
        state = self.transactions[str(request.transactional_id)]
        state.producer_epoch += 1
        state.transaction_state = "CompleteAbort"
        return InitProducerIdResponse(producer_id=state.producer_id, producer_epoch=state.producer_epoch)

    def _log_dirs(self, node: int, request: DescribeLogDirsRequest, version: int) -> Any:
        return DescribeLogDirsResponse(
            results=[
                DescribeLogDirsResult(
                    log_dir=f"/data/broker{node}",
                    topics=[
                        DescribeLogDirsTopic(
                            name="t",
                            partitions=[DescribeLogDirsPartition(partition_index=node, partition_size=100)],
                        )
                    ],
                    total_bytes=1000,
                    usable_bytes=900,
                )
            ]
        )

    def _offset_delete(self, node: int, request: OffsetDeleteRequest, version: int) -> Any:
        return OffsetDeleteResponse(
            topics=[
                OffsetDeleteResponseTopic(
                    name=t.name,
                    partitions=[
                        OffsetDeleteResponsePartition(
                            partition_index=p.partition_index,
                            error_code=GROUP_SUBSCRIBED_TO_TOPIC if p.partition_index == 1 else 0,
                        )
                        for p in t.partitions
                    ],
                )
                for t in request.topics
            ]
        )

    def _reassign(self, node: int, request: AlterPartitionReassignmentsRequest, version: int) -> Any:
        return AlterPartitionReassignmentsResponse(
            responses=[
                ReassignableTopicResponse(
                    name=t.name,
                    partitions=[
                        ReassignablePartitionResponse(
                            partition_index=p.partition_index,
                            error_code=INVALID_REPLICA_ASSIGNMENT if p.replicas == [] else 0,
                        )
                        for p in t.partitions
                    ],
                )
                for t in request.topics
            ]
        )


@pytest.fixture
def fake() -> OpsFakeCluster:
    cluster = OpsFakeCluster(3)
    cluster.create_topic("t", 3)
    return cluster


def test_describe_configs_reads_sources_synonyms_and_hides_sensitive_values(fake: OpsFakeCluster) -> None:
    fake.configs["t"] = {"retention.ms": "1000"}
    topic = ConfigResource("topic", "t")
    api = DescribeConfigsApi([topic], names=None, include_synonyms=True, include_documentation=False)
    entries = AdminRig(fake).run(api).values()[topic]
    assert entries["retention.ms"].value == "1000"
    assert entries["retention.ms"].source is ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert entries["retention.ms"].synonyms[0].name == "log.retention.ms"
    assert entries["retention.ms"].synonyms[0].source is ConfigSource.STATIC_BROKER_CONFIG
    jaas = entries["sasl.jaas.config"]
    assert jaas.is_sensitive and jaas.is_read_only and jaas.value is None


def test_a_broker_resource_is_asked_of_that_broker(fake: OpsFakeCluster) -> None:
    rig = AdminRig(fake)
    resources = [ConfigResource("broker", "2"), ConfigResource("broker", "1")]
    api = DescribeConfigsApi(resources, names=None, include_synonyms=False, include_documentation=False)
    assert set(rig.run(api).values()) == set(resources)
    sent = rig.sent(DescribeConfigsRequest)
    assert sorted((b, r.resources[0].resource_name) for b, r in sent) == [(1, "1"), (2, "2")]


def test_a_broker_not_in_the_cluster_fails_naming_it(fake: OpsFakeCluster) -> None:
    resource = ConfigResource("broker", "7")
    api = DescribeConfigsApi([resource], names=None, include_synonyms=False, include_documentation=False)
    result = AdminRig(fake).run(api)
    error = result.failed[resource]
    assert isinstance(error, InvalidArgumentError)
    assert "broker 7 is not in the cluster" in str(error)
    assert not AdminRig(fake).sent(DescribeConfigsRequest)


def test_an_unknown_topic_fails_its_resource_only(fake: OpsFakeCluster) -> None:
    good, bad = ConfigResource("topic", "t"), ConfigResource("topic", "nope")
    api = DescribeConfigsApi([good, bad], names=None, include_synonyms=False, include_documentation=False)
    result = AdminRig(fake).run(api)
    assert good in result.completed
    assert isinstance(result.failed[bad], UnknownTopicOrPartitionError)
    assert "nope" in str(result.failed[bad])


def test_incremental_alter_sends_each_operation_and_validate_only_changes_nothing(
    fake: OpsFakeCluster,
) -> None:
    topic = ConfigResource("topic", "t")
    rig = AdminRig(fake)
    ops = [AlterConfigOp("retention.ms", "5", "set"), AlterConfigOp("cleanup.policy", None, "delete")]
    rig.run(IncrementalAlterConfigsApi({topic: ops}, validate_only=True)).values()
    assert fake.configs.get("t", {}) == {}
    rig.run(IncrementalAlterConfigsApi({topic: ops}, validate_only=False)).values()
    assert fake.configs["t"] == {"retention.ms": "5"}
    request = rig.sent(IncrementalAlterConfigsRequest)[-1][1]
    assert [(c.name, c.config_operation, c.value) for c in request.resources[0].configs] == [
        ("retention.ms", 0, "5"),
        ("cleanup.policy", 1, None),
    ]


def test_acls_are_created_listed_by_filter_and_deleted(fake: OpsFakeCluster) -> None:
    rig = AdminRig(fake)
    read = AclBinding("topic", "orders", "literal", "User:alice", "*", "read", "allow")
    write = AclBinding("topic", "orders", "prefixed", "User:bob", "*", "write", "deny")
    rig.run(CreateAclsApi([read, write])).values()
    assert sorted(rig.run(DescribeAclsApi(AclBindingFilter.any())).values()[None], key=repr) == sorted(
        [read, write], key=repr
    )
    only_alice = AclBindingFilter(principal="User:alice")
    assert rig.run(DescribeAclsApi(only_alice)).values()[None] == [read]
    assert rig.run(DeleteAclsApi([AclBindingFilter.of(write)])).values() == {
        AclBindingFilter.of(write): [write]
    }
    assert rig.run(DescribeAclsApi(AclBindingFilter())).values()[None] == [read]


def test_security_disabled_says_the_broker_has_no_authorizer(fake: OpsFakeCluster) -> None:
    fake.authorizer = False
    result = AdminRig(fake).run(DescribeAclsApi(AclBindingFilter.any()))
    error = result.failed[None]
    assert isinstance(error, SecurityDisabledError)
    assert "no authorizer" in str(error)


def test_an_acl_binding_refuses_matching_values_and_accepts_strings() -> None:
    binding = AclBinding("TOPIC", "orders", "Literal", "User:alice", "*", "read", "ALLOW")
    assert repr(binding) == "AclBinding('topic', 'orders', 'literal', 'User:alice', '*', 'read', 'allow')"
    with pytest.raises(InvalidArgumentError, match="only matches"):
        AclBinding("topic", "orders", "match", "User:alice", "*", "read", "allow")
    with pytest.raises(InvalidArgumentError, match="unknown AclOperation 'reed'"):
        AclBinding("topic", "orders", "literal", "User:alice", "*", "reed", "allow")


def test_scram_passwords_are_salted_here_and_never_sent_or_shown(fake: OpsFakeCluster) -> None:
    upsertion = UserScramCredentialUpsertion("alice", "SCRAM-SHA-256", "hunter2-secret", 8192)
    assert "hunter2" not in repr(upsertion)
    AdminRig(fake).run(
        AlterScramCredentialsApi([upsertion], [UserScramCredentialDeletion("bob", "SCRAM-SHA-512")])
    ).values()
    iterations, salt, salted = fake.scram["alice"][int(ScramMechanism.SCRAM_SHA_256)]
    assert iterations == 8192 and len(salt) == 32
    assert salted == hashlib.pbkdf2_hmac("sha256", b"hunter2-secret", salt, 8192)
    request = fake.handled[-1][1]
    assert b"hunter2-secret" not in repr(request).encode()


def test_transactions_are_described_by_their_coordinator_and_fenced(fake: OpsFakeCluster) -> None:
    fake.transactions["tx"] = TransactionState(
        transactional_id="tx",
        transaction_state="Ongoing",
        transaction_timeout_ms=60000,
        transaction_start_time_ms=5,
        producer_id=42,
        producer_epoch=3,
        topics=[TopicData(topic="t", partitions=[0, 2])],
    )
    rig = AdminRig(fake)
    result = rig.run(DescribeTransactionsApi(["tx", "missing"]))
    described = result.completed["tx"]
    assert (described.state, described.producer_id, described.producer_epoch) == ("Ongoing", 42, 3)
    assert described.partitions == {TopicPartition("t", 0), TopicPartition("t", 2)}
    assert isinstance(result.failed["missing"], TransactionalIdNotFoundError)
    finds = rig.sent(FindCoordinatorRequest)
    assert finds and all(r.key_type == 1 for _, r in finds)
    fenced = rig.run(FenceProducersApi(["tx"])).values()["tx"]
    assert (fenced.producer_id, fenced.epoch) == (42, 4)


def test_log_dirs_come_from_each_named_broker(fake: OpsFakeCluster) -> None:
    dirs = AdminRig(fake).run(DescribeLogDirsApi([0, 2])).values()
    assert set(dirs) == {0, 2}
    assert dirs[2]["/data/broker2"].replicas[TopicPartition("t", 2)].size == 100
    assert dirs[0]["/data/broker0"].usable_bytes == 900


def test_offset_delete_reports_each_partition(fake: OpsFakeCluster) -> None:
    partitions = [TopicPartition("t", 0), TopicPartition("t", 1)]
    result = AdminRig(fake).run(OffsetDeleteApi("g", partitions)).values()["g"]
    assert result[TopicPartition("t", 0)] is None
    assert isinstance(result[TopicPartition("t", 1)], GroupSubscribedToTopicError)


def test_reassignments_report_each_partition_and_go_to_the_controller(fake: OpsFakeCluster) -> None:
    rig = AdminRig(fake)
    result = rig.run(
        AlterReassignmentsApi({TopicPartition("t", 0): [1, 2], TopicPartition("t", 1): []}, 1000)
    ).values()[None]
    assert result[TopicPartition("t", 0)] is None
    assert result[TopicPartition("t", 1)] is not None
    assert result[TopicPartition("t", 1)].code == INVALID_REPLICA_ASSIGNMENT  # type: ignore[union-attr]
    assert [b for b, _ in rig.sent(AlterPartitionReassignmentsRequest)] == [min(fake.brokers)]


class MoreOpsFakeCluster(OpsFakeCluster):
    """Also answers ElectLeaders, ListPartitionReassignments, WriteTxnMarkers, ListTransactions,
    the legacy AlterConfigs and DescribeUserScramCredentials."""

    def handle(self, broker_id: int, request: Any, version: int) -> Any:
        handlers = {
            ElectLeadersRequest: lambda r: ElectLeadersResponse(
                replica_election_results=[
                    ReplicaElectionResult(
                        topic=t.topic,
                        partition_result=[
                            PartitionResult(partition_id=p, error_code=ELECTION_NOT_NEEDED if p == 0 else 0)
                            for p in t.partitions
                        ],
                    )
                    for t in r.topic_partitions
                ]
            ),
            ListPartitionReassignmentsRequest: lambda r: ListPartitionReassignmentsResponse(
                topics=[
                    OngoingTopicReassignment(
                        name="t",
                        partitions=[
                            OngoingPartitionReassignment(
                                partition_index=1,
                                replicas=[0, 1, 2],
                                adding_replicas=[2],
                                removing_replicas=[0],
                            )
                        ],
                    )
                ]
            ),
            WriteTxnMarkersRequest: lambda r: WriteTxnMarkersResponse(
                markers=[
                    WritableTxnMarkerResult(
                        producer_id=m.producer_id,
                        topics=[
                            WritableTxnMarkerTopicResult(
                                name=t.name,
                                partitions=[
                                    WritableTxnMarkerPartitionResult(partition_index=p)
                                    for p in t.partition_indexes
                                ],
                            )
                            for t in m.topics
                        ],
                    )
                    for m in r.markers
                ]
            ),
            ListTransactionsRequest: lambda r: ListTransactionsResponse(
                transaction_states=[
                    ListedTransaction(
                        transactional_id=f"tx-{broker_id}", producer_id=broker_id, transaction_state="Ongoing"
                    )
                ]
            ),
            LegacyAlterConfigsRequest: lambda r: LegacyAlterConfigsResponse(
                responses=[
                    LegacyAlterConfigsResourceResponse(
                        resource_type=x.resource_type, resource_name=x.resource_name
                    )
                    for x in r.resources
                ]
            ),
            DescribeUserScramCredentialsRequest: lambda r: DescribeUserScramCredentialsResponse(
                results=[
                    DescribeUserScramCredentialsResult(
                        user=u,
                        credential_infos=[
                            CredentialInfo(mechanism=m, iterations=it) for m, (it, _, _) in creds.items()
                        ],
                    )
                    for u, creds in self.scram.items()
                ]
            ),
        }
        handler = handlers.get(type(request))
        if handler is None:
            return super().handle(broker_id, request, version)
        self.handled.append((broker_id, request, version))
        return handler(request)


@pytest.fixture
def more() -> MoreOpsFakeCluster:
    cluster = MoreOpsFakeCluster(3)
    cluster.create_topic("t", 3)
    return cluster


def test_elect_leaders_reports_each_partition(more: MoreOpsFakeCluster) -> None:
    rig = AdminRig(more)
    partitions = [TopicPartition("t", 0), TopicPartition("t", 1)]
    result = rig.run(ElectLeadersApi(0, partitions, 1000)).values()[None]
    assert result[TopicPartition("t", 1)] is None
    assert isinstance(result[TopicPartition("t", 0)], ElectionNotNeededError)
    [(broker, request)] = rig.sent(ElectLeadersRequest)
    assert broker == min(more.brokers) and request.election_type == 0


def test_ongoing_reassignments_are_listed(more: MoreOpsFakeCluster) -> None:
    listed = AdminRig(more).run(ListReassignmentsApi(None, 1000)).values()[None]
    assert listed == {TopicPartition("t", 1): PartitionReassignment([0, 1, 2], [2], [0])}


def test_an_abort_marker_goes_to_the_partitions_leader(more: MoreOpsFakeCluster) -> None:
    rig = AdminRig(more)
    spec = AbortTransactionSpec(TopicPartition("t", 2), producer_id=9, producer_epoch=1, coordinator_epoch=4)
    rig.run(AbortTransactionApi(spec)).values()
    [(broker, request)] = rig.sent(WriteTxnMarkersRequest)
    assert broker == more.partition(TopicPartition("t", 2)).leader
    [marker] = request.markers
    assert (marker.producer_id, marker.producer_epoch, marker.coordinator_epoch) == (9, 1, 4)
    assert marker.transaction_result is False


def test_transactions_are_listed_by_every_broker(more: MoreOpsFakeCluster) -> None:
    listed = AdminRig(more).run(ListTransactionsApi([], [], -1)).values()
    assert sorted(t.transactional_id for ts in listed.values() for t in ts) == ["tx-0", "tx-1", "tx-2"]


def test_the_legacy_alter_configs_sends_the_whole_set(more: MoreOpsFakeCluster) -> None:
    rig = AdminRig(more)
    topic = ConfigResource("topic", "t")
    rig.run(LegacyAlterConfigsApi({topic: {"b": "2", "a": "1"}}, validate_only=False)).values()
    [(_, request)] = rig.sent(LegacyAlterConfigsRequest)
    assert [(c.name, c.value) for c in request.resources[0].configs] == [("a", "1"), ("b", "2")]


def test_scram_credentials_are_described_without_secrets(more: MoreOpsFakeCluster) -> None:
    rig = AdminRig(more)
    rig.run(
        AlterScramCredentialsApi([UserScramCredentialUpsertion("alice", "SCRAM-SHA-512", "pw-123456")], [])
    ).values()
    described = rig.run(DescribeScramCredentialsApi(None)).values()[None]
    [info] = described["alice"].credential_infos
    assert (info.mechanism.label, info.iterations) == ("SCRAM-SHA-512", 4096)
