"""ShareFetch and ShareAcknowledge, one share session per broker (KIP-932). [bg, pure: takes now_ms]

Java's ``ShareConsumeRequestManager``. The member fetches from the leaders of its assigned
partitions; each leader keeps a *share session* for it, numbered by an epoch: 0 opens it, each
answered request moves it on by one, -1 closes it (and the broker then releases every record
still acquired in it). So at most one request per broker is in flight.

Each ``poll(now_ms)``, per broker:

* a ShareFetch is *due* when the broker leads an assigned partition, the application has
  settled (seen and acknowledged) every record the broker delivered, no acquired data waits
  in the buffer (from any broker: records acquired and not handed out are records the other
  members of the group cannot have), and the buffer is under its byte limit. (A fetch while
  records are still acquired and unacknowledged would, on librdkafka's mock cluster, deliver
  them again.) It carries the acknowledgements waiting for that broker (piggy-backed), unless
  they are urgent;
* a member acquires no more than one ``poll()`` can hand out: the ShareFetches in flight ask
  for ``max.poll.records`` between them (``MaxRecords``, split over the brokers fetched from at
  once), and with ``share.acquire.mode=record_limit`` (KIP-1206, ShareFetch v2) the broker
  keeps to it exactly; in ``batch_optimized`` mode (Java's default, and all a v1 broker knows)
  a broker may round up to the end of a record batch, and that surplus is handed out by the
  next polls before anything more is acquired;
* urgent acknowledgements (commit_sync(), commit_async(), RENEW), and those for a broker that
  leads no assigned partition any more, go at once in a ShareAcknowledge; others wait for the
  broker's next due fetch;
* while closing, a ShareAcknowledge with epoch -1 carries the last acknowledgements and
  closes the session.

Acknowledgement outcomes are reported per partition: to the commit that waits for them (its
future gets ``{partition: error or None}`` once every broker answered) and, through
``on_acknowledged``, to the application's acknowledgement commit callback. A request that
fails (connection lost, session gone) fails its acknowledgements and starts a new session.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol

from kaflux.consumer.share.acknowledgements import Acknowledgements
from kaflux.errors import (
    AcknowledgementOutcomeUnknownError,
    InvalidShareSessionEpochError,
    KafkaError,
    ShareSessionNotFoundError,
    UnsupportedVersionError,
    error_for_code,
)
from kaflux.metrics.clients import ShareMetrics
from kaflux.metrics.registry import MetricsRegistry
from kaflux.network.requests import (
    MAX_POLL_TIMEOUT_MS,
    ClientResponse,
    PollResult,
    RequestManager,
    UnsentRequest,
)
from kaflux.protocol.messages import share_acknowledge as sa
from kaflux.protocol.messages import share_fetch as sf
from kaflux.structs import TopicPartition

log = logging.getLogger(__name__)

#: v1 is Kafka 4.1's first stable version; v2 adds RENEW (KIP-1222) and ShareAcquireMode (KIP-1206)
MAX_SHARE_VERSION = 2
#: ShareFetch's ShareAcquireMode values (KIP-1206), by share.acquire.mode
ACQUIRE_MODES = {"batch_optimized": 0, "record_limit": 1}
#: the session epoch that closes a share session
CLOSE_EPOCH = -1
_INT32_MAX = 2**31 - 1
_SESSION_ERRORS = (ShareSessionNotFoundError, InvalidShareSessionEpochError)

AckResults = dict[TopicPartition, KafkaError | None]


@dataclass(slots=True)
class ShareCompletedFetch:
    """One partition's records from one ShareFetch answer."""

    tp: TopicPartition
    node: int
    records: memoryview | None
    #: (first offset, last offset, delivery count) ranges the broker acquired for us
    acquired: list[tuple[int, int, int]] = field(default_factory=list)
    #: the how-manieth delivery of records from this broker (see ``settled`` in acknowledge())
    seq: int = 0
    #: how long the broker holds these records for us (KIP-1222; None: it did not say)
    acquisition_lock_timeout_ms: int | None = None

    @property
    def size_bytes(self) -> int:
        return 0 if self.records is None else len(self.records)


class ShareAssignment(Protocol):
    """What the manager needs of the membership."""

    @property
    def group_id(self) -> str: ...

    @property
    def member_id(self) -> str: ...

    def assigned_partitions(self) -> frozenset[TopicPartition]: ...

    def topic_id(self, topic: str) -> uuid.UUID | None: ...


