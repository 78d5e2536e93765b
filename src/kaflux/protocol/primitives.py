"""Kafka wire-format primitives: a bounds-checked :class:`Reader` and a :class:`Writer`. [pure]

The generated message classes in :mod:`kaflux.protocol.messages` are built on these two
classes. Everything is big-endian. "Compact" encodings (used by flexible message versions)
prefix lengths with an unsigned varint holding ``length + 1`` so that 0 means null; the
classic encodings use an int16 (strings) or int32 (bytes, arrays, records) length with -1
for null.

Reading never copies the receive buffer except to build ``str``/``bytes`` values:
:meth:`Reader.records` returns a ``memoryview`` slice of the buffer the reader was built on.
Any read past the end of the buffer, negative length in a non-nullable position, or a length
larger than the bytes that remain raises :class:`~kaflux.errors.ProtocolError` naming what
was being read and where.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any, Final

from kaflux.errors import ProtocolError

__all__ = ["ZERO_UUID", "Reader", "Writer"]

ZERO_UUID: Final = uuid.UUID(int=0)
"""Kafka's "no topic id" value: sixteen zero bytes on the wire."""

_I8: Final = struct.Struct(">b")
_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_I64: Final = struct.Struct(">q")
_U16: Final = struct.Struct(">H")
_U32: Final = struct.Struct(">I")
_F64: Final = struct.Struct(">d")

_new_object = object.__new__
_set_attr = object.__setattr__
_UUID_SAFE_UNKNOWN: Final = uuid.SafeUUID.unknown


def _uuid_slow(raw: bytes) -> uuid.UUID:
    return uuid.UUID(bytes=raw)


def _uuid_fast(raw: bytes) -> uuid.UUID:
    # uuid.UUID.__init__ validates its arguments at length; a wire UUID is always exactly
    # 16 bytes, so build the (immutable, slotted) object directly. Four times faster.
    u: uuid.UUID = _new_object(uuid.UUID)
    _set_attr(u, "int", int.from_bytes(raw))
    _set_attr(u, "is_safe", _UUID_SAFE_UNKNOWN)
    return u


def _pick_uuid_builder() -> Any:
    probe = bytes(range(1, 17))
    try:
        if _uuid_fast(probe) == uuid.UUID(bytes=probe) and hash(_uuid_fast(probe)) == hash(
            uuid.UUID(bytes=probe)
        ):
            return _uuid_fast
    except (AttributeError, TypeError):  # pragma: no cover - other Python implementations
        pass
    return _uuid_slow  # pragma: no cover


uuid_from_bytes = _pick_uuid_builder()
"""Build a :class:`uuid.UUID` from exactly 16 bytes (fast path for decoders)."""

_ARRAY_STRUCTS: dict[tuple[str, int], struct.Struct] = {}


def _array_struct(code: str, n: int) -> struct.Struct:
    s = _ARRAY_STRUCTS.get((code, n))
    if s is None:
        s = struct.Struct(f">{n}{code}")
        if n <= 256:  # cache the small, recurring shapes (replica lists, partition ids)
            _ARRAY_STRUCTS[(code, n)] = s
    return s


_MAX_UVARINT_SHIFT: Final = 28  # 5 bytes carry 32 bits
_MAX_UVARLONG_SHIFT: Final = 63  # 10 bytes carry 64 bits


