"""FetchRequestManager against the fake cluster: scheduling, sessions, errors and fairness."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from kaflux.consumer.fetch_buffer import FetchBuffer
from kaflux.consumer.fetch_collector import FetchCollector
from kaflux.consumer.fetch_request_manager import MAX_FETCH_VERSION, SHORT_WAIT_MS
from kaflux.consumer.subscription_state import FetchPosition, FetchState, ResetStrategy, SubscriptionState
from kaflux.errors import KafkaConnectionError, KafkaError
from kaflux.protocol.messages.fetch import FetchRequest
from kaflux.protocol.messages.metadata import MetadataRequest
from kaflux.structs import TopicPartition

from support.fakes import (
    BACKOFF_MS,
    FETCH_SESSION_ID_NOT_FOUND,
    NOT_LEADER_OR_FOLLOWER,
    ClientSide,
    Exchange,
    FakeCluster,
    connect,
    fetch_partitions,
    forgotten_partitions,
)

T0, T1, T2 = (TopicPartition("t", p) for p in range(3))


class Fetching:
    """A consumer's fetch path (metadata, fetcher, buffer, collector) over a fake cluster."""

    def __init__(
        self,
        fake: FakeCluster,
        partitions: Iterable[TopicPartition],
        *,
        reset: ResetStrategy = ResetStrategy.EARLIEST,
        buffer_max_bytes: int = 64 << 20,
        sessions: bool = True,
        read_committed: bool = False,
    ) -> None:
        partitions = list(partitions)
        self.fake = fake
        self.side: ClientSide = connect(fake, {tp.topic for tp in partitions})
        self.net = self.side.net
        self.subscription = SubscriptionState(reset)
        self.subscription.assign_from_user(partitions)
        self.buffer = FetchBuffer()
        self.fetcher = self.side.fetcher(
            self.subscription,
            self.buffer,
            buffer_max_bytes=buffer_max_bytes,
            read_committed=read_committed,
            use_sessions=sessions,
        )
        self.errors: list[KafkaError] = []
        self.offsets = self.side.offsets(
            self.subscription, None, self.errors.append, read_committed=read_committed
        )
        self.collector = FetchCollector(self.subscription, self.buffer, max_poll_records=500)

    def seek(self, offset: int, *partitions: TopicPartition) -> None:
        for tp in partitions or self.subscription.assigned_partitions():
            self.subscription.seek(tp, FetchPosition(offset))

    def run(self, now_ms: int) -> list[Exchange]:
        """One network-thread pass (metadata, offsets, fetches) with instant answers."""
        return self.net.run([self.side.metadata, self.offsets, self.fetcher], now_ms)

    def fetches(self, exchanges: list[Exchange]) -> list[Exchange]:
        return [e for e in exchanges if e.api is FetchRequest]

    def consume(self) -> dict[TopicPartition, list[bytes | None]]:
        return {tp: [r.value for r in records] for tp, records in self.collector.collect().items()}


@pytest.fixture
def fake() -> FakeCluster:
    fake = FakeCluster(brokers=2)
    fake.create_topic("t", 3, leaders=[0, 0, 1])
    for tp in (T0, T1, T2):
        fake.produce(tp, [f"{tp.partition}-a".encode(), f"{tp.partition}-b".encode()])
    return fake


def test_fetched_records_are_returned_and_positions_advance(fake: FakeCluster) -> None:
    rig = Fetching(fake, [T0, T1, T2])
    rig.seek(0)
    rig.run(0)
    assert rig.consume() == {T0: [b"0-a", b"0-b"], T1: [b"1-a", b"1-b"], T2: [b"2-a", b"2-b"]}
    assert [rig.subscription.position(tp).offset for tp in (T0, T1, T2)] == [2, 2, 2]  # type: ignore[union-attr]


