"""Fault scenarios on real brokers behind the fault proxy (:mod:`support.scenarios`).

* Kill and restart: noida-db is killed with SIGKILL mid-stream and restarted on the same port, again
  and again, while a producer writes and a group member reads and commits. The consumer resumes
  every time (the time it takes is measured); no acknowledged record that the broker still holds is
  lost; duplicates come only from the uncommitted window. noida-db itself loses about the last
  second of acknowledged records on SIGKILL and reuses their offsets: those are counted separately
  as broker loss, against what the broker holds afterwards (read back with confluent-kafka).
* A stalled broker (the proxy forwards nothing, connections stay open): every blocking call returns
  within its deadline, the network threads stay alive, and everything works once it answers again.
* An unreachable broker: close() returns promptly.
* Group churn on Tansu (members are child processes): members join, leave and are SIGKILLed while a
  producer writes; no partition is ever owned by two members at once and no acknowledged record is
  lost.
* Hostile response frames from a real broker: only kaflux errors, bounded memory, and the consumer
  reads everything once the frames are sane again. (Fuzzed frames:
  ``tests/unit/network/test_hostile_frames.py``.)
"""

from __future__ import annotations

import concurrent.futures
import random
import struct
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from kaflux import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from kaflux.errors import KafkaError
from kaflux.protocol.api import ApiKey

from support.fault_helpers import (
    MARGIN_S,
    REQUEST_TIMEOUT_MS,
    WAIT_S,
    Timing,
    new_topic,
    poll_until,
    produce_keys,
    proxied_broker,
    proxied_tansu,
    proxied_tansu_tls,
    reset_proxy,
    tansu_rig,
    timing,
)
from support.scenarios import PeakRss, ProxiedBroker, run_group_churn, run_kill_restart

pytestmark = pytest.mark.integration

__all__ = ["proxied_tansu", "proxied_tansu_tls", "tansu_rig", "timing"]  # fixtures used by name

#: from a broker's restart to the consumer reading a record produced after it (measured: < 1 s)
RECOVERY_BOUND_S = 10.0
REQUEST_TIMEOUT_S = REQUEST_TIMEOUT_MS / 1000


@pytest.fixture
def private_noida() -> Iterator[ProxiedBroker]:
    yield from proxied_broker("noida")


@pytest.fixture
def clean_tansu(proxied_tansu: ProxiedBroker) -> Iterator[ProxiedBroker]:
    reset_proxy(proxied_tansu.proxy)
    yield proxied_tansu
    reset_proxy(proxied_tansu.proxy)


# --- kill -9 and restart --------------------------------------------------------------------------------


def test_kill_and_restart_loop_loses_no_acknowledged_record(
    private_noida: ProxiedBroker, timing: Timing
) -> None:
    restarts = 5
    report = run_kill_restart(
        private_noida, restarts=restarts, rng=random.Random(20261124), recovery_bound_s=RECOVERY_BOUND_S
    )
    print(report.summary())
    for r in report.restarts:
        if r.consumer_recovery_s is not None:
            timing(f"restart {r.index} consumer recovery", r.consumer_recovery_s, RECOVERY_BOUND_S)
        if r.producer_recovery_s is not None:
            timing(f"restart {r.index} producer recovery", r.producer_recovery_s, RECOVERY_BOUND_S)
    assert report.problems() == [], report.summary()
    assert len(report.restarts) == restarts
    assert all(r.consumer_recovery_s is not None for r in report.restarts)
    assert report.worst_recovery_s <= RECOVERY_BOUND_S
    assert report.acknowledged > 0 and report.consumed_unique > 0
    assert report.broker_lost < report.acknowledged, "nothing survived: the check would be empty"


# --- a stalled broker ------------------------------------------------------------------------------------


def timed(call: Callable[[], object]) -> tuple[object, float]:
    """``call()``'s result (or the KafkaError it raised) and how long it took."""
    started = time.monotonic()
    try:
        outcome = call()
    except KafkaError as e:
        outcome = e
    return outcome, time.monotonic() - started


