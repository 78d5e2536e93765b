"""The group member's states and the moves allowed between them. [pure]

A rebalance in the classic protocol, with the revocation split the design asks for::

    UNJOINED -> [PREPARE_REVOCATION -> REVOKING_PARTITIONS -> PARTITIONS_REVOKED] -> JOINING
      -> AWAITING_SYNC -> [PREPARE_REVOCATION -> REVOKING_PARTITIONS -> PARTITIONS_REVOKED]
      -> ASSIGNING_PARTITIONS -> STABLE

The first bracket is the eager protocol (everything is revoked before joining); the second
is the cooperative one (only partitions that moved are revoked, after the assignment).
Partitions being revoked stop being fetched in PREPARE_REVOCATION; REVOKING_PARTITIONS and
ASSIGNING_PARTITIONS wait for the application thread to run the listener and acknowledge.

The KIP-848 protocol runs on its own table (``CONSUMER_MEMBER_TRANSITIONS``) over the same
states plus RECONCILING and ACKNOWLEDGING, and share groups (KIP-932) on a third
(``SHARE_MEMBER_TRANSITIONS``) over a few of them; each table is data, and an illegal move
raises.
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
    RECONCILING = "reconciling"
    """KIP-848: the coordinator's target assignment differs from the member's; the revocation
    and assignment steps (PREPARE_REVOCATION ... ASSIGNING_PARTITIONS) follow."""
    ACKNOWLEDGING = "acknowledging"
    """KIP-848: the target is in place; the next heartbeat tells the coordinator so."""


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
    # KIP-848 only: never entered under the classic protocol
    _M.RECONCILING: frozenset(),
    _M.ACKNOWLEDGING: frozenset(),
}

#: the same table as "state -> states it may move to", the form StateMachine takes
MEMBER_TRANSITIONS: dict[MemberState, frozenset[MemberState]] = {
    source: frozenset(target for target, sources in _ALLOWED_SOURCES.items() if source in sources)
    for source in MemberState
}


#: The KIP-848 (``group.protocol=consumer``) member, as "target -> allowed sources". The
#: coordinator drives the assignment; the member reconciles towards its target:
#:
#:   UNJOINED -> JOINING -> RECONCILING -> [PREPARE_REVOCATION -> REVOKING_PARTITIONS ->
#:   PARTITIONS_REVOKED] -> ASSIGNING_PARTITIONS -> ACKNOWLEDGING -> STABLE
#:
#: Java's FENCED is LOSING_PARTITIONS (``on_partitions_lost``, then JOINING at epoch 0) and its
#: UNSUBSCRIBED is UNJOINED. There is no AWAITING_SYNC.
_RECONCILING_STEPS = frozenset(
    {
        _M.RECONCILING,
        _M.PREPARE_REVOCATION,
        _M.REVOKING_PARTITIONS,
        _M.PARTITIONS_REVOKED,
        _M.ASSIGNING_PARTITIONS,
    }
)
_CONSUMER_ALLOWED_SOURCES: dict[MemberState, frozenset[MemberState]] = {
    _M.UNJOINED: frozenset({_M.PREPARE_LEAVING, _M.LEAVING}),
    _M.JOINING: frozenset({_M.UNJOINED, _M.LOSING_PARTITIONS, _M.STALE}),
    _M.RECONCILING: frozenset({_M.JOINING, _M.STABLE, _M.ACKNOWLEDGING}),
    _M.PREPARE_REVOCATION: frozenset({_M.RECONCILING}),
    _M.REVOKING_PARTITIONS: frozenset({_M.PREPARE_REVOCATION}),
    _M.PARTITIONS_REVOKED: frozenset({_M.PREPARE_REVOCATION, _M.REVOKING_PARTITIONS}),
    _M.ASSIGNING_PARTITIONS: frozenset({_M.RECONCILING, _M.PARTITIONS_REVOKED}),
    _M.ACKNOWLEDGING: frozenset({_M.ASSIGNING_PARTITIONS}),
    _M.STABLE: frozenset({_M.ACKNOWLEDGING}),
    _M.LOSING_PARTITIONS: frozenset({_M.JOINING, _M.STABLE, _M.ACKNOWLEDGING, _M.STALE} | _RECONCILING_STEPS),
    _M.PREPARE_LEAVING: frozenset(
        {_M.UNJOINED, _M.JOINING, _M.STABLE, _M.ACKNOWLEDGING, _M.LOSING_PARTITIONS, _M.STALE}
        | _RECONCILING_STEPS
    ),
    _M.LEAVING: frozenset({_M.PREPARE_LEAVING}),
    _M.STALE: frozenset({_M.LEAVING}),
    _M.FATAL: frozenset(set(MemberState) - {_M.FATAL, _M.AWAITING_SYNC}),
    _M.AWAITING_SYNC: frozenset(),
}

#: the KIP-848 table as "state -> states it may move to"
CONSUMER_MEMBER_TRANSITIONS: dict[MemberState, frozenset[MemberState]] = {
    source: frozenset(target for target, sources in _CONSUMER_ALLOWED_SOURCES.items() if source in sources)
    for source in MemberState
}


def new_member_state_machine(
    group_id: str, transitions: dict[MemberState, frozenset[MemberState]] = MEMBER_TRANSITIONS
) -> StateMachine[MemberState]:
    """A state machine for one member (classic protocol unless told), starting UNJOINED."""
    return StateMachine(f"member of group {group_id!r}", MemberState.UNJOINED, transitions)


#: states in which the member holds a valid generation and must heartbeat
HEARTBEAT_STATES = frozenset(
    {_M.STABLE, _M.ASSIGNING_PARTITIONS, _M.PREPARE_REVOCATION, _M.REVOKING_PARTITIONS, _M.PARTITIONS_REVOKED}
)

#: KIP-848: states in which a member with a positive epoch heartbeats (its epoch is valid)
CONSUMER_HEARTBEAT_STATES = frozenset({_M.JOINING, _M.STABLE, _M.ACKNOWLEDGING} | _RECONCILING_STEPS)


#: The share group (KIP-932) member, as "target -> allowed sources", over the same states as
#: Java's ``ShareMembershipManager``. No revocation callbacks, no offsets to commit, no
#: reconciliation: the member fetches from what the coordinator assigns at once::
#:
#:   UNJOINED -> JOINING -> STABLE -> (new assignment: STABLE) -> PREPARE_LEAVING -> LEAVING
#:     -> UNJOINED
#:   JOINING/STABLE -> LOSING_PARTITIONS (Java's FENCED) -> JOINING (epoch 0, same member id)
#:   any -> FATAL
#:
#: ``group_state()`` reports UNJOINED and LOSING_PARTITIONS by Java's share names,
#: UNSUBSCRIBED and FENCED (:data:`SHARE_STATE_NAMES`).
_SHARE_ALLOWED_SOURCES: dict[MemberState, frozenset[MemberState]] = {
    _M.UNJOINED: frozenset({_M.JOINING, _M.PREPARE_LEAVING, _M.LEAVING}),
    _M.JOINING: frozenset({_M.UNJOINED, _M.LOSING_PARTITIONS}),
    _M.STABLE: frozenset({_M.JOINING, _M.STABLE}),
    _M.LOSING_PARTITIONS: frozenset({_M.JOINING, _M.STABLE}),
    _M.PREPARE_LEAVING: frozenset({_M.JOINING, _M.STABLE, _M.LOSING_PARTITIONS}),
    _M.LEAVING: frozenset({_M.PREPARE_LEAVING}),
    _M.FATAL: frozenset(
        {_M.UNJOINED, _M.JOINING, _M.STABLE, _M.LOSING_PARTITIONS, _M.PREPARE_LEAVING, _M.LEAVING}
    ),
}

#: the states a share group member can be in
SHARE_MEMBER_STATES = frozenset(_SHARE_ALLOWED_SOURCES)

#: the share table as "state -> states it may move to" (a row for every state; the states a
#: share member never enters have none)
SHARE_MEMBER_TRANSITIONS: dict[MemberState, frozenset[MemberState]] = {
    source: frozenset(target for target, sources in _SHARE_ALLOWED_SOURCES.items() if source in sources)
    for source in MemberState
}

#: share groups: states in which the member heartbeats
SHARE_HEARTBEAT_STATES = frozenset({_M.JOINING, _M.STABLE})

#: share groups: the states ``group_state()`` names as Java's share consumer does
SHARE_STATE_NAMES: dict[MemberState, str] = {_M.UNJOINED: "UNSUBSCRIBED", _M.LOSING_PARTITIONS: "FENCED"}
