"""Configuration resources and their entries, and the admin requests that read and change them.
[pure]

:class:`ConfigResource` names a topic, a broker (its id as a string; ``""`` for the cluster-wide
default), a broker's loggers, a client-metrics subscription or a group. DescribeConfigs,
IncrementalAlterConfigs and the legacy AlterConfigs go to the broker a broker resource names, and
to any broker for the others, as Java's ``Admin`` sends them.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kaflux.admin.names import NamedIntEnum
from kaflux.admin.operation import AdminApi, Lookup, Outcome
from kaflux.errors import InvalidArgumentError, KafkaError, UnknownTopicOrPartitionError, error_for_code
from kaflux.protocol.framing import RequestMessage
from kaflux.protocol.messages.alter_configs import AlterableConfig as LegacyAlterableConfig
from kaflux.protocol.messages.alter_configs import (
    AlterConfigsRequest,
    AlterConfigsResponse,
)
from kaflux.protocol.messages.alter_configs import AlterConfigsResource as LegacyAlterConfigsResource
from kaflux.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResponse,
)
from kaflux.protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kaflux.structs import Node

__all__ = [
    "AlterConfigOp",
    "ConfigEntry",
    "ConfigResource",
    "ConfigResourceType",
    "ConfigSource",
    "ConfigSynonym",
    "DescribeConfigsApi",
    "IncrementalAlterConfigsApi",
    "LegacyAlterConfigsApi",
]


class ConfigResourceType(NamedIntEnum):
    """What a :class:`ConfigResource` names (Java's ``ConfigResource.Type``; wire values)."""

    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class ConfigSource(enum.Enum):
    """Where a config value comes from (Java's ``ConfigEntry.ConfigSource``)."""

    UNKNOWN = -1
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    DYNAMIC_CLIENT_METRICS_CONFIG = 7
    DYNAMIC_GROUP_CONFIG = 8

    @classmethod
    def of(cls, code: int) -> ConfigSource:
        """The source a wire value names (UNKNOWN for one this client does not know)."""
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True, slots=True, init=False)
class ConfigResource:
    """A resource with configs: ``ConfigResource("topic", "orders")``, ``ConfigResource("broker",
    "1")`` (``""``: the cluster-wide broker default). The type may be a
    :class:`ConfigResourceType` or its name."""

    type: ConfigResourceType
    name: str

    def __init__(self, type: ConfigResourceType | str | int, name: str | int) -> None:
        kind = ConfigResourceType.parse(type)
        if isinstance(name, int) and not isinstance(name, bool) and kind is not ConfigResourceType.TOPIC:
            name = str(name)  # a broker id
        if not isinstance(name, str):
            raise InvalidArgumentError(f"a config resource's name must be a string, got {name!r}")
        if kind is ConfigResourceType.TOPIC and not name:
            raise InvalidArgumentError("a topic config resource needs the topic's name")
        broker = kind in (ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER)
        if broker and name and not name.isdigit():
            raise InvalidArgumentError(
                f"a {kind.name.lower()} config resource is named by the broker id, got {name!r}"
            )
        object.__setattr__(self, "type", kind)
        object.__setattr__(self, "name", name)

    def __repr__(self) -> str:
        return f"ConfigResource({self.type.name.lower()!r}, {self.name!r})"

    @property
    def broker_id(self) -> int | None:
        """The broker a broker (or broker-logger) resource names; None for the others."""
        if self.type in (ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER) and self.name:
            return int(self.name)
        return None


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    """A value a config takes from another level (a dynamic broker setting, the static file...),
    in the order the broker applies them."""

    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One config of a resource. ``value`` is None for a sensitive config (the broker never
    sends it). ``synonyms`` lists the values at other levels, first the one in force."""

    name: str
    value: str | None
    source: ConfigSource = ConfigSource.UNKNOWN
    is_sensitive: bool = False
    is_read_only: bool = False
    synonyms: tuple[ConfigSynonym, ...] = ()
    documentation: str | None = None

    @property
    def is_default(self) -> bool:
        """Whether the value is the default (nothing set it)."""
        return self.source is ConfigSource.DEFAULT_CONFIG


_OP_TYPES = {"set": 0, "delete": 1, "append": 2, "subtract": 3}


@dataclass(frozen=True, slots=True)
class AlterConfigOp:
    """One change of :meth:`~kaflux.AdminClient.incremental_alter_configs`: ``"set"`` a value,
    ``"delete"`` it (back to the default), or ``"append"`` / ``"subtract"`` items of a list
    config (e.g. ``cleanup.policy``)."""

    name: str
    value: str | None = None
    op_type: str = "set"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InvalidArgumentError(f"a config change needs the config's name, got {self.name!r}")
        op = self.op_type.lower() if isinstance(self.op_type, str) else self.op_type
        if op not in _OP_TYPES:
            raise InvalidArgumentError(
                f"config {self.name!r}: unknown change {self.op_type!r}: use set, delete, append or subtract"
            )
        object.__setattr__(self, "op_type", op)
        if op != "delete" and not isinstance(self.value, str):
            raise InvalidArgumentError(
                f"config {self.name!r}: {op} needs a string value, got {type(self.value).__name__}"
            )

    @property
    def wire_op(self) -> int:
        """IncrementalAlterConfigs' operation code."""
        return _OP_TYPES[self.op_type]


def resources_of(resources: Iterable[ConfigResource], what: str) -> list[ConfigResource]:
    """``resources`` checked and without repeats."""
    checked = list(dict.fromkeys(resources))
    for resource in checked:
        if not isinstance(resource, ConfigResource):
            raise InvalidArgumentError(f"{what}: expected ConfigResource(type, name), got {resource!r}")
    return checked


