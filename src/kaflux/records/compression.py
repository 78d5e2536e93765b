"""Compression codecs of Kafka record batches. [pure]

Codec ids are those of the batch attributes (bits 0-2) and the names those of the
``compression.type`` setting::

    0 none    1 gzip    2 snappy    3 lz4    4 zstd

Compression goes through cramjam (gzip decompression through the standard library's zlib,
which can stop at an output limit). Formats:

* gzip: RFC 1952 gzip; concatenated members are accepted when decompressing.
* snappy: we compress to *raw* snappy (as librdkafka does). Decompression also accepts the
  *xerial* framing written by the Java client: the 8-byte magic ``\\x82SNAPPY\\x00``, two
  4-byte version fields (ignored: some producers write them little-endian), then blocks of
  ``int32 big-endian length`` + raw snappy data.
* lz4: the LZ4 *frame* format; we write independent blocks (the Java client decodes every
  block on its own and cannot read linked blocks).
* zstd: zstd frames.

Decompression is bounded: before anything is inflated, the output size is bounded from the
compressed stream's own framing (snappy's length preamble, the LZ4 frame's block count and
maximum block size, the zstd frame's block headers; gzip is inflated incrementally and
stopped at the limit), and data that could inflate past the limit is rejected. The default
limit, :func:`decompression_limit`, is ``max(64 MiB, 64 * compressed size)`` capped at
``2**31 - 1`` bytes (Kafka sizes are int32). Errors raise :class:`RecordFormatError`.
"""

from __future__ import annotations

import struct
import zlib
from typing import Final

import cramjam

from kaflux.errors import ConfigError
from kaflux.records.types import BytesLike, RecordFormatError

NONE: Final = 0
GZIP: Final = 1
SNAPPY: Final = 2
LZ4: Final = 3
ZSTD: Final = 4

CODEC_NAMES: Final[dict[int, str]] = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
CODEC_IDS: Final[dict[str, int]] = {name: codec for codec, name in CODEC_NAMES.items()}

# Decompression limits (see the module docstring). Module attributes so tests can lower them.
DECOMPRESS_MIN_LIMIT = 64 * 1024 * 1024
DECOMPRESS_RATIO_LIMIT = 64
DECOMPRESS_HARD_LIMIT = 2**31 - 1

_XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE: Final = 16
_XERIAL_BLOCK_SIZE: Final = 32 * 1024

_LZ4_MAGIC: Final = 0x184D2204
_ZSTD_MAGIC: Final = 0xFD2FB528
_SKIPPABLE_MASK: Final = 0xFFFFFFF0
_SKIPPABLE_MAGIC: Final = 0x184D2A50  # lz4 and zstd share the skippable frame magic range
_ZSTD_BLOCK_MAX: Final = 128 * 1024

_U32LE = struct.Struct("<I")
_I32BE = struct.Struct(">i")


def codec_id(name: str) -> int:
    """The codec id for a ``compression.type`` name (case-insensitive)."""
    codec = CODEC_IDS.get(name.strip().lower())
    if codec is None:
        raise ConfigError("compression.type", f"unknown codec {name!r}; expected one of {sorted(CODEC_IDS)}")
    return codec


def codec_name(codec: int) -> str:
    """The ``compression.type`` name of a codec id, or ``"unknown(<id>)"``."""
    return CODEC_NAMES.get(codec, f"unknown({codec})")


def decompression_limit(compressed_size: int) -> int:
    """Largest output :func:`decompress` accepts by default for ``compressed_size`` bytes."""
    return min(DECOMPRESS_HARD_LIMIT, max(DECOMPRESS_MIN_LIMIT, DECOMPRESS_RATIO_LIMIT * compressed_size))


