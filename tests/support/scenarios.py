"""Fault scenarios on real brokers behind a :class:`~support.fault_proxy.FaultProxy`, shared by
the integration tests and ``bench/soak.py``. [test: the calling thread; :class:`KeyedProducer` adds a
sending thread; members are child processes (:mod:`support.group_member`)]

* :func:`start_proxied_broker` starts a broker whose every client connection goes through a proxy
  (Tansu advertises the proxy's port; for noida-db the proxy rewrites the broker address in
  Metadata and FindCoordinator responses). With ``security="SSL"`` or ``"SASL_SSL"`` the
  clients speak TLS: client -> *relay* (a FaultProxy cutting TLS records, RST cuts) -> stunnel
  -> *proxy* (the Kafka-framed FaultProxy) [-> SASL front door] -> broker, so a test can reset
  the TLS connection at any moment or during the handshake (the relay), and cut any Kafka
  exchange inside TLS, the SASL login included (the proxy); :meth:`ProxiedBroker.config` gives
  the client settings.
* :class:`KeyedProducer` writes unique keys at a steady rate and records which were acknowledged,
  where and when.
* :func:`run_kill_restart`: a producer and a consumer-group member run while the broker is killed
  with SIGKILL and restarted on the same port, again and again. Loss is counted against what the
  broker still holds afterwards (read back with confluent-kafka), since noida-db loses the last
  acknowledged records on SIGKILL and reuses their offsets (a broker limit).
* :func:`run_group_churn`: members join, leave and are SIGKILLed while a producer writes; checks that
  no partition was owned by two members at once and that every acknowledged record was read.

Both return a report whose :meth:`problems` lists every violated guarantee (empty when all held).
"""

from __future__ import annotations

import bisect
import contextlib
import random
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Protocol, Self

from kaflux import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from kaflux.devbrokers.brokers import Broker, NoidaBroker, TansuBroker
from kaflux.devbrokers.kinds import start_broker
from kaflux.errors import KafkaError
from kaflux.structs import RecordMetadata

from support.certs import TestCerts
from support.fault_proxy import FaultProxy
from support.group_member import Commit, MemberEvent, MemberProcess, Read
from support.sasl_front_door import SaslFrontDoor
from support.tls import TlsTerminator

__all__ = [
    "GROUP_TIMINGS",
    "ChurnReport",
    "ChurnTarget",
    "KeyedProducer",
    "KillRestartReport",
    "Ownership",
    "PeakRss",
    "ProxiedBroker",
    "create_topic",
    "read_back",
    "run_group_churn",
    "run_kill_restart",
    "start_proxied_broker",
    "wait_until",
]

#: Tansu holds a join for session.timeout.ms / 2: 6 s sessions keep a join at about 3 s.
GROUP_TIMINGS: dict[str, object] = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500}
WAIT_S = 30.0

Log = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.02) -> bool:
    """Poll ``predicate`` until it holds (True) or ``timeout`` seconds passed (False)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
    return True


class PeakRss:
    """Peak resident memory of this process since :meth:`reset` (Linux ``VmHWM``), to bound the memory a
    test's hostile input may cost. :attr:`available` is False where the peak cannot be reset."""

    def __init__(self) -> None:
        self.available = True
        self.baseline = 0
        self.reset()

    @staticmethod
    def _read(field_name: str) -> int:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1]) * 1024
        raise OSError(f"no {field_name} in /proc/self/status")

    def reset(self) -> None:
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # resets VmHWM to the current RSS
            self.baseline = self._read("VmRSS")
        except OSError:
            self.available = False

    def growth(self) -> int:
        """Bytes the peak RSS rose above the RSS at the last reset (0 when not available)."""
        if not self.available:
            return 0
        return max(0, self._read("VmHWM") - self.baseline)


# --- a broker behind a proxy ---------------------------------------------------------------------------


class ProxiedBroker:
    """A broker and the :class:`FaultProxy` every client connection goes through.

    Clients use :attr:`bootstrap_servers` (the proxy, or over TLS the relay) and the settings of
    :meth:`config`. :meth:`kill` and :meth:`restart` act on the broker (same port); the proxies keep
    running. Over TLS, :attr:`relay` is the TLS-record proxy in front of stunnel (``terminator``)
    and :attr:`proxy` the Kafka-framed one behind it; ``door`` is the SASL front door (SASL_SSL).
    """

    def __init__(
        self,
        broker: Broker,
        proxy: FaultProxy,
        *,
        relay: FaultProxy | None = None,
        terminator: TlsTerminator | None = None,
        door: SaslFrontDoor | None = None,
        security: dict[str, object] | None = None,
    ) -> None:
        self.broker = broker
        self.proxy = proxy
        self.relay = relay
        self.terminator = terminator
        self.door = door
        #: the client settings besides bootstrap.servers (security.protocol, CA, SASL login)
        self.security: dict[str, object] = dict(security or {})

    @property
    def kind(self) -> str:
        return self.broker.name

    @property
    def security_protocol(self) -> str:
        return str(self.security.get("security.protocol", "PLAINTEXT"))

    @property
    def bootstrap_servers(self) -> str:
        return (self.relay or self.proxy).bootstrap_servers

    def config(self, **overrides: object) -> dict[str, object]:
        """Client settings (kaflux's and confluent-kafka's keys alike) with ``overrides``."""
        return {"bootstrap.servers": self.bootstrap_servers, **self.security, **overrides}

    def proxies(self) -> list[FaultProxy]:
        """Every proxy on the way (the relay first)."""
        return [p for p in (self.relay, self.proxy) if p is not None]

    def kill(self) -> None:
        self.broker.kill()

    def restart(self, timeout: float = WAIT_S) -> None:
        self.broker.restart(timeout)

    def close(self) -> None:
        """Stop the proxies, stunnel, the door and the broker and delete their work directories."""
        try:
            for proxy in self.proxies():
                proxy.close()
            if self.terminator is not None:
                self.terminator.cleanup()
            if self.door is not None:
                self.door.stop()
        finally:
            self.broker.cleanup()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<ProxiedBroker {self.broker!r} via {self.proxy!r} ({self.security_protocol})>"


