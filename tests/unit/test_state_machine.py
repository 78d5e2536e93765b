"""StateMachine, and the broker connection's transition table row by row."""

from __future__ import annotations

import enum
import itertools

import pytest

from kaflux.errors import IllegalStateError
from kaflux.network.connection import CONNECTION_TRANSITIONS, ConnectionState
from kaflux.state_machine import StateMachine


class Light(enum.Enum):
    RED = "red"
    GREEN = "green"
    AMBER = "amber"


LIGHT = {
    Light.RED: frozenset({Light.GREEN}),
    Light.GREEN: frozenset({Light.AMBER}),
    Light.AMBER: frozenset({Light.RED}),
}


def test_starts_in_the_initial_state() -> None:
    assert StateMachine("light", Light.RED, LIGHT).state is Light.RED


def test_allowed_transition_changes_the_state() -> None:
    machine = StateMachine("light", Light.RED, LIGHT)
    machine.transition_to(Light.GREEN)
    assert machine.state is Light.GREEN


def test_illegal_transition_raises_naming_both_states_and_keeps_the_state() -> None:
    machine = StateMachine("light", Light.RED, LIGHT)
    with pytest.raises(IllegalStateError, match="light: illegal transition RED -> AMBER"):
        machine.transition_to(Light.AMBER)
    assert machine.state is Light.RED


def test_self_transition_is_illegal_unless_listed() -> None:
    machine = StateMachine("light", Light.RED, LIGHT)
    with pytest.raises(IllegalStateError):
        machine.transition_to(Light.RED)


def test_table_missing_a_state_is_rejected() -> None:
    with pytest.raises(ValueError, match="AMBER"):
        StateMachine("light", Light.RED, {Light.RED: frozenset({Light.GREEN}), Light.GREEN: frozenset()})


def test_can_transition_to_reflects_the_table() -> None:
    machine = StateMachine("light", Light.GREEN, LIGHT)
    assert machine.can_transition_to(Light.AMBER)
    assert not machine.can_transition_to(Light.RED)


def test_repr_shows_name_and_state() -> None:
    assert repr(StateMachine("light", Light.AMBER, LIGHT)) == "<light AMBER>"


_S = ConnectionState
CONNECTION_EDGES = {
    (_S.DISCONNECTED, _S.CONNECTING),
    (_S.CONNECTING, _S.TLS_HANDSHAKE),
    (_S.CONNECTING, _S.CHECKING_API_VERSIONS),
    (_S.CONNECTING, _S.DISCONNECTED),
    (_S.TLS_HANDSHAKE, _S.CHECKING_API_VERSIONS),
    (_S.TLS_HANDSHAKE, _S.DISCONNECTED),
    (_S.CHECKING_API_VERSIONS, _S.AUTHENTICATING),
    (_S.CHECKING_API_VERSIONS, _S.READY),
    (_S.CHECKING_API_VERSIONS, _S.DISCONNECTED),
    (_S.AUTHENTICATING, _S.READY),
    (_S.AUTHENTICATING, _S.DISCONNECTED),
    (_S.READY, _S.AUTHENTICATING),  # re-authentication (KIP-368)
    (_S.READY, _S.DISCONNECTED),
}


@pytest.mark.parametrize(
    ("source", "target"),
    list(itertools.product(ConnectionState, ConnectionState)),
    ids=lambda s: s.name,
)
def test_connection_transition_table_row(source: ConnectionState, target: ConnectionState) -> None:
    machine = StateMachine("connection", source, CONNECTION_TRANSITIONS)
    if (source, target) in CONNECTION_EDGES:
        machine.transition_to(target)
        assert machine.state is target
    else:
        with pytest.raises(IllegalStateError):
            machine.transition_to(target)
