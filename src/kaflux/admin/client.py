"""``kaflux.AdminClient``: create, delete and list topics. [app: public methods; the network
thread owns all I/O]

Each call becomes an :class:`~kaflux.admin.request_manager.AdminCall` event; on the network
thread the :class:`~kaflux.admin.request_manager.AdminRequestManager` sends it to the
controller (or any broker), retrying retriable failures until the call's deadline, and completes
its future with the decoded response, which the application thread turns into results or errors.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from kaflux.admin.request_manager import AdminCall, AdminRequestManager
from kaflux.closeable import Closeable
from kaflux.config import AdminConfig
from kaflux.errors import (
    IllegalStateError,
    KafkaError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from kaflux.network.factory import build_network
from kaflux.network.metadata_manager import MetadataAnswer
from kaflux.network.network_thread import NetworkThread, monotonic_ms
from kaflux.protocol.messages.create_topics import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from kaflux.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse, DeleteTopicState
from kaflux.structs import PartitionInfo
from kaflux.timeouts import await_future, timeout_seconds

_client_ids = itertools.count(1)


class NewTopic(NamedTuple):
    """A topic to create."""

    name: str
    num_partitions: int = 1
    replication_factor: int = 1
    config: Mapping[str, str] = {}


class _AdminEventProcessor:
    """Hands admin calls to the request manager. [bg]"""

    def __init__(self, manager: AdminRequestManager) -> None:
        self._manager = manager

    def process(self, event: AdminCall, now_ms: int) -> None:
        self._manager.submit(event)

    def expire(self, now_ms: int) -> None:
        self._manager.expire(now_ms)

    def next_deadline_ms(self) -> int | None:
        return self._manager.next_deadline_ms()

    def fail_all(self, error: Exception) -> None:
        self._manager.fail_all(error)


class AdminClient(Closeable):
    """Manages topics. A minimal admin client for tests, demos and tooling."""

    def __init__(self, config: Mapping[str, object]) -> None:
        """Validate ``config`` and start the network thread. Raises ConfigError."""
        self._config = AdminConfig.from_dict(config)
        client_id = self._config.client_id or f"admin-{next(_client_ids)}"
        network = build_network(self._config, client_id, allow_auto_create_topics=False)
        manager = AdminRequestManager(network.cluster, network.metadata, network.retry_backoff)
        self._thread = NetworkThread(
            f"kaflux-admin-network-{client_id}",
            network.delegate,
            [network.metadata, manager],
            _AdminEventProcessor(manager),
        )
        self._closed = False
        self._thread.start()

    def _call(self, what: str, request: Any, timeout: float) -> Any:
        """Run one call on the network thread and wait for its answer (retried until then)."""
        if self._closed:
            raise IllegalStateError("the admin client is closed")
        call = AdminCall(what, monotonic_ms() + int(timeout * 1000), request)
        self._thread.submit(call)
        return await_future(call.future, timeout + 1.0, what)

    def _timeout(self, timeout: float | None) -> float:
        return timeout_seconds(timeout, self._config.default_api_timeout_ms / 1000)

    def create_topics(
        self, topics: Iterable[NewTopic | str], *, timeout: float | None = None, exist_ok: bool = False
    ) -> None:
        """Create topics and wait until the controller confirms.

        Raises:
            TopicAlreadyExistsError: a topic exists (unless ``exist_ok``).
            BrokerError: the broker refused (the first error, naming the topic).
            KafkaTimeoutError: no answer within ``timeout`` seconds.
        """
        wanted = [NewTopic(t) if isinstance(t, str) else t for t in topics]
        seconds = self._timeout(timeout)
        request = CreateTopicsRequest(
            topics=[
                CreatableTopic(
                    name=t.name,
                    num_partitions=t.num_partitions,
                    replication_factor=t.replication_factor,
                    configs=[CreatableTopicConfig(name=k, value=v) for k, v in sorted(t.config.items())],
                )
                for t in wanted
            ],
            timeout_ms=int(seconds * 1000),
        )
        response: CreateTopicsResponse = self._call("create_topics()", request, seconds)
        for result in response.topics:
            if result.error_code == 0:
                continue
            error = error_for_code(result.error_code)(
                f"topic {result.name!r}: {result.error_message or ''}".strip()
            )
            if exist_ok and isinstance(error, TopicAlreadyExistsError):
                continue
            raise error

    def delete_topics(
        self, names: Iterable[str], *, timeout: float | None = None, missing_ok: bool = False
    ) -> None:
        """Delete topics.

        Raises:
            UnknownTopicOrPartitionError: a topic does not exist (unless ``missing_ok``).
            KafkaTimeoutError: no answer within ``timeout`` seconds.
        """
        seconds = self._timeout(timeout)
        wanted = list(dict.fromkeys(names))
        # v0-5 name topics in topic_names, v6+ in topics; the negotiated version uses one.
        request = DeleteTopicsRequest(
            topics=[DeleteTopicState(name=name) for name in wanted],
            topic_names=wanted,
            timeout_ms=int(seconds * 1000),
        )
        response: DeleteTopicsResponse = self._call("delete_topics()", request, seconds)
        unanswered = set(wanted) - {r.name for r in response.responses}
        if unanswered:
            raise KafkaError(
                f"the broker did not answer for topics {sorted(unanswered)}; they may not be deleted"
            )
        for result in response.responses:
            if result.error_code == 0:
                continue
            error = error_for_code(result.error_code)(f"topic {result.name!r}")
            if missing_ok and isinstance(error, UnknownTopicOrPartitionError):
                continue
            raise error

    def list_topics(
        self, *, timeout: float | None = None, include_internal: bool = False
    ) -> dict[str, list[PartitionInfo]]:
        """All topics with their partitions, sorted by partition."""
        seconds = self._timeout(timeout)
        answer: MetadataAnswer = self._call("list_topics()", None, seconds)
        return {
            name: [info.partitions[p] for p in sorted(info.partitions)]
            for name, info in sorted(answer.topics.items())
            if include_internal or not info.is_internal
        }

    def close(self, timeout: float = 5.0) -> None:
        """Stop the network thread. Idempotent."""
        seconds = timeout_seconds(timeout, 5.0)
        if not self._closed:
            self._closed = True
            self._thread.close(seconds)