#: the one login of the SASL_SSL rig
SASL_USER, SASL_PASSWORD = "alice", "alice-secret"


def start_proxied_broker(
    kind: str, *, timeout: float = WAIT_S, security: str = "PLAINTEXT", certs: TestCerts | None = None
) -> ProxiedBroker:
    """Start a broker of ``kind`` ("tansu" or "noida") behind a new proxy.

    ``security`` "SSL" or "SASL_SSL" (Tansu only) puts the relay and stunnel in front (see the
    module's docstring); they need ``certs`` (the server certificate for 127.0.0.1)."""
    if security != "PLAINTEXT":
        if certs is None:
            raise ValueError(f"security={security} needs certs")
        return _start_tls_rig(kind, security, certs, timeout)
    if kind == "tansu":
        proxy = FaultProxy(name="fault-proxy-tansu").start()
        broker: Broker | None = None
        try:
            broker = TansuBroker(advertised_port=proxy.port).start(timeout)
            proxy.set_upstream(broker.host, broker.port)
            return ProxiedBroker(broker, proxy)
        except BaseException:
            proxy.close()
            if broker is not None:
                broker.cleanup()
            raise
    if kind == "noida":
        broker = start_broker("noida", timeout=timeout)
        assert isinstance(broker, NoidaBroker)
        try:
            proxy = FaultProxy((broker.host, broker.port), rewrite_addresses=True, name="fault-proxy-noida")
            return ProxiedBroker(broker, proxy.start())
        except BaseException:
            broker.cleanup()
            raise
    raise ValueError(f"unknown broker kind {kind!r}")


def _start_tls_rig(kind: str, security: str, certs: TestCerts, timeout: float) -> ProxiedBroker:
    if security not in ("SSL", "SASL_SSL"):
        raise ValueError(f"unknown security protocol {security!r}")
    if security == "SASL_SSL" and kind != "tansu":
        raise ValueError("the SASL_SSL rig runs on Tansu (behind the SASL front door)")
    started: list[Callable[[], None]] = []
    try:
        relay = FaultProxy(name=f"tls-relay-{kind}", framing="tls", rst_cuts=True).start()
        started.append(relay.close)
        broker: Broker
        if kind == "tansu":
            proxy = FaultProxy(name="fault-proxy-tansu-tls").start()
            started.append(proxy.close)
            broker = TansuBroker(advertised_port=relay.port)
            started.append(broker.cleanup)
            broker.start(timeout)
            upstream = (broker.host, broker.port)
        elif kind == "noida":
            broker = start_broker("noida", timeout=timeout)
            started.append(broker.cleanup)
            upstream = (broker.host, broker.port)
            proxy = FaultProxy(
                upstream,
                rewrite_addresses=True,
                advertised=(relay.host, relay.port),
                name="fault-proxy-noida-tls",
            ).start()
            started.append(proxy.close)
        else:
            raise ValueError(f"unknown broker kind {kind!r}")
        door: SaslFrontDoor | None = None
        security_config: dict[str, object] = {
            "security.protocol": security,
            "ssl.ca.location": str(certs.ca_cert),
        }
        if security == "SASL_SSL":
            door = SaslFrontDoor({SASL_USER: SASL_PASSWORD}, upstream=upstream).start()
            started.append(door.stop)
            upstream = ("127.0.0.1", door.port)
            security_config.update(
                {
                    "sasl.mechanism": "SCRAM-SHA-256",
                    "sasl.username": SASL_USER,
                    "sasl.password": SASL_PASSWORD,
                }
            )
        proxy.set_upstream(*upstream)
        terminator = TlsTerminator(proxy.port, cert=certs.server_cert, key=certs.server_key)
        started.append(terminator.cleanup)
        terminator.start(timeout)
        relay.set_upstream("127.0.0.1", terminator.port)
        return ProxiedBroker(
            broker, proxy, relay=relay, terminator=terminator, door=door, security=security_config
        )
    except BaseException:
        for stop in reversed(started):
            with contextlib.suppress(Exception):
                stop()
        raise


class TlsFront:
    """TLS in front of any one-address Kafka service (e.g. librdkafka's mock cluster with one
    broker): relay -> stunnel -> proxy (rewriting the service's address to the relay's) -> service.
    Clients use :attr:`bootstrap_servers` with :attr:`security`."""

    def __init__(self, upstream: tuple[str, int], certs: TestCerts, timeout: float = WAIT_S) -> None:
        self.relay = FaultProxy(name="tls-relay", framing="tls", rst_cuts=True).start()
        self.proxy: FaultProxy | None = None
        self.terminator: TlsTerminator | None = None
        try:
            self.proxy = FaultProxy(
                upstream,
                rewrite_addresses=True,
                advertised=(self.relay.host, self.relay.port),
                name="fault-proxy-tls-front",
            ).start()
            self.terminator = TlsTerminator(self.proxy.port, cert=certs.server_cert, key=certs.server_key)
            self.terminator.start(timeout)
            self.relay.set_upstream("127.0.0.1", self.terminator.port)
        except BaseException:
            self.close()
            raise
        self.security: dict[str, object] = {"security.protocol": "SSL", "ssl.ca.location": str(certs.ca_cert)}

    @property
    def bootstrap_servers(self) -> str:
        return self.relay.bootstrap_servers

    def config(self, **overrides: object) -> dict[str, object]:
        return {"bootstrap.servers": self.bootstrap_servers, **self.security, **overrides}

    def close(self) -> None:
        self.relay.close()
        if self.proxy is not None:
            self.proxy.close()
        if self.terminator is not None:
            self.terminator.cleanup()


