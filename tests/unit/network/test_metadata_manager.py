"""MetadataManager against the fake cluster: when it refreshes, what it asks, how it applies."""

from __future__ import annotations

import pytest

from kaflux.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    LeaderNotAvailableError,
    TopicAuthorizationFailedError,
)
from kaflux.network.backoff import RequestState
from kaflux.network.cluster import ClusterMetadata
from kaflux.network.metadata_manager import MetadataAnswer, MetadataManager
from kaflux.protocol.messages.metadata import MetadataRequest
from kaflux.structs import TopicPartition

from support.fakes import BACKOFF_MS, UNKNOWN_TOPIC_OR_PARTITION, FakeCluster, FakeNetwork, exact_backoff

MAX_AGE_MS = 60_000


class Rig:
    def __init__(self, fake: FakeCluster, topics: set[str] | None = None) -> None:
        self.cluster = ClusterMetadata([(b.host, b.port) for _, b in sorted(fake.brokers.items())])
        self.manager = MetadataManager(self.cluster, RequestState(exact_backoff()), max_age_ms=MAX_AGE_MS)
        self.manager.set_topics(topics if topics is not None else {"t"})
        self.net = FakeNetwork(fake)

    def run(self, now_ms: int) -> int:
        """One pass with instant answers; returns the number of Metadata requests sent."""
        return len(self.net.run([self.manager], now_ms))

    def last_request(self) -> MetadataRequest:
        request: MetadataRequest = self.net.sent(MetadataRequest)[-1]
        return request


@pytest.fixture
def fake() -> FakeCluster:
    fake = FakeCluster(brokers=2)
    fake.create_topic("t", 2)
    fake.create_topic("u", 1)
    return fake


def test_first_poll_asks_a_bootstrap_broker_for_the_wanted_topics(fake: FakeCluster) -> None:
    rig = Rig(fake)
    (unsent,) = rig.manager.poll(0).unsent
    assert unsent.node_id is None
    assert isinstance(unsent.request, MetadataRequest)
    assert [t.name for t in unsent.request.topics] == ["t"]  # type: ignore[union-attr]
    assert unsent.request.allow_auto_topic_creation is False


def test_answer_updates_brokers_topics_and_leaders(fake: FakeCluster) -> None:
    rig = Rig(fake)
    rig.run(0)
    assert rig.cluster.known_node_ids() == [0, 1]
    assert sorted(rig.cluster.topics) == ["t"]
    assert rig.cluster.leader_for(TopicPartition("t", 1)) == 1
    assert rig.cluster.cluster_id == "fake-cluster"
    assert rig.cluster.topic_id("t") == fake.topics["t"].topic_id


def test_metadata_is_refreshed_when_it_reaches_max_age(fake: FakeCluster) -> None:
    rig = Rig(fake)
    rig.run(0)
    assert rig.manager.poll(1_000).time_until_next_poll_ms == MAX_AGE_MS - 1_000
    assert rig.run(MAX_AGE_MS - 1) == 0
    assert rig.run(MAX_AGE_MS) == 1


def test_requested_update_is_sent_at_the_next_poll(fake: FakeCluster) -> None:
    rig = Rig(fake)
    rig.run(0)
    rig.manager.request_update()
    assert rig.run(1) == 1


def test_added_topics_trigger_an_update_only_when_new(fake: FakeCluster) -> None:
    rig = Rig(fake)
    rig.run(0)
    rig.manager.add_topics({"t"})
    assert rig.run(1) == 0
    rig.manager.add_topics({"u"})
    assert rig.run(2) == 1
    assert sorted(t.name for t in rig.last_request().topics) == ["t", "u"]  # type: ignore[type-var, union-attr]


def test_all_topics_are_requested_for_pattern_subscriptions(fake: FakeCluster) -> None:
    rig = Rig(fake)
    rig.manager.set_topics(None)
    rig.run(0)
    assert rig.last_request().topics is None
    assert sorted(rig.cluster.topics) == ["t", "u"]


