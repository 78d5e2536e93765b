"""ShareGroupHeartbeat timing and error handling, against an in-memory share group with
injected time."""

from __future__ import annotations

from kaflux.consumer.member_state import MemberState
from kaflux.errors import GroupAuthorizationFailedError
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