def create_topic(
    bootstrap: str,
    topic: str,
    partitions: int,
    timeout: float = WAIT_S,
    *,
    config: Mapping[str, object] | None = None,
) -> None:
    """Create ``topic``; ``config``: further client settings (security)."""
    with AdminClient({"bootstrap.servers": bootstrap, **(config or {})}) as admin:
        admin.create_topics([NewTopic(topic, partitions)], timeout=timeout)


def unique_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


# --- producing unique keys --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ack:
    partition: int
    offset: int
    sent_at: float
    acked_at: float


class KeyedProducer:
    """Sends unique keys ``<prefix>-<seq>`` (value = key) at about ``rate`` records/s from its own thread
    and records every acknowledgement. [test: the sending thread; acks arrive on the producer's
    network thread]"""

    DEFAULT_CONFIG: dict[str, object] = {
        "acks": "all",
        "linger.ms": 5,
        "request.timeout.ms": 3000,
        "delivery.timeout.ms": 20000,
        "max.block.ms": 5000,
    }

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        *,
        rate: float = 400.0,
        prefix: str | None = None,
        config: dict[str, object] | None = None,
    ) -> None:
        self.topic = topic
        self.rate = rate
        self.prefix = prefix or uuid.uuid4().hex[:6]
        self._producer = Producer({"bootstrap.servers": bootstrap, **self.DEFAULT_CONFIG, **(config or {})})
        self._lock = threading.Lock()
        self.sent_at: dict[str, float] = {}
        self.acked: dict[str, Ack] = {}
        self.failed: dict[str, str] = {}
        self.send_errors = 0
        self._futures: list[Future[RecordMetadata]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"keyed-producer-{self.prefix}", daemon=True)
        self.error: BaseException | None = None

    def start(self) -> Self:
        self._thread.start()
        return self

    def _run(self) -> None:
        tick = 0.02
        per_tick = max(1, round(self.rate * tick))
        seq = 0
        try:
            while not self._stop.is_set():
                for _ in range(per_tick):
                    key = f"{self.prefix}-{seq:09d}"
                    seq += 1
                    self._send(key)
                self._stop.wait(tick)  # pacing, not synchronisation
        except BaseException as exc:
            self.error = exc

    def _send(self, key: str) -> None:
        sent = time.monotonic()
        with self._lock:
            self.sent_at[key] = sent
        try:
            future = self._producer.send(self.topic, key.encode(), key=key.encode())
        except KafkaError as exc:
            with self._lock:
                self.failed[key] = f"send: {exc!r}"
                self.send_errors += 1
            return

        def done(f: Future[RecordMetadata]) -> None:
            exc = f.exception()
            now = time.monotonic()
            with self._lock:
                if exc is None:
                    meta = f.result()
                    self.acked[key] = Ack(meta.partition, meta.offset, sent, now)
                else:
                    self.failed[key] = repr(exc)

        future.add_done_callback(done)
        with self._lock:
            self._futures.append(future)
            if len(self._futures) > 10_000:
                self._futures = [f for f in self._futures if not f.done()]

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def ack_count(self) -> int:
        with self._lock:
            return len(self.acked)

    def acks_after(self, t: float) -> list[tuple[str, Ack]]:
        with self._lock:
            return [(k, a) for k, a in self.acked.items() if a.acked_at > t]

    def snapshot(self) -> tuple[dict[str, float], dict[str, Ack], dict[str, str]]:
        with self._lock:
            return dict(self.sent_at), dict(self.acked), dict(self.failed)

    def stop(self, timeout: float = WAIT_S) -> list[str]:
        """Stop sending, wait (bounded) for every outstanding record and close. Returns problems:
        futures still unresolved after ``timeout`` (a record whose outcome was lost)."""
        self._stop.set()
        self._thread.join(timeout)
        deadline = time.monotonic() + timeout
        with contextlib.suppress(KafkaError):
            self._producer.flush(timeout)
        with self._lock:
            futures = list(self._futures)
        problems = []
        for f in futures:
            try:
                f.exception(timeout=max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                problems.append("a produce future did not resolve within the producer's stop timeout")
                break
        self._producer.close(max(0.0, deadline - time.monotonic()))
        if self.error is not None:
            problems.append(f"the sending thread failed: {self.error!r}")
        return problems


# --- reading the broker's contents back ---------------------------------------------------------------


def read_back(
    bootstrap: str,
    topic: str,
    partitions: int,
    timeout: float = 60.0,
    *,
    config: Mapping[str, object] | None = None,
) -> dict[str, list[tuple[int, int]]]:
    """Every record in ``topic`` as ``{key: [(partition, offset), ...]}``, read with confluent-kafka
    (an independent client) from the beginning up to each partition's high watermark.

    The high watermark is taken from Fetch responses (librdkafka's cached value), not from
    ListOffsets, which Tansu answers wrongly.
    """
    from confluent_kafka import OFFSET_BEGINNING
    from confluent_kafka import Consumer as CKConsumer
    from confluent_kafka import TopicPartition as CKTopicPartition

    consumer = CKConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique_name("kx-readback"),
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "log_level": 3,
            **(config or {}),
        }
    )
    found: dict[str, list[tuple[int, int]]] = defaultdict(list)
    tps = [CKTopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)]
    try:
        consumer.assign(tps)
        positions = dict.fromkeys(range(partitions), 0)
        deadline = time.monotonic() + timeout

        def complete() -> bool:
            for p in range(partitions):
                _, high = consumer.get_watermark_offsets(CKTopicPartition(topic, p), cached=True)
                if high is None or high < 0 or positions[p] < high:
                    return False
            return True

        while not complete():
            if time.monotonic() > deadline:
                raise TimeoutError(f"read-back of {topic} incomplete after {timeout} s: at {positions}")
            for message in consumer.consume(10_000, 0.2):
                partition, offset = message.partition(), message.offset()
                if message.error() or partition is None or offset is None:
                    continue
                found[(message.key() or b"").decode()].append((partition, offset))
                positions[partition] = max(positions[partition], offset + 1)
    finally:
        consumer.close()
    return dict(found)


