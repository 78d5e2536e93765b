"""Rebalance listener methods run by the application thread, one at a time. [bg, pure]

The membership never runs the application's listener itself: it posts a
:class:`~kaflux.consumer.events.RebalanceCallbackNeededEvent` (a background event) and waits in
its state until the application thread, inside ``poll()``, ``unsubscribe()`` or ``close()``,
runs the method and acknowledges it with a
:class:`~kaflux.consumer.events.RebalanceCallbackCompletedEvent` carrying the same callback id.
The acknowledgement runs the continuation registered with the request. An acknowledgement of
a callback the membership gave up on (it was fenced, failed or left meanwhile) is ignored.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from kaflux.consumer.events import BackgroundEvent, RebalanceCallbackNeededEvent
from kaflux.structs import TopicPartition

log = logging.getLogger(__name__)

#: the listener methods (``ConsumerRebalanceListener``), as the events name them
ON_PARTITIONS_REVOKED = "on_partitions_revoked"
ON_PARTITIONS_ASSIGNED = "on_partitions_assigned"
ON_PARTITIONS_LOST = "on_partitions_lost"
#: methods that hand partitions back: the application stops using them
_RELEASING = frozenset({ON_PARTITIONS_REVOKED, ON_PARTITIONS_LOST})


@dataclass(slots=True)
class _Pending:
    callback_id: int
    #: partitions handed to the application in a revoked/lost callback (empty for assigned)
    released: frozenset[TopicPartition]
    then: Callable[[], None]


class RebalanceCallbacks:
    """At most one requested callback of one member, and what to do once it ran."""

    def __init__(self, group_id: str, post_event: Callable[[BackgroundEvent], None]) -> None:
        self._group_id = group_id
        self._post_event = post_event
        #: the application registered a listener (callbacks are skipped without one)
        self.has_listener = False
        self._next_id = 1
        self._pending: _Pending | None = None

    @property
    def pending(self) -> bool:
        """A callback was requested and not acknowledged yet."""
        return self._pending is not None

    @property
    def released(self) -> frozenset[TopicPartition]:
        """The partitions the pending revoked/lost callback hands over (empty if none pends)."""
        return self._pending.released if self._pending is not None else frozenset()

    def request(
        self,
        method: str,
        partitions: set[TopicPartition],
        then: Callable[[], None],
        *,
        even_if_empty: bool = False,
    ) -> None:
        """Ask the application thread to run ``method``; ``then`` runs on its acknowledgement,
        or at once when there is no listener or (unless ``even_if_empty``) nothing to pass."""
        if not self.has_listener or (not partitions and not even_if_empty):
            then()
            return
        callback_id = self._next_id
        self._next_id += 1
        released = frozenset(partitions) if method in _RELEASING else frozenset()
        self._pending = _Pending(callback_id, released, then)
        self._post_event(RebalanceCallbackNeededEvent(callback_id, method, frozenset(partitions)))

    def replace_continuation(self, then: Callable[[], None]) -> None:
        """Run ``then`` instead of the pending callback's continuation when it is acknowledged."""
        if self._pending is not None:
            self._pending.then = then

    def cancel(self) -> None:
        """Forget the pending callback: its acknowledgement will be ignored."""
        self._pending = None

    def acknowledge(self, callback_id: int, method: str, error: BaseException | None) -> None:
        """The application ran callback ``callback_id``: continue (whether or not it raised)."""
        pending = self._pending
        if pending is None or pending.callback_id != callback_id:
            return  # a callback of an abandoned rebalance (the member was fenced meanwhile)
        if error is not None:
            log.warning("group %s: %s raised %r; the rebalance continues", self._group_id, method, error)
        self._pending = None
        pending.then()
