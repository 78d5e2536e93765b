"""Rebootstrap (KIP-899, KIP-1102): the metadata manager and the delegate start again from
bootstrap.servers when no known broker is left, when no refresh succeeded for the trigger time,
and when a broker answers REBOOTSTRAP_REQUIRED."""

from __future__ import annotations

from typing import Any

from kaflux.network.backoff import RequestState
from kaflux.network.cluster import ClusterMetadata
from kaflux.network.metadata_manager import MetadataManager
from kaflux.network.requests import ClientRequest, ClientResponse
from kaflux.protocol.messages.metadata import MetadataResponse, MetadataResponseBroker
from kaflux.structs import Node

from support.fakes import exact_backoff

BOOTSTRAP = [("boot", 9092)]


def known_cluster() -> ClusterMetadata:
    cluster = ClusterMetadata(list(BOOTSTRAP))
    cluster.brokers = {1: Node(1, "old", 9093)}
    cluster.last_refresh_ms = 0
    return cluster


def answer(manager: MetadataManager, now_ms: int, body: MetadataResponse) -> None:
    (unsent,) = manager.poll(now_ms).unsent
    request = ClientRequest(node_id=1, request=unsent.request, callback=unsent.handler, created_ms=now_ms)
    unsent.handler(ClientResponse(request, body, None, 13, now_ms))


def manager_for(cluster: ClusterMetadata, trigger_ms: int | None) -> MetadataManager:
    manager = MetadataManager(
        cluster, RequestState(exact_backoff()), max_age_ms=60_000, rebootstrap_trigger_ms=trigger_ms
    )
    manager.set_topics({"t"})
    return manager


def test_rebootstrap_required_in_a_metadata_answer_forgets_the_brokers() -> None:
    cluster = known_cluster()
    manager = manager_for(cluster, 300_000)
    answer(manager, 10, MetadataResponse(error_code=129))
    assert cluster.brokers == {}
    assert cluster.known_node_ids() == [-1], "the next request goes to the bootstrap address"


def test_with_strategy_none_rebootstrap_required_only_retries() -> None:
    cluster = known_cluster()
    manager = manager_for(cluster, None)
    answer(manager, 10, MetadataResponse(error_code=129))
    assert list(cluster.brokers) == [1]


def test_no_successful_refresh_for_the_trigger_time_rebootstraps_and_a_success_resets_it() -> None:
    cluster = known_cluster()
    manager = manager_for(cluster, 5_000)
    manager.request_update()
    manager.poll(0)  # a refresh is wanted from now on; its answer never comes
    manager.poll(4_999)
    assert list(cluster.brokers) == [1]
    manager.poll(5_000)
    assert cluster.brokers == {}
    # a cluster that answers keeps its brokers, however old the last refresh
    cluster = known_cluster()
    manager = manager_for(cluster, 5_000)
    ok = MetadataResponse(brokers=[MetadataResponseBroker(node_id=1, host="old", port=9093)])
    answer(manager, 0, ok)
    for now in (70_000, 140_000):  # refreshes due at max age, answered at once
        answer(manager, now, ok)
    assert list(cluster.brokers) == [1]


def test_the_delegate_rebootstraps_when_no_known_broker_can_be_tried() -> None:
    from kaflux.network.network_client_delegate import NetworkClientDelegate

    cluster = known_cluster()

    class Client:
        def __init__(self) -> None:
            self.cluster = cluster

        def is_ready(self, node_id: int) -> bool:
            return False

        def connection(self, node_id: int) -> Any:
            return None

        def connection_failed_recently(self, node_id: int, now_ms: int) -> bool:
            return node_id >= 0  # every known broker is in reconnect backoff

    plain = NetworkClientDelegate(Client(), 30_000)  # type: ignore[arg-type]
    assert plain.least_loaded_node(0) is None and list(cluster.brokers) == [1]
    delegate = NetworkClientDelegate(Client(), 30_000, rebootstrap=True)  # type: ignore[arg-type]
    assert delegate.least_loaded_node(0) == -1
    assert cluster.brokers == {}
