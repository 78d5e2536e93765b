"""Spark: rows/s streamed from Kafka through ``format("kaflux")`` into Parquet, next to Spark
reading the same rows from a Parquet file into Parquet, on the same machine.

    python bench/bench_spark_read.py --records 1000000 --master local[2]

The topic lives on an embedded noida-db broker (exact end offsets). Every job writes the same
columns (key, value, topic, partition, offset, timestamp) to a fresh Parquet directory: the
Kafka streaming query with ``Trigger.AvailableNow`` (it reads the backlog and stops), the same
query over a Python source that reads nothing (``spark_floor_source.FloorSource``: the same
columns and rows from one Arrow batch in memory, the floor of any PySpark Python streaming
source), the Kafka read as a batch job, and the baseline, a batch copy of the Parquet file the
first job wrote. Times exclude SparkSession start-up. For the streaming queries the report also
splits the time into the query's start (until its first trigger: PySpark starting the
driver-side Python process that runs the source, and the source resolving offsets) and the
micro-batch itself (Spark's ``triggerExecution``). Ends with the medians over the runs after the
first (which warms up Spark and its Python workers) and their ratios to the Parquet copy.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_consume import produce

from kaflux.devbrokers.kinds import start_broker
from pyspark_kaflux.pipeline import spark_session

BENCH_DIR = str(Path(__file__).parent)
FLOOR_JOB = "Python source reading nothing -> Parquet, streaming"


def report(job: str, run: int, rows: int, seconds: float, seconds_of: dict[str, list[float]]) -> None:
    print(f"| {job} | {run} | {rows:,} | {seconds:.2f} | {rows / seconds:,.0f} |", flush=True)
    if run > 1:
        seconds_of.setdefault(job, []).append(seconds)


def trigger_split(progress: list[dict[str, object]], started_wall: float) -> tuple[float, float]:
    """Seconds from the query's start to its first trigger, and seconds spent in triggers."""
    first = str(progress[0]["timestamp"]).replace("Z", "+00:00")
    until_first = datetime.datetime.fromisoformat(first).timestamp() - started_wall
    in_triggers = sum(int(p["durationMs"]["triggerExecution"]) for p in progress) / 1000  # type: ignore[index,call-overload]
    return until_first, in_triggers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kaflux-bench-spark-"))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # Spark's Python workers import spark_floor_source by name: put bench/ on their path.
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (BENCH_DIR, os.environ.get("PYTHONPATH")) if p)
    from spark_floor_source import FloorSource

    seconds_of: dict[str, list[float]] = {}
    try:
        with start_broker("noida", workdir=work / "broker") as broker:
            produce(broker.bootstrap_servers, "bench", args.records, args.partitions)
            spark = spark_session(args.master)
            spark.dataSource.register(FloorSource)
            columns = ["key", "value", "topic", "partition", "offset", "timestamp"]
            splits: list[str] = []
            print("| job | run | rows | seconds | rows/s |")
            print("|---|---|---|---|---|")
            try:
                for run in range(1, args.runs + 1):
                    out = work / f"kafka-{run}"
                    started, started_wall = time.perf_counter(), time.time()
                    query = (
                        spark.readStream.format("kaflux")
                        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
                        .option("subscribe", "bench")
                        .option("startingOffsets", "earliest")
                        .load()
                        .select(*columns)
                        .writeStream.format("parquet")
                        .option("path", str(out))
                        .option("checkpointLocation", str(work / f"checkpoint-{run}"))
                        .trigger(availableNow=True)
                        .start()
                    )
                    query.awaitTermination(600)
                    seconds = time.perf_counter() - started
                    rows = spark.read.parquet(str(out)).count()
                    report("Kafka (kaflux) -> Parquet, streaming", run, rows, seconds, seconds_of)
                    until_first, in_triggers = trigger_split(query.recentProgress, started_wall)
                    splits.append(
                        f"run {run}, kaflux: {until_first:.2f} s until the first trigger, "
                        f"{in_triggers:.2f} s in triggers"
                    )

                    floor_out = work / f"floor-{run}"
                    started, started_wall = time.perf_counter(), time.time()
                    query = (
                        spark.readStream.format("floor")
                        .option("rows", str(args.records))
                        .option("partitions", str(args.partitions))
                        .load()
                        .select(*columns)
                        .writeStream.format("parquet")
                        .option("path", str(floor_out))
                        .option("checkpointLocation", str(work / f"floor-checkpoint-{run}"))
                        .trigger(availableNow=True)
                        .start()
                    )
                    query.awaitTermination(600)
                    seconds = time.perf_counter() - started
                    rows = spark.read.parquet(str(floor_out)).count()
                    report(
                        "Python source reading nothing -> Parquet, streaming", run, rows, seconds, seconds_of
                    )
                    until_first, in_triggers = trigger_split(query.recentProgress, started_wall)
                    splits.append(
                        f"run {run}, floor: {until_first:.2f} s until the first trigger, "
                        f"{in_triggers:.2f} s in triggers"
                    )

                    batch_out = work / f"kafka-batch-{run}"
                    started = time.perf_counter()
                    (
                        spark.read.format("kaflux")
                        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
                        .option("subscribe", "bench")
                        .load()
                        .select(*columns)
                        .write.parquet(str(batch_out))
                    )
                    seconds = time.perf_counter() - started
                    rows = spark.read.parquet(str(batch_out)).count()
                    report("Kafka (kaflux) -> Parquet, batch", run, rows, seconds, seconds_of)

                    copy = work / f"copy-{run}"
                    started = time.perf_counter()
                    spark.read.parquet(str(out)).select(*columns).write.parquet(str(copy))
                    seconds = time.perf_counter() - started
                    rows = spark.read.parquet(str(copy)).count()
                    report("Parquet -> Parquet, batch", run, rows, seconds, seconds_of)
            finally:
                spark.stop()
            print("\nThe streaming queries' time:", *splits, sep="\n  ")
            copy_s = seconds_of.get("Parquet -> Parquet, batch")
            if copy_s:
                print("\nMedians of runs 2 and later, as a fraction of the Parquet copy's rows/s:")
                for job, times in seconds_of.items():
                    median = statistics.median(times)
                    print(f"  {job}: {median:.2f} s, {statistics.median(copy_s) / median:.2f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