def compress(codec: int, data: BytesLike, level: int | None = None) -> bytes:
    """Compress ``data`` with ``codec`` (0-4); codec 0 returns the bytes unchanged. ``level``
    is the codec's compression level (KIP-390; None: the codec's default; snappy has none)."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return bytes(
            cramjam.gzip.compress(data) if level is None else cramjam.gzip.compress(data, level=level)
        )
    if codec == SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == LZ4:
        compressor = (
            cramjam.lz4.Compressor(block_linked=False)
            if level is None
            else cramjam.lz4.Compressor(level=level, block_linked=False)
        )
        compressor.compress(data if isinstance(data, bytes) else bytes(data))  # accepts only bytes
        return bytes(compressor.finish())
    if codec == ZSTD:
        return bytes(
            cramjam.zstd.compress(data) if level is None else cramjam.zstd.compress(data, level=level)
        )
    raise RecordFormatError(f"unknown compression codec id {codec}")


def decompress(codec: int, data: BytesLike, max_output: int | None = None) -> bytes:
    """Decompress ``data`` compressed with ``codec`` (0-4).

    Output larger than ``max_output`` (default :func:`decompression_limit` of the input
    size) is refused before it is produced. Any malformed input raises
    :class:`RecordFormatError`, never a codec-specific exception.
    """
    out = decompress_view(codec, data, max_output)
    return out if isinstance(out, bytes) else bytes(out)


def decompress_view(codec: int, data: BytesLike, max_output: int | None = None) -> bytes | memoryview:
    """:func:`decompress` without copying the codec's output: returns ``bytes`` or a
    read-only byte ``memoryview`` of cramjam's output buffer (same checks, same errors).

    For the compiled record kernel, which reads the records straight from the buffer.
    """
    view = memoryview(data).cast("B") if not isinstance(data, bytes) else data
    limit = decompression_limit(len(view)) if max_output is None else max_output
    if codec == NONE:
        if len(view) > limit:
            raise RecordFormatError(f"data of {len(view)} bytes exceeds the limit of {limit} bytes")
        return bytes(view)
    out: bytes | memoryview
    try:
        if codec == GZIP:
            out = _gunzip(view, limit)
        elif codec == SNAPPY:
            out = _snappy_decompress(view, limit)
        elif codec == LZ4:
            _check_bound("lz4", _lz4_output_bound(view, limit), limit)
            out = memoryview(cramjam.lz4.decompress(view))
        elif codec == ZSTD:
            _check_bound("zstd", _zstd_output_bound(view, limit), limit)
            out = memoryview(cramjam.zstd.decompress(view))
        else:
            raise RecordFormatError(f"unknown compression codec id {codec}")
    except RecordFormatError:
        raise
    except BaseException as exc:
        # Any codec failure on hostile input is malformed data -- including a Rust panic in
        # cramjam, which pyo3 raises as PanicException, a BaseException.
        if not isinstance(exc, Exception) and type(exc).__name__ != "PanicException":
            raise
        raise RecordFormatError(f"{codec_name(codec)} decompression failed: {exc}") from exc
    if len(out) > limit:  # defence in depth: the framing bounds above should prevent this
        raise RecordFormatError(f"{codec_name(codec)} output of {len(out)} bytes exceeds {limit} bytes")
    return out


def _check_bound(name: str, bound: int, limit: int) -> None:
    if bound > limit:
        raise RecordFormatError(
            f"{name} data may decompress to {bound} bytes, more than the limit of {limit} bytes"
        )


def _truncated(name: str) -> RecordFormatError:
    return RecordFormatError(f"{name} data is truncated")


# --- gzip ---------------------------------------------------------------------------------


def _gunzip(data: BytesLike, limit: int) -> bytes:
    parts: list[bytes] = []
    total = 0
    rest: BytesLike = data
    while True:
        inflater = zlib.decompressobj(wbits=31)  # gzip wrapper only
        try:
            chunk = inflater.decompress(rest, limit + 1 - total)  # max_length >= 1 here
        except zlib.error as exc:
            raise RecordFormatError(f"gzip decompression failed: {exc}") from exc
        total += len(chunk)
        if total > limit:
            raise RecordFormatError(f"gzip data decompresses to more than the limit of {limit} bytes")
        parts.append(chunk)
        if not inflater.eof:
            raise _truncated("gzip")
        rest = inflater.unused_data
        if not rest:
            break
    return parts[0] if len(parts) == 1 else b"".join(parts)


# --- snappy -------------------------------------------------------------------------------


def _snappy_raw_length(block: memoryview | bytes) -> int:
    """The uncompressed length from a raw snappy block's varint preamble (uint32)."""
    result = 0
    for i in range(5):
        if i >= len(block):
            raise _truncated("snappy")
        byte = block[i]
        result |= (byte & 0x7F) << (7 * i)
        if byte < 0x80:
            return result
    raise RecordFormatError("snappy length preamble is too long")