def test_stalled_broker_every_blocking_call_returns_within_its_deadline(
    tansu_rig: ProxiedBroker, timing: Timing
) -> None:
    # (over TLS too: the stall is behind stunnel, the TLS connections stay up and silent)
    pb = tansu_rig
    topic = new_topic(pb, partitions=2)
    produce_keys(pb.bootstrap_servers, topic, [f"k{i}" for i in range(20)], partition=0, config=pb.security)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    delivery_s = 4.0
    producer = Producer(
        pb.config(
            **{
                "request.timeout.ms": REQUEST_TIMEOUT_MS,
                "delivery.timeout.ms": int(delivery_s * 1000),
                "max.block.ms": 3000,
                "linger.ms": 0,
            }
        )
    )
    consumer = Consumer(
        pb.config(
            **{
                "group.id": f"kx-stall-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "request.timeout.ms": REQUEST_TIMEOUT_MS,
            }
        )
    )
    admin = AdminClient(pb.config(**{"request.timeout.ms": REQUEST_TIMEOUT_MS}))
    threads = [producer._thread, consumer._thread, admin._thread]
    try:
        producer.send(topic, b"warm-up", partition=0).result(timeout=WAIT_S)
        consumer.assign([tp0])
        assert poll_until(consumer, lambda: consumer.position(tp0, timeout=WAIT_S) > 0, WAIT_S)
        consumer.commit_sync(timeout=WAIT_S)
        admin.list_topics(timeout=WAIT_S)

        pb.proxy.stall()
        pending = producer.send(topic, b"while stalled", partition=0)
        t = 0.5
        calls: list[tuple[str, Callable[[], object], float]] = [
            ("producer.flush", lambda: producer.flush(t), t),
            ("producer.send future", lambda: pending.exception(timeout=delivery_s + MARGIN_S), delivery_s),
            ("consumer.poll", lambda: consumer.poll(t), t),
            ("consumer.committed", lambda: consumer.committed([tp0], timeout=t), t),
            ("consumer.commit_sync", lambda: consumer.commit_sync({tp0: 3}, timeout=t), t),
            (
                "consumer.position",
                lambda: (consumer.assign([tp0, tp1]), consumer.position(tp1, timeout=t)),  # type: ignore[func-returns-value]
                t,
            ),
            ("consumer.end_offsets", lambda: consumer.end_offsets([tp0], timeout=t), t),
            ("consumer.beginning_offsets", lambda: consumer.beginning_offsets([tp0], timeout=t), t),
            ("consumer.offsets_for_times", lambda: consumer.offsets_for_times({tp0: 0}, timeout=t), t),
            ("consumer.partitions_for", lambda: consumer.partitions_for(f"{topic}-new", timeout=t), t),
            ("consumer.list_topics", lambda: consumer.list_topics(timeout=t), t),
            ("admin.create_topics", lambda: admin.create_topics([NewTopic(f"{topic}-x", 1)], timeout=t), t),
            ("admin.list_topics", lambda: admin.list_topics(timeout=t), t),
            # not ``topic``: the request may still reach the broker after the stall (the proxy
            # forwards what it held), and the send below expects the topic's 20 records
            ("admin.delete_topics", lambda: admin.delete_topics([f"{topic}-x"], timeout=t), t),
        ]
        for name, call, deadline in calls:
            outcome, elapsed = timed(call)
            timing(name, elapsed, deadline + MARGIN_S)
            assert elapsed <= deadline + MARGIN_S, f"{name} took {elapsed:.2f} s (deadline {deadline} s)"
            if name == "producer.send future":
                assert isinstance(outcome, KafkaError), f"the send did not fail: {outcome!r}"
        for _ in range(3):  # polling goes on returning in time
            _, elapsed = timed(lambda: consumer.poll(0.5))
            assert elapsed <= 0.5 + MARGIN_S
        assert all(thread.is_alive() for thread in threads), "a network thread died"

        pb.proxy.unstall()
        assert producer.send(topic, b"after", partition=0).result(timeout=WAIT_S).offset >= 20
        consumer.commit_sync({tp0: 5}, timeout=WAIT_S)
        assert consumer.committed([tp0], timeout=WAIT_S)[tp0].offset == 5  # type: ignore[union-attr]
        assert topic in admin.list_topics(timeout=WAIT_S)

        # Closing while stalled returns within the close timeout.
        pb.proxy.stall()
        for name, client in (("consumer", consumer), ("producer", producer), ("admin", admin)):
            _, elapsed = timed(lambda client=client: client.close(2.0))  # type: ignore[misc]
            timing(f"{name}.close", elapsed, 2.0 + MARGIN_S)
            assert elapsed <= 2.0 + MARGIN_S, f"{name}.close(2.0) took {elapsed:.2f} s"
    finally:
        pb.proxy.unstall()
        consumer.close(2.0)
        producer.close(2.0)
        admin.close(2.0)


