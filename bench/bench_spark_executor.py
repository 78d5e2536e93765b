"""Spark's executor side of ``format("kaflux")`` without Spark: CPU per record of reading a backlog
as a streaming query's tasks do, one micro-batch's offset ranges after the other.

    python bench/bench_spark_executor.py --records 1000000 --batches 5

The backlog (``bench_consume.produce``: 6 partitions on an embedded noida-db broker) is read by
``range_reader.read_partition``, the function each Spark task runs, in ``--batches`` micro-batches
of one range per partition each, all in this process, as one reused Python worker runs them.
Reported per pass: wall time, the CPU of this process (the reader: its application and network
threads) and of the broker, per record. CPU, unlike wall time, does not depend on what else the
machine runs. The first pass includes making the consumers.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_consume import produce

from kaflux import Consumer, TopicPartition
from kaflux.devbrokers.kinds import start_broker
from pyspark_kaflux import client_cache
from pyspark_kaflux.offsets import OffsetRange
from pyspark_kaflux.options import parse_source_options
from pyspark_kaflux.range_reader import read_partition


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux ``/proc``)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--batches", type=int, default=5, help="micro-batches the backlog is read in")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument(
        "--kafka-option", action="append", default=[], metavar="KEY=VALUE",
        help="a consumer setting of the source (repeatable), e.g. max.partition.fetch.bytes=8388608",
    )  # fmt: skip
    args = parser.parse_args()
    extra = {f"kafka.{k}": v for k, v in (option.split("=", 1) for option in args.kafka_option)}
    work = Path(tempfile.mkdtemp(prefix="kaflux-bench-executor-"))
    try:
        with start_broker("noida", workdir=work / "broker") as broker:
            produce(broker.bootstrap_servers, "bench", args.records, args.partitions)
            with Consumer({"bootstrap.servers": broker.bootstrap_servers}) as consumer:
                tps = [TopicPartition("bench", p) for p in range(args.partitions)]
                ends = consumer.end_offsets(tps, timeout=30)
            options = parse_source_options(
                {"kafka.bootstrap.servers": broker.bootstrap_servers, "subscribe": "bench", **extra},
                streaming=True,
            )
            print("| pass | rows | wall s | reader CPU ns/record | broker CPU ns/record |")
            print("|---|---|---|---|---|")
            for n in range(1, args.passes + 1):
                broker_cpu, cpu, wall = process_cpu_s(broker.pid), time.process_time(), time.perf_counter()
                rows = 0
                for k in range(args.batches):
                    for tp in tps:
                        end = ends[tp]
                        piece = OffsetRange(
                            tp.topic, tp.partition, end * k // args.batches, end * (k + 1) // args.batches
                        )
                        rows += sum(batch.num_rows for batch in read_partition(options, piece))
                wall = time.perf_counter() - wall
                cpu = time.process_time() - cpu
                broker_cpu = process_cpu_s(broker.pid) - broker_cpu
                per_record = f"{cpu / rows * 1e9:,.0f} | {broker_cpu / rows * 1e9:,.0f}"
                print(f"| {n} | {rows:,} | {wall:.2f} | {per_record} |", flush=True)
            client_cache.close_all()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
