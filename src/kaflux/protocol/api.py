"""API keys, the versions kaflux implements, header versions and version negotiation. [pure]

Hand-written companion of the generated :mod:`kaflux.protocol.messages`: adding an API to
``tools/generate_messages.py`` also means adding it to :class:`ApiKey` here (a unit test checks
that the two agree). Versions and header versions come from the generated table
``kaflux.protocol.messages.REQUESTS``, so importing this module imports no message module: a
request class is imported when it is first looked up in :data:`REQUESTS`.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from enum import IntEnum
from typing import Any, Final

from kaflux.errors import UnsupportedVersionError
from kaflux.protocol.messages import REQUESTS as _GENERATED

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
    CREATE_DELEGATION_TOKEN = 38
    RENEW_DELEGATION_TOKEN = 39
    EXPIRE_DELEGATION_TOKEN = 40
    DESCRIBE_DELEGATION_TOKEN = 41
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


class _RequestClasses(Mapping[ApiKey, type[Any]]):
    """ApiKey -> generated request class, each module imported on its first lookup."""

    def __getitem__(self, key: ApiKey) -> type[Any]:
        module, name = _GENERATED[ApiKey(key)][:2]
        cls: type[Any] = getattr(importlib.import_module(f"kaflux.protocol.messages.{module}"), name)
        return cls

    def __iter__(self) -> Iterator[ApiKey]:
        return iter(ApiKey)

    def __len__(self) -> int:
        return len(ApiKey)


#: Values are the generated request classes; each has API_KEY, MIN_VERSION, MAX_VERSION,
#: FLEXIBLE_VERSION, RESPONSE (the response class), encode() and decode().
REQUESTS: Final[Mapping[ApiKey, type[Any]]] = _RequestClasses()

CLIENT_VERSIONS: Final[dict[ApiKey, tuple[int, int]]] = {
    key: (_GENERATED[key][2], _GENERATED[key][3]) for key in ApiKey
}
"""Inclusive ``(min, max)`` version range kaflux implements per API (the full spec range)."""


def _generated(api_key: int) -> tuple[str, str, int, int, int | None, int | None]:
    try:
        return _GENERATED[ApiKey(api_key)]
    except ValueError:
        raise UnsupportedVersionError(f"kaflux does not implement API key {api_key}") from None


def _is_flexible(flexible_version: int | None, api_version: int) -> bool:
    return flexible_version is not None and api_version >= flexible_version


def request_header_version(api_key: int, api_version: int) -> int:
    """RequestHeader version for a request: 2 for flexible request versions, else 1."""
    return 2 if _is_flexible(_generated(api_key)[4], api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """ResponseHeader version for a response: 1 for flexible response versions, else 0.

    ApiVersions responses always use header v0, even in flexible versions: a client that
    sent a version the broker does not know must still be able to read the answer.
    """
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if _is_flexible(_generated(api_key)[5], api_version) else 0


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
