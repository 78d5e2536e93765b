"""The transaction manager: its state table, Java's state rules for the API, and whole
transactions (commit, abort, offsets, fencing, coordinator errors, abortable and fatal errors)
against the fake transaction coordinator."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest

from kaflux.consumer.membership.group import GroupMetadata
from kaflux.errors import (
    CommitFailedError,
    IllegalStateError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    KafkaConnectionError,
    ProducerFencedError,
    RecordTooLargeError,
    TransactionAbortableError,
)
from kaflux.producer.transaction_manager import (
    ADD_PARTITIONS_RETRY_BACKOFF_MS,
    TXN_TRANSITIONS,
    TransactionAbortedError,
    TransactionManager,
    TxnState,
)
from kaflux.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from kaflux.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from kaflux.protocol.messages.end_txn import EndTxnRequest
from kaflux.protocol.messages.find_coordinator import FindCoordinatorRequest
from kaflux.protocol.messages.init_producer_id import InitProducerIdRequest
from kaflux.protocol.messages.produce import ProduceRequest
from kaflux.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from kaflux.records import CONTROL_ABORT, CONTROL_COMMIT, iter_batches
from kaflux.state_machine import StateMachine
from kaflux.structs import OffsetAndMetadata, TopicPartition

from support.fake_transactions import (
    CONCURRENT_TRANSACTIONS,
    ILLEGAL_GENERATION,
    MESSAGE_TOO_LARGE,
    ProducerDriver,
    TxnFakeCluster,
)
from support.fakes import BACKOFF_MS, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR, Committed

S = TxnState
TP = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)
IN = TopicPartition("in", 0)
GROUP = GroupMetadata("billing", generation_id=3, member_id="m-1")
TXN_ID = "tx-1"


def java_allows(source: TxnState, target: TxnState) -> bool:
    """Java's TransactionManager.State.isTransitionValid, written out as Java states it."""
    if target is S.UNINITIALIZED:
        return source is S.READY
    if target is S.INITIALIZING:
        return source in (S.UNINITIALIZED, S.ABORTING_TRANSACTION)
    if target is S.READY:
        return source in (S.INITIALIZING, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION)
    if target is S.IN_TRANSACTION:
        return source is S.READY
    if target is S.COMMITTING_TRANSACTION:
        return source is S.IN_TRANSACTION
    if target is S.ABORTING_TRANSACTION:
        return source in (S.IN_TRANSACTION, S.ABORTABLE_ERROR)
    if target is S.ABORTABLE_ERROR:
        return source in (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR)
    return True  # FATAL_ERROR from anywhere


@pytest.mark.parametrize("source", list(TxnState), ids=lambda s: s.name)
@pytest.mark.parametrize("target", list(TxnState), ids=lambda s: s.name)
def test_state_table_is_javas(source: TxnState, target: TxnState) -> None:
    machine = StateMachine("t", source, TXN_TRANSITIONS)
    assert machine.can_transition_to(target) == java_allows(source, target)
    if not java_allows(source, target):
        with pytest.raises(IllegalStateError):
            machine.transition_to(target)


# -- the driver --------------------------------------------------------------------------------


@pytest.fixture
def fake() -> TxnFakeCluster:
    fake = TxnFakeCluster(brokers=2)
    fake.create_topic("t", 2, leaders=[0, 1])
    fake.create_topic("in", 1, leaders=[0])
    fake.coordinators[TXN_ID] = 1
    return fake


def transactional(fake: TxnFakeCluster, txn_id: str = TXN_ID, **kwargs: Any) -> ProducerDriver:
    return ProducerDriver(fake, transactional_id=txn_id, topics=("t", "in"), **kwargs)


def settle(driver: ProducerDriver, future: Future[Any] | None = None, start_ms: int = 0) -> int:
    """Run passes until ``future`` is done (or, without one, a few passes)."""
    if future is None:
        driver.run(start_ms, passes=5)
        return start_ms
    return driver.run_until(future.done, start_ms=start_ms)