def test_one_fetch_per_leader_and_at_most_one_in_flight(fake: FakeCluster) -> None:
    rig = Fetching(fake, [T0, T1, T2])
    rig.seek(0)
    first = rig.net.add_all(rig.fetcher.poll(0), 0)
    assert sorted(e.broker_id for e in first) == [0, 1]  # type: ignore[type-var]
    assert sorted(fetch_partitions(first[0].request) + fetch_partitions(first[1].request)) == [T0, T1, T2]
    assert first[0].version == MAX_FETCH_VERSION
    assert rig.fetcher.poll(1).unsent == []


def test_a_node_with_a_fetch_in_flight_gets_no_second_one(fake: FakeCluster) -> None:
    rig = Fetching(fake, [T0, T1, T2], sessions=False)
    rig.seek(0)
    rig.net.add_all(rig.fetcher.poll(0), 0)
    fake.produce(T2, [b"more"])
    (to_node_1,) = [e for e in rig.net.pending() if e.broker_id == 1]
    rig.net.deliver(to_node_1, received_ms=1)
    rig.consume()
    assert [u.node_id for u in rig.fetcher.poll(2).unsent] == [1]


def test_partitions_with_buffered_data_are_not_fetched(fake: FakeCluster) -> None:
    rig = Fetching(fake, [T0, T1], sessions=False)
    rig.seek(0, T0)
    rig.seek(2, T1)  # at the end: nothing to return
    rig.run(0)
    assert rig.buffer.buffered_partitions() == {T0}
    (second,) = rig.fetches(rig.run(1))
    assert fetch_partitions(second.request) == [T1]


def test_a_fetch_of_caught_up_partitions_waits_briefly_while_a_backlog_is_buffered(fake: FakeCluster) -> None:
    """The broker would hold a Fetch of caught-up partitions for fetch.max.wait.ms, and the
    lagging partition's next fetch with it (one fetch per broker): ask for a short wait."""
    rig = Fetching(fake, [T0, T1], sessions=False)
    rig.seek(0, T0)
    rig.seek(2, T1)  # at the end: caught up
    (first,) = rig.fetches(rig.run(0))
    assert first.request.max_wait_ms == rig.fetcher._max_wait_ms
    assert rig.buffer.buffered_partitions() == {T0}  # T0's backlog waits, not yet consumed
    (second,) = rig.fetches(rig.run(1))
    assert fetch_partitions(second.request) == [T1]
    assert second.request.max_wait_ms == SHORT_WAIT_MS
    rig.consume()
    (third,) = rig.fetches(rig.run(2))
    assert third.request.max_wait_ms == rig.fetcher._max_wait_ms, "nothing is behind now"


def test_a_buffered_partition_revoked_since_does_not_stop_fetching(fake: FakeCluster) -> None:
    """The buffer can still hold data of a partition the application thread just unassigned;
    the fetch pass must go on (it once raised IllegalStateError every pass, which stalled the
    network thread and with it a group member's leave on close)."""
    rig = Fetching(fake, [T0, T1], sessions=False)
    rig.seek(0, T0)
    rig.seek(2, T1)
    rig.run(0)
    assert rig.buffer.buffered_partitions() == {T0}
    rig.subscription.assign_from_user([T1])  # T0 revoked; its data still buffered
    (fetch,) = rig.fetches(rig.run(1))
    assert fetch_partitions(fetch.request) == [T1]
    assert fetch.request.max_wait_ms == rig.fetcher._max_wait_ms, "a revoked backlog is no reason to hurry"


def test_partitions_are_fetched_again_once_their_data_was_consumed(fake: FakeCluster) -> None:
    rig = Fetching(fake, [T0], sessions=False)
    rig.seek(0)
    rig.run(0)
    assert rig.fetches(rig.run(1)) == []
    rig.consume()
    fake.produce(T0, [b"c"])
    rig.run(2)
    assert rig.consume() == {T0: [b"c"]}


