"""Incremental fetch sessions (KIP-227), one per broker. [bg, pure]

The first request of a session is *full*: every partition, session id 0, epoch 0, which asks
the broker to create a session. Once the broker answers with a session id, later requests
are *incremental*: only partitions that are new or whose fetch offset changed, plus the ones
to forget, at epoch 1, 2, ... A broker that does not keep sessions answers id 0, and every
request stays full. A session error (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH)
or a failed request starts a new session.

Full requests rotate the partition order each time, so a broker that fills a response from
the first partitions listed cannot starve the others.
"""

from __future__ import annotations

from dataclasses import dataclass

from kaflux.structs import TopicPartition

INITIAL_EPOCH = 0
_MAX_EPOCH = 2**31 - 1


@dataclass(frozen=True, slots=True)
class PartitionFetchData:
    """What the client asks of one partition."""

    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int
    position_version: int


@dataclass(frozen=True, slots=True)
class FetchPlan:
    """One request's content: session id and epoch, partitions to send and to forget.

    ``partitions`` is every partition the request covers (the session's whole set), in the
    order sent for full requests; ``to_send`` are the ones written into the request.
    """

    session_id: int
    epoch: int
    full: bool
    partitions: dict[TopicPartition, PartitionFetchData]
    to_send: list[TopicPartition]
    to_forget: list[TopicPartition]


class FetchSession:
    """The client side of one broker's fetch session."""

    def __init__(self, node_id: int, enabled: bool = True) -> None:
        self.node_id = node_id
        self._enabled = enabled
        self.session_id = 0
        self.epoch = INITIAL_EPOCH
        self._session_partitions: dict[TopicPartition, PartitionFetchData] = {}
        self._rotation = 0

    def plan(self, wanted: dict[TopicPartition, PartitionFetchData]) -> FetchPlan:
        """Build the next request for ``wanted`` (in the caller's order)."""
        if self.session_id == 0 or not self._enabled:
            order = list(wanted)
            if order:
                start = self._rotation % len(order)
                order = order[start:] + order[:start]
                self._rotation += 1
            epoch = INITIAL_EPOCH if self._enabled else -1
            return FetchPlan(0, epoch, True, {tp: wanted[tp] for tp in order}, order, [])
        old = self._session_partitions
        to_send = [
            tp
            for tp, data in wanted.items()
            if tp not in old
            or (old[tp].fetch_offset, old[tp].max_bytes) != (data.fetch_offset, data.max_bytes)
        ]
        to_forget = [tp for tp in old if tp not in wanted]
        return FetchPlan(self.session_id, self.epoch, False, dict(wanted), to_send, to_forget)

    def on_response(self, plan: FetchPlan, response_session_id: int, error_code: int) -> None:
        """Advance the session after a response to ``plan``."""
        if error_code != 0:
            self.reset()
            return
        if plan.full:
            self.session_id = response_session_id if self._enabled else 0
            self.epoch = 1 if self.session_id else INITIAL_EPOCH
        else:
            self.epoch = self.epoch + 1 if self.epoch < _MAX_EPOCH else 1
        self._session_partitions = dict(plan.partitions)

    def reset(self) -> None:
        """Start over with a full request (after an error or a lost connection)."""
        self.session_id = 0
        self.epoch = INITIAL_EPOCH
        self._session_partitions = {}
