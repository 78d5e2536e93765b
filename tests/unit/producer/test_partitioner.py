"""murmur2 against Java's vectors, key partitioning, and the sticky partitioner."""

from __future__ import annotations

import random

import pytest

from kaflux.producer.partitioner import StickyPartitioner, murmur2, partition_for_key

# org.apache.kafka.common.utils.UtilsTest#testMurmur2
JAVA_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
    (b"", 275646681),
]


@pytest.mark.parametrize(("data", "expected"), JAVA_VECTORS)
def test_murmur2_matches_java(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def _to_signed(value: int) -> int:
    return value - (1 << 32) if value & 0x80000000 else value


@pytest.mark.parametrize(
    "data",
    [bytes(range(256)), b"\xff\xfe\xfd", b"\x80" * 7, b"x" * 1001, "ключ".encode(), b"\x00", b"\x00\x00"],
    ids=["all-bytes", "high-bytes", "0x80x7", "long", "utf8", "nul", "two-nuls"],
)
def test_murmur2_matches_kafka_python_on_other_inputs(data: bytes) -> None:
    kafka_partitioner = pytest.importorskip("kafka.partitioner")
    assert murmur2(data) == _to_signed(kafka_partitioner.murmur2(data))


@pytest.mark.parametrize(("key", "partitions", "expected"), [(b"21", 7, 3), (b"foobar", 10, 6), (b"", 4, 1)])
def test_key_partition_is_positive_hash_modulo_partitions(key: bytes, partitions: int, expected: int) -> None:
    assert partition_for_key(key, partitions) == (murmur2(key) & 0x7FFFFFFF) % partitions == expected


def test_keyless_records_stick_to_one_partition() -> None:
    sticky = StickyPartitioner(random.Random(1))
    first = sticky.partition("t", 6)
    assert all(sticky.partition("t", 6) == first for _ in range(50))


def test_each_topic_has_its_own_sticky_partition() -> None:
    sticky = StickyPartitioner(random.Random(5))
    chosen = {sticky.partition(f"topic-{i}", 100) for i in range(10)}
    assert len(chosen) > 1


def test_new_batch_moves_to_a_different_partition() -> None:
    sticky = StickyPartitioner(random.Random(2))
    for _ in range(30):
        previous = sticky.partition("t", 4)
        sticky.on_new_batch("t", 4, previous)
        assert sticky.partition("t", 4) != previous


def test_new_batch_reported_for_another_partition_is_ignored() -> None:
    sticky = StickyPartitioner(random.Random(3))
    current = sticky.partition("t", 4)
    sticky.on_new_batch("t", 4, (current + 1) % 4)
    assert sticky.partition("t", 4) == current


def test_single_partition_topic_stays_on_it() -> None:
    sticky = StickyPartitioner(random.Random(4))
    sticky.on_new_batch("t", 1, sticky.partition("t", 1))
    assert sticky.partition("t", 1) == 0


def test_sticky_partition_is_rechosen_when_the_topic_shrinks() -> None:
    sticky = StickyPartitioner(random.Random(9))
    while sticky.partition("t", 10) < 5:
        sticky.on_new_batch("t", 10, sticky.partition("t", 10))
    assert sticky.partition("t", 5) < 5
