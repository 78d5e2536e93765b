"""SubscriptionState: assignment, positions, pause, resets and lag."""

from __future__ import annotations

import re

import pytest

from kaflux.consumer.subscription_state import (
    FetchPosition,
    FetchState,
    ResetStrategy,
    SubscriptionState,
    SubscriptionType,
)
from kaflux.errors import IllegalStateError
from kaflux.structs import OffsetAndMetadata, TopicPartition

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def assigned(*partitions: TopicPartition, reset: ResetStrategy = ResetStrategy.LATEST) -> SubscriptionState:
    state = SubscriptionState(reset)
    state.assign_from_user(partitions)
    return state


def test_new_partitions_start_initializing_without_a_position() -> None:
    state = assigned(A0)
    assert state.position(A0) is None
    assert [tp for tp, _ in state.partitions_in_state(FetchState.INITIALIZING)] == [A0]
    assert not state.is_fetchable(A0)


def test_assignment_keeps_the_given_order() -> None:
    assert assigned(B0, A1, A0).assigned_partitions() == [B0, A1, A0]


def test_reassigning_keeps_positions_of_partitions_that_stay() -> None:
    state = assigned(A0, A1)
    state.seek(A0, FetchPosition(42))
    removed = state.assign_from_user([A0, B0])
    assert removed == {A1}
    assert state.position(A0) == FetchPosition(42)
    assert state.position(B0) is None


def test_reassigning_the_same_partitions_does_not_bump_the_assignment_version() -> None:
    state = assigned(A0, A1)
    version = state.assignment_version
    state.assign_from_user([A0, A1])
    assert state.assignment_version == version
    state.assign_from_user([A1, A0])
    assert state.assignment_version == version + 1


def test_subscribe_after_assign_raises() -> None:
    state = assigned(A0)
    with pytest.raises(IllegalStateError, match="mutually exclusive"):
        state.subscribe(["a"])


def test_assign_after_subscribe_raises() -> None:
    state = SubscriptionState(ResetStrategy.LATEST)
    state.subscribe(["a"])
    with pytest.raises(IllegalStateError):
        state.assign_from_user([A0])


def test_pattern_after_topics_raises() -> None:
    state = SubscriptionState(ResetStrategy.LATEST)
    state.subscribe(["a"])
    with pytest.raises(IllegalStateError):
        state.subscribe_pattern(re.compile("a.*"))


def test_unsubscribe_allows_switching_modes() -> None:
    state = assigned(A0)
    state.unsubscribe()
    assert state.assigned_partitions() == []
    assert state.subscription_type() is SubscriptionType.NONE
    assert state.subscribe(["a"]) is True
    assert state.subscription_type() is SubscriptionType.AUTO_TOPICS


def test_subscribe_reports_whether_the_topics_changed() -> None:
    state = SubscriptionState(ResetStrategy.LATEST)
    assert state.subscribe(["a", "b"]) is True
    assert state.subscribe(["b", "a"]) is False


def test_group_assignment_needs_a_subscription() -> None:
    state = assigned(A0)
    with pytest.raises(IllegalStateError):
        state.assign_from_subscription([A1])


def test_seek_makes_the_partition_fetchable_and_bumps_the_position_version() -> None:
    state = assigned(A0)
    version = state.position_version(A0)
    state.seek(A0, FetchPosition(10))
    assert state.is_fetchable(A0)
    assert state.position(A0) == FetchPosition(10)
    assert state.position_version(A0) == version + 1


def test_seek_with_a_leader_epoch_awaits_validation_before_fetching() -> None:
    state = assigned(A0)
    changes = state.position_changes
    state.seek(A0, FetchPosition(10, 3))
    assert not state.is_fetchable(A0)
    assert state.positions_awaiting_validation() == {A0: FetchPosition(10, 3)}
    assert state.position_changes == changes + 1


def test_seek_on_an_unassigned_partition_raises() -> None:
    with pytest.raises(IllegalStateError, match="not assigned"):
        assigned(A0).seek(B0, FetchPosition(1))


def test_seek_if_version_ignores_a_stale_result() -> None:
    state = assigned(A0)
    version = state.position_version(A0)
    state.seek(A0, FetchPosition(99))
    assert state.seek_if_version(A0, FetchPosition(5), version) is False
    assert state.position(A0) == FetchPosition(99)


def test_seek_if_version_applies_a_current_result() -> None:
    state = assigned(A0)
    state.request_reset(A0)
    version = state.position_version(A0)
    assert state.seek_if_version(A0, FetchPosition(5), version) is True
    assert state.position(A0) == FetchPosition(5)
    assert state.is_fetchable(A0)


