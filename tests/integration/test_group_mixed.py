"""Mixed groups (Apache Kafka): two kaflux members and one confluent-kafka (librdkafka) member in the
same group, all with the same ``partition.assignment.strategy``, converge to a complete and
disjoint assignment, and no partition ever has two owners.

With ``range`` the kaflux members join first (so one of them is normally the leader and
librdkafka follows kaflux's assignment); with ``cooperative-sticky`` the confluent member joins
first (normally the leader), then the kaflux members join the running group in the
incremental protocol.
"""

from __future__ import annotations

import threading

import confluent_kafka
import pytest

from kaflux.devbrokers.brokers import Broker

from support.group_helpers import (
    GROUP_TIMINGS,
    Member,
    Ownership,
    ThreadMember,
    create_topic,
    member_config,
    new_group,
    stop_all,
    wait_converged,
)

pytestmark = pytest.mark.integration

PARTITIONS = 6


class ConfluentMember(Member):
    """A confluent-kafka consumer polling on its own thread; its rebalance callbacks are logged
    like a kaflux listener's."""

    def __init__(self, name: str, bootstrap: str, group: str, topic: str, strategy: str) -> None:
        super().__init__(name)
        self.config = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": name,
            "partition.assignment.strategy": strategy,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **GROUP_TIMINGS,
        }
        self.topic = topic
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"app-{name}", daemon=True)

    def start(self) -> ConfluentMember:
        self.thread.start()
        return self

    def _log(self, kind: str, partitions: list[confluent_kafka.TopicPartition]) -> None:
        on_thread = threading.current_thread() is self.thread
        self._log_peer_callback(kind, (tp.partition for tp in partitions), on_polling_thread=on_thread)

    def _run(self) -> None:
        consumer = confluent_kafka.Consumer(self.config)
        try:
            consumer.subscribe(
                [self.topic],
                on_assign=lambda c, ps: self._log("assigned", ps),
                on_revoke=lambda c, ps: self._log("revoked", ps),
                on_lost=lambda c, ps: self._log("lost", ps),
            )
            while not self._stop.is_set():
                message = consumer.poll(0.1)
                if message is not None and message.error() is not None:
                    raise confluent_kafka.KafkaException(message.error())
        except BaseException as e:
            self.errors.append(e)
        finally:
            consumer.close()

    def request_stop(self) -> None:
        self._stop.set()

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        self.thread.join(timeout)
        assert not self.thread.is_alive()

    def check(self) -> None:
        assert self.errors == [], f"{self.name} failed: {self.errors!r}"


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_two_kaflux_members_and_one_confluent_member_converge(kafka: Broker, topic_name: str, strategy: str):
    create_topic(kafka.bootstrap_servers, topic_name, PARTITIONS)
    group = new_group()
    config = member_config(kafka.bootstrap_servers, group, strategy)
    kaflux_members = [ThreadMember(f"kaflux-{i}", config, [topic_name]) for i in range(2)]
    confluent_member = ConfluentMember("confluent", kafka.bootstrap_servers, group, topic_name, strategy)
    everyone: list[ThreadMember | ConfluentMember] = [*kaflux_members, confluent_member]
    first, then = (
        (kaflux_members, [confluent_member]) if strategy == "range" else ([confluent_member], kaflux_members)
    )
    try:
        for m in first:
            m.start()
        wait_converged(first, PARTITIONS)
        for m in then:
            m.start()
        wait_converged(everyone, PARTITIONS)
    finally:
        for m in everyone:
            m.request_stop()
        stop_all(kaflux_members)
        confluent_member.stop()
    for m in everyone:
        m.check()
    assert [e for m in everyone for e in m.events if e.kind == "lost"] == []
    assert Ownership.of(everyone).overlaps() == []