# --- ownership intervals --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Interval:
    member: str
    start: float
    end: float


@dataclass
class Ownership:
    """Per partition, when each member owned it: from entering ``on_partitions_assigned`` to returning
    from ``on_partitions_revoked`` / ``on_partitions_lost``, the member's kill, or forever."""

    intervals: dict[int, list[Interval]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, members: Iterable[tuple[str, list[MemberEvent], float | None]]) -> Ownership:
        result = cls()
        for name, events, ended_at in members:
            started: dict[int, float] = {}
            for event in sorted(events, key=lambda e: e.entered):
                for p in event.partitions:
                    if event.kind == "assigned":
                        if p in started:
                            result.problems.append(f"{name} was assigned partition {p} twice")
                        started[p] = event.entered
                    elif p in started:
                        result.intervals.setdefault(p, []).append(
                            Interval(name, started.pop(p), event.returned)
                        )
                    else:
                        result.problems.append(f"{name}: {event.kind} partition {p} it did not own")
            end = ended_at if ended_at is not None else float("inf")
            for p, start in started.items():
                result.intervals.setdefault(p, []).append(Interval(name, start, end))
        return result

    def overlaps(self) -> list[str]:
        """Every moment two members owned the same partition."""
        found = []
        for p, intervals in sorted(self.intervals.items()):
            ordered = sorted(intervals, key=lambda i: i.start)
            for index, earlier in enumerate(ordered):
                for later in ordered[index + 1 :]:
                    if later.start < earlier.end and later.member != earlier.member:
                        found.append(
                            f"partition {p}: {later.member} owned it from {later.start:.3f} while "
                            f"{earlier.member} owned it {earlier.start:.3f}..{earlier.end:.3f}"
                        )
        return found

    def owns(self, member: str, partition: int, at: float) -> bool:
        return any(i.member == member and i.start <= at <= i.end for i in self.intervals.get(partition, []))


# --- duplicates ---------------------------------------------------------------------------------------


def _duplicate_reads(reads: list[Read]) -> list[tuple[Read, Read]]:
    """Pairs (first read, later read) of the same record (partition, offset and key)."""
    first: dict[tuple[int, int, str], Read] = {}
    pairs = []
    for r in sorted(reads, key=lambda r: r.at):
        ident = (r.partition, r.offset, r.key)
        if ident in first:
            pairs.append((first[ident], r))
        else:
            first[ident] = r
    return pairs


# --- kill -9 and restart ---------------------------------------------------------------------------------


@dataclass
class Restart:
    """One SIGKILL and restart of the broker."""

    index: int
    killed_at: float
    ready_at: float
    #: committed offsets on the broker after the restart, before the consumer committed again
    committed: dict[int, int] = field(default_factory=dict)
    consumer_recovery_s: float | None = None
    producer_recovery_s: float | None = None


@dataclass
class KillRestartReport:
    broker: str
    topic: str
    restarts: list[Restart] = field(default_factory=list)
    produced: int = 0
    acknowledged: int = 0
    send_failures: int = 0
    consumed: int = 0
    consumed_unique: int = 0
    #: acknowledged, but no longer on the broker after the restarts (a broker limit on noida-db)
    broker_lost: int = 0
    #: on the broker at an offset the consumer had already read with an older, lost record
    #: (noida-db reuses the offsets of records it lost)
    offset_reuse_skipped: int = 0
    #: acknowledged, on the broker, never read: a client defect
    client_lost: list[str] = field(default_factory=list)
    duplicates_uncommitted: int = 0
    duplicates_broker_rewind: int = 0
    duplicates_unexplained: list[str] = field(default_factory=list)
    producer_duplicates: int = 0
    other_problems: list[str] = field(default_factory=list)
    warnings: int = 0
    elapsed_s: float = 0.0

    @property
    def worst_recovery_s(self) -> float:
        values = [r.consumer_recovery_s for r in self.restarts if r.consumer_recovery_s is not None]
        values += [r.producer_recovery_s for r in self.restarts if r.producer_recovery_s is not None]
        return max(values, default=0.0)

    def problems(self) -> list[str]:
        found = list(self.other_problems)
        if self.client_lost:
            found.append(
                f"{len(self.client_lost)} acknowledged records on the broker were never read, "
                f"e.g. {self.client_lost[:5]}"
            )
        if self.duplicates_unexplained:
            found.append(
                f"{len(self.duplicates_unexplained)} duplicates outside the uncommitted window, "
                f"e.g. {self.duplicates_unexplained[:3]}"
            )
        return found

    def summary(self) -> str:
        recoveries = [
            f"{r.consumer_recovery_s:.2f}" if r.consumer_recovery_s is not None else "-"
            for r in self.restarts
        ]
        return (
            f"kill/restart on {self.broker}: {len(self.restarts)} restarts in {self.elapsed_s:.1f} s; "
            f"produced {self.produced}, acked {self.acknowledged}, consumed {self.consumed} "
            f"({self.consumed_unique} unique); broker lost {self.broker_lost} acked, offset reuse skipped "
            f"{self.offset_reuse_skipped}, client lost {len(self.client_lost)}; duplicates: "
            f"{self.duplicates_uncommitted} uncommitted window, {self.duplicates_broker_rewind} broker "
            f"rewind, {len(self.duplicates_unexplained)} unexplained, {self.producer_duplicates} producer "
            f"retries; consumer recovery s per restart [{', '.join(recoveries)}], worst recovery "
            f"{self.worst_recovery_s:.2f} s"
        )


