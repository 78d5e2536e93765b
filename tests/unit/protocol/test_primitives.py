"""Reader/Writer primitives: round trips, edge values, and errors on bad input."""

from __future__ import annotations

import contextlib
import struct
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kaflux.errors import ProtocolError
from kaflux.protocol.primitives import ZERO_UUID, Reader, Writer, uuid_from_bytes

INT_TYPES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
}
SIZES = {"int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint16": 2, "uint32": 4}


def roundtrip(write: str, value: object, read: str | None = None, *args: object) -> object:
    w = Writer()
    getattr(w, write)(value, *args)
    r = Reader(w.getvalue())
    out = getattr(r, read or write)(*args)
    assert r.remaining() == 0
    return out


@pytest.mark.parametrize("name", sorted(INT_TYPES))
@given(data=st.data())
def test_fixed_width_ints_round_trip(name: str, data: st.DataObject) -> None:
    lo, hi = INT_TYPES[name]
    value = data.draw(st.one_of(st.integers(lo, hi), st.sampled_from([lo, hi, 0, -1 if lo < 0 else 1])))
    w = Writer()
    getattr(w, name)(value)
    assert len(w.getvalue()) == SIZES[name]
    assert getattr(Reader(w.getvalue()), name)() == value


@pytest.mark.parametrize("name", sorted(INT_TYPES))
def test_fixed_width_out_of_range_is_rejected(name: str) -> None:
    _, hi = INT_TYPES[name]
    with pytest.raises(ProtocolError, match="cannot encode"):
        getattr(Writer(), name)(hi + 1)


@given(st.floats(allow_nan=False))
def test_float64_round_trip(value: float) -> None:
    assert roundtrip("float64", value) == value


def test_big_endian_layout() -> None:
    w = Writer()
    w.int16(0x0102)
    w.int32(0x03040506)
    w.int64(-2)
    w.boolean(True)
    w.boolean(False)
    assert w.getvalue() == bytes.fromhex("0102 03040506 fffffffffffffffe 01 00")


def test_boolean_reads_any_nonzero_as_true() -> None:
    assert Reader(b"\x02").boolean() is True
    assert Reader(b"\x00").boolean() is False


@given(st.uuids())
def test_uuid_round_trip(value: uuid.UUID) -> None:
    out = roundtrip("uuid", value)
    assert out == value
    assert isinstance(out, uuid.UUID)
    assert hash(out) == hash(value)
    assert str(out) == str(value)


def test_zero_uuid_is_sixteen_zero_bytes() -> None:
    w = Writer()
    w.uuid(ZERO_UUID)
    w.uuid(None)
    assert w.getvalue() == bytes(32)
    assert Reader(bytes(16)).uuid() == ZERO_UUID == uuid.UUID(int=0)


def test_fast_uuid_builder_matches_stdlib() -> None:
    raw = bytes(range(16))
    assert uuid_from_bytes(raw) == uuid.UUID(bytes=raw)
    assert uuid_from_bytes(raw).version == uuid.UUID(bytes=raw).version


UVARINT_EDGES = [0, 1, 0x7F, 0x80, 0x3FFF, 0x4000, 0x1FFFFF, 0x200000, 0xFFFFFFF, 0x10000000, 0xFFFFFFFF]
VARINT_EDGES = [0, -1, 1, 63, -64, 64, -65, 2**31 - 1, -(2**31)]
VARLONG_EDGES = [0, -1, 1, 2**31, -(2**31) - 1, 2**63 - 1, -(2**63)]


