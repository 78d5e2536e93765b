"""Corrupted batches raise CorruptRecordError -- never another exception, never a hang.

Length-field semantics: a batch whose length field points past the end of the buffer is
indistinguishable from a batch the broker cut at the fetch size limit, which must be
silently ignored. So a flipped length byte that *increases* the length past the end of the
buffer yields no batch (and no error); every other length change raises: lengths below the
v2 header size are rejected outright, and a length that is wrong but still inside the
buffer makes the CRC (which covers up to the batch's end) mismatch -- or, with CRC checks
off, makes the records section end in the wrong place. Base offset and partition leader
epoch are not covered by the CRC, so flipping them goes unnoticed (as in Kafka).
"""

from __future__ import annotations

import contextlib
import os
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kaflux.errors import CorruptRecordError
from kaflux.records import BatchBuilder, assemble_batch, build_control_batch
from kaflux.records.interface import RecordDecoder

CODECS = [0, 1, 2, 3, 4]
MASKS = [0x01, 0x80, 0xFF]


def make_batch(codec: int, *, base_offset: int = 1000, transactional: bool = False) -> bytes:
    builder = BatchBuilder(
        codec,
        base_offset=base_offset,
        is_transactional=transactional,
        producer_id=5 if transactional else -1,
        producer_epoch=0 if transactional else -1,
        base_sequence=0 if transactional else -1,
    )
    for i in range(6):
        builder.append(1_700_000_000_000 + i, b"key-%d" % i, b"value-%d " % i * 8, [("trace", b"t%d" % i)])
    builder.append(1_700_000_000_010, None, None)
    raw = builder.build()
    assert raw[22] & 0x07 == codec
    return raw


def decode(kernel: RecordDecoder, buf: bytes, *, check_crcs: bool = True) -> int:
    """Decode every batch and record; returns the number of batches."""
    count = 0
    for batch in kernel.iter_batches(memoryview(buf), check_crcs=check_crcs, topic="t", partition=0):
        batch.records()
        if batch.is_control:
            batch.control_type()
        count += 1
    return count


def decode_or_corrupt(kernel: RecordDecoder, buf: bytes, *, check_crcs: bool) -> None:
    """Decoding either succeeds or raises CorruptRecordError; anything else propagates."""
    with contextlib.suppress(CorruptRecordError):
        decode(kernel, buf, check_crcs=check_crcs)


def flipped(buf: bytes, index: int, mask: int) -> bytes:
    out = bytearray(buf)
    out[index] ^= mask
    return bytes(out)


@pytest.mark.parametrize("transactional", [False, True])
@pytest.mark.parametrize("codec", CODECS)
def test_every_crc_covered_byte(kernel: RecordDecoder, codec: int, transactional: bool) -> None:
    batch = make_batch(codec, transactional=transactional)
    assert decode(kernel, batch) == 1
    for index in range(17, len(batch)):  # the CRC itself (17..20) and everything it covers
        for mask in MASKS:
            bad = flipped(batch, index, mask)
            with pytest.raises(CorruptRecordError):
                decode(kernel, bad)
            decode_or_corrupt(kernel, bad, check_crcs=False)


def test_control_batch_bytes(kernel: RecordDecoder) -> None:
    batch = build_control_batch(1, producer_id=9, producer_epoch=2, timestamp_ms=5)
    for index in range(17, len(batch)):
        for mask in MASKS:
            bad = flipped(batch, index, mask)
            with pytest.raises(CorruptRecordError):
                decode(kernel, bad)
            decode_or_corrupt(kernel, bad, check_crcs=False)


@pytest.mark.parametrize("codec", CODECS)
def test_magic_byte(kernel: RecordDecoder, codec: int) -> None:
    batch = make_batch(codec)
    for value in range(256):
        if value == 2:
            continue
        bad = batch[:16] + bytes([value]) + batch[17:]
        for check_crcs in (True, False):
            with pytest.raises(CorruptRecordError, match="magic"):
                decode(kernel, bad, check_crcs=check_crcs)


