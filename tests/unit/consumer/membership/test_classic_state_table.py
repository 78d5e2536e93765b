"""The group member's transition table (MEMBER_TRANSITIONS), pair by pair and row by row."""

from __future__ import annotations

import enum
import itertools

import pytest

from kaflux.consumer.member_state import (
    _ALLOWED_SOURCES,
    HEARTBEAT_STATES,
    MEMBER_TRANSITIONS,
    MemberState,
    new_member_state_machine,
)
from kaflux.errors import IllegalStateError
from kaflux.state_machine import StateMachine

M = MemberState
ALL_PAIRS = list(itertools.product(MemberState, MemberState))
ALLOWED = {(source, target) for source, targets in MEMBER_TRANSITIONS.items() for target in targets}


def _pair_id(value: object) -> str:
    return value.name if isinstance(value, enum.Enum) else str(value)


@pytest.mark.parametrize(("source", "target"), ALL_PAIRS, ids=_pair_id)
def test_every_pair_is_allowed_exactly_when_the_table_says_so(
    source: MemberState, target: MemberState
) -> None:
    machine = StateMachine("member", source, MEMBER_TRANSITIONS)
    assert machine.can_transition_to(target) is ((source, target) in ALLOWED)
    if (source, target) in ALLOWED:
        machine.transition_to(target)
        assert machine.state is target
    else:
        with pytest.raises(IllegalStateError, match=f"illegal transition {source.name} -> {target.name}"):
            machine.transition_to(target)
        assert machine.state is source


def test_the_table_has_a_row_for_every_state_and_only_member_states() -> None:
    assert set(MEMBER_TRANSITIONS) == set(MemberState)
    for targets in MEMBER_TRANSITIONS.values():
        assert targets <= set(MemberState)


def test_the_forward_table_is_the_inverse_of_the_allowed_sources() -> None:
    inverse = {(source, target) for target, sources in _ALLOWED_SOURCES.items() for source in sources}
    assert inverse == ALLOWED


def test_the_design_states_exist() -> None:
    names = {s.name for s in MemberState}
    assert {
        "UNJOINED",
        "PREPARE_REVOCATION",
        "REVOKING_PARTITIONS",
        "PARTITIONS_REVOKED",
        "JOINING",
        "AWAITING_SYNC",
        "ASSIGNING_PARTITIONS",
        "STABLE",
        "LOSING_PARTITIONS",
        "PREPARE_LEAVING",
        "LEAVING",
        "STALE",
        "FATAL",
    } <= names


def test_a_new_member_starts_unjoined() -> None:
    machine = new_member_state_machine("g")
    assert machine.state is M.UNJOINED
    assert "'g'" in repr(machine)


# -- semantic rows: the table says what the design says -------------------------------------------


def test_stable_cannot_jump_to_awaiting_sync() -> None:
    assert M.AWAITING_SYNC not in MEMBER_TRANSITIONS[M.STABLE]


def test_awaiting_sync_is_only_reached_by_a_join() -> None:
    assert _ALLOWED_SOURCES[M.AWAITING_SYNC] == {M.JOINING}


def test_revoking_partitions_is_only_reachable_from_prepare_revocation() -> None:
    sources = {s for s in MemberState if M.REVOKING_PARTITIONS in MEMBER_TRANSITIONS[s]}
    assert sources == {M.PREPARE_REVOCATION}


def test_partitions_revoked_follows_revocation_with_or_without_a_callback() -> None:
    sources = {s for s in MemberState if M.PARTITIONS_REVOKED in MEMBER_TRANSITIONS[s]}
    assert sources == {M.PREPARE_REVOCATION, M.REVOKING_PARTITIONS}


def test_revocation_starts_from_stable_eager_or_after_sync_cooperative() -> None:
    sources = {s for s in MemberState if M.PREPARE_REVOCATION in MEMBER_TRANSITIONS[s]}
    assert sources == {M.STABLE, M.AWAITING_SYNC}


def test_fatal_is_reachable_from_every_other_state_and_leads_nowhere() -> None:
    for state in MemberState:
        if state is not M.FATAL:
            assert M.FATAL in MEMBER_TRANSITIONS[state], state
    assert MEMBER_TRANSITIONS[M.FATAL] == frozenset()


def test_stable_is_only_entered_after_the_assignment_callback() -> None:
    sources = {s for s in MemberState if M.STABLE in MEMBER_TRANSITIONS[s]}
    assert sources == {M.ASSIGNING_PARTITIONS}