def test_close_with_the_broker_unreachable_waits_only_for_pending_work(
    clean_tansu: ProxiedBroker, timing: Timing
) -> None:
    pb = clean_tansu
    topic = new_topic(pb)
    tp = TopicPartition(topic, 0)
    produce_keys(pb.bootstrap_servers, topic, ["a", "b"])

    def consumer(**extra: object) -> Consumer:
        return Consumer(
            {
                "bootstrap.servers": pb.bootstrap_servers,
                "group.id": f"kx-unreachable-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "request.timeout.ms": REQUEST_TIMEOUT_MS,
                "session.timeout.ms": 6000,
                **extra,
            }
        )

    idle = consumer()  # assigned, nothing to commit
    committing = consumer(**{"enable.auto.commit": True})  # has consumed offsets to commit on close
    member = consumer()  # a group member: leaving needs the coordinator
    producer = Producer({"bootstrap.servers": pb.bootstrap_servers, "request.timeout.ms": REQUEST_TIMEOUT_MS})
    clients = [idle, committing, member, producer]
    try:
        for c in (idle, committing):
            c.assign([tp])
            assert poll_until(c, lambda c=c: c.position(tp, timeout=WAIT_S) == 2, WAIT_S)  # type: ignore[misc]
        member.subscribe([topic])
        assert poll_until(member, lambda: bool(member.assignment()), WAIT_S)
        producer.send(topic, b"c").result(timeout=WAIT_S)

        pb.proxy.refuse_connections("unlisten")  # new connections are refused ...
        pb.proxy.cut_connections()  # ... and the open ones are gone
        undelivered = producer.send(topic, b"never delivered")
        prompt = REQUEST_TIMEOUT_S + MARGIN_S
        for name, close, bound in (
            ("idle consumer close()", lambda: idle.close(), prompt),
            ("group member close()", lambda: member.close(), prompt),
            ("auto-committing consumer close(2.0)", lambda: committing.close(2.0), 2.0 + MARGIN_S),
            ("producer with an undelivered record close(2.0)", lambda: producer.close(2.0), 2.0 + MARGIN_S),
        ):
            _, elapsed = timed(close)
            timing(name, elapsed, bound)
            assert elapsed <= bound, f"{name} took {elapsed:.2f} s with the broker unreachable"
        assert isinstance(undelivered.exception(timeout=0), KafkaError)
    finally:
        pb.proxy.accept_connections()
        for c in clients:  # type: ignore[assignment]
            c.close(2.0)


# --- group churn ------------------------------------------------------------------------------------------


def test_group_churn_no_partition_owned_twice_and_no_acknowledged_record_lost(
    clean_tansu: ProxiedBroker, timing: Timing
) -> None:
    report = run_group_churn(
        clean_tansu,
        actions=["join", "leave", "kill"],
        rng=random.Random(7),
        strategy="range",  # the soak run (test_soak.py) churns with cooperative-sticky
        converge_bound_s=45.0,
    )
    print(report.summary())
    for action, seconds in zip(["start", *report.actions], report.convergence_s, strict=False):
        timing(f"converged after {action}", seconds, 45.0)
    assert report.problems() == [], report.summary()
    assert [a.split(":")[0] for a in report.actions] == ["join", "leave", "kill"]
    assert report.acknowledged > 0 and report.consumed >= report.acknowledged
    assert report.overlaps == [] and report.lost == []


# --- hostile frames from a real broker ---------------------------------------------------------------------


def _wrong_correlation(frame: bytes) -> bytes:
    (cid,) = struct.unpack_from(">i", frame, 4)
    return frame[:4] + struct.pack(">i", cid ^ 0x5A5A) + frame[8:]


