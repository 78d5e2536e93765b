"""The main job: a Spark Structured Streaming pipeline over Kafka through ``kaflux``.

``python -m pyspark_kaflux.pipeline`` (``bash scripts/demo.sh``, the README's first Quick start command,
runs it; see docs/spark.md):

1. starts an embedded broker on a free loopback port (noida-db, whose offset lookups are
   exact) unless ``--bootstrap-servers`` names a cluster;
2. starts the streaming query, and once it runs, produces a stream of JSON page-view events
   with :class:`kaflux.Producer` in a background thread: the first hundred alone, the rest once
   the query has read them (its first batch with data is Spark's slowest), so that the progress
   shows the query reading while the producer writes;
3. runs a streaming query that reads the topic with ``format("kaflux")``, parses the JSON and
   counts views and total time per page per 10-second event-time window in each micro-batch,
   writing each batch's partial aggregates to Parquet (idempotently, one directory per batch
   id, so a restarted query rewrites rather than duplicates a batch);
4. shows progress while it runs, and ends with a summary table read back from the Parquet
   output, checked against what was produced; the output is a temporary directory, removed at
   the end, unless ``--output`` names one.

Against a real cluster and Spark master::

    python -m pyspark_kaflux.pipeline --bootstrap-servers broker:9092 --master spark://host:7077 \\
        --output /shared/out --topic page-views --records 1000000

Avro page views (``--format avro --schema-registry-url URL``): events are produced with
:class:`kaflux.schema_registry.avro.AvroSerializer` and the source decodes them into a struct
column (``value.format=avro``).

A secured cluster: ``--kafka-option key=value`` (repeatable) passes any client setting to the
job's admin client, producer and the ``kaflux`` source (as ``kafka.<key>``), e.g.
``--kafka-option security.protocol=SASL_SSL --kafka-option sasl.mechanism=SCRAM-SHA-512``.

Through Spark Connect instead (``--remote``, exclusive with ``--master``): ``sc://host:port`` for a
running Connect server, or ``local[N]`` for one started in this process on 127.0.0.1 (port 15002,
pyspark's default). The job then touches no SparkContext, RDD or JVM object: every step is a
DataFrame or streaming-query call, which Spark Connect carries.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kaflux import AdminClient, NewTopic, Producer

PAGES = ["/", "/search", "/product/1", "/product/2", "/product/3", "/cart", "/checkout", "/help"]
COUNTRIES = ["DE", "FR", "IN", "US", "BR", "JP", "NG", "GB"]
WINDOW = "10 seconds"


#: the page-view events' Avro schema (``--format avro``), registered as ``<topic>-value``
PAGE_VIEW_AVRO = json.dumps(
    {
        "type": "record",
        "name": "PageView",
        "namespace": "kaflux.pipeline",
        "fields": [
            {"name": "user", "type": "string"},
            {"name": "page", "type": "string"},
            {"name": "country", "type": "string"},
            {"name": "event_time", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "duration_ms", "type": "long"},
        ],
    }
)


def page_view_event(rng: random.Random, event_ms: int) -> dict[str, Any]:
    """One page-view event."""
    return {
        "user": f"user-{rng.randrange(500):04d}",
        "page": rng.choice(PAGES),
        "country": rng.choice(COUNTRIES),
        "event_time": event_ms,
        "duration_ms": rng.randrange(50, 30_000),
    }


def page_view(rng: random.Random, event_ms: int) -> tuple[bytes, bytes]:
    """One page-view event as (user key, JSON value)."""
    event = page_view_event(rng, event_ms)
    return str(event["user"]).encode(), json.dumps(event, separators=(",", ":")).encode()


#: events sent first, alone: the query's first micro-batch with data (Spark's slowest, its Python
#: workers starting) reads them before the rest is produced
WARMUP_EVENTS = 100
WARMUP_WAIT_S = 300.0


class EventProducer(threading.Thread):
    """Produces ``total`` events at about ``rate`` per second, then stops. The first ``warmup``
    of them go alone; the rest follow once :attr:`warmed_up` is set (or after
    :data:`WARMUP_WAIT_S`)."""

    def __init__(
        self,
        client: dict[str, str],
        topic: str,
        total: int,
        rate: int,
        warmup: int = 0,
        registry: dict[str, str] | None = None,
    ) -> None:
        super().__init__(name="page-view-producer", daemon=True)
        self._client, self._topic, self._total, self._rate = client, topic, total, rate
        self.warmup = min(warmup, total)
        self.warmed_up = threading.Event()
        #: with a registry configuration, events are Avro (PAGE_VIEW_AVRO) instead of JSON
        self._registry = registry
        self.sent = 0
        self.failed = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        rng = random.Random(42)
        config = {"compression.type": "lz4", "linger.ms": 20, **self._client}
        try:
            serializer = None
            if self._registry is not None:
                from kaflux.schema_registry import SchemaRegistryClient
                from kaflux.schema_registry.avro import AvroSerializer

                serializer = AvroSerializer(SchemaRegistryClient(self._registry), PAGE_VIEW_AVRO)
            with Producer(config, value_serializer=serializer) as producer:
                start = time.monotonic()
                event_ms = 1_790_000_000_000
                futures = []
                while self.sent < self._total:
                    if self.sent == self.warmup and self.warmup > 0:
                        producer.flush(120)
                        self.warmed_up.wait(WARMUP_WAIT_S)  # the query reads the first events
                        start = time.monotonic() - self.sent / self._rate
                    batch = 1000 if self.sent >= self.warmup else self.warmup - self.sent
                    for _ in range(min(batch, self._total - self.sent)):
                        if serializer is None:
                            key, value = page_view(rng, event_ms)
                            futures.append(producer.send(self._topic, value, key=key))
                        else:
                            event = page_view_event(rng, event_ms)
                            futures.append(producer.send(self._topic, event, key=str(event["user"]).encode()))
                        event_ms += rng.randrange(1, 40)
                        self.sent += 1
                    ahead = self.sent / self._rate - (time.monotonic() - start)
                    if ahead > 0:
                        time.sleep(ahead)  # pacing the generator, not synchronising threads
                producer.flush(120)
                self.failed = sum(1 for f in futures if f.exception() is not None)
        except BaseException as exc:
            self.error = exc


@contextlib.contextmanager
def cluster(bootstrap: str | None) -> Iterator[str]:
    """The given cluster, or an embedded broker for the duration."""
    if bootstrap:
        yield bootstrap
        return
    from kaflux.devbrokers.kinds import start_broker

    print("starting an embedded noida-db broker on 127.0.0.1 ...", flush=True)
    with start_broker("noida") as broker:
        print(f"broker up at {broker.bootstrap_servers} (pid {broker.pid})", flush=True)
        yield broker.bootstrap_servers


def spark_session(master: str = "local[2]", remote: str | None = None) -> Any:
    """A classic SparkSession on ``master``, or with ``remote`` a Spark Connect session: ``sc://host:port``
    connects to a running Connect server; ``local[N]`` starts one in this process. Local modes bind
    to loopback.

    ``format("kaflux")`` needs no registration where Spark's Python workers can import
    ``pyspark_kaflux`` (see :mod:`pyspark_kaflux`): local modes run this interpreter. A remote Connect
    server may have done its one data-source lookup before kaflux was installed there, so an
    ``sc://`` session registers the source itself (session-scoped; the server's Python still has to
    import ``pyspark_kaflux``, as the class is pickled by reference).
    """
    target = remote or master
    local = target.startswith("local")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.remote(remote) if remote else SparkSession.builder.master(master)
    # Runtime SQL settings: a Connect session can set these too.
    builder = builder.config("spark.sql.shuffle.partitions", "4").config("spark.sql.session.timeZone", "UTC")
    if remote is None or local:
        # Settings for the JVM this process starts (none for a remote Connect server).
        builder = (
            builder.appName("kaflux-page-views")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.log.level", "ERROR")
        )
    if local:
        builder = builder.config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
        if remote:
            builder = builder.config("spark.connect.grpc.binding.address", "127.0.0.1")
    with warnings.catch_warnings():
        # A local Connect server starts with every setting above, then pyspark re-applies them to
        # the new session as runtime settings and warns about each JVM-wide one.
        warnings.filterwarnings("ignore", message="Failed to set spark", category=UserWarning)
        session = builder.getOrCreate()
    if remote and not local:
        from pyspark_kaflux import KafluxDataSource

        session.dataSource.register(KafluxDataSource)
    return session


def start_query(
    spark: Any,
    client: dict[str, str],
    topic: str,
    output: Path,
    max_per_trigger: int,
    registry: dict[str, str] | None = None,
) -> Any:
    """Kafka (through kaflux) -> parse JSON (or, with a ``registry``, decode Avro into a struct
    column in the source) -> per-batch window aggregates -> Parquet."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    schema = StructType(
        [
            StructField("user", StringType()),
            StructField("page", StringType()),
            StructField("country", StringType()),
            StructField("event_time", LongType()),
            StructField("duration_ms", LongType()),
        ]
    )
    source = (
        spark.readStream.format("kaflux")
        .options(**{f"kafka.{key}": value for key, value in client.items()})
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(max_per_trigger))
    )
    if registry is None:
        events = (
            source.load()
            .select(F.from_json(F.col("value").cast("string"), schema).alias("e"))
            .select(
                F.col("e.page").alias("page"),
                F.col("e.duration_ms").alias("duration_ms"),
                (F.col("e.event_time") / 1000).cast("timestamp").alias("event_time"),
            )
        )
    else:  # value.format=avro: the source gives a typed struct (event_time is already a timestamp)
        events = (
            source.option("value.format", "avro")
            .options(**{f"schema.registry.{key}": value for key, value in registry.items()})
            .load()
            .select("value.page", "value.duration_ms", "value.event_time")
        )
    aggregates = output / "aggregates"

    def write_batch(batch: Any, batch_id: int) -> None:
        partial = batch.groupBy(F.window("event_time", WINDOW).alias("window"), "page").agg(
            F.count("*").alias("views"), F.sum("duration_ms").alias("total_duration_ms")
        )
        # One directory per batch id, overwritten on a replay: re-running a batch after a
        # restart replaces its output instead of adding to it.
        partial.write.mode("overwrite").parquet(str(aggregates / f"batch_id={batch_id}"))

    return (
        events.writeStream.foreachBatch(write_batch)
        .option("checkpointLocation", str(output / "checkpoint"))
        .trigger(processingTime="2 seconds")
        .start()
    )