def tm_of(driver: ProducerDriver) -> TransactionManager:
    assert driver.tm is not None
    return driver.tm


def initialized(fake: TxnFakeCluster, txn_id: str = TXN_ID, **kwargs: Any) -> ProducerDriver:
    driver = transactional(fake, txn_id, **kwargs)
    future = tm_of(driver).initialize_transactions()
    settle(driver, future)
    future.result(0)
    return driver


def markers(fake: TxnFakeCluster, tp: TopicPartition) -> list[int]:
    out = []
    for stored in fake.partition(tp).batches:
        batch = next(iter_batches(memoryview(stored.data)))
        if batch.is_control:
            out.append(batch.control_type())
    return out


# -- the API's state rules ---------------------------------------------------------------------


def test_calls_before_init_transactions_are_refused(fake: TxnFakeCluster) -> None:
    tm = tm_of(transactional(fake))
    with pytest.raises(InvalidTxnStateError, match="begin_transaction"):
        tm.begin_transaction()
    with pytest.raises(InvalidTxnStateError, match="commit_transaction"):
        tm.begin_commit()
    with pytest.raises(InvalidTxnStateError, match="init_transactions"):
        tm.fail_if_not_ready_for_send()


def test_init_transactions_twice_while_running_returns_the_same_pending_result(fake: TxnFakeCluster) -> None:
    tm = tm_of(transactional(fake))
    first = tm.initialize_transactions()
    assert tm.initialize_transactions() is first


def test_init_transactions_after_it_completed_is_refused(fake: TxnFakeCluster) -> None:
    driver = initialized(fake)
    with pytest.raises(InvalidTxnStateError, match="READY"):
        tm_of(driver).initialize_transactions()


def test_begin_twice_commit_or_offsets_outside_a_transaction_are_refused(fake: TxnFakeCluster) -> None:
    tm = tm_of(initialized(fake))
    with pytest.raises(InvalidTxnStateError):
        tm.begin_commit()
    with pytest.raises(InvalidTxnStateError):
        tm.begin_abort()
    with pytest.raises(InvalidTxnStateError, match="begin_transaction"):
        tm.send_offsets_to_transaction({IN: OffsetAndMetadata(5)}, GROUP)
    with pytest.raises(InvalidTxnStateError, match="open transaction"):
        tm.fail_if_not_ready_for_send()
    tm.begin_transaction()
    with pytest.raises(InvalidTxnStateError):
        tm.begin_transaction()
    tm.fail_if_not_ready_for_send()  # in a transaction: sending is fine


def test_transactional_calls_need_a_transactional_id(fake: TxnFakeCluster) -> None:
    tm = tm_of(ProducerDriver(fake))
    with pytest.raises(InvalidTxnStateError, match=r"transactional\.id"):
        tm.initialize_transactions()


# -- whole transactions ------------------------------------------------------------------------


def test_init_finds_the_transaction_coordinator_and_gets_an_id(fake: TxnFakeCluster) -> None:
    driver = initialized(fake)
    (lookup,) = driver.sent(FindCoordinatorRequest)
    assert (lookup.key, lookup.key_type) == (TXN_ID, 1)
    init = [e for e in driver.net.exchanges if e.api is InitProducerIdRequest]
    assert [e.broker_id for e in init] == [1], "InitProducerId goes to the coordinator"
    assert init[0].request.transaction_timeout_ms == 60_000
    tm = tm_of(driver)
    assert (tm.state, tm.producer_id, tm.producer_epoch) == (S.READY, 1000, 0)


def test_commit_writes_the_records_and_commit_markers(fake: TxnFakeCluster) -> None:
    driver = initialized(fake)
    tm = tm_of(driver)
    tm.begin_transaction()
    futures = [driver.send(b"a", TP), driver.send(b"b", TP1), driver.send(b"c", TP)]
    commit = tm.begin_commit()
    settle(driver, commit)
    commit.result(0)
    assert [f.result(0).offset for f in futures] == [0, 0, 1]
    (added,) = driver.sent(AddPartitionsToTxnRequest)
    assert sorted((t.name, p) for t in added.v3_and_below_topics for p in t.partitions) == [
        ("t", 0),
        ("t", 1),
    ]
    assert markers(fake, TP) == [CONTROL_COMMIT] and markers(fake, TP1) == [CONTROL_COMMIT]
    assert all(w.transactional for w in fake.written)
    assert tm.state is S.READY