#: hostile replacements for a response frame, and whether kaflux can only notice after
#: request.timeout.ms (the frame claims more bytes than come, so the client waits for them)
HOSTILE: dict[str, tuple[Callable[[bytes], bytes], bool]] = {
    "wrong correlation id": (_wrong_correlation, False),
    "negative size": (lambda frame: struct.pack(">i", -7) + frame[4:], False),
    "size 2 GiB": (lambda frame: struct.pack(">i", 2**31 - 1) + frame[4:], False),
    "empty body": (lambda frame: struct.pack(">i", 0), False),
    "size just under the cap": (lambda frame: struct.pack(">i", 99_000_000) + frame[4:], True),
    "garbage body": (lambda frame: frame[:8] + bytes(range(256)) * 4, True),
    "truncated body": (lambda frame: struct.pack(">i", len(frame) - 4) + frame[4 : len(frame) // 2], True),
}


def test_hostile_fetch_responses(clean_tansu: ProxiedBroker, timing: Timing) -> None:
    """After each hostile Fetch response the consumer raises nothing but kaflux errors, keeps its
    network thread, costs bounded memory, and reads everything again within a request timeout
    (when it has to wait for one) plus the reconnect and retry backoffs (1 s each at most)."""
    pb = clean_tansu
    topic = new_topic(pb)
    keys = [f"h{i:04d}" for i in range(200)]
    produce_keys(pb.bootstrap_servers, topic, keys)
    tp = TopicPartition(topic, 0)
    consumer = Consumer(
        {
            "bootstrap.servers": pb.bootstrap_servers,
            "auto.offset.reset": "earliest",
            "request.timeout.ms": REQUEST_TIMEOUT_MS,
        }
    )
    memory = PeakRss()
    late: list[str] = []
    try:
        consumer.assign([tp])
        for name, (hostile, waits) in HOSTILE.items():
            consumer.seek(tp, 0)
            memory.reset()
            fault = pb.proxy.replace_response(ApiKey.FETCH, hostile)
            got: list[str] = []
            errors: list[BaseException] = []
            bound = (REQUEST_TIMEOUT_S if waits else 0.0) + 2.0 + MARGIN_S
            started = time.monotonic()
            deadline = started + bound + 10.0
            while len(got) < len(keys) and time.monotonic() < deadline:
                try:
                    got.extend((r.key or b"").decode() for r in consumer.poll(0.1))
                except KafkaError as e:
                    errors.append(e)
                except Exception as e:
                    pytest.fail(f"poll raised a non-kaflux exception after '{name}': {e!r}")
            elapsed = time.monotonic() - started
            assert fault.fired == 1, name
            assert consumer._thread.is_alive(), name
            timing(name, elapsed, bound)
            assert got == keys, f"read {len(got)} of {len(keys)} after '{name}' (errors: {errors[:3]})"
            growth = memory.growth()
            assert growth < 64 * 1024 * 1024, f"peak RSS grew {growth / 2**20:.0f} MiB for '{name}'"
            if elapsed > bound:
                late.append(f"{name}: {elapsed:.2f} s > {bound:.1f} s")
        assert late == [], f"the consumer recovered late from hostile frames: {late}"
    finally:
        consumer.close(5.0)


def test_hostile_produce_response_resolves_the_future(clean_tansu: ProxiedBroker) -> None:
    pb = clean_tansu
    topic = new_topic(pb)
    delivery_s = 6.0
    with Producer(
        {
            "bootstrap.servers": pb.bootstrap_servers,
            "request.timeout.ms": REQUEST_TIMEOUT_MS,
            "delivery.timeout.ms": int(delivery_s * 1000),
            "linger.ms": 0,
        }
    ) as producer:
        producer.send(topic, b"warm-up").result(timeout=WAIT_S)
        for name, (hostile, _) in HOSTILE.items():
            fault = pb.proxy.replace_response(ApiKey.PRODUCE, hostile)
            future = producer.send(topic, name.encode())
            try:
                error = future.exception(timeout=delivery_s + MARGIN_S)
            except concurrent.futures.TimeoutError:
                pytest.fail(f"the send was unresolved after a '{name}' Produce response")
            assert error is None or isinstance(error, KafkaError), repr(error)
            assert fault.fired == 1
            pb.proxy.reset()
        producer.send(topic, b"after").result(timeout=WAIT_S)
