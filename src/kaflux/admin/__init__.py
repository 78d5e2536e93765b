"""``kaflux.AdminClient``: topics, partitions and their offsets, consumer and share groups,
configs, ACLs, SCRAM users, transactions and the cluster. [app: the client's
public methods]

:mod:`kaflux.admin.client` is the application-side facade (group calls in
:mod:`kaflux.admin.group_calls`); :mod:`kaflux.admin.request_manager` drives its calls on the
network thread (lookups, fan-out, retries until each call's deadline) from the requests described
in :mod:`kaflux.admin.groups`, :mod:`kaflux.admin.group_describe` and :mod:`kaflux.admin.topics`.
The calls return the frozen dataclasses of :mod:`kaflux.admin.results`.
"""

from kaflux.admin.acls import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kaflux.admin.client import AdminClient, NewTopic
from kaflux.admin.configs import (
    AlterConfigOp,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
    ConfigSynonym,
)
from kaflux.admin.features import FeatureMetadata, FinalizedVersionRange, SupportedVersionRange
from kaflux.admin.group_members import MemberToRemove
from kaflux.admin.offsets import IsolationLevel, ListOffsetsResultInfo, OffsetSpec
from kaflux.admin.producers import ProducerState
from kaflux.admin.replicas import LogDirDescription, PartitionReassignment, ReplicaInfo
from kaflux.admin.results import (
    ClusterDescription,
    ConsumerGroupDescription,
    ConsumerGroupListing,
    GroupListing,
    MemberDescription,
    PartitionDescription,
    TopicDescription,
)
from kaflux.admin.scram import (
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialsDescription,
    UserScramCredentialUpsertion,
)
from kaflux.admin.share_groups import (
    ShareGroupDescription,
    ShareMemberDescription,
    SharePartitionOffsetInfo,
)
from kaflux.admin.tokens_quotas import (
    ClientQuotaAlteration,
    ClientQuotaEntity,
    ClientQuotaFilterComponent,
    DelegationToken,
    TokenInformation,
)
from kaflux.admin.transactions import (
    AbortTransactionSpec,
    ProducerIdAndEpoch,
    TransactionDescription,
    TransactionListing,
)

__all__ = [
    "AbortTransactionSpec",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "AdminClient",
    "AlterConfigOp",
    "ClientQuotaAlteration",
    "ClientQuotaEntity",
    "ClientQuotaFilterComponent",
    "ClusterDescription",
    "ConfigEntry",
    "ConfigResource",
    "ConfigResourceType",
    "ConfigSource",
    "ConfigSynonym",
    "ConsumerGroupDescription",
    "ConsumerGroupListing",
    "DelegationToken",
    "FeatureMetadata",
    "FinalizedVersionRange",
    "GroupListing",
    "IsolationLevel",
    "ListOffsetsResultInfo",
    "LogDirDescription",
    "MemberDescription",
    "MemberToRemove",
    "NewTopic",
    "OffsetSpec",
    "PartitionDescription",
    "PartitionReassignment",
    "PatternType",
    "ProducerIdAndEpoch",
    "ProducerState",
    "ReplicaInfo",
    "ResourceType",
    "ScramCredentialInfo",
    "ScramMechanism",
    "ShareGroupDescription",
    "ShareMemberDescription",
    "SharePartitionOffsetInfo",
    "SupportedVersionRange",
    "TokenInformation",
    "TopicDescription",
    "TransactionDescription",
    "TransactionListing",
    "UserScramCredentialDeletion",
    "UserScramCredentialUpsertion",
    "UserScramCredentialsDescription",
]
