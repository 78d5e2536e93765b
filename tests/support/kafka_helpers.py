"""Topic set-up shared by the integration, group and CLI tests (``tests`` is on the import path)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

import pytest

from kaflux import AdminClient, NewTopic, Producer
from kaflux.admin import AlterConfigOp, ConfigResource
from kaflux.devbrokers.apache_kafka import KafkaCluster
from kaflux.devbrokers.brokers import BrokerUnavailableError

WAIT_S = 30.0


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions)], timeout=WAIT_S)


def produce(bootstrap: str, topic: str, values_by_partition: Mapping[int, Sequence[bytes]]) -> None:
    """Produce to each partition and wait until every record is acknowledged."""
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        futures = [
            producer.send(topic, value, partition=partition)
            for partition, values in values_by_partition.items()
            for value in values
        ]
        producer.flush(WAIT_S)
    for future in futures:
        future.result(timeout=0)


def set_group_configs(admin: AdminClient, group: str, configs: Mapping[str, str]) -> None:
    """Set group configs (KIP-932/KIP-848, e.g. ``share.auto.offset.reset``) and wait until the
    broker shows them: it applies them once it has read them back from its metadata log, and a
    member that joins before would run with the defaults."""
    resource = ConfigResource("group", group)
    admin.incremental_alter_configs(
        {resource: [AlterConfigOp(k, v) for k, v in configs.items()]}, timeout=WAIT_S
    )
    deadline = time.monotonic() + WAIT_S
    while True:
        entries = admin.describe_configs([resource], names=list(configs), timeout=WAIT_S)[resource]
        shown = {k: entries[k].value for k in configs if k in entries}
        if shown == dict(configs):
            return
        assert time.monotonic() < deadline, f"the group configs of {group} never showed: {shown}"
        time.sleep(0.1)


@contextmanager
def started_kafka_cluster(timeout: float, **options: object) -> Iterator[KafkaCluster]:
    """A 3-node ``KafkaCluster(3, **options)`` started within ``timeout`` seconds for a test
    module (the test is skipped if Apache Kafka is not available), then stopped and removed."""
    try:
        cluster = KafkaCluster(3, **options).start(timeout=timeout)  # type: ignore[arg-type]
    except BrokerUnavailableError as e:
        pytest.skip(f"Apache Kafka is not available: {e}")
    try:
        yield cluster
    finally:
        cluster.stop()
        cluster.cleanup()
