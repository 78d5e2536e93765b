"""Keeps :class:`~kaflux.network.cluster.ClusterMetadata` fresh. [bg, pure: takes now_ms]

A request manager: ``poll(now_ms)`` returns a Metadata request when an update is due — the
first time, when someone asked for one (new topics, a leader moved, an unknown partition),
or every ``metadata.max.age.ms`` — and never more often than the retry backoff allows.
Callers may also ask for a one-off answer with :meth:`MetadataManager.request_topics`, whose
callback gets the parsed topics (used for ``partitions_for`` and ``list_topics``). Given a
deadline, a one-off retries what retrying may cure until then, as Java's topic metadata
request manager does: a lost connection or a timed-out request, a topic whose leader is being
elected; it fails at once on an error that will not pass (an unauthorised or invalid topic).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from kaflux.errors import (
    KafkaError,
    KafkaTimeoutError,
    LeaderNotAvailableError,
    RebootstrapRequiredError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from kaflux.network.backoff import RequestState
from kaflux.network.cluster import ClusterMetadata, TopicInfo
from kaflux.network.requests import ClientResponse, PollResult, RequestManager, UnsentRequest
from kaflux.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse
from kaflux.structs import Node, PartitionInfo

log = logging.getLogger(__name__)

_UNKNOWN_TOPIC_OR_PARTITION = UnknownTopicOrPartitionError.code
_LEADER_NOT_AVAILABLE = LeaderNotAvailableError.code
#: an unknown topic is logged at most once per this interval (per topic)
UNKNOWN_TOPIC_LOG_INTERVAL_MS = 60_000


@dataclass(slots=True)
class MetadataAnswer:
    """The parsed content of one Metadata response."""

    brokers: dict[int, Node]
    topics: dict[str, TopicInfo]
    #: per-topic error codes for topics that could not be described (e.g. unknown)
    topic_errors: dict[str, int]
    cluster_id: str | None
    controller_id: int


TopicsCallback = Callable[[MetadataAnswer | None, KafkaError | None], None]


@dataclass(slots=True)
class _OneOff:
    """A caller's metadata request (``partitions_for``, ``list_topics``, the admin client)."""

    topics: list[str] | None
    auto_create: bool
    callback: TopicsCallback
    #: retry retriable failures until then; None: report the first failure
    deadline_ms: int | None
    state: RequestState
    #: the failure being retried, named if the deadline passes
    last_error: KafkaError | None = None

    def topic_error(self, answer: MetadataAnswer) -> KafkaError | None:
        """The error the answer names for a requested topic that the call must not ignore
        (checked only for a call with a deadline, whose caller asked for named topics)."""
        if self.deadline_ms is None or self.topics is None:
            return None
        for name in self.topics:
            code = answer.topic_errors.get(name)
            info = answer.topics.get(name)
            if code is not None and code != _UNKNOWN_TOPIC_OR_PARTITION:
                return error_for_code(code)(f"topic {name!r}, in a metadata response")
            if info is not None and info.error_code == _LEADER_NOT_AVAILABLE:
                return LeaderNotAvailableError(f"topic {name!r}: its leaders are being elected")
        return None


def parse_metadata(response: MetadataResponse) -> MetadataAnswer:
    """Turn a Metadata response into nodes and topic infos."""
    brokers = {b.node_id: Node(b.node_id, b.host, b.port, b.rack) for b in response.brokers}
    topics: dict[str, TopicInfo] = {}
    errors: dict[str, int] = {}
    for t in response.topics:
        if t.name is None:
            continue
        if t.error_code not in (0, _LEADER_NOT_AVAILABLE):
            errors[t.name] = t.error_code
            continue
        partitions = {
            p.partition_index: PartitionInfo(
                t.name,
                p.partition_index,
                p.leader_id,
                p.leader_epoch,
                tuple(p.replica_nodes),
                tuple(p.isr_nodes),
                tuple(p.offline_replicas),
            )
            for p in t.partitions
        }
        topics[t.name] = TopicInfo(
            t.name, t.topic_id or uuid.UUID(int=0), t.is_internal, partitions, t.error_code
        )
    return MetadataAnswer(brokers, topics, errors, response.cluster_id, response.controller_id)


