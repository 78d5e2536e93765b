"""The ``kafka`` fixture is Apache Kafka 4.4 and nothing else: the suite's reference broker.

Three independent witnesses: the version the broker's jar logged when it started, the APIs its
ApiVersions answer offers (share groups at v1+, which only Kafka 4.1 and later have; no stand-in
here answers like this), and the feature levels in that answer (``metadata.version`` 33 is the level
Kafka 4.4 formats a new cluster with; ``share.version`` is finalized, so share groups run for real).
"""

from __future__ import annotations

import pytest

from kaflux import AdminClient
from kaflux.devbrokers.apache_kafka import KAFKA_VERSION, KafkaBroker
from kaflux.devbrokers.brokers import Broker

pytestmark = pytest.mark.integration

#: 4.4-IV2, Kafka 4.4.0's LATEST_PRODUCTION metadata.version (4.4-IV0 is 31; 4.5-IV0, 34, is not offered).
METADATA_VERSION_4_4 = 33
SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE = 76, 78, 79
CONSUMER_GROUP_HEARTBEAT = 68


def test_the_kafka_fixture_is_apache_kafka_4_4(kafka: Broker) -> None:
    assert isinstance(kafka, KafkaBroker)
    assert KAFKA_VERSION == "4.4.0"
    assert kafka.started_version() == "4.4.0", "the version Kafka's jar logged at start"

    offered = kafka.api_versions()
    assert offered[CONSUMER_GROUP_HEARTBEAT] == (0, 1)
    # Share groups left early access in 4.1, which dropped their v0: a 4.0 broker offers v0.
    for key in (SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE):
        assert offered[key][0] == 1, f"API {key}: {offered[key]}"

    with AdminClient({"bootstrap.servers": kafka.bootstrap_servers}) as admin:
        features = admin.describe_features(timeout=30)
    metadata = features.finalized_features["metadata.version"]
    assert (metadata.min_version_level, metadata.max_version_level) == (METADATA_VERSION_4_4,) * 2
    assert features.supported_features["metadata.version"].max_version == METADATA_VERSION_4_4
    assert features.finalized_features["share.version"].max_version_level >= 1
    assert features.finalized_features["group.version"].max_version_level >= 1