def test_no_fetch_while_the_buffer_holds_fetch_buffer_max_bytes(fake: FakeCluster) -> None:
    rig = Fetching(fake, [T0, T1, T2], buffer_max_bytes=1, sessions=False)
    rig.seek(0, T0)
    rig.run(0)
    assert rig.buffer.size_bytes() >= 1
    rig.seek(0, T1, T2)
    result = rig.fetcher.poll(1)
    assert result.unsent == []
    rig.consume()
    assert rig.buffer.size_bytes() == 0
    assert rig.fetcher.poll(2).unsent != []


def test_offset_out_of_range_requests_a_reset_by_the_default_strategy(fake: FakeCluster) -> None:
    rig = Fetching(fake, [T0], reset=ResetStrategy.EARLIEST)
    fake.delete_records(T0, 1)
    rig.seek(0)
    rig.net.add_all(rig.fetcher.poll(0), 0)
    rig.net.deliver_all(received_ms=0)
    ((tp, state),) = rig.subscription.partitions_in_state(FetchState.AWAIT_RESET)
    assert (tp, state.reset_strategy) == (T0, ResetStrategy.EARLIEST)
    rig.run(1)  # ListOffsets(earliest) resolves the reset
    rig.run(2)
    assert rig.consume() == {T0: [b"0-b"]}


def test_offset_out_of_range_for_an_old_position_is_ignored(fake: FakeCluster) -> None:
    rig = Fetching(fake, [T0])
    rig.seek(50)
    rig.net.add_all(rig.fetcher.poll(0), 0)
    rig.seek(1)
    rig.net.deliver_all(received_ms=1)
    assert rig.subscription.position(T0) == FetchPosition(1)
    assert rig.subscription.partitions_in_state(FetchState.AWAIT_RESET) == []


def test_offset_out_of_range_without_a_reset_policy_reaches_the_application(fake: FakeCluster) -> None:
    from kaflux.errors import OffsetOutOfRangeError

    rig = Fetching(fake, [T0], reset=ResetStrategy.NONE)
    rig.seek(50)
    rig.run(0)
    with pytest.raises(OffsetOutOfRangeError):
        rig.consume()


def test_not_leader_triggers_a_metadata_update_and_fetching_follows_the_new_leader(fake: FakeCluster) -> None:
    rig = Fetching(fake, [T0], sessions=False)
    rig.seek(0)
    fake.move_leader(T0, 1)
    (first,) = rig.fetches(rig.run(0))
    assert first.broker_id == 0
    assert first.response.responses[0].partitions[0].error_code == NOT_LEADER_OR_FOLLOWER
    (metadata,) = rig.side.metadata.poll(1).unsent
    rig.net.add_all([metadata], 1)
    rig.net.deliver_all(received_ms=1)
    assert rig.side.cluster.leader_for(T0) == 1
    (second,) = rig.fetches(rig.run(2))
    assert second.broker_id == 1
    assert rig.consume() == {T0: [b"0-a", b"0-b"]}


def test_unknown_leader_asks_for_metadata_and_polls_again_soon(fake: FakeCluster) -> None:
    fake.create_topic("late", 1)
    rig = Fetching(fake, [T0])
    rig.subscription.assign_from_user([T0, TopicPartition("late", 0)])
    rig.seek(0)
    result = rig.fetcher.poll(0)
    assert result.time_until_next_poll_ms == 100
    assert [e.api for e in rig.net.add_all(rig.side.metadata.poll(0), 0)] == [MetadataRequest]


def test_a_failed_fetch_backs_off_its_node(fake: FakeCluster) -> None:
    rig = Fetching(fake, [T0], sessions=False)
    rig.seek(0)
    (exchange,) = rig.net.add_all(rig.fetcher.poll(0), 0)
    rig.net.fail(exchange, KafkaConnectionError("lost"), received_ms=10)
    waiting = rig.fetcher.poll(10 + BACKOFF_MS - 1)
    assert waiting.unsent == []
    # the network thread must come back when the backoff ends: nothing else would wake it
    assert waiting.time_until_next_poll_ms == 1
    assert len(rig.fetcher.poll(10 + BACKOFF_MS).unsent) == 1