def test_abort_writes_abort_markers_and_fails_the_unsent_records(fake: TxnFakeCluster) -> None:
    driver = initialized(fake, linger_ms=60_000)
    tm = tm_of(driver)
    tm.begin_transaction()
    sent = driver.send(b"sent", TP)
    driver.accumulator.begin_flush()
    settle(driver, sent)
    driver.accumulator.end_flush()
    unsent = driver.send(b"unsent", TP1)
    abort = tm.begin_abort()
    settle(driver, abort)
    abort.result(0)
    assert sent.result(0).offset == 0
    with pytest.raises(TransactionAbortedError):
        unsent.result(0)
    assert markers(fake, TP) == [CONTROL_ABORT]
    assert fake.values(TP1) == []
    assert tm.state is S.READY


def test_end_txn_waits_for_the_transactions_batches(fake: TxnFakeCluster) -> None:
    driver = initialized(fake)
    tm = tm_of(driver)
    tm.begin_transaction()
    driver.send(b"a", TP)
    driver.run(0)  # AddPartitionsToTxn done
    assert [e.api for e in driver.poll(1)] == [ProduceRequest]  # its answer is held
    commit = tm.begin_commit()
    driver.poll(2)
    driver.poll(3)
    assert driver.sent(EndTxnRequest) == [], "EndTxn must not overtake the batch"
    driver.net.deliver_all(received_ms=4)
    settle(driver, commit, start_ms=5)
    commit.result(0)
    assert len(driver.sent(EndTxnRequest)) == 1


def test_a_transaction_with_nothing_in_it_commits_without_end_txn(fake: TxnFakeCluster) -> None:
    driver = initialized(fake)
    tm = tm_of(driver)
    tm.begin_transaction()
    commit = tm.begin_commit()
    settle(driver, commit)
    commit.result(0)
    assert driver.sent(EndTxnRequest) == []
    assert tm.state is S.READY


def test_offsets_sent_to_a_committed_transaction_are_committed(fake: TxnFakeCluster) -> None:
    driver = initialized(fake)
    tm = tm_of(driver)
    tm.begin_transaction()
    driver.send(b"out", TP)
    offsets = tm.send_offsets_to_transaction({IN: OffsetAndMetadata(7, "meta")}, GROUP)
    settle(driver, offsets)
    offsets.result(0)
    assert "billing" not in fake.committed, "not visible before the commit"
    (commit_request,) = driver.sent(TxnOffsetCommitRequest)
    assert (commit_request.generation_id, commit_request.member_id) == (3, "m-1")
    assert [e.broker_id for e in driver.net.exchanges if e.api is TxnOffsetCommitRequest] == [0]
    commit = tm.begin_commit()
    settle(driver, commit)
    commit.result(0)
    assert fake.committed["billing"] == {IN: Committed(7, "meta", -1)}
    assert len(driver.sent(AddOffsetsToTxnRequest)) == 1


def test_offsets_sent_to_an_aborted_transaction_do_not_move(fake: TxnFakeCluster) -> None:
    fake.commit("billing", IN, 2)
    driver = initialized(fake)
    tm = tm_of(driver)
    tm.begin_transaction()
    offsets = tm.send_offsets_to_transaction({IN: OffsetAndMetadata(7)}, GROUP)
    settle(driver, offsets)
    abort = tm.begin_abort()
    settle(driver, abort)
    abort.result(0)
    assert fake.committed["billing"] == {IN: Committed(2)}


