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
    # broker 0 delivered records still in the buffer: no broker is fetched from (what this
    # member acquired and has not handed out, the group's other members cannot have)
    assert _fetches(rig.pump()) == []
    assert rig.take_all() == [(P0, [(0, 0, 1), (1, 1, 1)], 0)]
    second = _fetches(rig.pump())
    assert sorted(r.share_session_epoch for r in second) == [1, 1]
    rig.take_all()
    third = _fetches(rig.pump())
    assert sorted(r.share_session_epoch for r in third) == [2, 2]


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


def test_the_ranges_of_successive_polls_ride_on_the_fetch_as_one_batch() -> None:
    """Implicit acknowledgement: each poll() adds its own range; the due fetch carries what one
    ShareFetch acquired as one batch, which the broker takes whole (issue 30)."""
    rig = _joined()
    rig.group.produce(P0, b"a", b"b", b"c", b"d")
    rig.pump()
    rig.take_all()
    for first, last in ((0, 1), (2, 3)):  # two polls' ranges
        acks = Acknowledgements()
        acks.add_range(first, last, AcknowledgeType.ACCEPT)
        rig.consume.acknowledge({0: {P0: acks}})
    (to_broker_0,) = [r for r in _fetches(rig.pump()) if r.topics[0].partitions[0].partition_index == 0]
    batches = to_broker_0.topics[0].partitions[0].acknowledgement_batches
    assert [(b.first_offset, b.last_offset, b.acknowledge_types) for b in batches] == [(0, 3, [1])]
    assert [rig.group.state_of(P0, o) for o in (0, 3)] == [(ARCHIVED, 1), (ARCHIVED, 1)]


# -- a member acquires no more than one poll() can hand out ------------------------------------------


def _rig(max_poll_records: int, *, brokers: int = 2, acquire_mode: str = "batch_optimized") -> ShareRig:
    group = FakeShareGroup(brokers=brokers)
    group.create_topic("jobs", 2)
    rig = ShareRig(group, max_poll_records=max_poll_records, acquire_mode=acquire_mode)
    rig.join(["jobs"])
    return rig


def _acquired(rig: ShareRig) -> int:
    return sum(r.state == ACQUIRED for log in rig.group.logs.values() for r in log)


def _max_records(unsent: Any) -> int:
    assert isinstance(unsent.request, sf.ShareFetchRequest)
    return unsent.request.max_records


def _values(n: int) -> list[bytes]:
    return [f"v{i}".encode() for i in range(n)]


def test_max_records_is_max_poll_records_split_over_the_brokers_fetched_at_once() -> None:
    one = _rig(7, brokers=1)  # both partitions on broker 0: one fetch asks for all of it
    (fetch,) = _fetches(one.pump())
    assert (fetch.max_records, fetch.batch_size) == (7, 7)
    rig = _rig(7)
    first = _fetches(rig.pump())
    assert sorted(r.max_records for r in first) == [3, 4]  # 7 between them, not 7 each
    assert all(r.batch_size == r.max_records for r in first)
    second = _fetches(rig.pump())  # the remainder goes round
    assert {r.topics[0].partitions[0].partition_index: r.max_records for r in second} != {
        r.topics[0].partitions[0].partition_index: r.max_records for r in first
    }
    assert sum(r.max_records for r in second) == 7


def test_a_backlog_is_acquired_one_poll_at_a_time() -> None:
    rig = _rig(10, brokers=1)
    rig.group.produce(P0, *_values(25))
    rig.pump()
    ((tp, acquired, _),) = rig.take_all(settle=False)  # poll() returned these 10
    assert tp == P0 and len(acquired) == 10
    # returned and not yet acknowledged, then acknowledged: the rest stays available meanwhile
    assert _fetches(rig.pump()) == []
    assert [rig.group.state_of(P0, o)[0] for o in (10, 24)] == [AVAILABLE, AVAILABLE]


