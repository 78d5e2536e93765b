"""Dead and hung brokers: requests fail retriably within their timeouts, clients recover and close in time.

Every test uses a private Tansu broker (``fresh_tansu``) that it kills (SIGKILL, as a crash) or freezes
(SIGSTOP, as a hung machine: connections stay open, nothing is answered). A frozen broker is always
continued (SIGCONT) in a ``finally`` block, so the fixture can stop it.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from kaflux import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from kaflux.devbrokers.brokers import Broker, TansuBroker
from kaflux.errors import KafkaError, KafkaTimeoutError

pytestmark = pytest.mark.integration

WAIT_S = 15.0
REQUEST_TIMEOUT_MS = 2000
DELIVERY_TIMEOUT_MS = 3000


def create_topic(broker: Broker, topic: str, partitions: int = 1, *, exist_ok: bool = False) -> None:
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(topic, partitions)], timeout=WAIT_S, exist_ok=exist_ok)


@contextlib.contextmanager
def frozen(broker: Broker) -> Iterator[None]:
    """SIGSTOP the broker for the duration of the block; SIGCONT it whatever happens.

    Returns only once every thread of the broker is stopped (a signal is delivered asynchronously).
    """
    pid = broker.pid
    assert pid is not None, "the broker is not running"
    os.kill(pid, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 5.0
        while not all(state in "tT" for state in _thread_states(pid)):
            assert time.monotonic() < deadline, f"broker {pid} did not stop: {_thread_states(pid)}"
            time.sleep(0.002)
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def _thread_states(pid: int) -> list[str]:
    states = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/stat") as f:
                states.append(f.read().rsplit(")", 1)[1].split()[0])
        except FileNotFoundError:
            continue  # the thread exited meanwhile
    return states


def producer_for(broker: Broker, **config: object) -> Producer:
    settings = {
        "bootstrap.servers": broker.bootstrap_servers,
        "request.timeout.ms": REQUEST_TIMEOUT_MS,
        "delivery.timeout.ms": DELIVERY_TIMEOUT_MS,
        "linger.ms": 0,
        **config,
    }
    return Producer(settings)


def wait_for_failure(
    future: concurrent.futures.Future, started: float, limit_s: float
) -> tuple[BaseException, float]:
    """The future's exception and when it arrived (seconds after ``started``); fails after ``limit_s``."""
    try:
        error = future.exception(timeout=max(0.0, started + limit_s - time.monotonic()))
    except concurrent.futures.TimeoutError:
        pytest.fail(f"the send was still unresolved {limit_s} s after it started")
    elapsed = time.monotonic() - started
    assert error is not None, f"the send succeeded: {future.result()}"
    return error, elapsed


# --- producer -------------------------------------------------------------------------------------


def test_send_to_a_killed_broker_fails_retriably_and_succeeds_after_restart(
    fresh_tansu: Callable[[], TansuBroker], topic_name: str
):
    broker = fresh_tansu()
    create_topic(broker, topic_name)
    producer = producer_for(broker, **{"request.timeout.ms": 1000, "delivery.timeout.ms": 1500})
    try:
        assert producer.send(topic_name, b"before").result(timeout=WAIT_S).offset == 0
        broker.kill()
        error, _ = wait_for_failure(producer.send(topic_name, b"while dead"), time.monotonic(), 10.0)
        assert isinstance(error, KafkaError), repr(error)
        assert error.retriable, repr(error)

        broker.restart()  # Tansu keeps nothing in memory storage: the topic has to be created again
        # ...unless the producer's metadata refresh, still retrying, got there first (Tansu creates
        # topics a Metadata request names)
        create_topic(broker, topic_name, exist_ok=True)
        meta = producer.send(topic_name, b"after restart").result(timeout=WAIT_S)
        assert (meta.partition, meta.offset) == (0, 0)
    finally:
        producer.close(2.0)


def test_send_to_a_killed_broker_fails_within_delivery_timeout(
    fresh_tansu: Callable[[], TansuBroker], topic_name: str
):
    broker = fresh_tansu()
    create_topic(broker, topic_name)
    producer = producer_for(broker)
    try:
        producer.send(topic_name, b"before").result(timeout=WAIT_S)
        broker.kill()
        started = time.monotonic()
        future = producer.send(topic_name, b"while dead")
        error, _ = wait_for_failure(future, started, DELIVERY_TIMEOUT_MS / 1000 + 0.5)
        assert isinstance(error, KafkaError) and error.retriable, repr(error)
    finally:
        producer.close(1.0)


def test_request_to_a_hung_broker_times_out_after_request_timeout(
    fresh_tansu: Callable[[], TansuBroker], topic_name: str
):
    broker = fresh_tansu()
    create_topic(broker, topic_name)
    producer = producer_for(broker, retries=0)  # so the future carries the first request's outcome
    try:
        producer.send(topic_name, b"before").result(timeout=WAIT_S)
        with frozen(broker):
            started = time.monotonic()
            error, elapsed = wait_for_failure(
                producer.send(topic_name, b"while hung"), started, REQUEST_TIMEOUT_MS / 1000 + 1.0
            )
        assert isinstance(error, KafkaTimeoutError), repr(error)
        assert isinstance(error, TimeoutError)
        assert elapsed >= REQUEST_TIMEOUT_MS / 1000 - 0.1  # not given up before request.timeout.ms
        # The broker answers again: the next request succeeds on a new connection.
        assert producer.send(topic_name, b"after").result(timeout=WAIT_S).offset >= 1
    finally:
        producer.close(2.0)


