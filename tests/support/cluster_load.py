"""Steady load on a Kafka cluster while a test injects faults, and the books to check it against.
[test: one producer thread, one consumer thread, the kaflux network threads they start]

:class:`ClusterLoad` runs an idempotent kaflux :class:`~kaflux.Producer` (``acks=all``) sending
numbered keys round-robin over a topic's partitions at a steady rate, and a kaflux group
:class:`~kaflux.Consumer` reading them back, committing after every poll. Every send, ack and read
is booked with its ``time.monotonic()``, so that after a fault the test can say:

* lost: keys acknowledged to the producer that the consumer never read;
* duplicated: keys the consumer read more than once, and keys stored more than once in the log
  (read again from the start with assign(), independently of the group);
* recovery (:meth:`ClusterLoad.recovered_after`): how long after a moment (the fault, or its
  repair) the last stretch of more than a second without an acknowledgement (producer) or a read
  (consumer) on some partition ended.
"""

from __future__ import annotations

import collections
import functools
import itertools
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kaflux import Consumer, Producer, TopicPartition
from kaflux.errors import KafkaError
from kaflux.structs import RecordMetadata

WAIT_S = 120.0


@dataclass
class Books:
    """What happened to each key (``time.monotonic()`` seconds)."""

    sent_at: dict[bytes, float] = field(default_factory=dict)
    partition_of: dict[bytes, int] = field(default_factory=dict)
    acked_at: dict[bytes, float] = field(default_factory=dict)
    failed: dict[bytes, str] = field(default_factory=dict)
    read: list[tuple[bytes, int, float]] = field(default_factory=list)  # key, partition, read at
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Outcome:
    acked: int
    failed: int
    read: int
    lost: list[bytes]
    duplicated_reads: dict[bytes, int]
    duplicated_in_log: dict[bytes, int]
    failures: dict[str, int]  # the three commonest errors of failed sends, with their counts
    failed_but_stored: int  # sends reported failed whose record is in the log all the same

    def summary(self) -> str:
        return (
            f"acked {self.acked}, failed {self.failed}, read {self.read}, lost {len(self.lost)}, "
            f"duplicated reads {len(self.duplicated_reads)}, "
            f"duplicated in the log {len(self.duplicated_in_log)}, failed sends {self.failures} "
            f"({self.failed_but_stored} of them stored all the same)"
        )


