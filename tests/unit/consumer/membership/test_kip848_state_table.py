"""The KIP-848 member's transition table, pair by pair, and the scenarios that together take
every reachable move."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest
from unit.consumer.membership import test_kip848_fencing as fencing
from unit.consumer.membership import test_kip848_joining as joining
from unit.consumer.membership import test_kip848_leaving as leaving
from unit.consumer.membership import test_kip848_poll_timer as poll_timer
from unit.consumer.membership import test_kip848_reconciliation as reconciliation

from kaflux.consumer.member_state import (
    _CONSUMER_ALLOWED_SOURCES,
    CONSUMER_MEMBER_TRANSITIONS,
    MemberState,
)
from kaflux.errors import IllegalStateError
from kaflux.state_machine import StateMachine

from support.kip848_membership_rig import _DRIVERS, M, _name, moves

# -- the transition table ----------------------------------------------------------------------------

ALLOWED = {(source, target) for source, targets in CONSUMER_MEMBER_TRANSITIONS.items() for target in targets}


@pytest.mark.parametrize(("source", "target"), list(itertools.product(MemberState, MemberState)), ids=_name)
def test_every_pair_is_allowed_exactly_when_the_consumer_table_says_so(
    source: MemberState, target: MemberState
) -> None:
    machine = StateMachine("member", source, CONSUMER_MEMBER_TRANSITIONS)
    assert machine.can_transition_to(target) is ((source, target) in ALLOWED)
    if (source, target) in ALLOWED:
        machine.transition_to(target)
        assert machine.state is target
    else:
        with pytest.raises(IllegalStateError, match=f"illegal transition {source.name} -> {target.name}"):
            machine.transition_to(target)


def test_the_consumer_table_is_the_inverse_of_its_allowed_sources_and_skips_awaiting_sync() -> None:
    assert set(CONSUMER_MEMBER_TRANSITIONS) == set(MemberState)
    inverse = {(s, t) for t, sources in _CONSUMER_ALLOWED_SOURCES.items() for s in sources}
    assert inverse == ALLOWED
    assert not any(M.AWAITING_SYNC in (s, t) for s, t in ALLOWED)  # classic only
    assert CONSUMER_MEMBER_TRANSITIONS[M.FATAL] == frozenset()


#: pairs of the table no kaflux code path takes (each checked below not to occur):
UNREACHABLE = {
    # leave() in UNJOINED completes at once; the poll timer does not run there
    (M.UNJOINED, M.PREPARE_LEAVING),
    # a stale member rejoins through LOSING_PARTITIONS (on_partitions_lost at the next poll)
    (M.STALE, M.JOINING),
    # a consumer-protocol revocation always has partitions to revoke, so it goes through
    # REVOKING_PARTITIONS (without a listener, too)
    (M.PREPARE_REVOCATION, M.PARTITIONS_REVOKED),
    # PARTITIONS_REVOKED moves on to ASSIGNING_PARTITIONS in the same call: nothing can happen
    # in between
    (M.PARTITIONS_REVOKED, M.LOSING_PARTITIONS),
    (M.PARTITIONS_REVOKED, M.PREPARE_LEAVING),
    (M.PARTITIONS_REVOKED, M.FATAL),
    # the end of a leave always goes through LEAVING
    (M.PREPARE_LEAVING, M.UNJOINED),
    # fatal errors come only in heartbeat answers, and no heartbeat of the current incarnation
    # is in flight in these states (a fence, a leave or the poll timer started a new one)
    (M.UNJOINED, M.FATAL),
    (M.LOSING_PARTITIONS, M.FATAL),
    (M.STALE, M.FATAL),
}


def test_every_transition_of_the_consumer_table_is_exercised_by_a_scenario() -> None:
    """Runs the scenario tests of the KIP-848 membership modules again and collects every
    transition their members made: together they cover the table, but for :data:`UNREACHABLE`."""
    seen: set[tuple[MemberState, MemberState]] = set()
    for scenario, kwargs in SCENARIOS:
        _DRIVERS.clear()
        scenario(**kwargs)
        for driver in _DRIVERS:
            for member in driver.members.values():
                seen.update(moves(member))
    assert UNREACHABLE <= ALLOWED
    assert seen <= ALLOWED
    missing = ALLOWED - UNREACHABLE - seen
    assert not missing, sorted((s.name, t.name) for s, t in missing)
    assert not seen & UNREACHABLE, "reachable after all: remove from UNREACHABLE"


# -- the scenarios whose transitions must cover the table ----------------------------------------------------

SCENARIOS: list[tuple[Callable[..., None], dict[str, Any]]] = [
    (joining.test_a_single_member_joins_with_epoch_0_and_gets_every_partition, {}),
    (reconciliation.test_two_members_get_disjoint_complete_assignments_revoking_before_assigning, {}),
    (
        reconciliation.test_a_target_arriving_mid_reconciliation_is_reconciled_after_the_first_is_acknowledged,
        {},
    ),
    (poll_timer.test_poll_timer_expiry_sends_a_leave_heartbeat_then_the_next_poll_loses_and_rejoins, {}),
    *(
        (fencing.test_a_fence_in_any_heartbeating_state_loses_the_partitions_and_rejoins, {"state": s})
        for s in fencing.FENCE_STATES
    ),
    *(
        (fencing.test_a_fatal_error_in_any_state_fails_the_member_and_reaches_the_application, {"state": s})
        for s in fencing.FATAL_STATES
    ),
    *(
        (
            leaving.test_unsubscribe_in_any_state_completes_and_tells_the_coordinator_if_it_knows_the_member,
            {"state": s},
        )
        for s in leaving.LEAVE_STATES
    ),
]