def end_offsets(progress: Any) -> dict[tuple[str, int], int]:
    """The offsets up to which a micro-batch read, per partition, from its progress report (our
    source's ``{topic: {partition: offset}}``, as a JSON string or, on Spark Connect, a dict)."""
    ends: dict[tuple[str, int], int] = {}
    for source in progress.sources:
        offsets = source.endOffset
        if isinstance(offsets, str):
            offsets = json.loads(offsets)
        for topic, partitions in (offsets or {}).items():
            for partition, offset in partitions.items():
                ends[(topic, int(partition))] = int(offset)
    return ends


def watch(query: Any, producer: EventProducer, total: int, timeout_s: float, base: int) -> int:
    """Print progress until every produced event went through the query; returns the rows read.

    Rows read are counted by offsets (how far the last micro-batch read, less ``base``: where
    the query started), not by summing ``numInputRows``: Spark counts the rows of a task that
    ran again after its executor was lost twice there, while the output has them once."""
    rows = 0
    read_to: dict[tuple[str, int], int] = {}
    seen_batches: set[int] = set()
    deadline = time.monotonic() + timeout_s
    last_print = 0.0
    while time.monotonic() < deadline:
        if query.exception() is not None:
            raise RuntimeError(f"the streaming query failed: {query.exception()}")
        for progress in query.recentProgress:
            if progress.batchId not in seen_batches:
                seen_batches.add(progress.batchId)
                for tp, offset in end_offsets(progress).items():
                    read_to[tp] = max(offset, read_to.get(tp, offset))
        rows = sum(read_to.values()) - base if read_to else 0
        if time.monotonic() - last_print >= 2:
            last = query.lastProgress
            rate = (last.processedRowsPerSecond or 0.0) if last is not None else 0.0
            print(
                f"  produced {producer.sent:>9,}   read {rows:>9,} / {total:,}   "
                f"batches {len(seen_batches):>4}   last batch {rate:>10,.0f} rows/s",
                flush=True,
            )
            last_print = time.monotonic()
        if producer.error is not None:
            raise RuntimeError(f"the producer failed: {producer.error}")
        if rows >= producer.warmup and not producer.warmed_up.is_set():
            producer.warmed_up.set()  # the query reads: produce the rest while it goes on
        if not producer.is_alive() and rows >= total - producer.failed:
            return rows
        query.awaitTermination(0.5)
    raise TimeoutError(f"the query read {rows} of {total} events within {timeout_s} s")


