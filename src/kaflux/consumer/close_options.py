"""How ``Consumer.close()`` treats the consumer's place in its group (KIP-1092). [pure]

Java's ``CloseOptions`` (Kafka 4.1+): a close timeout and a :class:`GroupMembershipOperation`.
``Consumer.close(CloseOptions(...))`` takes them together, ``Consumer.close(timeout=...,
group_membership=...)`` as keywords. Whatever the operation, closing commits the consumed
offsets (with auto-commit) and runs ``on_partitions_revoked`` (``on_partitions_lost`` outside a
generation), as Java does: the operation decides only whether the coordinator is told.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import cast

from kaflux.errors import InvalidArgumentError
from kaflux.timeouts import timeout_seconds

__all__ = [
    "DEFAULT_CLOSE_TIMEOUT_S",
    "CloseOptions",
    "GroupMembershipOperation",
    "check_membership_operation",
    "resolve_close_arguments",
]

#: Java's ``DEFAULT_CLOSE_TIMEOUT_MS``: 30 s
DEFAULT_CLOSE_TIMEOUT_S = 30.0


class GroupMembershipOperation(enum.Enum):
    """What a closing consumer does about its group membership (Java's
    ``CloseOptions.GroupMembershipOperation``).

    * ``DEFAULT``: a dynamic member leaves the group (its partitions are reassigned at once); a
      static member (``group.instance.id``) keeps its place and partitions until
      ``session.timeout.ms`` passes, so that a restart with the same instance id gets them back
      without a rebalance.
    * ``LEAVE_GROUP``: leave, also a static member, which gives its place up for good (scaling
      down rather than restarting). Classic protocol: a LeaveGroup naming the
      ``group.instance.id``; consumer protocol: a heartbeat with member epoch -1.
    * ``REMAIN_IN_GROUP``: tell the coordinator nothing, also for a dynamic member, which stays
      listed with its partitions until its session expires. A static member with the consumer
      protocol still sends epoch -2 (it is coming back), as with ``DEFAULT``.
    """

    DEFAULT = "default"
    LEAVE_GROUP = "leave_group"
    REMAIN_IN_GROUP = "remain_in_group"


@dataclass(frozen=True, slots=True)
class CloseOptions:
    """The options of :meth:`kaflux.Consumer.close` (Java's ``CloseOptions``, KIP-1092).

    ``timeout``: seconds the whole close may take (commit, callbacks, leaving, stopping the
    network thread); None means 30 s. ``group_membership``: a :class:`GroupMembershipOperation`.
    Checked when made: a negative or NaN timeout, or an operation that is not a
    ``GroupMembershipOperation``, raises ``InvalidArgumentError``.

    Example::

        consumer.close(CloseOptions(timeout=10, group_membership=GroupMembershipOperation.LEAVE_GROUP))
    """

    timeout: float | None = None
    group_membership: GroupMembershipOperation = GroupMembershipOperation.DEFAULT

    def __post_init__(self) -> None:
        if self.timeout is not None:
            checked = timeout_seconds(self.timeout, DEFAULT_CLOSE_TIMEOUT_S, name="CloseOptions.timeout")
            object.__setattr__(self, "timeout", checked)
        check_membership_operation(self.group_membership)


def check_membership_operation(operation: object) -> GroupMembershipOperation:
    """``operation`` if it is a :class:`GroupMembershipOperation`, else InvalidArgumentError."""
    if not isinstance(operation, GroupMembershipOperation):
        raise InvalidArgumentError(
            "group_membership must be a kaflux.GroupMembershipOperation (DEFAULT, LEAVE_GROUP or "
            f"REMAIN_IN_GROUP), got {operation!r}"
        )
    return operation


def resolve_close_arguments(
    options: object, timeout: object, group_membership: object
) -> tuple[float, GroupMembershipOperation]:
    """The close budget in seconds and the membership operation, from ``close()``'s arguments:
    a :class:`CloseOptions` or a number of seconds (positional, the older spelling), or the
    ``timeout`` and ``group_membership`` keywords, but not a CloseOptions and keywords together.

    Raises:
        InvalidArgumentError: a wrong type or value, or a CloseOptions with keywords.
    """
    if isinstance(options, CloseOptions):
        if timeout is not None or group_membership is not None:
            raise InvalidArgumentError(
                "close() takes either a CloseOptions or the timeout= and group_membership= keywords, not both"
            )
        return timeout_seconds(options.timeout, DEFAULT_CLOSE_TIMEOUT_S), options.group_membership
    if options is not None:
        if isinstance(options, GroupMembershipOperation):
            raise InvalidArgumentError(
                f"close({options}): pass the operation as close(group_membership={options}) or "
                "in a CloseOptions"
            )
        if isinstance(options, bool) or not isinstance(options, (int, float)):
            raise InvalidArgumentError(
                "close() takes a kaflux.CloseOptions or a timeout in seconds, got "
                f"{type(options).__name__} {options!r}"
            )
        if timeout is not None:
            raise InvalidArgumentError("close() got the timeout twice (positionally and as timeout=)")
        timeout = options
    budget = timeout_seconds(cast("float | None", timeout), DEFAULT_CLOSE_TIMEOUT_S)  # checks the type
    operation = (
        GroupMembershipOperation.DEFAULT
        if group_membership is None
        else check_membership_operation(group_membership)
    )
    return budget, operation