def test_failed_request_is_retried_after_the_backoff(fake: FakeCluster) -> None:
    rig = Rig(fake)
    (exchange,) = rig.net.add_all(rig.manager.poll(0), 0)
    rig.net.fail(exchange, KafkaConnectionError("down"), received_ms=10)
    assert rig.run(10 + BACKOFF_MS - 1) == 0
    assert rig.run(10 + BACKOFF_MS) == 1
    assert rig.cluster.known_node_ids() == [0, 1]


def test_only_one_refresh_is_in_flight(fake: FakeCluster) -> None:
    rig = Rig(fake)
    rig.net.add_all(rig.manager.poll(0), 0)
    rig.manager.request_update()
    assert rig.manager.poll(1).unsent == []


def test_unknown_topic_is_asked_for_again_with_backoff_and_not_kept(fake: FakeCluster) -> None:
    rig = Rig(fake, {"t", "missing"})
    rig.run(0)
    assert "missing" not in rig.cluster.topics
    assert "t" in rig.cluster.topics
    assert rig.run(BACKOFF_MS - 1) == 0
    fake.create_topic("missing", 1)
    assert rig.run(BACKOFF_MS) == 1
    assert "missing" in rig.cluster.topics


def test_partition_without_a_leader_is_asked_for_again(fake: FakeCluster) -> None:
    fake.partition(TopicPartition("t", 0)).leader = -1
    rig = Rig(fake)
    rig.run(0)
    assert rig.cluster.leader_for(TopicPartition("t", 0)) is None
    fake.partition(TopicPartition("t", 0)).leader = 1
    assert rig.run(BACKOFF_MS) == 1
    assert rig.cluster.leader_for(TopicPartition("t", 0)) == 1


def test_topic_error_injected_for_every_topic_is_retried(fake: FakeCluster) -> None:
    fake.inject(MetadataRequest, UNKNOWN_TOPIC_OR_PARTITION)
    rig = Rig(fake)
    rig.run(0)
    assert rig.cluster.topics == {}
    rig.run(BACKOFF_MS)
    assert "t" in rig.cluster.topics


def test_listeners_see_every_applied_update(fake: FakeCluster) -> None:
    rig = Rig(fake)
    seen: list[int] = []
    rig.manager.add_listener(lambda cluster: seen.append(cluster.version))
    rig.run(0)
    rig.manager.request_update()
    rig.run(1)
    assert len(seen) == 2
    assert seen[0] < seen[1]


def test_one_off_request_answers_its_callback_and_updates_the_cluster(fake: FakeCluster) -> None:
    rig = Rig(fake)
    rig.run(0)
    answers: list[tuple[MetadataAnswer | None, KafkaError | None]] = []
    rig.manager.request_topics(["u"], lambda answer, error: answers.append((answer, error)))
    rig.run(1)
    ((answer, error),) = answers
    assert error is None
    assert answer is not None
    assert sorted(answer.topics) == ["u"]
    assert sorted(rig.cluster.topics) == ["t", "u"]


def test_one_off_request_reports_a_failure_to_its_callback(fake: FakeCluster) -> None:
    rig = Rig(fake)
    answers: list[tuple[MetadataAnswer | None, KafkaError | None]] = []
    rig.manager.request_topics(None, lambda answer, error: answers.append((answer, error)))
    for exchange in rig.net.add_all(rig.manager.poll(0), 0):
        rig.net.fail(exchange, KafkaConnectionError("down"), received_ms=1)
    ((answer, error),) = answers
    assert answer is None
    assert isinstance(error, KafkaConnectionError)


class Answers:
    """What a one-off request's callback was called with, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[MetadataAnswer | None, KafkaError | None]] = []

    def __call__(self, answer: MetadataAnswer | None, error: KafkaError | None) -> None:
        self.calls.append((answer, error))


def ask(rig: Rig, topic: str, deadline_ms: int) -> Answers:
    """A caller's request for ``topic`` (as partitions_for makes it), to answer by ``deadline_ms``."""
    answers = Answers()
    rig.manager.request_topics([topic], answers, deadline_ms=deadline_ms)
    return answers


