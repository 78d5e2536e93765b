"""The per-record cost of OpenTelemetry tracing: kaflux (``kaflux.opentelemetry``, sync and
asyncio) against confluent-kafka with ``opentelemetry-instrumentation-confluent-kafka``, plain
and traced, producing and consuming, in the same run.

    python bench/bench_tracing.py                         # 100k records, 3 rounds, embedded Tansu
    python bench/bench_tracing.py --records 20000 --rounds 1      # a quick look

Each run is one child process; rounds are interleaved (every case once per round). Traced
runs use the OpenTelemetry SDK as a service would: a ``TracerProvider`` with a
``BatchSpanProcessor`` whose exporter drops the spans (no I/O, the processor's work counted).
Producing: ``send()`` per record (8-byte keys, 100-byte values), then ``flush()``; kaflux's
``send`` spans last to the acknowledgement, confluent's instrumentation ends its span when
``produce()`` returns. Consuming: a backlog written by a traced kaflux producer (every record
has a ``traceparent`` header), read from the beginning, ``poll()`` (kaflux, max.poll.records
500) or ``consume(500)`` (confluent-kafka); kaflux makes a poll span and a process span per
record, confluent's instrumentation a recv span and a process span per call (with a link per
record). CPU is the child's (all threads) from the first call to the last acknowledgement or
record. The table shows per case the median CPU µs per record and wall time, and per client
the traced minus plain CPU µs per record: the cost of tracing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from typing import Any

from consume_clients import cpu_seconds

#: case -> (side, client)
CASES = {
    "produce kaflux": ("produce", "kaflux"),
    "produce kaflux-aio": ("produce", "kaflux-aio"),
    "produce confluent": ("produce", "confluent"),
    "consume kaflux": ("consume", "kaflux"),
    "consume kaflux-aio": ("consume", "kaflux-aio"),
    "consume confluent": ("consume", "confluent"),
}


def _tracer_provider() -> Any:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Dropping(SpanExporter):
        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Dropping()))
    return provider


def _records(count: int) -> list[tuple[bytes, bytes]]:
    rng = random.Random(1)
    pool = [rng.randbytes(50).hex().encode() for _ in range(4096)]
    return [(b"%08d" % i, pool[i & 4095]) for i in range(count)]


def _produce(client: str, traced: bool, bootstrap: str, topic: str, count: int) -> tuple[float, float]:
    records = _records(count)
    provider = _tracer_provider() if traced else None
    if client == "confluent":
        import confluent_kafka

        producer: Any = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        if traced:
            from opentelemetry.instrumentation.confluent_kafka import ConfluentKafkaInstrumentor

            producer = ConfluentKafkaInstrumentor().instrument_producer(producer, provider)
        producer.produce(topic, b"warm-up")
        producer.flush(30)
        t0, c0 = time.perf_counter(), cpu_seconds()
        for i, (key, value) in enumerate(records):
            while True:
                try:
                    producer.produce(topic, value, key=key)
                    break
                except BufferError:
                    producer.poll(0.05)
            if i % 1000 == 0:
                producer.poll(0)
        producer.flush(120)
        return time.perf_counter() - t0, cpu_seconds() - c0
    if traced:
        from kaflux.opentelemetry import KafluxInstrumentor

        KafluxInstrumentor().instrument(tracer_provider=provider)
    from kaflux import Producer
    from kaflux.aio import AsyncProducer

    config = {"bootstrap.servers": bootstrap}
    if client == "kaflux":
        with Producer(config) as sync_producer:
            sync_producer.send(topic, b"warm-up").result(30)
            t0, c0 = time.perf_counter(), cpu_seconds()
            send = sync_producer.send
            for key, value in records:
                send(topic, value, key)
            sync_producer.flush(120)
            return time.perf_counter() - t0, cpu_seconds() - c0

    async def run() -> tuple[float, float]:
        async with AsyncProducer(config) as producer:
            await (await producer.send(topic, b"warm-up"))
            t0, c0 = time.perf_counter(), cpu_seconds()
            send = producer.send
            for key, value in records:
                await send(topic, value, key)
            await producer.flush(120)
            return time.perf_counter() - t0, cpu_seconds() - c0

    return asyncio.run(run())


def _consume(client: str, traced: bool, bootstrap: str, topic: str, count: int) -> tuple[float, float]:
    provider = _tracer_provider() if traced else None
    group = f"bench-tracing-{uuid.uuid4().hex[:8]}"
    if client == "confluent":
        import confluent_kafka

        consumer: Any = confluent_kafka.Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
        )
        if traced:
            from opentelemetry.instrumentation.confluent_kafka import ConfluentKafkaInstrumentor

            consumer = ConfluentKafkaInstrumentor().instrument_consumer(consumer, provider)
        # the instrumentation's proxy forwards consume() and subscribe(), not assign()
        plain = consumer.original_consumer() if traced else consumer
        plain.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
        got = 0
        t0, c0 = time.perf_counter(), cpu_seconds()
        while got < count:
            for message in consumer.consume(500, 1.0):
                if message.error() is None:
                    got += 1
                    len(message.value())
        elapsed = time.perf_counter() - t0, cpu_seconds() - c0
        consumer.close()
        return elapsed
    if traced:
        from kaflux.opentelemetry import KafluxInstrumentor

        KafluxInstrumentor().instrument(tracer_provider=provider)
    from kaflux import Consumer, TopicPartition
    from kaflux.aio import AsyncConsumer

    config = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "max.poll.records": 500,
    }
    if client == "kaflux":
        sync_consumer = Consumer(config)
        sync_consumer.assign([TopicPartition(topic, 0)])
        got = 0
        t0, c0 = time.perf_counter(), cpu_seconds()
        while got < count:
            for record in sync_consumer.poll(1.0):
                got += 1
                len(record.value)
        elapsed = time.perf_counter() - t0, cpu_seconds() - c0
        sync_consumer.close()
        return elapsed

    async def run() -> tuple[float, float]:
        async with AsyncConsumer(config) as consumer:
            consumer.assign([TopicPartition(topic, 0)])
            got = 0
            t0, c0 = time.perf_counter(), cpu_seconds()
            while got < count:
                for record in await consumer.poll(1.0):
                    got += 1
                    len(record.value)
            return time.perf_counter() - t0, cpu_seconds() - c0

    return asyncio.run(run())


def _child(spec: str) -> None:
    side, client, traced, bootstrap, topic, count = spec.split("|")
    run = _produce if side == "produce" else _consume
    wall, cpu = run(client, traced == "1", bootstrap, topic, int(count))
    print(json.dumps({"wall": wall, "cpu": cpu}))


def _backlog(bootstrap: str, topic: str, count: int) -> None:
    """``count`` records in partition 0 of ``topic``, each with a traceparent header (a traced
    kaflux producer writes them)."""
    from kaflux import AdminClient, NewTopic, Producer
    from kaflux.opentelemetry import KafluxInstrumentor

    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 1)], timeout=30)
    instrumentor = KafluxInstrumentor()
    instrumentor.instrument(tracer_provider=_tracer_provider())
    try:
        with Producer({"bootstrap.servers": bootstrap}) as producer:
            for key, value in _records(count):
                producer.send(topic, value, key)
            producer.flush(120)
    finally:
        instrumentor.uninstrument()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bootstrap-servers", help="a cluster to use instead of an embedded Tansu")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, from {', '.join(CASES)}")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child)
        return
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    broker = None
    bootstrap = args.bootstrap_servers
    if bootstrap is None:
        from kaflux.devbrokers.brokers import start_broker

        broker = start_broker("tansu")
        bootstrap = broker.bootstrap_servers
    try:
        backlog = f"bench-tracing-backlog-{uuid.uuid4().hex[:8]}"
        if any(CASES[c][0] == "consume" for c in cases):
            _backlog(bootstrap, backlog, args.records)
        results: dict[tuple[str, bool], list[tuple[float, float]]] = {}
        for round_ in range(args.rounds):
            for case in cases:
                side, client = CASES[case]
                for traced in (False, True):
                    topic = backlog if side == "consume" else f"bench-tracing-{uuid.uuid4().hex[:8]}"
                    flag = "1" if traced else "0"
                    spec = "|".join([side, client, flag, bootstrap, topic, str(args.records)])
                    child = subprocess.run(
                        [sys.executable, __file__, "--child", spec],
                        capture_output=True,
                        text=True,
                        timeout=600,
                    )
                    if child.returncode != 0:
                        raise SystemExit(f"{case} traced={traced} failed:\n{child.stderr}")
                    out = child.stdout
                    measured = json.loads(out.strip().splitlines()[-1])
                    results.setdefault((case, traced), []).append((measured["wall"], measured["cpu"]))
                    print(f"round {round_ + 1} {case} traced={traced}: {measured}", file=sys.stderr)
    finally:
        if broker is not None:
            broker.cleanup()
    print(f"{args.records:,} records per run, {args.rounds} interleaved rounds, {os.cpu_count()} CPUs")
    print(
        "| case | plain CPU µs/record | traced CPU µs/record | tracing cost µs/record "
        "| plain wall s | traced wall s |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for case in cases:
        plain = results[(case, False)]
        traced_runs = results[(case, True)]
        plain_us = statistics.median(cpu for _, cpu in plain) / args.records * 1e6
        traced_us = statistics.median(cpu for _, cpu in traced_runs) / args.records * 1e6
        plain_wall = statistics.median(w for w, _ in plain)
        traced_wall = statistics.median(w for w, _ in traced_runs)
        print(
            f"| {case} | {plain_us:.2f} | {traced_us:.2f} | {traced_us - plain_us:.2f} | "
            f"{plain_wall:.2f} | {traced_wall:.2f} |"
        )


if __name__ == "__main__":
    main()
