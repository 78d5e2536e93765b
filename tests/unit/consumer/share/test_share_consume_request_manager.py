"""ShareFetch/ShareAcknowledge: share sessions per broker, acknowledgements piggy-backed on a
due fetch or sent alone, commit futures, delivery counts; against an in-memory share group with
injected time."""

from __future__ import annotations

from typing import Any

import pytest

from kaflux.consumer.share.acknowledgements import Acknowledgements, AcknowledgeType
from kaflux.consumer.share.consume_request_manager import ShareCommit
from kaflux.errors import (
    AcknowledgementOutcomeUnknownError,
    InvalidRecordStateError,
    KafkaConnectionError,
    KafkaError,
    UnsupportedVersionError,
)
from kaflux.protocol.messages import share_acknowledge as sa
from kaflux.protocol.messages import share_fetch as sf
from kaflux.structs import TopicPartition

from support.fake_share_group import ACQUIRED, ARCHIVED, AVAILABLE, FakeShareGroup
from support.share_rig import ShareRig

P0, P1 = TopicPartition("jobs", 0), TopicPartition("jobs", 1)  # led by brokers 0 and 1


def _joined() -> ShareRig:
    group = FakeShareGroup(brokers=2)
    group.create_topic("jobs", 2)
    rig = ShareRig(group)
    rig.join(["jobs"])
    return rig


def _fetches(sent: list[object]) -> list[sf.ShareFetchRequest]:
    return [r for r in sent if isinstance(r, sf.ShareFetchRequest)]


def _acks(*offsets: int, kind: int = AcknowledgeType.ACCEPT) -> Acknowledgements:
    acks = Acknowledgements()
    for offset in offsets:
        acks.add(offset, kind)
    return acks


def test_one_session_per_broker_opens_at_epoch_zero_and_counts_up() -> None:
    rig = _joined()
    rig.group.produce(P0, b"a", b"b")
    first = _fetches(rig.pump())
    assert sorted(r.share_session_epoch for r in first) == [0, 0]  # one session per leader
    assert {(t.partitions[0].partition_index) for r in first for t in r.topics} == {0, 1}
    assert rig.group.sessions == {(rig.member_id, 0): 1, (rig.member_id, 1): 1}
    # broker 0 delivered records still in the buffer: only broker 1 is fetched from again
    second = _fetches(rig.pump())
    assert [r.share_session_epoch for r in second] == [1]
    assert [t.partitions[0].partition_index for t in second[0].topics] == [1]
    assert rig.take_all() == [(P0, [(0, 0, 1), (1, 1, 1)], 0)]
    third = _fetches(rig.pump())
    assert sorted(r.share_session_epoch for r in third) == [1, 2]


def test_acknowledgements_ride_on_the_next_due_fetch() -> None:
    rig = _joined()
    rig.group.produce(P0, b"a", b"b", b"c")
    rig.pump()
    rig.take_all()  # the application took them: a fetch to broker 0 is due again
    rig.consume.acknowledge({0: {P0: _acks(0, 1)}})
    sent = rig.pump()
    assert not any(isinstance(r, sa.ShareAcknowledgeRequest) for r in sent)
    (to_broker_0,) = [r for r in _fetches(sent) if r.topics[0].partitions[0].partition_index == 0]
    batches = to_broker_0.topics[0].partitions[0].acknowledgement_batches
    assert [(b.first_offset, b.last_offset, b.acknowledge_types) for b in batches] == [(0, 1, [1])]
    assert rig.group.state_of(P0, 0) == (ARCHIVED, 1)
    assert rig.group.state_of(P0, 2) == (ACQUIRED, 1)
    assert rig.acknowledged == [({P0: {0, 1}}, None)]


def test_acknowledgements_go_alone_when_no_fetch_is_due() -> None:
    rig = _joined()
    rig.group.produce(P0, b"a", b"b")
    rig.pump()
    fetch = rig.buffer.take()  # the application is still reading broker 0's data
    assert fetch is not None
    commit = ShareCommit()
    rig.consume.acknowledge({0: {P0: _acks(0, kind=AcknowledgeType.RELEASE)}}, commit)
    sent = rig.pump()
    (ack,) = [r for r in sent if isinstance(r, sa.ShareAcknowledgeRequest)]
    assert ack.share_session_epoch == 1
    assert not [r for r in _fetches(sent) if r.topics[0].partitions[0].partition_index == 0]
    assert commit.future.result(0) == {P0: None}
    assert rig.group.state_of(P0, 0) == (AVAILABLE, 1)  # released: deliverable again


