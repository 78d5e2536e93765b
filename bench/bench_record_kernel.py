"""Micro-benchmark of the record kernels: pure-Python vs compiled, ns per record.

Builds ``--batches`` batches of ``--records`` records (16-byte key, 200-byte value, one
header; default 2000 x 100 = 200k records), uncompressed and lz4-compressed, as one Fetch
response ``records`` field, and times with CRC checks on:

* ``records``: ``iter_batches`` + ``RecordBatch.records()`` (one ``Record`` per record),
* ``consumer``: ``iter_batches`` + ``RecordBatch.consumer_records()`` (one ``ConsumerRecord``
  per record: what ``poll()`` decodes),
* ``columns``: ``iter_batches`` + ``ColumnBuilder.append_batch``, ``finish()`` every ~1000
  records (Arrow-layout buffers, no object per record: how ``poll_arrow()`` decodes, whole
  batches in one pass),
* ``cursor``: ``iter_batches`` + ``BatchCursor`` + ``ColumnBuilder.append_cursor``, 1000
  records per ``finish()`` (a batch checked whole, then taken a few records at a time),
* ``crc``: ``iter_batches`` alone (walking and CRC-32C).

Timing is process CPU time, best of ``--repeat`` runs, configurations interleaved.

    .venv/bin/python bench/bench_record_kernel.py [--batches N] [--records R] [--repeat K]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from types import ModuleType

from kaflux.records import LZ4, NONE, BatchBuilder, codec_name
from kaflux.records.kernels import load_compiled_kernel, pure_decoder


def build_fetch_buffer(codec: int, batches: int, records: int) -> bytes:
    out = bytearray()
    offset = 0
    noise = os.urandom(100)
    for _ in range(batches):
        builder = BatchBuilder(codec, base_offset=offset)
        for i in range(records):
            key = f"key-{offset + i:012d}".encode()
            value = noise + (b"%08d" % (offset + i)) * 12 + b"." * 4  # 200 bytes, half compressible
            builder.append(1_700_000_000_000 + i, key, value, [("trace-id", b"0123456789abcdef")])
        offset += records
        out += builder.build()
    return bytes(out)


def run_records(kernel: ModuleType, view: memoryview) -> int:
    count = 0
    for batch in kernel.iter_batches(view, check_crcs=True, topic="bench", partition=0):
        count += len(batch.records())
    return count


POLL_RECORDS = 1000


def run_columns(kernel: ModuleType, view: memoryview) -> int:
    """Columns of about POLL_RECORDS records at a time, as a poll would take them."""
    builder = kernel.ColumnBuilder()
    count = 0
    for batch in kernel.iter_batches(view, check_crcs=True, topic="bench", partition=0):
        builder.append_batch(batch, "bench", 0)
        if len(builder) >= POLL_RECORDS:
            count += builder.finish().num_rows
    return count + int(builder.finish().num_rows)


def run_consumer_records(kernel: ModuleType, view: memoryview) -> int:
    """What poll() decodes: one ConsumerRecord per record, straight from the batch bytes."""
    count = 0
    for batch in kernel.iter_batches(view, check_crcs=True, topic="bench", partition=0):
        count += len(batch.consumer_records("bench", 0, None))
    return count


def run_cursor(kernel: ModuleType, view: memoryview) -> int:
    """Columns through a BatchCursor, POLL_RECORDS at a time."""
    builder = kernel.ColumnBuilder()
    count = 0
    for batch in kernel.iter_batches(view, check_crcs=True, topic="bench", partition=0):
        cursor = kernel.BatchCursor(batch)
        while cursor.remaining:
            builder.append_cursor(cursor, "bench", 0, 0, POLL_RECORDS - len(builder))
            if len(builder) >= POLL_RECORDS:
                count += builder.finish().num_rows
    return count + int(builder.finish().num_rows)


def run_walk(kernel: ModuleType, view: memoryview) -> int:
    return sum(batch.record_count for batch in kernel.iter_batches(view, check_crcs=True))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batches", type=int, default=2000)
    parser.add_argument("--records", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    try:
        _kernel = load_compiled_kernel()
    except ImportError as exc:
        raise SystemExit(f"the compiled kernel is not usable: {exc}") from None
    kernels: dict[str, ModuleType] = {"pure": pure_decoder(), "compiled": _kernel}
    modes: dict[str, Callable[[ModuleType, memoryview], int]] = {
        "records": run_records,
        "consumer": run_consumer_records,
        "columns": run_columns,
        "cursor": run_cursor,
        "crc": run_walk,
    }
    total = args.batches * args.records
    views = {
        codec: memoryview(build_fetch_buffer(codec, args.batches, args.records)) for codec in (NONE, LZ4)
    }
    print(
        f"{args.batches} batches x {args.records} records = {total} records "
        f"(16 B key, 200 B value, 1 header), CRC on; best of {args.repeat}; "
        f"hardware CRC-32C: {_kernel.crc32c_hardware()}"
    )
    configs = [(codec, mode, name) for codec in (NONE, LZ4) for mode in modes for name in kernels]
    best = dict.fromkeys(configs, float("inf"))
    for _ in range(args.repeat):
        for config in configs:
            codec, mode, name = config
            start = time.process_time()
            decoded = modes[mode](kernels[name], views[codec])
            elapsed = time.process_time() - start
            assert decoded == total, (config, decoded)
            best[config] = min(best[config], elapsed)
    print(f"{'codec':<6} {'mode':<8} {'pure ns/rec':>12} {'compiled ns/rec':>16} {'speed-up':>9}")
    for codec in (NONE, LZ4):
        for mode in modes:
            pure = best[codec, mode, "pure"] / total * 1e9
            compiled = best[codec, mode, "compiled"] / total * 1e9
            speedup = pure / compiled
            print(f"{codec_name(codec):<6} {mode:<8} {pure:>12.1f} {compiled:>16.1f} {speedup:>8.1f}x")


if __name__ == "__main__":
    main()