def test_send_to_a_hung_broker_fails_within_request_timeout_plus_one_second(
    fresh_tansu: Callable[[], TansuBroker], topic_name: str
):
    broker = fresh_tansu()
    create_topic(broker, topic_name)
    producer = producer_for(broker)  # default retries; delivery.timeout.ms = request.timeout.ms + 1 s
    try:
        producer.send(topic_name, b"before").result(timeout=WAIT_S)
        with frozen(broker):
            started = time.monotonic()
            # The first attempt times out after request.timeout.ms; the retry is cut off by
            # delivery.timeout.ms, which is the earliest a correct producer can fail the record
            # (so the bound allows a little scheduling slack past it).
            error, _ = wait_for_failure(
                producer.send(topic_name, b"while hung"), started, DELIVERY_TIMEOUT_MS / 1000 + 0.5
            )
        assert isinstance(error, KafkaTimeoutError), repr(error)
    finally:
        producer.close(1.0)


def test_flush_and_close_with_a_dead_broker_return_in_time_and_fail_the_records(
    fresh_tansu: Callable[[], TansuBroker], topic_name: str
):
    broker = fresh_tansu()
    create_topic(broker, topic_name)
    producer = producer_for(broker, **{"delivery.timeout.ms": 60_000, "request.timeout.ms": 30_000})
    producer.send(topic_name, b"before").result(timeout=WAIT_S)
    broker.kill()
    futures = [producer.send(topic_name, b"r%d" % i) for i in range(5)]
    started = time.monotonic()
    with pytest.raises(KafkaTimeoutError):
        producer.flush(0.5)
    assert time.monotonic() - started < 1.5
    started = time.monotonic()
    producer.close(1.0)
    assert time.monotonic() - started < 2.5
    for f in futures:
        assert f.done()
        assert isinstance(f.exception(timeout=0), KafkaError)


# --- consumer -------------------------------------------------------------------------------------


def consumer_for(broker: Broker, **config: object) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": f"kx-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "request.timeout.ms": REQUEST_TIMEOUT_MS,
            **config,
        }
    )


def assert_times_out(call: Callable[[], object], timeout: float) -> None:
    started = time.monotonic()
    with pytest.raises(KafkaTimeoutError) as info:
        call()
    elapsed = time.monotonic() - started
    assert isinstance(info.value, TimeoutError)
    assert 0.9 * timeout <= elapsed <= timeout + 1.0, (
        f"raised after {elapsed:.2f} s for a {timeout} s timeout"
    )


def test_consumer_calls_time_out_and_close_returns_when_the_broker_is_killed(
    fresh_tansu: Callable[[], TansuBroker], topic_name: str
):
    broker = fresh_tansu()
    create_topic(broker, topic_name, 2)
    tp0, tp1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
    consumer = consumer_for(broker)
    try:
        consumer.assign([tp0])
        assert consumer.committed([tp0], timeout=WAIT_S) == {tp0: None}  # connected to broker and coordinator
        assert consumer.position(tp0, timeout=WAIT_S) == 0
        broker.kill()
        consumer.assign([tp0, tp1])  # tp1 has no position yet
        assert_times_out(lambda: consumer.committed([tp0], timeout=1.0), 1.0)
        assert_times_out(lambda: consumer.end_offsets([tp0], timeout=1.0), 1.0)
        assert_times_out(lambda: consumer.position(tp1, timeout=1.0), 1.0)
        started = time.monotonic()
        assert list(consumer.poll(0.5)) == []  # poll reports no error for a lost connection
        assert time.monotonic() - started < 1.5
    finally:
        started = time.monotonic()
        consumer.close(2.0)
        closed_after = time.monotonic() - started
    assert closed_after < 3.0


def test_consumer_calls_on_a_hung_broker_raise_at_their_timeout(
    fresh_tansu: Callable[[], TansuBroker], topic_name: str
):
    broker = fresh_tansu()
    create_topic(broker, topic_name)
    tp = TopicPartition(topic_name, 0)
    consumer = consumer_for(broker, **{"request.timeout.ms": 30_000})
    try:
        consumer.assign([tp])
        consumer.commit_sync({tp: 3}, timeout=WAIT_S)
        with frozen(broker):
            started = time.monotonic()
            with pytest.raises(KafkaTimeoutError):
                consumer.committed([tp], timeout=1.0)
            elapsed = time.monotonic() - started
        assert elapsed <= 1.5, f"committed(timeout=1.0) raised after {elapsed:.2f} s"
    finally:
        consumer.close(2.0)


def test_consumer_calls_fail_on_a_hung_broker_and_work_once_it_answers(
    fresh_tansu: Callable[[], TansuBroker], topic_name: str
):
    broker = fresh_tansu()
    create_topic(broker, topic_name)
    tp = TopicPartition(topic_name, 0)
    consumer = consumer_for(broker)
    try:
        consumer.assign([tp])
        consumer.commit_sync({tp: 3}, timeout=WAIT_S)
        with frozen(broker):
            with pytest.raises(KafkaTimeoutError):
                consumer.committed([tp], timeout=1.0)
            with pytest.raises(KafkaTimeoutError):
                consumer.commit_sync({tp: 4}, timeout=1.0)
        committed = consumer.committed([tp], timeout=WAIT_S)[tp]
        assert committed is not None and committed.offset in (3, 4)  # the timed-out commit may have landed
        consumer.commit_sync({tp: 5}, timeout=WAIT_S)
        assert consumer.committed([tp], timeout=WAIT_S)[tp].offset == 5  # type: ignore[union-attr]
    finally:
        started = time.monotonic()
        consumer.close(2.0)
        closed_after = time.monotonic() - started
    assert closed_after < 3.0
