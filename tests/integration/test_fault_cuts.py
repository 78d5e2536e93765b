"""Connections cut during each request kind: no request is lost.

For each of Produce, Fetch, Metadata, OffsetCommit, JoinGroup, SyncGroup and Heartbeat, the proxy
(:mod:`support.fault_proxy`) breaks the exchange in each way a network or a crashing broker
can (:data:`VARIANTS`): the connection closes before the request reaches the broker, halfway
through it, right after it (the broker acts, the client never hears), halfway through the
response, right after the response (the client may read the answer and the close in one go), or
the response is lost while the connection stays open. Every time, the call's future resolves or its
error surfaces within the call's deadline, and the client works afterwards.

Produce, Fetch, Metadata and OffsetCommit run on Tansu; the group requests on noida-db, whose joins
take about 0.3 s instead of Tansu's session.timeout.ms / 2 (members pause their partitions, since
noida-db answers fetches at once and an idle consumer would spin).
"""

from __future__ import annotations

import concurrent.futures
import time
import uuid
from collections.abc import Iterator

import pytest

from kaflux import Consumer, ConsumerRebalanceListener, Producer, TopicPartition
from kaflux.errors import KafkaError, KafkaTimeoutError
from kaflux.protocol.api import ApiKey

from support.fault_helpers import (
    MARGIN_S,
    REQUEST_TIMEOUT_MS,
    WAIT_S,
    Timing,
    arm,
    new_topic,
    poll_until,
    produce_keys,
    proxied_noida,
    proxied_tansu,
    proxied_tansu_tls,
    reset_proxy,
    tansu_rig,
    timing,
)
from support.scenarios import ProxiedBroker, read_back

pytestmark = pytest.mark.integration

__all__ = [
    "proxied_noida",
    "proxied_tansu",
    "proxied_tansu_tls",
    "tansu_rig",
    "timing",
]  # fixtures used by name

VARIANTS = [
    "cut_before_request",
    "cut_mid_request",
    "cut_after_request",
    "cut_mid_response",
    "cut_after_response",
    "drop_response",
]
REQUEST_TIMEOUT_S = REQUEST_TIMEOUT_MS / 1000


@pytest.fixture(autouse=True)
def clean_proxies(request: pytest.FixtureRequest) -> Iterator[None]:
    names = [n for n in ("proxied_tansu", "proxied_noida", "tansu_rig") if n in request.fixturenames]
    pbs: list[ProxiedBroker] = [request.getfixturevalue(n) for n in names]
    for pb in pbs:
        for proxy in pb.proxies():
            reset_proxy(proxy)
    yield
    for pb in pbs:
        for proxy in pb.proxies():
            reset_proxy(proxy)


# --- Produce -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_produce(tansu_rig: ProxiedBroker, variant: str, timing: Timing) -> None:
    # (over TLS too: the proxy sits behind stunnel, so the client sees its TLS connection end)
    pb = tansu_rig
    topic = new_topic(pb)
    delivery_s = 6.0
    producer = Producer(
        pb.config(
            **{
                "request.timeout.ms": REQUEST_TIMEOUT_MS,
                "delivery.timeout.ms": int(delivery_s * 1000),
                "linger.ms": 0,
            }
        )
    )
    acked = []
    try:
        producer.send(topic, b"warm-up", key=b"warm-up").result(timeout=WAIT_S)
        acked.append("warm-up")
        fault = arm(pb.proxy, variant, ApiKey.PRODUCE)
        started = time.monotonic()
        future = producer.send(topic, b"under-fault", key=b"under-fault")
        assert fault.wait(timeout=WAIT_S), "the fault never fired"
        bound = delivery_s + MARGIN_S
        try:
            error = future.exception(timeout=bound)
        except concurrent.futures.TimeoutError:
            pytest.fail(f"the send was unresolved {bound} s after it started ({variant})")
        elapsed = time.monotonic() - started
        timing(f"resolved ({'acked' if error is None else type(error).__name__})", elapsed, bound)
        assert elapsed <= bound
        if error is None:
            acked.append("under-fault")
        else:
            assert isinstance(error, KafkaError), repr(error)
        producer.send(topic, b"after", key=b"after").result(timeout=WAIT_S)
        acked.append("after")
    finally:
        producer.close(5.0)
    on_broker = read_back(pb.bootstrap_servers, topic, 1, config=pb.security)
    assert set(acked) <= set(on_broker), f"acknowledged but missing: {set(acked) - set(on_broker)}"