def member_config(bootstrap: str, group: str, **extra: object) -> dict[str, object]:
    config: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "request.timeout.ms": 5000,
        **GROUP_TIMINGS,
    }
    config.update(extra)
    return config


def _committed_offsets(
    bootstrap: str,
    group: str,
    topic: str,
    partitions: int,
    timeout: float,
    security: Mapping[str, object] | None = None,
) -> dict[int, int]:
    """The group's committed offsets as the broker reports them (read with a non-member kaflux consumer)."""
    probe = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False, **(security or {})}
    )
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                result = probe.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=5.0)
            except KafkaError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)  # a retry backoff: the broker has just restarted
                continue
            return {tp.partition: meta.offset for tp, meta in result.items() if meta is not None}
    finally:
        probe.close(5.0)


def run_kill_restart(
    pb: ProxiedBroker,
    *,
    restarts: int | None = None,
    duration: float | None = None,
    rng: random.Random | None = None,
    partitions: int = 3,
    rate: float = 400.0,
    recovery_bound_s: float = 30.0,
    log: Log = _quiet,
) -> KillRestartReport:
    """Kill the broker with SIGKILL and restart it on the same port ``restarts`` times (or until
    ``duration`` seconds passed) while a :class:`KeyedProducer` writes and one group member (a child
    process) reads and commits after every batch.

    Each kill comes after the member read for a random 1-2.5 s more, with no commit in flight (the
    member pauses its commits across the kill, and resumes once the committed offsets the broker
    kept have been read). Recovery is the time from the restart to the member reading a record sent
    after it (and to the producer's first acknowledgement).

    Counting, against what the broker holds at the end (read back with confluent-kafka):

    * broker loss: acknowledged, but no longer on the broker (noida-db loses about the last second);
    * offset reuse: on the broker at an offset the member had read before with a record the broker
      then lost (noida-db reuses those offsets, so a consumer past them never sees the new record);
    * client loss (a defect): acknowledged, on the broker, and not read for another reason;
    * duplicates, per record read twice: in the uncommitted window (at or above the offset the broker
      had committed after the restart), a broker rewind (the broker's log ended below the member's
      committed or read position after the restart, so the position was reset to the earliest), or
      unexplained (a defect).
    """
    if restarts is None and duration is None:
        raise ValueError("give restarts or duration")
    rng = rng or random.Random()
    started = time.monotonic()
    topic = unique_name("kx-kill")
    group = unique_name("kx-kill-group")
    report = KillRestartReport(pb.kind, topic)
    create_topic(pb.bootstrap_servers, topic, partitions, config=pb.security)
    producer = KeyedProducer(pb.bootstrap_servers, topic, rate=rate, config=pb.security).start()
    member = MemberProcess("reader", member_config(pb.bootstrap_servers, group, **pb.security), topic)
    try:
        if not member.wait(lambda m: m.read_count() > 0, WAIT_S):
            report.other_problems.append(
                f"the consumer read nothing within {WAIT_S} s: {member.stderr_tail()}"
            )
            return report
        index = 0
        while True:
            if restarts is not None and index >= restarts:
                break
            if duration is not None and time.monotonic() - started >= duration:
                break
            # Mid-stream: kill once the consumer has read for a random 1-2.5 s more (noida-db loses about
            # the last second before a SIGKILL, so shorter runs would leave little to check).
            target = member.read_count() + int(rate * rng.uniform(1.0, 2.5))
            if not member.wait(_read_more_than(target), recovery_bound_s):
                report.other_problems.append(
                    f"restart {index}: the consumer made no progress before the kill"
                )
                break
            member.pause_commits()  # no commit in flight across the kill, so the window is known
            killed_at = time.monotonic()
            pb.kill()
            pb.restart()
            restart = Restart(index, killed_at, time.monotonic())
            report.restarts.append(restart)
            restart.committed = _committed_offsets(
                pb.bootstrap_servers, group, topic, partitions, WAIT_S, pb.security
            )
            member.resume_commits()
            _measure_recovery(restart, producer, member, recovery_bound_s, report)
            log(
                f"restart {index}: consumer recovered in {restart.consumer_recovery_s}, producer in "
                f"{restart.producer_recovery_s} s"
            )
            if restart.consumer_recovery_s is None:
                break
            index += 1
        report.other_problems.extend(producer.stop())
        _finish_kill_restart(pb, report, producer, member, partitions)
    finally:
        if not producer.stopped:
            producer.stop(5.0)
        member.cleanup()
        report.elapsed_s = time.monotonic() - started
    return report


