"""Topic set-up shared by the integration, group and CLI tests (``tests`` is on the import path)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kaflux import AdminClient, NewTopic, Producer

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
