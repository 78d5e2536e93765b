"""Finds the group coordinator. [bg, pure: takes now_ms]

FindCoordinator is sent (with retry backoff) whenever the coordinator is unknown; other
managers call :meth:`CoordinatorRequestManager.mark_unknown` when a response says the
coordinator moved or the connection to it failed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kaflux.errors import KafkaError, error_for_code
from kaflux.network.backoff import RequestState
from kaflux.network.cluster import ClusterMetadata, coordinator_node_id
from kaflux.network.requests import ClientResponse, PollResult, RequestManager, UnsentRequest
from kaflux.protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from kaflux.structs import Node

log = logging.getLogger(__name__)

#: v4+ batches keys; v0-3 (one key) is what every broker here supports.
MAX_FIND_COORDINATOR_VERSION = 3


class CoordinatorRequestManager(RequestManager):
    """Knows the coordinator node of one group."""

    def __init__(
        self,
        group_id: str,
        request_state: RequestState,
        cluster: ClusterMetadata,
        on_fatal_error: Callable[[KafkaError], None],
    ) -> None:
        self._group_id = group_id
        self._state = request_state
        self._cluster = cluster
        self._on_fatal_error = on_fatal_error
        self.coordinator: Node | None = None

    @property
    def coordinator_id(self) -> int | None:
        """The node id to send group requests to (its own connection), or None if unknown."""
        return None if self.coordinator is None else coordinator_node_id(self.coordinator.node_id)

    def mark_unknown(self, reason: str) -> None:
        """Forget the coordinator; the next poll looks it up again."""
        if self.coordinator is not None:
            log.info(
                "group %s: coordinator %s unknown (%s)", self._group_id, self.coordinator.node_id, reason
            )
        self.coordinator = None

    def poll_on_close(self, now_ms: int) -> PollResult:
        """Nothing is worth sending while the client closes."""
        return PollResult()

    def poll(self, now_ms: int) -> PollResult:
        if self.coordinator is not None:
            return PollResult()
        if not self._state.can_send(now_ms):
            return PollResult(
                max(1, self._state.remaining_backoff_ms(now_ms)) if not self._state.in_flight else 5000
            )
        self._state.on_send(now_ms)
        request = FindCoordinatorRequest(key=self._group_id, key_type=0)
        return PollResult(
            5000, [UnsentRequest(request, None, self._on_response, MAX_FIND_COORDINATOR_VERSION)]
        )

    def _on_response(self, response: ClientResponse[FindCoordinatorResponse]) -> None:
        if response.error is not None:
            self._state.on_failure(response.received_ms)
            return
        body = response.body
        if body.error_code != 0:
            # The group's name always: Kafka's own message ("Group authorization failed.") lacks it.
            detail = f"group {self._group_id!r}" + (f": {body.error_message}" if body.error_message else "")
            error = error_for_code(body.error_code)(detail)
            self._state.on_failure(response.received_ms)
            if not error.retriable:
                self._on_fatal_error(error)
            return
        self._state.on_success()
        node = Node(body.node_id, body.host, body.port)
        self._cluster.coordinators[coordinator_node_id(body.node_id)] = node
        self.coordinator = node