def test_second_fetch_is_incremental_with_only_the_changed_partitions(fake: FakeCluster) -> None:
    rig = Fetching(fake, [T0, T1])
    rig.seek(0, T0)
    rig.seek(2, T1)
    (first,) = rig.fetches(rig.run(0))
    assert (first.request.session_id, first.request.session_epoch) == (0, 0)
    session_id = first.response.session_id
    assert session_id != 0
    rig.consume()
    (second,) = rig.fetches(rig.run(1))
    assert (second.request.session_id, second.request.session_epoch) == (session_id, 1)
    assert fetch_partitions(second.request) == [T0]
    fake.produce(T1, [b"1-c"])
    rig.run(2)
    assert rig.consume() == {T1: [b"1-c"]}


def test_paused_partition_is_forgotten_by_the_session(fake: FakeCluster) -> None:
    rig = Fetching(fake, [T0, T1])
    rig.seek(2)
    rig.run(0)
    rig.subscription.pause([T1])
    (second,) = rig.fetches(rig.run(1))
    assert fetch_partitions(second.request) == []
    assert forgotten_partitions(second.request) == [T1]


def test_session_error_restarts_with_a_full_fetch(fake: FakeCluster) -> None:
    rig = Fetching(fake, [T0, T1])
    rig.seek(0)
    rig.run(0)
    rig.consume()
    fake.inject(FetchRequest, FETCH_SESSION_ID_NOT_FOUND, node=0)
    (failed,) = rig.fetches(rig.run(1))
    assert failed.response.error_code == FETCH_SESSION_ID_NOT_FOUND
    fake.produce(T0, [b"0-c"])
    (full,) = rig.fetches(rig.run(2))
    assert (full.request.session_id, full.request.session_epoch) == (0, 0)
    assert sorted(fetch_partitions(full.request)) == [T0, T1]
    assert rig.consume() == {T0: [b"0-c"]}


def test_every_partition_progresses_when_the_broker_fills_from_the_first_partition_only() -> None:
    fake = FakeCluster(brokers=1, sessions=False, fill_first_partition_only=True)
    partitions = fake.create_topic("t", 4)
    for tp in partitions:
        fake.produce(tp, [f"{tp.partition}-{i}".encode() for i in range(3)])
    rig = Fetching(fake, partitions)
    rig.seek(0)
    got: dict[TopicPartition, int] = {}
    for now in range(4):
        rig.run(now)
        for tp, values in rig.consume().items():
            got[tp] = got.get(tp, 0) + len(values)
    assert got == {tp: 3 for tp in partitions}


def test_read_committed_fetch_skips_aborted_records() -> None:
    fake = FakeCluster()
    (tp,) = fake.create_topic("t", 1)
    fake.produce(tp, [b"kept"], producer_id=7, transactional=True)
    fake.end_transaction(tp, 7, commit=True)
    fake.produce(tp, [b"aborted"], producer_id=8, transactional=True)
    fake.end_transaction(tp, 8, commit=False)
    fake.produce(tp, [b"plain"])
    rig = Fetching(fake, [tp], read_committed=True)
    rig.seek(0)
    (exchange,) = rig.fetches(rig.run(0))
    assert exchange.request.isolation_level == 1
    assert rig.consume() == {tp: [b"kept", b"plain"]}
    assert rig.subscription.position(tp).offset == fake.partition(tp).high_watermark  # type: ignore[union-attr]


def test_fetching_resumes_after_a_leader_change_before_any_record_was_consumed(fake: FakeCluster) -> None:
    rig = Fetching(fake, [T0], reset=ResetStrategy.LATEST, sessions=False)
    for now in range(3):  # ListOffsets(latest) positions T0 at 2 with the current leader epoch
        rig.run(now)
    assert rig.subscription.position(T0) == FetchPosition(2, None, 0, 0)
    fake.move_leader(T0, 1)
    fake.produce(T0, [b"after-the-move"])
    consumed: list[bytes | None] = []
    for now in range(3, 3 + 20 * BACKOFF_MS, BACKOFF_MS):
        rig.run(now)
        consumed += rig.consume().get(T0, [])
    assert consumed == [b"after-the-move"]


