"""Looking assignors up by configured name, and the group's rebalance protocol. [pure]"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kaflux.consumer.assignors.base import PartitionAssignor, RebalanceProtocol
from kaflux.consumer.assignors.range import RangeAssignor
from kaflux.consumer.assignors.roundrobin import RoundRobinAssignor
from kaflux.consumer.assignors.sticky import CooperativeStickyAssignor, StickyAssignor
from kaflux.errors import ConfigError

__all__ = ["CONFIG_KEY", "JAVA_CLASS_NAMES", "assignor_for_name", "rebalance_protocol_for"]

CONFIG_KEY = "partition.assignment.strategy"

_FACTORIES: dict[str, Callable[[], PartitionAssignor]] = {
    RangeAssignor.name: RangeAssignor,
    RoundRobinAssignor.name: RoundRobinAssignor,
    StickyAssignor.name: StickyAssignor,
    CooperativeStickyAssignor.name: CooperativeStickyAssignor,
}

JAVA_CLASS_NAMES: dict[str, str] = {
    "org.apache.kafka.clients.consumer.RangeAssignor": RangeAssignor.name,
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": RoundRobinAssignor.name,
    "org.apache.kafka.clients.consumer.StickyAssignor": StickyAssignor.name,
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": CooperativeStickyAssignor.name,
}
"""Java's class names for the built-in assignors, accepted as aliases of their protocol names."""


def assignor_for_name(name: str) -> PartitionAssignor:
    """A new assignor for a ``partition.assignment.strategy`` entry: a protocol name ("range",
    "roundrobin", "sticky", "cooperative-sticky") or the matching Java class name.

    Surrounding whitespace is ignored. Each call returns a new instance (sticky assignors keep
    state per consumer). Unknown names raise :class:`~kaflux.errors.ConfigError`.
    """
    key = name.strip()
    factory = _FACTORIES.get(JAVA_CLASS_NAMES.get(key, key))
    if factory is None:
        known = ", ".join([*_FACTORIES, *JAVA_CLASS_NAMES])
        raise ConfigError(CONFIG_KEY, f"unknown partition assignor {name!r}; known assignors: {known}")
    return factory()


def rebalance_protocol_for(assignors: Iterable[PartitionAssignor]) -> RebalanceProtocol:
    """The rebalance protocol a consumer with these assignors uses: the highest one that all of them
    support (as Java decides). The default ``[range, cooperative-sticky]`` therefore gives EAGER;
    ``[cooperative-sticky]`` alone gives COOPERATIVE.

    Raises :class:`~kaflux.errors.ConfigError` when there are no assignors or they share no protocol.
    """
    listed = list(assignors)
    if not listed:
        raise ConfigError(CONFIG_KEY, "at least one partition assignor is required")
    common = set(RebalanceProtocol)
    for assignor in listed:
        common &= set(assignor.supported_protocols)
    if not common:
        names = ", ".join(repr(a.name) for a in listed)
        raise ConfigError(
            CONFIG_KEY, f"the assignors {names} support no common rebalance protocol (eager or cooperative)"
        )
    return max(common)
