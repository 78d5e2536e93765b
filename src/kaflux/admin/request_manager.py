"""The admin client's request manager: lookups, fan-out and retries until each call's deadline.
[bg, pure: takes now_ms]

Each admin call arrives as an :class:`~kaflux.admin.operation.AdminOperation` (or, for the
topic calls, an :class:`~kaflux.admin.operation.AdminCall`: one request to the controller or any
broker, or a topic listing). :class:`AdminRequestManager` drives it as Java's ``AdminApiDriver`` does: every
key of the call first finds its broker (FindCoordinator for a group, Metadata for a partition's
leader or for the list of brokers), then the keys bound for one broker go in one request; an
answer completes or fails keys, or sends them back to be looked up again (the coordinator or
leader moved) or retried after the shared backoff. When the deadline passes, the keys still
unfinished fail with a KafkaTimeoutError naming the call and the last error seen. Like the other
request managers it does no I/O: ``poll(now_ms)`` returns what to send.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kaflux.admin.lookup import leaders, timeout_error
from kaflux.admin.operation import AdminCall, AdminOperation, AdminResult, Lookup, Outcome
from kaflux.errors import InvalidArgumentError, KafkaError, KafkaTimeoutError, error_for_code
from kaflux.network.backoff import ExponentialBackoff, RequestState
from kaflux.network.cluster import ClusterMetadata, coordinator_node_id
from kaflux.network.metadata_manager import MetadataAnswer, MetadataManager
from kaflux.network.requests import (
    MAX_POLL_TIMEOUT_MS,
    ClientResponse,
    PollResult,
    RequestManager,
    UnsentRequest,
)
from kaflux.protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from kaflux.structs import Node

__all__ = ["AdminCall", "AdminRequestManager"]

#: v4+ batches keys; v0-3 (one key) is what every broker here supports (as the consumer uses).
MAX_FIND_COORDINATOR_VERSION = 3


@dataclass(slots=True, eq=False)
class _Key:
    """Where one key's requests go and its retry bookkeeping (lookups and requests alike)."""

    state: RequestState
    #: the node its requests go to; None: to be looked up (always None for ANY / CONTROLLER)
    node: int | None = None
    last_error: KafkaError | None = None


class _Run:
    """One operation being driven."""

    __slots__ = ("api", "completed", "discovered", "discovery", "failed", "keys", "op")

    def __init__(self, op: AdminOperation[Any, Any], backoff: ExponentialBackoff) -> None:
        self.op = op
        self.api = op.api
        self.keys: dict[Any, _Key] = {k: _Key(RequestState(backoff)) for k in dict.fromkeys(op.api.keys())}
        self.completed: dict[Any, Any] = {}
        self.failed: dict[Any, KafkaError] = {}
        #: the Metadata request that lists the brokers (Lookup.BROKERS)
        self.discovery = RequestState(backoff)
        self.discovered = op.api.lookup is not Lookup.BROKERS


