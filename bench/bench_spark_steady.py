"""Spark streaming at steady state: rows/s of the micro-batches after the first, Kafka through
``format("kaflux")`` next to Spark's own ``rate-micro-batch`` source, both writing Parquet.

    python bench/bench_spark_steady.py --records 1000000 --per-trigger 200000 --master local[2]

The Kafka query reads a backlog (``bench_consume.produce``: 8-byte keys, 100-byte values from a
pool of 4096, 6 partitions, on an embedded noida-db broker) with ``maxOffsetsPerTrigger`` rows a
micro-batch under ``Trigger.AvailableNow``; the rate query makes ``rowsPerBatch`` rows a
micro-batch with columns of the same shape (an 8-byte key, a 100-byte value from 4096 distinct
ones, topic, partition, offset, timestamp). Steady state is the rows of every micro-batch but
the first divided by their ``triggerExecution`` time (Spark's query progress), so the query's
start-up (PySpark's source process, the first trigger) is left out. A third query reads the same
number of rows a micro-batch from a Python source that reads nothing
(``spark_floor_source.FloorSource``: one Arrow batch of the same columns, yielded from memory), the
ceiling of any PySpark Python streaming source here. Runs alternate: Kafka, the floor, the rate
source.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from bench_consume import produce

from kaflux.devbrokers.kinds import start_broker
from pyspark_kaflux.pipeline import spark_session

COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp"]
BENCH_DIR = str(Path(__file__).parent)


def steady_rows_per_s(progress: list[dict[str, Any]]) -> tuple[float, int]:
    """Rows/s over the micro-batches after the first (that read rows), and how many there were."""
    batches = [p for p in progress if int(p["numInputRows"]) > 0][1:]
    rows = sum(int(p["numInputRows"]) for p in batches)
    seconds = sum(int(p["durationMs"]["triggerExecution"]) for p in batches) / 1000
    return (rows / seconds if seconds else float("nan")), len(batches)


def phases(progress: list[dict[str, Any]]) -> str:
    """Median milliseconds of each part of a steady micro-batch (``durationMs``), largest first."""
    batches = [p for p in progress if int(p["numInputRows"]) > 0][1:]
    keys = {k for p in batches for k in p["durationMs"] if k != "triggerExecution"}
    medians = {k: statistics.median(int(p["durationMs"].get(k, 0)) for p in batches) for k in keys}
    return ", ".join(f"{k} {v:.0f}" for k, v in sorted(medians.items(), key=lambda kv: -kv[1]) if v)


def available_now_to_parquet(frame: Any, out: Path, checkpoint: Path) -> list[dict[str, Any]]:
    """Write a streaming ``frame`` to Parquet under ``Trigger.AvailableNow``; its progress."""
    query = (
        frame.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(900)
    return list(query.recentProgress)


def kafka_query(
    spark: Any, bootstrap: str, per_trigger: int, out: Path, checkpoint: Path, options: dict[str, str]
) -> list[dict[str, Any]]:
    frame = (
        spark.readStream.format("kaflux")
        .options(**options)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", "bench")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(per_trigger))
        .load()
        .select(*COLUMNS)
    )
    return available_now_to_parquet(frame, out, checkpoint)


def floor_query(
    spark: Any, per_trigger: int, batches: int, partitions: int, out: Path, checkpoint: Path
) -> list[dict[str, Any]]:
    frame = (
        spark.readStream.format("floor")
        .option("rows", str(per_trigger))
        .option("batches", str(batches))
        .option("partitions", str(partitions))
        .load()
        .select(*COLUMNS)
    )
    return available_now_to_parquet(frame, out, checkpoint)


def rate_query(
    spark: Any, per_trigger: int, batches: int, partitions: int, out: Path, checkpoint: Path
) -> list[dict[str, Any]]:
    from pyspark.sql import functions as F

    frame = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", str(per_trigger))
        .option("numPartitions", str(partitions))
        .load()
        .select(
            F.format_string("%08d", "value").cast("binary").alias("key"),
            F.lpad(F.hex(F.col("value") % 4096), 100, "0123456789abcdef").cast("binary").alias("value"),
            F.lit("bench").alias("topic"),
            (F.col("value") % partitions).cast("int").alias("partition"),
            F.col("value").alias("offset"),
            F.col("timestamp"),
        )
    )
    query = (
        frame.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="0 seconds")
        .start()
    )
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        done = [p for p in query.recentProgress if int(p["numInputRows"]) > 0]
        if len(done) >= batches:
            break
        time.sleep(0.2)
    query.stop()
    return list(query.recentProgress)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--per-trigger", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument(
        "--kaflux-option", action="append", default=[], metavar="KEY=VALUE",
        help="an option of the kaflux source (repeatable), e.g. kafka.max.poll.records=10000",
    )  # fmt: skip
    args = parser.parse_args()
    source_options = dict(option.split("=", 1) for option in args.kaflux_option)
    batches = -(-args.records // args.per_trigger)
    work = Path(tempfile.mkdtemp(prefix="kaflux-bench-steady-"))
    results: dict[str, list[float]] = {"kafka": [], "floor": [], "rate": []}
    # Spark's Python workers import spark_floor_source by name: put bench/ on their path.
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (BENCH_DIR, os.environ.get("PYTHONPATH")) if p)
    from spark_floor_source import FloorSource

    try:
        with start_broker("noida", workdir=work / "broker") as broker:
            produce(broker.bootstrap_servers, "bench", args.records, args.partitions)
            spark = spark_session(args.master)
            spark.dataSource.register(FloorSource)
            print("| source | run | steady micro-batches | rows/s (steady) | ms per micro-batch (median) |")
            print("|---|---|---|---|---|")
            try:
                for run in range(1, args.runs + 1):
                    progress = kafka_query(
                        spark,
                        broker.bootstrap_servers,
                        args.per_trigger,
                        work / f"k{run}",
                        work / f"kc{run}",
                        source_options,
                    )
                    rate, count = steady_rows_per_s(progress)
                    results["kafka"].append(rate)
                    print(
                        f"| Kafka (kaflux) -> Parquet | {run} | {count} | {rate:,.0f} | {phases(progress)} |",
                        flush=True,
                    )
                    progress = floor_query(
                        spark, args.per_trigger, batches, args.partitions, work / f"f{run}", work / f"fc{run}"
                    )
                    rate, count = steady_rows_per_s(progress)
                    results["floor"].append(rate)
                    print(
                        f"| Python source reading nothing -> Parquet | {run} | {count} | {rate:,.0f} | "
                        f"{phases(progress)} |",
                        flush=True,
                    )
                    progress = rate_query(
                        spark, args.per_trigger, batches, args.partitions, work / f"r{run}", work / f"rc{run}"
                    )
                    rate, count = steady_rows_per_s(progress)
                    results["rate"].append(rate)
                    print(
                        f"| rate-micro-batch -> Parquet | {run} | {count} | {rate:,.0f} | "
                        f"{phases(progress)} |",
                        flush=True,
                    )
            finally:
                spark.stop()
        kafka, rate = statistics.median(results["kafka"]), statistics.median(results["rate"])
        floor = statistics.median(results["floor"])
        print(
            f"\nsteady state, medians: kaflux {kafka:,.0f} rows/s, rate source {rate:,.0f} rows/s: "
            f"{kafka / rate:.2f}x; the Python source reading nothing {floor:,.0f} rows/s: "
            f"{floor / rate:.2f}x of the rate source, kaflux {kafka / floor:.2f}x of it"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
