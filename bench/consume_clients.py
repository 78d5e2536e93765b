"""Shared parts of the consume benchmarks: the backlog, and one reader per client. [io]

Not a benchmark itself: ``bench_consume.py`` and ``bench_compare.py`` import it (they live in
the same directory, which Python puts on the path of a script). Every reader runs in the
process it is called in -- the benchmarks start one child process per run -- assigns all
partitions of the topic, reads from the beginning until it has ``records`` records, touches
every value (its length) and returns a :class:`Measurement`. Time and CPU are counted from the
first poll to the last record (imports, connecting and metadata excluded); peak RSS is the
process's high-water mark (``VmHWM``), start-up included.
"""

from __future__ import annotations

import random
import resource
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

MiB = 1024 * 1024
#: A reader that has not finished after this many seconds gives up (and reports what it read).
DEADLINE_S = 300.0


def _status_mib(field: str) -> float:
    """A size field of Linux ``/proc/self/status`` (``VmRSS``, ``VmHWM``...), in MiB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def current_rss_mib() -> float:
    """Resident set size now, in MiB."""
    return _status_mib("VmRSS")


def peak_rss_mib() -> float:
    """The process's peak resident set size so far, in MiB: ``VmHWM``, which starts afresh
    with the program (``ru_maxrss`` does not: it keeps the peak of the parent that forked it)."""
    return _status_mib("VmHWM")


def cpu_seconds() -> float:
    """User + system CPU time of the whole process (all its threads) so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def produce(bootstrap: str, topic: str, records: int, partitions: int) -> None:
    """The backlog: ``records`` records of 8-byte keys and 100-byte values (a pool of 4096
    random hex strings), written with confluent-kafka (fast, and independent of kaflux)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    rng = random.Random(1)
    pool = [rng.randbytes(50).hex().encode() for _ in range(4096)]
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "queue.buffering.max.messages": 1_000_000}
    )
    for i in range(records):
        while True:
            try:
                producer.produce(topic, pool[i & 4095], b"%08d" % i)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10000 == 0:
            producer.poll(0)
    if producer.flush(120) != 0:
        raise SystemExit("backlog not fully produced")


@dataclass
class Measurement:
    """One reader's run."""

    records: int
    seconds: float
    cpu_s: float
    peak_rss_mib: float
    rss_before_mib: float
    value_bytes: int = 0
    #: kaflux only: the most bytes its fetch buffer held (``fetch-buffer-bytes``, sampled), else NaN
    max_buffered_mib: float = float("nan")

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "records_per_s": self.records_per_s}


class Meter:
    """Clock and CPU from :meth:`start` to :meth:`stop`."""

    def __init__(self) -> None:
        self.rss_before = current_rss_mib()
        self._t0 = self._cpu0 = 0.0
        self.deadline = 0.0

    def start(self) -> None:
        self._t0 = time.perf_counter()
        self._cpu0 = cpu_seconds()
        self.deadline = time.monotonic() + DEADLINE_S

    def stop(self, records: int, value_bytes: int, max_buffered_mib: float = float("nan")) -> Measurement:
        seconds = time.perf_counter() - self._t0
        return Measurement(
            records=records,
            seconds=seconds,
            cpu_s=cpu_seconds() - self._cpu0,
            peak_rss_mib=peak_rss_mib(),
            rss_before_mib=self.rss_before,
            value_bytes=value_bytes,
            max_buffered_mib=max_buffered_mib,
        )


# --- kaflux --------------------------------------------------------------------------------------------


#: metrics() asks the network thread for its half (about 0.3 ms): the buffer's size is sampled
#: every this many polls, not after each, so that it does not weigh on the rate measured
BUFFER_SAMPLE_EVERY = 50


def fetch_buffer_bytes(consumer: Any) -> int:
    """The bytes kaflux's fetch buffer holds now (its ``fetch-buffer-bytes`` metric)."""
    value = consumer.metrics()["kaflux-consumer-metrics"]["fetch-buffer-bytes"]
    return int(value)


def _kaflux_consumer(bootstrap: str, topic: str, config: dict[str, Any]) -> Any:
    from kaflux import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **config,
        }
    )
    partitions = consumer.partitions_for(topic, timeout=30)
    consumer.assign([TopicPartition(topic, p.partition) for p in partitions])
    return consumer


def read_kaflux_poll(bootstrap: str, topic: str, records: int, config: dict[str, Any]) -> Measurement:
    """kaflux ``poll()``: one ConsumerRecord per record."""
    consumer = _kaflux_consumer(bootstrap, topic, config)
    meter = Meter()
    seen = value_bytes = 0
    max_buffered = 0
    meter.start()
    polls = 0
    while seen < records and time.monotonic() < meter.deadline:
        for record in consumer.poll(1.0):
            value_bytes += len(record.value)
            seen += 1
        polls += 1
        if polls % BUFFER_SAMPLE_EVERY == 0:
            max_buffered = max(max_buffered, fetch_buffer_bytes(consumer))
    result = meter.stop(seen, value_bytes, max_buffered / MiB)
    consumer.close(5)
    return result


