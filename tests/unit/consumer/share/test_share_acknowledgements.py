"""The acknowledgement bookkeeping: delivered records, acknowledgements per type, the wire's
batches, gaps and delivery counts."""

from __future__ import annotations

import pytest

from kaflux.consumer.share.acknowledgements import (
    GAP,
    AckBatch,
    AcknowledgementBook,
    Acknowledgements,
    AcknowledgeType,
)
from kaflux.errors import IllegalStateError
from kaflux.structs import TopicPartition

A, R, J, N = AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT, AcknowledgeType.RENEW
TP = TopicPartition("jobs", 0)
TP1 = TopicPartition("jobs", 1)


def test_acknowledge_types_have_the_wire_values() -> None:
    assert [(t.name, int(t)) for t in AcknowledgeType] == [
        ("ACCEPT", 1),
        ("RELEASE", 2),
        ("REJECT", 3),
        ("RENEW", 4),
    ]
    assert GAP == 0


def test_batches_are_runs_of_consecutive_offsets_with_one_type_when_uniform() -> None:
    acks = Acknowledgements()
    for offset in (5, 6, 7):
        acks.add(offset, A)
    for offset, kind in ((10, A), (11, R), (12, J)):
        acks.add(offset, kind)
    acks.add(20, GAP)
    assert acks.batches() == [
        AckBatch(5, 7, (1,)),
        AckBatch(10, 12, (1, 2, 3)),
        AckBatch(20, 20, (0,)),
    ]
    assert acks.offsets() == {5, 6, 7, 10, 11, 12}  # gaps are not the application's
    assert acks.offsets(with_gaps=True) == {5, 6, 7, 10, 11, 12, 20}


def test_implicit_mode_accepts_every_delivered_record_and_acknowledges_gaps() -> None:
    book = AcknowledgementBook(implicit=True)
    book.deliver(TP, node=2, acquired=[(0, 4)], delivered=[0, 1, 3, 4])  # 2 holds no record
    book.deliver(TP1, node=1, acquired=[(7, 7), (9, 12)], delivered=[7, 9, 10, 11, 12])
    assert book.unacknowledged() == 9
    assert book.unsettled_nodes() == {1, 2}
    taken = book.take(implicit=True)
    assert set(taken) == {1, 2}
    assert taken[2][TP].as_dict() == {0: A, 1: A, 2: GAP, 3: A, 4: A}
    # without gaps, whole ranges: no work per record, one batch per range
    assert taken[1][TP1].batches() == [AckBatch(7, 7, (1,)), AckBatch(9, 12, (1,))]
    assert len(taken[1][TP1]) == 5
    assert book.unacknowledged() == 0 and book.take(implicit=True) == {}
    assert book.unsettled_nodes() == set()


def test_an_implicit_book_takes_no_acknowledgements_from_the_application() -> None:
    book = AcknowledgementBook(implicit=True)
    book.deliver(TP, node=0, acquired=[(0, 0)], delivered=[0])
    with pytest.raises(IllegalStateError):
        book.acknowledge(TP, 0, R)


def test_explicit_mode_sends_only_what_was_acknowledged() -> None:
    book = AcknowledgementBook()
    book.deliver(TP, node=0, acquired=[(0, 2)], delivered=[0, 1, 2])
    book.acknowledge(TP, 0, R)
    book.acknowledge(TP, 2, J)
    taken = book.take(implicit=False)
    assert taken[0][TP].types == {0: R, 2: J}
    assert book.unacknowledged() == 1  # offset 1 still waits
    book.acknowledge(TP, 1, A)
    assert book.take(implicit=False)[0][TP].types == {1: A}
    assert book.unacknowledged() == 0


def test_a_later_acknowledgement_of_the_same_record_replaces_the_earlier_before_sending() -> None:
    book = AcknowledgementBook()
    book.deliver(TP, node=0, acquired=[(4, 4)], delivered=[4])
    book.acknowledge(TP, 4, R)
    book.acknowledge(TP, 4, A)
    assert book.take(implicit=False)[0][TP].types == {4: A}


@pytest.mark.parametrize(("tp", "offset"), [(TP, 9), (TP1, 0), (TP, 1)])
def test_acknowledging_a_record_not_waiting_raises(tp: TopicPartition, offset: int) -> None:
    book = AcknowledgementBook()
    book.deliver(TP, node=0, acquired=[(0, 1)], delivered=[0])  # 1 is a gap: not the application's
    with pytest.raises(IllegalStateError, match="not waiting for an acknowledgement"):
        book.acknowledge(tp, offset, A)


def test_a_record_acknowledged_and_sent_cannot_be_acknowledged_again() -> None:
    book = AcknowledgementBook()
    book.deliver(TP, node=0, acquired=[(0, 0)], delivered=[0])
    book.acknowledge(TP, 0, A)
    book.take(implicit=False)
    with pytest.raises(IllegalStateError):
        book.acknowledge(TP, 0, J)


def test_renew_is_sent_and_the_record_still_waits_for_its_final_acknowledgement() -> None:
    book = AcknowledgementBook()
    book.deliver(TP, node=0, acquired=[(0, 0)], delivered=[0])
    book.acknowledge(TP, 0, N)
    taken = book.take(implicit=False)
    assert taken[0][TP].types == {0: N} and taken[0][TP].has_renew()
    assert book.unacknowledged() == 1
    book.acknowledge(TP, 0, A)
    assert book.take(implicit=False)[0][TP].types == {0: A}


def test_release_all_releases_what_waits_and_keeps_what_was_acknowledged() -> None:
    book = AcknowledgementBook()
    book.deliver(TP, node=0, acquired=[(0, 2)], delivered=[0, 1, 2])
    book.acknowledge(TP, 1, A)
    assert book.release_all()[0][TP].types == {0: R, 1: A, 2: R}


def test_a_redelivery_from_another_broker_replaces_the_partition_entry() -> None:
    book = AcknowledgementBook()
    book.deliver(TP, node=0, acquired=[(0, 0)], delivered=[0])
    book.take(implicit=True)
    book.deliver(TP, node=1, acquired=[(0, 0)], delivered=[0])  # the leader moved
    assert set(book.take(implicit=True)) == {1}


def test_ranges_and_single_offsets_merge_into_one_set_of_batches() -> None:
    acks = Acknowledgements()
    acks.add_range(10, 12, A)
    other = Acknowledgements()
    other.add(13, R)
    other.add_range(20, 21, A)
    acks.merge(other)
    assert len(acks) == 6
    assert acks.batches() == [AckBatch(10, 13, (1, 1, 1, 2)), AckBatch(20, 21, (1,))]
    assert acks.offsets() == {10, 11, 12, 13, 20, 21}


def test_adjacent_ranges_of_one_type_go_as_one_batch() -> None:
    """The ranges of successive polls (500 records each) cover what one ShareFetch acquired:
    sent as one batch, the broker takes them as whole acquired batches instead of tracking
    each offset of a batch a poll boundary split (slower ShareFetch answers, issue 30)."""
    acks = Acknowledgements()
    acks.add_range(500, 999, A)
    acks.add_range(0, 499, A)
    acks.add_range(1000, 1152, A)
    acks.add_range(1153, 1153, R)
    acks.add_range(1200, 1210, A)
    assert acks.batches() == [
        AckBatch(0, 1152, (1,)),
        AckBatch(1153, 1153, (2,)),
        AckBatch(1200, 1210, (1,)),
    ]