def _resource_error(resource: ConfigResource, code: int, message: str | None) -> KafkaError:
    return error_for_code(code)(f"{resource}: {message or ''}".rstrip(": "))


class _ResourceApi(AdminApi[ConfigResource, Any]):
    """Keys are config resources; a broker resource goes to its broker, the others anywhere."""

    lookup = Lookup.NODE

    def __init__(self, resources: Sequence[ConfigResource]) -> None:
        self._resources = list(resources)

    def keys(self) -> list[ConfigResource]:
        return self._resources

    def describe(self, key: ConfigResource) -> str:
        return repr(key)

    def node_id(self, key: ConfigResource) -> int | None:
        return key.broker_id

    def _outcome(
        self, keys: list[ConfigResource], results: Iterable[Any], value: Any
    ) -> Outcome[ConfigResource, Any]:
        by_key = {(r.resource_type, r.resource_name): r for r in results}
        outcome: Outcome[ConfigResource, Any] = Outcome()
        for key in keys:
            result = by_key.get((int(key.type), key.name))
            if result is None:
                continue  # not answered: retried
            if result.error_code:
                error = _resource_error(key, result.error_code, result.error_message)
                # an unknown topic is retriable in Kafka's table, but not for its configs
                retry = error.retriable and not isinstance(error, UnknownTopicOrPartitionError)
                (outcome.retry if retry else outcome.failed)[key] = error
            else:
                outcome.completed[key] = value(result)
        return outcome


class DescribeConfigsApi(_ResourceApi):
    """DescribeConfigs: every config of each resource (or ``names`` only)."""

    def __init__(
        self,
        resources: Sequence[ConfigResource],
        *,
        names: Sequence[str] | None,
        include_synonyms: bool,
        include_documentation: bool,
    ) -> None:
        super().__init__(resources)
        self._names = None if names is None else list(names)
        self._synonyms = include_synonyms
        self._documentation = include_documentation

    def build(
        self, node: Node | None, keys: list[ConfigResource]
    ) -> list[tuple[RequestMessage[Any], list[ConfigResource]]]:
        request = DescribeConfigsRequest(
            resources=[
                DescribeConfigsResource(
                    resource_type=int(k.type), resource_name=k.name, configuration_keys=self._names
                )
                for k in keys
            ],
            include_synonyms=self._synonyms,
            include_documentation=self._documentation,
        )
        return [(request, keys)]

    def handle(
        self, node: Node | None, keys: list[ConfigResource], body: DescribeConfigsResponse
    ) -> Outcome[ConfigResource, dict[str, ConfigEntry]]:
        return self._outcome(keys, body.results, _entries)


def _entries(result: Any) -> dict[str, ConfigEntry]:
    entries: dict[str, ConfigEntry] = {}
    for c in result.configs:
        source = ConfigSource.of(c.config_source)
        if source is ConfigSource.UNKNOWN and c.is_default:  # DescribeConfigs v0 has only the flag
            source = ConfigSource.DEFAULT_CONFIG
        entries[c.name] = ConfigEntry(
            name=c.name,
            value=None if c.is_sensitive else c.value,
            source=source,
            is_sensitive=c.is_sensitive,
            is_read_only=c.read_only,
            synonyms=tuple(
                ConfigSynonym(s.name, None if c.is_sensitive else s.value, ConfigSource.of(s.source))
                for s in c.synonyms
            ),
            documentation=c.documentation or None,
        )
    return dict(sorted(entries.items()))


class IncrementalAlterConfigsApi(_ResourceApi):
    """IncrementalAlterConfigs: set, delete, append or subtract configs of each resource."""

    def __init__(
        self, changes: Mapping[ConfigResource, Sequence[AlterConfigOp]], *, validate_only: bool
    ) -> None:
        super().__init__(list(changes))
        self._changes = dict(changes)
        self._validate_only = validate_only

    def build(
        self, node: Node | None, keys: list[ConfigResource]
    ) -> list[tuple[RequestMessage[Any], list[ConfigResource]]]:
        request = IncrementalAlterConfigsRequest(
            resources=[
                AlterConfigsResource(
                    resource_type=int(k.type),
                    resource_name=k.name,
                    configs=[
                        AlterableConfig(name=op.name, config_operation=op.wire_op, value=op.value)
                        for op in self._changes[k]
                    ],
                )
                for k in keys
            ],
            validate_only=self._validate_only,
        )
        return [(request, keys)]

    def handle(
        self, node: Node | None, keys: list[ConfigResource], body: IncrementalAlterConfigsResponse
    ) -> Outcome[ConfigResource, None]:
        return self._outcome(keys, body.responses, lambda _: None)


class LegacyAlterConfigsApi(_ResourceApi):
    """AlterConfigs (deprecated in Kafka): replaces ALL of each resource's dynamic configs with
    the given ones; a config left out goes back to its default."""

    def __init__(self, configs: Mapping[ConfigResource, Mapping[str, str]], *, validate_only: bool) -> None:
        super().__init__(list(configs))
        self._configs = {k: dict(v) for k, v in configs.items()}
        self._validate_only = validate_only

    def build(
        self, node: Node | None, keys: list[ConfigResource]
    ) -> list[tuple[RequestMessage[Any], list[ConfigResource]]]:
        request = AlterConfigsRequest(
            resources=[
                LegacyAlterConfigsResource(
                    resource_type=int(k.type),
                    resource_name=k.name,
                    configs=[
                        LegacyAlterableConfig(name=n, value=v) for n, v in sorted(self._configs[k].items())
                    ],
                )
                for k in keys
            ],
            validate_only=self._validate_only,
        )
        return [(request, keys)]

    def handle(
        self, node: Node | None, keys: list[ConfigResource], body: AlterConfigsResponse
    ) -> Outcome[ConfigResource, None]:
        return self._outcome(keys, body.responses, lambda _: None)