# --- Fetch ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_fetch(tansu_rig: ProxiedBroker, variant: str, timing: Timing) -> None:
    pb = tansu_rig
    topic = new_topic(pb)
    keys = [f"r{i:05d}" for i in range(300)]
    produce_keys(pb.bootstrap_servers, topic, keys, config=pb.security)
    tp = TopicPartition(topic, 0)
    consumer = Consumer(
        pb.config(**{"auto.offset.reset": "earliest", "request.timeout.ms": REQUEST_TIMEOUT_MS})
    )
    # Recovering takes at most a reconnect backoff and a retry backoff (1 s each at most, the
    # defaults), after the request timeout when the response is lost.
    bound = (REQUEST_TIMEOUT_S if variant == "drop_response" else 0.0) + 1.0 + 1.0 + MARGIN_S
    try:
        fault = arm(pb.proxy, variant, ApiKey.FETCH)
        consumer.assign([tp])
        got: list[tuple[int, str]] = []
        started = time.monotonic()
        deadline = started + bound + 10.0
        while len(got) < len(keys) and time.monotonic() < deadline:
            got.extend((r.offset, (r.key or b"").decode()) for r in consumer.poll(0.1))
        elapsed = time.monotonic() - started
        assert fault.fired == 1
        assert len(got) >= len(keys), f"read {len(got)} of {len(keys)} records ({variant})"
        timing("all read", elapsed, bound)
        assert elapsed <= bound, f"the consumer took {elapsed:.2f} s to read past the {variant}"
        assert got == list(enumerate(keys)), "records lost, repeated or out of order"
    finally:
        consumer.close(5.0)


# --- Metadata ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_metadata(proxied_tansu: ProxiedBroker, variant: str, timing: Timing) -> None:
    pb = proxied_tansu
    topic = new_topic(pb, partitions=2)
    call_timeout = 8.0
    fault = arm(pb.proxy, variant, ApiKey.METADATA)
    consumer = Consumer({"bootstrap.servers": pb.bootstrap_servers, "request.timeout.ms": REQUEST_TIMEOUT_MS})
    try:
        started = time.monotonic()
        try:
            partitions = consumer.partitions_for(topic, timeout=call_timeout)
        except KafkaError as e:
            partitions = None
            error: KafkaError | None = e
        else:
            error = None
        elapsed = time.monotonic() - started
        timing(
            f"partitions_for ({type(error).__name__ if error else 'answered'})",
            elapsed,
            call_timeout + MARGIN_S,
        )
        assert fault.wait(timeout=WAIT_S)
        assert elapsed <= call_timeout + MARGIN_S
        # As Java's partitionsFor, the call retries a broken connection or a lost response
        # within its timeout, so the one fault costs a retry, not the answer.
        assert error is None, repr(error)
        assert partitions is not None
        assert len(partitions) == 2
    finally:
        consumer.close(5.0)

    # A producer's first send to a topic waits for its metadata (at most max.block.ms).
    max_block_s = 6.0
    fault = arm(pb.proxy, variant, ApiKey.METADATA)
    producer = Producer(
        {
            "bootstrap.servers": pb.bootstrap_servers,
            "request.timeout.ms": REQUEST_TIMEOUT_MS,
            "max.block.ms": int(max_block_s * 1000),
            "delivery.timeout.ms": 10_000,
        }
    )
    try:
        started = time.monotonic()
        try:
            future = producer.send(topic, b"v", key=b"k")
        except KafkaTimeoutError:
            future = None
        elapsed = time.monotonic() - started
        timing("first send", elapsed, max_block_s + MARGIN_S)
        assert elapsed <= max_block_s + MARGIN_S
        assert fault.wait(timeout=WAIT_S)
        if future is not None:
            future.exception(timeout=10.0 + MARGIN_S)
        producer.send(topic, b"v2", key=b"k2").result(timeout=WAIT_S)
    finally:
        producer.close(5.0)


# --- OffsetCommit --------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_offset_commit(proxied_tansu: ProxiedBroker, variant: str, timing: Timing) -> None:
    pb = proxied_tansu
    topic = new_topic(pb)
    tp = TopicPartition(topic, 0)
    consumer = Consumer(
        {
            "bootstrap.servers": pb.bootstrap_servers,
            "group.id": f"kx-fault-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "request.timeout.ms": REQUEST_TIMEOUT_MS,
        }
    )
    try:
        consumer.assign([tp])
        consumer.commit_sync({tp: 1}, timeout=WAIT_S)  # the coordinator is known and connected
        call_timeout = 8.0
        fault = arm(pb.proxy, variant, ApiKey.OFFSET_COMMIT)
        started = time.monotonic()
        try:
            consumer.commit_sync({tp: 5}, timeout=call_timeout)
            committed_ok = True
        except KafkaError as e:
            assert isinstance(e, KafkaTimeoutError) or not getattr(e, "retriable", True), repr(e)
            committed_ok = False
        elapsed = time.monotonic() - started
        timing("commit_sync", elapsed, call_timeout + MARGIN_S)
        assert fault.wait(timeout=WAIT_S)
        assert elapsed <= call_timeout + MARGIN_S
        committed = consumer.committed([tp], timeout=WAIT_S)[tp]
        assert committed is not None
        if committed_ok:
            assert committed.offset == 5
        else:
            assert committed.offset in (1, 5)

        # An asynchronous commit has no deadline of its own: its callback must still come, once the
        # request times out (request.timeout.ms) or the connection fails.
        fault = arm(pb.proxy, variant, ApiKey.OFFSET_COMMIT)
        outcomes: list[BaseException | None] = []
        started = time.monotonic()
        consumer.commit_async({tp: 7}, callback=lambda offsets, error: outcomes.append(error))
        bound = REQUEST_TIMEOUT_S + MARGIN_S
        assert poll_until(consumer, lambda: bool(outcomes), bound + 5.0), "the commit callback never ran"
        elapsed = time.monotonic() - started
        timing("commit_async callback", elapsed, bound)
        assert elapsed <= bound
        assert outcomes[0] is None or isinstance(outcomes[0], KafkaError), repr(outcomes[0])
        consumer.commit_sync({tp: 9}, timeout=WAIT_S)
        assert consumer.committed([tp], timeout=WAIT_S)[tp].offset == 9  # type: ignore[union-attr]
    finally:
        consumer.close(5.0)


