"""Transactions v2 (KIP-890) against the fake coordinator playing ``transaction.version=2``: no
AddPartitionsToTxn nor AddOffsetsToTxn, Produce v12, TxnOffsetCommit v5, EndTxn v5 and a new
epoch for every transaction; and the v1 protocol when the cluster finalized level 1."""

from __future__ import annotations

from typing import Any

import pytest

from kaflux.consumer.membership.group import GroupMetadata
from kaflux.errors import RecordTooLargeError
from kaflux.producer.transaction_manager import TransactionAbortedError, TransactionManager, TxnState
from kaflux.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from kaflux.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from kaflux.protocol.messages.end_txn import EndTxnRequest
from kaflux.protocol.messages.init_producer_id import InitProducerIdRequest
from kaflux.protocol.messages.produce import ProduceRequest
from kaflux.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from kaflux.records import CONTROL_ABORT, CONTROL_COMMIT, iter_batches
from kaflux.structs import OffsetAndMetadata, TopicPartition

from support.fake_transactions import MESSAGE_TOO_LARGE, ProducerDriver, TxnFakeCluster
from support.fakes import UNKNOWN_TOPIC_OR_PARTITION, Committed

TP = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)
IN = TopicPartition("in", 0)
GROUP = GroupMetadata("billing", generation_id=3, member_id="m-1")
TXN_ID = "tx-2"


def make_fake(transaction_version: int) -> TxnFakeCluster:
    fake = TxnFakeCluster(brokers=2)
    fake.create_topic("t", 2, leaders=[0, 1])
    fake.create_topic("in", 1, leaders=[0])
    fake.coordinators[TXN_ID] = 1
    fake.transaction_version = transaction_version
    return fake


def initialized(fake: TxnFakeCluster) -> tuple[ProducerDriver, TransactionManager]:
    driver = ProducerDriver(fake, transactional_id=TXN_ID, topics=("t", "in"))
    tm = driver.tm
    assert tm is not None
    future = tm.initialize_transactions()
    driver.run_until(future.done)
    future.result(0)
    return driver, tm


def versions(driver: ProducerDriver, api: type[Any]) -> set[int]:
    return {e.version for e in driver.net.exchanges if e.api is api}


def markers(fake: TxnFakeCluster, tp: TopicPartition) -> list[int]:
    out = []
    for stored in fake.partition(tp).batches:
        batch = next(iter_batches(memoryview(stored.data)))
        if batch.is_control:
            out.append(batch.control_type())
    return out


def test_a_v2_transaction_sends_no_add_requests_and_bumps_the_epoch_each_time() -> None:
    fake = make_fake(2)
    driver, tm = initialized(fake)
    epochs = []
    for n in range(3):
        tm.begin_transaction()
        assert tm.transaction_v2
        futures = [driver.send(b"a%d" % n, TP), driver.send(b"b%d" % n, TP1)]
        offsets = tm.send_offsets_to_transaction({IN: OffsetAndMetadata(n + 1, "")}, GROUP)
        commit = tm.begin_commit()
        driver.run_until(commit.done)
        commit.result(0)
        offsets.result(0)
        assert all(f.result(0).offset >= 0 for f in futures)
        epochs.append(tm.producer_epoch)
        assert fake.committed["billing"] == {IN: Committed(n + 1, "", -1)}
    assert epochs == [1, 2, 3], "EndTxn v5 answers the next transaction's epoch"
    assert driver.sent(AddPartitionsToTxnRequest) == []
    assert driver.sent(AddOffsetsToTxnRequest) == []
    assert versions(driver, ProduceRequest) == {12}
    assert versions(driver, TxnOffsetCommitRequest) == {5}
    assert versions(driver, EndTxnRequest) == {5}
    assert len(driver.sent(InitProducerIdRequest)) == 1, "no InitProducerId between transactions"
    assert markers(fake, TP) == [CONTROL_COMMIT] * 3
    # each transaction's batches start their sequences again under the new epoch
    assert [(w.epoch, w.first_sequence) for w in fake.written if w.tp == TP] == [(0, 0), (1, 0), (2, 0)]