def test_seek_if_version_on_an_unassigned_partition_is_ignored() -> None:
    assert assigned(A0).seek_if_version(B0, FetchPosition(5), 0) is False


def test_request_reset_uses_the_default_strategy_and_clears_the_position() -> None:
    state = assigned(A0, reset=ResetStrategy.EARLIEST)
    state.seek(A0, FetchPosition(10))
    state.request_reset(A0)
    ((tp, partition),) = state.partitions_in_state(FetchState.AWAIT_RESET)
    assert tp == A0
    assert partition.reset_strategy is ResetStrategy.EARLIEST
    assert state.position(A0) is None


def test_request_reset_with_an_explicit_strategy() -> None:
    state = assigned(A0, reset=ResetStrategy.EARLIEST)
    state.request_reset(A0, ResetStrategy.LATEST)
    ((_, partition),) = state.partitions_in_state(FetchState.AWAIT_RESET)
    assert partition.reset_strategy is ResetStrategy.LATEST


def test_reset_strategy_timestamps() -> None:
    assert (ResetStrategy.EARLIEST.timestamp, ResetStrategy.LATEST.timestamp) == (-2, -1)


def test_advance_moves_only_from_the_expected_offset() -> None:
    state = assigned(A0)
    state.seek(A0, FetchPosition(10))
    assert state.advance(A0, FetchPosition(15), expected_offset=10) is True
    assert state.advance(A0, FetchPosition(20), expected_offset=10) is False
    assert state.position(A0) == FetchPosition(15)


def test_pause_stops_fetching_and_resume_restarts_it() -> None:
    state = assigned(A0, A1)
    state.seek(A0, FetchPosition(0))
    state.pause([A0])
    assert state.paused() == {A0}
    assert state.is_paused(A0)
    assert not state.is_fetchable(A0)
    state.resume([A0])
    assert state.paused() == set()
    assert state.is_fetchable(A0)


def test_pause_survives_a_seek() -> None:
    state = assigned(A0)
    state.pause([A0])
    state.seek(A0, FetchPosition(3))
    assert not state.is_fetchable(A0)


def test_pausing_an_unassigned_partition_raises_and_pauses_nothing() -> None:
    state = assigned(A0)
    with pytest.raises(IllegalStateError):
        state.pause([A0, B0])
    assert state.paused() == set()


def test_fetchable_partitions_skip_excluded_and_unpositioned_ones() -> None:
    state = assigned(A0, A1, B0)
    state.seek(A0, FetchPosition(1))
    state.seek(B0, FetchPosition(2))
    fetchable = state.fetchable_partitions(lambda tp: tp == B0)
    assert [(tp, pos.offset) for tp, pos, _ in fetchable] == [(A0, 1)]


def test_all_consumed_lists_positioned_partitions_with_their_epochs() -> None:
    state = assigned(A0, A1, B0)
    state.seek(A0, FetchPosition(3))
    state.advance(A0, FetchPosition(5, 2), expected_offset=3)
    state.seek(B0, FetchPosition(7))
    state.request_reset(B0)
    assert state.all_consumed() == {A0: OffsetAndMetadata(5, "", 2)}


def test_lag_is_the_end_offset_minus_the_position() -> None:
    state = assigned(A0)
    assert state.lag(A0, read_committed=False) is None
    state.seek(A0, FetchPosition(90))
    state.update_fetch_offsets(A0, high_watermark=100, last_stable_offset=95, log_start_offset=0)
    assert state.lag(A0, read_committed=False) == 10
    assert state.lag(A0, read_committed=True) == 5


def test_negative_fetch_offsets_do_not_overwrite_known_ones() -> None:
    state = assigned(A0)
    state.seek(A0, FetchPosition(0))
    state.update_fetch_offsets(A0, 100, 100, 0)
    state.update_fetch_offsets(A0, -1, -1, -1)
    assert state.lag(A0, read_committed=False) == 100


def test_has_all_positions() -> None:
    state = assigned(A0, A1)
    state.seek(A0, FetchPosition(0))
    assert state.has_all_positions([A0])
    assert not state.has_all_positions()
    assert not state.has_all_positions([B0])


def test_partitions_in_state_returns_copies() -> None:
    state = assigned(A0)
    ((_, snapshot),) = state.partitions_in_state(FetchState.INITIALIZING)
    snapshot.paused = True
    assert not state.is_paused(A0)
