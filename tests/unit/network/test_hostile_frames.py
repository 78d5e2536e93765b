"""Hostile response frames, fuzzed, through the real clients: only kaflux errors, no hang, bounded memory.

The broker is :class:`socket_fake_broker.SocketFakeBroker` (``fakes.FakeCluster`` over loopback);
a :class:`~support.fault_proxy.FaultProxy` in front of it (rewriting the broker's address, so
every connection goes through it) replaces one response to the API under test with a frame that
hypothesis builds from the real one: bit flips, random size prefixes, random bodies behind the real
correlation id, truncation, trailing garbage, or random bytes where a frame should be. This takes the
decoder fuzzing of ``tests/unit/protocol`` (garbage decodes or raises ProtocolError) and
``tests/unit/records/test_corruption.py`` up to whole connections and the clients' public calls.

For every frame: each call returns or raises a :class:`kaflux.errors.KafkaError` within its deadline
(never another exception), the network thread stays alive, and the process's peak memory grows by
less than :data:`MEMORY_BOUND` (a frame that claims up to ``receive.message.max.bytes`` must not cost
that much before its bytes arrive).
"""

from __future__ import annotations

import concurrent.futures
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kaflux import Consumer, Producer, TopicPartition
from kaflux.errors import KafkaError
from kaflux.protocol.api import ApiKey

from support.fakes import FakeCluster
from support.fault_proxy import FaultProxy
from support.scenarios import PeakRss
from support.socket_fake_broker import SocketFakeBroker

TOPIC = "hostile"
TP = TopicPartition(TOPIC, 0)
RECORDS = 50
REQUEST_TIMEOUT_MS = 500
#: slack over a call's own deadline before it counts as hung
MARGIN_S = 3.0
MEMORY_BOUND = 48 * 1024 * 1024


@dataclass
class Rig:
    cluster: FakeCluster
    broker: SocketFakeBroker
    proxy: FaultProxy
    consumer: Consumer
    producer: Producer


@pytest.fixture(scope="module")
def rig() -> Iterator[Rig]:
    cluster = FakeCluster(1)
    cluster.create_topic(TOPIC, 1)
    cluster.produce(TP, [b"v%d" % i for i in range(RECORDS)], keys=[b"k%d" % i for i in range(RECORDS)])
    broker = SocketFakeBroker(cluster)
    proxy = FaultProxy(("127.0.0.1", broker.port), rewrite_addresses=True).start()
    common = {"bootstrap.servers": proxy.bootstrap_servers, "request.timeout.ms": REQUEST_TIMEOUT_MS}
    consumer = Consumer({**common, "auto.offset.reset": "earliest", "fetch.max.wait.ms": 100})
    producer = Producer({**common, "linger.ms": 0, "delivery.timeout.ms": 1500, "max.block.ms": 1500})
    consumer.assign([TP])
    try:
        yield Rig(cluster, broker, proxy, consumer, producer)
    finally:
        consumer.close(2.0)
        producer.close(2.0)
        proxy.close()
        broker.close()


# --- mutations -----------------------------------------------------------------------------------------


def _flip(position: float, bit: int) -> Callable[[bytes], bytes]:
    def mutate(frame: bytes) -> bytes:
        i = 4 + int(position * (len(frame) - 4))  # somewhere in the body
        return frame[:i] + bytes([frame[i] ^ (1 << bit)]) + frame[i + 1 :]

    return mutate


def _size(size: int) -> Callable[[bytes], bytes]:
    return lambda frame: struct.pack(">i", size) + frame[4:]


def _body(garbage: bytes) -> Callable[[bytes], bytes]:
    """The real correlation id, then garbage, under a correct size prefix."""
    return lambda frame: struct.pack(">i", 4 + len(garbage)) + frame[4:8] + garbage


def _truncate(fraction: float) -> Callable[[bytes], bytes]:
    """The real size prefix over part of the body (the client waits for the rest)."""
    return lambda frame: frame[: 4 + int(fraction * (len(frame) - 4))]


def _append(garbage: bytes) -> Callable[[bytes], bytes]:
    return lambda frame: frame + garbage


def _raw(garbage: bytes) -> Callable[[bytes], bytes]:
    return lambda frame: garbage


