"""NetworkClientDelegate over a scripted network client: sending, timeouts, node choice."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from kaflux.errors import AuthenticationError, KafkaConnectionError, KafkaTimeoutError
from kaflux.network.network_client_delegate import NetworkClientDelegate
from kaflux.network.requests import ClientRequest, ClientResponse, UnsentRequest
from kaflux.protocol.messages.metadata import MetadataRequest, MetadataResponse

REQUEST_TIMEOUT_MS = 1_000


@dataclass
class FakeConnection:
    connecting: bool

    def is_connected_or_connecting(self) -> bool:
        return self.connecting


@dataclass
class FakeNodes:
    ids: list[int]

    def known_node_ids(self) -> list[int]:
        return list(self.ids)


@dataclass
class ScriptedClient:
    """The part of NetworkClient the delegate uses; the test sets which nodes are ready."""

    cluster: FakeNodes = field(default_factory=lambda: FakeNodes([1, 2, 3]))
    ready_nodes: set[int] = field(default_factory=set)
    in_flight: dict[int, int] = field(default_factory=dict)
    connecting: set[int] = field(default_factory=set)
    backing_off: set[int] = field(default_factory=set)
    sent: list[ClientRequest] = field(default_factory=list)
    ready_calls: list[int] = field(default_factory=list)
    responses: list[ClientResponse] = field(default_factory=list)
    poll_timeouts: list[int] = field(default_factory=list)
    closed: list[ClientResponse] = field(default_factory=list)
    refused: dict[int, AuthenticationError] = field(default_factory=dict)

    def authentication_error(self, node_id: int) -> AuthenticationError | None:
        return self.refused.get(node_id)

    def ready(self, node_id: int, now_ms: int) -> bool:
        self.ready_calls.append(node_id)
        return node_id in self.ready_nodes

    def is_ready(self, node_id: int) -> bool:
        return node_id in self.ready_nodes

    def in_flight_count(self, node_id: int | None = None) -> int:
        return self.in_flight.get(node_id, 0) if node_id is not None else sum(self.in_flight.values())

    def connection(self, node_id: int) -> FakeConnection | None:
        return FakeConnection(node_id in self.connecting) if node_id in self.connecting else None

    def connection_failed_recently(self, node_id: int, now_ms: int) -> bool:
        return node_id in self.backing_off

    def send(self, request: ClientRequest, now_ms: int) -> None:
        self.sent.append(request)

    def poll(self, timeout_ms: int, now_ms: int, clock: Callable[[], int]) -> list[ClientResponse]:
        self.poll_timeouts.append(timeout_ms)
        out, self.responses = self.responses, []
        return out

    def close(self) -> list[ClientResponse]:
        return self.closed

    def answer(self, request: ClientRequest, body: Any, received_ms: int) -> None:
        self.responses.append(ClientResponse(request, body, None, 12, received_ms))


class Outcomes:
    def __init__(self) -> None:
        self.responses: list[ClientResponse] = []

    def __call__(self, response: ClientResponse) -> None:
        self.responses.append(response)


def delegate_over(client: ScriptedClient) -> NetworkClientDelegate:
    return NetworkClientDelegate(client, REQUEST_TIMEOUT_MS)  # type: ignore[arg-type]


def poll(delegate: NetworkClientDelegate, now_ms: int, timeout_ms: int = 5_000) -> None:
    delegate.poll(timeout_ms, now_ms, lambda: now_ms)


def test_request_to_a_ready_node_is_sent_with_its_handler() -> None:
    client = ScriptedClient(ready_nodes={2})
    delegate = delegate_over(client)
    outcomes = Outcomes()
    request = MetadataRequest(topics=None)
    delegate.add(UnsentRequest(request, 2, outcomes, max_version=9, min_version=4), now_ms=10)
    poll(delegate, 10)
    (sent,) = client.sent
    assert (sent.node_id, sent.request, sent.created_ms, sent.max_version) == (2, request, 10, 9)
    assert sent.min_version == 4
    assert not delegate.has_unsent()
    client.answer(sent, MetadataResponse(), received_ms=20)
    poll(delegate, 20)
    assert [r.body for r in outcomes.responses] == [MetadataResponse()]


def test_request_to_a_node_that_never_becomes_ready_times_out_after_request_timeout() -> None:
    client = ScriptedClient()
    delegate = delegate_over(client)
    outcomes = Outcomes()
    delegate.add(UnsentRequest(MetadataRequest(), 3, outcomes), now_ms=0)
    poll(delegate, REQUEST_TIMEOUT_MS - 1)
    assert outcomes.responses == []
    assert 3 in client.ready_calls, "the delegate keeps asking the client to connect"
    poll(delegate, REQUEST_TIMEOUT_MS)
    (response,) = outcomes.responses
    assert isinstance(response.error, KafkaTimeoutError)
    assert response.error.retriable
    assert "node 3" in str(response.error)
    assert client.sent == []
    assert not delegate.has_unsent()


def test_a_request_to_a_broker_that_refused_the_login_fails_at_once_with_that_error() -> None:
    client = ScriptedClient()
    refusal = AuthenticationError("SASL PLAIN authentication with broker h:1 failed")
    client.refused[3] = refusal
    delegate = delegate_over(client)
    outcomes = Outcomes()
    delegate.add(UnsentRequest(MetadataRequest(), 3, outcomes), now_ms=0)
    poll(delegate, 1)
    (response,) = outcomes.responses
    assert response.error is refusal
    assert not delegate.has_unsent()


def test_a_request_that_asks_for_it_fails_at_once_when_connecting_to_its_node_failed() -> None:
    client = ScriptedClient()
    delegate = delegate_over(client)
    coordinator, other = Outcomes(), Outcomes()
    delegate.add(UnsentRequest(MetadataRequest(), 3, coordinator, fail_on_connection_failure=True), now_ms=0)
    delegate.add(UnsentRequest(MetadataRequest(), 3, other), now_ms=0)
    poll(delegate, 1)
    assert coordinator.responses == [], "nothing failed yet: the delegate is connecting"
    client.backing_off.add(3)  # the connection attempt was refused
    poll(delegate, 2)
    (response,) = coordinator.responses
    assert isinstance(response.error, KafkaConnectionError)
    assert response.error.retriable
    assert "node 3" in str(response.error)
    assert other.responses == [], "a request that did not ask waits for request.timeout.ms"
    assert delegate.has_unsent()


def test_a_request_for_any_broker_fails_only_when_every_broker_refused_the_login() -> None:
    client = ScriptedClient()
    delegate = delegate_over(client)
    outcomes = Outcomes()
    client.refused = {1: AuthenticationError("one"), 2: AuthenticationError("two")}
    delegate.add(UnsentRequest(MetadataRequest(), None, outcomes), now_ms=0)
    poll(delegate, 1)
    assert outcomes.responses == [], "broker 3 may still accept the client"
    client.refused[3] = AuthenticationError("three")
    poll(delegate, 2)
    (response,) = outcomes.responses
    assert isinstance(response.error, AuthenticationError)


def test_unsent_request_is_sent_once_its_node_becomes_ready() -> None:
    client = ScriptedClient()
    delegate = delegate_over(client)
    delegate.add(UnsentRequest(MetadataRequest(), 1, Outcomes()), now_ms=0)
    poll(delegate, 100)
    assert client.sent == []
    client.ready_nodes.add(1)
    poll(delegate, 200)
    assert [r.node_id for r in client.sent] == [1]


def test_waiting_requests_shorten_the_poll_timeout() -> None:
    client = ScriptedClient()
    delegate = delegate_over(client)
    poll(delegate, 0, timeout_ms=5_000)
    delegate.add(UnsentRequest(MetadataRequest(), 1, Outcomes()), now_ms=0)
    poll(delegate, 0, timeout_ms=5_000)
    assert client.poll_timeouts == [5_000, 50]


def test_waiting_ends_in_time_for_the_first_unsent_deadline() -> None:
    client = ScriptedClient()
    delegate = delegate_over(client)
    delegate.add(UnsentRequest(MetadataRequest(), 1, Outcomes(), deadline_ms=20), now_ms=0)
    poll(delegate, 0, timeout_ms=5_000)
    assert client.poll_timeouts == [20]


def test_an_earlier_deadline_set_by_the_manager_is_kept() -> None:
    client = ScriptedClient()
    delegate = delegate_over(client)
    outcomes = Outcomes()
    delegate.add(UnsentRequest(MetadataRequest(), 1, outcomes, deadline_ms=300), now_ms=0)
    poll(delegate, 299)
    assert outcomes.responses == []
    poll(delegate, 300)
    assert isinstance(outcomes.responses[0].error, KafkaTimeoutError)


def test_a_later_deadline_set_by_the_manager_is_capped_at_request_timeout() -> None:
    client = ScriptedClient()
    delegate = delegate_over(client)
    outcomes = Outcomes()
    delegate.add(UnsentRequest(MetadataRequest(), 1, outcomes, deadline_ms=10 * REQUEST_TIMEOUT_MS), now_ms=0)
    poll(delegate, REQUEST_TIMEOUT_MS)
    assert isinstance(outcomes.responses[0].error, KafkaTimeoutError)


def test_request_timeout_of_the_request_is_passed_to_the_client() -> None:
    client = ScriptedClient(ready_nodes={1})
    delegate = delegate_over(client)
    delegate.add(UnsentRequest(MetadataRequest(), 1, Outcomes(), timeout_ms=123), now_ms=0)
    poll(delegate, 0)
    assert client.sent[0].timeout_ms == 123


def test_least_loaded_node_is_the_ready_one_with_fewest_in_flight() -> None:
    client = ScriptedClient(ready_nodes={1, 2, 3}, in_flight={1: 3, 2: 1, 3: 2})
    assert delegate_over(client).least_loaded_node(0) == 2


def test_least_loaded_node_prefers_a_connecting_node_when_none_is_ready() -> None:
    client = ScriptedClient(connecting={3})
    assert delegate_over(client).least_loaded_node(0) == 3


def test_least_loaded_node_skips_nodes_in_reconnect_backoff() -> None:
    client = ScriptedClient(backing_off={1, 2})
    assert delegate_over(client).least_loaded_node(0) == 3


def test_no_node_is_chosen_when_all_are_backing_off() -> None:
    client = ScriptedClient(backing_off={1, 2, 3})
    assert delegate_over(client).least_loaded_node(0) is None


def test_node_agnostic_request_goes_to_the_least_loaded_node() -> None:
    client = ScriptedClient(ready_nodes={1, 3}, in_flight={1: 4, 3: 0})
    delegate = delegate_over(client)
    delegate.add(UnsentRequest(MetadataRequest(), None, Outcomes()), now_ms=0)
    poll(delegate, 0)
    assert [r.node_id for r in client.sent] == [3]


def test_node_agnostic_request_times_out_when_no_broker_is_reachable() -> None:
    client = ScriptedClient(backing_off={1, 2, 3})
    delegate = delegate_over(client)
    outcomes = Outcomes()
    delegate.add(UnsentRequest(MetadataRequest(), None, outcomes), now_ms=0)
    poll(delegate, REQUEST_TIMEOUT_MS)
    (response,) = outcomes.responses
    assert isinstance(response.error, KafkaTimeoutError)
    assert "any broker" in str(response.error)


def test_requests_keep_their_order_per_node() -> None:
    client = ScriptedClient()
    delegate = delegate_over(client)
    first, second = MetadataRequest(topics=None), MetadataRequest(topics=[])
    delegate.add(UnsentRequest(first, 1, Outcomes()), now_ms=0)
    delegate.add(UnsentRequest(second, 1, Outcomes()), now_ms=0)
    poll(delegate, 0)
    client.ready_nodes.add(1)
    poll(delegate, 1)
    assert [r.request for r in client.sent] == [first, second]


def test_failing_handler_does_not_stop_other_responses(caplog: pytest.LogCaptureFixture) -> None:
    client = ScriptedClient(ready_nodes={1})
    delegate = delegate_over(client)
    outcomes = Outcomes()

    def broken(_: ClientResponse) -> None:
        raise RuntimeError("handler bug")

    delegate.add(UnsentRequest(MetadataRequest(), 1, broken), now_ms=0)
    delegate.add(UnsentRequest(MetadataRequest(), 1, outcomes), now_ms=0)
    poll(delegate, 0)
    for request in client.sent:
        client.answer(request, MetadataResponse(), received_ms=1)
    poll(delegate, 1)
    assert len(outcomes.responses) == 1
    assert "handler bug" in caplog.text


def test_close_fails_unsent_requests_and_what_was_in_flight() -> None:
    client = ScriptedClient(ready_nodes={1})
    delegate = delegate_over(client)
    in_flight, unsent = Outcomes(), Outcomes()
    delegate.add(UnsentRequest(MetadataRequest(), 1, in_flight), now_ms=0)
    poll(delegate, 0)
    client.closed = [ClientResponse(client.sent[0], None, KafkaConnectionError("closed"), -1, 5)]
    delegate.add(UnsentRequest(MetadataRequest(), 2, unsent), now_ms=0)
    error = KafkaConnectionError("the client was closed")
    delegate.close(error)
    assert unsent.responses[0].error is error
    assert isinstance(in_flight.responses[0].error, KafkaConnectionError)
    assert not delegate.has_unsent()
