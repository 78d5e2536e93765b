"""The group member's states and the moves allowed between them. [pure]

A rebalance in the classic protocol, with the revocation split the design asks for::

    UNJOINED -> [PREPARE_REVOCATION -> REVOKING_PARTITIONS -> PARTITIONS_REVOKED] -> JOINING
      -> AWAITING_SYNC -> [PREPARE_REVOCATION -> REVOKING_PARTITIONS -> PARTITIONS_REVOKED]
      -> ASSIGNING_PARTITIONS -> STABLE

The first bracket is the eager protocol (everything is revoked before joining); the second
is the cooperative one (only partitions that moved are revoked, after the assignment).
Partitions being revoked stop being fetched in PREPARE_REVOCATION; REVOKING_PARTITIONS and
ASSIGNING_PARTITIONS wait for the application thread to run the listener and acknowledge.
"""

from __future__ import annotations

import enum

from kaflux.state_machine import StateMachine


class MemberState(enum.Enum):
    """Where the member is in the group's life."""

    UNJOINED = "unjoined"
    """Not in a group: no heartbeats. Commits without a generation are allowed."""
    PREPARE_REVOCATION = "prepare_revocation"
    """Partitions to revoke stop being fetched; with auto-commit their offsets are committed."""
    REVOKING_PARTITIONS = "revoking_partitions"
    """Waiting for ``on_partitions_revoked`` to run on the application thread."""
    PARTITIONS_REVOKED = "partitions_revoked"
    """Revocation done: the assignment no longer holds the revoked partitions."""
    JOINING = "joining"
    """A JoinGroup request is due or in flight."""
    AWAITING_SYNC = "awaiting_sync"
    """Joined; a SyncGroup request is due or in flight (the leader computed the assignment)."""
    ASSIGNING_PARTITIONS = "assigning_partitions"
    """Waiting for ``on_partitions_assigned`` to run on the application thread."""
    STABLE = "stable"
    """Member of the current generation; heartbeats every heartbeat.interval.ms."""
    LOSING_PARTITIONS = "losing_partitions"
    """Fenced or expired: waiting for ``on_partitions_lost`` before rejoining."""
    PREPARE_LEAVING = "prepare_leaving"
    """Leaving (unsubscribe, close, poll timeout): the revocation callback runs first."""
    LEAVING = "leaving"
    """A LeaveGroup request is due or in flight."""
    STALE = "stale"
    """Left because the application did not poll within max.poll.interval.ms; rejoins on poll."""
    FATAL = "fatal"
    """A non-recoverable group error (fenced instance id, unsupported assignor...)."""


_M = MemberState

#: target state -> states it may be entered from (the table is read as "allowed sources")
_ALLOWED_SOURCES: dict[MemberState, frozenset[MemberState]] = {
    _M.UNJOINED: frozenset({_M.LEAVING, _M.PREPARE_LEAVING}),
    _M.PREPARE_REVOCATION: frozenset({_M.STABLE, _M.AWAITING_SYNC}),
    _M.REVOKING_PARTITIONS: frozenset({_M.PREPARE_REVOCATION}),
    _M.PARTITIONS_REVOKED: frozenset({_M.PREPARE_REVOCATION, _M.REVOKING_PARTITIONS}),
    _M.JOINING: frozenset(
        {
            _M.UNJOINED,
            _M.PARTITIONS_REVOKED,
            _M.STABLE,
            _M.JOINING,
            _M.AWAITING_SYNC,
            _M.LOSING_PARTITIONS,
            _M.STALE,
            _M.ASSIGNING_PARTITIONS,
        }
    ),
    _M.AWAITING_SYNC: frozenset({_M.JOINING}),
    _M.ASSIGNING_PARTITIONS: frozenset({_M.AWAITING_SYNC, _M.PARTITIONS_REVOKED}),
    _M.STABLE: frozenset({_M.ASSIGNING_PARTITIONS}),
    _M.LOSING_PARTITIONS: frozenset(
        {
            _M.JOINING,
            _M.AWAITING_SYNC,
            _M.STABLE,
            _M.ASSIGNING_PARTITIONS,
            _M.PREPARE_REVOCATION,
            _M.REVOKING_PARTITIONS,
            _M.PARTITIONS_REVOKED,
            _M.STALE,
        }
    ),
    _M.PREPARE_LEAVING: frozenset(
        {
            _M.UNJOINED,
            _M.JOINING,
            _M.AWAITING_SYNC,
            _M.STABLE,
            _M.ASSIGNING_PARTITIONS,
            _M.PREPARE_REVOCATION,
            _M.REVOKING_PARTITIONS,
            _M.PARTITIONS_REVOKED,
            _M.LOSING_PARTITIONS,
            _M.STALE,
        }
    ),
    _M.LEAVING: frozenset({_M.PREPARE_LEAVING}),
    _M.STALE: frozenset({_M.LEAVING}),
    _M.FATAL: frozenset(set(MemberState) - {_M.FATAL}),
}

#: the same table as "state -> states it may move to", the form StateMachine takes
MEMBER_TRANSITIONS: dict[MemberState, frozenset[MemberState]] = {
    source: frozenset(target for target, sources in _ALLOWED_SOURCES.items() if source in sources)
    for source in MemberState
}


def new_member_state_machine(group_id: str) -> StateMachine[MemberState]:
    """A state machine for one member, starting UNJOINED."""
    return StateMachine(f"member of group {group_id!r}", MemberState.UNJOINED, MEMBER_TRANSITIONS)


#: states in which the member holds a valid generation and must heartbeat
HEARTBEAT_STATES = frozenset(
    {_M.STABLE, _M.ASSIGNING_PARTITIONS, _M.PREPARE_REVOCATION, _M.REVOKING_PARTITIONS, _M.PARTITIONS_REVOKED}
)
