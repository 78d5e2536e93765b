"""ShareGroupHeartbeat timing and error handling, against an in-memory share group with
injected time."""

from __future__ import annotations

import pytest

from kaflux.consumer.member_state import MemberState
from kaflux.consumer.membership.heartbeat import (
    COORDINATOR_LOADING,
    COORDINATOR_MOVED,
    LEAVE_SEND_TIMEOUT_MS,
    HeartbeatRequestManagerBase,
)
from kaflux.errors import (
    BrokerError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    GroupAuthorizationFailedError,
    NotCoordinatorError,
)
from kaflux.protocol.messages import share_group_heartbeat as hb

from support.fake_share_group import FakeShareGroup
from support.share_rig import ShareRig

S = MemberState


def _rig(**kwargs: int) -> ShareRig:
    group = FakeShareGroup(**kwargs)  # type: ignore[arg-type]
    group.create_topic("jobs", 2)
    return ShareRig(group)


def _heartbeats(sent: list[object]) -> list[hb.ShareGroupHeartbeatRequest]:
    return [r for r in sent if isinstance(r, hb.ShareGroupHeartbeatRequest)]


def test_heartbeats_follow_the_interval_the_coordinator_sets() -> None:
    rig = _rig()
    rig.group.heartbeat_interval_ms = 3000
    rig.join(["jobs"])
    assert rig.heartbeat.interval_ms == 3000
    rig.advance(2999)
    assert _heartbeats(rig.pump()) == []
    rig.advance(1)
    (beat,) = _heartbeats(rig.pump())
    assert beat.member_epoch == rig.membership.epoch
    assert beat.subscribed_topic_names is None  # unchanged since the join said it
    rig.membership.subscribe(["jobs", "other"])
    rig.advance(3000)
    (beat,) = _heartbeats(rig.pump())
    assert beat.subscribed_topic_names == ["jobs", "other"]


def test_a_member_whose_session_expired_rejoins_with_its_member_id() -> None:
    rig = _rig(session_timeout_ms=45_000)
    rig.join(["jobs"])
    first_epoch = rig.membership.epoch
    rig.advance(50_000)  # no heartbeat for longer than the session: the group dropped us
    assert rig.member_id not in rig.group.members
    rig.pump()  # UNKNOWN_MEMBER_ID -> fenced -> joining
    assert rig.membership.state is S.JOINING
    rig.pump()
    assert rig.membership.state is S.STABLE
    assert rig.group.members[rig.member_id].epoch == rig.membership.epoch > first_epoch


def test_a_lost_connection_backs_off_and_looks_the_coordinator_up_again() -> None:
    rig = _rig()
    rig.membership.subscribe(["jobs"])
    rig.cut.add(hb.ShareGroupHeartbeatRequest)
    rig.pump()
    assert rig.coordinator.marked_unknown and rig.membership.state is S.JOINING
    assert rig.pump() == []  # no coordinator: nothing to send to
    rig.cut.clear()
    rig.coordinator.coordinator_id = 1000
    assert rig.pump() == []  # still backing off (retry.backoff.ms = 100)
    rig.advance(100)
    rig.pump()
    assert rig.membership.state is S.STABLE


def test_a_non_retriable_error_is_fatal_and_reported() -> None:
    rig = _rig()
    rig.membership.subscribe(["jobs"])
    original = rig.group.heartbeat

    def refuse(request: hb.ShareGroupHeartbeatRequest, version: int = 1) -> hb.ShareGroupHeartbeatResponse:
        return hb.ShareGroupHeartbeatResponse(
            error_code=30, error_message="no access"
        )  # GROUP_AUTHORIZATION_FAILED

    rig.group.heartbeat = refuse  # type: ignore[method-assign]
    rig.pump()
    assert rig.membership.state is S.FATAL
    assert len(rig.errors) == 1 and isinstance(rig.errors[0], GroupAuthorizationFailedError)
    assert "no access" in str(rig.errors[0])
    rig.group.heartbeat = original  # type: ignore[method-assign]
    rig.advance(10_000)
    assert rig.pump() == []  # a fatal member sends nothing


def test_an_answer_to_a_heartbeat_sent_before_leaving_is_dropped() -> None:
    rig = _rig()
    rig.membership.subscribe(["jobs"])
    (unsent,) = rig.heartbeat.poll(0).unsent  # the join, in flight
    assert rig.membership.prepare_leaving() is True  # the coordinator may add us: say we leave
    rig.membership.leave()
    rig._answer(unsent)  # the late answer must not put the member back in the group
    assert rig.membership.state is S.LEAVING
    assert rig.membership.assigned_partitions() == frozenset()
    (leave,) = rig.pump()
    assert leave.member_epoch == -1 and rig.membership.state is S.UNJOINED


def test_the_share_heartbeat_is_on_the_shared_base_and_runs_no_poll_timer() -> None:
    """A share member heartbeats however long the application stays away from poll() (a share
    consumer has no max.poll.interval.ms): the base's poll timer never runs for it."""
    rig = _rig(session_timeout_ms=45_000)
    assert isinstance(rig.heartbeat, HeartbeatRequestManagerBase)
    assert frozenset() == rig.heartbeat.POLL_TIMER_STATES
    rig.group.heartbeat_interval_ms = 5000
    rig.join(["jobs"])
    rig.heartbeat.reset_poll_timer(rig.now_ms)  # the last poll() of the application
    for _ in range(80):  # 400 s, longer than any max.poll.interval.ms default
        rig.advance(5000)
        rig.pump()
    assert rig.membership.state is S.STABLE and rig.member_id in rig.group.members
    assert rig.membership.assigned_partitions()
    assert rig.heartbeat.maximum_time_to_wait(rig.now_ms) > 0


@pytest.mark.parametrize(
    ("code", "error", "looks_up_again"),
    [
        (16, NotCoordinatorError, True),
        (15, CoordinatorNotAvailableError, True),
        (14, CoordinatorLoadInProgressError, False),
    ],
)
def test_coordinator_errors_are_sorted_by_the_base_classes(
    code: int, error: type[BrokerError], looks_up_again: bool
) -> None:
    assert issubclass(error, COORDINATOR_MOVED if looks_up_again else COORDINATOR_LOADING)
    rig = _rig()
    rig.membership.subscribe(["jobs"])
    original = rig.group.heartbeat

    def refuse(request: hb.ShareGroupHeartbeatRequest, version: int = 1) -> hb.ShareGroupHeartbeatResponse:
        return hb.ShareGroupHeartbeatResponse(error_code=code)

    rig.group.heartbeat = refuse  # type: ignore[method-assign]
    rig.pump()
    assert rig.membership.state is S.JOINING and rig.errors == []
    assert bool(rig.coordinator.marked_unknown) is looks_up_again
    rig.group.heartbeat = original  # type: ignore[method-assign]
    rig.coordinator.coordinator_id = 1000
    if not looks_up_again:
        assert rig.pump() == []  # backing off (retry.backoff.ms = 100)
        rig.advance(100)
    rig.pump()
    assert rig.membership.state is S.STABLE


def test_the_leave_heartbeat_waits_for_a_connection_no_longer_than_the_base_allows() -> None:
    rig = _rig()
    rig.join(["jobs"])
    assert rig.membership.prepare_leaving() is True
    rig.membership.leave()
    (leave,) = rig.heartbeat.poll(rig.now_ms).unsent
    assert isinstance(leave.request, hb.ShareGroupHeartbeatRequest) and leave.request.member_epoch == -1
    assert leave.deadline_ms == rig.now_ms + LEAVE_SEND_TIMEOUT_MS