def read_kaflux_arrow(bootstrap: str, topic: str, records: int, config: dict[str, Any]) -> Measurement:
    """kaflux ``poll_arrow()``: one Arrow batch per poll, no per-record object; the values'
    bytes are summed from the offsets buffer of the value column (read in place: a batch may
    be a slice of a larger one, its offsets starting at the column's ``offset``)."""
    import pyarrow  # noqa: F401  # an Arrow application has it loaded before it polls

    consumer = _kaflux_consumer(bootstrap, topic, config)
    meter = Meter()
    seen = value_bytes = 0
    max_buffered = polls = 0
    meter.start()
    while seen < records and time.monotonic() < meter.deadline:
        batch = consumer.poll_arrow(1.0)
        n = batch.num_rows
        if n:
            values = batch.column(1)
            offsets = memoryview(values.buffers()[1]).cast("i")  # int32 offsets of the value column
            value_bytes += offsets[values.offset + n] - offsets[values.offset]
            seen += n
        polls += 1
        if polls % BUFFER_SAMPLE_EVERY == 0:
            max_buffered = max(max_buffered, fetch_buffer_bytes(consumer))
    result = meter.stop(seen, value_bytes, max_buffered / MiB)
    consumer.close(5)
    return result


def read_kaflux_raw_fetch(bootstrap: str, topic: str, records: int, config: dict[str, Any]) -> Measurement:
    """The raw fetch ceiling of kaflux: its network thread fetches as for ``poll()``; this
    takes the fetched responses off the fetch buffer, counts records from the batch headers
    (no CRC check, no decompression, no decoding) and moves the positions past them."""
    import struct

    from kaflux.consumer.subscription_state import FetchPosition

    consumer = _kaflux_consumer(bootstrap, topic, config)
    buffer = consumer._fetch_buffer
    subscription = consumer._subscription
    header = struct.Struct(">qi")
    counts = struct.Struct(">i")
    meter = Meter()
    seen = value_bytes = 0
    max_buffered = 0
    meter.start()
    consumer.poll(0)  # the first PollEvent: positions get validated and fetching starts
    while seen < records and time.monotonic() < meter.deadline:
        if not buffer.await_not_empty(1.0):
            continue
        max_buffered = max(max_buffered, buffer.size_bytes())
        while (fetch := buffer.poll()) is not None:
            view = fetch.records
            size = len(view) if view is not None else 0
            pos, next_offset = 0, fetch.fetch_offset
            while pos + 61 <= size:
                base, length = header.unpack_from(view, pos)
                end = pos + 12 + length
                if end > size:
                    break
                last = base + counts.unpack_from(view, pos + 23)[0]
                if last >= next_offset:
                    seen += counts.unpack_from(view, pos + 57)[0]
                    value_bytes += length
                    next_offset = last + 1
                pos = end
            subscription.advance(
                fetch.tp, FetchPosition(next_offset, None), expected_offset=fetch.fetch_offset
            )
            buffer.release(fetch)
        consumer._thread.wakeup()  # the partitions are fetchable again
    result = meter.stop(seen, value_bytes, max_buffered / MiB)
    consumer.close(5)
    return result


# --- other clients --------------------------------------------------------------------------------------


def read_confluent(bootstrap: str, topic: str, records: int, config: dict[str, Any]) -> Measurement:
    """confluent-kafka ``consume(500)`` with ``config`` on top of its defaults."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False, **config}
    )
    partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    meter = Meter()
    seen = value_bytes = 0
    meter.start()
    while seen < records and time.monotonic() < meter.deadline:
        for message in consumer.consume(num_messages=500, timeout=1.0):
            if message.error() is None:
                value_bytes += len(message.value())
                seen += 1
    result = meter.stop(seen, value_bytes)
    consumer.close()
    return result


def read_aiokafka(bootstrap: str, topic: str, records: int, config: dict[str, Any]) -> Measurement:
    """aiokafka ``getmany(max_records=500)``."""
    import asyncio

    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> Measurement:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest", **config
        )
        # Its metadata cache holds only the topics it is asked about (on Apache Kafka, none after
        # start()), and topics() does not fill it: a group-less subscription does, then assign.
        consumer.subscribe([topic])
        await consumer.start()
        partitions = consumer.partitions_for_topic(topic) or set()
        if not partitions:
            raise SystemExit(f"aiokafka: no partitions of {topic!r} in its metadata")
        consumer.unsubscribe()
        consumer.assign([TopicPartition(topic, p) for p in partitions])
        meter = Meter()
        seen = value_bytes = 0
        meter.start()
        while seen < records and time.monotonic() < meter.deadline:
            for batch in (await consumer.getmany(timeout_ms=1000, max_records=500)).values():
                for message in batch:
                    value_bytes += len(message.value)
                    seen += 1
        result = meter.stop(seen, value_bytes)
        await consumer.stop()
        return result

    return asyncio.run(run())


def read_kafka_python(bootstrap: str, topic: str, records: int, config: dict[str, Any]) -> Measurement:
    """kafka-python ``poll(max_records=500)``."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest", **config
    )
    partitions = consumer.partitions_for_topic(topic) or set()
    consumer.assign([TopicPartition(topic, p) for p in partitions])
    consumer.seek_to_beginning()
    meter = Meter()
    seen = value_bytes = 0
    meter.start()
    while seen < records and time.monotonic() < meter.deadline:
        for batch in consumer.poll(timeout_ms=1000, max_records=500).values():
            for message in batch:
                value_bytes += len(message.value)
                seen += 1
    result = meter.stop(seen, value_bytes)
    consumer.close()
    return result


Reader = Callable[[str, str, int, dict[str, Any]], Measurement]

#: The readers by client name.
READERS: dict[str, Reader] = {
    "kaflux-poll": read_kaflux_poll,
    "kaflux-arrow": read_kaflux_arrow,
    "kaflux-raw-fetch": read_kaflux_raw_fetch,
    "confluent-kafka": read_confluent,
    "aiokafka": read_aiokafka,
    "kafka-python": read_kafka_python,
}
