"""Idempotence against the fake broker: producer id, sequences, in-flight limits, retries that keep
order, and the handling of OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID, duplicates and
epoch bumps (Java's rules)."""

from __future__ import annotations

import pytest

from kaflux.errors import ClusterAuthorizationFailedError, KafkaTimeoutError
from kaflux.producer.transaction_manager import TxnState
from kaflux.protocol.messages.init_producer_id import InitProducerIdRequest
from kaflux.protocol.messages.produce import ProduceRequest
from kaflux.records import iter_batches
from kaflux.structs import TopicPartition

from support.fake_transactions import (
    DUPLICATE_SEQUENCE_NUMBER,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    ProducerDriver,
    TxnFakeCluster,
)
from support.fakes import BACKOFF_MS, NOT_LEADER_OR_FOLLOWER

TP = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)
CLUSTER_AUTHORIZATION_FAILED = 31


@pytest.fixture
def fake() -> TxnFakeCluster:
    fake = TxnFakeCluster(brokers=1)
    fake.create_topic("t", 2)
    return fake


def produced_batches(driver: ProducerDriver) -> list[tuple[TopicPartition, int, int, int]]:
    """(partition, producer id, epoch, base sequence) of every batch sent, in sending order."""
    out = []
    for request in driver.sent(ProduceRequest):
        for topic in request.topic_data:
            for p in topic.partition_data:
                batch = next(iter_batches(memoryview(bytes(p.records))))
                out.append(
                    (
                        TopicPartition(topic.name, p.index),
                        batch.producer_id,
                        batch.producer_epoch,
                        batch.base_sequence,
                    )
                )
    return out


def test_nothing_is_produced_before_the_producer_id_then_batches_carry_it(fake: TxnFakeCluster) -> None:
    driver = ProducerDriver(fake)
    future = driver.send(b"a")
    sent = driver.poll(0)
    assert [type(e.request).__name__ for e in sent] == ["InitProducerIdRequest"]
    assert sent[0].request.transactional_id is None
    driver.net.deliver_all(received_ms=0)
    driver.run(1)
    assert future.result(0).offset == 0
    assert len(driver.sent(InitProducerIdRequest)) == 1
    assert produced_batches(driver) == [(TP, 1000, 0, 0)]
    assert driver.tm is not None and driver.tm.state is TxnState.READY


def test_sequences_advance_per_partition_by_record_count(fake: TxnFakeCluster) -> None:
    driver = ProducerDriver(fake)
    driver.run(0)  # producer id
    for value in (b"a", b"b", b"c"):
        driver.send(value, TP)
    driver.send(b"x", TP1)
    driver.run(1)
    driver.send(b"d", TP)
    driver.send(b"y", TP1)
    driver.run(2)
    assert sorted(produced_batches(driver)) == [
        (TP, 1000, 0, 0),
        (TP, 1000, 0, 3),
        (TP1, 1000, 0, 0),
        (TP1, 1000, 0, 1),
    ]
    assert fake.values(TP) == [b"a", b"b", b"c", b"d"]


def test_up_to_max_in_flight_batches_of_one_partition_are_in_flight(fake: TxnFakeCluster) -> None:
    driver = ProducerDriver(fake, batch_size=61 + 15, max_in_flight=5)
    driver.run(0)
    driver.send(b"first")
    driver.run(1)  # the partition's first batch of the epoch went alone and was acknowledged
    futures = [driver.send(b"v%02d" % i) for i in range(7)]  # one record per batch
    sent = [e for e in driver.poll(1) if e.api is ProduceRequest]
    assert len(sent) == 5, "five batches of the partition go out before any answer"
    assert driver.poll(2) == [], "a sixth waits for an answer"
    driver.net.deliver_all(received_ms=3)
    driver.run(4, passes=2)
    assert [f.result(0).offset for f in futures] == list(range(1, 8))
    assert [seq for _, _, _, seq in produced_batches(driver)] == list(range(8))