# --- JoinGroup, SyncGroup, Heartbeat (noida-db) --------------------------------------------------------

MAX_POLL_INTERVAL_MS = 2000
#: a JoinGroup may wait for the rebalance: its timeout is max.poll.interval.ms + 5 s (as in Java)
JOIN_TIMEOUT_S = MAX_POLL_INTERVAL_MS / 1000 + 5.0


class PausingListener(ConsumerRebalanceListener):
    """Pauses what is assigned (noida-db answers fetches at once, so an idle member would spin)."""

    def __init__(self) -> None:
        self.consumer: Consumer | None = None
        self.assigned = 0

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        assert self.consumer is not None
        self.consumer.pause(partitions)
        self.assigned += 1

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        pass


def group_member(pb: ProxiedBroker) -> tuple[Consumer, PausingListener]:
    consumer = Consumer(
        {
            "bootstrap.servers": pb.bootstrap_servers,
            "group.id": f"kx-fault-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "request.timeout.ms": REQUEST_TIMEOUT_MS,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "max.poll.interval.ms": MAX_POLL_INTERVAL_MS,
        }
    )
    listener = PausingListener()
    listener.consumer = consumer
    return consumer, listener


def assert_usable_member(consumer: Consumer, topic: str) -> None:
    """The member owns the partition and its commits are accepted (its generation is valid)."""
    tp = TopicPartition(topic, 0)
    assert consumer.assignment() == {tp}
    consumer.commit_sync({tp: 0}, timeout=WAIT_S)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("api", [ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP], ids=["JoinGroup", "SyncGroup"])
def test_join_and_sync_group(proxied_noida: ProxiedBroker, api: ApiKey, variant: str, timing: Timing) -> None:
    pb = proxied_noida
    topic = new_topic(pb)
    consumer, listener = group_member(pb)
    try:
        fault = arm(pb.proxy, variant, api)
        started = time.monotonic()
        consumer.subscribe([topic], listener=listener)
        bound = JOIN_TIMEOUT_S + REQUEST_TIMEOUT_S + MARGIN_S
        joined = poll_until(consumer, lambda: bool(consumer.assignment()), bound + 10.0)
        elapsed = time.monotonic() - started
        assert fault.fired == 1, "the fault never fired"
        assert joined, f"no assignment {bound + 10.0} s after subscribe ({variant} on {api.name})"
        timing("assigned", elapsed, bound)
        assert elapsed <= bound
        assert_usable_member(consumer, topic)
    finally:
        consumer.close(5.0)


@pytest.mark.parametrize("variant", VARIANTS)
def test_heartbeat(proxied_noida: ProxiedBroker, variant: str, timing: Timing) -> None:
    pb = proxied_noida
    topic = new_topic(pb)
    consumer, listener = group_member(pb)
    try:
        consumer.subscribe([topic], listener=listener)
        assert poll_until(consumer, lambda: bool(consumer.assignment()), WAIT_S)
        fault = arm(pb.proxy, variant, ApiKey.HEARTBEAT)
        assert poll_until(consumer, lambda: fault.fired == 1, WAIT_S), "no heartbeat was sent"
        fired_at = fault.fired_at[0]
        answered = pb.proxy.stats().responses_of(ApiKey.HEARTBEAT)
        # Heartbeats go on: a later heartbeat is answered within the failed one's timeout plus an
        # interval (and the session, 6 s, never expires).
        bound = REQUEST_TIMEOUT_S + 0.5 + MARGIN_S
        assert poll_until(
            consumer,
            lambda: pb.proxy.stats().responses_of(ApiKey.HEARTBEAT) >= answered + 2,
            bound + 10.0,
        ), f"heartbeats stopped after {variant}"
        elapsed = time.monotonic() - fired_at
        timing("heartbeating again", elapsed, bound)
        assert elapsed <= bound
        assert poll_until(consumer, lambda: bool(consumer.assignment()), JOIN_TIMEOUT_S + MARGIN_S)
        assert_usable_member(consumer, topic)
    finally:
        consumer.close(5.0)