def test_a_second_producer_with_the_same_id_fences_the_first(fake: TxnFakeCluster) -> None:
    zombie = initialized(fake)
    old = tm_of(zombie)
    old.begin_transaction()
    written = zombie.send(b"zombie-1", TP)
    settle(zombie, written)
    successor = initialized(fake)
    assert tm_of(successor).producer_epoch == 1
    assert markers(fake, TP) == [CONTROL_ABORT], "the successor's init aborted the zombie's transaction"
    late = zombie.send(b"zombie-2", TP)
    commit = old.begin_commit()
    settle(zombie, commit)
    assert isinstance(late.exception(0), InvalidProducerEpochError)
    assert old.state is S.ABORTABLE_ERROR, "an old epoch on Produce is abortable (Java, KIP-588)"
    with pytest.raises(InvalidProducerEpochError):
        commit.result(0)
    abort = old.begin_abort()
    settle(zombie, abort)
    with pytest.raises(ProducerFencedError):
        abort.result(0)
    assert old.state is S.FATAL_ERROR
    with pytest.raises(ProducerFencedError):
        old.fail_if_not_ready_for_send()
    with pytest.raises(ProducerFencedError):
        old.begin_transaction()
    assert fake.values(TP) == [b"zombie-1"], "nothing of the zombie's second transaction was written"


def test_a_fenced_producer_stops_sending(fake: TxnFakeCluster) -> None:
    zombie = initialized(fake, linger_ms=60_000)
    old = tm_of(zombie)
    old.begin_transaction()
    initialized(fake)
    queued = zombie.send(b"queued", TP)
    zombie.run(0, passes=3)  # AddPartitionsToTxn -> PRODUCER_FENCED: fatal
    assert old.state is S.FATAL_ERROR
    with pytest.raises(ProducerFencedError):
        queued.result(0)
    assert zombie.sent(ProduceRequest) == []


def test_the_transaction_coordinator_moved_is_looked_up_again(fake: TxnFakeCluster) -> None:
    driver = initialized(fake)
    tm = tm_of(driver)
    tm.begin_transaction()
    driver.send(b"a", TP)
    fake.inject(EndTxnRequest, NOT_COORDINATOR)
    commit = tm.begin_commit()
    settle(driver, commit)
    commit.result(0)
    assert len(driver.sent(FindCoordinatorRequest)) == 2
    assert len(driver.sent(EndTxnRequest)) == 2


def test_a_coordinator_that_cannot_be_reached_is_looked_up_again_at_once(fake: TxnFakeCluster) -> None:
    """Its broker died: the request to it fails as soon as connecting fails (it asks the
    delegate for that, rather than wait request.timeout.ms), and the retry goes to the
    coordinator FindCoordinator names now."""
    driver = initialized(fake)
    tm = tm_of(driver)
    tm.begin_transaction()
    driver.send(b"a", TP)
    driver.run(0, passes=3)
    fake.stop_broker(1)  # the transaction coordinator dies; broker 0 takes the transaction over
    fake.coordinators[TXN_ID] = 0
    commit = tm.begin_commit()
    took = settle(driver, commit, start_ms=10)
    commit.result(0)
    end_txns = [e for e in driver.net.exchanges if e.api is EndTxnRequest]
    assert [e.broker_id for e in end_txns] == [1, 0]
    assert isinstance(end_txns[0].error, KafkaConnectionError)
    assert all(e.unsent.fail_on_connection_failure for e in end_txns), (
        "the delegate would hold the request up to request.timeout.ms for the dead broker"
    )
    assert len(driver.sent(FindCoordinatorRequest)) == 2
    assert took - 10 < 1_000


@pytest.mark.parametrize("code", [COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS])
def test_init_producer_id_is_retried_after_a_retriable_error(fake: TxnFakeCluster, code: int) -> None:
    fake.inject(InitProducerIdRequest, code)
    driver = transactional(fake)
    init = tm_of(driver).initialize_transactions()
    settle(driver, init)
    init.result(0)
    times = [e.sent_ms for e in driver.net.exchanges if e.api is InitProducerIdRequest]
    assert len(times) == 2
    assert times[1] - times[0] >= BACKOFF_MS