def test_without_idempotence_one_batch_per_partition_is_in_flight(fake: TxnFakeCluster) -> None:
    driver = ProducerDriver(fake, idempotent=False, batch_size=61 + 15)
    for i in range(3):
        driver.send(b"v%02d" % i)
    assert len([e for e in driver.poll(0) if e.api is ProduceRequest]) == 1
    assert produced_batches(driver) == [(TP, -1, -1, -1)]


def test_a_lost_response_is_retried_with_the_same_sequence_and_not_written_twice(
    fake: TxnFakeCluster,
) -> None:
    driver = ProducerDriver(fake)
    driver.run(0)
    fake.drop(ProduceRequest)  # the broker writes the batch; its answer is lost
    future = driver.send(b"once")
    driver.poll(1)
    assert fake.values(TP) == [b"once"]
    driver.net.expire(1 + 30_000)  # request.timeout.ms: the client gives up waiting
    driver.run(1 + 30_000 + BACKOFF_MS)
    assert future.result(0).offset == 0, "the duplicate is answered with the original offset"
    assert fake.values(TP) == [b"once"]
    assert fake.duplicates == [(TP, 0)]
    assert [seq for _, _, _, seq in produced_batches(driver)] == [0, 0]


def test_the_first_batch_of_a_partition_goes_alone_so_a_later_one_cannot_become_the_first(
    fake: TxnFakeCluster,
) -> None:
    """Apache Kafka accepts any first batch from a producer a partition has no state for. If the
    first batch (sequence 0) failed while the next was in flight, the broker would take the next
    as the producer's first, and sequence 0 could never be written (OUT_OF_ORDER until
    delivery.timeout.ms): seen on Kafka 4.4 with a partition not yet led when the topic was new.
    So a partition's first batch in an epoch is sent alone."""
    fake.accept_any_first_sequence = True
    driver = ProducerDriver(fake, batch_size=61 + 15, max_in_flight=5)
    driver.run(0)
    fake.inject(ProduceRequest, NOT_LEADER_OR_FOLLOWER, tp=TP)  # the partition is not led yet
    futures = [driver.send(b"v%02d" % i) for i in range(4)]
    sent = [e for e in driver.poll(1) if e.api is ProduceRequest]
    assert len(sent) == 1, "nothing else goes out while the first batch of the epoch is unanswered"
    now = 2
    while not all(f.done() for f in futures):
        assert now < 10_000
        driver.net.deliver_all(received_ms=now)
        driver.run(now)
        now += BACKOFF_MS
    assert [f.result(0).offset for f in futures] == [0, 1, 2, 3]
    assert fake.values(TP) == [b"v00", b"v01", b"v02", b"v03"]


def test_when_the_first_of_several_in_flight_batches_fails_the_partition_stays_in_order(
    fake: TxnFakeCluster,
) -> None:
    driver = ProducerDriver(fake, batch_size=61 + 15)
    driver.run(0)
    driver.send(b"first")  # the partition's first batch goes alone; once acknowledged ...
    driver.run(1)
    fake.inject(ProduceRequest, NOT_LEADER_OR_FOLLOWER, tp=TP)  # only the next batch
    futures = [driver.send(b"v%02d" % i) for i in range(4)]
    driver.poll(1)  # ... four batches in flight, sequences 1..4
    driver.net.deliver_all(received_ms=1)  # 0: NOT_LEADER; 1..3: OUT_OF_ORDER (0 is missing)
    now = 2
    while not all(f.done() for f in futures):
        assert now < 10_000
        driver.run(now)
        now += BACKOFF_MS
    assert [f.result(0).offset for f in futures] == [1, 2, 3, 4]
    assert fake.values(TP) == [b"first", b"v00", b"v01", b"v02", b"v03"]
    retried = [seq for _, _, _, seq in produced_batches(driver)][5:]
    assert retried == [1, 2, 3, 4], "the retries go out one at a time, lowest sequence first"