def test_no_second_acquisition_while_acquired_records_wait_in_the_buffer() -> None:
    rig = _rig(10)
    rig.group.produce(P0, *_values(5))
    rig.group.produce(P1, *_values(30))
    rig.pump()  # 5 from broker 0, 5 from broker 1: in the buffer, not yet handed out
    assert _acquired(rig) == 10
    for _ in range(3):
        assert _fetches(rig.pump()) == []  # neither broker: not even the one with nothing buffered
    assert rig.group.state_of(P1, 5) == (AVAILABLE, 0)
    rig.take_all()
    assert len(_fetches(rig.pump())) == 2


def test_the_fetches_in_flight_share_max_poll_records() -> None:
    rig = _rig(10)
    rig.group.produce(P1, *_values(30))
    unsent = rig.consume.poll(rig.now_ms).unsent
    assert sorted(_max_records(u) for u in unsent) == [5, 5]
    (to_0,) = [u for u in unsent if u.node_id == 0]
    (to_1,) = [u for u in unsent if u.node_id == 1]
    rig._answer(to_0)  # broker 0 answers at once (empty); broker 1's long poll goes on
    (again,) = rig.consume.poll(rig.now_ms).unsent
    assert again.node_id == 0 and _max_records(again) == 5  # 10 minus the 5 in flight
    rig._answer(to_1)
    rig._answer(again)
    assert _acquired(rig) == 5


def test_record_limit_mode_is_sent_and_the_broker_keeps_to_max_records() -> None:
    for mode, expected in (("batch_optimized", 10), ("record_limit", 3)):
        rig = _rig(3, brokers=1, acquire_mode=mode)
        rig.share_version = 2
        rig.group.batch_records = 10  # batch_optimized rounds up to the end of a 10-record batch
        rig.group.produce(P0, *_values(20))
        (fetch,) = _fetches(rig.pump())
        assert fetch.share_acquire_mode == (1 if mode == "record_limit" else 0)
        ((_, acquired, _),) = rig.take_all()
        assert len(acquired) == expected, mode
        # batch_optimized's surplus is handed out before anything more is acquired
        assert rig.group.state_of(P0, 10) == (AVAILABLE, 0)


def test_a_v1_broker_is_fetched_from_in_batch_optimized_mode_with_the_acknowledgements_kept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rig = _rig(3, brokers=1, acquire_mode="record_limit")
    rig.share_version = 2
    rig.group.produce(P0, *_values(6))
    rig.pump()
    rig.take_all()  # acquired 0-2 in record_limit mode
    rig.consume.acknowledge({0: {P0: _acks(0, 1, 2)}})
    rig.share_version = 1  # the broker was rolled back to one without ShareFetch v2
    refused = _fetches(rig.pump())
    assert [r.share_acquire_mode for r in refused] == [1]  # could not be encoded for v1: not sent
    assert "cannot take share.acquire.mode=record_limit" in caplog.text
    assert rig.acknowledged == []  # the acknowledgements are not failed: they go with the retry
    (retry,) = _fetches(rig.pump())
    assert retry.share_acquire_mode == 0 and retry.share_session_epoch == 1
    batches = retry.topics[0].partitions[0].acknowledgement_batches
    assert [(b.first_offset, b.last_offset) for b in batches] == [(0, 2)]
    assert rig.group.state_of(P0, 0) == (ARCHIVED, 1)
    assert rig.acknowledged == [({P0: {0, 1, 2}}, None)]


def test_a_broker_that_had_nothing_asks_for_one_record_while_another_has_some() -> None:
    rig = _rig(10)
    rig.group.produce(P1, *_values(30))
    first = {r.topics[0].partitions[0].partition_index: r.max_records for r in _fetches(rig.pump())}
    assert first == {0: 5, 1: 5}
    rig.take_all()  # broker 0 acquired nothing, broker 1 five
    second = {r.topics[0].partitions[0].partition_index: r.max_records for r in _fetches(rig.pump())}
    assert second == {0: 1, 1: 9}  # still 10 between them
    rig.take_all()
    rig.group.produce(P0, *_values(3))  # broker 0 has records again: its one comes back...
    third = {r.topics[0].partitions[0].partition_index: r.max_records for r in _fetches(rig.pump())}
    assert third == {0: 1, 1: 9}
    rig.take_all()
    fourth = {r.topics[0].partitions[0].partition_index: r.max_records for r in _fetches(rig.pump())}
    assert sorted(fourth.values()) == [5, 5]  # ...and it shares again