def _read_more_than(count: int) -> Callable[[MemberProcess], bool]:
    return lambda m: m.read_count() >= count


def _measure_recovery(
    restart: Restart, producer: KeyedProducer, member: MemberProcess, bound: float, report: KillRestartReport
) -> None:
    ready = restart.ready_at

    def fresh_reads() -> list[Read]:
        """Reads of records sent after the restart."""
        sent_at, _, _ = producer.snapshot()
        _, reads, _ = member.snapshot()
        return [r for r in reads if r.at > ready and sent_at.get(r.key, 0.0) > ready]

    if wait_until(lambda: bool(fresh_reads()), bound, interval=0.05):
        restart.consumer_recovery_s = min(r.at for r in fresh_reads()) - ready
    else:
        report.other_problems.append(
            f"restart {restart.index}: the consumer read no record sent after the restart within {bound} s"
        )
    if wait_until(lambda: bool(producer.acks_after(ready)), bound):
        restart.producer_recovery_s = min(a.acked_at for _, a in producer.acks_after(ready)) - ready
    else:
        report.other_problems.append(
            f"restart {restart.index}: the producer got no acknowledgement within {bound} s"
        )


def _finish_kill_restart(
    pb: ProxiedBroker,
    report: KillRestartReport,
    producer: KeyedProducer,
    member: MemberProcess,
    partitions: int,
) -> None:
    sent_at, acked, failed = producer.snapshot()
    report.produced = len(sent_at)
    report.acknowledged = len(acked)
    report.send_failures = len(failed)
    on_broker = read_back(pb.bootstrap_servers, report.topic, partitions, config=pb.security)
    report.producer_duplicates = sum(len(v) - 1 for v in on_broker.values() if len(v) > 1)
    report.broker_lost = sum(1 for k in acked if k not in on_broker)

    def read_offsets() -> dict[tuple[int, int], set[str]]:
        _, reads, _ = member.snapshot()
        seen: dict[tuple[int, int], set[str]] = defaultdict(set)
        for r in reads:
            seen[(r.partition, r.offset)].add(r.key)
        return seen

    def missing() -> list[str]:
        _, reads, _ = member.snapshot()
        read_keys = {r.key for r in reads}
        seen = read_offsets()
        result = []
        for key in acked:
            if key in read_keys or key not in on_broker:
                continue
            if all(seen.get(loc, {key}) - {key} for loc in on_broker[key]):
                continue  # every place it sits was read before with another (lost) record
            result.append(key)
        return result

    wait_until(lambda: not missing(), WAIT_S, interval=0.2)
    member.close()
    _, reads, _ = member.snapshot()
    report.warnings = len(member.warnings)
    if member.fatal:
        report.other_problems.append(f"the consumer failed: {member.fatal}")
    report.consumed = len(reads)
    report.consumed_unique = len({(r.partition, r.offset, r.key) for r in reads})
    read_keys = {r.key for r in reads}
    report.client_lost = sorted(missing())
    client_lost = set(report.client_lost)
    report.offset_reuse_skipped = sum(
        1 for k in acked if k in on_broker and k not in read_keys and k not in client_lost
    )
    _classify_kill_duplicates(report, reads, acked)


def _classify_kill_duplicates(report: KillRestartReport, reads: list[Read], acked: dict[str, Ack]) -> None:
    kills = [r.killed_at for r in report.restarts]
    # The log end of each partition right after restart i: the lowest offset acknowledged between
    # kill i and kill i + 1 (the first record written after the restart lands there).
    log_end: dict[tuple[int, int], int] = {}
    for ack in acked.values():
        i = bisect.bisect_right(kills, ack.acked_at) - 1
        if i >= 0:
            key = (i, ack.partition)
            log_end[key] = min(log_end.get(key, ack.offset), ack.offset)
    # How far the consumer had read each partition when the broker was killed.
    read_before: dict[tuple[int, int], int] = {}
    running: dict[int, int] = {}
    ordered = sorted(reads, key=lambda r: r.at)
    j = 0
    for i, killed_at in enumerate(kills):
        while j < len(ordered) and ordered[j].at < killed_at:
            r = ordered[j]
            running[r.partition] = max(running.get(r.partition, 0), r.offset + 1)
            j += 1
        for p, offset in running.items():
            read_before[(i, p)] = offset

    for first, again in _duplicate_reads(reads):
        # The restart that made the consumer read it again: the last one before the second read (the
        # first read may come after the kill too, from records fetched before it).
        i = bisect.bisect_right(kills, again.at) - 1
        if i < 0:
            report.duplicates_unexplained.append(
                f"p{again.partition}@{again.offset} {again.key} read at {first.at:.3f} and {again.at:.3f} "
                "before any restart"
            )
            continue
        restart = report.restarts[i]
        committed = restart.committed.get(again.partition, 0)
        if again.offset >= committed:
            report.duplicates_uncommitted += 1
            continue
        end = log_end.get((i, again.partition))
        if end is not None and end < max(committed, read_before.get((i, again.partition), 0)):
            report.duplicates_broker_rewind += 1  # the broker lost data below the position: reset
        else:
            report.duplicates_unexplained.append(
                f"p{again.partition}@{again.offset} re-read after restart {restart.index} below the "
                f"committed offset {committed} (log end after restart {end})"
            )


# --- group churn ---------------------------------------------------------------------------------------