class AdminRequestManager(RequestManager):
    """Drives the admin client's calls and retries them until their deadlines."""

    def __init__(
        self, cluster: ClusterMetadata, metadata: MetadataManager, backoff: ExponentialBackoff
    ) -> None:
        self._cluster = cluster
        self._metadata = metadata
        self._backoff = backoff
        self._runs: list[_Run] = []
        #: a one-off Metadata request was queued in this poll
        self._metadata_queued = False
        metadata.add_error_listener(self._on_metadata_error)

    def _on_metadata_error(self, topic: str | None, error: KafkaError) -> None:
        """Metadata cannot be had (e.g. the login was refused): no call can be sent."""
        if topic is None:
            self.fail_all(error)

    def submit(self, call: AdminOperation[Any, Any] | AdminCall) -> None:
        """Take a call from the application thread's event."""
        run = _Run(call.as_operation() if isinstance(call, AdminCall) else call, self._backoff)
        self._runs.append(run)
        self._maybe_finish(run)

    # -- polling ----------------------------------------------------------------------------------

    def poll(self, now_ms: int) -> PollResult:
        self.expire(now_ms)
        unsent: list[UnsentRequest[Any]] = []
        wait = MAX_POLL_TIMEOUT_MS
        self._metadata_queued = False
        for run in list(self._runs):
            if self._cluster.last_refresh_ms < 0:
                self._metadata.request_update()  # no broker is known yet
                wait = min(wait, 50)
                continue
            queued = self._metadata_queued
            unsent += self._poll_run(run, now_ms)
            if self._metadata_queued and not queued:
                wait = 0  # the metadata manager sends the one-off request in the next pass
            for key in run.keys.values():
                if not key.state.in_flight:
                    wait = min(wait, max(1, key.state.remaining_backoff_ms(now_ms)))
            if not run.discovered and not run.discovery.in_flight:
                wait = min(wait, max(1, run.discovery.remaining_backoff_ms(now_ms)))
        return PollResult(wait, unsent)

    def poll_on_close(self, now_ms: int) -> PollResult:
        """Nothing to send while closing: unfinished calls fail with the client."""
        return PollResult()

    def _poll_run(self, run: _Run, now_ms: int) -> list[UnsentRequest[Any]]:
        api = run.api
        if not run.discovered:
            if run.discovery.can_send(now_ms):
                run.discovery.on_send(now_ms)
                self._ask_metadata([], self._on_brokers(run))
            return []
        ready = [k for k, key in run.keys.items() if key.state.can_send(now_ms)]
        if not ready:
            return []
        if api.lookup is Lookup.METADATA:
            self._send(run, ready, now_ms)
            self._ask_metadata(api.metadata_topics(), self._on_metadata(run, ready))
            return []
        unsent: list[UnsentRequest[Any]] = []
        unmapped = [k for k in ready if run.keys[k].node is None]
        if api.lookup is Lookup.LEADER and unmapped:
            self._send(run, unmapped, now_ms)
            topics = sorted({api.partition(k).topic for k in unmapped})
            self._ask_metadata(topics, self._on_metadata(run, unmapped))
        elif api.lookup is Lookup.COORDINATOR:
            for k in unmapped:
                self._send(run, [k], now_ms)
                find = FindCoordinatorRequest(key=api.group_id(k), key_type=api.coordinator_type)
                unsent.append(
                    UnsentRequest(
                        find,
                        None,
                        self._on_coordinator(run, k),
                        MAX_FIND_COORDINATOR_VERSION,
                        deadline_ms=run.op.deadline_ms,
                    )
                )
        by_node: dict[int | None, list[Any]] = {}
        if api.lookup in (Lookup.ANY, Lookup.CONTROLLER):
            controller = self._cluster.controller_id
            target = (
                controller
                if api.lookup is Lookup.CONTROLLER and controller in self._cluster.brokers
                else None
            )
            by_node[target] = ready
        elif api.lookup is Lookup.NODE:
            for k in ready:
                node_id = api.node_id(k)
                if node_id is not None and node_id not in self._cluster.brokers:
                    known = sorted(self._cluster.brokers)
                    error = InvalidArgumentError(
                        f"{run.op.what}: broker {node_id} is not in the cluster (its brokers are {known})"
                    )
                    self._apply(run, [k], Outcome(failed={k: error}), now_ms)
                    continue
                by_node.setdefault(node_id, []).append(k)
        else:
            for k in ready:
                mapped = run.keys[k].node
                if mapped is not None:
                    by_node.setdefault(mapped, []).append(k)
        for node_id, keys in by_node.items():
            target_node = None if node_id is None else self._cluster.node(node_id)
            for request, subset in api.build(target_node, keys):
                self._send(run, subset, now_ms)
                handler = self._on_response(run, node_id, subset)
                unsent.append(
                    UnsentRequest(
                        request,
                        node_id,
                        handler,
                        api.max_version,
                        deadline_ms=run.op.deadline_ms,
                        min_version=api.min_version(request),
                    )
                )
        return unsent

    def _ask_metadata(
        self, topics: list[str] | None, callback: Callable[[MetadataAnswer | None, KafkaError | None], None]
    ) -> None:
        self._metadata.request_topics(topics, callback)
        self._metadata_queued = True

    def _send(self, run: _Run, keys: list[Any], now_ms: int) -> None:
        for k in keys:
            run.keys[k].state.on_send(now_ms)

    # -- lookups ---------------------------------------------------------------------------------

    def _on_brokers(self, run: _Run) -> Callable[[MetadataAnswer | None, KafkaError | None], None]:
        def handle(answer: MetadataAnswer | None, error: KafkaError | None) -> None:
            if run not in self._runs:
                return
            now_ms = run.discovery.last_sent_ms
            if answer is None or not answer.brokers:
                error = error or KafkaError("the Metadata answer listed no broker")
                run.discovery.on_failure(now_ms)
                if not error.retriable and answer is None:
                    self._finish(run, error)
                return
            run.discovery.on_success()
            run.discovered = True
            run.keys = {n: _Key(RequestState(self._backoff), node=n) for n in sorted(answer.brokers)}
            self._maybe_finish(run)

        return handle

    def _on_coordinator(self, run: _Run, k: Any) -> Callable[[ClientResponse[FindCoordinatorResponse]], None]:
        def handle(response: ClientResponse[FindCoordinatorResponse]) -> None:
            if run not in self._runs or k not in run.keys:
                return
            now_ms = response.received_ms
            if response.error is not None:
                self._apply(run, [k], self._error_outcome(run, [k], response.error), now_ms)
                return
            body = response.body
            if body.error_code != 0:
                error = error_for_code(body.error_code)(
                    f"finding the coordinator of {run.api.describe(k)}: {body.error_message or ''}".rstrip(
                        ": "
                    )
                )
                outcome: Outcome[Any, Any] = (
                    Outcome(retry={k: error}) if error.retriable else Outcome(failed={k: error})
                )
                self._apply(run, [k], outcome, now_ms)
                return
            node_id = body.node_id
            if node_id not in self._cluster.brokers:
                # A broker the metadata does not list yet: its own connection id.
                node_id = coordinator_node_id(body.node_id)
                self._cluster.coordinators[node_id] = Node(body.node_id, body.host, body.port)
            key = run.keys[k]
            key.node = node_id
            key.state.on_success()

        return handle

    def _on_metadata(
        self, run: _Run, keys: list[Any]
    ) -> Callable[[MetadataAnswer | None, KafkaError | None], None]:
        """A Metadata answer: the leaders of ``keys`` (Lookup.LEADER) or their values."""

        def handle(answer: MetadataAnswer | None, error: KafkaError | None) -> None:
            if run not in self._runs:
                return
            keys_left = [k for k in keys if k in run.keys]
            now_ms = max((run.keys[k].state.last_sent_ms for k in keys_left), default=0)
            if answer is None:
                assert error is not None
                self._apply(run, keys_left, self._error_outcome(run, keys_left, error), now_ms)
            elif run.api.lookup is Lookup.LEADER:
                found, outcome = leaders(run.api, keys_left, answer)
                for k, leader in found.items():
                    run.keys[k].node = leader
                    run.keys[k].state.on_success()
                self._apply(run, keys_left, outcome, now_ms, all_answered=False)
            else:
                self._apply(run, keys_left, run.api.handle_metadata(keys_left, answer), now_ms)

        return handle

    # -- answers ---------------------------------------------------------------------------------

    def _on_response(
        self, run: _Run, node_id: int | None, keys: list[Any]
    ) -> Callable[[ClientResponse[Any]], None]:
        def handle(response: ClientResponse[Any]) -> None:
            if run not in self._runs:
                return  # finished or expired meanwhile
            keys_left = [k for k in keys if k in run.keys]
            outcome: Outcome[Any, Any] | None
            if response.error is not None:
                node = None if node_id is None else self._cluster.node(node_id)
                outcome = run.api.handle_error(node, keys_left, response.request.request, response.error)
                if outcome is None:
                    outcome = self._error_outcome(run, keys_left, response.error)
            else:
                node = self._cluster.node(response.request.node_id)
                try:
                    outcome = run.api.handle(node, keys_left, response.body)
                except KafkaError as exc:  # e.g. an answer that cannot be read
                    outcome = Outcome(failed=dict.fromkeys(keys_left, exc))
            self._apply(run, keys_left, outcome, response.received_ms)

        return handle

    def _error_outcome(self, run: _Run, keys: list[Any], error: KafkaError) -> Outcome[Any, Any]:
        """No answer: retry a retriable error (after a new lookup where the target may have
        moved), fail the keys with any other."""
        if error.invalid_metadata:
            self._metadata.request_update()
        if not error.retriable:
            return Outcome(failed=dict.fromkeys(keys, error))
        if run.api.lookup in (Lookup.COORDINATOR, Lookup.LEADER):
            return Outcome(unmapped=dict.fromkeys(keys, error))
        return Outcome(retry=dict.fromkeys(keys, error))

    def _apply(
        self,
        run: _Run,
        keys: list[Any],
        outcome: Outcome[Any, Any],
        now_ms: int,
        *,
        all_answered: bool = True,
    ) -> None:
        """Apply what an answer meant for ``keys``."""
        for k in keys:
            key = run.keys.get(k)
            if key is None:
                continue
            if k in outcome.completed:
                del run.keys[k]
                run.completed[k] = outcome.completed[k]
            elif k in outcome.failed:
                del run.keys[k]
                run.failed[k] = outcome.failed[k]
            elif k in outcome.unmapped or k in outcome.retry:
                if k in outcome.unmapped:
                    key.node = None
                key.last_error = error = outcome.unmapped.get(k) or outcome.retry[k]
                key.state.on_failure(now_ms)
                if error.invalid_metadata or (k in outcome.unmapped and run.api.lookup is Lookup.CONTROLLER):
                    self._metadata.request_update()  # e.g. NOT_CONTROLLER: learn the new controller
            elif k in outcome.resend:
                key.state.reset()
            elif all_answered or key.state.in_flight:
                key.last_error = KafkaError(f"the broker's answer did not mention {run.api.describe(k)}")
                key.state.on_failure(now_ms)
        self._maybe_finish(run)

    # -- completion ------------------------------------------------------------------------------

    def _maybe_finish(self, run: _Run) -> None:
        if run.discovered and not run.keys and run in self._runs:
            self._finish(run)

    def _finish(self, run: _Run, error: BaseException | None = None) -> None:
        if run in self._runs:
            self._runs.remove(run)
        future = run.op.future
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(AdminResult(run.completed, run.failed))

    def expire(self, now_ms: int) -> None:
        """Fail the calls whose deadline passed: their unfinished keys fail with a
        KafkaTimeoutError naming the call and the last error seen."""
        for run in list(self._runs):
            if now_ms < run.op.deadline_ms:
                continue
            what = run.op.what
            if not run.discovered:
                self._finish(
                    run,
                    KafkaTimeoutError(
                        f"{what} did not complete before its deadline: the list of brokers could not be had"
                    ),
                )
                continue
            for k, key in run.keys.items():
                run.failed[k] = timeout_error(what, run.api.describe(k), key.last_error)
            run.keys.clear()
            self._finish(run)

    def next_deadline_ms(self) -> int | None:
        """The earliest deadline of an unfinished call."""
        return min((run.op.deadline_ms for run in self._runs), default=None)

    def fail_all(self, error: Exception) -> None:
        """At close: fail every unfinished call."""
        for run in list(self._runs):
            self._finish(run, error)