class Reader:
    """Sequential reader over a receive buffer. [pure]

    ``buf`` is a ``memoryview`` of the bytes given to the constructor (never a copy) and
    ``pos`` the offset of the next unread byte. Generated decoders read through the public
    methods below; all of them raise :class:`ProtocolError` instead of ``struct.error``,
    ``IndexError`` or ``UnicodeDecodeError``.
    """

    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes | bytearray | memoryview, pos: int = 0) -> None:
        view = buf if isinstance(buf, memoryview) else memoryview(buf)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        self.buf: memoryview = view
        self.pos: int = pos

    # -- errors ------------------------------------------------------------------------

    def _short(self, what: str, need: int) -> ProtocolError:
        have = len(self.buf) - self.pos
        return ProtocolError(
            f"truncated data reading {what} at byte {self.pos}: need {need} bytes, {max(have, 0)} remain"
        )

    def _bad_length(self, what: str, length: int, start: int) -> ProtocolError:
        have = len(self.buf) - self.pos  # after the length prefix, when there is one
        if length < 0:
            return ProtocolError(f"invalid length {length} reading {what} at byte {start}")
        return ProtocolError(
            f"length {length} reading {what} at byte {start} exceeds the {max(have, 0)} bytes remaining"
        )

    # -- bookkeeping --------------------------------------------------------------------

    def remaining(self) -> int:
        """Bytes not yet read."""
        return len(self.buf) - self.pos

    def skip(self, n: int, what: str = "skipped bytes") -> None:
        """Advance ``n`` bytes without reading them."""
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise self._bad_length(what, n, self.pos)
        self.pos = end

    def unpack(self, s: struct.Struct, what: str = "fixed-width fields") -> tuple[Any, ...]:
        """Read several fixed-width values at once with a precompiled ``struct.Struct``."""
        pos = self.pos
        try:
            values = s.unpack_from(self.buf, pos)
        except struct.error:
            raise self._short(what, s.size) from None
        self.pos = pos + s.size
        return values

    def fixed_array(self, code: str, n: int, what: str = "array") -> list[Any]:
        """Read ``n`` fixed-width values of struct type ``code`` (e.g. ``"i"``) at once."""
        if n <= 0:
            return []
        s = _array_struct(code, n)
        pos = self.pos
        try:
            values = s.unpack_from(self.buf, pos)
        except struct.error:
            raise self._short(what, s.size) from None
        self.pos = pos + s.size
        return list(values)

    def primitive_array(self, code: str, compact: bool, what: str = "array") -> list[Any] | None:
        """A length-prefixed array of fixed-width values of struct type ``code``; None if null."""
        n = self.array_length(compact)
        if n < 0:
            return None
        return self.fixed_array(code, n, what)

    # -- fixed width --------------------------------------------------------------------

    def _fixed(self, s: struct.Struct, what: str) -> Any:
        pos = self.pos
        try:
            value = s.unpack_from(self.buf, pos)[0]
        except struct.error:
            raise self._short(what, s.size) from None
        self.pos = pos + s.size
        return value

    def int8(self) -> int:
        v: int = self._fixed(_I8, "int8")
        return v

    def int16(self) -> int:
        v: int = self._fixed(_I16, "int16")
        return v

    def int32(self) -> int:
        v: int = self._fixed(_I32, "int32")
        return v

    def int64(self) -> int:
        v: int = self._fixed(_I64, "int64")
        return v

    def uint16(self) -> int:
        v: int = self._fixed(_U16, "uint16")
        return v

    def uint32(self) -> int:
        v: int = self._fixed(_U32, "uint32")
        return v

    def float64(self) -> float:
        v: float = self._fixed(_F64, "float64")
        return v

    def boolean(self) -> bool:
        pos = self.pos
        try:
            b = self.buf[pos]
        except IndexError:
            raise self._short("boolean", 1) from None
        self.pos = pos + 1
        return b != 0

    def uuid(self) -> uuid.UUID:
        pos = self.pos
        end = pos + 16
        if end > len(self.buf):
            raise self._short("uuid", 16)
        self.pos = end
        u: uuid.UUID = uuid_from_bytes(bytes(self.buf[pos:end]))
        return u

    # -- varints ------------------------------------------------------------------------

    def _varint(self, max_shift: int, what: str) -> int:
        buf = self.buf
        pos = self.pos
        try:
            b = buf[pos]
            if b < 0x80:
                self.pos = pos + 1
                return b
            result = b & 0x7F
            shift = 7
            while True:
                pos += 1
                b = buf[pos]
                result |= (b & 0x7F) << shift
                if b < 0x80:
                    break
                shift += 7
                if shift > max_shift:
                    raise ProtocolError(f"{what} at byte {self.pos} is longer than allowed")
        except IndexError:
            raise self._short(what, pos - self.pos + 1) from None
        self.pos = pos + 1
        return result

    def unsigned_varint(self) -> int:
        """Unsigned LEB128 integer of at most 5 bytes."""
        buf = self.buf
        pos = self.pos
        if pos < len(buf):
            b = buf[pos]
            if b < 0x80:
                self.pos = pos + 1
                return b
        return self._varint(_MAX_UVARINT_SHIFT, "unsigned varint")

    def varint(self) -> int:
        """Zig-zag encoded signed 32-bit varint."""
        u = self._varint(_MAX_UVARINT_SHIFT, "varint")
        return (u >> 1) ^ -(u & 1)

    def varlong(self) -> int:
        """Zig-zag encoded signed 64-bit varint."""
        u = self._varint(_MAX_UVARLONG_SHIFT, "varlong")
        return (u >> 1) ^ -(u & 1)

    # -- lengths ------------------------------------------------------------------------

    def _int16_len(self, what: str) -> int:
        pos = self.pos
        try:
            n: int = _I16.unpack_from(self.buf, pos)[0]
        except struct.error:
            raise self._short(f"{what} length", 2) from None
        self.pos = pos + 2
        return n

    def _int32_len(self, what: str) -> int:
        pos = self.pos
        try:
            n: int = _I32.unpack_from(self.buf, pos)[0]
        except struct.error:
            raise self._short(f"{what} length", 4) from None
        self.pos = pos + 4
        return n

    def _compact_len(self, what: str) -> int:
        # Unrolled for the one- to three-byte lengths that make up nearly all real traffic
        # (up to 2 MiB); longer ones take the general loop.
        buf = self.buf
        pos = self.pos
        try:
            b = buf[pos]
            if b < 0x80:
                self.pos = pos + 1
                return b - 1
            b2 = buf[pos + 1]
            if b2 < 0x80:
                self.pos = pos + 2
                return ((b & 0x7F) | (b2 << 7)) - 1
            b3 = buf[pos + 2]
            if b3 < 0x80:
                self.pos = pos + 3
                return ((b & 0x7F) | ((b2 & 0x7F) << 7) | (b3 << 14)) - 1
        except IndexError:
            pass
        return self._varint(_MAX_UVARINT_SHIFT, f"{what} length") - 1

    def array_length(self, compact: bool) -> int:
        """Element count of an array, or -1 for a null array.

        Counts larger than the bytes remaining are rejected (every element takes at least
        one byte), so a corrupt length cannot make a decoder allocate a huge list.
        """
        buf = self.buf
        start = self.pos
        if compact and start < len(buf):
            b = buf[start]
            if b < 0x80:  # the common one-byte length, inlined
                self.pos = start + 1
                if b > len(buf) - start:
                    raise self._bad_length("array", b - 1, start)
                return b - 1
        n = self._compact_len("array") if compact else self._int32_len("array")
        if n > len(buf) - self.pos or n < -1:
            raise self._bad_length("array", n, start)
        return n

    # -- strings and bytes -------------------------------------------------------------

    def _text(self, n: int, what: str, start: int) -> str:
        pos = self.pos
        end = pos + n
        if end > len(self.buf):
            raise self._bad_length(what, n, start)
        self.pos = end
        try:
            return str(self.buf[pos:end], "utf-8")
        except UnicodeDecodeError as e:
            raise ProtocolError(f"invalid UTF-8 in {what} at byte {start}: {e}") from None

    def _blob(self, n: int, what: str, start: int) -> memoryview:
        pos = self.pos
        end = pos + n
        if end > len(self.buf):
            raise self._bad_length(what, n, start)
        self.pos = end
        return self.buf[pos:end]

    def string(self) -> str:
        start = self.pos
        n = self._int16_len("string")
        if n < 0:
            raise ProtocolError(f"non-nullable string at byte {start} was null (length {n})")
        return self._text(n, "string", start)

    def nullable_string(self) -> str | None:
        start = self.pos
        n = self._int16_len("nullable string")
        if n < 0:
            if n != -1:
                raise self._bad_length("nullable string", n, start)
            return None
        return self._text(n, "nullable string", start)

    def compact_string(self) -> str:
        start = self.pos
        n = self._compact_len("compact string")
        if n < 0:
            raise ProtocolError(f"non-nullable compact string at byte {start} was null")
        return self._text(n, "compact string", start)

    def compact_nullable_string(self) -> str | None:
        start = self.pos
        n = self._compact_len("compact nullable string")
        if n < 0:
            return None
        return self._text(n, "compact nullable string", start)

    def bytes_(self) -> bytes:
        start = self.pos
        n = self._int32_len("bytes")
        if n < 0:
            raise ProtocolError(f"non-nullable bytes at byte {start} were null (length {n})")
        return bytes(self._blob(n, "bytes", start))

    def nullable_bytes(self) -> bytes | None:
        start = self.pos
        n = self._int32_len("nullable bytes")
        if n < 0:
            if n != -1:
                raise self._bad_length("nullable bytes", n, start)
            return None
        return bytes(self._blob(n, "nullable bytes", start))

    def compact_bytes(self) -> bytes:
        start = self.pos
        n = self._compact_len("compact bytes")
        if n < 0:
            raise ProtocolError(f"non-nullable compact bytes at byte {start} were null")
        return bytes(self._blob(n, "compact bytes", start))

    def compact_nullable_bytes(self) -> bytes | None:
        start = self.pos
        n = self._compact_len("compact nullable bytes")
        if n < 0:
            return None
        return bytes(self._blob(n, "compact nullable bytes", start))

    def records(self, compact: bool) -> memoryview | None:
        """A record set: a zero-copy ``memoryview`` slice of the buffer, or None for null."""
        start = self.pos
        n = self._compact_len("records") if compact else self._int32_len("records")
        if n < 0:
            if n != -1:
                raise self._bad_length("records", n, start)
            return None
        return self._blob(n, "records", start)

    # -- tagged fields ------------------------------------------------------------------

    def skip_tagged_fields(self) -> None:
        """Read a tagged-field section and skip every field in it."""
        pos = self.pos
        if pos < len(self.buf) and self.buf[pos] == 0:  # nearly always empty
            self.pos = pos + 1
            return
        n = self.unsigned_varint()
        for _ in range(n):
            self.unsigned_varint()  # tag
            self.skip(self.unsigned_varint(), "tagged field")

    def tagged_field_header(self) -> tuple[int, int]:
        """``(tag, size)`` of the next tagged field."""
        tag = self.unsigned_varint()
        return tag, self.unsigned_varint()

    def end_tagged_field(self, end: int, what: str) -> None:
        """Finish a known tagged field whose value should have ended at ``end``.

        Bytes the decoder did not consume (a newer writer may append data) are skipped;
        reading past the declared size is an error.
        """
        if self.pos > end or end > len(self.buf):
            raise ProtocolError(f"tagged field {what} overran its declared size (ends at byte {end})")
        self.pos = end