def summarize(spark: Any, output: Path, expected: int) -> bool:
    """Read the Parquet output back, print the summary table, and check that every event the
    query read (``expected``) is counted exactly once."""
    from pyspark.sql import functions as F

    table = (
        spark.read.parquet(str(output / "aggregates"))
        .groupBy("window", "page")
        .agg(F.sum("views").alias("views"), F.sum("total_duration_ms").alias("total_duration_ms"))
    )
    total = table.agg(F.sum("views")).first()[0] or 0
    by_page = (
        table.groupBy("page")
        .agg(
            F.sum("views").alias("views"),
            F.countDistinct("window").alias("windows"),
            (F.sum("total_duration_ms") / F.sum("views") / 1000).alias("avg_seconds"),
        )
        .orderBy(F.desc("views"))
        .collect()
    )
    busiest = table.orderBy(F.desc("views")).first()
    print(f"\n{'page':<14}{'views':>10}{'windows':>10}{'avg time on page':>20}")
    for row in by_page:
        print(f"{row['page']:<14}{row['views']:>10,}{row['windows']:>10,}{row['avg_seconds']:>18.1f} s")
    if busiest is not None:
        when = f"{busiest['window']['start']:%Y-%m-%d %H:%M:%S} UTC"
        print(f"\nbusiest {WINDOW} window: {busiest['page']} at {when}, {busiest['views']:,} views")
    ok = total == expected
    print(f"\ntotal views in Parquet: {total:,}; events read: {expected:,} -> {'OK' if ok else 'MISMATCH'}")
    return ok


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The job's command line."""
    parser = argparse.ArgumentParser(
        prog="python -m pyspark_kaflux.pipeline",
        description="The main job: a Spark Structured Streaming pipeline over Kafka through kaflux.",
    )
    parser.add_argument("--bootstrap-servers", help="a Kafka cluster (default: an embedded broker)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--master", default="local[2]", help="Spark master URL (default local[2])")
    where.add_argument(
        "--remote",
        help="Spark Connect instead: sc://host:port, or local[N] for a Connect server in this process",
    )
    parser.add_argument("--output", help="output directory (default: a new temporary directory)")
    parser.add_argument("--topic", default="page-views")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rate", type=int, default=25_000, help="events produced per second")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=50_000)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds before giving up")
    parser.add_argument(
        "--kafka-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Kafka client setting for every client of the job, e.g. security.protocol=SASL_SSL "
        "(repeatable)",
    )
    parser.add_argument(
        "--format",
        choices=("json", "avro"),
        default="json",
        help="the events' format: JSON, or Avro in Confluent's wire format with --schema-registry-url",
    )
    parser.add_argument("--schema-registry-url", help="the Schema Registry for --format avro")
    parser.add_argument(
        "--schema-registry-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Schema Registry client setting, e.g. basic.auth.user.info=user:password (repeatable)",
    )
    args = parser.parse_args(argv)
    if args.format == "avro" and not args.schema_registry_url:
        parser.error("--format avro needs --schema-registry-url (the registry the Avro schema lives in)")
    for option in args.kafka_option:
        if "=" not in option or not option.partition("=")[0].strip():
            parser.error(f"--kafka-option takes KEY=VALUE, not {option!r}")
    if args.remote is not None and not args.remote.startswith(("sc://", "local")):
        parser.error(f"--remote takes sc://host:port or local[N], not {args.remote!r}")
    return args