def test_one_off_request_with_a_deadline_retries_a_lost_connection_after_the_backoff(
    fake: FakeCluster,
) -> None:
    rig = Rig(fake)
    rig.run(0)
    answers = ask(rig, "u", 5_000)
    (exchange,) = rig.net.add_all(rig.manager.poll(1), 1)
    rig.net.fail(exchange, KafkaConnectionError("connection reset"), received_ms=10)
    assert answers.calls == []
    assert rig.manager.poll(10).time_until_next_poll_ms == BACKOFF_MS
    assert rig.run(10 + BACKOFF_MS - 1) == 0
    assert rig.run(10 + BACKOFF_MS) == 1
    ((answer, error),) = answers.calls
    assert error is None
    assert answer is not None
    assert sorted(answer.topics) == ["u"]


def test_one_off_request_past_its_deadline_reports_a_timeout_naming_the_last_failure(
    fake: FakeCluster,
) -> None:
    rig = Rig(fake)
    rig.run(0)
    answers = ask(rig, "u", 1_000)
    now = 1
    while not answers.calls:
        for exchange in rig.net.add_all(rig.manager.poll(now), now):
            rig.net.fail(exchange, KafkaConnectionError("connection refused"), received_ms=now)
        rig.manager.expire_requests(now)
        now += 1
    ((answer, error),) = answers.calls
    assert answer is None
    assert isinstance(error, KafkaTimeoutError)
    assert "'u'" in str(error)
    assert "connection refused" in str(error)
    assert now - 1 == 1_000  # reported at the deadline, not before
    assert rig.manager.poll(now).unsent == []  # and not retried after it


def test_one_off_answer_arriving_after_the_deadline_is_not_reported_twice(fake: FakeCluster) -> None:
    rig = Rig(fake)
    rig.run(0)
    answers = ask(rig, "u", 100)
    (exchange,) = rig.net.add_all(rig.manager.poll(1), 1)
    rig.manager.expire_requests(100)
    rig.net.deliver(exchange, received_ms=150)
    ((answer, error),) = answers.calls
    assert answer is None
    assert isinstance(error, KafkaTimeoutError)


def test_one_off_request_with_a_deadline_fails_at_once_on_an_unauthorised_topic(fake: FakeCluster) -> None:
    fake.inject(MetadataRequest, TopicAuthorizationFailedError.code)
    rig = Rig(fake)
    answers = ask(rig, "t", 60_000)
    assert rig.run(0) == 1 + 1  # the regular refresh and the one-off
    ((answer, error),) = answers.calls
    assert answer is None
    assert isinstance(error, TopicAuthorizationFailedError)


def test_one_off_request_with_a_deadline_answers_an_unknown_topic_as_absent(fake: FakeCluster) -> None:
    rig = Rig(fake)
    rig.run(0)
    answers = ask(rig, "missing", 60_000)
    rig.run(1)
    ((answer, error),) = answers.calls
    assert error is None
    assert answer is not None
    assert "missing" not in answer.topics


def test_one_off_request_with_a_deadline_waits_out_a_leader_election(fake: FakeCluster) -> None:
    rig = Rig(fake)
    rig.run(0)
    fake.inject(MetadataRequest, LeaderNotAvailableError.code)
    answers = ask(rig, "u", 60_000)
    rig.run(1)
    assert answers.calls == []
    assert rig.run(1 + BACKOFF_MS) == 1
    ((answer, error),) = answers.calls
    assert error is None
    assert answer is not None
    assert answer.topics["u"].partitions


def test_one_off_request_may_ask_for_auto_creation(fake: FakeCluster) -> None:
    fake.auto_create_topics = True
    rig = Rig(fake)
    answers: list[MetadataAnswer | None] = []
    rig.manager.request_topics(["fresh"], lambda answer, error: answers.append(answer), auto_create=True)
    rig.run(0)
    requests = rig.net.sent(MetadataRequest)
    assert any(r.allow_auto_topic_creation for r in requests)
    assert answers[0] is not None
    assert "fresh" in answers[0].topics
