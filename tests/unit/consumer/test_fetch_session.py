"""FetchSession (KIP-227): full then incremental requests, forgetting, errors, rotation."""

from __future__ import annotations

from kaflux.consumer.fetch_session import FetchSession, PartitionFetchData
from kaflux.structs import TopicPartition

P0, P1, P2 = (TopicPartition("t", p) for p in range(3))
FETCH_SESSION_ID_NOT_FOUND = 70


def data(offset: int, max_bytes: int = 1024) -> PartitionFetchData:
    return PartitionFetchData(offset, max_bytes, current_leader_epoch=-1, position_version=1)


def established(session_id: int = 77) -> FetchSession:
    """A session the broker created from a full request for P0 and P1 at offset 0."""
    session = FetchSession(node_id=1)
    plan = session.plan({P0: data(0), P1: data(0)})
    session.on_response(plan, session_id, 0)
    return session


def test_first_request_is_full_asking_for_a_new_session() -> None:
    plan = FetchSession(1).plan({P0: data(0), P1: data(5)})
    assert (plan.session_id, plan.epoch, plan.full) == (0, 0, True)
    assert plan.to_send == [P0, P1]
    assert plan.to_forget == []


def test_after_the_broker_creates_the_session_requests_are_incremental_from_epoch_1() -> None:
    session = established(77)
    plan = session.plan({P0: data(0), P1: data(0)})
    assert (plan.session_id, plan.epoch, plan.full) == (77, 1, False)


def test_incremental_request_sends_only_changed_partitions() -> None:
    session = established()
    plan = session.plan({P0: data(10), P1: data(0)})
    assert plan.to_send == [P0]
    assert set(plan.partitions) == {P0, P1}


def test_changed_max_bytes_is_sent_again() -> None:
    session = established()
    assert session.plan({P0: data(0, max_bytes=2048), P1: data(0)}).to_send == [P0]


def test_new_partitions_are_sent_and_missing_ones_forgotten() -> None:
    session = established()
    plan = session.plan({P0: data(0), P2: data(3)})
    assert plan.to_send == [P2]
    assert plan.to_forget == [P1]


def test_unchanged_session_sends_an_empty_incremental_request() -> None:
    session = established()
    plan = session.plan({P0: data(0), P1: data(0)})
    assert (plan.to_send, plan.to_forget) == ([], [])


def test_epoch_grows_with_each_incremental_response() -> None:
    session = established()
    epochs = []
    for offset in range(1, 4):
        plan = session.plan({P0: data(offset), P1: data(0)})
        epochs.append(plan.epoch)
        session.on_response(plan, 77, 0)
    assert epochs == [1, 2, 3]


def test_epoch_wraps_to_1_after_the_maximum() -> None:
    session = established()
    session.epoch = 2**31 - 1
    plan = session.plan({P0: data(0), P1: data(0)})
    session.on_response(plan, 77, 0)
    assert session.epoch == 1


def test_incremental_plan_compares_with_what_the_broker_acknowledged() -> None:
    session = established()
    session.plan({P0: data(10), P1: data(0)})  # planned but never answered
    assert session.plan({P0: data(10), P1: data(0)}).to_send == [P0]


def test_session_error_starts_over_with_a_full_request() -> None:
    session = established()
    plan = session.plan({P0: data(1), P1: data(0)})
    session.on_response(plan, 0, FETCH_SESSION_ID_NOT_FOUND)
    retry = session.plan({P0: data(1), P1: data(0)})
    assert (retry.session_id, retry.epoch, retry.full) == (0, 0, True)
    assert set(retry.to_send) == {P0, P1}


def test_reset_after_a_lost_connection_starts_over() -> None:
    session = established()
    session.reset()
    assert session.plan({P0: data(0)}).full


def test_broker_without_sessions_keeps_every_request_full() -> None:
    session = FetchSession(1)
    for _ in range(3):
        plan = session.plan({P0: data(0), P1: data(0)})
        assert (plan.session_id, plan.epoch, plan.full) == (0, 0, True)
        session.on_response(plan, 0, 0)


def test_disabled_sessions_use_the_sessionless_epoch_and_ignore_a_session_id() -> None:
    session = FetchSession(1, enabled=False)
    plan = session.plan({P0: data(0)})
    assert (plan.session_id, plan.epoch) == (0, -1)
    session.on_response(plan, 55, 0)
    assert session.plan({P0: data(0)}).full


def test_full_requests_rotate_the_partition_order() -> None:
    session = FetchSession(1, enabled=False)
    wanted = {P0: data(0), P1: data(0), P2: data(0)}
    orders = [session.plan(wanted).to_send for _ in range(4)]
    assert orders == [[P0, P1, P2], [P1, P2, P0], [P2, P0, P1], [P0, P1, P2]]


def test_every_partition_leads_a_sessionless_request_in_turn() -> None:
    session = FetchSession(1)
    wanted = {P0: data(0), P1: data(0), P2: data(0)}
    firsts = set()
    for _ in range(3):
        plan = session.plan(wanted)
        firsts.add(plan.to_send[0])
        session.on_response(plan, 0, 0)
    assert firsts == {P0, P1, P2}
