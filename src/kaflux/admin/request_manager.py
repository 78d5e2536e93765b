"""The admin client's request manager: one request per call, retried until its deadline.
[bg, pure: takes now_ms]

Each admin call arrives as an :class:`AdminCall` (a request for the controller or any broker, or
a topic listing). :class:`AdminRequestManager` sends it once cluster metadata is known, retries
retriable failures with the shared backoff (refreshing metadata when the failure says it is
stale), completes the call's future with the decoded answer or the error, and fails it with a
KafkaTimeoutError naming the call when its deadline passes. Like the other request managers it
does no I/O: ``poll(now_ms)`` returns what to send.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from kaflux.errors import KafkaError, KafkaTimeoutError
from kaflux.network.backoff import ExponentialBackoff, RequestState
from kaflux.network.cluster import ClusterMetadata
from kaflux.network.metadata_manager import MetadataAnswer, MetadataManager
from kaflux.network.requests import (
    MAX_POLL_TIMEOUT_MS,
    ClientResponse,
    PollResult,
    RequestManager,
    UnsentRequest,
)


@dataclass(slots=True)
class AdminCall:
    """One admin call. ``request`` None lists every topic (from metadata); otherwise it goes to
    the controller (``to_controller``) or to any broker."""

    what: str
    deadline_ms: int
    request: Any = None
    to_controller: bool = True
    future: Future[Any] = field(default_factory=Future)


@dataclass(slots=True)
class _Pending:
    call: AdminCall
    state: RequestState


class AdminRequestManager(RequestManager):
    """Sends the admin client's calls and retries them until their deadlines."""

    def __init__(
        self, cluster: ClusterMetadata, metadata: MetadataManager, backoff: ExponentialBackoff
    ) -> None:
        self._cluster = cluster
        self._metadata = metadata
        self._backoff = backoff
        self._pending: list[_Pending] = []
        metadata.add_error_listener(self._on_metadata_error)

    def _on_metadata_error(self, topic: str | None, error: KafkaError) -> None:
        """Metadata cannot be had (e.g. the login was refused): no call can be sent."""
        if topic is None:
            self.fail_all(error)

    def submit(self, call: AdminCall) -> None:
        """Take a call from the application thread's event."""
        self._pending.append(_Pending(call, RequestState(self._backoff)))

    def poll(self, now_ms: int) -> PollResult:
        self.expire(now_ms)
        unsent: list[UnsentRequest[Any]] = []
        wait = MAX_POLL_TIMEOUT_MS
        for pending in self._pending:
            state = pending.state
            if state.in_flight:
                continue
            if pending.call.request is not None and self._cluster.last_refresh_ms < 0:
                self._metadata.request_update()  # the controller is not known yet
                wait = min(wait, 50)
                continue
            if not state.can_send(now_ms):
                wait = min(wait, state.remaining_backoff_ms(now_ms))
                continue
            state.on_send(now_ms)
            call = pending.call
            if call.request is None:
                self._metadata.request_topics(None, self._on_topics(pending))
                continue
            controller = self._cluster.controller_id
            node = controller if call.to_controller and controller >= 0 else None
            unsent.append(UnsentRequest(call.request, node, self._on_response(pending)))
        return PollResult(wait, unsent)

    def poll_on_close(self, now_ms: int) -> PollResult:
        """Nothing to send while closing: unfinished calls fail with the client."""
        return PollResult()

    def _on_response(self, pending: _Pending) -> Any:
        def handle(response: ClientResponse[Any]) -> None:
            body = None if response.error is not None else response.body
            self._finish(pending, body, response.error, response.received_ms)

        return handle

    def _on_topics(self, pending: _Pending) -> Any:
        def handle(answer: MetadataAnswer | None, error: KafkaError | None) -> None:
            self._finish(pending, answer, error if answer is None else None, pending.state.last_sent_ms)

        return handle

    def _finish(self, pending: _Pending, body: Any, error: KafkaError | None, now_ms: int) -> None:
        if pending not in self._pending:
            return  # expired meanwhile
        future = pending.call.future
        if error is None:
            self._pending.remove(pending)
            future.set_result(body)
        elif error.retriable and now_ms < pending.call.deadline_ms:
            pending.state.on_failure(now_ms)
            if error.invalid_metadata:
                self._metadata.request_update()
        else:
            self._pending.remove(pending)
            future.set_exception(error)

    def expire(self, now_ms: int) -> None:
        """Fail the calls whose deadline passed."""
        for pending in list(self._pending):
            if now_ms >= pending.call.deadline_ms:
                self._pending.remove(pending)
                if not pending.call.future.done():
                    pending.call.future.set_exception(
                        KafkaTimeoutError(f"{pending.call.what} did not complete before its deadline")
                    )

    def next_deadline_ms(self) -> int | None:
        """The earliest deadline of an unfinished call."""
        return min((p.call.deadline_ms for p in self._pending), default=None)

    def fail_all(self, error: Exception) -> None:
        """At close: fail every unfinished call."""
        for pending in self._pending:
            if not pending.call.future.done():
                pending.call.future.set_exception(error)
        self._pending.clear()