class MetadataManager(RequestManager):
    """Decides when to refresh cluster metadata and applies responses."""

    def __init__(
        self,
        cluster: ClusterMetadata,
        request_state: RequestState,
        *,
        max_age_ms: int,
        allow_auto_create_topics: bool = False,
        rebootstrap_trigger_ms: int | None = None,
    ) -> None:
        self.cluster = cluster
        #: rebootstrap when no refresh succeeded for this long (KIP-1102; None: never)
        self._rebootstrap_trigger_ms = rebootstrap_trigger_ms
        #: when the client started waiting for a refresh that has not succeeded yet
        self._waiting_since_ms: int | None = None
        self._state = request_state
        self._max_age_ms = max_age_ms
        self._allow_auto_create = allow_auto_create_topics
        #: topics to keep fresh; None means all topics in the cluster
        self._topics: set[str] | None = set()
        self._update_requested = True
        self._one_off: list[_OneOff] = []
        self._listeners: list[Callable[[ClusterMetadata], None]] = []
        self._error_listeners: list[Callable[[str | None, KafkaError], None]] = []
        #: the error each kept-fresh topic got in the last response that described it
        self._topic_errors: dict[str, KafkaError] = {}
        self._unknown_logged_ms: dict[str, int] = {}

    # -- configuration by other managers ------------------------------------------------------

    def add_listener(self, listener: Callable[[ClusterMetadata], None]) -> None:
        """Call ``listener(cluster)`` after every applied update."""
        self._listeners.append(listener)

    def add_error_listener(self, listener: Callable[[str | None, KafkaError], None]) -> None:
        """Call ``listener(topic, error)`` when a refresh reports a topic error that retrying will not
        cure (e.g. TOPIC_AUTHORIZATION_FAILED) for a topic kept fresh, or ``listener(None, error)``
        when the refresh itself failed so (e.g. the broker refused the client's login)."""
        self._error_listeners.append(listener)

    def topic_error(self, topic: str) -> KafkaError | None:
        """The error the latest metadata reported for ``topic`` (None: described fine, or not
        asked for yet): the cause to name when a call about that topic times out."""
        return self._topic_errors.get(topic)

    def set_topics(self, topics: set[str] | None) -> None:
        """Keep exactly these topics fresh (None: every topic, as for pattern subscriptions)."""
        if topics != self._topics:
            self._topics = None if topics is None else set(topics)
            self._update_requested = True

    def add_topics(self, topics: set[str]) -> None:
        """Also keep these topics fresh."""
        if self._topics is not None and not topics <= self._topics:
            self._topics |= topics
            self._update_requested = True

    def request_update(self) -> None:
        """Refresh at the next opportunity (a leader moved, a partition was unknown...)."""
        self._update_requested = True

    def request_topics(
        self,
        topics: list[str] | None,
        callback: TopicsCallback,
        *,
        auto_create: bool = False,
        deadline_ms: int | None = None,
    ) -> None:
        """Ask for ``topics`` (None: all); ``callback(answer, error)`` runs once, on this thread.

        Without ``deadline_ms`` the first failure is reported. With it, retriable failures are
        retried with backoff until the deadline (then the last one is reported), and an
        answer naming an error for one of ``topics`` is judged as Java judges it: an unknown
        topic is answered (absent from the answer), a leader being elected is retried, any
        other error fails the call."""
        self._one_off.append(
            _OneOff(topics, auto_create, callback, deadline_ms, RequestState(self._state.backoff))
        )

    def expire_requests(self, now_ms: int) -> None:
        """Fail the callers' requests whose deadline passed, naming the failure being retried."""
        for one_off in [o for o in self._one_off if o.deadline_ms is not None and now_ms >= o.deadline_ms]:
            self._one_off.remove(one_off)
            what = "all topics" if one_off.topics is None else ", ".join(map(repr, one_off.topics))
            cause = "" if one_off.last_error is None else f" (last failure: {one_off.last_error})"
            one_off.callback(
                None,
                KafkaTimeoutError(
                    f"no metadata for {what} before the deadline{cause}. Check that the brokers in "
                    "bootstrap.servers are reachable, or retry with a longer timeout."
                ),
            )

    # -- request manager ----------------------------------------------------------------------

    def poll_on_close(self, now_ms: int) -> PollResult:
        """Nothing is worth sending while the client closes."""
        return PollResult()

    def poll(self, now_ms: int) -> PollResult:
        """Return Metadata requests that are due."""
        unsent: list[UnsentRequest[MetadataResponse]] = []
        retry_wait: int | None = None
        self.expire_requests(now_ms)
        for one_off in self._one_off:
            if one_off.state.can_send(now_ms):
                one_off.state.on_send(now_ms)
                unsent.append(self._one_off_request(one_off))
            elif not one_off.state.in_flight:
                backoff = max(1, one_off.state.remaining_backoff_ms(now_ms))
                retry_wait = backoff if retry_wait is None else min(retry_wait, backoff)
            if one_off.deadline_ms is not None:
                left = max(1, one_off.deadline_ms - now_ms)
                retry_wait = left if retry_wait is None else min(retry_wait, left)
        self._maybe_rebootstrap(now_ms)
        age = now_ms - self.cluster.last_refresh_ms if self.cluster.last_refresh_ms >= 0 else None
        due = self._update_requested or age is None or age >= self._max_age_ms
        if due and self._waiting_since_ms is None:
            self._waiting_since_ms = now_ms
        if due and self._state.can_send(now_ms):
            self._state.on_send(now_ms)
            self._update_requested = False
            topics = None if self._topics is None else sorted(self._topics)
            unsent.append(
                UnsentRequest(
                    self._build(topics, self._allow_auto_create), None, self._on_response_factory(topics)
                )
            )
            wait = self._max_age_ms
        elif due:
            wait = max(1, self._state.remaining_backoff_ms(now_ms)) if not self._state.in_flight else 5000
        else:
            wait = self._max_age_ms - (age or 0)
        if retry_wait is not None:
            wait = min(wait, retry_wait)
        return PollResult(max(0, wait), unsent)

    def _maybe_rebootstrap(self, now_ms: int) -> None:
        """KIP-1102: no metadata refresh succeeded for metadata.recovery.rebootstrap.trigger.ms,
        or the last answer said REBOOTSTRAP_REQUIRED: start again from bootstrap.servers."""
        trigger = self._rebootstrap_trigger_ms
        since = self._waiting_since_ms
        if trigger is None or since is None:
            return
        if now_ms - since >= trigger and self.cluster.brokers:
            log.warning(
                "no metadata refresh succeeded for %d ms (metadata.recovery.rebootstrap.trigger.ms): "
                "rebootstrapping from bootstrap.servers",
                now_ms - since,
            )
            self.cluster.rebootstrap()
            self._waiting_since_ms = now_ms
            self._update_requested = True

    def _rebootstrap_required(self, now_ms: int) -> None:
        """The broker answered REBOOTSTRAP_REQUIRED (Metadata v13, KIP-1102): the brokers this
        client knows are no longer the cluster's. Start again from bootstrap.servers (unless
        metadata.recovery.strategy=none, which only retries)."""
        self._state.on_failure(now_ms)
        self._update_requested = True
        if self._rebootstrap_trigger_ms is None:
            log.warning(
                "a broker answered REBOOTSTRAP_REQUIRED, but metadata.recovery.strategy=none: retrying "
                "the brokers this client knows"
            )
            return
        log.warning("a broker answered REBOOTSTRAP_REQUIRED: rebootstrapping from bootstrap.servers")
        self.cluster.rebootstrap()
        self._waiting_since_ms = now_ms

    def _build(self, topics: list[str] | None, auto_create: bool) -> MetadataRequest:
        request_topics = None if topics is None else [MetadataRequestTopic(name=t) for t in topics]
        return MetadataRequest(topics=request_topics, allow_auto_topic_creation=auto_create)

    def _one_off_request(self, one_off: _OneOff) -> UnsentRequest[MetadataResponse]:
        def handle(response: ClientResponse[MetadataResponse]) -> None:
            now_ms = response.received_ms
            if one_off not in self._one_off:
                return  # its deadline passed and it was reported: the caller has gone
            if response.error is not None:
                self._one_off_failed(one_off, response.error, now_ms)
                return
            if response.body.error_code == RebootstrapRequiredError.code:
                self._rebootstrap_required(now_ms)
                one_off.state.on_failure(now_ms)  # asked again, of the bootstrap brokers
                return
            answer = parse_metadata(response.body)
            self._apply(answer, now_ms, full=one_off.topics is None)
            error = one_off.topic_error(answer)
            if error is not None:
                self._one_off_failed(one_off, error, now_ms)
            else:
                self._one_off.remove(one_off)
                one_off.callback(answer, None)

        return UnsentRequest(self._build(one_off.topics, one_off.auto_create), None, handle)

    def _one_off_failed(self, one_off: _OneOff, error: KafkaError, now_ms: int) -> None:
        """Retry a retriable failure when the call has a deadline (reached, it is reported as
        a timeout naming this failure); report any other failure at once."""
        if error.retriable and one_off.deadline_ms is not None:
            one_off.state.on_failure(now_ms)
            one_off.last_error = error
            log.debug("metadata for %s failed (%s); retrying", one_off.topics or "all topics", error)
            self.expire_requests(now_ms)
            return
        self._one_off.remove(one_off)
        one_off.callback(None, error)

    def _on_response_factory(
        self, topics: list[str] | None
    ) -> Callable[[ClientResponse[MetadataResponse]], None]:
        def handle(response: ClientResponse[MetadataResponse]) -> None:
            if response.error is not None:
                self._state.on_failure(response.received_ms)
                self._update_requested = True
                if not response.error.retriable:
                    # e.g. an authentication failure: the application must hear of it.
                    for listener in self._error_listeners:
                        listener(None, response.error)
                return
            if response.body.error_code == RebootstrapRequiredError.code:
                self._rebootstrap_required(response.received_ms)
                return
            answer = parse_metadata(response.body)
            self._state.on_success()
            self._waiting_since_ms = None
            self._note_topic_errors(answer, response.received_ms)
            retry = any(
                code in (_UNKNOWN_TOPIC_OR_PARTITION, _LEADER_NOT_AVAILABLE) or error_for_code(code).retriable
                for code in answer.topic_errors.values()
            ) or any(p.leader < 0 for t in answer.topics.values() for p in t.partitions.values())
            self._apply(answer, response.received_ms, full=topics is None)
            if retry:
                # Topics being created or leaders being elected: ask again after a backoff.
                self._state.on_failure(response.received_ms)
                self._update_requested = True

        return handle

    def _note_topic_errors(self, answer: MetadataAnswer, now_ms: int) -> None:
        """Remember each topic's error, log unknown topics (rate-limited) and report errors
        that retrying will not cure: as Java, they are not silently dropped."""
        for name in answer.topics:
            self._topic_errors.pop(name, None)
        for name, code in sorted(answer.topic_errors.items()):
            error = error_for_code(code)(f"topic {name!r}, in a metadata response")
            self._topic_errors[name] = error
            if code == _UNKNOWN_TOPIC_OR_PARTITION:
                last = self._unknown_logged_ms.get(name)
                if last is None or now_ms - last >= UNKNOWN_TOPIC_LOG_INTERVAL_MS:
                    self._unknown_logged_ms[name] = now_ms
                    log.warning(
                        "topic %r is not known to the cluster (UNKNOWN_TOPIC_OR_PARTITION); check its "
                        "name or create it. Still retrying (logged at most once a minute).",
                        name,
                    )
            elif not error.retriable:
                for listener in self._error_listeners:
                    listener(name, error)

    def _apply(self, answer: MetadataAnswer, now_ms: int, *, full: bool) -> None:
        self.cluster.update(
            answer.brokers,
            answer.topics,
            cluster_id=answer.cluster_id,
            controller_id=answer.controller_id,
            now_ms=now_ms,
            full=full,
        )
        if answer.topic_errors:
            self.cluster.forget_topics(set(answer.topic_errors))
        for listener in self._listeners:
            listener(self.cluster)