class Writer:
    """Append-only encoder backed by a ``bytearray``. [pure]

    ``buf`` is the bytearray being written; :meth:`getvalue` returns a ``bytes`` copy.
    Values that do not fit their wire type raise :class:`ProtocolError`.
    """

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def getvalue(self) -> bytes:
        return bytes(self.buf)

    def __len__(self) -> int:
        return len(self.buf)

    def pack(self, s: struct.Struct, *values: Any) -> None:
        """Write several fixed-width values with a precompiled ``struct.Struct``."""
        try:
            self.buf += s.pack(*values)
        except struct.error as e:
            raise ProtocolError(f"cannot encode {values!r} as {s.format!r}: {e}") from None

    def fixed_array(self, code: str, values: list[Any]) -> None:
        """Write the elements of ``values`` (no length prefix) as struct type ``code``."""
        try:
            self.buf += struct.pack(f">{len(values)}{code}", *values)
        except struct.error as e:
            raise ProtocolError(f"cannot encode array elements as {code!r}: {e}") from None

    def raw(self, data: bytes | bytearray | memoryview) -> None:
        self.buf += data

    # -- fixed width --------------------------------------------------------------------

    def int8(self, v: int) -> None:
        self.pack(_I8, v)

    def int16(self, v: int) -> None:
        self.pack(_I16, v)

    def int32(self, v: int) -> None:
        self.pack(_I32, v)

    def int64(self, v: int) -> None:
        self.pack(_I64, v)

    def uint16(self, v: int) -> None:
        self.pack(_U16, v)

    def uint32(self, v: int) -> None:
        self.pack(_U32, v)

    def float64(self, v: float) -> None:
        self.pack(_F64, v)

    def boolean(self, v: bool) -> None:
        self.buf.append(1 if v else 0)

    def uuid(self, v: uuid.UUID | None) -> None:
        """Write a UUID; None is written as Kafka's zero UUID."""
        self.buf += v.bytes if v is not None else bytes(16)

    # -- varints ------------------------------------------------------------------------

    def unsigned_varint(self, v: int) -> None:
        if 0 <= v < 0x80:
            self.buf.append(v)
            return
        if v < 0 or v > 0xFFFFFFFF:
            raise ProtocolError(f"cannot encode {v} as an unsigned varint")
        self._leb128(v)

    def _leb128(self, v: int) -> None:
        out = self.buf
        while v >= 0x80:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)

    def varint(self, v: int) -> None:
        if not -(1 << 31) <= v < (1 << 31):
            raise ProtocolError(f"cannot encode {v} as a varint")
        self._leb128(((v << 1) ^ (v >> 31)) & 0xFFFFFFFF)

    def varlong(self, v: int) -> None:
        if not -(1 << 63) <= v < (1 << 63):
            raise ProtocolError(f"cannot encode {v} as a varlong")
        self._leb128(((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF)

    # -- lengths ------------------------------------------------------------------------

    def array_length(self, n: int, compact: bool) -> None:
        """Write an array length; -1 means a null array."""
        if compact:
            self.unsigned_varint(n + 1)
        else:
            self.int32(n)

    # -- strings and bytes -------------------------------------------------------------

    def _str_len16(self, data: bytes) -> None:
        if len(data) > 0x7FFF:
            raise ProtocolError(f"string of {len(data)} bytes is too long for an int16 length")
        self.buf += _I16.pack(len(data))
        self.buf += data

    def string(self, v: str) -> None:
        self._str_len16(v.encode())

    def nullable_string(self, v: str | None) -> None:
        if v is None:
            self.buf += b"\xff\xff"
        else:
            self._str_len16(v.encode())

    def compact_string(self, v: str) -> None:
        data = v.encode()
        self.unsigned_varint(len(data) + 1)
        self.buf += data

    def compact_nullable_string(self, v: str | None) -> None:
        if v is None:
            self.buf.append(0)
        else:
            self.compact_string(v)

    def bytes_(self, v: bytes | bytearray | memoryview) -> None:
        n = v.nbytes if isinstance(v, memoryview) else len(v)
        self.buf += _I32.pack(n)
        self.buf += v

    def nullable_bytes(self, v: bytes | bytearray | memoryview | None) -> None:
        if v is None:
            self.buf += b"\xff\xff\xff\xff"
        else:
            self.bytes_(v)

    def compact_bytes(self, v: bytes | bytearray | memoryview) -> None:
        n = v.nbytes if isinstance(v, memoryview) else len(v)
        self.unsigned_varint(n + 1)
        self.buf += v

    def compact_nullable_bytes(self, v: bytes | bytearray | memoryview | None) -> None:
        if v is None:
            self.buf.append(0)
        else:
            self.compact_bytes(v)

    def records(self, v: bytes | bytearray | memoryview | None, compact: bool) -> None:
        """A record set (null allowed); accepts any buffer."""
        if compact:
            self.compact_nullable_bytes(v)
        else:
            self.nullable_bytes(v)

    # -- tagged fields ------------------------------------------------------------------

    def empty_tagged_fields(self) -> None:
        self.buf.append(0)

    def tagged_field(self, tag: int, payload: bytes | bytearray) -> None:
        """One tagged field: tag, size, then the already-encoded value."""
        self.unsigned_varint(tag)
        self.unsigned_varint(len(payload))
        self.buf += payload
