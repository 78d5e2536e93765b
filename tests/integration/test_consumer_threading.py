"""Threading contract of ``kaflux.Consumer``.

* All socket I/O happens on the consumer's network thread (``kaflux-consumer-network-<client.id>``,
  a daemon thread); the application thread only writes to the wakeup socketpair.
* ``wakeup()`` from another thread interrupts a blocking call, or the next one, with WakeupError.
* A second thread gets ConcurrentAccessError; every call after ``close()`` gets IllegalStateError;
  unknown configuration keys raise ConfigError naming the key.
"""

from __future__ import annotations

import contextlib
import socket as real_socket
import threading
import time
import types
import uuid

import pytest

import kaflux.network.connection as connection_module
import kaflux.network.network_client as network_client_module
from kaflux import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from kaflux.devbrokers.brokers import Broker
from kaflux.errors import ConcurrentAccessError, ConfigError, IllegalStateError, WakeupError

pytestmark = pytest.mark.integration

WAIT_S = 15.0


def create_topic(broker: Broker, topic: str, partitions: int = 1, records: int = 0) -> None:
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(topic, partitions)], timeout=WAIT_S)
    if records:
        with Producer({"bootstrap.servers": broker.bootstrap_servers}) as producer:
            futures = [producer.send(topic, b"r%d" % i, partition=0) for i in range(records)]
            producer.flush(WAIT_S)
        assert [f.result(timeout=0).offset for f in futures] == list(range(records))


def new_consumer(broker: Broker, **config: object) -> Consumer:
    settings = {
        "bootstrap.servers": broker.bootstrap_servers,
        "auto.offset.reset": "earliest",
        "group.id": f"kx-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        **config,
    }
    return Consumer(settings)


def signal_when_poll_waits(consumer: Consumer) -> threading.Event:
    """Test hook: an event set when ``poll()`` starts waiting for data (it is inside poll then)."""
    entered = threading.Event()
    buffer = consumer._fetch_buffer
    original = buffer.await_not_empty

    def await_not_empty(timeout_s: float) -> bool:
        entered.set()
        return original(timeout_s)

    buffer.await_not_empty = await_not_empty  # type: ignore[method-assign]
    return entered


# --- no socket I/O on the application thread ------------------------------------------------------


class SocketRecorder:
    """Records (what, operation, thread) of every socket operation of kaflux's network modules."""

    def __init__(self) -> None:
        self.ops: list[tuple[str, str, threading.Thread]] = []
        self._lock = threading.Lock()

    def add(self, what: str, op: str) -> None:
        with self._lock:
            self.ops.append((what, op, threading.current_thread()))

    def module(self) -> types.ModuleType:
        """A stand-in for the ``socket`` module whose sockets record their operations."""
        recorder = self

        class RecordingSocket(real_socket.socket):
            role = "broker"

            def connect_ex(self, address):  # type: ignore[no-untyped-def]
                recorder.add(self.role, "connect_ex")
                return super().connect_ex(address)

            def connect(self, address):  # type: ignore[no-untyped-def]
                recorder.add(self.role, "connect")
                return super().connect(address)

            def send(self, data, *args):  # type: ignore[no-untyped-def]
                recorder.add(self.role, "send")
                return super().send(data, *args)

            def sendall(self, data, *args):  # type: ignore[no-untyped-def]
                recorder.add(self.role, "sendall")
                return super().sendall(data, *args)

            def recv(self, size, *args):  # type: ignore[no-untyped-def]
                recorder.add(self.role, "recv")
                return super().recv(size, *args)

            def recv_into(self, buffer, *args):  # type: ignore[no-untyped-def]
                recorder.add(self.role, "recv_into")
                return super().recv_into(buffer, *args)

            def close(self) -> None:
                recorder.add(self.role, "close")
                super().close()

        def getaddrinfo(*args, **kwargs):  # type: ignore[no-untyped-def]
            recorder.add("resolver", "getaddrinfo")
            return real_socket.getaddrinfo(*args, **kwargs)

        def socketpair(*args):  # type: ignore[no-untyped-def]
            pair = []
            for role, sock in zip(("wake_r", "wake_w"), real_socket.socketpair(*args), strict=True):
                wrapped = RecordingSocket(sock.family, sock.type, sock.proto, fileno=sock.detach())
                wrapped.role = role
                pair.append(wrapped)
            return tuple(pair)

        proxy = types.ModuleType("recording_socket")
        proxy.__dict__.update(real_socket.__dict__)
        proxy.socket = RecordingSocket  # type: ignore[attr-defined]
        proxy.getaddrinfo = getaddrinfo  # type: ignore[attr-defined]
        proxy.socketpair = socketpair  # type: ignore[attr-defined]
        return proxy