@dataclass
class ChurnReport:
    broker: str
    topic: str
    actions: list[str] = field(default_factory=list)
    produced: int = 0
    acknowledged: int = 0
    send_failures: int = 0
    consumed: int = 0
    lost: list[str] = field(default_factory=list)
    duplicates_uncommitted: int = 0
    duplicates_unexplained: list[str] = field(default_factory=list)
    overlaps: list[str] = field(default_factory=list)
    reads_outside_ownership: list[str] = field(default_factory=list)
    rebalances: int = 0
    convergence_s: list[float] = field(default_factory=list)
    other_problems: list[str] = field(default_factory=list)
    warnings: int = 0
    elapsed_s: float = 0.0

    def problems(self) -> list[str]:
        found = list(self.other_problems)
        if self.lost:
            found.append(f"{len(self.lost)} acknowledged records were never read, e.g. {self.lost[:5]}")
        if self.overlaps:
            found.append(f"partitions owned by two members at once: {self.overlaps[:5]}")
        if self.reads_outside_ownership:
            found.append(
                f"records read by a member that did not own them: {self.reads_outside_ownership[:5]}"
            )
        if self.duplicates_unexplained:
            found.append(f"duplicates below a committed offset: {self.duplicates_unexplained[:5]}")
        return found

    def summary(self) -> str:
        worst = max(self.convergence_s, default=0.0)
        return (
            f"group churn on {self.broker}: {' '.join(self.actions)} in {self.elapsed_s:.1f} s; produced "
            f"{self.produced}, acked {self.acknowledged}, consumed {self.consumed}, lost {len(self.lost)}; "
            f"duplicates {self.duplicates_uncommitted} (uncommitted window) + "
            f"{len(self.duplicates_unexplained)} unexplained; {self.rebalances} rebalances; "
            f"{len(self.overlaps)} overlaps; worst convergence {worst:.2f} s"
        )


def _converged(members: list[MemberProcess], partitions: int) -> bool:
    owned = [m.owned for m in members]
    union: set[int] = set().union(*owned)
    return (
        (all(owned) or len(members) > partitions)
        and sum(len(o) for o in owned) == len(union)
        and union == set(range(partitions))
    )


class ChurnSchedule:
    """The actions of a churn round, one at a time: the ``actions`` given, or random ones until
    ``duration`` seconds from ``started`` (a ``time.monotonic()`` reading) have passed. Every run
    of random actions holds a join, a leave and a kill (and an outage, with ``outage``), in random
    order, as far as the member count allows: at least one member stays, at most
    ``max_members``. [test]"""

    def __init__(
        self,
        actions: list[str] | None,
        duration: float | None,
        rng: random.Random,
        *,
        started: float,
        outage: bool,
        max_members: int,
    ) -> None:
        if actions is None and duration is None:
            raise ValueError("give actions or duration")
        self._actions = actions
        self._ends = None if duration is None else started + duration
        self._rng = rng
        self._outage = outage
        self._max_members = max_members
        self._upcoming: list[str] = []
        self._step = 0

    def next(self, live: int) -> str | None:
        """The next action with ``live`` members running; None when the round is over."""
        if self._actions is not None:
            if self._step >= len(self._actions):
                return None
            self._step += 1
            return self._actions[self._step - 1]
        assert self._ends is not None
        if time.monotonic() >= self._ends:
            return None
        if not self._upcoming:
            self._upcoming = ["join", "leave", "kill", *(["outage"] if self._outage else [])]
            self._rng.shuffle(self._upcoming)
        allowed = {"join"} if live < 2 else {"leave", "kill"}
        if self._outage:
            allowed.add("outage")
        if 2 <= live < self._max_members:
            allowed.add("join")
        action = next((a for a in self._upcoming if a in allowed), sorted(allowed)[0])
        if action in self._upcoming:
            self._upcoming.remove(action)
        return action


class ChurnTarget(Protocol):
    """Where a group churns: a broker (behind a proxy) or librdkafka's mock cluster."""

    @property
    def kind(self) -> str: ...

    @property
    def bootstrap_servers(self) -> str: ...


def _security(target: object) -> dict[str, object]:
    """A churn target's client security settings (a :class:`ProxiedBroker`'s; none for the mock)."""
    security = getattr(target, "security", None)
    return dict(security) if isinstance(security, dict) else {}


