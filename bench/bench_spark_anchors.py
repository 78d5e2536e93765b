"""Spark: ``format("kaflux")`` against Spark's own Kafka connector, ``format("kafka")``, on the
same Apache Kafka 4.4 topic and the same SparkSession.

    python bench/bench_spark_anchors.py                             # 1M records, 3 rounds
    python bench/bench_spark_anchors.py --records 10000000 --rounds 2
    python bench/bench_spark_anchors.py --jobs batch,write --records 200000 --rounds 2   # a quick look

One Apache Kafka node holds ``--records`` records (8-byte keys, ``--value-bytes`` values,
``--partitions`` partitions). One ``local[2]`` session (UI off, UTC) has Spark's connector on its
classpath (spark-sql-kafka-0-10 4.2.0, see tests/support/spark_kafka_connector.py). Each job
runs through both formats in turn, ``--rounds`` times; the first round warms Spark and its Python
workers up and is left out of the medians:

* ``batch``: ``spark.read`` of the whole topic, the Kafka columns written to Parquet;
* ``available-now``: ``readStream`` with ``Trigger.AvailableNow`` to Parquet (the query's whole
  wall time, its start included);
* ``steady``: the same stream with ``maxOffsetsPerTrigger=--per-trigger`` (200k), rows/s over the
  micro-batches after the first (Spark's ``triggerExecution`` time);
* ``write``: a DataFrame of ``--records`` rows (key, value) written to a new topic
  (``.mode("append")`` for kaflux, which Spark requires of a Python data source); beside them a
  floor: the same write to a Python sink that only counts the Arrow batches it is handed
  (``spark_floor_source.FloorSink``), what any PySpark Python sink costs before it sends a byte.

It prints rows/s per job and format, and the ratio kaflux / kafka, against the targets of the
speed issue (steady and write ≥ 0.7, batch and available-now ≥ 0.5).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp")
JOBS = ("batch", "available-now", "steady", "write")
TARGETS = {"batch": 0.5, "available-now": 0.5, "steady": 0.7, "write": 0.7}


def session(jars: list[str]) -> Any:
    """A ``local[2]`` session on loopback with Spark's Kafka connector (``jars``) on its classpath."""
    import os

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # The Python workers import the floor sink by name (spark_floor_source, in bench/).
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master("local[2]")
        .appName("kaflux-spark-anchors")
        .config("spark.jars", ",".join(jars))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.memory", "4g")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.log.level", "ERROR")
        .getOrCreate()
    )


def batch(spark: Any, fmt: str, bootstrap: str, topic: str, out: Path, **_: Any) -> tuple[int, float]:
    t0 = time.perf_counter()
    frame = (
        spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic).load()
    )
    frame.select(*COLUMNS).write.parquet(str(out))
    seconds = time.perf_counter() - t0
    return spark.read.parquet(str(out)).count(), seconds


def _stream(spark: Any, fmt: str, bootstrap: str, topic: str, out: Path, per_trigger: int | None) -> Any:
    reader = (
        spark.readStream.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    if per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(per_trigger))
    query = (
        reader.load()
        .select(*COLUMNS)
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(out) + "-checkpoint")
        .trigger(availableNow=True)
        .start()
    )
    if not query.awaitTermination(3600):
        query.stop()
        raise SystemExit(f"{fmt}: the streaming query did not finish within an hour")
    return query


def available_now(spark: Any, fmt: str, bootstrap: str, topic: str, out: Path, **_: Any) -> tuple[int, float]:
    t0 = time.perf_counter()
    query = _stream(spark, fmt, bootstrap, topic, out, None)
    seconds = time.perf_counter() - t0
    return sum(int(p["numInputRows"]) for p in query.recentProgress), seconds


def steady(
    spark: Any, fmt: str, bootstrap: str, topic: str, out: Path, per_trigger: int, **_: Any
) -> tuple[int, float]:
    query = _stream(spark, fmt, bootstrap, topic, out, per_trigger)
    batches = [p for p in query.recentProgress if int(p["numInputRows"]) > 0][1:]
    if not batches:
        raise SystemExit(f"{fmt}: only one micro-batch; give more --records than --per-trigger")
    rows = sum(int(p["numInputRows"]) for p in batches)
    return rows, sum(int(p["durationMs"]["triggerExecution"]) for p in batches) / 1000


