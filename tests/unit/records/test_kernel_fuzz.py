"""Differential fuzzing of the compiled record kernel against the pure-Python one.

More than 100k mutated batches (bit flips, byte edits, truncations, length-field edits,
inserted and deleted bytes, record sections mutated *under* a valid CRC and re-compressed,
header fields pushed to the int64 edges, long and overflowing varints, random bytes) built
from valid batches of every codec -- with headers, null keys and values, control and
transactional batches, log-append-time batches -- go through both kernels: batch walking,
``records()``, ``control_type()``, ``consumer_records()``, ``ColumnBuilder.append_batch`` and
``BatchCursor`` with ``ColumnBuilder.append_cursor``. For every input both
must behave the same (equal batches, records and columns, or the same exception type and
message) and raise nothing but :class:`kaflux.errors.KafkaError` subclasses.

Every input sits in memory right against a ``PROT_NONE`` guard page (alternately at its
start and at its end), so a read past either end of the buffer crashes the process
instead of going unnoticed. Fixed seed; ``KAFLUX_KERNEL_FUZZ_CASES`` changes the count.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import random
import signal
import struct
import subprocess
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
from crc32c import crc32c

from kaflux.errors import KafkaError
from kaflux.records import build_control_batch, compress, decompress
from kaflux.records.batch_builder import BatchBuilder
from kaflux.records.interface import RecordDecoder
from kaflux.records.kernels import pure_decoder

CASES = int(os.environ.get("KAFLUX_KERNEL_FUZZ_CASES", "100000"))
SEED = 0x6B61666C  # "kafl"
TOPIC = "fuzz"
PARTITION = 3

FIELDS = (
    "base_offset",
    "batch_length",
    "partition_leader_epoch",
    "magic",
    "crc",
    "attributes",
    "compression",
    "timestamp_type",
    "is_transactional",
    "is_control",
    "has_delete_horizon",
    "last_offset_delta",
    "base_timestamp",
    "max_timestamp",
    "producer_id",
    "producer_epoch",
    "base_sequence",
    "record_count",
    "topic",
    "partition",
    "last_offset",
    "next_offset",
    "size_in_bytes",
)

Outcome = Any


# --- guarded memory ------------------------------------------------------------------------------


class GuardedBuffer:
    """Memory whose neighbours on both sides are inaccessible pages."""

    PAGES = 8

    def __init__(self) -> None:
        page = mmap.PAGESIZE
        self.page = page
        self.size = self.PAGES * page
        self.mm = mmap.mmap(-1, self.size + 2 * page)
        self.view = memoryview(self.mm)
        anchor = ctypes.c_char.from_buffer(self.mm)
        base = ctypes.addressof(anchor)
        del anchor
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        for start in (base, base + page + self.size):
            if libc.mprotect(start, page, mmap.PROT_NONE if hasattr(mmap, "PROT_NONE") else 0) != 0:
                raise OSError(ctypes.get_errno(), "mprotect failed")

    def place(self, data: bytes, at_end: bool) -> memoryview:
        """``data`` as a view that starts (or ends) right at a guard page."""
        assert len(data) <= self.size
        start = self.page + (self.size - len(data) if at_end else 0)
        self.view[start : start + len(data)] = data
        return self.view[start : start + len(data)]


def test_guard_pages_fault() -> None:
    """Reading one byte past a placed input crashes (so the fuzz test would notice)."""
    code = (
        "import ctypes, sys\n"
        f"sys.path.insert(0, {os.path.dirname(__file__)!r})\n"
        "from test_kernel_fuzz import GuardedBuffer\n"
        "g = GuardedBuffer()\n"
        "g.place(b'abc', at_end=True)\n"
        "end = ctypes.addressof(ctypes.c_char.from_buffer(g.mm)) + g.page + g.size\n"
        "assert ctypes.c_char.from_address(end - 1).value == b'c'\n"
        "print('read inside', flush=True)\n"
        "ctypes.c_char.from_address(end).value\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout == "read inside\n"
    assert result.returncode == -signal.SIGSEGV


# --- running a kernel --------------------------------------------------------------------------


def error(exc: BaseException) -> tuple[str, str, str | None]:
    if not isinstance(exc, KafkaError):
        raise AssertionError(f"{type(exc).__name__} escaped the kernel: {exc}") from exc
    cause = exc.__cause__
    return (type(exc).__name__, str(exc), None if cause is None else type(cause).__name__)


def outcome(kernel: RecordDecoder, view: memoryview, check_crcs: bool, select: tuple[int, int]) -> Outcome:
    """Everything observable about decoding ``view``: per batch its fields, records,
    control type and columns (or the errors), then the iteration's own error."""
    batches: list[Any] = []
    try:
        for batch in kernel.iter_batches(view, check_crcs=check_crcs, topic=TOPIC, partition=PARTITION):
            fields = tuple(getattr(batch, name) for name in FIELDS)
            try:
                records: Any = batch.records()
            except Exception as exc:
                records = error(exc)
            control: Any = None
            if batch.is_control:
                try:
                    control = batch.control_type()
                except Exception as exc:
                    control = error(exc)
            builder = kernel.ColumnBuilder()
            try:
                columns: Any = (builder.append_batch(batch, TOPIC, PARTITION, *select), builder.finish())
            except Exception as exc:
                columns = error(exc)
                assert len(builder) == 0 and builder.finish().num_rows == 0, "append_batch is not atomic"
                if isinstance(records, list):  # records decode, so only an int64 range error is allowed
                    assert "outside the int64 range" in columns[1], columns
                else:
                    assert columns == records, "columns and records fail differently"
            consumer = consumer_outcome(kernel, batch, select, records)
            cursor = cursor_outcome(kernel, batch, select, records, columns)
            batches.append((fields, records, control, columns, consumer, cursor))
    except Exception as exc:
        return batches, error(exc)
    return batches, None


