"""The share consumer's event processor on the network thread: subscription, acknowledgements
with settled deliveries, leaving, group state, metrics, deadlines and close; against the
in-memory share group with injected time."""

from __future__ import annotations

import pytest

from kaflux.consumer.share.acknowledgements import Acknowledgements, AcknowledgeType
from kaflux.consumer.share.consume_request_manager import ShareCommit
from kaflux.consumer.share.events import (
    ShareAcknowledgeEvent,
    ShareCloseSessionsEvent,
    ShareEventProcessor,
    ShareGroupStateEvent,
    ShareLeaveEvent,
    ShareMetricsEvent,
    ShareSubscribeEvent,
)
from kaflux.errors import KafkaConnectionError, KafkaTimeoutError
from kaflux.protocol.messages import share_acknowledge as sa
from kaflux.structs import TopicPartition

from support.fake_share_group import FakeShareGroup
from support.share_rig import ShareRig

P0 = TopicPartition("jobs", 0)


class FakeMetadata:
    def __init__(self) -> None:
        self.topics: set[str] | None = None

    def set_topics(self, topics: set[str] | None) -> None:
        self.topics = topics


def _setup() -> tuple[ShareRig, ShareEventProcessor, FakeMetadata]:
    group = FakeShareGroup(brokers=2)
    group.create_topic("jobs", 2)
    rig = ShareRig(group)
    metadata = FakeMetadata()
    processor = ShareEventProcessor(
        rig.membership,
        rig.consume,
        rig.heartbeat,
        metadata,  # type: ignore[arg-type]
        rig.metrics,
    )
    return rig, processor, metadata


def test_subscribe_leave_and_group_state() -> None:
    rig, processor, metadata = _setup()
    subscribe = ShareSubscribeEvent(10_000, topics=frozenset({"jobs"}))
    processor.process(subscribe, 0)
    assert subscribe.future.result(0) is None and metadata.topics == {"jobs"}
    rig.pump()
    state = ShareGroupStateEvent(10_000)
    processor.process(state, 0)
    got = state.future.result(0)
    assert (got.protocol, got.state, got.member_id) == ("share", "STABLE", rig.member_id)
    assert got.assignment == {P0, TopicPartition("jobs", 1)}
    leave = ShareLeaveEvent(10_000)
    processor.process(leave, 0)
    assert not leave.future.done()  # the leave heartbeat is due
    (request,) = rig.pump()
    assert request.member_epoch == -1
    processor.expire(0)
    assert leave.future.result(0) is None and metadata.topics == set()


def test_acknowledgements_with_settled_deliveries_reach_the_manager_in_one_event() -> None:
    rig, processor, _ = _setup()
    rig.join(["jobs"])
    rig.group.produce(P0, b"a")
    rig.pump()
    rig.take_all(settle=False)
    acks = Acknowledgements()
    acks.add(0, AcknowledgeType.ACCEPT)
    commit = ShareCommit()
    processor.process(ShareAcknowledgeEvent({0: {P0: acks}}, commit, settled={0: 1}), 0)
    rig.pump()
    assert commit.future.result(0) == {P0: None}


def test_close_sends_the_last_acknowledgements_with_the_sessions_close() -> None:
    rig, processor, _ = _setup()
    rig.join(["jobs"])
    rig.group.produce(P0, b"a")
    rig.pump()
    rig.take_all(settle=False)
    acks = Acknowledgements()
    acks.add(0, AcknowledgeType.REJECT)
    commit = ShareCommit()
    processor.process(ShareCloseSessionsEvent(commit, {0: {P0: acks}}), 0)
    sent = rig.pump()
    closes = [r for r in sent if isinstance(r, sa.ShareAcknowledgeRequest)]
    assert {r.share_session_epoch for r in closes} == {-1}
    assert [
        b.acknowledge_types
        for r in closes
        for t in r.topics
        for p in t.partitions
        for b in p.acknowledgement_batches
    ] == [[3]]
    assert commit.future.result(0) == {P0: None}


def _measure(processor: ShareEventProcessor, now_ms: int) -> dict[str, dict[str, float]]:
    event = ShareMetricsEvent(now_ms + 10_000)
    processor.process(event, now_ms)
    return event.future.result(0)


def test_metrics_count_what_the_managers_did() -> None:
    rig, processor, _ = _setup()
    rig.join(["jobs"])
    rig.group.produce(P0, b"a", b"b")
    rig.pump()
    metrics = _measure(processor, rig.now_ms)
    fetch = metrics["consumer-share-fetch-manager-metrics"]
    assert fetch["records-consumed-total"] == 2
    assert fetch["bytes-consumed-total"] > 0
    assert fetch["fetch-total"] == 2  # one per broker
    assert metrics["consumer-share-coordinator-metrics"]["heartbeat-total"] == 1
    assert metrics["consumer-share-coordinator-metrics"]["assigned-partitions"] == 2


def test_each_total_has_a_per_second_rate_over_the_sample_windows() -> None:
    """Kafka's -rate beside each -total: what was recorded per second of the windows measured
    (2 windows of 30 s here, Java's defaults), with injected time."""
    rig, processor, _ = _setup()
    rig.join(["jobs"])
    rig.group.produce(P0, *[b"r%d" % i for i in range(30)])
    rig.pump()  # the records are fetched now
    rig.advance(10_000)
    metrics = _measure(processor, rig.now_ms)
    fetch = metrics["consumer-share-fetch-manager-metrics"]
    assert fetch["records-consumed-total"] == 30
    # Java's Rate: the 10 s since the first sample, plus the full windows it lacks to span
    # num.samples - 1 of them (one window of 30 s): 30 records / 40 s
    assert fetch["records-consumed-rate"] == pytest.approx(30 / 40.0)
    assert 0 < fetch["fetch-rate"] <= fetch["fetch-total"] / 40.0
    assert metrics["consumer-share-coordinator-metrics"]["heartbeat-rate"] > 0
    assert fetch["fetch-latency-max"] >= fetch["fetch-latency-avg"] >= 0
    assert fetch["acknowledgements-error-total"] == 0 and fetch["acknowledgements-error-rate"] == 0


def test_blocking_events_fail_at_their_deadline_and_at_close() -> None:
    rig, processor, _ = _setup()
    rig.join(["jobs"])
    leave = ShareLeaveEvent(500)
    processor.process(leave, 0)  # no pump: the leave is never answered
    assert processor.next_deadline_ms() == 500
    processor.expire(499)
    assert not leave.future.done()
    processor.expire(500)
    with pytest.raises(KafkaTimeoutError):
        leave.future.result(0)
    pending = ShareLeaveEvent(10_000)
    processor.process(pending, 0)
    processor.fail_all(KafkaConnectionError("the client was closed"))
    with pytest.raises(KafkaConnectionError):
        pending.future.result(0)


def test_an_unknown_event_is_refused() -> None:
    _, processor, _ = _setup()
    with pytest.raises(TypeError, match="unknown share consumer event"):
        processor.process(object(), 0)