def write(
    spark: Any, fmt: str, bootstrap: str, topic: str, out: Path, source: Path, partitions: int, **_: Any
) -> tuple[int, float]:
    from bench_anchors import create_topic, delete_topic

    target = f"{topic}-written-{fmt}-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, target, partitions)
    frame = spark.read.parquet(str(source)).select("key", "value").cache()
    rows = frame.count()  # materialized before the clock starts: the write is what is timed
    writer = frame.write.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("topic", target)
    if fmt in ("kaflux", "floor_sink"):
        writer = writer.mode("append")
    t0 = time.perf_counter()
    writer.save()
    seconds = time.perf_counter() - t0
    frame.unpersist()
    delete_topic(bootstrap, target)
    return rows, seconds


RUNNERS = {"batch": batch, "available-now": available_now, "steady": steady, "write": write}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--per-trigger", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3, help="the first is a warm-up")
    parser.add_argument("--jobs", default=",".join(JOBS))
    args = parser.parse_args()
    jobs = [j.strip() for j in args.jobs.split(",") if j.strip()]

    from bench_anchors import BROKER_CONFIG, write_backlog

    from kaflux.devbrokers.apache_kafka import KafkaBroker

    from support.spark_kafka_connector import CONNECTOR_VERSION, connector_jars

    broker = KafkaBroker(config=BROKER_CONFIG, jvm_options=["-Xms1g", "-Xmx2g", "-XX:+UseG1GC"]).start(180)
    work = Path(tempfile.mkdtemp(prefix="kaflux-spark-anchors-"))
    try:
        topic = f"spark-anchors-{uuid.uuid4().hex[:8]}"
        t0 = time.perf_counter()
        write_backlog(broker.bootstrap_servers, topic, args.records, args.partitions, args.value_bytes)
        print(f"backlog written in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        spark = session(connector_jars())
        from spark_floor_source import FloorSink

        spark.dataSource.register(FloorSink)
        print(
            f"Apache Kafka 4.4, {args.records:,} records of {args.value_bytes} B, "
            f"{args.partitions} partitions; "
            f"Spark {spark.version} local[2]; format('kafka') is spark-sql-kafka-0-10 {CONNECTOR_VERSION}; "
            f"{args.rounds} rounds, the first a warm-up\n"
        )
        source = work / "source.parquet"
        spark.read.format("kaflux").option("kafka.bootstrap.servers", broker.bootstrap_servers).option(
            "subscribe", topic
        ).load().select("key", "value").write.parquet(str(source))
        rates: dict[tuple[str, str], list[float]] = {}
        print("| job | format | round | rows | seconds | rows/s |\n|---|---|---|---|---|---|")
        for r in range(1, args.rounds + 1):
            for job in jobs:
                for fmt in ("kafka", "kaflux", *(["floor_sink"] if job == "write" else [])):
                    out = work / f"{job}-{fmt}-{r}"
                    rows, seconds = RUNNERS[job](
                        spark,
                        fmt,
                        broker.bootstrap_servers,
                        topic,
                        out,
                        per_trigger=args.per_trigger,
                        source=source,
                        partitions=args.partitions,
                    )
                    shutil.rmtree(out, ignore_errors=True)
                    shutil.rmtree(str(out) + "-checkpoint", ignore_errors=True)
                    print(
                        f"| {job} | {fmt} | {r} | {rows:,} | {seconds:.2f} | {rows / seconds:,.0f} |",
                        flush=True,
                    )
                    if r > 1 or args.rounds == 1:
                        rates.setdefault((job, fmt), []).append(rows / seconds)
        print(
            "\n| job | kafka rows/s | kaflux rows/s | kaflux / kafka | target | met |\n"
            "|---|---|---|---|---|---|"
        )
        for job in jobs:
            anchor = statistics.median(rates[(job, "kafka")])
            ours = statistics.median(rates[(job, "kaflux")])
            ratio = ours / anchor
            met = "yes" if ratio >= TARGETS[job] else "no"
            print(f"| {job} | {anchor:,.0f} | {ours:,.0f} | {ratio:.2f} | ≥ {TARGETS[job]} | {met} |")
        if "write" in jobs:
            floor = statistics.median(rates[("write", "floor_sink")])
            print(
                f"\nThe floor of a Python sink (a writer that only counts the Arrow batches Spark hands "
                f"it): {floor:,.0f} rows/s, {floor / statistics.median(rates[('write', 'kafka')]):.2f} x "
                "format('kafka')."
            )
        spark.stop()
    finally:
        broker.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
