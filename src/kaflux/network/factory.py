"""Assembles the network stack of one client from its configuration. [app: at construction]"""

from __future__ import annotations

from dataclasses import dataclass

from kaflux.config import CommonConfig, parse_host_port
from kaflux.network.backoff import ExponentialBackoff, RequestState
from kaflux.network.cluster import ClusterMetadata
from kaflux.network.metadata_manager import MetadataManager
from kaflux.network.network_client import NetworkClient
from kaflux.network.network_client_delegate import NetworkClientDelegate
from kaflux.network.security import sasl_credentials_for, ssl_context_for


@dataclass(slots=True)
class NetworkStack:
    """The pieces every client's network thread runs."""

    cluster: ClusterMetadata
    client: NetworkClient
    delegate: NetworkClientDelegate
    metadata: MetadataManager
    retry_backoff: ExponentialBackoff


def build_network(config: CommonConfig, client_id: str, *, allow_auto_create_topics: bool) -> NetworkStack:
    """Build cluster metadata, network client, delegate and metadata manager for ``config``."""
    cluster = ClusterMetadata([parse_host_port(s) for s in config.bootstrap_servers])
    client = NetworkClient(
        cluster,
        client_id=client_id,
        request_timeout_ms=config.request_timeout_ms,
        max_in_flight=config.max_in_flight_requests_per_connection,
        reconnect_backoff=ExponentialBackoff(config.reconnect_backoff_ms, config.reconnect_backoff_max_ms),
        connection_setup_timeout_ms=config.socket_connection_setup_timeout_ms,
        send_buffer_bytes=config.send_buffer_bytes,
        receive_buffer_bytes=config.receive_buffer_bytes,
        max_response_bytes=config.max_response_bytes,
        ssl_context=ssl_context_for(config),
        sasl=sasl_credentials_for(config),
    )
    retry_backoff = ExponentialBackoff(config.retry_backoff_ms, config.retry_backoff_max_ms)
    rebootstrap = config.metadata_recovery_strategy == "rebootstrap"
    metadata = MetadataManager(
        cluster,
        RequestState(retry_backoff),
        max_age_ms=config.metadata_max_age_ms,
        allow_auto_create_topics=allow_auto_create_topics,
        rebootstrap_trigger_ms=config.metadata_recovery_rebootstrap_trigger_ms if rebootstrap else None,
    )
    client.on_broker_failure = metadata.request_update
    delegate = NetworkClientDelegate(client, config.request_timeout_ms, rebootstrap=rebootstrap)
    return NetworkStack(cluster, client, delegate, metadata, retry_backoff)
