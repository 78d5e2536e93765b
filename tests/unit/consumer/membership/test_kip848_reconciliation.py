"""The KIP-848 member reconciles towards the coordinator's target: revoke before assign,
acknowledge in the next heartbeat, topic ids resolved through metadata."""

from __future__ import annotations

from kaflux.protocol.messages.metadata import MetadataRequest

from support.fake_group_coordinator import exclusive_ownership
from support.kip848_membership_rig import (
    ASSIGNED,
    HEARTBEAT_MS,
    LOST,
    REVOKED,
    M,
    all_of,
    moves,
    new_driver,
    owned_in,
    partitions,
    stable_group,
    tps,
)

# -- two members: incremental, cooperative movement ------------------------------------------------------


def test_two_members_get_disjoint_complete_assignments_revoking_before_assigning() -> None:
    driver, (a,) = stable_group("a")
    driver.observers.append(exclusive_ownership)  # not even assigned to two members at once
    b = driver.add_member("b")
    driver.settle()

    assert a.assignment() == tps(0, 1, 2)
    assert b.assignment() == tps(3, 4, 5)  # exclusive_ownership held after every action
    revoked = a.calls_of(REVOKED)
    assert [set(c.partitions) for c in revoked] == [tps(3, 4, 5)]
    got = [c for c in b.calls_of(ASSIGNED) if c.partitions]
    assert [set(c.partitions) for c in got] == [tps(3, 4, 5)]
    # b was offered a's partitions only once a had run on_partitions_revoked and said so
    assert revoked[0].acknowledged_ms is not None
    assert revoked[0].acknowledged_ms < got[0].requested_ms
    ack = next(e for e in driver.heartbeats(a) if e.sent_ms >= revoked[0].acknowledged_ms)
    assert owned_in(ack.request, driver) == tps(0, 1, 2)
    assert ack.sent_ms < got[0].requested_ms
    # a kept 0-2 throughout and revoked nothing else; b's first target was empty
    assert a.calls_of(LOST) == [] and b.calls_of(REVOKED) == []
    assert moves(a)[5:] == [
        (M.STABLE, M.RECONCILING),
        (M.RECONCILING, M.PREPARE_REVOCATION),
        (M.PREPARE_REVOCATION, M.REVOKING_PARTITIONS),
        (M.REVOKING_PARTITIONS, M.PARTITIONS_REVOKED),
        (M.PARTITIONS_REVOKED, M.ASSIGNING_PARTITIONS),
        (M.ASSIGNING_PARTITIONS, M.ACKNOWLEDGING),
        (M.ACKNOWLEDGING, M.STABLE),
    ]
    # the revocation did not bump a's epoch; the acknowledgement moved it to the target epoch
    group = driver.group()
    assert a.manager.generation == b.manager.generation == group.assignment_epoch == 2


def test_partitions_being_revoked_stop_being_fetched_at_once() -> None:
    driver, (a,) = stable_group("a")
    a.auto_ack = False
    driver.add_member("b")
    driver.run_until(lambda: a.state is M.REVOKING_PARTITIONS)
    assert a.fetchable() == tps(0, 1, 2)
    assert a.assignment() == all_of(6)  # still assigned until the callback ran
    a.ack(REVOKED)
    assert a.assignment() == tps(0, 1, 2)


def test_the_acknowledgement_goes_in_the_next_heartbeat_and_the_member_becomes_stable() -> None:
    driver = new_driver(topics={"t": 4})
    a = driver.add_member("a")
    a.auto_ack = False
    driver.run_until(lambda: a.state is M.ASSIGNING_PARTITIONS)
    driver.run(3 * HEARTBEAT_MS)  # heartbeats go on while the callback runs ...
    beats = len(driver.heartbeats(a))
    assert beats >= 3
    assert all(owned_in(e.request, driver) in (None, set()) for e in driver.heartbeats(a))
    call = a.ack(ASSIGNED)
    assert a.state is M.ACKNOWLEDGING
    driver.step()
    # ... and the acknowledgement goes out at once, not at the next interval
    ack = driver.heartbeats(a)[beats]
    assert ack.sent_ms == call.acknowledged_ms
    assert owned_in(ack.request, driver) == all_of(4)
    assert a.state is M.STABLE
    assert len(driver.heartbeats(a)) == beats + 1
    assert ack.error_code == 0 and ack.response.member_epoch == a.manager.generation


def test_a_target_arriving_mid_reconciliation_is_reconciled_after_the_first_is_acknowledged() -> None:
    driver, (a, b, c) = stable_group("a", "b", "c")
    assert (a.assignment(), b.assignment(), c.assignment()) == (tps(0, 1), tps(2, 3), tps(4, 5))
    a.auto_ack = False
    b.leave()  # a gains 2 (range over a, c)
    driver.run_until(lambda: a.state is M.ASSIGNING_PARTITIONS and len(a.pending_callbacks) == 1)
    first = a.pending_callbacks[0]
    assert set(first.partitions) == tps(2)
    version = a.manager._target_version  # type: ignore[attr-defined]
    c.leave()  # ... then everything, while a's first on_partitions_assigned still runs
    driver.run_until(lambda: a.manager._target_version > version, timeout_ms=3 * HEARTBEAT_MS)  # type: ignore[attr-defined]
    assert partitions(driver.heartbeats(a)[-1].response) == list(range(6))
    assert a.state is M.ASSIGNING_PARTITIONS  # the new target waits
    assert len(a.pending_callbacks) == 1
    before = len(a.transitions)
    a.ack(ASSIGNED)
    assert a.state is M.ACKNOWLEDGING
    driver.step()
    ack = driver.heartbeats(a)[-1]
    assert owned_in(ack.request, driver) == tps(0, 1, 2)  # the first target is acknowledged ...
    assert moves(a, before)[:2] == [
        (M.ASSIGNING_PARTITIONS, M.ACKNOWLEDGING),
        (M.ACKNOWLEDGING, M.RECONCILING),
    ]
    a.auto_ack = True
    driver.settle(a)
    # ... then the second is reconciled and acknowledged
    assert [set(e.partitions) for e in a.requested_of(ASSIGNED)][-2:] == [tps(2), tps(3, 4, 5)]
    assert owned_in(driver.heartbeats(a)[-1].request, driver) in (None, all_of(6))
    assert any(owned_in(e.request, driver) == all_of(6) for e in driver.heartbeats(a))
    assert a.assignment() == all_of(6)


