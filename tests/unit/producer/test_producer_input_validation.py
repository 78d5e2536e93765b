"""Bad input to ``Producer.send`` gets a clear error of the right class from ``send`` itself,
before anything reaches the network thread (issue 24, D4): no broker runs here, and
``max.block.ms`` is long, so a value that reached the metadata wait would time out instead.
Records are sized as Java sizes them for ``max.request.size`` (key, value, headers, overhead)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from kaflux import Producer
from kaflux.errors import InvalidArgumentError, InvalidTopicError, KafkaTimeoutError, RecordTooLargeError
from kaflux.validation import RECORD_BATCH_OVERHEAD, record_size_upper_bound

MAX_REQUEST_SIZE = 1_048_576  # Java's default


@pytest.fixture
def producer() -> Iterator[Producer]:
    p = Producer({"bootstrap.servers": "127.0.0.1:9", "max.block.ms": 30_000})
    yield p
    p.close(0)


def _raises_at_once(error: type[BaseException], match: str, call: Any) -> BaseException:
    start = time.monotonic()
    with pytest.raises(error, match=match) as caught:
        call()
    assert time.monotonic() - start < 5, "raised by the call, not after waiting for metadata"
    return caught.value


def test_two_megabytes_of_headers_make_a_record_too_large(producer: Producer) -> None:
    headers = [(f"h{i}", b"x" * 1024) for i in range(2048)]
    _raises_at_once(
        RecordTooLargeError,
        r"bytes when serialized .* more than max.request.size=1048576",
        lambda: producer.send("t", b"v", headers=headers),
    )


def test_a_900_kb_key_with_a_200_kb_value_is_too_large(producer: Producer) -> None:
    _raises_at_once(
        RecordTooLargeError,
        r"max.request.size=1048576",
        lambda: producer.send("t", b"v" * 200_000, key=b"k" * 900_000),
    )


def test_records_are_sized_as_java_sizes_them() -> None:
    # batch header 61 + record overhead 21 + key (varint 1 + 3) + value (1 + 5) + header count 1
    # + header key (1 + 1) + header value (1 + 1)
    assert record_size_upper_bound(b"abc", b"hello", [("h", b"v")]) == 61 + 21 + 4 + 6 + 1 + 2 + 2
    # null key and value: one varint byte each; a null header value too
    assert record_size_upper_bound(None, None, [("h", None)]) == 61 + 21 + 1 + 1 + 1 + 2 + 1
    assert record_size_upper_bound(None, None, None) == RECORD_BATCH_OVERHEAD + 21 + 1 + 1 + 1
    # a header key is sized in UTF-8 bytes
    assert record_size_upper_bound(None, None, [("é", None)]) == 61 + 21 + 1 + 1 + 1 + (1 + 2) + 1


def test_the_largest_record_that_fits_is_accepted_and_one_byte_more_is_not() -> None:
    length = MAX_REQUEST_SIZE
    while record_size_upper_bound(None, b"v" * length, None) > MAX_REQUEST_SIZE:
        length -= 1
    assert record_size_upper_bound(None, b"v" * length, None) == MAX_REQUEST_SIZE
    with Producer({"bootstrap.servers": "127.0.0.1:9", "max.block.ms": 200}) as producer:
        # accepted: it goes on to wait for the topic's metadata, which no broker gives
        with pytest.raises(KafkaTimeoutError):
            producer.send("t", b"v" * length)
        with pytest.raises(RecordTooLargeError, match=f"is {MAX_REQUEST_SIZE + 1} bytes"):
            producer.send("t", b"v" * (length + 1))


def test_a_partition_given_as_a_string_is_a_type_error(producer: Producer) -> None:
    _raises_at_once(
        TypeError,
        r"partition must be an int, got str '0'",
        lambda: producer.send("t", b"v", partition="0"),  # type: ignore[arg-type]
    )


def test_a_negative_partition_is_refused(producer: Producer) -> None:
    _raises_at_once(
        InvalidArgumentError, "must not be negative", lambda: producer.send("t", b"v", partition=-1)
    )


@pytest.mark.parametrize("timestamp", [2**70, 2**63, -5, -1])
def test_a_timestamp_out_of_range_is_refused(producer: Producer, timestamp: int) -> None:
    error = _raises_at_once(
        InvalidArgumentError,
        f"invalid timestamp {timestamp}",
        lambda: producer.send("t", b"v", timestamp=timestamp),
    )
    assert isinstance(error, ValueError)


def test_a_timestamp_of_the_wrong_type_is_a_type_error(producer: Producer) -> None:
    _raises_at_once(TypeError, "timestamp must be an int", lambda: producer.send("t", b"v", timestamp=1.5))  # type: ignore[arg-type]


@pytest.mark.parametrize("topic", ["bad topic!", "", ".", "..", "x" * 250, "tópico"])
def test_an_illegal_topic_name_is_refused_before_any_request(producer: Producer, topic: str) -> None:
    _raises_at_once(InvalidTopicError, "topic name", lambda: producer.send(topic, b"v"))


def test_a_topic_that_is_not_a_string_is_a_type_error(producer: Producer) -> None:
    _raises_at_once(TypeError, "topic must be a str", lambda: producer.send(5, b"v"))  # type: ignore[arg-type]
