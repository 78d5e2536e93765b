"""The share group member's state table and membership, against an in-memory share group
with injected time (no sockets, no clock)."""

from __future__ import annotations

import dataclasses

import pytest

from kaflux.consumer.member_state import (
    SHARE_MEMBER_STATES,
    SHARE_MEMBER_TRANSITIONS,
    SHARE_STATE_NAMES,
    MemberState,
)
from kaflux.consumer.membership.core import MembershipCore
from kaflux.consumer.positions import ResetStrategy
from kaflux.consumer.share.membership import ShareMembershipManager
from kaflux.consumer.subscription_state import SubscriptionState
from kaflux.errors import IllegalStateError, UnknownMemberIdError
from kaflux.network.backoff import RequestState
from kaflux.network.cluster import ClusterMetadata
from kaflux.network.metadata_manager import MetadataManager
from kaflux.protocol.messages import share_group_heartbeat as hb
from kaflux.state_machine import StateMachine
from kaflux.structs import TopicPartition

from support.fake_share_group import FakeShareGroup
from support.fakes import exact_backoff
from support.share_rig import ShareRig, share_membership, share_settings

S = MemberState


def test_the_table_has_a_row_for_every_state_and_fatal_is_final() -> None:
    assert set(SHARE_MEMBER_TRANSITIONS) == set(MemberState)
    assert {
        S.UNJOINED,
        S.JOINING,
        S.STABLE,
        S.LOSING_PARTITIONS,
        S.PREPARE_LEAVING,
        S.LEAVING,
        S.FATAL,
    } == SHARE_MEMBER_STATES
    assert SHARE_MEMBER_TRANSITIONS[S.FATAL] == frozenset()
    assert all(S.FATAL in SHARE_MEMBER_TRANSITIONS[state] for state in SHARE_MEMBER_STATES - {S.FATAL})
    # the states a share member never enters lead nowhere, and nothing leads to them
    for state in set(MemberState) - SHARE_MEMBER_STATES:
        assert SHARE_MEMBER_TRANSITIONS[state] == frozenset()
        assert all(state not in targets for targets in SHARE_MEMBER_TRANSITIONS.values())


def test_the_share_membership_is_a_membership_core_and_reports_java_share_state_names() -> None:
    rig = ShareRig(_group())
    assert isinstance(rig.membership, MembershipCore)
    assert rig.membership.TRANSITIONS is SHARE_MEMBER_TRANSITIONS
    assert rig.membership.group_state().state == "UNSUBSCRIBED"
    assert SHARE_STATE_NAMES == {S.UNJOINED: "UNSUBSCRIBED", S.LOSING_PARTITIONS: "FENCED"}
    rig.join(["jobs"])
    state = rig.membership.group_state()
    assert (state.protocol, state.state, state.generation) == ("share", "STABLE", rig.membership.epoch)


@pytest.mark.parametrize(
    ("path", "illegal"),
    [
        ([], S.STABLE),  # no assignment without joining
        ([], S.LEAVING),  # no leave heartbeat outside the group
        ([S.JOINING, S.STABLE], S.UNJOINED),  # a member in the group leaves through LEAVING
        ([S.JOINING], S.REVOKING_PARTITIONS),  # no rebalance callbacks in a share group
        ([S.JOINING, S.STABLE, S.LOSING_PARTITIONS], S.STABLE),  # a fenced member rejoins first
        ([S.JOINING, S.STABLE, S.PREPARE_LEAVING, S.LEAVING], S.STABLE),
        ([S.FATAL], S.JOINING),
    ],
)
def test_an_illegal_move_raises(path: list[MemberState], illegal: MemberState) -> None:
    machine = StateMachine("share member", S.UNJOINED, SHARE_MEMBER_TRANSITIONS)
    for state in path:
        machine.transition_to(state)
    with pytest.raises(IllegalStateError, match=f"illegal transition .* -> {illegal.name}"):
        machine.transition_to(illegal)


def _group() -> FakeShareGroup:
    group = FakeShareGroup(brokers=2)
    group.create_topic("jobs", 3)
    return group


def test_a_share_membership_commits_nothing_and_refuses_auto_commit_settings() -> None:
    rig = ShareRig(_group())
    assert rig.membership.member_info().generation == -1  # the core's commit identity, unused
    settings = dataclasses.replace(share_settings("g"), auto_commit=True)
    with pytest.raises(IllegalStateError, match="auto-commit needs a commit request manager"):
        ShareMembershipManager(
            settings,
            "m",
            rig.group,
            coordinator=rig.coordinator,
            subscription=SubscriptionState(ResetStrategy.LATEST),
            metadata=MetadataManager(ClusterMetadata([]), RequestState(exact_backoff()), max_age_ms=1000),
            request_metadata=lambda topics: None,
            on_fatal=rig.errors.append,
        )


