"""Avro with the Schema Registry: kaflux's deserializer in ``poll()`` against confluent-kafka's
``AvroDeserializer``, and Spark's typed Avro read against the binary read, in one run.

    python bench/bench_schemas.py --records 200000 --rounds 3

It starts an embedded noida-db broker and the tests' Schema Registry double, produces
``--records`` Avro page views (the main job's ``PageView``: three strings, a
``timestamp-millis`` and a long; ~60 B each) into one topic of ``--partitions`` partitions, then:

1. **decode only** (no broker): the same framed records decoded by kaflux's and by
   confluent-kafka's ``AvroDeserializer``, interleaved rounds;
2. **poll()**: each client reads the whole topic and decodes every value: kaflux ``Consumer``
   with ``value_deserializer=AvroDeserializer(...)``, confluent-kafka's ``Consumer`` calling its
   ``AvroDeserializer`` on each message, and kaflux ``poll()`` without a deserializer (bytes);
3. **Spark**: ``spark.read.format("kaflux")`` of the topic into Spark's ``noop`` sink (every row
   and column materialised), binary and with ``value.format=avro``; and the same for a topic of
   the same events as JSON Schema values (``value.format=json``).

CPU is the process's CPU time (all its threads), per record.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from kaflux import AdminClient, Consumer, NewTopic, Producer, TopicPartition  # noqa: E402
from kaflux.devbrokers.kinds import start_broker  # noqa: E402
from kaflux.schema_registry import SchemaRegistryClient  # noqa: E402
from kaflux.schema_registry.avro import AvroDeserializer, AvroSerializer  # noqa: E402
from kaflux.serialization import SerializationContext  # noqa: E402
from pyspark_kaflux.pipeline import PAGE_VIEW_AVRO, page_view_event  # noqa: E402

from support.schema_registry import SchemaRegistryDouble  # noqa: E402

TOPIC = "views"
JSON_TOPIC = "views-json"


def produce(bootstrap: str, registry: str, count: int, partitions: int) -> list[bytes]:
    """Produce ``count`` page views; returns a sample of the framed values (for decode-only)."""
    import random

    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(TOPIC, partitions)], timeout=30)
    rng = random.Random(7)
    sample: list[bytes] = []
    with SchemaRegistryClient({"url": registry}) as client:
        serializer = AvroSerializer(client, PAGE_VIEW_AVRO)
        ctx = SerializationContext(TOPIC, "value")
        config = {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 262144}
        with Producer(config) as producer:
            for i in range(count):
                value = serializer(page_view_event(rng, 1_790_000_000_000 + i), ctx)
                assert value is not None
                if i < 100_000:
                    sample.append(value)
                producer.send(TOPIC, value, partition=i % partitions)
            producer.flush(120)
    return sample


#: the same events as JSON Schema values (``value.format=json`` in the Spark part)
PAGE_VIEW_JSON = json.dumps(
    {
        "type": "object",
        "title": "PageView",
        "properties": {
            "user": {"type": "string"},
            "page": {"type": "string"},
            "country": {"type": "string"},
            "event_time": {"type": "integer"},
            "duration_ms": {"type": "integer"},
        },
    }
)


def produce_json(bootstrap: str, registry: str, count: int, partitions: int) -> None:
    import random

    from kaflux.schema_registry.json_schema import JsonSchemaSerializer

    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(JSON_TOPIC, partitions)], timeout=30)
    rng = random.Random(7)
    with SchemaRegistryClient({"url": registry}) as client:
        serializer = JsonSchemaSerializer(client, PAGE_VIEW_JSON)
        config = {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 262144}
        with Producer(config, value_serializer=serializer) as producer:
            for i in range(count):
                producer.send(
                    JSON_TOPIC, page_view_event(rng, 1_790_000_000_000 + i), partition=i % partitions
                )
            producer.flush(120)


def timed(fn: Callable[[], int]) -> tuple[int, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    n = fn()
    return n, time.perf_counter() - wall, time.process_time() - cpu


def decode_only(registry: str, sample: list[bytes], rounds: int) -> list[str]:
    from confluent_kafka.schema_registry import SchemaRegistryClient as CkRegistry
    from confluent_kafka.schema_registry.avro import AvroDeserializer as CkAvroDeserializer
    from confluent_kafka.serialization import MessageField
    from confluent_kafka.serialization import SerializationContext as CkContext

    ours = AvroDeserializer(SchemaRegistryClient({"url": registry}))
    theirs = CkAvroDeserializer(CkRegistry({"url": registry}))
    ctx, ck_ctx = SerializationContext(TOPIC, "value"), CkContext(TOPIC, MessageField.VALUE)
    ours(sample[0], ctx), theirs(sample[0], ck_ctx)  # warm the schema caches

    def run_ours() -> int:
        for data in sample:
            ours(data, ctx)
        return len(sample)

    def run_theirs() -> int:
        for data in sample:
            theirs(data, ck_ctx)
        return len(sample)

    return rows_for(
        {"kaflux AvroDeserializer": run_ours, "confluent-kafka AvroDeserializer": run_theirs}, rounds
    )


def consume(bootstrap: str, registry: str, count: int, partitions: int, rounds: int) -> list[str]:
    import confluent_kafka as ck
    from confluent_kafka.schema_registry import SchemaRegistryClient as CkRegistry
    from confluent_kafka.schema_registry.avro import AvroDeserializer as CkAvroDeserializer
    from confluent_kafka.serialization import MessageField
    from confluent_kafka.serialization import SerializationContext as CkContext

    tps = [TopicPartition(TOPIC, p) for p in range(partitions)]

    def kaflux_poll(deserializer: Any) -> Callable[[], int]:
        def run() -> int:
            config = {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}
            with Consumer(config, value_deserializer=deserializer) as consumer:
                consumer.assign(tps)
                seen = 0
                deadline = time.monotonic() + 120
                while seen < count and time.monotonic() < deadline:
                    for record in consumer.poll(0.5):
                        record.value  # noqa: B018 - touch it
                        seen += 1
            return seen

        return run

    def confluent_poll() -> int:
        deserializer = CkAvroDeserializer(CkRegistry({"url": registry}))
        consumer = ck.Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"bench-{time.monotonic_ns()}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "queued.min.messages": 1_000_000,
            }
        )
        try:
            consumer.assign([ck.TopicPartition(TOPIC, p, 0) for p in range(partitions)])
            seen = 0
            deadline = time.monotonic() + 120
            while seen < count and time.monotonic() < deadline:
                for message in consumer.consume(500, 0.5):
                    if message.error() is None:
                        deserializer(message.value(), CkContext(TOPIC, MessageField.VALUE))
                        seen += 1
            return seen
        finally:
            consumer.close()

    client = SchemaRegistryClient({"url": registry})
    jobs = {
        "kaflux poll() + AvroDeserializer": kaflux_poll(AvroDeserializer(client)),
        "confluent-kafka consume(500) + AvroDeserializer": confluent_poll,
        "kaflux poll(), bytes (no decoding)": kaflux_poll(None),
    }
    return rows_for(jobs, rounds)


def rows_for(jobs: dict[str, Callable[[], int]], rounds: int) -> list[str]:
    results: dict[str, list[tuple[int, float, float]]] = {name: [] for name in jobs}
    for _ in range(rounds):
        for name, job in jobs.items():
            results[name].append(timed(job))
    lines = ["| job | rec/s (median) | min-max | µs CPU/record |", "|---|---|---|---|"]
    for name, runs in results.items():
        rates = [n / wall for n, wall, _ in runs]
        cpu = statistics.median(cpu / n * 1e6 for n, _, cpu in runs)
        lines.append(
            f"| {name} | {statistics.median(rates):,.0f} | {min(rates):,.0f}-{max(rates):,.0f} | {cpu:.2f} |"
        )
    return lines


def spark_reads(bootstrap: str, registry: str, count: int, rounds: int) -> list[str]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark_kaflux.pipeline import spark_session

    spark = spark_session("local[2]")
    try:

        def read(topic: str, value_format: str) -> Callable[[], int]:
            def run() -> int:
                reader = (
                    spark.read.format("kaflux")
                    .option("kafka.bootstrap.servers", bootstrap)
                    .option("subscribe", topic)
                )
                if value_format != "binary":
                    reader = reader.option("value.format", value_format).option(
                        "schema.registry.url", registry
                    )
                reader.load().write.format("noop").mode("overwrite").save()
                return count

            return run

        jobs = {
            "Avro topic, binary value": read(TOPIC, "binary"),
            "Avro topic, value.format=avro (struct)": read(TOPIC, "avro"),
            "JSON topic, binary value": read(JSON_TOPIC, "binary"),
            "JSON topic, value.format=json (struct)": read(JSON_TOPIC, "json"),
        }
        lines: list[str] = ["| job | rows/s (median) | min-max | seconds (median) |", "|---|---|---|---|"]
        results: dict[str, list[float]] = {name: [] for name in jobs}
        for job in jobs.values():  # warm-up: Spark's planning, the Python workers, the caches
            job()
        for _ in range(rounds):
            for name, job in jobs.items():
                _, wall, _ = timed(job)
                results[name].append(wall)
        for name, walls in results.items():
            rates = [count / w for w in walls]
            lines.append(
                f"| {name} | {statistics.median(rates):,.0f} | {min(rates):,.0f}-{max(rates):,.0f} "
                f"| {statistics.median(walls):.1f} |"
            )
        walls = [statistics.median(w) for w in results.values()]
        lines.append(
            f"\ntyped / binary throughput: Avro {walls[0] / walls[1]:.2f}x, JSON {walls[2] / walls[3]:.2f}x"
        )
        return lines
    finally:
        spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-spark", action="store_true")
    args = parser.parse_args()
    with start_broker("noida") as broker, SchemaRegistryDouble() as registry:
        sample = produce(broker.bootstrap_servers, registry.url, args.records, args.partitions)
        if not args.skip_spark:
            produce_json(broker.bootstrap_servers, registry.url, args.records, args.partitions)
        print(f"## decode only ({len(sample):,} records, {args.rounds} rounds)\n")
        print("\n".join(decode_only(registry.url, sample, args.rounds)))
        print(f"\n## poll() over {args.records:,} records\n")
        print(
            "\n".join(
                consume(broker.bootstrap_servers, registry.url, args.records, args.partitions, args.rounds)
            )
        )
        if not args.skip_spark:
            print(f"\n## Spark batch read of {args.records:,} records\n")
            print("\n".join(spark_reads(broker.bootstrap_servers, registry.url, args.records, args.rounds)))


if __name__ == "__main__":
    main()