def test_leaving_goes_through_prepare_leaving_and_ends_unjoined_or_stale() -> None:
    assert {s for s in MemberState if M.LEAVING in MEMBER_TRANSITIONS[s]} == {M.PREPARE_LEAVING}
    assert MEMBER_TRANSITIONS[M.LEAVING] == {M.UNJOINED, M.STALE, M.FATAL}
    assert {s for s in MemberState if M.STALE in MEMBER_TRANSITIONS[s]} == {M.LEAVING}


def test_a_stale_member_rejoins_through_losing_its_partitions() -> None:
    row = MEMBER_TRANSITIONS[M.STALE]
    assert {M.LOSING_PARTITIONS, M.FATAL} <= row
    # it left the group: it cannot be in a generation without joining again
    assert not row & {M.STABLE, M.AWAITING_SYNC, M.ASSIGNING_PARTITIONS, M.PREPARE_REVOCATION, M.UNJOINED}


def test_losing_partitions_leads_back_to_joining_or_leaving() -> None:
    row = MEMBER_TRANSITIONS[M.LOSING_PARTITIONS]
    assert {M.JOINING, M.PREPARE_LEAVING, M.FATAL} <= row
    assert not row & {M.STABLE, M.AWAITING_SYNC, M.ASSIGNING_PARTITIONS}


def test_unjoined_only_moves_to_joining_or_leaving() -> None:
    row = MEMBER_TRANSITIONS[M.UNJOINED]
    assert M.JOINING in row
    assert row <= {M.JOINING, M.PREPARE_LEAVING, M.FATAL}


def test_joining_is_reached_from_every_state_a_rejoin_starts_in() -> None:
    sources = {s for s in MemberState if M.JOINING in MEMBER_TRANSITIONS[s]}
    # subscribe, eager revocation done, cooperative rejoin, JoinGroup retry, SyncGroup
    # REBALANCE_IN_PROGRESS, fenced, stale
    assert {
        M.UNJOINED,
        M.PARTITIONS_REVOKED,
        M.STABLE,
        M.JOINING,
        M.AWAITING_SYNC,
        M.LOSING_PARTITIONS,
    } <= sources
    assert not sources & {M.LEAVING, M.PREPARE_LEAVING, M.FATAL}


def test_a_full_eager_rebalance_walks_the_table() -> None:
    machine = new_member_state_machine("g")
    for target in (
        M.JOINING,
        M.AWAITING_SYNC,
        M.ASSIGNING_PARTITIONS,
        M.STABLE,
        M.PREPARE_REVOCATION,
        M.REVOKING_PARTITIONS,
        M.PARTITIONS_REVOKED,
        M.JOINING,
        M.AWAITING_SYNC,
        M.ASSIGNING_PARTITIONS,
        M.STABLE,
    ):
        machine.transition_to(target)
    assert machine.state is M.STABLE


def test_a_cooperative_rebalance_revokes_after_sync() -> None:
    machine = StateMachine("member", M.STABLE, MEMBER_TRANSITIONS)
    for target in (
        M.JOINING,
        M.AWAITING_SYNC,
        M.PREPARE_REVOCATION,
        M.REVOKING_PARTITIONS,
        M.PARTITIONS_REVOKED,
        M.ASSIGNING_PARTITIONS,
        M.STABLE,
    ):
        machine.transition_to(target)
    assert machine.state is M.STABLE


def test_heartbeat_states_are_those_holding_a_valid_generation() -> None:
    expected = {
        M.STABLE,
        M.ASSIGNING_PARTITIONS,
        M.PREPARE_REVOCATION,
        M.REVOKING_PARTITIONS,
        M.PARTITIONS_REVOKED,
    }
    assert expected == HEARTBEAT_STATES
    assert not HEARTBEAT_STATES & {M.UNJOINED, M.JOINING, M.AWAITING_SYNC, M.STALE, M.FATAL}


# -- StateMachine rejects incomplete tables -----------------------------------------------------------


def test_state_machine_rejects_a_table_missing_a_row() -> None:
    incomplete: dict[M, frozenset[M]] = {s: t for s, t in MEMBER_TRANSITIONS.items() if s is not M.STALE}
    with pytest.raises(ValueError, match="STALE"):
        StateMachine[M]("member", M.UNJOINED, incomplete)


@pytest.mark.parametrize("missing", list(MemberState), ids=_pair_id)
def test_state_machine_rejects_the_member_table_without_any_one_row(missing: MemberState) -> None:
    incomplete = {s: t for s, t in MEMBER_TRANSITIONS.items() if s is not missing}
    with pytest.raises(ValueError, match=missing.name):
        StateMachine("member", M.UNJOINED, incomplete)
