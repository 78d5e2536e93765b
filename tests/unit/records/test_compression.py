"""Codec layer: round trips, formats (xerial snappy, LZ4 frame), size limits, bad input."""

from __future__ import annotations

import contextlib
import gzip
import os
import struct
import zlib

import cramjam
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kaflux.errors import ConfigError
from kaflux.records import compression
from kaflux.records.compression import (
    CODEC_IDS,
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    codec_id,
    codec_name,
    compress,
    decompress,
    decompression_limit,
    xerial_frame,
)
from kaflux.records.types import RecordFormatError

CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
COMPRESSED = [GZIP, SNAPPY, LZ4, ZSTD]
SAMPLE = os.urandom(3000) + b"abcdefgh" * 20000 + bytes(5000)


def test_codec_ids_and_names() -> None:
    assert CODEC_IDS == {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
    assert [codec_name(c) for c in CODECS] == ["none", "gzip", "snappy", "lz4", "zstd"]
    assert codec_name(6) == "unknown(6)"
    assert codec_id("LZ4") == LZ4
    with pytest.raises(ConfigError):
        codec_id("brotli")


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("data", [b"", b"x", SAMPLE])
def test_round_trip(codec: int, data: bytes) -> None:
    packed = compress(codec, data)
    assert decompress(codec, packed) == data
    assert decompress(codec, memoryview(packed)) == data
    assert decompress(codec, bytearray(packed)) == data
    assert decompress(codec, compress(codec, bytearray(data))) == data
    assert decompress(codec, compress(codec, memoryview(data))) == data


@settings(max_examples=60, deadline=None)
@given(codec=st.sampled_from(CODECS), data=st.binary(max_size=5000))
def test_round_trip_property(codec: int, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data


def test_compressed_formats() -> None:
    assert compress(GZIP, SAMPLE)[:2] == b"\x1f\x8b"
    assert gzip.decompress(compress(GZIP, SAMPLE)) == SAMPLE
    # raw snappy (no stream framing): a varint length preamble, decodable by raw snappy
    raw = compress(SNAPPY, SAMPLE)
    assert bytes(cramjam.snappy.decompress_raw(raw)) == SAMPLE
    # LZ4 frame format with independent blocks (the Java client can't read linked blocks)
    lz4 = compress(LZ4, SAMPLE)
    assert struct.unpack_from("<I", lz4)[0] == 0x184D2204
    assert lz4[4] & 0x20, "block independence flag must be set"
    assert bytes(cramjam.lz4.decompress(lz4)) == SAMPLE
    assert struct.unpack_from("<I", compress(ZSTD, SAMPLE))[0] == 0xFD2FB528


def test_decompress_none_respects_limit() -> None:
    assert decompress(NONE, b"abc", max_output=3) == b"abc"
    with pytest.raises(RecordFormatError):
        decompress(NONE, b"abcd", max_output=3)


def test_unknown_codec() -> None:
    with pytest.raises(RecordFormatError, match="unknown compression codec id 5"):
        compress(5, b"x")
    with pytest.raises(RecordFormatError, match="unknown compression codec id 7"):
        decompress(7, b"x")


# --- xerial snappy (Java client framing) ---------------------------------------------------


def _xerial_by_hand(chunks: list[bytes], version: tuple[bytes, bytes] = (b"\0\0\0\1", b"\0\0\0\1")) -> bytes:
    """The xerial stream format written out by hand: magic, version, compat, blocks."""
    out = b"\x82SNAPPY\x00" + version[0] + version[1]
    for chunk in chunks:
        block = bytes(cramjam.snappy.compress_raw(chunk))
        out += struct.pack(">i", len(block)) + block
    return out


def test_xerial_snappy_single_block() -> None:
    framed = _xerial_by_hand([b"hello xerial " * 100])
    assert decompress(SNAPPY, framed) == b"hello xerial " * 100


def test_xerial_snappy_many_blocks() -> None:
    chunks = [SAMPLE[i : i + 32 * 1024] for i in range(0, len(SAMPLE), 32 * 1024)]
    assert len(chunks) > 3
    assert decompress(SNAPPY, _xerial_by_hand(chunks)) == SAMPLE
    assert decompress(SNAPPY, xerial_frame([bytes(cramjam.snappy.compress_raw(c)) for c in chunks])) == SAMPLE
    assert decompress(SNAPPY, compression.xerial_compress(SAMPLE)) == SAMPLE


def test_xerial_snappy_header_only_and_little_endian_versions() -> None:
    assert decompress(SNAPPY, _xerial_by_hand([])) == b""
    # some producers write the version fields little-endian; they are ignored
    framed = _xerial_by_hand([b"data"], version=(b"\1\0\0\0", b"\1\0\0\0"))
    assert decompress(SNAPPY, framed) == b"data"


@pytest.mark.parametrize(
    "mangle",
    [
        lambda f: f[:-1],  # truncated block
        lambda f: f[:18],  # truncated block length
        lambda f: f[:16] + struct.pack(">i", -5) + f[20:],  # negative block length
        lambda f: f[:16] + struct.pack(">i", 0) + f[20:],  # empty block
        lambda f: f[:16] + struct.pack(">i", 1 << 30) + f[20:],  # block length past the end
        lambda f: f + b"\0\0\0\2\xff\xff",  # garbage block
    ],
)
def test_xerial_snappy_malformed(mangle: object) -> None:
    framed = _xerial_by_hand([b"hello " * 50, b"world " * 50])
    assert callable(mangle)
    with pytest.raises(RecordFormatError):
        decompress(SNAPPY, mangle(framed))


# --- gzip specifics -------------------------------------------------------------------------


def test_gzip_concatenated_members() -> None:
    data = gzip.compress(b"first ") + gzip.compress(b"second")
    assert decompress(GZIP, data) == b"first second"


def test_gzip_trailing_garbage_and_truncation() -> None:
    packed = gzip.compress(b"payload" * 100)
    with pytest.raises(RecordFormatError):
        decompress(GZIP, packed + b"garbage!")
    with pytest.raises(RecordFormatError):
        decompress(GZIP, packed[:-3])
    with pytest.raises(RecordFormatError):
        decompress(GZIP, b"")
    with pytest.raises(RecordFormatError):  # zlib, not gzip, wrapper
        decompress(GZIP, zlib.compress(b"payload"))


# --- decompression limits --------------------------------------------------------------------


def test_decompression_limit_formula() -> None:
    assert decompression_limit(0) == 64 * 1024 * 1024
    assert decompression_limit(1024) == 64 * 1024 * 1024
    assert decompression_limit(4 * 1024 * 1024) == 64 * 4 * 1024 * 1024
    assert decompression_limit(1 << 40) == 2**31 - 1


@pytest.mark.parametrize("codec", COMPRESSED)
def test_bomb_is_refused(codec: int) -> None:
    zeros = bytes(4 * 1024 * 1024)
    packed = compress(codec, zeros)
    assert decompress(codec, packed) == zeros  # within the default limit
    assert decompress(codec, packed, max_output=len(zeros)) == zeros
    with pytest.raises(RecordFormatError, match="limit"):
        decompress(codec, packed, max_output=1024 * 1024)


def test_xerial_bomb_is_refused() -> None:
    zeros = bytes(256 * 1024)
    framed = compression.xerial_compress(zeros)
    with pytest.raises(RecordFormatError, match="limit"):
        decompress(SNAPPY, framed, max_output=100 * 1024)


def test_default_limit_applies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compression, "DECOMPRESS_MIN_LIMIT", 1000)
    monkeypatch.setattr(compression, "DECOMPRESS_RATIO_LIMIT", 4)
    for codec in COMPRESSED:
        with pytest.raises(RecordFormatError, match="limit"):
            decompress(codec, compress(codec, bytes(100_000)))


def test_lz4_skippable_frame_and_concatenation() -> None:
    skippable = struct.pack("<II", 0x184D2A51, 3) + b"xyz"
    data = skippable + compress(LZ4, b"one") + compress(LZ4, b"two")
    assert decompress(LZ4, data) == b"onetwo"


def test_zstd_concatenated_frames() -> None:
    assert decompress(ZSTD, compress(ZSTD, b"one") + compress(ZSTD, b"two")) == b"onetwo"


def test_zstd_rle_bomb_bounded_by_block_headers() -> None:
    # One frame of RLE blocks, each 4 bytes inflating to 128 KiB: bounded before inflating.
    block = ((128 * 1024) << 3) | (1 << 1)  # RLE block, not last
    last = block | 1
    frame = struct.pack("<I", 0xFD2FB528) + bytes([0x00, 0x58])  # no FCS, window 2^(10+11)
    body = b"".join(struct.pack("<I", block)[:3] + b"\0" for _ in range(1000))
    frame += body + struct.pack("<I", last)[:3] + b"\0"
    with pytest.raises(RecordFormatError, match="limit"):
        decompress(ZSTD, frame, max_output=10 * 1024 * 1024)


# --- malformed input never raises anything but RecordFormatError -----------------------------


@pytest.mark.parametrize("codec", COMPRESSED)
def test_truncations_are_format_errors(codec: int) -> None:
    packed = compress(codec, SAMPLE)
    for cut in range(1, len(packed), max(1, len(packed) // 97)):
        try:
            out = decompress(codec, packed[:cut])
        except RecordFormatError:
            continue
        # a prefix may happen to be a valid stream only if it yields a prefix of the data
        assert SAMPLE.startswith(out)


FUZZ = settings(
    max_examples=int(os.environ.get("KAFLUX_FUZZ_EXAMPLES", "300")),  # raise for long fuzz runs
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@FUZZ
@given(codec=st.sampled_from(COMPRESSED), data=st.binary(max_size=400))
def test_random_bytes(codec: int, data: bytes) -> None:
    with contextlib.suppress(RecordFormatError):
        decompress(codec, data, max_output=1 << 20)


@FUZZ
@given(
    codec=st.sampled_from(COMPRESSED),
    payload=st.binary(min_size=1, max_size=2000),
    edits=st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 255)), min_size=1, max_size=4),
)
def test_mutated_streams(codec: int, payload: bytes, edits: list[tuple[int, int]]) -> None:
    packed = bytearray(compress(codec, payload))
    for where, value in edits:
        packed[where % len(packed)] = value
    with contextlib.suppress(RecordFormatError):
        decompress(codec, bytes(packed), max_output=1 << 20)


def test_header_prefixes_with_valid_magic() -> None:
    """Streams cut inside their frame headers (where hand-written walkers could overrun)."""
    for codec in (LZ4, ZSTD):
        packed = compress(codec, b"abc" * 1000)
        for cut in range(0, 24):
            with contextlib.suppress(RecordFormatError):
                decompress(codec, packed[:cut])