@pytest.mark.parametrize("value", UVARINT_EDGES)
def test_unsigned_varint_edges(value: int) -> None:
    w = Writer()
    w.unsigned_varint(value)
    assert len(w.getvalue()) == max(1, (value.bit_length() + 6) // 7)
    assert Reader(w.getvalue()).unsigned_varint() == value


def test_unsigned_varint_known_encodings() -> None:
    for value, encoded in [(0, "00"), (127, "7f"), (128, "8001"), (300, "ac02"), (2**32 - 1, "ffffffff0f")]:
        w = Writer()
        w.unsigned_varint(value)
        assert w.getvalue().hex() == encoded
        assert Reader(bytes.fromhex(encoded)).unsigned_varint() == value


@pytest.mark.parametrize("value", VARINT_EDGES)
def test_varint_edges(value: int) -> None:
    assert roundtrip("varint", value) == value


@pytest.mark.parametrize("value", VARLONG_EDGES)
def test_varlong_edges(value: int) -> None:
    assert roundtrip("varlong", value) == value


def test_zigzag_known_encodings() -> None:
    for value, encoded in [(0, "00"), (-1, "01"), (1, "02"), (-2, "03"), (2147483647, "feffffff0f")]:
        w = Writer()
        w.varint(value)
        assert w.getvalue().hex() == encoded


@given(st.integers(0, 2**32 - 1))
def test_unsigned_varint_round_trip(value: int) -> None:
    assert roundtrip("unsigned_varint", value) == value


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_round_trip(value: int) -> None:
    assert roundtrip("varint", value) == value


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(value: int) -> None:
    assert roundtrip("varlong", value) == value


def test_varints_out_of_range_are_rejected() -> None:
    with pytest.raises(ProtocolError):
        Writer().unsigned_varint(-1)
    with pytest.raises(ProtocolError):
        Writer().unsigned_varint(2**32)
    with pytest.raises(ProtocolError):
        Writer().varint(2**31)
    with pytest.raises(ProtocolError):
        Writer().varlong(-(2**63) - 1)


def test_overlong_varints_are_rejected() -> None:
    with pytest.raises(ProtocolError, match="longer than allowed"):
        Reader(b"\xff\xff\xff\xff\xff\x01").unsigned_varint()
    with pytest.raises(ProtocolError, match="longer than allowed"):
        Reader(b"\xff" * 10 + b"\x01").varlong()


@given(st.text())
def test_strings_round_trip(value: str) -> None:
    assert roundtrip("string", value) == value
    assert roundtrip("compact_string", value) == value
    assert roundtrip("nullable_string", value) == value
    assert roundtrip("compact_nullable_string", value) == value


def test_null_strings() -> None:
    assert roundtrip("nullable_string", None) is None
    assert roundtrip("compact_nullable_string", None) is None
    w = Writer()
    w.nullable_string(None)
    w.compact_nullable_string(None)
    assert w.getvalue() == b"\xff\xff\x00"
    with pytest.raises(ProtocolError, match="non-nullable string"):
        Reader(b"\xff\xff").string()
    with pytest.raises(ProtocolError, match="non-nullable compact string"):
        Reader(b"\x00").compact_string()


def test_string_encodings() -> None:
    w = Writer()
    w.string("ab")
    w.compact_string("ab")
    assert w.getvalue() == b"\x00\x02ab\x03ab"


def test_string_too_long_for_int16_length() -> None:
    with pytest.raises(ProtocolError, match="too long"):
        Writer().string("x" * 0x8000)


def test_invalid_utf8_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="UTF-8"):
        Reader(b"\x00\x02\xff\xfe").string()


@given(st.binary())
def test_bytes_round_trip(value: bytes) -> None:
    for name in ("bytes_", "nullable_bytes", "compact_bytes", "compact_nullable_bytes"):
        out = roundtrip(name, value)
        assert out == value
        assert type(out) is bytes


def test_null_bytes() -> None:
    assert roundtrip("nullable_bytes", None) is None
    assert roundtrip("compact_nullable_bytes", None) is None
    with pytest.raises(ProtocolError, match="non-nullable bytes"):
        Reader(b"\xff\xff\xff\xff").bytes_()
    with pytest.raises(ProtocolError, match="non-nullable compact bytes"):
        Reader(b"\x00").compact_bytes()


@given(st.one_of(st.none(), st.binary()), st.booleans())
def test_records_round_trip(value: bytes | None, compact: bool) -> None:
    w = Writer()
    w.records(value, compact)
    out = Reader(w.getvalue()).records(compact)
    if value is None:
        assert out is None
    else:
        assert isinstance(out, memoryview)
        assert out == value


def test_records_are_a_zero_copy_slice_of_the_input() -> None:
    payload = bytes(range(256)) * 8
    w = Writer()
    w.int32(7)
    w.records(payload, True)
    data = w.getvalue()
    r = Reader(data)
    assert r.int32() == 7
    view = r.records(True)
    assert view is not None
    assert view.obj is data  # shares the caller's buffer: nothing was copied
    assert view.tobytes() == payload
    buf = bytearray(data)
    r2 = Reader(memoryview(buf), 4)
    view3 = r2.records(True)
    assert view3 is not None
    buf[10] ^= 0xFF  # writes to the receive buffer show through the slice
    assert view3[10 - 4 - 2] == payload[4] ^ 0xFF


@given(st.lists(st.integers(-(2**31), 2**31 - 1), max_size=20), st.booleans())
def test_fixed_arrays_round_trip(values: list[int], compact: bool) -> None:
    w = Writer()
    w.array_length(len(values), compact)
    w.fixed_array("i", values)
    r = Reader(w.getvalue())
    n = r.array_length(compact)
    assert r.fixed_array("i", n) == values
    assert r.remaining() == 0


def test_array_lengths() -> None:
    w = Writer()
    w.array_length(-1, True)
    w.array_length(-1, False)
    w.array_length(0, True)
    w.array_length(0, False)
    r = Reader(w.getvalue())
    assert [r.array_length(True), r.array_length(False), r.array_length(True), r.array_length(False)] == [
        -1,
        -1,
        0,
        0,
    ]