def test_first_add_partitions_refused_as_concurrent_is_retried_quickly(fake: TxnFakeCluster) -> None:
    driver = initialized(fake)
    tm = tm_of(driver)
    tm.begin_transaction()
    fake.inject(AddPartitionsToTxnRequest, CONCURRENT_TRANSACTIONS, tp=TP)
    future = driver.send(b"a", TP)
    settle(driver, future, start_ms=1_000)
    times = [e.sent_ms for e in driver.net.exchanges if e.api is AddPartitionsToTxnRequest]
    assert len(times) == 2
    assert times[1] - times[0] <= ADD_PARTITIONS_RETRY_BACKOFF_MS + 10


def test_a_failed_batch_makes_the_transaction_abortable_only(fake: TxnFakeCluster) -> None:
    driver = initialized(fake)
    tm = tm_of(driver)
    tm.begin_transaction()
    fake.inject(ProduceRequest, MESSAGE_TOO_LARGE, tp=TP)
    failed = driver.send(b"big", TP)
    settle(driver, failed)
    with pytest.raises(RecordTooLargeError):
        failed.result(0)
    assert tm.state is S.ABORTABLE_ERROR
    with pytest.raises(TransactionAbortableError, match="abort_transaction"):
        tm.begin_commit()
    with pytest.raises(TransactionAbortableError):
        tm.fail_if_not_ready_for_send()
    abort = tm.begin_abort()
    settle(driver, abort)
    abort.result(0)
    assert tm.state is S.READY
    # the abortable error asked for an epoch bump: InitProducerId with the current id and epoch
    bump = driver.sent(InitProducerIdRequest)[-1]
    assert (bump.producer_id, bump.producer_epoch) == (1000, 0)
    assert tm.producer_epoch == 1
    tm.begin_transaction()
    again = driver.send(b"small", TP)
    commit = tm.begin_commit()
    settle(driver, commit)
    commit.result(0)
    assert again.result(0).offset >= 0


def test_a_stale_group_generation_makes_the_offsets_abortable(fake: TxnFakeCluster) -> None:
    driver = initialized(fake)
    tm = tm_of(driver)
    tm.begin_transaction()
    fake.inject(TxnOffsetCommitRequest, ILLEGAL_GENERATION, tp=IN)
    offsets = tm.send_offsets_to_transaction({IN: OffsetAndMetadata(7)}, GROUP)
    settle(driver, offsets)
    with pytest.raises(CommitFailedError):
        offsets.result(0)
    assert tm.state is S.ABORTABLE_ERROR


def test_init_producer_id_carries_transaction_timeout_ms(fake: TxnFakeCluster) -> None:
    driver = transactional(fake)
    tm = tm_of(driver)
    tm.transaction_timeout_ms = 15_000
    settle(driver, tm.initialize_transactions())
    assert [r.transaction_timeout_ms for r in driver.sent(InitProducerIdRequest)] == [15_000]
    assert fake.txns[TXN_ID].timeout_ms == 15_000


def test_a_transaction_that_outlives_its_timeout_is_aborted_and_the_producer_fenced(
    fake: TxnFakeCluster,
) -> None:
    driver = initialized(fake)
    tm = tm_of(driver)
    tm.begin_transaction()
    first = driver.send(b"a", TP)
    settle(driver, first)
    fake.time_out(TXN_ID)  # the coordinator gives up on the transaction
    assert markers(fake, TP) == [CONTROL_ABORT]
    late = driver.send(b"b", TP)
    settle(driver, late)
    assert isinstance(late.exception(0), InvalidProducerEpochError)
    assert tm.state is S.ABORTABLE_ERROR
    abort = tm.begin_abort()
    settle(driver, abort)
    with pytest.raises(ProducerFencedError, match=r"transaction\.timeout\.ms"):
        abort.result(0)
    assert tm.state is S.FATAL_ERROR
