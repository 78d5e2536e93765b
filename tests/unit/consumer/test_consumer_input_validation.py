"""Bad input to the consumer's assign() and subscribe(), and use after close, get a clear error
of the right class from the call that took it, before anything reaches the network thread
(issue 24, D4). No broker runs here."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kaflux import Consumer, TopicPartition
from kaflux.errors import IllegalStateError, InvalidArgumentError, InvalidTopicError


@pytest.fixture
def consumer() -> Iterator[Consumer]:
    c = Consumer({"bootstrap.servers": "127.0.0.1:9", "group.id": "g"})
    yield c
    c.close(0)


def test_assign_refuses_a_topic_that_is_not_a_string(consumer: Consumer) -> None:
    with pytest.raises(TypeError, match=r"the topic of TopicPartition\(topic=5, partition=0\) must be a str"):
        consumer.assign([TopicPartition(5, 0)])  # type: ignore[arg-type]
    assert consumer.assignment() == set()


def test_assign_names_an_empty_topic_name_as_such(consumer: Consumer) -> None:
    with pytest.raises(InvalidTopicError, match="name must not be empty"):
        consumer.assign([TopicPartition("", 0)])
    assert consumer.assignment() == set()


def test_assign_refuses_an_illegal_topic_name(consumer: Consumer) -> None:
    with pytest.raises(InvalidTopicError, match="'bad topic!' is illegal"):
        consumer.assign([TopicPartition("bad topic!", 0)])


def test_assign_refuses_a_negative_or_non_int_partition(consumer: Consumer) -> None:
    with pytest.raises(InvalidArgumentError, match="must not be negative"):
        consumer.assign([TopicPartition("t", -1)])
    with pytest.raises(TypeError, match="must be an int"):
        consumer.assign([TopicPartition("t", "0")])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="takes TopicPartition values"):
        consumer.assign([("t", 0, 1)])  # type: ignore[list-item]


def test_subscribe_refuses_an_illegal_topic_name_as_send_does(consumer: Consumer) -> None:
    with pytest.raises(InvalidTopicError, match="'bad topic!' is illegal"):
        consumer.subscribe(["bad topic!"])
    with pytest.raises(InvalidTopicError, match="must not be empty"):
        consumer.subscribe(["ok", ""])
    with pytest.raises(TypeError, match="must be a str"):
        consumer.subscribe([b"t"])  # type: ignore[list-item]
    assert consumer.subscription() == set()


def test_iterating_a_closed_consumer_raises_illegal_state() -> None:
    c = Consumer({"bootstrap.servers": "127.0.0.1:9"})
    c.close(0)
    with pytest.raises(IllegalStateError, match="closed"):
        next(iter(c))