def test_no_socket_operation_runs_on_the_application_thread(
    broker: Broker, topic_name: str, monkeypatch: pytest.MonkeyPatch
):
    create_topic(broker, topic_name, 2, records=30)  # before recording: the producer has its own sockets
    recorder = SocketRecorder()
    proxy = recorder.module()
    monkeypatch.setattr(connection_module, "socket", proxy)
    monkeypatch.setattr(network_client_module, "socket", proxy)

    client_id = f"kx-sockets-{uuid.uuid4().hex[:6]}"
    thread_name = f"kaflux-consumer-network-{client_id}"
    tp0, tp1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
    # A short fetch wait: Tansu answers a connection's requests in order, behind the long-polling Fetch.
    consumer = new_consumer(broker, **{"client.id": client_id, "fetch.max.wait.ms": 100})
    try:
        (network_thread,) = [t for t in threading.enumerate() if t.name == thread_name]
        assert network_thread.daemon
        assert network_thread is not threading.current_thread()
        consumer.assign([tp0, tp1])
        got: list = []
        deadline = time.monotonic() + WAIT_S
        while len(got) < 30:
            assert time.monotonic() < deadline
            got.extend(consumer.poll(1.0))
        consumer.commit_sync(timeout=WAIT_S)
        assert consumer.committed([tp0], timeout=WAIT_S)[tp0].offset == sum(  # type: ignore[union-attr]
            1 for r in got if r.partition == 0
        )
        consumer.end_offsets([tp0, tp1], timeout=WAIT_S)
        consumer.beginning_offsets([tp0], timeout=WAIT_S)
        assert consumer.position(tp0, timeout=WAIT_S) == 30
        assert consumer.position(tp1, timeout=WAIT_S) == 0
        assert len(consumer.partitions_for(topic_name, timeout=WAIT_S)) == 2
    finally:
        consumer.close(5.0)
    network_thread.join(5.0)
    assert not network_thread.is_alive()

    app_thread = threading.current_thread()
    ops = list(recorder.ops)
    io = [(what, op, t.name) for what, op, t in ops if what in ("broker", "resolver")]
    assert [entry for entry in io if entry[2] != thread_name] == []
    counts = {
        op: sum(1 for what, o, _ in ops if what == "broker" and o == op) for op in ("send", "recv_into")
    }
    assert counts["send"] >= 8 and counts["recv_into"] >= 8, counts  # the recording did see the traffic
    assert any(op == "connect_ex" for what, op, _ in ops if what == "broker")
    assert any(op == "close" for what, op, _ in ops if what == "broker")
    assert any(op == "getaddrinfo" for what, op, _ in ops if what == "resolver")
    # The wakeup socketpair: only the network thread reads it (and closes it).
    wake_reads = [t for what, op, t in ops if what == "wake_r" and op in ("recv", "recv_into", "close")]
    assert wake_reads and all(t.name == thread_name for t in wake_reads)
    # The application thread's only socket operations are wakeup writes.
    assert {(what, op) for what, op, t in ops if t is app_thread} <= {("wake_w", "send")}


# --- wakeup ---------------------------------------------------------------------------------------


def test_wakeup_from_another_thread_interrupts_a_blocking_poll(broker: Broker, topic_name: str):
    create_topic(broker, topic_name)
    tp = TopicPartition(topic_name, 0)
    consumer = new_consumer(broker)
    try:
        consumer.assign([tp])
        assert consumer.position(tp, timeout=WAIT_S) == 0  # nothing left to resolve: poll just waits
        waiting = signal_when_poll_waits(consumer)
        woken_at: list[float] = []

        def waker() -> None:
            if waiting.wait(WAIT_S):
                woken_at.append(time.monotonic())
                consumer.wakeup()

        thread = threading.Thread(target=waker, daemon=True)
        thread.start()
        started = time.monotonic()
        with pytest.raises(WakeupError):
            consumer.poll(10.0)
        raised_at = time.monotonic()
        thread.join(WAIT_S)
        assert woken_at, "poll() never started waiting"
        assert raised_at - woken_at[0] < 0.5
        assert raised_at - started < 5.0
        # The wakeup was used up: the next poll waits normally.
        assert list(consumer.poll(0.2)) == []
    finally:
        consumer.close()


def test_a_pending_wakeup_makes_the_next_blocking_call_raise(broker: Broker, topic_name: str):
    create_topic(broker, topic_name, 2)
    tp0, tp1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
    consumer = new_consumer(broker)
    try:
        consumer.assign([tp0, tp1])
        consumer.wakeup()
        started = time.monotonic()
        with pytest.raises(WakeupError):
            consumer.poll(10.0)
        assert time.monotonic() - started < 0.5
        assert list(consumer.poll(0)) == []  # consumed by the first call

        consumer.wakeup()
        with pytest.raises(WakeupError):
            consumer.committed([tp0], timeout=10.0)
        consumer.wakeup()
        with pytest.raises(WakeupError):
            # Always a broker round trip (position() may already know its answer: the network
            # thread looks positions up as soon as partitions are assigned).
            consumer.beginning_offsets([tp1], timeout=10.0)
        consumer.wakeup()
        with pytest.raises(WakeupError):
            consumer.commit_sync({tp0: 1}, timeout=10.0)
        assert consumer.position(tp1, timeout=WAIT_S) == 0
    finally:
        consumer.close()


# --- single-threaded access, close, config --------------------------------------------------------