def test_absurd_array_length_is_rejected_before_allocating() -> None:
    with pytest.raises(ProtocolError, match="exceeds"):
        Reader(struct.pack(">i", 1_000_000_000) + b"\x00" * 10).array_length(False)
    with pytest.raises(ProtocolError, match="invalid length"):
        Reader(struct.pack(">i", -5)).array_length(False)


def test_negative_lengths_are_rejected() -> None:
    with pytest.raises(ProtocolError, match="invalid length -2"):
        Reader(b"\xff\xfe").nullable_string()
    with pytest.raises(ProtocolError, match="invalid length -7"):
        Reader(struct.pack(">i", -7)).nullable_bytes()
    with pytest.raises(ProtocolError, match="invalid length -3"):
        Reader(struct.pack(">i", -3)).records(False)


SHORT_READS = [
    ("int8", b""),
    ("int16", b"\x00"),
    ("int32", b"\x00\x00\x00"),
    ("int64", b"\x00" * 7),
    ("uint16", b"\x00"),
    ("uint32", b"\x00\x00"),
    ("float64", b"\x00" * 4),
    ("boolean", b""),
    ("uuid", b"\x00" * 15),
    ("unsigned_varint", b"\x80"),
    ("varint", b""),
    ("varlong", b"\xff\xff"),
    ("string", b"\x00\x05abc"),
    ("string", b"\x00"),
    ("nullable_string", b"\x00\x05abc"),
    ("compact_string", b"\x06abc"),
    ("compact_nullable_string", b"\x81"),
    ("bytes_", b"\x00\x00\x00\x09abc"),
    ("nullable_bytes", b"\x00\x00"),
    ("compact_bytes", b"\x10abc"),
    ("compact_nullable_bytes", b"\x05ab"),
]


@pytest.mark.parametrize(("method", "data"), SHORT_READS)
def test_short_buffer_raises_protocol_error(method: str, data: bytes) -> None:
    with pytest.raises(ProtocolError) as info:
        getattr(Reader(data), method)()
    message = str(info.value)
    assert "truncated" in message or "exceeds" in message
    assert "byte" in message  # says where


@given(st.binary(max_size=12), st.sampled_from([m for m, _ in SHORT_READS]))
def test_garbage_never_raises_anything_but_protocol_error(data: bytes, method: str) -> None:
    with contextlib.suppress(ProtocolError):
        getattr(Reader(data), method)()


def test_short_records_and_arrays() -> None:
    with pytest.raises(ProtocolError, match="records"):
        Reader(b"\x00\x00\x00\x10abc").records(False)
    with pytest.raises(ProtocolError, match="records"):
        Reader(b"\x20abc").records(True)
    with pytest.raises(ProtocolError, match="array length"):
        Reader(b"\x00\x00").array_length(False)
    with pytest.raises(ProtocolError, match="array"):
        Reader(b"\x00\x00\x00").fixed_array("i", 1)


def test_unpack_and_skip() -> None:
    s = struct.Struct(">ih")
    r = Reader(b"\x00\x00\x00\x01\x00\x02rest")
    assert r.unpack(s, "pair") == (1, 2)
    r.skip(2)
    assert r.remaining() == 2
    with pytest.raises(ProtocolError, match="pair"):
        r.unpack(s, "pair")
    with pytest.raises(ProtocolError):
        r.skip(3)


def test_tagged_field_sections() -> None:
    w = Writer()
    w.unsigned_varint(2)
    w.tagged_field(5, b"abc")
    w.tagged_field(300, b"\x01" * 200)
    w.int8(9)
    r = Reader(w.getvalue())
    r.skip_tagged_fields()
    assert r.int8() == 9
    with pytest.raises(ProtocolError, match="tagged field"):
        Reader(b"\x01\x00\x05ab").skip_tagged_fields()


def test_reader_accepts_any_buffer() -> None:
    for buf in (b"\x00\x07", bytearray(b"\x00\x07"), memoryview(b"\x00\x07"), memoryview(b"xx\x00\x07")[2:]):
        assert Reader(buf).int16() == 7
    assert Reader(b"\x00\x00\x00\x07", pos=2).int16() == 7
    words = memoryview(bytearray(4)).cast("H")
    assert Reader(words).remaining() == 4


def test_writer_accepts_memoryview_payloads() -> None:
    w = Writer()
    w.compact_bytes(memoryview(b"hello")[1:4])
    w.bytes_(bytearray(b"xy"))
    assert w.getvalue() == b"\x04ell\x00\x00\x00\x02xy"
    assert len(w) == 10
