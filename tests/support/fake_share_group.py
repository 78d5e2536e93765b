"""An in-memory share group (KIP-932): coordinator and partition leaders, for unit tests. [test]

Not a test module. Tests import it as ``from fake_share_group import ...``.

:class:`FakeShareGroup` answers ShareGroupHeartbeat, ShareFetch and ShareAcknowledge the way
Kafka's share coordinator and ``SharePartition`` do, in the parts the client depends on:

* **Membership.** Epoch 0 with a member id joins (the group epoch goes up, every partition of
  the subscribed topics is assigned round robin over the members in join order); a known member
  must send its epoch (else FENCED_MEMBER_EPOCH); an unknown one gets UNKNOWN_MEMBER_ID; -1
  leaves. A session expires ``session_timeout_ms`` after a member's last heartbeat
  (:meth:`FakeShareGroup.tick`).
* **Share sessions** per (member, broker): epoch 0 opens one, each request must carry the next
  epoch (else INVALID_SHARE_SESSION_EPOCH), -1 closes it (ShareAcknowledge) and releases what
  the member still holds. Without a session, a non-zero epoch gets SHARE_SESSION_NOT_FOUND.
* **Records** are acquired per offset with a delivery count; RELEASE makes a record available
  again, ACCEPT and REJECT end it, an acknowledgement of an offset the member does not hold
  gets INVALID_RECORD_STATE for its partition. Leaving or expiring releases the member's
  records. RENEW needs v2.

Messages go through their wire encoding (``fakes.roundtrip``). Nothing reads a clock.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from kaflux.protocol.messages import share_acknowledge as sa
from kaflux.protocol.messages import share_fetch as sf
from kaflux.protocol.messages import share_group_heartbeat as hb
from kaflux.records import BatchBuilder
from kaflux.structs import TopicPartition

from support.fakes import roundtrip

NONE, FENCED, UNKNOWN_MEMBER = 0, 110, 25
SESSION_NOT_FOUND, INVALID_SESSION_EPOCH, INVALID_RECORD_STATE = 122, 123, 121
AVAILABLE, ACQUIRED, ARCHIVED = "available", "acquired", "archived"


@dataclass(slots=True)
class _Record:
    value: bytes
    state: str = AVAILABLE
    owner: str | None = None
    deliveries: int = 0


@dataclass(slots=True)
class _Member:
    member_id: str
    epoch: int
    topics: list[str]
    last_heartbeat_ms: int
    assigned: set[TopicPartition] = field(default_factory=set)


class FakeShareGroup:
    """One share group over one fake cluster of ``brokers`` brokers."""

    def __init__(self, group_id: str = "g", *, brokers: int = 2, session_timeout_ms: int = 45_000) -> None:
        self.group_id = group_id
        self.brokers = brokers
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = 5000
        self.now_ms = 0
        self.group_epoch = 0
        self.members: dict[str, _Member] = {}
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.logs: dict[TopicPartition, list[_Record]] = {}
        #: (member id, node) -> session epoch expected next
        self.sessions: dict[tuple[str, int], int] = {}
        self.max_version = 2
        self.requests: list[Any] = []
        #: batch_optimized acquisitions round up to a multiple of this many records (0: exact)
        self.batch_records = 0

    # -- set-up -----------------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int) -> uuid.UUID:
        topic_id = self.topic_ids[name] = uuid.UUID(int=len(self.topic_ids) + 1)
        for p in range(partitions):
            self.logs[TopicPartition(name, p)] = []
        return topic_id

    def produce(self, tp: TopicPartition, *values: bytes) -> None:
        self.logs[tp].extend(_Record(v) for v in values)

    def leader_for(self, tp: TopicPartition) -> int:
        return tp.partition % self.brokers

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return next((n for n, i in self.topic_ids.items() if i == topic_id), None)

    def tick(self, now_ms: int) -> None:
        """Move the clock; expire members whose session passed."""
        self.now_ms = now_ms
        for member in list(self.members.values()):
            if now_ms - member.last_heartbeat_ms > self.session_timeout_ms:
                self._remove(member.member_id)

    # -- state reads --------------------------------------------------------------------------------

    def state_of(self, tp: TopicPartition, offset: int) -> tuple[str, int]:
        record = self.logs[tp][offset]
        return record.state, record.deliveries

    # -- membership -----------------------------------------------------------------------------------

    def _assign(self) -> None:
        members = list(self.members.values())
        for m in members:
            m.assigned = set()
        if not members:
            return
        # every member gets every partition of its topics (share groups share partitions)
        for m in members:
            m.assigned = {tp for tp in self.logs if tp.topic in m.topics}

    def _remove(self, member_id: str) -> None:
        self.members.pop(member_id, None)
        for key in [k for k in self.sessions if k[0] == member_id]:
            del self.sessions[key]
        self._release_held(member_id)
        self.group_epoch += 1
        self._assign()

    def _release_held(self, member_id: str, node: int | None = None) -> None:
        for tp, log in self.logs.items():
            if node is not None and self.leader_for(tp) != node:
                continue
            for record in log:
                if record.state == ACQUIRED and record.owner == member_id:
                    record.state, record.owner = AVAILABLE, None

    def heartbeat(
        self, request: hb.ShareGroupHeartbeatRequest, version: int = 1
    ) -> hb.ShareGroupHeartbeatResponse:
        request = roundtrip(request, version)
        self.requests.append(request)
        member = self.members.get(request.member_id)
        if request.member_epoch == -1:
            self._remove(request.member_id)
            return self._hb_response(NONE, request.member_id, -1, None)
        if request.member_epoch == 0:
            if member is None:
                member = self.members[request.member_id] = _Member(
                    request.member_id, 0, list(request.subscribed_topic_names or []), self.now_ms
                )
            self.group_epoch += 1
            member.epoch = self.group_epoch
            member.last_heartbeat_ms = self.now_ms
            self._assign()
            return self._hb_response(NONE, member.member_id, member.epoch, member.assigned)
        if member is None:
            return self._hb_response(UNKNOWN_MEMBER, None, 0, None)
        if request.member_epoch != member.epoch:
            return self._hb_response(FENCED, None, 0, None)
        member.last_heartbeat_ms = self.now_ms
        if (
            request.subscribed_topic_names is not None
            and list(request.subscribed_topic_names) != member.topics
        ):
            member.topics = list(request.subscribed_topic_names)
            self.group_epoch += 1
            member.epoch = self.group_epoch
            self._assign()
            return self._hb_response(NONE, None, member.epoch, member.assigned)
        return self._hb_response(NONE, None, member.epoch, None)

    def _hb_response(
        self, error: int, member_id: str | None, epoch: int, assigned: set[TopicPartition] | None
    ) -> hb.ShareGroupHeartbeatResponse:
        assignment = None
        if assigned is not None:
            by_topic: dict[uuid.UUID, list[int]] = {}
            for tp in sorted(assigned, key=lambda t: (t.topic, t.partition)):
                by_topic.setdefault(self.topic_ids[tp.topic], []).append(tp.partition)
            assignment = hb.Assignment(
                topic_partitions=[hb.TopicPartitions(topic_id=t, partitions=p) for t, p in by_topic.items()]
            )
        response = hb.ShareGroupHeartbeatResponse(
            error_code=error,
            member_id=member_id,
            member_epoch=epoch,
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            assignment=assignment,
        )
        return roundtrip(response, 1)

    # -- share sessions ----------------------------------------------------------------------------------

    def _session(self, member_id: str, node: int, epoch: int) -> int:
        """The session check: 0 if it passes (and moves the epoch on), else the error."""
        key = (member_id, node)
        if epoch == 0:
            self._release_held(member_id, node)
            self.sessions[key] = 1
            return NONE
        expected = self.sessions.get(key)
        if expected is None:
            return SESSION_NOT_FOUND
        if epoch == -1:
            del self.sessions[key]
            return NONE
        if epoch != expected:
            return INVALID_SESSION_EPOCH
        self.sessions[key] = expected + 1
        return NONE

    def _acknowledge(self, member_id: str, tp: TopicPartition, batches: list[Any]) -> int:
        log = self.logs[tp]
        for batch in batches:
            for i, offset in enumerate(range(batch.first_offset, batch.last_offset + 1)):
                kind = batch.acknowledge_types[0 if len(batch.acknowledge_types) == 1 else i]
                if kind == 0:
                    continue
                record = log[offset] if offset < len(log) else None
                if record is None or record.state != ACQUIRED or record.owner != member_id:
                    return INVALID_RECORD_STATE
                if kind == 1 or kind == 3:
                    record.state, record.owner = ARCHIVED, None
                elif kind == 2:
                    record.state, record.owner = AVAILABLE, None
        return NONE

    def share_fetch(
        self, node: int, request: sf.ShareFetchRequest, version: int = 1
    ) -> sf.ShareFetchResponse:
        request = roundtrip(request, version)
        self.requests.append(request)
        error = self._session(request.member_id, node, request.share_session_epoch)  # type: ignore[arg-type]
        if error:
            return roundtrip(sf.ShareFetchResponse(error_code=error), version)
        responses: list[sf.ShareFetchableTopicResponse] = []
        #: MaxRecords bounds the whole request, as in Kafka (batch_optimized: see batch_records)
        left = [request.max_records]
        for topic in request.topics:
            name = self.topic_name(topic.topic_id)
            assert name is not None
            parts = []
            for part in topic.partitions:
                tp = TopicPartition(name, part.partition_index)
                ack_error = self._acknowledge(request.member_id, tp, part.acknowledgement_batches)  # type: ignore[arg-type]
                records, acquired = self._acquire(request.member_id, tp, left, request.share_acquire_mode)  # type: ignore[arg-type]
                parts.append(
                    sf.PartitionData(
                        partition_index=tp.partition,
                        acknowledge_error_code=ack_error,
                        records=records,
                        acquired_records=acquired,
                    )
                )
            responses.append(sf.ShareFetchableTopicResponse(topic_id=topic.topic_id, partitions=parts))
        return roundtrip(
            sf.ShareFetchResponse(acquisition_lock_timeout_ms=30_000, responses=responses), version
        )

    def _acquire(
        self, member_id: str, tp: TopicPartition, left: list[int], mode: int = 0
    ) -> tuple[memoryview, list[sf.AcquiredRecords]]:
        log = self.logs[tp]
        available = [o for o, r in enumerate(log) if r.state == AVAILABLE]
        take = left[0]
        if self.batch_records and mode == 0 and 0 < take < len(available):
            # batch_optimized: round up to the end of the producer's batch (Kafka's soft limit)
            take = min(len(available), -(-take // self.batch_records) * self.batch_records)
        offsets = available[: max(0, take)]
        left[0] = max(0, left[0] - len(offsets))
        if not offsets:
            return memoryview(b""), []
        builder = BatchBuilder(base_offset=offsets[0])
        acquired: list[sf.AcquiredRecords] = []
        for offset in offsets:
            record = log[offset]
            record.state, record.owner = ACQUIRED, member_id
            record.deliveries += 1
            acquired.append(sf.AcquiredRecords(offset, offset, record.deliveries))
        for offset in range(offsets[0], offsets[-1] + 1):
            builder.append(0, None, log[offset].value)
        return memoryview(builder.build()), acquired

    def share_acknowledge(
        self, node: int, request: sa.ShareAcknowledgeRequest, version: int = 1
    ) -> sa.ShareAcknowledgeResponse:
        request = roundtrip(request, version)
        self.requests.append(request)
        error = self._session(request.member_id, node, request.share_session_epoch)  # type: ignore[arg-type]
        if error:
            return roundtrip(sa.ShareAcknowledgeResponse(error_code=error), version)
        responses = []
        for topic in request.topics:
            name = self.topic_name(topic.topic_id)
            assert name is not None
            parts = [
                sa.PartitionData(
                    partition_index=part.partition_index,
                    error_code=self._acknowledge(
                        request.member_id,  # type: ignore[arg-type]
                        TopicPartition(name, part.partition_index),
                        part.acknowledgement_batches,
                    ),
                )
                for part in topic.partitions
            ]
            responses.append(sa.ShareAcknowledgeTopicResponse(topic_id=topic.topic_id, partitions=parts))
        if request.share_session_epoch == -1:
            self._release_held(request.member_id, node)  # type: ignore[arg-type]
        return roundtrip(sa.ShareAcknowledgeResponse(responses=responses), version)