def consumer_outcome(kernel: RecordDecoder, batch: Any, select: tuple[int, int], records: Any) -> Any:
    """``consumer_records()`` as plain tuples, or its error (which must be the one of
    ``records()``, or the int64 range error when those decode)."""
    try:
        return [
            (
                r.topic,
                r.partition,
                r.offset,
                r.timestamp,
                r.timestamp_type,
                r.key,
                r.value,
                r.headers,
                r.leader_epoch,
            )
            for r in batch.consumer_records(TOPIC, PARTITION, 7, select[0])
        ]
    except Exception as exc:
        failure = error(exc)
        if isinstance(records, list):
            assert "outside the int64 range" in failure[1], failure
        else:
            assert failure == records, "consumer records and records fail differently"
        return failure


def cursor_outcome(
    kernel: RecordDecoder, batch: Any, select: tuple[int, int], records: Any, columns: Any
) -> Any:
    """The batch appended through a BatchCursor in steps of ``select[1]`` records (at least
    one): each step's result and the columns, or the error (the one ``append_batch`` raised)."""
    builder = kernel.ColumnBuilder()
    try:
        cursor = kernel.BatchCursor(batch)
    except Exception as exc:
        failure = error(exc)
        if not isinstance(columns, tuple) or len(columns) != 2 or isinstance(columns[0], str):
            assert failure == columns, "the cursor and append_batch fail differently"
        else:
            assert "outside the int64 range" in failure[1], failure
        return failure
    step = min(max(select[1], 1), 3)
    steps: list[Any] = []
    min_offset = select[0]  # the first step skips the leading records below it, as append_batch does
    while cursor.remaining:
        before = cursor.remaining
        steps.append(builder.append_cursor(cursor, TOPIC, PARTITION, min_offset, step))
        min_offset = -(2**63)
        assert cursor.remaining < before
    result = builder.finish()
    everything = select[1] == sys.maxsize
    if everything and isinstance(columns, tuple) and len(columns) == 2 and not isinstance(columns[0], str):
        assert result == columns[1], "the cursor's columns differ from append_batch's"
    # again, alternating columns and ConsumerRecords
    cursor = kernel.BatchCursor(batch)
    mixed: list[Any] = []
    min_offset = select[0]
    while cursor.remaining:
        if len(mixed) % 2:
            mixed.append(builder.append_cursor(cursor, TOPIC, PARTITION, min_offset, step))
        else:
            mixed.append(
                [
                    (r.offset, r.timestamp, r.timestamp_type, r.key, r.value, r.headers)
                    for r in cursor.consumer_records(TOPIC, PARTITION, None, min_offset, step)
                ]
            )
        min_offset = -(2**63)
    return steps, result, mixed, builder.finish()


# --- inputs --------------------------------------------------------------------------------------

HEADER_KEYS = ["trace-id", "h", "", "ключ", "🔑", "x" * 40]