mutations = st.one_of(
    st.builds(_flip, st.floats(0, 1, exclude_max=True), st.integers(0, 7)).map(lambda m: ("flip", m)),
    st.builds(
        _size,
        st.one_of(
            st.integers(-(2**31), 3),
            st.integers(4, 64),
            st.integers(50_000_000, 100_000_000),  # up to the default receive.message.max.bytes
            st.integers(100_000_001, 2**31 - 1),
        ),
    ).map(lambda m: ("size", m)),
    st.builds(_body, st.binary(max_size=300)).map(lambda m: ("body", m)),
    st.builds(_truncate, st.floats(0, 1, exclude_max=True)).map(lambda m: ("truncate", m)),
    st.builds(_append, st.binary(min_size=1, max_size=64)).map(lambda m: ("append", m)),
    st.builds(_raw, st.binary(min_size=1, max_size=300)).map(lambda m: ("raw", m)),
)


# --- the calls under attack ----------------------------------------------------------------------------


def _fetch(rig: Rig) -> None:
    """Read from the start for a while: poll returns records or raises KafkaError, in time."""
    rig.consumer.seek(TP, 0)
    read = 0
    deadline = time.monotonic() + REQUEST_TIMEOUT_MS / 1000 + 0.5
    while read < RECORDS and time.monotonic() < deadline:
        started = time.monotonic()
        try:
            read += len(rig.consumer.poll(0.1))
        except KafkaError:
            pass
        assert time.monotonic() - started <= 0.1 + MARGIN_S, "poll(0.1) overran"


def _metadata(rig: Rig) -> None:
    rig.consumer.poll(0)  # nothing but a poll: keeps the consumer's timers going
    started = time.monotonic()
    try:
        rig.consumer.partitions_for(TOPIC, timeout=1.0)
    except KafkaError:
        pass
    assert time.monotonic() - started <= 1.0 + MARGIN_S, "partitions_for(timeout=1.0) overran"


def _produce(rig: Rig) -> None:
    future = rig.producer.send(TOPIC, b"x", partition=0)
    try:
        error = future.exception(timeout=1.5 + MARGIN_S)
    except concurrent.futures.TimeoutError:
        pytest.fail("a send was unresolved past its delivery.timeout.ms")
    assert error is None or isinstance(error, KafkaError), repr(error)


TARGETS: dict[ApiKey, Callable[[Rig], None]] = {
    ApiKey.FETCH: _fetch,
    ApiKey.METADATA: _metadata,
    ApiKey.PRODUCE: _produce,
    ApiKey.API_VERSIONS: _metadata,  # the handshake of the connection the call opens
}


def test_the_rig_works_without_faults(rig: Rig) -> None:
    rig.proxy.reset()
    rig.consumer.seek(TP, 0)
    read = 0
    deadline = time.monotonic() + 20
    while read < RECORDS and time.monotonic() < deadline:
        read += len(rig.consumer.poll(0.1))
    assert read >= RECORDS
    assert rig.producer.send(TOPIC, b"ok", partition=0).result(timeout=10).offset >= RECORDS
    assert rig.proxy.stats().rewritten >= 1  # the fake broker's address was replaced by the proxy's


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(api=st.sampled_from(list(TARGETS)), mutation=mutations)
def test_hostile_frames_raise_only_kaflux_errors_and_cost_bounded_memory(
    rig: Rig, api: ApiKey, mutation: tuple[str, Callable[[bytes], bytes]]
) -> None:
    kind, mutate = mutation
    rig.proxy.reset()
    if api == ApiKey.API_VERSIONS:
        rig.proxy.cut_connections()  # so the next call opens a connection with a handshake
    memory = PeakRss()
    fault = rig.proxy.replace_response(api, mutate)
    try:
        TARGETS[api](rig)
    except KafkaError:
        pass  # a kaflux error is an acceptable outcome of any call
    finally:
        rig.proxy.reset()
    if api != ApiKey.METADATA or fault.fired:
        # Metadata may be cached; every other call's exchange must have met the fault.
        assert fault.fired <= 1
    for client in (rig.consumer, rig.producer):
        assert client._thread.is_alive(), f"a network thread died after a {kind} {api.name} frame"
    growth = memory.growth()
    assert growth < MEMORY_BOUND, f"peak memory grew {growth / 2**20:.0f} MiB after a {kind} {api.name} frame"
