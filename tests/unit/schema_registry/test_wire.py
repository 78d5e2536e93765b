"""Confluent's two framings, pure: the schema-id prefix and the schema-GUID header. [test]"""

from __future__ import annotations

import uuid

import pytest

from kaflux.errors import KafkaError
from kaflux.schema_registry.wire import (
    KEY_SCHEMA_ID_HEADER,
    VALUE_SCHEMA_ID_HEADER,
    FramingError,
    canonical_guid,
    decode_message_indexes,
    frame,
    guid_header,
    read_schema_id,
)

GUID = "0a1b2c3d-4e5f-4a7b-8c9d-0e1f2a3b4c5d"
OTHER = "ffffffff-0000-4000-8000-000000000001"


def test_the_guid_header_is_magic_byte_1_then_the_16_uuid_bytes_then_any_message_indexes() -> None:
    assert guid_header(GUID) == b"\x01" + uuid.UUID(GUID).bytes
    assert guid_header(uuid.UUID(GUID), b"\x02\x02\x04") == b"\x01" + uuid.UUID(GUID).bytes + b"\x02\x02\x04"
    assert len(guid_header(GUID)) == 17
    assert (KEY_SCHEMA_ID_HEADER, VALUE_SCHEMA_ID_HEADER) == ("__key_schema_id", "__value_schema_id")


def test_the_header_is_read_first_and_the_whole_payload_is_the_value() -> None:
    headers = [("trace", b"x"), (VALUE_SCHEMA_ID_HEADER, guid_header(GUID))]
    read = read_schema_id(b"\x02\x04", headers, "value")
    assert (read.schema_id, read.guid, read.payload_start, read.end) == (None, GUID, 0, 17)
    assert read.key == read.guid_bytes == uuid.UUID(GUID).bytes  # a cache key made without text
    # the key's header is another one: a value header does not frame the key
    key_read = read_schema_id(frame(7, b"k"), headers, "key")
    assert (key_read.schema_id, key_read.guid, key_read.header, key_read.payload_start) == (7, None, None, 5)


def test_without_a_header_or_with_headers_ignored_the_prefix_is_read() -> None:
    framed = frame(258, b"payload")
    for headers in (None, [], [("other", b"1")]):
        read = read_schema_id(framed, headers, "value")
        assert (read.schema_id, read.key, read.payload_start) == (258, 258, 5)
    headers = [(VALUE_SCHEMA_ID_HEADER, guid_header(GUID))]
    assert read_schema_id(framed, headers, "value", use_headers=False).schema_id == 258


def test_the_last_header_of_the_name_wins_and_a_null_header_is_absent() -> None:
    headers = [(KEY_SCHEMA_ID_HEADER, guid_header(OTHER)), (KEY_SCHEMA_ID_HEADER, guid_header(GUID))]
    assert read_schema_id(b"v", headers, "key").guid == GUID
    assert read_schema_id(frame(3, b"v"), [(KEY_SCHEMA_ID_HEADER, None)], "key").schema_id == 3


def test_a_guid_in_the_payload_prefix_is_read_too() -> None:
    read = read_schema_id(guid_header(GUID) + b"body", None, "value")
    assert (read.guid, read.header, read.payload_start) == (GUID, None, 17)


def test_protobuf_indexes_follow_the_guid_in_the_header() -> None:
    header = guid_header(GUID, b"\x04\x02\x06")
    read = read_schema_id(b"msg", [(VALUE_SCHEMA_ID_HEADER, header)], "value")
    assert read.header == header
    assert decode_message_indexes(read.header, read.end) == ([1, 3], 20)


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (b"", "__value_schema_id header is empty"),
        (b"\x02" + bytes(16), "unknown magic byte 2 in the __value_schema_id header"),
        (b"\x01" + bytes(10), "11 bytes are too short for a schema GUID"),
        (b"\x00\x00", "too short for Confluent's framing (magic byte + schema id) in the __value_schema_id"),
    ],
)
def test_a_bad_header_is_a_clear_framing_error(header: bytes, message: str) -> None:
    with pytest.raises(
        FramingError, match=message.replace("(", r"\(").replace(")", r"\)").replace("+", r"\+")
    ):
        read_schema_id(frame(1, b"v"), [(VALUE_SCHEMA_ID_HEADER, header)], "value")


def test_bad_payloads_are_framing_errors_in_kaflux_s_error_root() -> None:
    with pytest.raises(FramingError, match="unknown magic byte 123 in the record's value") as info:
        read_schema_id(b"{}", None, "value")
    assert isinstance(info.value, KafkaError) and isinstance(info.value, ValueError)
    with pytest.raises(FramingError, match="record's key is empty"):
        read_schema_id(b"", None, "key")


def test_guids_are_canonicalised_and_non_uuids_refused() -> None:
    assert canonical_guid(GUID.upper()) == GUID
    assert canonical_guid(uuid.UUID(GUID)) == GUID
    with pytest.raises(FramingError, match="'not-a-guid' is not a schema GUID: expected a UUID"):
        canonical_guid("not-a-guid")