def _snappy_decompress(data: memoryview | bytes, limit: int) -> bytes | memoryview:
    if len(data) >= _XERIAL_HEADER_SIZE and data[:8] == _XERIAL_MAGIC:
        return _xerial_decompress(data, limit)
    size = _snappy_raw_length(data)
    _check_bound("snappy", size, limit)
    out = memoryview(cramjam.snappy.decompress_raw(data))
    if len(out) != size:
        raise RecordFormatError(f"snappy output is {len(out)} bytes, preamble says {size}")
    return out


def _xerial_decompress(data: memoryview | bytes, limit: int) -> bytes:
    parts: list[memoryview] = []
    total = 0
    pos = _XERIAL_HEADER_SIZE
    end = len(data)
    while pos < end:
        if end - pos < 4:
            raise _truncated("xerial snappy")
        (block_len,) = _I32BE.unpack_from(data, pos)
        pos += 4
        if block_len <= 0 or block_len > end - pos:
            raise RecordFormatError(f"xerial snappy block length {block_len} is out of range")
        block = data[pos : pos + block_len]
        pos += block_len
        size = _snappy_raw_length(block)
        total += size
        _check_bound("snappy", total, limit)
        out = memoryview(cramjam.snappy.decompress_raw(block))
        if len(out) != size:
            raise RecordFormatError(f"snappy output is {len(out)} bytes, preamble says {size}")
        parts.append(out)
    return b"".join(parts)


def xerial_frame(raw_blocks: list[bytes]) -> bytes:
    """Wrap raw snappy blocks in xerial framing (version 1, compatible version 1).

    Only for tests and tools: kaflux compresses to raw snappy.
    """
    out = bytearray(_XERIAL_MAGIC)
    out += struct.pack(">ii", 1, 1)
    for block in raw_blocks:
        out += _I32BE.pack(len(block))
        out += block
    return bytes(out)


def xerial_compress(data: bytes, block_size: int = _XERIAL_BLOCK_SIZE) -> bytes:
    """Snappy-compress ``data`` in xerial framing, as the Java client does (for tests)."""
    blocks = [
        bytes(cramjam.snappy.compress_raw(data[i : i + block_size])) for i in range(0, len(data), block_size)
    ]
    return xerial_frame(blocks)


# --- lz4 / zstd framing walkers -----------------------------------------------------------


def _skip_skippable(data: memoryview | bytes, pos: int, name: str) -> int:
    if len(data) - pos < 8:
        raise _truncated(name)
    (size,) = _U32LE.unpack_from(data, pos + 4)
    pos += 8 + size
    if pos > len(data):
        raise _truncated(name)
    return pos


