"""Confluent's wire format: a magic byte 0, a 4-byte big-endian schema id, the payload. [pure]

Protobuf payloads start with the message's index path in its file (zigzag varints: a count,
then the indexes; the first message of a file, ``[0]``, is the single byte 0).
"""

from __future__ import annotations

MAGIC = 0


class FramingError(ValueError):
    """Bytes that are not in Confluent's wire format."""


def frame(schema_id: int, payload: bytes) -> bytes:
    """``payload`` framed with ``schema_id``."""
    return b"\x00" + schema_id.to_bytes(4, "big") + payload


def schema_id_of(data: bytes | memoryview) -> int:
    """The schema id of framed ``data``; raises FramingError when it is not framed."""
    if len(data) < 5:
        raise FramingError(
            f"{len(data)} bytes are too short for Confluent's framing (magic byte + schema id)"
        )
    if data[0] != MAGIC:
        raise FramingError(
            f"unknown magic byte {data[0]} (expected 0): not written with a Schema Registry serializer"
        )
    return int.from_bytes(data[1:5], "big")


def _write_varint(out: bytearray, value: int) -> None:
    value = (value << 1) ^ (value >> 63)  # zigzag
    while value & ~0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def encode_message_indexes(indexes: list[int]) -> bytes:
    """The index path prefix of a Protobuf payload."""
    if indexes == [0]:
        return b"\x00"
    out = bytearray()
    _write_varint(out, len(indexes))
    for index in indexes:
        _write_varint(out, index)
    return bytes(out)


def decode_message_indexes(data: bytes | memoryview, pos: int) -> tuple[list[int], int]:
    """The index path at ``data[pos:]`` and the position after it."""

    def varint() -> int:
        nonlocal pos
        shift = result = 0
        while True:
            if pos >= len(data):
                raise FramingError("truncated Protobuf message indexes")
            byte = data[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return (result >> 1) ^ -(result & 1)
            shift += 7
            if shift > 63:
                raise FramingError("bad varint in Protobuf message indexes")

    count = varint()
    if count == 0:
        return [0], pos
    if count < 0 or count > 100:
        raise FramingError(f"bad Protobuf message index count {count}")
    return [varint() for _ in range(count)], pos
