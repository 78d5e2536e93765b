"""CoordinatorRequestManager against the fake cluster: lookup, retries and fatal errors."""

from __future__ import annotations

import pytest

from kaflux.consumer.coordinator_request_manager import (
    MAX_FIND_COORDINATOR_VERSION,
    CoordinatorRequestManager,
)
from kaflux.errors import GroupAuthorizationFailedError, KafkaConnectionError, KafkaError
from kaflux.network.backoff import RequestState
from kaflux.network.cluster import coordinator_node_id
from kaflux.protocol.messages.find_coordinator import FindCoordinatorRequest
from kaflux.structs import Node

from support.fakes import (
    BACKOFF_MS,
    COORDINATOR_NOT_AVAILABLE,
    GROUP_AUTHORIZATION_FAILED,
    ClientSide,
    FakeCluster,
    connect,
    exact_backoff,
)


class Lookup:
    def __init__(self, fake: FakeCluster) -> None:
        self.side: ClientSide = connect(fake)
        self.net = self.side.net
        self.fatal: list[KafkaError] = []
        self.manager = CoordinatorRequestManager(
            "billing", RequestState(exact_backoff()), self.side.cluster, self.fatal.append
        )

    def sent(self) -> int:
        return len(self.net.sent(FindCoordinatorRequest))


@pytest.fixture
def fake() -> FakeCluster:
    fake = FakeCluster(brokers=3)
    fake.coordinators["billing"] = 2
    return fake


def test_unknown_coordinator_is_looked_up_on_any_broker(fake: FakeCluster) -> None:
    lookup = Lookup(fake)
    (unsent,) = lookup.manager.poll(0).unsent
    assert unsent.node_id is None
    assert unsent.max_version == MAX_FIND_COORDINATOR_VERSION
    assert isinstance(unsent.request, FindCoordinatorRequest)
    assert (unsent.request.key, unsent.request.key_type) == ("billing", 0)


def test_answer_sets_the_coordinator_and_its_own_node_id(fake: FakeCluster) -> None:
    lookup = Lookup(fake)
    lookup.net.run([lookup.manager], 0)
    assert lookup.manager.coordinator == Node(2, "broker2.fake", 9094)
    assert lookup.manager.coordinator_id == coordinator_node_id(2)
    assert lookup.side.cluster.node(coordinator_node_id(2)) == Node(2, "broker2.fake", 9094)


def test_known_coordinator_needs_no_request(fake: FakeCluster) -> None:
    lookup = Lookup(fake)
    lookup.net.run([lookup.manager], 0)
    assert lookup.manager.poll(1).unsent == []


def test_only_one_lookup_is_in_flight(fake: FakeCluster) -> None:
    lookup = Lookup(fake)
    lookup.net.add_all(lookup.manager.poll(0), 0)
    assert lookup.manager.poll(1).unsent == []


def test_retriable_error_is_retried_after_a_growing_backoff(fake: FakeCluster) -> None:
    fake.inject(FindCoordinatorRequest, COORDINATOR_NOT_AVAILABLE, count=2)
    lookup = Lookup(fake)
    lookup.net.run([lookup.manager], 0)
    assert lookup.manager.poll(BACKOFF_MS - 1).unsent == []
    lookup.net.run([lookup.manager], BACKOFF_MS)
    assert lookup.manager.poll(BACKOFF_MS + 2 * BACKOFF_MS - 1).unsent == []
    lookup.net.run([lookup.manager], 3 * BACKOFF_MS)
    assert lookup.sent() == 3
    assert lookup.manager.coordinator_id == coordinator_node_id(2)
    assert lookup.fatal == []


def test_poll_result_asks_to_be_polled_when_the_backoff_ends(fake: FakeCluster) -> None:
    fake.inject(FindCoordinatorRequest, COORDINATOR_NOT_AVAILABLE)
    lookup = Lookup(fake)
    lookup.net.run([lookup.manager], 0)
    assert lookup.manager.poll(40).time_until_next_poll_ms == BACKOFF_MS - 40


def test_lost_connection_is_retried_after_the_backoff(fake: FakeCluster) -> None:
    lookup = Lookup(fake)
    (exchange,) = lookup.net.add_all(lookup.manager.poll(0), 0)
    lookup.net.fail(exchange, KafkaConnectionError("gone"), received_ms=5)
    assert lookup.manager.poll(5 + BACKOFF_MS - 1).unsent == []
    assert len(lookup.manager.poll(5 + BACKOFF_MS).unsent) == 1


def test_non_retriable_error_is_reported_as_fatal(fake: FakeCluster) -> None:
    fake.inject(FindCoordinatorRequest, GROUP_AUTHORIZATION_FAILED)
    lookup = Lookup(fake)
    lookup.net.run([lookup.manager], 0)
    assert [type(e) for e in lookup.fatal] == [GroupAuthorizationFailedError]
    assert lookup.manager.coordinator is None


def test_a_fatal_error_names_the_group_and_keeps_the_brokers_message(fake: FakeCluster) -> None:
    """Apache Kafka's FindCoordinator v4 answers "Group authorization failed." as its message:
    the error must still say which group (it replaced the group's name before)."""
    fake.inject(FindCoordinatorRequest, GROUP_AUTHORIZATION_FAILED)
    lookup = Lookup(fake)
    lookup.net.run([lookup.manager], 0)
    [error] = lookup.fatal
    assert "group 'billing'" in str(error) and "injected" in str(error)


def test_mark_unknown_starts_a_new_lookup(fake: FakeCluster) -> None:
    lookup = Lookup(fake)
    lookup.net.run([lookup.manager], 0)
    fake.coordinators["billing"] = 0
    lookup.manager.mark_unknown("NOT_COORDINATOR")
    assert lookup.manager.coordinator_id is None
    lookup.net.run([lookup.manager], 1)
    assert lookup.manager.coordinator_id == coordinator_node_id(0)