def _lz4_output_bound(data: memoryview | bytes, limit: int) -> int:
    """Upper bound of the decompressed size of LZ4 frames, from their block headers.

    A compressed block inflates to at most the frame's maximum block size, a stored block
    to its own size. Producers fill all blocks but the last, so the bound is tight.
    """
    end = len(data)
    if end == 0:
        raise _truncated("lz4")
    pos = 0
    total = 0
    while pos < end:
        if end - pos < 4:
            raise _truncated("lz4")
        (magic,) = _U32LE.unpack_from(data, pos)
        if magic & _SKIPPABLE_MASK == _SKIPPABLE_MAGIC:
            pos = _skip_skippable(data, pos, "lz4")
            continue
        if magic != _LZ4_MAGIC:
            raise RecordFormatError(f"bad lz4 frame magic 0x{magic:08x}")
        if end - pos < 7:
            raise _truncated("lz4")
        flg = data[pos + 4]
        bd = data[pos + 5]
        if flg >> 6 != 1:
            raise RecordFormatError(f"unsupported lz4 frame version {flg >> 6}")
        block_max_id = (bd >> 4) & 0x07
        if block_max_id < 4:
            raise RecordFormatError(f"invalid lz4 block maximum size id {block_max_id}")
        block_max = 1 << (8 + 2 * block_max_id)  # 4 -> 64 KiB ... 7 -> 4 MiB
        block_checksum = 4 if flg & 0x10 else 0
        content_checksum = 4 if flg & 0x04 else 0
        pos += 7 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
        while True:
            if end - pos < 4:
                raise _truncated("lz4")
            (word,) = _U32LE.unpack_from(data, pos)
            pos += 4
            if word == 0:  # end mark
                pos += content_checksum
                break
            size = word & 0x7FFFFFFF
            if size > block_max:
                raise RecordFormatError(f"lz4 block of {size} bytes exceeds the frame's maximum {block_max}")
            total += size if word & 0x80000000 else block_max
            pos += size + block_checksum
            if pos > end:
                raise _truncated("lz4")
            if total > limit:
                return total
        if pos > end:
            raise _truncated("lz4")
    return total


_ZSTD_DICT_ID_SIZES: Final = (0, 1, 2, 4)
_ZSTD_FCS_SIZES: Final = (0, 2, 4, 8)


def _zstd_output_bound(data: memoryview | bytes, limit: int) -> int:
    """Upper bound of the decompressed size of zstd frames, from their block headers.

    Raw and RLE blocks state their output size; a compressed block inflates to at most
    128 KiB (the format's block maximum).
    """
    end = len(data)
    if end == 0:
        raise _truncated("zstd")
    pos = 0
    total = 0
    while pos < end:
        if end - pos < 4:
            raise _truncated("zstd")
        (magic,) = _U32LE.unpack_from(data, pos)
        if magic & _SKIPPABLE_MASK == _SKIPPABLE_MAGIC:
            pos = _skip_skippable(data, pos, "zstd")
            continue
        if magic != _ZSTD_MAGIC:
            raise RecordFormatError(f"bad zstd frame magic 0x{magic:08x}")
        pos += 4
        if pos >= end:
            raise _truncated("zstd")
        descriptor = data[pos]
        pos += 1
        if descriptor & 0x08:
            raise RecordFormatError("zstd frame header has its reserved bit set")
        single_segment = (descriptor >> 5) & 1
        fcs_flag = descriptor >> 6
        pos += (0 if single_segment else 1) + _ZSTD_DICT_ID_SIZES[descriptor & 0x03]
        pos += _ZSTD_FCS_SIZES[fcs_flag] if fcs_flag else single_segment
        while True:
            if end - pos < 3:
                raise _truncated("zstd")
            header = data[pos] | (data[pos + 1] << 8) | (data[pos + 2] << 16)
            pos += 3
            block_type = (header >> 1) & 0x03
            block_size = header >> 3
            if block_size > _ZSTD_BLOCK_MAX:
                raise RecordFormatError(f"zstd block size {block_size} exceeds 128 KiB")
            if block_type == 0:  # raw
                total += block_size
                pos += block_size
            elif block_type == 1:  # RLE: one byte repeated block_size times
                total += block_size
                pos += 1
            elif block_type == 2:  # compressed
                total += _ZSTD_BLOCK_MAX
                pos += block_size
            else:
                raise RecordFormatError("zstd block has the reserved block type")
            if pos > end:
                raise _truncated("zstd")
            if total > limit:
                return total
            if header & 1:  # last block
                break
        if descriptor & 0x04:
            pos += 4  # content checksum
        if pos > end:
            raise _truncated("zstd")
    return total