def client_settings(bootstrap: str, args: argparse.Namespace) -> dict[str, str]:
    """The Kafka settings every client of the job uses: the cluster and each --kafka-option."""
    settings = {"bootstrap.servers": bootstrap}
    for option in args.kafka_option:
        key, _, value = option.partition("=")
        settings[key.strip()] = value
    return settings


def wait_until_running(query: Any, timeout_s: float) -> None:
    """Wait for the query's first micro-batch (Spark's start-up, the source's first offsets), so
    that events produced afterwards are read while they are written."""
    deadline = time.monotonic() + timeout_s
    while query.lastProgress is None:
        if query.exception() is not None:
            raise RuntimeError(f"the streaming query failed: {query.exception()}")
        if time.monotonic() >= deadline:
            raise TimeoutError(f"the streaming query ran no micro-batch within {timeout_s} s")
        query.awaitTermination(0.2)


def registry_settings(args: argparse.Namespace) -> dict[str, str] | None:
    """The Schema Registry client settings of ``--format avro`` (None for JSON)."""
    if args.format != "avro":
        return None
    settings = {"url": args.schema_registry_url}
    for option in args.schema_registry_option:
        key, _, value = option.partition("=")
        settings[key.strip()] = value
    return settings


def run(spark: Any, bootstrap: str, args: argparse.Namespace) -> int:
    """The job on a session: create the topic, start the query, produce while it runs,
    summarize; 0 if the Parquet output counts every event read. A temporary output directory
    (no ``--output``) is removed at the end."""
    output = Path(args.output) if args.output else Path(tempfile.mkdtemp(prefix="kaflux-pipeline-"))
    try:
        return _run(spark, bootstrap, args, output)
    finally:
        if not args.output:
            shutil.rmtree(output, ignore_errors=True)
            print(f"removed the temporary output {output} (keep it with --output DIR)")