@pytest.mark.parametrize("with_next_batch", [False, True])
@pytest.mark.parametrize("codec", CODECS)
def test_length_field(kernel: RecordDecoder, codec: int, with_next_batch: bool) -> None:
    batch = make_batch(codec)
    following = make_batch(0, base_offset=2000) if with_next_batch else b""
    buf = batch + following
    (length,) = struct.unpack_from(">i", batch, 8)
    for index in range(8, 12):
        for mask in MASKS:
            bad = flipped(buf, index, mask)
            (new_length,) = struct.unpack_from(">i", bad, 8)
            for check_crcs in (True, False):
                if new_length > length and 12 + new_length > len(buf):
                    # looks like a batch truncated at the end of the fetch: not an error
                    assert decode(kernel, bad, check_crcs=check_crcs) == 0
                else:
                    with pytest.raises(CorruptRecordError):
                        decode(kernel, bad, check_crcs=check_crcs)


@pytest.mark.parametrize("codec", CODECS)
def test_fields_outside_the_crc(kernel: RecordDecoder, codec: int) -> None:
    batch = make_batch(codec)
    for index in list(range(0, 8)) + list(range(12, 16)):
        assert decode(kernel, flipped(batch, index, 0xFF)) == 1


def test_error_names_the_batch(kernel: RecordDecoder) -> None:
    bad = flipped(make_batch(3, base_offset=4242), 40, 0x01)
    with pytest.raises(CorruptRecordError) as info:
        for batch in kernel.iter_batches(memoryview(bad), topic="payments", partition=11):
            batch.records()
    assert (info.value.topic, info.value.partition, info.value.offset) == ("payments", 11, 4242)


# --- fuzzing -------------------------------------------------------------------------------

FUZZ = settings(
    max_examples=int(os.environ.get("KAFLUX_FUZZ_EXAMPLES", "400")),  # raise for long fuzz runs
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@FUZZ
@given(data=st.binary(max_size=600), check_crcs=st.booleans())
def test_random_bytes(kernel: RecordDecoder, data: bytes, check_crcs: bool) -> None:
    decode_or_corrupt(kernel, data, check_crcs=check_crcs)


@FUZZ
@given(
    data=st.binary(min_size=49, max_size=600),
    length_slack=st.integers(-60, 0),
    check_crcs=st.booleans(),
)
def test_random_bytes_behind_a_plausible_header(
    kernel: RecordDecoder, data: bytes, length_slack: int, check_crcs: bool
) -> None:
    """Random batch bodies with magic 2 and a length within the buffer."""
    buf = struct.pack(">qiib", 0, 5 + len(data) + length_slack, 0, 2) + data
    decode_or_corrupt(kernel, buf, check_crcs=check_crcs)


@FUZZ
@given(
    payload=st.binary(max_size=500),
    record_count=st.integers(-(2**31), 2**31 - 1) | st.integers(0, 20),
    attributes=st.integers(0, 0x7F),
)
def test_random_records_with_a_valid_crc(
    kernel: RecordDecoder, payload: bytes, record_count: int, attributes: int
) -> None:
    """A correct header and CRC around random records (or a random 'compressed' blob)."""
    buf = assemble_batch(
        payload,
        record_count=record_count,
        attributes=attributes,
        last_offset_delta=0,
        base_timestamp=0,
        max_timestamp=0,
    )
    decode_or_corrupt(kernel, buf, check_crcs=True)


@FUZZ
@given(
    codec=st.sampled_from(CODECS),
    values=st.lists(st.binary(max_size=40), min_size=1, max_size=8),
    edits=st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 255)), min_size=1, max_size=6),
    control=st.booleans(),
)
def test_mutated_records_with_a_valid_crc(
    kernel: RecordDecoder, codec: int, values: list[bytes], edits: list[tuple[int, int]], control: bool
) -> None:
    """Valid batches whose records section (compressed or not) is mutated, CRC recomputed,
    so that the structural checks -- not the CRC -- must catch the damage."""
    builder = BatchBuilder(codec)
    for i, value in enumerate(values):
        builder.append(i, value[:3] or None, value, [(f"k{i}", value[:2])] if i % 2 else [])
    raw = bytearray(builder.build())
    payload = raw[61:]
    if not payload:
        return
    for where, byte in edits:
        payload[where % len(payload)] = byte
    buf = assemble_batch(
        bytes(payload),
        record_count=len(values),
        attributes=codec | (0x30 if control else 0),
        last_offset_delta=len(values) - 1,
        base_timestamp=0,
        max_timestamp=0,
    )
    decode_or_corrupt(kernel, buf, check_crcs=True)
