"""What a lookup's answer means for the keys of an admin call, and the error of a call past its
deadline. [pure]

Used by :class:`~kaflux.admin.request_manager.AdminRequestManager`: a Metadata answer gives each
partition key its leader, or an error (an unknown topic or partition fails the key at once, a
partition without a leader is retried).
"""

from __future__ import annotations

from typing import Any

from kaflux.admin.operation import AdminApi, Outcome
from kaflux.errors import (
    KafkaError,
    KafkaTimeoutError,
    LeaderNotAvailableError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from kaflux.network.metadata_manager import MetadataAnswer

__all__ = ["leaders", "timeout_error"]


def leaders(
    api: AdminApi[Any, Any], keys: list[Any], answer: MetadataAnswer
) -> tuple[dict[Any, int], Outcome[Any, Any]]:
    """The leader of each key's partition that has one, and the outcome for the others."""
    found: dict[Any, int] = {}
    outcome: Outcome[Any, Any] = Outcome()
    for k in keys:
        tp = api.partition(k)
        code = answer.topic_errors.get(tp.topic)
        info = answer.topics.get(tp.topic)
        if code == UnknownTopicOrPartitionError.code:
            outcome.failed[k] = UnknownTopicOrPartitionError(
                f"topic {tp.topic!r} does not exist: create it first, or check its name"
            )
        elif code is not None:
            error = error_for_code(code)(f"topic {tp.topic!r}, in a metadata response")
            (outcome.retry if error.retriable else outcome.failed)[k] = error
        elif info is None:
            outcome.retry[k] = KafkaError(f"the Metadata answer did not describe topic {tp.topic!r}")
        elif tp.partition not in info.partitions:
            outcome.failed[k] = UnknownTopicOrPartitionError(
                f"partition {tp} does not exist: topic {tp.topic!r} has {len(info.partitions)} partitions"
            )
        elif (leader := info.partitions[tp.partition].leader) < 0 or leader not in answer.brokers:
            outcome.retry[k] = LeaderNotAvailableError(f"partition {tp} has no leader at the moment")
        else:
            found[k] = leader
    return found, outcome


def timeout_error(what: str, key: str, cause: KafkaError | None) -> KafkaTimeoutError:
    """The error of a key still unfinished at its call's deadline, naming the last error."""
    detail = (
        f"the last attempt for {key} failed with {cause}"
        if cause is not None
        else f"no broker answered for {key} in time"
    )
    error = KafkaTimeoutError(
        f"{what} did not complete before its deadline: {detail}. Retry with a longer timeout, or "
        "check that the brokers are up and reachable"
    )
    error.__cause__ = cause
    return error
