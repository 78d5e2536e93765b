"""Access control lists: bindings, filters, and the admin requests that list, create and delete
them. [pure]

The types follow Java's ``org.apache.kafka.common.acl`` and ``resource`` packages, in Java's
argument order: ``AclBinding(resource_type, name, pattern_type, principal, host, operation,
permission)``. Each enum field takes the enum or its name in any case (``"topic"``,
``"literal"``, ``"read"``, ``"allow"``). The requests go to any broker, as Java sends them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kaflux.admin.names import NamedIntEnum
from kaflux.admin.operation import AdminApi, Lookup, Outcome
from kaflux.errors import InvalidArgumentError, KafkaError, SecurityDisabledError, error_for_code
from kaflux.protocol.framing import RequestMessage
from kaflux.protocol.messages.create_acls import AclCreation, CreateAclsRequest, CreateAclsResponse
from kaflux.protocol.messages.delete_acls import DeleteAclsFilter, DeleteAclsRequest, DeleteAclsResponse
from kaflux.protocol.messages.describe_acls import DescribeAclsRequest, DescribeAclsResponse
from kaflux.structs import Node

__all__ = [
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "CreateAclsApi",
    "DeleteAclsApi",
    "DescribeAclsApi",
    "PatternType",
    "ResourceType",
]


class ResourceType(NamedIntEnum):
    """What an ACL protects (Java's ``ResourceType``; wire values)."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(NamedIntEnum):
    """How an ACL's resource name matches (Java's ``PatternType``)."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(NamedIntEnum):
    """What an ACL allows or denies (Java's ``AclOperation``)."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(NamedIntEnum):
    """Whether an ACL allows or denies (Java's ``AclPermissionType``)."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


def _text(value: object, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidArgumentError(f"an ACL's {what} must be a non-empty string, got {value!r}")
    return value


@dataclass(frozen=True, slots=True, init=False)
class AclBinding:
    """One ACL: ``AclBinding("topic", "orders", "literal", "User:alice", "*", "read", "allow")``
    lets alice read topic ``orders`` from any host."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    def __init__(
        self,
        resource_type: ResourceType | str,
        name: str,
        pattern_type: PatternType | str,
        principal: str,
        host: str,
        operation: AclOperation | str,
        permission: AclPermissionType | str,
    ) -> None:
        values: tuple[object, ...] = (
            ResourceType.parse(resource_type),
            _text(name, "resource name"),
            PatternType.parse(pattern_type),
            _text(principal, "principal"),
            _text(host, "host"),
            AclOperation.parse(operation),
            AclPermissionType.parse(permission),
        )
        for value in values:
            # by name: the enums are ints, so TOPIC == MATCH == 2
            if isinstance(value, NamedIntEnum) and value.name in ("ANY", "MATCH", "UNKNOWN"):
                raise InvalidArgumentError(
                    f"an ACL binding cannot use {type(value).__name__}.{value.name}: that only "
                    "matches, in an AclBindingFilter"
                )
        for field_name, value in zip(self.__slots__, values, strict=True):
            object.__setattr__(self, field_name, value)

    def __repr__(self) -> str:
        return (
            f"AclBinding({self.resource_type.name.lower()!r}, {self.name!r}, "
            f"{self.pattern_type.name.lower()!r}, {self.principal!r}, {self.host!r}, "
            f"{self.operation.name.lower()!r}, {self.permission.name.lower()!r})"
        )


@dataclass(frozen=True, slots=True, init=False)
class AclBindingFilter:
    """Which ACLs to list or delete: every field None (or ``"any"``) matches everything;
    ``pattern_type="match"`` matches every pattern that applies to ``name``."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission: AclPermissionType

    def __init__(
        self,
        resource_type: ResourceType | str = ResourceType.ANY,
        name: str | None = None,
        pattern_type: PatternType | str = PatternType.ANY,
        principal: str | None = None,
        host: str | None = None,
        operation: AclOperation | str = AclOperation.ANY,
        permission: AclPermissionType | str = AclPermissionType.ANY,
    ) -> None:
        values = (
            ResourceType.parse(resource_type),
            None if name is None else _text(name, "resource name"),
            PatternType.parse(pattern_type),
            None if principal is None else _text(principal, "principal"),
            None if host is None else _text(host, "host"),
            AclOperation.parse(operation),
            AclPermissionType.parse(permission),
        )
        for field_name, value in zip(self.__slots__, values, strict=True):
            object.__setattr__(self, field_name, value)

    @classmethod
    def any(cls) -> AclBindingFilter:
        """The filter that matches every ACL."""
        return cls()

    @classmethod
    def of(cls, binding: AclBinding) -> AclBindingFilter:
        """The filter that matches exactly ``binding``."""
        return cls(
            binding.resource_type,
            binding.name,
            binding.pattern_type,
            binding.principal,
            binding.host,
            binding.operation,
            binding.permission,
        )


def _binding(resource_type: int, name: str, pattern: int, acl: Any) -> AclBinding | None:
    try:
        return AclBinding(
            ResourceType(resource_type),
            name,
            PatternType(pattern),
            acl.principal,
            acl.host,
            AclOperation(acl.operation),
            AclPermissionType(acl.permission_type),
        )
    except (ValueError, InvalidArgumentError):
        return None  # a value this client does not know: left out, as Java does


def filter_fields(f: AclBindingFilter) -> dict[str, Any]:
    """A filter as the fields DescribeAcls and DeleteAcls share."""
    return {
        "resource_type_filter": int(f.resource_type),
        "resource_name_filter": f.name,
        "pattern_type_filter": int(f.pattern_type),
        "principal_filter": f.principal,
        "host_filter": f.host,
        "operation": int(f.operation),
        "permission_type": int(f.permission),
    }


def acl_error(code: int, message: str | None, what: str) -> KafkaError:
    """The error of an ACL answer; SECURITY_DISABLED says what it means here."""
    if code == SecurityDisabledError.code:
        return SecurityDisabledError(
            f"{what}: the broker has no authorizer configured, so it keeps no ACLs "
            "(set authorizer.class.name on the brokers to use them)"
        )
    return error_for_code(code)(f"{what}: {message or ''}".rstrip(": "))


class DescribeAclsApi(AdminApi[None, list[AclBinding]]):
    """DescribeAcls: the ACLs a filter matches."""

    lookup = Lookup.ANY

    def __init__(self, acl_filter: AclBindingFilter) -> None:
        self._filter = acl_filter

    def keys(self) -> list[None]:
        return [None]

    def describe(self, key: None) -> str:
        return "the ACLs"

    def build(self, node: Node | None, keys: list[None]) -> list[tuple[RequestMessage[Any], list[None]]]:
        return [(DescribeAclsRequest(**filter_fields(self._filter)), keys)]

    def handle(
        self, node: Node | None, keys: list[None], body: DescribeAclsResponse
    ) -> Outcome[None, list[AclBinding]]:
        if body.error_code:
            error = acl_error(body.error_code, body.error_message, "describe_acls()")
            return Outcome(retry={None: error}) if error.retriable else Outcome(failed={None: error})
        bindings = [
            b
            for r in body.resources
            for acl in r.acls
            if (b := _binding(r.resource_type, r.resource_name, r.pattern_type, acl)) is not None
        ]
        return Outcome(completed={None: bindings})


class CreateAclsApi(AdminApi[AclBinding, None]):
    """CreateAcls: one creation per binding, answered in order."""

    lookup = Lookup.ANY

    def __init__(self, bindings: Sequence[AclBinding]) -> None:
        self._bindings = list(dict.fromkeys(bindings))

    def keys(self) -> list[AclBinding]:
        return self._bindings

    def build(
        self, node: Node | None, keys: list[AclBinding]
    ) -> list[tuple[RequestMessage[Any], list[AclBinding]]]:
        request = CreateAclsRequest(
            creations=[
                AclCreation(
                    resource_type=int(b.resource_type),
                    resource_name=b.name,
                    resource_pattern_type=int(b.pattern_type),
                    principal=b.principal,
                    host=b.host,
                    operation=int(b.operation),
                    permission_type=int(b.permission),
                )
                for b in keys
            ]
        )
        return [(request, keys)]

    def handle(
        self, node: Node | None, keys: list[AclBinding], body: CreateAclsResponse
    ) -> Outcome[AclBinding, None]:
        outcome: Outcome[AclBinding, None] = Outcome()
        for key, result in zip(keys, body.results, strict=False):
            if result.error_code:
                error = acl_error(result.error_code, result.error_message, f"creating {key!r}")
                (outcome.retry if error.retriable else outcome.failed)[key] = error
            else:
                outcome.completed[key] = None
        return outcome


class DeleteAclsApi(AdminApi[AclBindingFilter, list[AclBinding]]):
    """DeleteAcls: the ACLs each filter matched and deleted, answered in order."""

    lookup = Lookup.ANY

    def __init__(self, filters: Sequence[AclBindingFilter]) -> None:
        self._filters = list(dict.fromkeys(filters))

    def keys(self) -> list[AclBindingFilter]:
        return self._filters

    def build(
        self, node: Node | None, keys: list[AclBindingFilter]
    ) -> list[tuple[RequestMessage[Any], list[AclBindingFilter]]]:
        return [(DeleteAclsRequest(filters=[DeleteAclsFilter(**filter_fields(f)) for f in keys]), keys)]

    def handle(
        self, node: Node | None, keys: list[AclBindingFilter], body: DeleteAclsResponse
    ) -> Outcome[AclBindingFilter, list[AclBinding]]:
        outcome: Outcome[AclBindingFilter, list[AclBinding]] = Outcome()
        for key, result in zip(keys, body.filter_results, strict=False):
            if result.error_code:
                error = acl_error(result.error_code, result.error_message, "delete_acls()")
                (outcome.retry if error.retriable else outcome.failed)[key] = error
                continue
            deleted = [
                b
                for m in result.matching_acls
                if not m.error_code
                and (b := _binding(m.resource_type, m.resource_name, m.pattern_type, m)) is not None
            ]
            outcome.completed[key] = deleted
        return outcome