def run_group_churn(
    pb: ChurnTarget,
    *,
    actions: list[str] | None = None,
    duration: float | None = None,
    rng: random.Random | None = None,
    partitions: int = 6,
    initial_members: int = 3,
    max_members: int = 4,
    rate: float = 300.0,
    strategy: str = "cooperative-sticky",
    group_protocol: str = "classic",
    create: Callable[[str, str, int], None] | None = None,
    outage: Callable[[], str] | None = None,
    converge_bound_s: float = 45.0,
    log: Log = _quiet,
) -> ChurnReport:
    """Members (child processes) join, leave (close) and are SIGKILLed while a producer writes.

    ``actions`` is a list of "join", "leave", "kill" and "outage"; with ``duration`` instead, actions
    are drawn from ``rng`` until that many seconds passed (an outage in each run of actions when
    ``outage`` is given). After each action the test waits until the live members own every
    partition, disjointly, before the next. At the end every acknowledged record must have been read
    by some member, and no two members may have owned a partition at once.

    ``group_protocol="consumer"`` makes the members KIP-848 members (the broker assigns; no
    ``strategy``, session or heartbeat settings). ``create(bootstrap, topic, partitions)`` creates the
    topic (default: CreateTopics). ``outage()`` takes the brokers away for a while and brings them
    back, returning what it did (for the action list).
    """
    if actions is None and duration is None:
        raise ValueError("give actions or duration")
    rng = rng or random.Random()
    started = time.monotonic()
    topic = unique_name("kx-churn")
    group = unique_name("kx-churn-group")
    report = ChurnReport(pb.kind, topic)
    security = _security(pb)
    if create is not None:
        create(pb.bootstrap_servers, topic, partitions)
    else:
        create_topic(pb.bootstrap_servers, topic, partitions, config=security)
    if group_protocol == "consumer":
        config = member_config(pb.bootstrap_servers, group, **{"group.protocol": "consumer", **security})
        for classic_only in GROUP_TIMINGS:
            config.pop(classic_only, None)
    else:
        config = member_config(
            pb.bootstrap_servers, group, **{"partition.assignment.strategy": strategy, **security}
        )
    everyone: list[MemberProcess] = []
    live: list[MemberProcess] = []
    serial = 0

    def spawn() -> None:
        nonlocal serial
        member = MemberProcess(f"m{serial}", config, topic)
        serial += 1
        everyone.append(member)
        live.append(member)

    def converge(action: str) -> bool:
        t0 = time.monotonic()
        ok = wait_until(lambda: _converged(live, partitions), converge_bound_s, interval=0.05)
        if not ok:
            owned = "; ".join(f"{m.name}={sorted(m.owned)}" for m in live)
            report.other_problems.append(
                f"after {action}: no complete, disjoint assignment within {converge_bound_s} s ({owned})"
            )
            return False
        report.convergence_s.append(time.monotonic() - t0)
        return True

    schedule = ChurnSchedule(
        actions, duration, rng, started=started, outage=outage is not None, max_members=max_members
    )
    producer = KeyedProducer(pb.bootstrap_servers, topic, rate=rate, config=security).start()
    try:
        for _ in range(initial_members):
            spawn()
        if not converge("start"):
            return report
        while (action := schedule.next(len(live))) is not None:
            if action == "join":
                spawn()
            elif action in ("leave", "kill"):
                victim = rng.choice(live)
                live.remove(victim)
                if action == "leave":
                    victim.close()
                else:
                    victim.kill()
                action = f"{action}:{victim.name}"
            elif action == "outage" and outage is not None:
                action = outage()
            else:
                raise ValueError(f"unknown churn action {action!r}")
            report.actions.append(action)
            log(f"churn: {action}")
            if not converge(action):
                break
            # Let the members read for a moment with the new assignment.
            marks = {m.name: m.read_count() for m in live}
            wait_until(_all_read_more(live, marks), 10.0)
        report.other_problems.extend(producer.stop())
        _, acked, _ = producer.snapshot()

        def missing() -> list[str]:
            read = {r.key for m in everyone for r in m.snapshot()[1]}
            return [k for k in acked if k not in read]

        wait_until(lambda: not missing(), WAIT_S, interval=0.2)
        report.lost = sorted(missing())
        _close_all(live)
    finally:
        if not producer.stopped:
            producer.stop(5.0)
        for m in everyone:
            m.cleanup()
        report.elapsed_s = time.monotonic() - started
    _analyse_churn(report, producer, everyone)
    return report


def _all_read_more(members: list[MemberProcess], marks: dict[str, int]) -> Callable[[], bool]:
    return lambda: all(m.read_count() > marks[m.name] for m in members if m.owned)


def _close_all(members: list[MemberProcess]) -> None:
    """Close members concurrently (one after another, each close would wait for a rebalance)."""
    threads = [threading.Thread(target=m.close, daemon=True) for m in members]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S)


def _analyse_churn(report: ChurnReport, producer: KeyedProducer, members: list[MemberProcess]) -> None:
    sent_at, acked, failed = producer.snapshot()
    report.produced = len(sent_at)
    report.acknowledged = len(acked)
    report.send_failures = len(failed)
    snapshots = [(m, *m.snapshot()) for m in members]
    ownership = Ownership.of((m.name, events, m.ended_at) for m, events, _, _ in snapshots)
    report.other_problems.extend(ownership.problems)
    report.overlaps = ownership.overlaps()
    reads = [r for _, _, member_reads, _ in snapshots for r in member_reads]
    commits: list[Commit] = sorted((c for _, _, _, cs in snapshots for c in cs), key=lambda c: c.at)
    report.consumed = len(reads)
    report.warnings = sum(len(m.warnings) for m in members)
    for m in members:
        if m.fatal:
            report.other_problems.append(f"{m.name} failed: {m.fatal} {m.stderr_tail()}")
        if m.bad_lines:
            report.other_problems.append(f"{m.name} wrote bad report lines: {m.bad_lines[:3]}")
    report.rebalances = len(
        {e.generation for _, events, _, _ in snapshots for e in events if e.kind == "assigned"}
    )
    for r in reads:
        if not ownership.owns(r.member, r.partition, r.at):
            report.reads_outside_ownership.append(f"{r.member} read p{r.partition}@{r.offset} at {r.at:.3f}")
    for _, again in _duplicate_reads(reads):
        committed = max(
            (c.offsets[again.partition] for c in commits if c.at < again.at and again.partition in c.offsets),
            default=0,
        )
        if again.offset >= committed:
            report.duplicates_uncommitted += 1
        else:
            report.duplicates_unexplained.append(
                f"{again.member} re-read p{again.partition}@{again.offset} at {again.at:.3f}, below the "
                f"offset {committed} committed before"
            )
