"""State machines as data: an enum of states plus a table of allowed moves. [pure]"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Generic, TypeVar

from kaflux.errors import IllegalStateError

S = TypeVar("S", bound=enum.Enum)


class StateMachine(Generic[S]):
    """Holds one state; :meth:`transition_to` moves it only along an allowed edge.

    ``transitions`` maps each state to the states reachable from it. A move that is not in the
    table raises :class:`~kaflux.errors.IllegalStateError`, so a bug in the driving logic shows
    up at the faulty move instead of as a wrong result later.
    """

    __slots__ = ("_name", "_state", "_transitions")

    def __init__(self, name: str, initial: S, transitions: Mapping[S, frozenset[S]]) -> None:
        missing = [s for s in type(initial) if s not in transitions]
        if missing:
            raise ValueError(f"{name}: no transition row for {missing}")
        self._name = name
        self._state = initial
        self._transitions = transitions

    @property
    def state(self) -> S:
        """The current state."""
        return self._state

    def can_transition_to(self, target: S) -> bool:
        """Whether ``target`` is reachable from the current state in one move."""
        return target in self._transitions[self._state]

    def transition_to(self, target: S) -> None:
        """Move to ``target``; raises IllegalStateError if the table does not allow it."""
        if target not in self._transitions[self._state]:
            raise IllegalStateError(f"{self._name}: illegal transition {self._state.name} -> {target.name}")
        self._state = target

    def __repr__(self) -> str:
        return f"<{self._name} {self._state.name}>"