def make_corpus(rng: random.Random) -> list[bytes]:
    corpus: list[bytes] = []
    for codec in (0, 1, 2, 3, 4):
        for variant in range(14):
            transactional = variant % 3 == 0
            builder = BatchBuilder(
                codec,
                base_offset=rng.choice([0, 7, 1000, 2**40, 2**62]),
                timestamp_type=1 if variant % 4 == 1 else 0,
                is_transactional=transactional,
                producer_id=rng.randint(0, 2**40) if transactional else -1,
                producer_epoch=rng.randint(0, 100) if transactional else -1,
                base_sequence=rng.randint(0, 1000) if transactional else -1,
                partition_leader_epoch=rng.choice([-1, 0, 5]),
            )
            base_ts = rng.choice([0, 1_700_000_000_000, 2**50])
            for i in range(rng.choice([0, 1, 2, 3, 5, 8])):
                key = None if rng.random() < 0.3 else rng.randbytes(rng.randint(0, 12))
                if rng.random() < 0.15:
                    value = None
                elif rng.random() < 0.5:
                    value = b"value-%d " % i * rng.randint(0, 6)  # compressible
                else:
                    value = rng.randbytes(rng.randint(0, 40))
                headers = [
                    (
                        rng.choice(HEADER_KEYS),
                        None if rng.random() < 0.25 else rng.randbytes(rng.randint(0, 8)),
                    )
                    for _ in range(rng.choice([0, 0, 1, 2, 3]))
                ]
                builder.append(base_ts + rng.randint(-5000, 5000), key, value, headers)
            corpus.append(builder.build())
    for kind in (0, 1):
        corpus.append(
            build_control_batch(kind, producer_id=9, producer_epoch=2, timestamp_ms=5, base_offset=77)
        )
    return corpus


def reframe(header: bytes, payload: bytes, *, fix_crc: bool = True) -> bytes:
    """A batch with ``header``'s fields around ``payload``, length (and CRC) recomputed."""
    out = bytearray(header[:61] + payload)
    struct.pack_into(">i", out, 8, len(out) - 12)
    if fix_crc:
        struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


def fix_crc(batch: bytes) -> bytes:
    if len(batch) < 61:
        return batch
    out = bytearray(batch)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


def records_section(batch: bytes) -> bytes:
    codec = batch[22] & 0x07
    return decompress(codec, batch[61:]) if codec else batch[61:]


def mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    """One to four random edits of ``data``: bit flips, byte values, inserts, deletes."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        kind = rng.random()
        where = rng.randrange(len(out) + 1) if out else 0
        if kind < 0.35 and out:
            out[min(where, len(out) - 1)] ^= 1 << rng.randrange(8)
        elif kind < 0.6 and out:
            out[min(where, len(out) - 1)] = rng.choice([0x00, 0x01, 0x7F, 0x80, 0xFF, rng.randrange(256)])
        elif kind < 0.75:
            out[where:where] = rng.choice(
                [
                    bytes([rng.randrange(256)]),
                    b"\xff" * rng.randint(1, 11),  # long varint
                    b"\xff" * 9 + bytes([rng.choice([0x01, 0x02, 0x7F])]),  # 10-byte, maybe > 64 bits
                    rng.randbytes(rng.randint(1, 6)),
                ]
            )
        elif out:
            del out[where : where + rng.randint(1, 4)]
    return bytes(out)


def varint(value: int) -> bytes:
    n = (value << 1) ^ (value >> 63) if -(2**63) <= value < 2**63 else value
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def big_varint_record(rng: random.Random) -> bytes:
    """A record whose varints may overflow 64 bits or whose offsets/timestamps overflow int64."""
    big = rng.choice(
        [
            varint(2**63 - 1),
            varint(-(2**63)),
            b"\xff" * 9 + b"\x01",  # 2**64 - 1: -2**63 after zig-zag
            b"\xfe" * 9 + b"\x03",  # needs 66 bits
            b"\xff" * 9 + b"\x7f",  # needs 70 bits
            varint(rng.randint(-(2**40), 2**40)),
        ]
    )
    field = rng.randrange(3)
    ts_delta = big if field == 0 else varint(0)
    offset_delta = big if field == 1 else varint(0)
    body = b"\x00" + ts_delta + offset_delta + varint(1) + b"k" + varint(-1) + varint(0)
    if field == 2:
        body = b"\x00" + ts_delta + offset_delta + big + b"kk" + varint(-1) + varint(0)
    return varint(len(body)) + body


def make_case(rng: random.Random, corpus: list[bytes]) -> tuple[bytes, bool]:
    """One fuzz input and whether to check CRCs."""
    base = rng.choice(corpus)
    kind = rng.randrange(10)
    check_crcs = rng.random() < 0.5
    if kind == 0:  # raw damage anywhere, CRC left stale
        data = mutate_bytes(rng, base)
    elif kind == 1:  # truncation
        data = base[: rng.randrange(len(base) + 1)]
    elif kind == 2:  # batch length field
        out = bytearray(base)
        length = struct.unpack_from(">i", out, 8)[0]
        new = rng.choice(
            [
                length + rng.randint(-16, 16),
                rng.randint(-(2**31), 2**31 - 1),
                0,
                -1,
                48,
                49,
                2**31 - 1,
            ]
        )
        struct.pack_into(">i", out, 8, max(-(2**31), min(2**31 - 1, new)))
        data = bytes(out)
    elif kind == 3:  # records damaged under a valid CRC (re-compressed: the decoder must catch it)
        section = mutate_bytes(rng, records_section(base))
        codec = base[22] & 0x07
        data = reframe(base, compress(codec, section) if codec else section)
        check_crcs = True
    elif kind == 4:  # header fields under a valid CRC
        out = bytearray(base)
        field = rng.randrange(5)
        if field == 0:
            struct.pack_into(">i", out, 57, rng.choice([0, 1, 2, 7, 100, -1, 2**31 - 1, rng.randint(0, 20)]))
        elif field == 1:
            struct.pack_into(">h", out, 21, rng.randrange(-(2**15), 2**15))
        elif field == 2:
            struct.pack_into(">q", out, 27, rng.choice([2**63 - 1, -(2**63), 2**63 - 3, 0]))
        elif field == 3:
            struct.pack_into(">q", out, 35, rng.choice([2**63 - 1, -(2**63), -1]))
        else:
            out[21] ^= 0x08  # toggle the timestamp type
        data = fix_crc(bytes(out))
    elif kind == 5:  # base offset near the int64 edges (not covered by the CRC)
        out = bytearray(base)
        struct.pack_into(">q", out, 0, rng.choice([2**63 - 1, 2**63 - 2, -(2**63), -1]))
        data = bytes(out)
    elif kind == 6:  # records with long or overflowing varints, valid CRC
        codec = rng.choice([0, 0, 3])
        section = b"".join(big_varint_record(rng) for _ in range(rng.randint(1, 3)))
        out = bytearray(base[:61])
        struct.pack_into(">i", out, 57, len(section) and rng.randint(1, 3))
        struct.pack_into(">h", out, 21, codec | (0x08 if rng.random() < 0.3 else 0))
        data = reframe(bytes(out), compress(codec, section) if codec else section)
    elif kind == 7:  # random bytes, sometimes behind a plausible header
        body = rng.randbytes(rng.randint(0, 300))
        if rng.random() < 0.5:
            data = struct.pack(">qiib", 0, 5 + len(body) + rng.randint(-8, 0), 0, 2) + body
        else:
            data = body
    elif kind == 8:  # two batches, the second damaged
        data = base + mutate_bytes(rng, rng.choice(corpus))
    else:  # damage after the CRC, then a fixed CRC
        data = fix_crc(mutate_bytes(rng, base))
    return data, check_crcs


def selection(rng: random.Random) -> tuple[int, int]:
    return rng.choice([(-(2**63), sys.maxsize), (0, 2), (1003, 1), (2**40 + 1, 100), (2**62, 0)])


# --- the test ------------------------------------------------------------------------------------


@pytest.mark.timeout(300)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="guard pages via mprotect (Linux)")
def test_compiled_kernel_matches_pure_kernel_on_mutated_batches(compiled: ModuleType) -> None:
    pure: RecordDecoder = pure_decoder()
    rng = random.Random(SEED)
    corpus = make_corpus(rng)
    guarded = GuardedBuffer()
    kinds: dict[str, int] = {}
    for case in range(CASES):
        data, check_crcs = make_case(rng, corpus)
        select = selection(rng)
        view = guarded.place(data, at_end=bool(case & 1))
        got = outcome(compiled, view, check_crcs, select)  # type: ignore[arg-type]
        want = outcome(pure, view, check_crcs, select)
        if got != want:
            raise AssertionError(
                f"case {case}: kernels disagree on {data.hex()} (check_crcs={check_crcs}, select={select})"
                f"\ncompiled: {got!r}\npure:     {want!r}"
            )
        final = want[1]
        label = "ok" if final is None else final[1].split(": ", 1)[-1].split(" ")[0]
        kinds[label] = kinds.get(label, 0) + 1
        del got, want, view
    # the inputs reached both the success path and the error paths
    assert kinds.get("ok", 0) > CASES // 10, kinds


def test_decode_records_matches_pure_kernel(compiled: ModuleType) -> None:
    """The kernel entry point on its own: random record bytes, positions and base values
    (including non-int and out-of-int64 arguments the compiled kernel hands to the pure one)."""
    rng = random.Random(SEED + 1)
    corpus = make_corpus(rng)
    sections = [records_section(batch) for batch in corpus]
    specials: list[Callable[[], Any]] = [
        lambda: rng.randint(-(2**63), 2**63 - 1),
        lambda: rng.choice([2**63 - 1, -(2**63), 2**63, -(2**63) - 1, 2**70]),
        lambda: rng.randint(-1000, 10**13),
    ]
    for _ in range(20000):
        section = rng.choice(sections)
        if rng.random() < 0.7:
            section = mutate_bytes(rng, section)
        if rng.random() < 0.3:
            section = rng.randbytes(3) + section + rng.randbytes(rng.randint(0, 3))
        data = section
        pos = rng.choice([0, 0, 1, 3, -1, len(data) + 1])
        end = rng.choice([len(data), len(data), len(data) - rng.randint(0, 5), len(data) + 1])
        count = rng.choice([rng.randint(0, 9), -1, 2**31, rng.randint(0, 3)])
        base_offset = rng.choice(specials)()
        base_ts = rng.choice(specials)()
        lat = None if rng.random() < 0.6 else rng.choice(specials)()
        args = (data, pos, end, count, base_offset, base_ts, lat)
        results: list[tuple[Any, ...]] = []
        for kernel in (compiled, pure_decoder()):
            try:
                results.append(("ok", kernel.decode_records(*args)))
            except KafkaError as exc:
                results.append(("error", type(exc).__name__, str(exc)))
        assert results[0] == results[1], (args, results)


def test_utf8_validation_matches_python(compiled: ModuleType) -> None:
    utf8_valid = compiled.utf8_valid
    rng = random.Random(SEED + 2)
    pieces = [b"a", b"\x7f", b"\xc2\x80", b"\xdf\xbf", b"\xe0\xa0\x80", b"\xed\x9f\xbf", b"\xed\xa0\x80"]
    pieces += [b"\xef\xbf\xbf", b"\xf0\x90\x80\x80", b"\xf4\x8f\xbf\xbf", b"\xf4\x90\x80\x80", b"\xc0\x80"]
    pieces += [b"\xc1\xbf", b"\xe0\x9f\xbf", b"\xf0\x8f\xbf\xbf", b"\xf5\x80\x80\x80", b"\x80", b"\xff"]
    pieces += ["ключ🔑".encode(), b"plain ascii text!"]
    for _ in range(100000):
        if rng.random() < 0.5:
            data = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 5)))
            if data and rng.random() < 0.3:
                data = data[: rng.randrange(len(data))]
        else:
            data = bytes(
                rng.choice([0x41, 0x80, 0xBF, 0xC2, 0xE0, 0xED, 0xF0, 0xF4, rng.randrange(256)])
                for _ in range(rng.randint(0, 6))
            )
        try:
            data.decode()
            expected = True
        except UnicodeDecodeError:
            expected = False
        assert utf8_valid(data) == expected, data


def test_crc32c_matches_the_crc32c_package(compiled: ModuleType) -> None:
    rng = random.Random(SEED + 3)
    lengths = [*range(0, 70), 255, 256, 767, 768, 769, 3 * 8192 - 1, 3 * 8192, 3 * 8192 + 7, 200_000]
    for n in lengths:
        for _ in range(3):
            data = rng.randbytes(n)
            want = crc32c(data)
            assert compiled.crc32c(data) == want, n
            assert compiled.crc32c_portable(data) == want, n
            assert compiled.crc32c(memoryview(data)[1:]) == crc32c(data[1:]), n
