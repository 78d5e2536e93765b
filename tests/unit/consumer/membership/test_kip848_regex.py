"""A SubscriptionPattern (KIP-848): the heartbeat carries the regex, the coordinator resolves it
(topics created later included) and the member resolves the assigned topic ids from metadata; a
regex the coordinator refuses is the member's fatal error."""

from __future__ import annotations

from kaflux.consumer.positions import SubscriptionType
from kaflux.errors import InvalidRegularExpressionError
from kaflux.structs import TopicPartition

from support.kip848_membership_rig import HEARTBEAT_MS, M, new_driver


def test_the_regex_goes_to_the_coordinator_and_new_matching_topics_join_the_assignment() -> None:
    driver = new_driver(topics={"orders-eu": 2, "audit": 1})
    a = driver.add_member("a", subscribe=False)
    assert a.subscription.subscribe_re2j("orders-.*")
    assert a.subscription.subscription_type() is SubscriptionType.AUTO_PATTERN_RE2J
    a.manager.on_subscription_change(a.has_listener)
    driver.settle()
    assert a.state is M.STABLE
    assert a.assignment() == {TopicPartition("orders-eu", 0), TopicPartition("orders-eu", 1)}
    join = driver.heartbeats(a)[0]
    assert join.request.subscribed_topic_regex == "orders-.*"
    assert join.request.subscribed_topic_names == []
    later = [h for h in driver.heartbeats(a)[1:] if h.request.subscribed_topic_regex is not None]
    assert later == [], "the regex goes once, not with every heartbeat"
    # a topic created later is assigned by the coordinator; the client matches nothing itself
    driver.coordinator.cluster.create_topic("orders-us", 1)
    driver.run_until(lambda: TopicPartition("orders-us", 0) in a.assignment(), timeout_ms=20 * HEARTBEAT_MS)
    assert TopicPartition("audit", 0) not in a.assignment()


def test_a_regex_the_coordinator_refuses_is_a_clear_fatal_error() -> None:
    driver = new_driver(topics={"t": 1})
    a = driver.add_member("a", subscribe=False)
    a.subscription.subscribe_re2j("orders-(")
    a.manager.on_subscription_change(a.has_listener)
    driver.run_until(lambda: bool(a.fatal))
    assert a.state is M.FATAL
    assert a.fatal and isinstance(a.fatal[0], InvalidRegularExpressionError)
    assert "RE2J" in str(a.fatal[0]) and "orders-(" in str(a.fatal[0])