def test_an_abort_after_an_error_needs_no_init_producer_id_in_v2() -> None:
    fake = make_fake(2)
    driver, tm = initialized(fake)
    tm.begin_transaction()
    fake.inject(ProduceRequest, MESSAGE_TOO_LARGE, tp=TP)
    failed = driver.send(b"big", TP)
    ok = driver.send(b"ok", TP1)
    driver.run_until(failed.done)
    with pytest.raises(RecordTooLargeError):
        failed.result(0)
    driver.run_until(ok.done)
    assert tm.state is TxnState.ABORTABLE_ERROR
    abort = tm.begin_abort()
    driver.run_until(abort.done)
    abort.result(0)
    assert tm.state is TxnState.READY
    assert tm.producer_epoch == 1, "EndTxn(abort) v5 bumped the epoch"
    assert len(driver.sent(InitProducerIdRequest)) == 1
    assert markers(fake, TP1) == [CONTROL_ABORT]
    tm.begin_transaction()
    again = driver.send(b"again", TP)
    commit = tm.begin_commit()
    driver.run_until(commit.done)
    commit.result(0)
    assert again.result(0).offset >= 0


def test_transaction_version_1_keeps_the_v1_protocol() -> None:
    fake = make_fake(1)
    driver, tm = initialized(fake)
    tm.begin_transaction()
    assert not tm.transaction_v2
    sent = driver.send(b"a", TP)
    offsets = tm.send_offsets_to_transaction({IN: OffsetAndMetadata(4, "")}, GROUP)
    commit = tm.begin_commit()
    driver.run_until(commit.done)
    commit.result(0)
    offsets.result(0)
    assert sent.result(0).offset == 0
    assert len(driver.sent(AddPartitionsToTxnRequest)) == 1
    assert len(driver.sent(AddOffsetsToTxnRequest)) == 1
    assert versions(driver, ProduceRequest) == {11}
    assert versions(driver, EndTxnRequest) == {4}
    assert versions(driver, TxnOffsetCommitRequest) == {4}
    assert tm.producer_epoch == 0, "v1 keeps one epoch across transactions"


def test_an_idempotent_producer_uses_produce_v12() -> None:
    fake = make_fake(1)
    driver = ProducerDriver(fake)
    future = driver.send(b"x", TP)
    driver.run_until(future.done)
    assert future.result(0).offset == 0
    assert versions(driver, ProduceRequest) == {12}


@pytest.mark.parametrize("transaction_version", [1, 2])
def test_offsets_of_an_unknown_topic_are_retried_until_an_abort_gives_them_up(
    transaction_version: int, caplog: pytest.LogCaptureFixture
) -> None:
    """Kafka refuses offsets of a topic it does not know (UNKNOWN_TOPIC_OR_PARTITION) until the
    topic exists; the producer retries (as Java) and says so once. Aborting gives them up: the
    retries would otherwise go before the EndTxn(abort) forever (they did: abort and close hung)."""
    fake = make_fake(transaction_version)
    missing = TopicPartition("no-such-topic", 0)
    fake.inject(TxnOffsetCommitRequest, UNKNOWN_TOPIC_OR_PARTITION, tp=missing, count=-1)
    driver, tm = initialized(fake)
    tm.begin_transaction()
    driver.send(b"a", TP)
    offsets = tm.send_offsets_to_transaction({missing: OffsetAndMetadata(5)}, GROUP)
    now = 0
    for _ in range(50):
        driver.run(now)
        now += 100
    assert not offsets.done(), "refused offsets are retried"
    assert len(driver.sent(TxnOffsetCommitRequest)) > 3
    warnings = [r for r in caplog.records if "does not know no-such-topic-0" in r.getMessage()]
    assert len(warnings) == 1
    abort = tm.begin_abort()
    driver.run_until(abort.done, start_ms=now)
    abort.result(0)
    with pytest.raises(TransactionAbortedError):
        offsets.result(0)
    assert tm.state is TxnState.READY
    assert markers(fake, TP) == [CONTROL_ABORT]
    assert "billing" not in fake.committed