def test_a_commit_reports_each_partition_and_the_callback_hears_of_it() -> None:
    rig = _joined()
    rig.group.produce(P0, b"a")
    rig.group.produce(P1, b"x")
    rig.pump()
    rig.take_all()
    commit = ShareCommit()
    rig.consume.acknowledge({0: {P0: _acks(0)}, 1: {P1: _acks(5)}}, commit)  # offset 5 was never acquired
    rig.pump()
    results = commit.future.result(0)
    assert results[P0] is None
    assert isinstance(results[P1], InvalidRecordStateError)
    assert ({P0: {0}}, None) in rig.acknowledged
    assert any(
        offsets == {P1: {5}} and isinstance(error, InvalidRecordStateError)
        for offsets, error in rig.acknowledged
    )


def test_a_commit_with_nothing_to_send_completes_at_once() -> None:
    rig = _joined()
    commit = ShareCommit()
    rig.consume.acknowledge({}, commit)
    assert commit.future.result(0) == {}


def test_released_records_come_back_with_their_delivery_count_up() -> None:
    rig = _joined()
    rig.group.produce(P0, b"a")
    for expected in (1, 2, 3):
        rig.pump()
        (taken,) = [t for t in rig.take_all() if t[0] == P0]
        assert taken[1] == [(0, 0, expected)]
        rig.consume.acknowledge({0: {P0: _acks(0, kind=AcknowledgeType.RELEASE)}}, ShareCommit())
        rig.pump()
    rig.consume.acknowledge({0: {P0: _acks(0, kind=AcknowledgeType.REJECT)}})
    rig.pump()
    rig.take_all()  # RELEASE -> the last fetch acquired it again; now rejected for good
    assert rig.group.state_of(P0, 0)[0] in (ACQUIRED, ARCHIVED)


def test_a_lost_connection_fails_its_acknowledgements_and_opens_a_new_session() -> None:
    rig = _joined()
    rig.group.produce(P0, b"a")
    rig.pump()
    rig.take_all()
    commit = ShareCommit()
    rig.consume.acknowledge({0: {P0: _acks(0)}}, commit)
    rig.cut.add(sa.ShareAcknowledgeRequest)
    rig.pump()
    assert isinstance(commit.future.result(0)[P0], KafkaConnectionError)
    rig.cut.clear()
    epochs = {r.topics[0].partitions[0].partition_index: r.share_session_epoch for r in _fetches(rig.pump())}
    assert epochs[0] == 0  # a new session with broker 0


def test_a_session_the_broker_forgot_is_reopened() -> None:
    rig = _joined()
    rig.pump()
    rig.group.sessions.clear()  # the broker restarted, say
    errors_before = list(rig.errors)
    sent = _fetches(rig.pump())
    assert [r.share_session_epoch for r in sent] == [1, 1]  # SHARE_SESSION_NOT_FOUND
    assert _fetches(rig.pump()) and all(r.share_session_epoch == 0 for r in rig.sent[-2:])
    assert rig.errors == errors_before  # recovered without troubling the application


def test_close_acknowledges_and_closes_every_session_which_releases_the_rest() -> None:
    rig = _joined()
    rig.group.produce(P0, b"a", b"b")
    rig.pump()
    rig.take_all()
    rig.consume.acknowledge({0: {P0: _acks(0)}})
    commit = ShareCommit()
    rig.consume.close(commit)
    sent = rig.pump()
    closes = [r for r in sent if isinstance(r, sa.ShareAcknowledgeRequest)]
    assert sorted(r.share_session_epoch for r in closes) == [-1, -1]
    assert not _fetches(sent)
    assert commit.future.result(0) == {P0: None}
    assert rig.group.state_of(P0, 0) == (ARCHIVED, 1)
    assert rig.group.state_of(P0, 1) == (AVAILABLE, 1)  # released at once by the session's close
    assert rig.group.sessions == {}
    assert rig.pump() == []


@pytest.mark.parametrize("version", [1, 2])
def test_renew_needs_share_acknowledge_v2(version: int) -> None:
    rig = _joined()
    rig.share_version = version
    rig.group.produce(P0, b"a")
    rig.pump()
    rig.take_all()
    commit = ShareCommit()
    rig.consume.acknowledge({0: {P0: _acks(0, kind=AcknowledgeType.RENEW)}}, commit)
    sent = rig.pump()
    (ack,) = [r for r in sent if isinstance(r, sa.ShareAcknowledgeRequest)]
    assert ack.is_renew_ack is True
    result = commit.future.result(0)[P0]
    if version == 1:
        assert isinstance(result, UnsupportedVersionError)
        assert "RENEW" in str(result) and "v2" in str(result)
    else:
        assert result is None