def test_joining_resolves_the_assignment_by_topic_id() -> None:
    rig = ShareRig(_group())
    assert rig.membership.state is S.UNJOINED
    rig.membership.subscribe(["jobs"])
    assert rig.membership.state is S.JOINING
    sent = rig.pump()
    assert [type(r) for r in sent] == [hb.ShareGroupHeartbeatRequest]
    join = sent[0]
    assert (join.member_epoch, join.member_id, join.subscribed_topic_names) == (0, rig.member_id, ["jobs"])
    assert rig.membership.state is S.STABLE
    assert rig.membership.epoch == rig.group.members[rig.member_id].epoch > 0
    assert rig.membership.assigned_partitions() == {TopicPartition("jobs", p) for p in range(3)}


def test_an_unknown_topic_id_asks_for_metadata_and_resolves_later() -> None:
    group = _group()
    known: dict[object, str] = {}

    class Metadata:
        def topic_name(self, topic_id: object) -> str | None:
            return known.get(topic_id)

    rig = ShareRig(group)
    membership: ShareMembershipManager = share_membership(
        "g", "m", Metadata(), request_metadata=lambda topics: asked.append(topics), on_fatal=rig.errors.append
    )
    asked: list[set[str]] = []
    membership.subscribe(["jobs"])
    topic_id = group.topic_ids["jobs"]
    membership.on_heartbeat_success("m", 1, {topic_id: [0, 1]})
    assert membership.state is S.STABLE and membership.assigned_partitions() == frozenset()
    assert asked == [{"jobs"}]
    known[topic_id] = "jobs"  # the metadata arrived
    membership.refresh()
    assert membership.assigned_partitions() == {TopicPartition("jobs", 0), TopicPartition("jobs", 1)}
    assert membership.topic_id("jobs") == topic_id


def test_a_fenced_member_drops_its_assignment_and_rejoins_at_epoch_zero_with_its_id() -> None:
    rig = ShareRig(_group())
    rig.join(["jobs"])
    rig.group.members[rig.member_id].epoch += 5  # the coordinator moved on without us
    rig.advance(5000)
    rig.pump()  # heartbeat -> FENCED_MEMBER_EPOCH
    assert rig.membership.state is S.JOINING
    assert rig.membership.assigned_partitions() == frozenset()
    assert rig.membership.epoch == 0
    rejoin = rig.pump()[0]
    assert (rejoin.member_epoch, rejoin.member_id) == (0, rig.member_id)
    assert rig.membership.state is S.STABLE and rig.membership.assigned_partitions()


def test_leaving_goes_through_prepare_leaving_and_leaving_to_unsubscribed() -> None:
    rig = ShareRig(_group())
    rig.join(["jobs"])
    assert rig.membership.prepare_leaving() is True
    assert rig.membership.state is S.PREPARE_LEAVING
    assert rig.membership.assigned_partitions() == frozenset()
    rig.membership.leave()
    assert rig.membership.state is S.LEAVING
    leave = rig.pump()[0]
    assert leave.member_epoch == -1
    assert rig.membership.state is S.UNJOINED and rig.member_id not in rig.group.members


def test_leaving_before_any_join_was_sent_needs_no_leave_heartbeat() -> None:
    rig = ShareRig(_group())
    rig.membership.subscribe(["jobs"])
    assert rig.membership.prepare_leaving() is False
    assert rig.membership.state is S.UNJOINED
    assert rig.pump() == []


def test_leaving_after_a_join_was_sent_tells_the_coordinator_even_unanswered() -> None:
    rig = ShareRig(_group())
    rig.membership.subscribe(["jobs"])
    (join,) = rig.heartbeat.poll(0).unsent  # sent; the coordinator may add the member
    rig._answer(join)  # (it did)
    assert rig.member_id in rig.group.members
    rig.membership.fence(UnknownMemberIdError)  # back to JOINING, epoch 0 ...
    rig.heartbeat.poll(0)  # ... and a new join goes out, not answered yet
    assert rig.membership.prepare_leaving() is True
    rig.membership.leave()
    (leave,) = rig.pump()
    assert leave.member_epoch == -1 and rig.member_id not in rig.group.members