def _run(spark: Any, bootstrap: str, args: argparse.Namespace, output: Path) -> int:
    client = client_settings(bootstrap, args)
    with AdminClient(client) as admin:
        admin.create_topics([NewTopic(args.topic, args.partitions)], timeout=30, exist_ok=True)
        # startingOffsets=earliest: the query starts at the log start of each partition
        (topic,) = admin.describe_topics([args.topic], timeout=30).values()
        base = sum(p.low_watermark for p in topic.partitions)
    registry = registry_settings(args)
    if registry is not None:  # the reader schema is the subject's latest version when the query starts
        from kaflux.schema_registry import Schema, SchemaRegistryClient

        with SchemaRegistryClient(registry) as registry_client:
            registry_client.register_schema(f"{args.topic}-value", Schema(PAGE_VIEW_AVRO))
    producer = EventProducer(client, args.topic, args.records, args.rate, WARMUP_EVENTS, registry)
    print("starting the streaming query ...", flush=True)
    query = start_query(spark, client, args.topic, output, args.max_offsets_per_trigger, registry)
    try:
        wait_until_running(query, args.timeout)
        started = time.monotonic()
        producer.start()
        print(f"streaming {args.records:,} page views through Spark into {output} ...", flush=True)
        rows = watch(query, producer, args.records, args.timeout, base)
    finally:
        query.stop()
    elapsed = time.monotonic() - started
    print(f"done: {rows:,} events in {elapsed:.1f} s ({rows / elapsed:,.0f} events/s end to end)")
    if producer.failed:
        print(f"warning: {producer.failed:,} events could not be produced")
    return 0 if summarize(spark, output, rows) else 1


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with cluster(args.bootstrap_servers) as bootstrap:
        if args.remote:
            print(f"starting a Spark Connect session ({args.remote}) ...", flush=True)
        else:
            print("starting Spark ...", flush=True)
        spark = spark_session(args.master, args.remote)
        try:
            return run(spark, bootstrap, args)
        finally:
            spark.stop()


if __name__ == "__main__":
    sys.exit(main())