def test_no_fetch_goes_to_a_broker_until_the_application_settled_what_it_delivered() -> None:
    rig = _joined()
    rig.group.produce(P0, b"a", b"b")
    rig.pump()
    rig.take_all(settle=False)  # returned by poll(), not yet acknowledged
    assert not [r for r in _fetches(rig.pump()) if r.topics[0].partitions[0].partition_index == 0]
    assert rig.group.state_of(P0, 0) == (ACQUIRED, 1)
    # the next poll(): its acknowledgements and the settled delivery travel in one event
    rig.consume.acknowledge({0: {P0: _acks(0, 1)}}, settled={0: 1})
    (to_broker_0,) = [r for r in _fetches(rig.pump()) if r.topics[0].partitions[0].partition_index == 0]
    assert to_broker_0.topics[0].partitions[0].acknowledgement_batches  # piggy-backed
    assert rig.group.state_of(P0, 1) == (ARCHIVED, 1)


def _silent_on(rig: ShareRig, tp: TopicPartition) -> None:
    """The rig's broker takes every acknowledgement but leaves ``tp`` out of its responses (as
    librdkafka's mock does for a partition the same ShareFetch forgets)."""
    group = rig.group
    fetch, acknowledge = group.share_fetch, group.share_acknowledge

    def drop(responses: list[Any]) -> None:
        for topic in responses:
            topic.partitions = [p for p in topic.partitions if p.partition_index != tp.partition]

    def share_fetch(node: int, request: sf.ShareFetchRequest, version: int = 1) -> sf.ShareFetchResponse:
        response = fetch(node, request, version)
        drop(response.responses)
        return response

    def share_acknowledge(
        node: int, request: sa.ShareAcknowledgeRequest, version: int = 1
    ) -> sa.ShareAcknowledgeResponse:
        response = acknowledge(node, request, version)
        drop(response.responses)
        return response

    group.share_fetch = share_fetch  # type: ignore[method-assign]
    group.share_acknowledge = share_acknowledge  # type: ignore[method-assign]


def test_an_acknowledgement_a_fetch_response_leaves_out_is_not_reported_as_done() -> None:
    rig = _joined()
    rig.group.produce(P0, b"a", b"b")
    rig.pump()
    rig.take_all()
    _silent_on(rig, P0)
    rig.consume.acknowledge({0: {P0: _acks(0, 1)}})
    sent = rig.pump()
    assert not any(isinstance(r, sa.ShareAcknowledgeRequest) for r in sent)  # they rode on a fetch
    assert rig.group.state_of(P0, 0) == (ARCHIVED, 1)  # taken, but the response did not say so
    ((offsets, error),) = rig.acknowledged
    assert offsets == {P0: {0, 1}} and isinstance(error, AcknowledgementOutcomeUnknownError)


def test_an_acknowledgement_a_share_acknowledge_response_leaves_out_is_not_reported_as_done() -> None:
    rig = _joined()
    rig.group.produce(P0, b"a")
    rig.group.produce(P1, b"x")
    rig.pump()
    assert rig.buffer.take() is not None  # the application is still reading: no fetch is due
    _silent_on(rig, P1)
    commit = ShareCommit()
    rig.consume.acknowledge({0: {P0: _acks(0)}, 1: {P1: _acks(0)}}, commit)
    sent = rig.pump()
    assert any(isinstance(r, sa.ShareAcknowledgeRequest) for r in sent)
    results = commit.future.result(0)
    assert results[P0] is None
    assert isinstance(results[P1], AcknowledgementOutcomeUnknownError)


@pytest.mark.parametrize("failure", ["connection", "session"])
def test_close_completes_when_the_fetch_in_flight_then_fails(failure: str) -> None:
    rig = _joined()
    rig.pump()
    rig.take_all()
    in_flight = [
        u for u in rig.consume.poll(rig.now_ms).unsent if isinstance(u.request, sf.ShareFetchRequest)
    ]
    assert in_flight  # a fetch to each broker, not answered yet
    rig.consume.acknowledge({0: {P0: _acks(0)}})  # acknowledged after the fetch left: still pending
    commit = ShareCommit()
    rig.consume.close(commit)
    if failure == "connection":
        rig.cut.add(sf.ShareFetchRequest)
    else:
        rig.group.sessions.clear()  # the broker forgot the sessions (SHARE_SESSION_NOT_FOUND)
    for fetch in in_flight:
        rig._answer(fetch)
    rig.cut.clear()
    rig.pump(3)
    results = commit.future.result(0)  # every broker's session is over: close() need not wait
    assert isinstance(results[P0], KafkaError)  # the session that held them is gone
    assert rig.pump() == []
