"""A hand-checked v2 batch, with its CRC verified by an independent bitwise CRC-32C."""

from __future__ import annotations

from kaflux.records import BatchBuilder, Record
from kaflux.records.interface import RecordDecoder

# Two records, uncompressed, base offset 42, CREATE_TIME, no producer. Field by field:
GOLDEN_FIELDS = [
    ("base_offset", "000000000000002a"),  # 42
    ("batch_length", "0000004b"),  # 75 = 49 header bytes after this field + 26 record bytes
    ("partition_leader_epoch", "00000000"),
    ("magic", "02"),
    ("crc", "205bd30d"),  # CRC-32C of everything from attributes on (checked below)
    ("attributes", "0000"),  # no compression, CREATE_TIME, not transactional, not control
    ("last_offset_delta", "00000001"),
    ("base_timestamp", "0000018bcfe56800"),  # 1_700_000_000_000
    ("max_timestamp", "0000018bcfe56805"),  # 1_700_000_000_005
    ("producer_id", "ffffffffffffffff"),  # -1
    ("producer_epoch", "ffff"),  # -1
    ("base_sequence", "ffffffff"),  # -1
    ("record_count", "00000002"),
    # record 0: length 18 (zig-zag 0x24)
    ("r0.length", "24"),
    ("r0.attributes", "00"),
    ("r0.timestamp_delta", "00"),
    ("r0.offset_delta", "00"),
    ("r0.key", "06" + b"key".hex()),  # length 3 -> zig-zag 6
    ("r0.value", "0a" + b"value".hex()),  # length 5 -> zig-zag 10
    ("r0.header_count", "02"),  # 1
    ("r0.header0.key", "02" + b"h".hex()),
    ("r0.header0.value", "02" + b"1".hex()),
    # record 1: length 6 (zig-zag 0x0c)
    ("r1.length", "0c"),
    ("r1.attributes", "00"),
    ("r1.timestamp_delta", "0a"),  # +5 ms
    ("r1.offset_delta", "02"),  # 1
    ("r1.key", "01"),  # -1: null key
    ("r1.value", "00"),  # 0: empty value
    ("r1.header_count", "00"),
]
GOLDEN = bytes.fromhex("".join(hex_ for _, hex_ in GOLDEN_FIELDS))

EXPECTED_RECORDS = [
    Record(42, 1_700_000_000_000, b"key", b"value", [("h", b"1")]),
    Record(43, 1_700_000_000_005, None, b"", []),
]


def crc32c_bitwise(data: bytes) -> int:
    """CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), one bit at a time."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def test_bitwise_crc_check_value() -> None:
    assert crc32c_bitwise(b"123456789") == 0xE3069283  # the standard CRC-32C check value


def test_golden_crc_and_length() -> None:
    assert len(GOLDEN) == 12 + 75
    assert crc32c_bitwise(GOLDEN[21:]) == 0x205BD30D
    assert GOLDEN[17:21] == bytes.fromhex("205bd30d")


def test_golden_decodes(kernel: RecordDecoder) -> None:
    (batch,) = kernel.iter_batches(memoryview(GOLDEN), topic="t", partition=3)
    assert batch.base_offset == 42
    assert batch.batch_length == 75
    assert batch.partition_leader_epoch == 0
    assert batch.magic == 2
    assert batch.crc == 0x205BD30D
    assert batch.attributes == 0
    assert batch.compression == 0
    assert batch.timestamp_type == 0
    assert not batch.is_transactional and not batch.is_control and not batch.has_delete_horizon
    assert batch.last_offset_delta == 1 and batch.last_offset == 43 and batch.next_offset == 44
    assert batch.base_timestamp == 1_700_000_000_000
    assert batch.max_timestamp == 1_700_000_000_005
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
    assert batch.record_count == 2
    assert batch.size_in_bytes == len(GOLDEN)
    assert batch.records() == EXPECTED_RECORDS


def test_golden_encodes() -> None:
    builder = BatchBuilder(0, base_offset=42, partition_leader_epoch=0)
    assert builder.append(1_700_000_000_000, b"key", b"value", [("h", b"1")]) == 0
    assert builder.append(1_700_000_000_005, None, b"") == 1
    assert builder.record_count == 2
    assert builder.estimated_size() == len(GOLDEN)
    assert builder.build() == GOLDEN