class ClusterLoad:
    """Producer and group consumer on ``topic`` (``partitions`` partitions) via ``bootstrap``."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        group: str,
        *,
        rate: float = 200.0,
        producer_config: Mapping[str, object] | None = None,
        consumer_config: Mapping[str, object] | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.rate = rate
        self.books = Books()
        self._lock = threading.Lock()
        self._stop_producing = threading.Event()
        self._stop_consuming = threading.Event()
        self.errors: list[BaseException] = []
        self.producer_config: dict[str, object] = {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "request.timeout.ms": 10_000,
            "delivery.timeout.ms": 180_000,
            **(producer_config or {}),
        }
        self.consumer_config: dict[str, object] = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "request.timeout.ms": 10_000,
            **(consumer_config or {}),
        }
        self.producer: Producer | None = None
        self._producer_thread = threading.Thread(target=self._produce, name="load-producer", daemon=True)
        self._consumer_thread = threading.Thread(target=self._consume, name="load-consumer", daemon=True)

    # --- the threads ---

    def start(self) -> ClusterLoad:
        self._consumer_thread.start()
        self._producer_thread.start()
        return self

    def _produce(self) -> None:
        try:
            with Producer(self.producer_config) as producer:
                self.producer = producer  # for a test's look at its metadata (thread-safe calls only)
                seq = 0
                interval = 1.0 / self.rate
                next_at = time.monotonic()
                while not self._stop_producing.is_set():
                    key = f"k{seq:09d}".encode()
                    partition = seq % self.partitions
                    seq += 1
                    with self._lock:
                        self.books.sent_at[key] = time.monotonic()
                        self.books.partition_of[key] = partition
                    try:
                        producer.send(
                            self.topic,
                            key + b"-" + b"x" * 100,
                            key=key,
                            partition=partition,
                            callback=functools.partial(self._on_ack, key),
                        )
                    except KafkaError as e:  # e.g. max.block.ms waiting for metadata: never sent
                        with self._lock:
                            self.books.failed[key] = f"send: {e!r}"
                    next_at += interval
                    delay = next_at - time.monotonic()
                    if delay > 0:
                        self._stop_producing.wait(delay)
                    else:
                        next_at = time.monotonic()  # fell behind (e.g. blocked): don't burst
                producer.flush(WAIT_S)
        except BaseException as e:
            self.errors.append(e)

    def _on_ack(self, key: bytes, metadata: RecordMetadata, error: Exception | None) -> None:
        with self._lock:
            if error is None:
                self.books.acked_at[key] = time.monotonic()
            else:
                self.books.failed[key] = repr(error)

    def _consume(self) -> None:
        try:
            with Consumer(self.consumer_config) as consumer:
                consumer.subscribe([self.topic])
                while not self._stop_consuming.is_set():
                    try:
                        records = consumer.poll(0.2)
                    except KafkaError as e:
                        self._warn(f"poll: {e!r}")
                        continue
                    if not records:
                        continue
                    now = time.monotonic()
                    with self._lock:
                        self.books.read.extend((r.key or b"", r.partition, now) for r in records)
                    try:
                        consumer.commit_sync(timeout=WAIT_S)
                    except KafkaError as e:
                        self._warn(f"commit: {e!r}")
        except BaseException as e:
            self.errors.append(e)

    def _warn(self, text: str) -> None:
        with self._lock:
            self.books.warnings.append(text)

    # --- the test's view ---

    def acked_count(self) -> int:
        with self._lock:
            return len(self.books.acked_at)

    def read_keys(self) -> set[bytes]:
        with self._lock:
            return {k for k, _, _ in self.books.read}

    def wait_flowing(self, after: float, timeout: float = WAIT_S) -> None:
        """Wait until every partition had a record sent after ``after`` acked and read."""
        deadline = time.monotonic() + timeout
        while self.recovery(after) is None:
            assert not self.errors, self.errors
            assert time.monotonic() < deadline, (
                f"load not flowing on every partition within {timeout} s: {self.describe()}"
            )
            time.sleep(0.1)

    def recovery(self, since: float) -> tuple[float, float] | None:
        """``(producer, consumer)`` seconds from ``since`` until every partition had a record sent
        after ``since`` acknowledged / read; None while some partition has not."""
        with self._lock:
            first_ack: dict[int, float] = {}
            for key, at in self.books.acked_at.items():
                if self.books.sent_at[key] >= since:
                    p = self.books.partition_of[key]
                    first_ack[p] = min(first_ack.get(p, at), at)
            first_read: dict[int, float] = {}
            for key, p, at in self.books.read:
                if self.books.sent_at.get(key, 0.0) >= since:
                    first_read[p] = min(first_read.get(p, at), at)
        if len(first_ack) < self.partitions or len(first_read) < self.partitions:
            return None
        return max(first_ack.values()) - since, max(first_read.values()) - since

    def recovered_after(self, since: float, until: float, gap_s: float = 1.0) -> tuple[float, float]:
        """``(producer, consumer)``: seconds from ``since`` until the end of the last stretch, before
        ``until``, of more than ``gap_s`` in which some partition had nothing acknowledged / read
        (0.0 when there was none)."""
        with self._lock:
            acked: dict[int, list[float]] = collections.defaultdict(list)
            for key, at in self.books.acked_at.items():
                acked[self.books.partition_of[key]].append(at)
            read: dict[int, list[float]] = collections.defaultdict(list)
            for _, p, at in self.books.read:
                read[p].append(at)

        def last_gap_end(times: dict[int, list[float]]) -> float:
            end = since
            for p in range(self.partitions):
                points = [since, *sorted(t for t in times.get(p, []) if since < t <= until), until]
                for a, b in itertools.pairwise(points):
                    if b - a > gap_s and b < until:
                        end = max(end, b)
            return end - since

        return last_gap_end(acked), last_gap_end(read)

    def max_ack_gap(self, start: float, end: float) -> tuple[float, int, float]:
        """The longest time, within [start, end], that some partition acknowledged nothing:
        ``(seconds, partition, when it began)``."""
        with self._lock:
            times: dict[int, list[float]] = collections.defaultdict(list)
            for key, at in self.books.acked_at.items():
                if start <= at <= end:
                    times[self.books.partition_of[key]].append(at)
        worst = (0.0, 0, start)
        for p in range(self.partitions):
            points = [start, *sorted(times.get(p, [])), end]
            for a, b in itertools.pairwise(points):
                if b - a > worst[0]:
                    worst = (b - a, p, a)
        return worst

    def ack_times(self) -> list[tuple[int, float]]:
        """``(partition, acknowledged at)`` of every acknowledged record so far."""
        with self._lock:
            return [(self.books.partition_of[k], at) for k, at in self.books.acked_at.items()]

    def describe(self) -> str:
        with self._lock:
            return (
                f"sent {len(self.books.sent_at)}, acked {len(self.books.acked_at)}, failed "
                f"{len(self.books.failed)}, read {len(self.books.read)}, warnings {self.books.warnings[-3:]}"
            )

    def finish(self, timeout: float = WAIT_S) -> Outcome:
        """Stop producing (flush), let the consumer read every acknowledged key, stop it, and
        read the whole topic again from the start to count what the log holds."""
        self._stop_producing.set()
        self._producer_thread.join(timeout)
        assert not self._producer_thread.is_alive(), "the producer did not flush and close in time"
        with self._lock:
            acked = set(self.books.acked_at)
        deadline = time.monotonic() + timeout
        while not acked <= self.read_keys() and time.monotonic() < deadline and not self.errors:
            time.sleep(0.1)
        self._stop_consuming.set()
        self._consumer_thread.join(timeout)
        assert not self._consumer_thread.is_alive(), "the consumer did not close in time"
        assert not self.errors, self.errors
        in_log = self._read_log(len(self.books.sent_at), timeout)
        with self._lock:
            reads = collections.Counter(k for k, _, _ in self.books.read)
            return Outcome(
                acked=len(acked),
                failed=len(self.books.failed),
                read=len(reads),
                lost=sorted(acked - set(reads)),
                duplicated_reads={k: n for k, n in reads.items() if n > 1},
                duplicated_in_log={k: n for k, n in in_log.items() if n > 1},
                failures=dict(collections.Counter(map(_kind, self.books.failed.values())).most_common(3)),
                failed_but_stored=sum(1 for k in self.books.failed if in_log[k]),
            )

    def _read_log(self, at_most: int, timeout: float) -> collections.Counter[bytes]:
        counts: collections.Counter[bytes] = collections.Counter()
        config = {"bootstrap.servers": self.bootstrap, "auto.offset.reset": "earliest"}
        with Consumer(config) as consumer:
            tps = [TopicPartition(self.topic, p) for p in range(self.partitions)]
            consumer.assign(tps)
            ends = consumer.end_offsets(tps, timeout)
            deadline = time.monotonic() + timeout
            while any(consumer.position(tp, timeout) < ends[tp] for tp in tps):
                assert time.monotonic() < deadline, f"could not read the log to its end {ends}"
                counts.update(r.key or b"" for r in consumer.poll(0.5))
        assert sum(counts.values()) >= len(counts)
        return counts


def _kind(error: str) -> str:
    return error[:240]


def keys_summary(keys: Iterable[bytes], limit: int = 5) -> str:
    keys = list(keys)
    return f"{len(keys)}: {[k.decode() for k in keys[:limit]]}{' ...' if len(keys) > limit else ''}"