class Leaders(Protocol):
    """What the manager needs of the cluster metadata."""

    def leader_for(self, tp: TopicPartition) -> int | None: ...


class Buffer(Protocol):
    """What the manager needs of the shared fetch buffer."""

    def add(self, fetches: list[ShareCompletedFetch]) -> None: ...

    def busy_nodes(self) -> set[int]: ...

    def size_bytes(self) -> int: ...


@dataclass(eq=False, slots=True)
class ShareCommit:
    """A commit_sync()/commit_async()/close() waiting for its acknowledgements' outcomes."""

    future: Future[AckResults] = field(default_factory=Future)
    results: AckResults = field(default_factory=dict)
    nodes: set[int] = field(default_factory=set)


@dataclass(slots=True)
class _Session:
    epoch: int = 0
    partitions: set[TopicPartition] = field(default_factory=set)
    in_flight: bool = False
    #: the MaxRecords of the ShareFetch in flight (0: none, or a ShareAcknowledge)
    asked: int = 0
    #: the broker cannot take ShareAcquireMode (ShareFetch v1): batch_optimized is all it knows
    no_acquire_mode: bool = False
    #: its last ShareFetch acquired nothing: it asks for one record while others have some
    idle: bool = False
    pending: dict[TopicPartition, Acknowledgements] = field(default_factory=dict)
    #: pending acknowledgements must go now (a commit, or a RENEW), not wait for a fetch
    urgent: bool = False
    commits: list[ShareCommit] = field(default_factory=list)
    closing: bool = False
    closed: bool = False


