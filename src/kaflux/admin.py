"""``kaflux.AdminClient``: create, delete and list topics. [app: public methods; the network
thread owns all I/O]

Each call becomes an :class:`AdminRequestEvent`; the network thread sends it to the
controller (or any broker) and completes its future with the decoded response, which the
application thread turns into results or errors.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from kaflux.closeable import Closeable
from kaflux.config import AdminConfig
from kaflux.errors import (
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from kaflux.network.factory import NetworkStack, build_network
from kaflux.network.metadata_manager import MetadataAnswer
from kaflux.network.network_thread import NetworkThread, monotonic_ms
from kaflux.network.requests import ClientResponse, UnsentRequest
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


@dataclass(slots=True)
class AdminRequestEvent:
    """Application event: send ``request`` to the controller (or any broker)."""

    request: Any
    deadline_ms: int
    to_controller: bool = True
    future: Future[Any] = field(default_factory=Future)


@dataclass(slots=True)
class ListTopicsEvent:
    """Application event: describe all topics."""

    deadline_ms: int
    future: Future[MetadataAnswer] = field(default_factory=Future)


class _AdminEventProcessor:
    """Turns admin events into requests. [bg]"""

    def __init__(self, network: NetworkStack) -> None:
        self._network = network
        self._waiting: list[AdminRequestEvent] = []
        self._pending: list[Future[Any]] = []

    def process(self, event: AdminRequestEvent | ListTopicsEvent, now_ms: int) -> None:
        if isinstance(event, ListTopicsEvent):
            future = event.future

            def on_topics(answer: MetadataAnswer | None, error: KafkaError | None) -> None:
                if answer is None:
                    future.set_exception(error or KafkaError("no metadata"))
                else:
                    future.set_result(answer)

            self._network.metadata.request_topics(None, on_topics)
            self._track(future)
            return
        self._waiting.append(event)
        self._track(event.future)
        self._send_ready(now_ms)

    def _track(self, future: Future[Any]) -> None:
        self._pending = [f for f in self._pending if not f.done()]
        self._pending.append(future)

    def _send_ready(self, now_ms: int) -> None:
        cluster = self._network.cluster
        if cluster.last_refresh_ms < 0:
            self._network.metadata.request_update()
            return
        for event in self._waiting:
            node = cluster.controller_id if event.to_controller and cluster.controller_id >= 0 else None
            self._network.delegate.add(
                UnsentRequest(event.request, node, self._resolver(event.future)), now_ms
            )
        self._waiting = []

    @staticmethod
    def _resolver(future: Future[Any]) -> Callable[[ClientResponse], None]:
        def resolve(response: ClientResponse) -> None:
            if response.error is not None:
                future.set_exception(response.error)
            else:
                future.set_result(response.body)

        return resolve

    def expire(self, now_ms: int) -> None:
        if self._waiting:
            self._send_ready(now_ms)
        for event in list(self._waiting):
            if now_ms >= event.deadline_ms:
                event.future.set_exception(KafkaTimeoutError("no broker answered metadata in time"))
                self._waiting.remove(event)

    def next_deadline_ms(self) -> int | None:
        return min((e.deadline_ms for e in self._waiting), default=None)

    def fail_all(self, error: Exception) -> None:
        for future in self._pending:
            if not future.done():
                future.set_exception(error)


class AdminClient(Closeable):
    """Manages topics. A minimal admin client for tests, demos and tooling."""

    def __init__(self, config: Mapping[str, object]) -> None:
        """Validate ``config`` and start the network thread. Raises ConfigError."""
        self._config = AdminConfig.from_dict(config)
        client_id = self._config.client_id or f"admin-{next(_client_ids)}"
        network = build_network(self._config, client_id, allow_auto_create_topics=False)
        self._thread = NetworkThread(
            f"kaflux-admin-network-{client_id}",
            network.delegate,
            [network.metadata],
            _AdminEventProcessor(network),
        )
        self._closed = False
        self._thread.start()

    def _call(self, event: AdminRequestEvent | ListTopicsEvent, timeout: float) -> Any:
        if self._closed:
            raise IllegalStateError("the admin client is closed")
        self._thread.submit(event)
        return await_future(event.future, timeout, type(event).__name__)

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
        response: CreateTopicsResponse = self._call(
            AdminRequestEvent(request, monotonic_ms() + int(seconds * 1000)), seconds
        )
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
        response: DeleteTopicsResponse = self._call(
            AdminRequestEvent(request, monotonic_ms() + int(seconds * 1000)), seconds
        )
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
        answer: MetadataAnswer = self._call(ListTopicsEvent(monotonic_ms() + int(seconds * 1000)), seconds)
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
