"""AdminRequestManager against the fake cluster with injected time: calls wait for metadata, are
retried on retriable errors until their deadline, and fail with the error or a timeout."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest

from kaflux.admin.request_manager import AdminCall, AdminRequestManager
from kaflux.errors import InvalidRequestError, KafkaConnectionError, KafkaTimeoutError
from kaflux.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest

from support.fakes import BACKOFF_MS, ClientSide, FakeCluster, connect, exact_backoff

DEADLINE = 10_000


def _create(name: str) -> CreateTopicsRequest:
    return CreateTopicsRequest(topics=[CreatableTopic(name=name, num_partitions=1, replication_factor=1)])


class Rig:
    def __init__(self, fake: FakeCluster) -> None:
        self.side: ClientSide = connect(fake)
        self.manager = AdminRequestManager(self.side.cluster, self.side.metadata, exact_backoff())

    def call(self, request: Any, now_ms: int = 0) -> Future[Any]:
        call = AdminCall("create_topics()", now_ms + DEADLINE, request)
        self.manager.submit(call)
        return call.future

    def run(self, now_ms: int) -> None:
        self.side.net.run([self.side.metadata, self.manager], now_ms)


@pytest.fixture
def fake() -> FakeCluster:
    return FakeCluster(brokers=2)


def test_a_call_is_answered(fake: FakeCluster) -> None:
    rig = Rig(fake)
    future = rig.call(_create("a"))
    rig.run(1)
    assert future.result(0).topics[0].error_code == 0
    assert "a" in fake.topics


def test_a_retriable_error_is_retried_after_the_backoff_until_it_succeeds(fake: FakeCluster) -> None:
    rig = Rig(fake)
    future = rig.call(_create("a"))
    (exchange,) = rig.side.net.add_all(rig.manager.poll(1), 1)
    rig.side.net.fail(exchange, KafkaConnectionError("lost"), received_ms=2)
    assert not future.done()
    assert rig.manager.poll(2 + BACKOFF_MS - 1).unsent == []
    rig.run(2 + BACKOFF_MS)
    assert len(rig.side.net.sent(CreateTopicsRequest)) == 2
    # The lost attempt had created the topic: the retry's answer says so (create_topics()
    # with exist_ok=True accepts it).
    assert future.result(0).topics[0].name == "a"


def test_a_non_retriable_error_fails_the_call(fake: FakeCluster) -> None:
    rig = Rig(fake)
    future = rig.call(_create("a"))
    (exchange,) = rig.side.net.add_all(rig.manager.poll(1), 1)
    rig.side.net.fail(exchange, InvalidRequestError("refused"), received_ms=2)
    with pytest.raises(InvalidRequestError):
        future.result(0)
    assert rig.manager.poll(2 + BACKOFF_MS).unsent == [], "not retried"


def test_the_deadline_fails_a_call_that_keeps_failing_with_a_message_naming_it(fake: FakeCluster) -> None:
    rig = Rig(fake)
    future = rig.call(_create("a"))
    now = 1
    while not future.done():
        for exchange in rig.side.net.add_all(rig.manager.poll(now), now):
            rig.side.net.fail(exchange, KafkaConnectionError("lost"), received_ms=now)
        now += BACKOFF_MS
        assert now < 2 * DEADLINE
    with pytest.raises(KafkaTimeoutError, match=r"create_topics\(\) did not complete before its deadline"):
        future.result(0)
    assert now >= DEADLINE


def test_a_call_waits_for_metadata_before_it_is_sent(fake: FakeCluster) -> None:
    rig = Rig(fake)
    rig.side.cluster.last_refresh_ms = -1  # as before the first metadata answer
    rig.call(_create("a"))
    assert rig.manager.poll(1).unsent == []