def test_a_real_sequence_gap_bumps_the_epoch_and_the_batch_starts_again_at_zero(fake: TxnFakeCluster) -> None:
    driver = ProducerDriver(fake)
    driver.run(0)
    driver.send(b"a")
    driver.run(1)
    # The broker answers the next expected batch with OUT_OF_ORDER: a real gap (lost state).
    fake.inject(ProduceRequest, OUT_OF_ORDER_SEQUENCE_NUMBER, tp=TP)
    future = driver.send(b"b")
    driver.run(2)
    assert not future.done()
    driver.poll(3)  # the next pass bumps the epoch, locally (no request), as Java does
    assert driver.tm is not None and driver.tm.producer_epoch == 1
    assert driver.sent(InitProducerIdRequest)[1:] == []
    driver.run(2 + BACKOFF_MS, passes=2)
    assert future.result(0).offset == 1
    assert produced_batches(driver) == [(TP, 1000, 0, 0), (TP, 1000, 0, 1), (TP, 1000, 1, 0)]


def test_unknown_producer_id_after_retention_bumps_the_epoch_and_retries(fake: TxnFakeCluster) -> None:
    driver = ProducerDriver(fake)
    driver.run(0)
    driver.send(b"a")
    driver.run(1)
    fake.delete_records(TP, 1)  # retention removed the producer's only batch...
    fake.forget_producer(TP, 1000)  # ...and with it the producer's state
    future = driver.send(b"b")
    driver.run(2)  # sequence 1 from an unknown producer: UNKNOWN_PRODUCER_ID
    driver.run(2 + BACKOFF_MS, passes=2)
    assert future.result(0).offset == 1
    assert produced_batches(driver)[-1] == (TP, 1000, 1, 0)


def test_duplicate_sequence_number_completes_the_batch_without_an_offset(fake: TxnFakeCluster) -> None:
    driver = ProducerDriver(fake)
    driver.run(0)
    fake.inject(ProduceRequest, DUPLICATE_SEQUENCE_NUMBER, tp=TP)
    future = driver.send(b"a")
    driver.run(1)
    assert future.result(0).offset == -1


def test_a_batch_expired_after_being_sent_holds_its_partition_then_the_epoch_is_bumped(
    fake: TxnFakeCluster,
) -> None:
    driver = ProducerDriver(fake, delivery_timeout_ms=1_000)
    driver.run(0)
    fake.drop(ProduceRequest)
    fake.inject(ProduceRequest, NOT_LEADER_OR_FOLLOWER, tp=TP)  # not written; answer lost
    first = driver.send(b"lost", now_ms=0)
    driver.poll(1)
    driver.net.expire(1_000)  # the request times out at the delivery deadline
    with pytest.raises(KafkaTimeoutError):
        first.result(0)
    assert driver.tm is not None
    second = driver.send(b"next", now_ms=1_000)
    driver.run(1_001)
    # nothing in flight, and sequence 0 was never acknowledged: unresolved -> epoch bump
    assert driver.tm.producer_epoch == 1
    driver.run(1_002, passes=2)
    assert second.result(0).offset == 0
    assert produced_batches(driver)[-1] == (TP, 1000, 1, 0)


def test_a_fatal_error_fails_queued_batches_and_later_sends(fake: TxnFakeCluster) -> None:
    driver = ProducerDriver(fake)
    fake.inject(InitProducerIdRequest, CLUSTER_AUTHORIZATION_FAILED)
    future = driver.send(b"a")
    driver.run(0)
    driver.run(1)
    assert driver.tm is not None and driver.tm.state is TxnState.FATAL_ERROR
    with pytest.raises(ClusterAuthorizationFailedError):
        future.result(0)
    with pytest.raises(ClusterAuthorizationFailedError):
        driver.tm.fail_if_not_ready_for_send()
    assert driver.sent(ProduceRequest) == []


def test_a_broker_that_lost_every_producer_id_gets_a_new_one(fake: TxnFakeCluster) -> None:
    driver = ProducerDriver(fake)
    driver.run(0)
    driver.send(b"a")
    driver.run(1)
    fake.lose_producer_state()  # it now refuses producer id 1000 whatever the sequence
    future = driver.send(b"b")
    now = 2
    while not future.done():
        assert now < 10_000
        driver.run(now)
        now += BACKOFF_MS
    assert future.result(0).offset == 1
    assert driver.tm is not None and driver.tm.producer_id == 1001
    assert produced_batches(driver)[-1] == (TP, 1001, 0, 0)
    assert fake.values(TP) == [b"a", b"b"]
