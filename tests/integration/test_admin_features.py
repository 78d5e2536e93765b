"""``AdminClient.describe_features`` on real brokers. None of the brokers here implements feature
flags (KIP-584): noida-db and Tansu answer ApiVersions v3+ with no features, as kafka-python's
``describe_features`` reads them too; the mock's ApiVersions stops at v2, which has none.
"""

from __future__ import annotations

import asyncio

import pytest

from kaflux import AdminClient
from kaflux.admin import FeatureMetadata
from kaflux.aio import AsyncAdminClient
from kaflux.devbrokers.brokers import Broker
from kaflux.devbrokers.mock_cluster import MockCluster

kafka_admin = pytest.importorskip("kafka.admin")

pytestmark = pytest.mark.integration

WAIT_S = 15.0


def test_the_features_agree_with_kafka_python(broker: Broker) -> None:
    peer = kafka_admin.KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=5000)
    try:
        theirs = peer.describe_features()
    finally:
        peer.close()
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        ours = admin.describe_features(timeout=WAIT_S)
    assert {n: (r.min_version, r.max_version) for n, r in ours.supported_features.items()} == {
        n: f["supported"] for n, f in theirs.items() if "supported" in f
    }
    assert {n: (r.min_version_level, r.max_version_level) for n, r in ours.finalized_features.items()} == {
        n: f["finalized"] for n, f in theirs.items() if "finalized" in f
    }


def test_the_mock_reports_no_features(mock_cluster: MockCluster) -> None:
    with AdminClient({"bootstrap.servers": mock_cluster.bootstrap_servers}) as admin:
        assert admin.describe_features(timeout=WAIT_S) == FeatureMetadata({}, None, {})


@pytest.mark.parametrize("broker", ["kafka", "noida"], indirect=True)
def test_the_asyncio_client_describes_features(broker: Broker) -> None:
    async def main() -> FeatureMetadata:
        async with AsyncAdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
            found: FeatureMetadata = await admin.describe_features(timeout=WAIT_S)
            return found

    assert isinstance(asyncio.run(main()), FeatureMetadata)