def test_a_second_thread_calling_poll_gets_concurrent_access_error(broker: Broker, topic_name: str):
    create_topic(broker, topic_name)
    tp = TopicPartition(topic_name, 0)
    consumer = new_consumer(broker)
    try:
        consumer.assign([tp])
        waiting = signal_when_poll_waits(consumer)
        outcome: list[BaseException | None] = []

        def poller() -> None:
            try:
                consumer.poll(10.0)
                outcome.append(None)
            except BaseException as e:
                outcome.append(e)

        thread = threading.Thread(target=poller, daemon=True)
        thread.start()
        assert waiting.wait(WAIT_S), "the first thread never got inside poll()"
        with pytest.raises(ConcurrentAccessError):
            consumer.poll(0)
        with pytest.raises(ConcurrentAccessError):
            consumer.commit_sync({tp: 0})
        with pytest.raises(ConcurrentAccessError):
            consumer.seek(tp, 0)
        consumer.wakeup()  # the one method other threads may call
        thread.join(WAIT_S)
        assert not thread.is_alive()
        assert len(outcome) == 1 and isinstance(outcome[0], WakeupError), outcome
        assert list(consumer.poll(0)) == []  # free again for this thread
    finally:
        consumer.close()


def test_every_call_after_close_raises_illegal_state_error(broker: Broker, topic_name: str):
    create_topic(broker, topic_name)
    tp = TopicPartition(topic_name, 0)
    consumer = new_consumer(broker)
    consumer.assign([tp])
    consumer.close()
    consumer.close()  # idempotent
    calls = {
        "poll": lambda: consumer.poll(0),
        "assign": lambda: consumer.assign([tp]),
        "unsubscribe": consumer.unsubscribe,
        "seek": lambda: consumer.seek(tp, 0),
        "seek_to_beginning": lambda: consumer.seek_to_beginning([tp]),
        "seek_to_end": lambda: consumer.seek_to_end([tp]),
        "position": lambda: consumer.position(tp, timeout=1.0),
        "commit_sync": lambda: consumer.commit_sync({tp: 0}, timeout=1.0),
        "commit_async": lambda: consumer.commit_async({tp: 0}),
        "committed": lambda: consumer.committed([tp], timeout=1.0),
        "offsets_for_times": lambda: consumer.offsets_for_times({tp: 0}, timeout=1.0),
        "beginning_offsets": lambda: consumer.beginning_offsets([tp], timeout=1.0),
        "end_offsets": lambda: consumer.end_offsets([tp], timeout=1.0),
        "partitions_for": lambda: consumer.partitions_for(topic_name, timeout=1.0),
        "list_topics": lambda: consumer.list_topics(timeout=1.0),
    }
    not_raised = []
    for name, call in calls.items():
        try:
            call()
        except IllegalStateError:
            continue
        except Exception as e:
            not_raised.append(f"{name}: {type(e).__name__}: {e}")
        else:
            not_raised.append(f"{name}: returned")
    assert not_raised == []


def test_accessors_after_close_raise_illegal_state_error(kafka: Broker, topic_name: str):
    broker = kafka
    create_topic(broker, topic_name)
    tp = TopicPartition(topic_name, 0)
    consumer = new_consumer(broker)
    consumer.assign([tp])
    consumer.close()
    calls = {
        "assignment": consumer.assignment,
        "paused": consumer.paused,
        "pause": lambda: consumer.pause([tp]),
        "resume": lambda: consumer.resume([tp]),
        "current_lag": lambda: consumer.current_lag(tp),
    }
    not_raised = []
    for name, call in calls.items():
        try:
            call()
        except IllegalStateError:
            continue
        except Exception as e:
            not_raised.append(f"{name}: {type(e).__name__}: {e}")
        else:
            not_raised.append(f"{name}: returned")
    assert not_raised == []


def test_pause_from_a_second_thread_during_poll_gets_concurrent_access_error(kafka: Broker, topic_name: str):
    broker = kafka
    create_topic(broker, topic_name)
    tp = TopicPartition(topic_name, 0)
    consumer = new_consumer(broker)
    try:
        consumer.assign([tp])
        waiting = signal_when_poll_waits(consumer)

        def poller() -> None:
            with contextlib.suppress(WakeupError):
                consumer.poll(10.0)

        thread = threading.Thread(target=poller, daemon=True)
        thread.start()
        assert waiting.wait(WAIT_S)
        try:
            with pytest.raises(ConcurrentAccessError):
                consumer.pause([tp])
        finally:
            consumer.wakeup()
            thread.join(WAIT_S)
    finally:
        consumer.close()


def test_unknown_config_keys_raise_config_error_naming_the_key():
    before = {t.name for t in threading.enumerate()}
    for client in (Consumer, Producer, AdminClient):
        with pytest.raises(ConfigError) as info:
            client({"bootstrap.servers": "127.0.0.1:9", "no.such.setting": "1"})
        assert info.value.key == "no.such.setting"
        assert "no.such.setting" in str(info.value)
    with pytest.raises(ConfigError) as info:
        Consumer({"bootstrap.servers": "127.0.0.1:9", "max.poll.records": 0})
    assert info.value.key == "max.poll.records"
    # A rejected configuration starts no network thread.
    assert {t.name for t in threading.enumerate()} - before == set()
