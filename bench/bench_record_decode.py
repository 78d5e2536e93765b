"""Benchmark of the pure-Python record batch decoder.

Builds N batches of R records (16-byte key, 200-byte value, one header) uncompressed and
lz4-compressed, concatenates them as a Fetch response's ``records`` field, then times
``iter_batches`` + ``RecordBatch.records()`` over it with CRC checks on and off.

Timing is process CPU time (less disturbed by a shared machine's steal time than wall
time), best of ``--repeat`` runs with the configurations interleaved. For scale, the script
also times a bare Python loop that builds and appends one 5-tuple per iteration.

    .venv/bin/python bench/bench_record_decode.py [--batches N] [--records R] [--repeat K]
"""

from __future__ import annotations

import argparse
import os
import time

from kaflux.records import LZ4, NONE, BatchBuilder, codec_name, iter_batches


def build_fetch_buffer(codec: int, batches: int, records: int) -> bytes:
    out = bytearray()
    offset = 0
    rng_value = os.urandom(100)
    for _ in range(batches):
        builder = BatchBuilder(codec, base_offset=offset)
        for i in range(records):
            key = f"key-{offset + i:012d}".encode()
            value = rng_value + (b"%08d" % (offset + i)) * 12 + b"." * 4  # 200 bytes, half compressible
            builder.append(1_700_000_000_000 + i, key, value, [("trace-id", b"0123456789abcdef")])
        offset += records
        out += builder.build()
    return bytes(out)


def decode_all(buf: memoryview, check_crcs: bool) -> int:
    count = 0
    for batch in iter_batches(buf, check_crcs=check_crcs, topic="bench", partition=0):
        count += len(batch.records())
    return count


def calibrate(n: int) -> float:
    """ns per iteration of a loop that only builds and appends a 5-tuple (machine speed)."""
    start = time.process_time()
    out: list[tuple[int, int, bytes, bytes, list[object]]] = []
    for i in range(n):
        out.append((i, i, b"k", b"v", []))
    return (time.process_time() - start) / n * 1e9


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--records", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    total_records = args.batches * args.records
    print(
        f"{args.batches} batches x {args.records} records "
        f"(16 B key, 200 B value, 1 header); best of {args.repeat}"
    )
    configs = [(codec, check_crcs) for codec in (NONE, LZ4) for check_crcs in (True, False)]
    views = {
        codec: memoryview(build_fetch_buffer(codec, args.batches, args.records)) for codec in (NONE, LZ4)
    }
    best = dict.fromkeys(configs, float("inf"))
    calibration = float("inf")
    for _ in range(args.repeat):
        for codec, check_crcs in configs:
            start = time.process_time()
            decoded = decode_all(views[codec], check_crcs)
            elapsed = time.process_time() - start
            assert decoded == total_records, decoded
            best[codec, check_crcs] = min(best[codec, check_crcs], elapsed)
        calibration = min(calibration, calibrate(total_records))
    for codec, check_crcs in configs:
        seconds = best[codec, check_crcs]
        print(
            f"  {codec_name(codec):>5}  crc={'on ' if check_crcs else 'off'}  "
            f"{len(views[codec]) / 1e6:7.2f} MB  {seconds / total_records * 1e9:8.0f} ns/record  "
            f"{total_records / seconds:12,.0f} records/s"
        )
    print(f"  (machine scale: {calibration:.0f} ns per bare loop iteration building a 5-tuple)")


if __name__ == "__main__":
    main()
