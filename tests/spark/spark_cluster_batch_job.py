"""A driver for the standalone-cluster batch test, run as its own process: read a topic with
``format("kaflux")`` on ``spark://...`` and print, as one JSON line, how many rows were read and in
which executors (each Python worker's working directory is its executor's, ``work/<app>/<id>``).
Not a test module.

    python spark_cluster_batch_job.py spark://127.0.0.1:7077 127.0.0.1:9092 topic
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from typing import Any


def _executor_of_rows(rows: Iterator[Any]) -> Iterator[tuple[str, int]]:
    yield os.path.basename(os.getcwd()), sum(1 for _ in rows)


def main(master: str, bootstrap: str, topic: str) -> None:
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.master(master).appName("kaflux-cluster-batch").getOrCreate()
    try:
        frame = (
            spark.read.format("kaflux")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("endingOffsets", "latest")
            .load()
        )
        counts: dict[str, int] = {}
        for executor, count in frame.rdd.mapPartitions(_executor_of_rows).collect():  # type: ignore[arg-type]
            counts[executor] = counts.get(executor, 0) + count
        print(json.dumps({"rows": sum(counts.values()), "executors": counts}), flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:4])
