"""Confluent's wire formats: where a record says which schema wrote it. [pure]

*Prefix framing* (the classic one, every Confluent client's default): the key or value is a
magic byte 0, the schema's 4-byte big-endian id, then the payload.

*Header framing* (confluent-kafka's ``header_schema_id_serializer``): the key or value is the
bare payload, and a record header, ``__key_schema_id`` or ``__value_schema_id``, holds a magic
byte 1 and the schema's 16-byte GUID (as registered; see
:meth:`~kaflux.schema_registry.SchemaRegistryClient.get_schema_by_guid`).

Protobuf payloads also carry the message's index path in its file (zigzag varints: a count,
then the indexes; the first message of a file, ``[0]``, is the single byte 0): right after the
schema id in the prefix, or right after the GUID in the header.

Readers look for the header first, then for the prefix (confluent-kafka's
``dual_schema_id_deserializer``); :func:`read_schema_id` does both.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from kaflux.serialization import SerializationError

MAGIC = 0
MAGIC_GUID = 1
KEY_SCHEMA_ID_HEADER = "__key_schema_id"
VALUE_SCHEMA_ID_HEADER = "__value_schema_id"
_GUID_LEN = 16


class FramingError(SerializationError):
    """Bytes that are not in Confluent's wire format (a ValueError, as before)."""


def frame(schema_id: int, payload: bytes) -> bytes:
    """``payload`` framed with ``schema_id``."""
    return b"\x00" + schema_id.to_bytes(4, "big") + payload


def schema_id_of(data: bytes | memoryview) -> int:
    """The schema id of prefix-framed ``data``; raises FramingError when it is not framed so."""
    if len(data) < 5:
        raise FramingError(
            f"{len(data)} bytes are too short for Confluent's framing (magic byte + schema id)"
        )
    if data[0] != MAGIC:
        raise FramingError(
            f"unknown magic byte {data[0]} (expected 0): not written with a Schema Registry serializer"
        )
    return int.from_bytes(data[1:5], "big")


def header_name(field: str) -> str:
    """The header that carries the schema GUID of a record's ``field`` ("key" or "value")."""
    return KEY_SCHEMA_ID_HEADER if field == "key" else VALUE_SCHEMA_ID_HEADER


def canonical_guid(guid: str | uuid.UUID) -> str:
    """``guid`` in its canonical form (lower-case, with hyphens); raises FramingError when it
    is not a UUID."""
    if isinstance(guid, uuid.UUID):
        return str(guid)
    try:
        return str(uuid.UUID(str(guid)))
    except ValueError:
        raise FramingError(
            f"{guid!r} is not a schema GUID: expected a UUID such as '0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d'"
        ) from None


def guid_header(guid: str | uuid.UUID, message_indexes: bytes = b"") -> bytes:
    """The header value that names the schema ``guid`` (then a Protobuf message's indexes)."""
    return bytes((MAGIC_GUID,)) + uuid.UUID(canonical_guid(guid)).bytes + message_indexes


@dataclass(frozen=True, slots=True)
class SchemaIdRead:
    """Which schema wrote a record's key or value, and where it said so.

    Exactly one of ``schema_id`` and ``guid_bytes`` (the GUID's 16 bytes) is set. ``header`` is
    the header value that carried it (None: the payload's prefix did); ``end`` is the position
    just after the id in the header value or the payload (a Protobuf payload's message indexes
    start there).
    """

    schema_id: int | None
    guid_bytes: bytes | None
    header: bytes | None
    end: int

    @property
    def guid(self) -> str | None:
        """The GUID in its canonical text form (None for a schema id)."""
        return None if self.guid_bytes is None else str(uuid.UUID(bytes=self.guid_bytes))

    @property
    def key(self) -> int | bytes:
        """The schema id, or the GUID's bytes: a cache key for the writer's schema that costs
        nothing to make."""
        return self.guid_bytes if self.schema_id is None else self.schema_id  # type: ignore[return-value]

    @property
    def payload_start(self) -> int:
        """Where the encoded value starts in the payload (0 with header framing)."""
        return 0 if self.header is not None else self.end


def _read_id(buf: bytes | memoryview, where: str) -> tuple[int | None, bytes | None, int]:
    if not buf:
        raise FramingError(f"the {where} is empty: no magic byte")
    magic = buf[0]
    if magic == MAGIC:
        if len(buf) < 5:
            raise FramingError(
                f"{len(buf)} bytes are too short for Confluent's framing (magic byte + schema id) "
                f"in the {where}"
            )
        return int.from_bytes(buf[1:5], "big"), None, 5
    if magic == MAGIC_GUID:
        if len(buf) < 1 + _GUID_LEN:
            raise FramingError(
                f"{len(buf)} bytes are too short for a schema GUID (magic byte 1 + 16 bytes) in the {where}"
            )
        return None, bytes(buf[1 : 1 + _GUID_LEN]), 1 + _GUID_LEN
    raise FramingError(
        f"unknown magic byte {magic} in the {where} (expected 0: schema id, or 1: schema GUID): "
        "not written with a Schema Registry serializer"
    )


def find_header(headers: Sequence[tuple[str, bytes | None]] | None, name: str) -> bytes | None:
    """The value of the last header called ``name`` (as Java's ``lastHeader``), or None."""
    if not headers:
        return None
    found: bytes | None = None
    for key, value in headers:
        if key == name and value is not None:
            found = value
    return found


def read_schema_id(
    data: bytes | memoryview,
    headers: Sequence[tuple[str, bytes | None]] | None = None,
    field: str = "value",
    use_headers: bool = True,
) -> SchemaIdRead:
    """Which schema wrote ``data``: the ``field``'s schema-id header when ``use_headers`` and
    the record has one, else the payload's prefix. Raises FramingError for bytes in neither
    framing."""
    if use_headers:
        name = header_name(field)
        value = find_header(headers, name)
        if value is not None:
            schema_id, guid, end = _read_id(value, f"{name} header")
            return SchemaIdRead(schema_id, guid, bytes(value), end)
    schema_id, guid, end = _read_id(data, f"record's {field}")
    return SchemaIdRead(schema_id, guid, None, end)


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
