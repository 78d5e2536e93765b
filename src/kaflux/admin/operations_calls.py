"""The admin client's operations calls: configs, ACLs, SCRAM users, transactions, log
directories, leader elections and partition reassignments. [app: public methods of
``AdminClient``, which mixes this class in]

Each method checks its arguments, hands an :class:`~kaflux.admin.operation.AdminOperation` to the
network thread through ``AdminClient._run`` and turns the answer into typed results; a broker
error is raised as its kaflux error class, naming what it was about. A call a broker does not
implement raises :class:`~kaflux.errors.UnsupportedVersionError` naming the API and the broker.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

from kaflux.admin.acls import (
    AclBinding,
    AclBindingFilter,
    CreateAclsApi,
    DeleteAclsApi,
    DescribeAclsApi,
)
from kaflux.admin.configs import (
    AlterConfigOp,
    ConfigEntry,
    ConfigResource,
    DescribeConfigsApi,
    IncrementalAlterConfigsApi,
    LegacyAlterConfigsApi,
    resources_of,
)
from kaflux.admin.operation import AdminApi, AdminResult
from kaflux.admin.producers import DescribeProducersApi, ProducerState
from kaflux.admin.replicas import (
    ELECTION_TYPES,
    AlterReassignmentsApi,
    DescribeLogDirsApi,
    ElectLeadersApi,
    ListReassignmentsApi,
    LogDirDescription,
    PartitionReassignment,
)
from kaflux.admin.scram import (
    AlterScramCredentialsApi,
    DescribeScramCredentialsApi,
    UserScramCredentialDeletion,
    UserScramCredentialsDescription,
    UserScramCredentialUpsertion,
)
from kaflux.admin.transactions import (
    AbortTransactionApi,
    AbortTransactionSpec,
    DescribeTransactionsApi,
    FenceProducersApi,
    ListTransactionsApi,
    ProducerIdAndEpoch,
    TransactionDescription,
    TransactionListing,
)
from kaflux.blocking import Steps, blocking
from kaflux.errors import InvalidArgumentError, KafkaError
from kaflux.structs import TopicPartition
from kaflux.validation import is_topic_partition_pair

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def _strings(values: Iterable[str], what: str, kind: str) -> list[str]:
    if isinstance(values, (str, bytes)):
        raise InvalidArgumentError(f"{what} takes an iterable of {kind}s, not one string: wrap it in a list")
    checked = list(dict.fromkeys(values))
    for value in checked:
        if not isinstance(value, str) or not value:
            raise InvalidArgumentError(f"{what}: a {kind} must be a non-empty string, got {value!r}")
    return checked


def _partitions(partitions: Iterable[TopicPartition], what: str) -> list[TopicPartition]:
    checked = []
    for tp in partitions:
        if not is_topic_partition_pair(tp):
            raise InvalidArgumentError(f"{what}: expected TopicPartition(topic, partition), got {tp!r}")
        checked.append(TopicPartition(*tp))
    return checked


class OperationsCalls:
    """Operations methods of :class:`~kaflux.admin.client.AdminClient`."""

    def _run(self, what: str, api: AdminApi[K, V], deadline_ms: int) -> Steps[AdminResult[K, V]]:
        raise NotImplementedError  # AdminClient runs it on its network thread

    def _deadline_ms(self, timeout: float | None) -> tuple[float, int]:
        raise NotImplementedError  # AdminClient: (seconds, deadline in monotonic ms)

    # -- configs ---------------------------------------------------------------------------------

    @blocking
    def describe_configs(
        self,
        resources: Iterable[ConfigResource],
        *,
        names: Iterable[str] | None = None,
        include_synonyms: bool = True,
        include_documentation: bool = False,
        timeout: float | None = None,
    ) -> Steps[dict[ConfigResource, dict[str, ConfigEntry]]]:
        """The configs of topics and brokers: ``{resource: {name: ConfigEntry}}``, every config
        (or only ``names``), sorted by name, with where each value comes from, its synonyms at
        other levels, and whether it is sensitive (its value is then None) or read-only. A
        broker resource is asked of that broker.

        Raises:
            InvalidArgumentError: not a ConfigResource, or a broker that is not in the cluster.
            UnknownTopicOrPartitionError: a topic does not exist.
            BrokerError: a broker refused (e.g. ``TopicAuthorizationFailedError``).
            KafkaTimeoutError: not answered in time.
        """
        what = "describe_configs()"
        wanted = resources_of(resources, what)
        if not wanted:
            return {}
        keys = None if names is None else _strings(names, what, "config name")
        _, deadline = self._deadline_ms(timeout)
        api = DescribeConfigsApi(
            wanted, names=keys, include_synonyms=include_synonyms, include_documentation=include_documentation
        )
        described = (yield from self._run(what, api, deadline)).values()
        return {r: described[r] for r in wanted}

    @blocking
    def incremental_alter_configs(
        self,
        changes: Mapping[ConfigResource, Sequence[AlterConfigOp]],
        *,
        validate_only: bool = False,
        timeout: float | None = None,
    ) -> Steps[None]:
        """Change configs of topics and brokers: per resource, a list of
        :class:`~kaflux.admin.AlterConfigOp` (set, delete, append, subtract). With
        ``validate_only`` the brokers only check the changes.

        Raises:
            InvalidArgumentError: a bad resource or change.
            InvalidConfigurationError / InvalidRequestError: a broker refused a change (the
                message names the resource).
            UnsupportedVersionError: the broker has only the legacy call: use ``alter_configs``.
            KafkaTimeoutError: not answered in time.
        """
        what = "incremental_alter_configs()"
        resources = resources_of(changes, what)
        for resource in resources:
            ops = changes[resource]
            if isinstance(ops, AlterConfigOp) or not all(isinstance(op, AlterConfigOp) for op in ops):
                raise InvalidArgumentError(f"{what}: {resource} needs a list of AlterConfigOp, got {ops!r}")
        if not resources:
            return
        _, deadline = self._deadline_ms(timeout)
        api = IncrementalAlterConfigsApi(
            {r: list(changes[r]) for r in resources}, validate_only=validate_only
        )
        (yield from self._run(what, api, deadline)).values()

    @blocking
    def alter_configs(
        self,
        configs: Mapping[ConfigResource, Mapping[str, str]],
        *,
        validate_only: bool = False,
        timeout: float | None = None,
    ) -> Steps[None]:
        """The legacy AlterConfigs, for brokers without IncrementalAlterConfigs: REPLACES every
        dynamic config of each resource with ``{name: value}``; a config left out goes back to
        its default. Prefer :meth:`incremental_alter_configs`.

        Raises: as :meth:`incremental_alter_configs`.
        """
        what = "alter_configs()"
        resources = resources_of(configs, what)
        for resource in resources:
            for name, value in configs[resource].items():
                if not isinstance(name, str) or not isinstance(value, str):
                    raise InvalidArgumentError(
                        f"{what}: {resource}: configs are str -> str, got {name!r}: {value!r}"
                    )
        if not resources:
            return
        _, deadline = self._deadline_ms(timeout)
        api = LegacyAlterConfigsApi({r: configs[r] for r in resources}, validate_only=validate_only)
        (yield from self._run(what, api, deadline)).values()

    # -- ACLs ------------------------------------------------------------------------------------

    @blocking
    def describe_acls(
        self, acl_filter: AclBindingFilter | None = None, *, timeout: float | None = None
    ) -> Steps[list[AclBinding]]:
        """The ACLs ``acl_filter`` matches (None: every ACL).

        Raises:
            SecurityDisabledError: the broker has no authorizer, so it keeps no ACLs.
            ClusterAuthorizationFailedError: this principal may not describe ACLs.
            KafkaTimeoutError: not answered in time.
        """
        chosen = AclBindingFilter.any() if acl_filter is None else acl_filter
        if not isinstance(chosen, AclBindingFilter):
            raise InvalidArgumentError(f"describe_acls() takes an AclBindingFilter, got {acl_filter!r}")
        _, deadline = self._deadline_ms(timeout)
        return (yield from self._run("describe_acls()", DescribeAclsApi(chosen), deadline)).values()[None]

    @blocking
    def create_acls(self, bindings: Iterable[AclBinding], *, timeout: float | None = None) -> Steps[None]:
        """Create ACLs (creating one that exists is not an error).

        Raises:
            InvalidArgumentError: not an AclBinding.
            SecurityDisabledError: the broker has no authorizer.
            BrokerError: the broker refused one (the message names it).
            KafkaTimeoutError: not answered in time.
        """
        wanted = list(bindings)
        for binding in wanted:
            if not isinstance(binding, AclBinding):
                raise InvalidArgumentError(f"create_acls() takes AclBindings, got {binding!r}")
        if not wanted:
            return
        _, deadline = self._deadline_ms(timeout)
        (yield from self._run("create_acls()", CreateAclsApi(wanted), deadline)).values()

    @blocking
    def delete_acls(
        self, filters: Iterable[AclBindingFilter], *, timeout: float | None = None
    ) -> Steps[dict[AclBindingFilter, list[AclBinding]]]:
        """Delete the ACLs each filter matches; returns what each filter deleted.

        Raises: as :meth:`create_acls`.
        """
        wanted = list(dict.fromkeys(filters))
        for acl_filter in wanted:
            if not isinstance(acl_filter, AclBindingFilter):
                raise InvalidArgumentError(f"delete_acls() takes AclBindingFilters, got {acl_filter!r}")
        if not wanted:
            return {}
        _, deadline = self._deadline_ms(timeout)
        deleted = (yield from self._run("delete_acls()", DeleteAclsApi(wanted), deadline)).values()
        return {f: deleted[f] for f in wanted}

    # -- SCRAM users -----------------------------------------------------------------------------

    @blocking
    def describe_user_scram_credentials(
        self, users: Iterable[str] | None = None, *, timeout: float | None = None
    ) -> Steps[dict[str, UserScramCredentialsDescription]]:
        """The SCRAM credentials (mechanism and iterations) of ``users`` (None: every user
        that has one).

        Raises:
            ResourceNotFoundError: a named user has no credential.
            UnsupportedVersionError: the broker does not keep SCRAM credentials.
            KafkaTimeoutError: not answered in time.
        """
        what = "describe_user_scram_credentials()"
        names = None if users is None else _strings(users, what, "user name")
        _, deadline = self._deadline_ms(timeout)
        return (yield from self._run(what, DescribeScramCredentialsApi(names), deadline)).values()[None]

    @blocking
    def alter_user_scram_credentials(
        self,
        upsertions: Iterable[UserScramCredentialUpsertion] = (),
        deletions: Iterable[UserScramCredentialDeletion] = (),
        *,
        timeout: float | None = None,
    ) -> Steps[None]:
        """Set users' SCRAM passwords and delete credentials. Each
        :class:`~kaflux.admin.UserScramCredentialUpsertion` salts its password here: the plain
        password is never sent.

        Raises:
            InvalidArgumentError: not an upsertion or deletion.
            BrokerError: the broker refused a change (the message names the user).
            UnsupportedVersionError: the broker does not keep SCRAM credentials.
            KafkaTimeoutError: not answered in time.
        """
        ups, dels = list(upsertions), list(deletions)
        if not all(isinstance(u, UserScramCredentialUpsertion) for u in ups) or not all(
            isinstance(d, UserScramCredentialDeletion) for d in dels
        ):
            raise InvalidArgumentError(
                "alter_user_scram_credentials() takes UserScramCredentialUpsertion and "
                "UserScramCredentialDeletion objects"
            )
        if not ups and not dels:
            return
        _, deadline = self._deadline_ms(timeout)
        (
            yield from self._run(
                "alter_user_scram_credentials()", AlterScramCredentialsApi(ups, dels), deadline
            )
        ).values()

    # -- transactions ----------------------------------------------------------------------------

    @blocking
    def list_transactions(
        self,
        *,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        duration_ms: int = -1,
        timeout: float | None = None,
    ) -> Steps[list[TransactionListing]]:
        """Every transactional id the cluster's coordinators know, sorted, optionally only
        those in ``states`` (``"Ongoing"``...), of ``producer_ids``, or running longer than
        ``duration_ms`` (brokers with ListTransactions v1).

        Raises:
            UnsupportedVersionError: a broker does not implement ListTransactions.
            KafkaTimeoutError: some broker did not answer in time.
        """
        what = "list_transactions()"
        _, deadline = self._deadline_ms(timeout)
        api = ListTransactionsApi(_strings(states, what, "state"), list(producer_ids), duration_ms)
        listings = {
            t.transactional_id: t
            for ts in (yield from self._run(what, api, deadline)).values().values()
            for t in ts
        }
        return [listings[t] for t in sorted(listings)]

    @blocking
    def describe_transactions(
        self, transactional_ids: Iterable[str], *, timeout: float | None = None
    ) -> Steps[dict[str, TransactionDescription]]:
        """Describe transactions: state, producer id and epoch, timeout, start time and the
        partitions written (DescribeTransactions to each id's coordinator).

        Raises:
            TransactionalIdNotFoundError: an id is not known.
            KafkaTimeoutError: not answered in time.
        """
        what = "describe_transactions()"
        ids = _strings(transactional_ids, what, "transactional id")
        if not ids:
            return {}
        _, deadline = self._deadline_ms(timeout)
        described = (yield from self._run(what, DescribeTransactionsApi(ids), deadline)).values()
        return {i: described[i] for i in ids}

    @blocking
    def fence_producers(
        self, transactional_ids: Iterable[str], *, timeout: float | None = None
    ) -> Steps[dict[str, ProducerIdAndEpoch]]:
        """Fence the producers using these transactional ids: their epoch is bumped, so their
        next send fails with ProducerFencedError and an open transaction is aborted.

        Raises:
            BrokerError: a coordinator refused (e.g. ``TransactionalIdAuthorizationFailedError``).
            KafkaTimeoutError: not answered in time.
        """
        what = "fence_producers()"
        ids = _strings(transactional_ids, what, "transactional id")
        if not ids:
            return {}
        _, deadline = self._deadline_ms(timeout)
        fenced = (yield from self._run(what, FenceProducersApi(ids), deadline)).values()
        return {i: fenced[i] for i in ids}

    @blocking
    def describe_producers(
        self,
        partitions: Iterable[TopicPartition],
        *,
        broker_id: int | None = None,
        timeout: float | None = None,
    ) -> Steps[dict[TopicPartition, list[ProducerState]]]:
        """The producers each partition's log knows (DescribeProducers, KIP-664, to each leader;
        or to ``broker_id``, which must hold a replica), as Java's ``Admin.describeProducers``:
        id, epoch, last sequence and timestamp, coordinator epoch, and the offset where an open
        transaction started. An old open transaction there is a hanging one:
        :meth:`abort_transaction` ends it. Sorted by partition.

        Raises:
            InvalidArgumentError: a bad partition or broker id, or a broker not in the cluster.
            UnknownTopicOrPartitionError: a topic or partition does not exist (or ``broker_id``
                holds no replica of it).
            UnsupportedVersionError: the broker lacks DescribeProducers (Kafka before 2.8).
            KafkaTimeoutError: not answered in time.
        """
        what = "describe_producers()"
        if isinstance(partitions, (str, bytes)):
            raise InvalidArgumentError(f"{what} takes an iterable of TopicPartitions, not a string")
        wanted = list(dict.fromkeys(_partitions(partitions, what)))
        if broker_id is not None and (
            isinstance(broker_id, bool) or not isinstance(broker_id, int) or broker_id < 0
        ):
            raise InvalidArgumentError(f"{what}: broker_id must be an int >= 0 or None, got {broker_id!r}")
        if not wanted:
            return {}
        _, deadline = self._deadline_ms(timeout)
        found = (yield from self._run(what, DescribeProducersApi(wanted, broker_id), deadline)).values()
        return {tp: found[tp] for tp in sorted(wanted)}

    @blocking
    def abort_transaction(self, spec: AbortTransactionSpec, *, timeout: float | None = None) -> Steps[None]:
        """Abort a hanging transaction on one partition by writing its abort marker
        (WriteTxnMarkers to the partition's leader).

        Raises:
            UnsupportedVersionError: the leader does not take WriteTxnMarkers from clients.
            BrokerError: the leader refused (e.g. ``InvalidProducerEpochError``).
            KafkaTimeoutError: not answered in time.
        """
        if not isinstance(spec, AbortTransactionSpec):
            raise InvalidArgumentError(f"abort_transaction() takes an AbortTransactionSpec, got {spec!r}")
        _partitions([spec.partition], "abort_transaction()")
        _, deadline = self._deadline_ms(timeout)
        (yield from self._run("abort_transaction()", AbortTransactionApi(spec), deadline)).values()

    # -- replicas --------------------------------------------------------------------------------

    @blocking
    def describe_log_dirs(
        self, brokers: Iterable[int], *, timeout: float | None = None
    ) -> Steps[dict[int, dict[str, LogDirDescription]]]:
        """Each broker's log directories and the replicas in them.

        Raises:
            InvalidArgumentError: a broker id is not in the cluster.
            UnsupportedVersionError: a broker does not implement DescribeLogDirs.
            KafkaTimeoutError: not answered in time.
        """
        ids = list(dict.fromkeys(brokers))
        for broker in ids:
            if isinstance(broker, bool) or not isinstance(broker, int) or broker < 0:
                raise InvalidArgumentError(
                    f"describe_log_dirs(): a broker id must be an int >= 0, got {broker!r}"
                )
        if not ids:
            return {}
        _, deadline = self._deadline_ms(timeout)
        described = (yield from self._run("describe_log_dirs()", DescribeLogDirsApi(ids), deadline)).values()
        return {b: described[b] for b in ids}

    @blocking
    def elect_leaders(
        self,
        election_type: str = "preferred",
        partitions: Iterable[TopicPartition] | None = None,
        *,
        timeout: float | None = None,
    ) -> Steps[dict[TopicPartition, KafkaError | None]]:
        """Elect the preferred (or, ``"unclean"``, any) leader of ``partitions`` (None: every
        partition that needs it). Returns each partition's error, None when elected (Kafka
        answers ``ElectionNotNeededError`` for a partition already led by its preferred
        replica).

        Raises:
            UnsupportedVersionError: the controller does not implement ElectLeaders.
            KafkaTimeoutError: not answered in time.
        """
        what = "elect_leaders()"
        kind = ELECTION_TYPES.get(election_type)
        if kind is None:
            raise InvalidArgumentError(
                f"{what}: election_type must be 'preferred' or 'unclean', got {election_type!r}"
            )
        wanted = None if partitions is None else _partitions(partitions, what)
        seconds, deadline = self._deadline_ms(timeout)
        return (
            yield from self._run(what, ElectLeadersApi(kind, wanted, int(seconds * 1000)), deadline)
        ).values()[None]

    @blocking
    def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None, *, timeout: float | None = None
    ) -> Steps[dict[TopicPartition, PartitionReassignment]]:
        """The reassignments in progress (of ``partitions``, or all).

        Raises:
            UnsupportedVersionError: the controller does not implement ListPartitionReassignments.
            KafkaTimeoutError: not answered in time.
        """
        what = "list_partition_reassignments()"
        wanted = None if partitions is None else _partitions(partitions, what)
        seconds, deadline = self._deadline_ms(timeout)
        return (
            yield from self._run(what, ListReassignmentsApi(wanted, int(seconds * 1000)), deadline)
        ).values()[None]

    @blocking
    def alter_partition_reassignments(
        self,
        reassignments: Mapping[TopicPartition, Sequence[int] | None],
        *,
        timeout: float | None = None,
    ) -> Steps[dict[TopicPartition, KafkaError | None]]:
        """Move partitions to new replica lists (None cancels a reassignment in progress).
        Returns each partition's error (None: accepted).

        Raises:
            InvalidArgumentError: a bad partition or replica list.
            UnsupportedVersionError: the controller does not implement AlterPartitionReassignments.
            KafkaTimeoutError: not answered in time.
        """
        what = "alter_partition_reassignments()"
        checked: dict[TopicPartition, list[int] | None] = {}
        for tp, replicas in zip(_partitions(reassignments, what), reassignments.values(), strict=True):
            if replicas is not None and (
                isinstance(replicas, (str, bytes))
                or not all(isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in replicas)
            ):
                raise InvalidArgumentError(
                    f"{what}: the replicas of {tp} must be broker ids, got {replicas!r}"
                )
            checked[tp] = None if replicas is None else list(replicas)
        if not checked:
            return {}
        seconds, deadline = self._deadline_ms(timeout)
        return (
            yield from self._run(what, AlterReassignmentsApi(checked, int(seconds * 1000)), deadline)
        ).values()[None]