class ShareConsumeRequestManager(RequestManager):
    """Fetches acquired records and sends acknowledgements for one share consumer."""

    def __init__(
        self,
        membership: ShareAssignment,
        leaders: Leaders,
        buffer: Buffer,
        *,
        request_metadata: Callable[[], None],
        on_acknowledged: Callable[[dict[TopicPartition, Acknowledgements], KafkaError | None], None],
        on_error: Callable[[KafkaError], None],
        topic_ids: Callable[[str], uuid.UUID | None],
        fetch_max_wait_ms: int = 500,
        fetch_min_bytes: int = 1,
        fetch_max_bytes: int = 52_428_800,
        max_poll_records: int = 500,
        buffer_max_bytes: int = 64 * 1024 * 1024,
        acquire_mode: str = "batch_optimized",
        metrics: ShareMetrics | None = None,
    ) -> None:
        self._membership = membership
        self._leaders = leaders
        self._buffer = buffer
        self._request_metadata = request_metadata
        self._on_acknowledged = on_acknowledged
        self._on_error = on_error
        self._topic_ids = topic_ids
        self._max_wait_ms = fetch_max_wait_ms
        self._min_bytes = fetch_min_bytes
        self._max_bytes = fetch_max_bytes
        self._max_records = max_poll_records
        self._buffer_max_bytes = buffer_max_bytes
        self._acquire_mode = ACQUIRE_MODES[acquire_mode]
        #: which of the brokers fetched from at once gets the remainder of the split budget
        self._turn = 0
        self._sessions: dict[int, _Session] = {}
        self._closing = False
        #: per broker: deliveries made, and deliveries the application settled
        self._delivered: dict[int, int] = {}
        self._settled: dict[int, int] = {}
        self._metrics = metrics if metrics is not None else ShareMetrics(MetricsRegistry())
        #: the latest time this manager saw (a poll's or a response's), for recording metrics
        self._now_ms = 0

    # -- from the application (events) -----------------------------------------------------------

    def acknowledge(
        self,
        acks: dict[int, dict[TopicPartition, Acknowledgements]],
        commit: ShareCommit | None = None,
        settled: dict[int, int] | None = None,
    ) -> None:
        """Queue acknowledgements by broker; with ``commit``, send them now and complete it.
        ``settled``: per broker, the last delivery (``ShareCompletedFetch.seq``) whose records
        the application has all acknowledged; the broker may be fetched from again."""
        for settled_node, seq in (settled or {}).items():
            self._settled[settled_node] = max(seq, self._settled.get(settled_node, 0))
        for node, by_tp in acks.items():
            session = self._sessions.setdefault(node, _Session())
            for tp, tp_acks in by_tp.items():
                existing = session.pending.get(tp)
                if existing is None:
                    session.pending[tp] = tp_acks
                else:
                    existing.merge(tp_acks)
                if tp_acks.has_renew():
                    session.urgent = True
            if commit is not None:
                session.urgent = True
                session.commits.append(commit)
                commit.nodes.add(node)
        if commit is not None and not commit.nodes:
            _complete(commit)

    def close(self, commit: ShareCommit) -> None:
        """Send the last acknowledgements and close every share session; ``commit`` completes
        when every broker answered."""
        self._closing = True
        for node, session in self._sessions.items():
            if session.epoch == 0 and not session.pending:
                session.closed = True
                continue
            session.closing = True
            session.commits.append(commit)
            commit.nodes.add(node)
        if not commit.nodes:
            _complete(commit)

    def has_pending(self) -> bool:
        """Acknowledgements wait to be sent or answered."""
        return any(s.pending or s.in_flight for s in self._sessions.values())

    # -- request manager ---------------------------------------------------------------------------

    def poll(self, now_ms: int) -> PollResult:
        self._now_ms = max(self._now_ms, now_ms)
        by_node: dict[int, list[TopicPartition]] = {}
        if not self._closing:
            unknown = False
            for tp in self._membership.assigned_partitions():
                leader = self._leaders.leader_for(tp)
                if leader is None or self._topic_ids(tp.topic) is None:
                    unknown = True
                    continue
                by_node.setdefault(leader, []).append(tp)
            if unknown:
                self._request_metadata()
        # Acquire only what one poll() can hand out: nothing while acquired records wait in the
        # buffer, and max.poll.records between the fetches in flight.
        undelivered = bool(self._buffer.busy_nodes())
        room = self._buffer.size_bytes() < self._buffer_max_bytes
        budget = self._max_records - sum(s.asked for s in self._sessions.values() if s.in_flight)
        unsent: list[UnsentRequest[Any]] = []
        due: list[int] = []
        for node in sorted(set(by_node) | set(self._sessions)):
            session = self._sessions.setdefault(node, _Session())
            if session.in_flight or session.closed:
                continue
            if session.closing:
                unsent.append(self._acknowledge_request(node, session, CLOSE_EPOCH))
                continue
            partitions = by_node.get(node, [])
            fetch_due = (
                bool(partitions)
                and not undelivered
                and room
                and self._settled.get(node, 0) >= self._delivered.get(node, 0)
            )
            if fetch_due and not session.urgent:
                due.append(node)
            elif session.pending and (session.urgent or not partitions) and session.epoch > 0:
                unsent.append(self._acknowledge_request(node, session, session.epoch))
            elif session.pending and session.epoch == 0:
                # No session to acknowledge in (it was lost): the broker took the records back.
                self._fail_pending(session, ShareSessionNotFoundError("the share session was lost"))
        for node, max_records in self._split(budget, due):
            unsent.append(self._fetch_request(node, self._sessions[node], by_node[node], max_records))
        return PollResult(MAX_POLL_TIMEOUT_MS, unsent)

    def _split(self, budget: int, nodes: list[int]) -> list[tuple[int, int]]:
        """``budget`` records over ``nodes``: a broker whose last fetch acquired nothing asks for
        one record while another had some (it is asked again, for a share, once it has some);
        the others share the rest as evenly as can be, the remainder (or, with fewer records
        than brokers, the turn to fetch) going round."""
        if budget <= 0 or not nodes:
            return []
        start = self._turn % len(nodes)
        self._turn += 1
        ordered = nodes[start:] + nodes[:start]
        idle = [n for n in ordered if self._sessions[n].idle]
        busy = [n for n in ordered if not self._sessions[n].idle]
        asks: list[tuple[int, int]] = []
        if busy and idle:
            asks = [(node, 1) for node in idle[: max(0, budget - len(busy))]]
            budget -= len(asks)
            ordered = busy
        share, extra = divmod(budget, len(ordered))
        asks += [(node, share + (1 if i < extra else 0)) for i, node in enumerate(ordered)]
        return [(node, n) for node, n in asks if n > 0]

    def poll_on_close(self, now_ms: int) -> PollResult:
        return PollResult()

    # -- requests ---------------------------------------------------------------------------------

    def _take_pending(
        self, session: _Session
    ) -> tuple[dict[TopicPartition, Acknowledgements], list[ShareCommit]]:
        pending, session.pending = session.pending, {}
        commits, session.commits = session.commits, []
        session.urgent = False
        return pending, commits

    def _fetch_request(
        self, node: int, session: _Session, partitions: list[TopicPartition], max_records: int
    ) -> UnsentRequest[sf.ShareFetchResponse]:
        pending, commits = self._take_pending(session)
        topics: dict[uuid.UUID, sf.FetchTopic] = {}
        wanted = set(partitions)
        renew = any(acks.has_renew() for acks in pending.values())
        for tp in sorted(wanted | set(pending), key=lambda t: (t.topic, t.partition)):
            topic_id = self._topic_ids(tp.topic)
            if topic_id is None:
                continue
            topic = topics.setdefault(topic_id, sf.FetchTopic(topic_id=topic_id))
            acks = pending.get(tp)
            topic.partitions.append(
                sf.FetchPartition(
                    partition_index=tp.partition,
                    acknowledgement_batches=[
                        sf.AcknowledgementBatch(b.first_offset, b.last_offset, list(b.types))
                        for b in (acks.batches() if acks is not None else [])
                    ],
                )
            )
        forgotten: dict[uuid.UUID, list[int]] = {}
        for tp in session.partitions - wanted:
            topic_id = self._topic_ids(tp.topic)
            if topic_id is not None:
                forgotten.setdefault(topic_id, []).append(tp.partition)
        request = sf.ShareFetchRequest(
            group_id=self._membership.group_id,
            member_id=self._membership.member_id,
            share_session_epoch=session.epoch,
            max_wait_ms=self._max_wait_ms,
            min_bytes=self._min_bytes,
            max_bytes=self._max_bytes,
            max_records=max_records,
            batch_size=max_records,
            share_acquire_mode=0 if session.no_acquire_mode else self._acquire_mode,
            is_renew_ack=renew,
            topics=list(topics.values()),
            forgotten_topics_data=[
                sf.ForgottenTopic(topic_id=tid, partitions=parts) for tid, parts in forgotten.items()
            ],
        )
        session.in_flight = True
        session.asked = max_records
        self._metrics.fetch_sent(sum(len(a) for a in pending.values()), self._now_ms)
        sent_epoch = session.epoch
        mode = request.share_acquire_mode

        def handle(response: ClientResponse[sf.ShareFetchResponse]) -> None:
            if mode and isinstance(response.error, UnsupportedVersionError):
                self._acquire_mode_refused(node, session, pending, commits, response.error)
                return
            self._on_fetch_response(node, session, sent_epoch, wanted, pending, commits, response)

        # Long-polls up to max_wait_ms on the broker: the response may take that long.
        return UnsentRequest(request, node, handle, MAX_SHARE_VERSION, timeout_ms=None)

    def _acknowledge_request(
        self, node: int, session: _Session, epoch: int
    ) -> UnsentRequest[sa.ShareAcknowledgeResponse]:
        pending, commits = self._take_pending(session)
        topics: dict[uuid.UUID, sa.AcknowledgeTopic] = {}
        renew = False
        for tp in sorted(pending, key=lambda t: (t.topic, t.partition)):
            topic_id = self._topic_ids(tp.topic)
            if topic_id is None:
                continue
            acks = pending[tp]
            renew = renew or acks.has_renew()
            topic = topics.setdefault(topic_id, sa.AcknowledgeTopic(topic_id=topic_id))
            topic.partitions.append(
                sa.AcknowledgePartition(
                    partition_index=tp.partition,
                    acknowledgement_batches=[
                        sa.AcknowledgementBatch(b.first_offset, b.last_offset, list(b.types))
                        for b in acks.batches()
                    ],
                )
            )
        request = sa.ShareAcknowledgeRequest(
            group_id=self._membership.group_id,
            member_id=self._membership.member_id,
            share_session_epoch=epoch,
            is_renew_ack=renew,
            topics=list(topics.values()),
        )
        session.in_flight = True
        self._metrics.acknowledge_sent(sum(len(a) for a in pending.values()), self._now_ms)
        sent_epoch = epoch

        def handle(response: ClientResponse[sa.ShareAcknowledgeResponse]) -> None:
            self._on_acknowledge_response(node, session, sent_epoch, pending, commits, renew, response)

        return UnsentRequest(request, node, handle, MAX_SHARE_VERSION)

    # -- responses --------------------------------------------------------------------------------

    def _acquire_mode_refused(
        self,
        node: int,
        session: _Session,
        pending: dict[TopicPartition, Acknowledgements],
        commits: list[ShareCommit],
        error: UnsupportedVersionError,
    ) -> None:
        """The ShareFetch could not be encoded for a broker without ShareFetch v2 (it was not
        sent: the session did not move on). Fetch from it in batch_optimized mode from now on,
        with the acknowledgements it carried."""
        session.in_flight = False
        session.asked = 0
        session.no_acquire_mode = True
        for tp, acks in pending.items():
            later = session.pending.get(tp)
            if later is not None:
                acks.merge(later)
            session.pending[tp] = acks
        session.commits[:0] = commits
        if commits or any(a.has_renew() for a in pending.values()):
            session.urgent = True
        log.warning(
            "broker %d cannot take share.acquire.mode=record_limit (it needs ShareFetch v2, KIP-1206, "
            "Kafka 4.2+; %s): fetching from it in batch_optimized mode, where an acquisition may "
            "exceed max.poll.records up to the end of a record batch",
            node,
            error,
        )

    def _advance(self, session: _Session, sent_epoch: int) -> None:
        if sent_epoch == CLOSE_EPOCH:
            session.closed = True
            session.epoch = 0
            session.partitions.clear()
        else:
            session.epoch = 1 if sent_epoch >= _INT32_MAX else sent_epoch + 1

    def _reset(self, session: _Session, error: KafkaError) -> None:
        """The session is gone (``error``). A closing one is over: what waits in it (the close's
        own commit, acknowledgements made after the failed request left) fails with ``error``;
        the broker took its records back with the session."""
        session.epoch = 0
        session.partitions.clear()
        if session.closing:
            session.closed = True
            self._fail_pending(session, error)

    def _on_fetch_response(
        self,
        node: int,
        session: _Session,
        sent_epoch: int,
        wanted: set[TopicPartition],
        pending: dict[TopicPartition, Acknowledgements],
        commits: list[ShareCommit],
        response: ClientResponse[sf.ShareFetchResponse],
    ) -> None:
        session.in_flight = False
        session.asked = 0
        self._now_ms = max(self._now_ms, response.received_ms)
        if response.error is not None:
            self._reset(session, response.error)
            self._finish(node, pending, commits, {}, response.error)
            self._request_metadata()
            return
        body = response.body
        if body.error_code != 0:
            error = error_for_code(body.error_code)(body.error_message or f"ShareFetch to broker {node}")
            self._reset(session, error)
            self._finish(node, pending, commits, {}, error)
            if not isinstance(error, _SESSION_ERRORS) and not error.retriable:
                self._on_error(error)
            return
        self._advance(session, sent_epoch)
        session.partitions = set(wanted)
        errors: dict[TopicPartition, KafkaError | None] = {}
        answered: set[TopicPartition] = set()
        fetched: list[ShareCompletedFetch] = []
        records = size = 0
        names = {self._topic_ids(tp.topic): tp.topic for tp in wanted | set(pending)}
        lock_timeout_ms = body.acquisition_lock_timeout_ms if body.acquisition_lock_timeout_ms > 0 else None
        for topic in body.responses:
            name = names.get(topic.topic_id)
            if name is None:
                continue
            for part in topic.partitions:
                tp = TopicPartition(name, part.partition_index)
                answered.add(tp)
                if part.acknowledge_error_code:
                    errors[tp] = error_for_code(part.acknowledge_error_code)(
                        part.acknowledge_error_message or f"acknowledging {tp.topic}-{tp.partition}"
                    )
                if part.error_code:
                    fetch_error = error_for_code(part.error_code)(
                        part.error_message or f"{tp.topic}-{tp.partition}"
                    )
                    if fetch_error.retriable:
                        self._request_metadata()
                    else:
                        self._on_error(fetch_error)
                    continue
                if part.acquired_records and tp in wanted:
                    acquired = [
                        (a.first_offset, a.last_offset, a.delivery_count) for a in part.acquired_records
                    ]
                    records += sum(last - first + 1 for first, last, _ in acquired)
                    if not fetched:
                        self._delivered[node] = self._delivered.get(node, 0) + 1
                    fetched.append(
                        ShareCompletedFetch(
                            tp,
                            node,
                            part.records,
                            acquired,
                            self._delivered[node],
                            lock_timeout_ms,
                        )
                    )
                    size += 0 if part.records is None else len(part.records)
        session.idle = records == 0
        latency_ms = response.received_ms - response.request.created_ms
        self._metrics.fetch_answered(latency_ms, records, size, response.received_ms)
        if fetched:
            self._buffer.add(fetched)
        errors.update(_unanswered(pending, answered, node, "ShareFetch"))
        self._finish(node, pending, commits, errors, None)

    def _on_acknowledge_response(
        self,
        node: int,
        session: _Session,
        sent_epoch: int,
        pending: dict[TopicPartition, Acknowledgements],
        commits: list[ShareCommit],
        renew: bool,
        response: ClientResponse[sa.ShareAcknowledgeResponse],
    ) -> None:
        session.in_flight = False
        self._now_ms = max(self._now_ms, response.received_ms)
        error = response.error
        if isinstance(error, UnsupportedVersionError) and renew:
            error = UnsupportedVersionError(
                f"broker {node} cannot take AcknowledgeType.RENEW: it needs ShareAcknowledge v2 "
                f"(KIP-1222, Kafka 4.2+) and the broker serves an older version ({error})"
            )
        if isinstance(error, UnsupportedVersionError):
            # Refused before it was sent (the request cannot be encoded at the broker's
            # version): the session did not move on.
            self._finish(node, pending, commits, {}, error)
            return
        if error is not None:
            self._reset(session, error)
            self._finish(node, pending, commits, {}, error)
            return
        body = response.body
        if body.error_code != 0:
            top = error_for_code(body.error_code)(body.error_message or f"ShareAcknowledge to broker {node}")
            self._reset(session, top)
            self._finish(node, pending, commits, {}, top)
            return
        self._advance(session, sent_epoch)
        names = {self._topic_ids(tp.topic): tp.topic for tp in pending}
        errors: dict[TopicPartition, KafkaError | None] = {}
        answered: set[TopicPartition] = set()
        for topic in body.responses:
            name = names.get(topic.topic_id)
            if name is None:
                continue
            for part in topic.partitions:
                tp = TopicPartition(name, part.partition_index)
                answered.add(tp)
                if part.error_code:
                    errors[tp] = error_for_code(part.error_code)(
                        part.error_message or f"acknowledging {tp.topic}-{tp.partition}"
                    )
        errors.update(_unanswered(pending, answered, node, "ShareAcknowledge"))
        self._finish(node, pending, commits, errors, None)

    def _fail_pending(self, session: _Session, error: KafkaError) -> None:
        pending, commits = self._take_pending(session)
        node = next((n for n, s in self._sessions.items() if s is session), -1)
        self._finish(node, pending, commits, {}, error)

    def _finish(
        self,
        node: int,
        pending: dict[TopicPartition, Acknowledgements],
        commits: list[ShareCommit],
        errors: dict[TopicPartition, KafkaError | None],
        error: KafkaError | None,
    ) -> None:
        """Report the outcome of ``pending`` (``error`` for all, else per partition)."""
        outcome: AckResults = {tp: error if error is not None else errors.get(tp) for tp in pending}
        by_error: dict[int, tuple[KafkaError | None, dict[TopicPartition, Acknowledgements]]] = {}
        for tp, tp_error in outcome.items():
            if tp_error is not None:
                self._metrics.acknowledgements_failed(len(pending[tp]), self._now_ms)
            by_error.setdefault(id(tp_error), (tp_error, {}))[1][tp] = pending[tp]
        for tp_error, acks_by_tp in by_error.values():
            self._on_acknowledged(acks_by_tp, tp_error)
        for commit in commits:
            commit.results.update(outcome)
            commit.nodes.discard(node)
            if not commit.nodes:
                _complete(commit)


def _unanswered(
    pending: dict[TopicPartition, Acknowledgements], answered: set[TopicPartition], node: int, what: str
) -> dict[TopicPartition, KafkaError | None]:
    """An error for each acknowledged partition the response did not mention: not a success (the
    broker may have refused them; librdkafka's mock left such partitions out of ShareAcknowledge
    responses after an outage, and delivered their records again)."""
    return {
        tp: AcknowledgementOutcomeUnknownError(
            f"broker {node}'s {what} response says nothing of the acknowledgements for "
            f"{tp.topic}-{tp.partition}: whether it took them is unknown (records it did not take "
            "are delivered again)"
        )
        for tp in pending
        if tp not in answered
    }


def _complete(commit: ShareCommit) -> None:
    if not commit.future.done():
        commit.future.set_result(commit.results)