# -- follower fetching (KIP-392) ---------------------------------------------------------------


class RackFetching(Fetching):
    """A consumer in rack-2 whose leader for T0 (node 0) prefers node 1 for it."""

    def __init__(self, fake: FakeCluster, *, max_age_ms: int = 300_000) -> None:
        super().__init__(fake, [T0], sessions=False)
        self.fetcher = self.side.fetcher(
            self.subscription,
            self.buffer,
            client_rack="rack-2",
            use_sessions=False,
            metadata_max_age_ms=max_age_ms,
        )
        fake.read_replicas[T0] = 1
        self.seek(0)

    def fetch_once(self, now_ms: int) -> Exchange:
        (exchange,) = self.fetches(self.run(now_ms))
        return exchange


def test_a_partition_is_fetched_from_the_replica_its_leader_prefers(fake: FakeCluster) -> None:
    rig = RackFetching(fake)
    first = rig.fetch_once(0)
    assert first.broker_id == 0 and first.request.rack_id == "rack-2"
    assert first.response.responses[0].partitions[0].preferred_read_replica == 1
    assert rig.consume() == {}
    second = rig.fetch_once(1)
    assert second.broker_id == 1
    assert rig.consume() == {T0: [b"0-a", b"0-b"]}
    assert rig.fetch_once(2).broker_id == 1  # and stays there


def test_the_preferred_replica_expires_after_metadata_max_age(fake: FakeCluster) -> None:
    rig = RackFetching(fake, max_age_ms=1000)
    rig.fetch_once(0)
    assert rig.fetch_once(999).broker_id == 1
    rig.consume()
    assert rig.fetch_once(1000).broker_id == 0  # the leader again, which names the replica anew
    assert rig.fetch_once(1001).broker_id == 1


def test_a_partition_error_from_the_replica_sends_the_partition_back_to_its_leader(fake: FakeCluster) -> None:
    rig = RackFetching(fake)
    rig.fetch_once(0)
    fake.inject(FetchRequest, NOT_LEADER_OR_FOLLOWER, tp=T0, node=1)
    failed = rig.fetch_once(1)
    assert failed.broker_id == 1
    assert failed.response.responses[0].partitions[0].error_code == NOT_LEADER_OR_FOLLOWER
    assert rig.fetcher.read_replica(T0, 0, 2) == 0
    assert rig.subscription.position(T0).offset == 0  # type: ignore[union-attr]


def test_an_offset_out_of_range_from_the_replica_asks_the_leader_without_a_reset(fake: FakeCluster) -> None:
    rig = RackFetching(fake)
    rig.fetch_once(0)
    fake.inject(FetchRequest, 1, tp=T0, node=1)  # OFFSET_OUT_OF_RANGE: the follower is behind
    rig.fetch_once(1)
    assert rig.fetcher.read_replica(T0, 0, 2) == 0
    assert not rig.subscription.still_awaiting_reset(T0)
    assert rig.subscription.position(T0).offset == 0  # type: ignore[union-attr]
    assert rig.fetch_once(2).broker_id == 0


def test_a_failed_request_to_the_replica_sends_its_partitions_back_to_their_leaders(
    fake: FakeCluster,
) -> None:
    rig = RackFetching(fake)
    rig.fetch_once(0)
    (exchange,) = rig.net.add_all(rig.fetcher.poll(1), 1)
    assert exchange.broker_id == 1
    rig.net.fail(exchange, KafkaConnectionError("lost"), received_ms=2)
    assert rig.fetcher.read_replica(T0, 0, 3) == 0
    (again,) = rig.net.add_all(rig.fetcher.poll(3), 3)
    assert again.broker_id == 0