def test_a_subscription_change_while_stable_goes_in_the_next_heartbeat_without_rejoining() -> None:
    driver, (a,) = stable_group("a", partitions=2)
    driver.coordinator.cluster.create_topic("u", 2)
    epoch = a.manager.generation
    since = len(driver.heartbeats(a))
    calls = len(a.calls)
    a.subscribe(["t", "u"])
    assert a.state is M.STABLE
    driver.run_until(lambda: len(driver.heartbeats(a)) > since)
    driver.settle()
    beats = driver.heartbeats(a)[since:]
    assert beats[0].request.subscribed_topic_names == ["t", "u"]
    assert beats[0].request.subscribed_topic_regex == ""
    assert beats[0].request.member_epoch == epoch
    assert beats[0].sent_ms - driver.heartbeats(a)[since - 1].sent_ms == HEARTBEAT_MS  # not expedited
    assert all(e.request.member_epoch > 0 for e in beats)  # never rejoined
    assert M.JOINING not in a.states()[5:]
    assert a.assignment() == all_of(2) | all_of(2, "u")
    assert [(c.method, set(c.partitions)) for c in a.calls[calls:]] == [(ASSIGNED, all_of(2, "u"))]
    assert a.manager.generation == epoch + 1
    # later heartbeats no longer carry the names
    assert beats[-1].request.subscribed_topic_names is None


def test_dropping_a_topic_from_the_subscription_revokes_its_partitions() -> None:
    driver = new_driver(topics={"t": 2, "u": 2})
    a = driver.add_member("a", topics=("t", "u"))
    driver.settle()
    since = len(driver.heartbeats(a))
    a.subscribe(["t"])
    driver.run_until(lambda: len(driver.heartbeats(a)) > since)
    driver.settle()
    assert driver.heartbeats(a)[since].request.subscribed_topic_names == ["t"]
    assert a.assignment() == all_of(2)
    assert [set(c.partitions) for c in a.calls_of(REVOKED)] == [all_of(2, "u")]
    assert a.calls_of(LOST) == []


def test_an_unresolved_topic_id_requests_metadata_and_reconciliation_waits() -> None:
    driver, (a,) = stable_group("a", partitions=2)
    since = len(driver.heartbeats(a))
    a.subscribe(["t", "u"])  # "u" does not exist yet
    driver.run_until(lambda: len(driver.heartbeats(a)) > since)
    driver.run(100)
    assert a.state is M.STABLE and a.assignment() == all_of(2)
    requested: list[int] = []
    request_update = a.metadata.request_update
    a.metadata.request_update = lambda: (requested.append(driver.now_ms), request_update())[1]  # type: ignore[method-assign, func-returns-value]
    driver.hold(MetadataRequest, a)  # the member's metadata will not know "u" for a while
    driver.coordinator.cluster.create_topic("u", 3)
    driver.run_until(lambda: a.state is M.RECONCILING, timeout_ms=2 * HEARTBEAT_MS)
    arrived = driver.now_ms
    u_id = driver.coordinator.cluster.topics["u"].topic_id
    assert u_id in {t.topic_id for t in driver.heartbeats(a)[-1].response.assignment.topic_partitions}
    driver.run(2 * HEARTBEAT_MS)
    # the target names "u" by an id the member's metadata does not know: it waits ...
    assert a.state is M.RECONCILING
    assert a.assignment() == all_of(2)
    assert len(a.calls) == 1
    assert a.cluster.topic_name(u_id) is None
    # ... having asked for the metadata again
    assert requested and min(requested) >= arrived
    driver.release(MetadataRequest, a)
    driver.settle()
    assert a.assignment() == all_of(2) | all_of(3, "u")
    assert set(a.calls[-1].partitions) == all_of(3, "u")


def test_a_topic_the_member_cannot_resolve_yet_does_not_hold_up_the_rest_of_its_target() -> None:
    """As Java: the member reconciles the part of its target whose topic ids metadata resolves.
    Here a subscribes to a new topic "u" its metadata does not know yet while b joins: a must
    still give b its share of "t", and take "u" once metadata names it."""
    driver, (a,) = stable_group("a")
    driver.hold(MetadataRequest, a)  # a's metadata stays as it is: no "u"
    driver.coordinator.cluster.create_topic("u", 2)
    a.subscribe(["t", "u"])
    driver.run_until(lambda: a.state is M.RECONCILING, timeout_ms=3 * HEARTBEAT_MS)  # target: all
    b = driver.add_member("b")  # the next target moves half of "t" to b
    driver.run_until(lambda: len(b.assignment()) == 3, timeout_ms=20 * HEARTBEAT_MS)
    assert a.assignment() == all_of(6) - b.assignment()  # revoked its share of "t" meanwhile
    assert a.state is M.RECONCILING  # still waiting for "u"
    driver.release(MetadataRequest, a)
    driver.settle()
    assert a.assignment() == (all_of(6) - b.assignment()) | all_of(2, topic="u")
    assert a.state is M.STABLE
