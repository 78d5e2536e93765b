"""The application thread's share of ``poll()`` and ``poll_arrow()``, without a network.

    python bench/bench_collect.py                  # 500 and 10,000 rows per call, both paths
    python bench/bench_collect.py --rows 500 --path arrow

A ``FetchCollector`` reads completed fetches held in memory (3 partitions x 10 fetches x 20
batches x 1,000 records: 8-byte keys, 100-byte values, as ``bench_compare.py``'s backlog) with
``max.poll.records`` rows per call: ``collect()`` (what ``poll()`` returns, touching every value)
or ``collect_arrow()`` (the ``pyarrow.RecordBatch`` ``poll_arrow()`` returns, reading the first
and last value offsets). Prints wall time per record and per call, the median of 5 runs. What
this leaves out: the network thread, and ``Consumer``'s own poll loop around the collector.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from kaflux.consumer.completed_fetch import CompletedFetch
from kaflux.consumer.fetch_buffer import FetchBuffer
from kaflux.consumer.fetch_collector import FetchCollector
from kaflux.consumer.subscription_state import FetchPosition, ResetStrategy, SubscriptionState
from kaflux.records import KERNEL, BatchBuilder
from kaflux.structs import TopicPartition

PER_BATCH, BATCHES_PER_FETCH, FETCHES = 1000, 20, 10
PARTITIONS = [TopicPartition("bench", p) for p in range(3)]


def fetch_bytes() -> dict[TopicPartition, list[bytes]]:
    rng = random.Random(1)
    pool = [rng.randbytes(50).hex().encode() for _ in range(4096)]
    out: dict[TopicPartition, list[bytes]] = {}
    for tp in PARTITIONS:
        offset = 0
        fetches = []
        for _ in range(FETCHES):
            data = bytearray()
            for _ in range(BATCHES_PER_FETCH):
                builder = BatchBuilder(base_offset=offset)
                for i in range(PER_BATCH):
                    builder.append(1_700_000_000_000 + i, b"%08d" % (offset + i), pool[(offset + i) & 4095])
                data += builder.build()
                offset += PER_BATCH
            fetches.append(bytes(data))
        out[tp] = fetches
    return out


def run(fetches: dict[TopicPartition, list[bytes]], rows: int, path: str) -> tuple[float, float]:
    """Seconds in total and in the collector for reading everything once."""
    subscription = SubscriptionState(ResetStrategy.EARLIEST)
    subscription.assign_from_user(PARTITIONS)
    for tp in PARTITIONS:
        subscription.seek(tp, FetchPosition(0))
    buffer = FetchBuffer()
    collector = FetchCollector(subscription, buffer, max_poll_records=rows)
    for f in range(FETCHES):
        for tp in PARTITIONS:
            offset = f * BATCHES_PER_FETCH * PER_BATCH
            view = memoryview(fetches[tp][f])
            version = subscription.position_version(tp)
            buffer.add([CompletedFetch(tp, offset, version, view, high_watermark=10**9)])
    total = len(PARTITIONS) * FETCHES * BATCHES_PER_FETCH * PER_BATCH
    seen, in_collect = 0, 0.0
    clock = time.perf_counter
    started = clock()
    while seen < total:
        if path == "poll":
            t0 = clock()
            records = collector.collect()
            in_collect += clock() - t0
            for batch in records.values():
                for record in batch:
                    len(record.value)
                seen += len(batch)
        else:
            t0 = clock()
            arrow_batch = collector.collect_arrow()
            in_collect += clock() - t0
            n = arrow_batch.num_rows
            values = arrow_batch.column(1)  # a slice: its offsets start at values.offset
            offsets = memoryview(values.buffers()[1]).cast("i")
            seen += n if offsets[values.offset + n] >= offsets[values.offset] else 0
    return clock() - started, in_collect


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, action="append", help="max.poll.records (repeatable)")
    parser.add_argument("--path", choices=["poll", "arrow"], action="append")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    fetches = fetch_bytes()
    total = len(PARTITIONS) * FETCHES * BATCHES_PER_FETCH * PER_BATCH
    print(f"{total:,} records in memory, record kernel: {KERNEL}, median of {args.runs} runs")
    print("| path | rows per call | ns/record | collect µs/call |")
    print("|---|---|---|---|")
    for rows in args.rows or [500, 10_000]:
        for path in args.path or ["poll", "arrow"]:
            results = [run(fetches, rows, path) for _ in range(args.runs)]
            seconds = statistics.median(r[0] for r in results)
            collect = statistics.median(r[1] for r in results)
            calls = total / rows
            print(f"| {path} | {rows:,} | {seconds / total * 1e9:.0f} | {collect / calls * 1e6:.1f} |")


if __name__ == "__main__":
    main()
