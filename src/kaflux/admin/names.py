"""Enums that users may spell as strings: ``"topic"``, ``"SCRAM-SHA-256"``, ``"allow"``. [pure]"""

from __future__ import annotations

import enum
from typing import TypeVar

from kaflux.errors import InvalidArgumentError

__all__ = ["NamedIntEnum"]

E = TypeVar("E", bound="NamedIntEnum")


class NamedIntEnum(enum.IntEnum):
    """An enum with Kafka's wire values whose members may also be given by name, in any case,
    with ``-`` for ``_`` (``"scram-sha-256"``, ``"Topic"``)."""

    @classmethod
    def parse(cls: type[E], value: object) -> E:
        """``value`` as a member: the member itself, its name, or its wire value. Raises
        InvalidArgumentError listing the names."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            try:
                return cls[value.strip().upper().replace("-", "_")]
            except KeyError:
                pass
        elif isinstance(value, int) and not isinstance(value, bool):
            try:
                return cls(value)
            except ValueError:
                pass
        names = ", ".join(m.label for m in cls if m.name != "UNKNOWN")
        raise InvalidArgumentError(f"unknown {cls.__name__} {value!r}: use one of {names}")

    @property
    def label(self) -> str:
        """The member's name as users spell it (``topic``)."""
        return self.name.lower()
