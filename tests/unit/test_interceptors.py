"""kaflux.interceptors without a broker: the chains skip (and log) a hook that raises or returns
the wrong thing, ``interceptor.classes`` is validated, registered factories apply to clients
created afterwards only, and a producer without interceptors keeps its plain ``send``."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest

from kaflux import (
    ConsumerInterceptor,
    Producer,
    ProducerInterceptor,
    ProducerRecord,
    ShareConsumerInterceptor,
)
from kaflux.errors import ConfigError, KafkaError
from kaflux.interceptors import (
    ConsumerInterceptors,
    ProducerInterceptors,
    load_interceptors,
    register_interceptor_factory,
    unregister_interceptor_factory,
)
from kaflux.records import ConsumerRecord
from kaflux.structs import OffsetAndMetadata, RecordMetadata, TopicPartition

from support.recording_interceptors import CountingProducerInterceptor, NotAnInterceptor

# nothing listens here: the producer's network thread never connects within these tests
UNREACHABLE = {"bootstrap.servers": "127.0.0.1:9", "max.block.ms": 100}


class Tagging(ProducerInterceptor):
    def __init__(self, tag: bytes) -> None:
        self.tag = tag

    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        record.headers = [*(record.headers or []), ("tag", self.tag)]
        return record


class Raising(ProducerInterceptor, ConsumerInterceptor):
    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        raise RuntimeError("on_send broke")

    def on_acknowledgement(self, metadata: RecordMetadata | None, error: KafkaError | None) -> None:
        raise RuntimeError("on_acknowledgement broke")

    def on_consume(self, records: list[ConsumerRecord]) -> list[ConsumerRecord]:
        raise RuntimeError("on_consume broke")

    def on_commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        raise RuntimeError("on_commit broke")


class ReturnsNone(ProducerInterceptor, ConsumerInterceptor):
    def on_send(self, record: ProducerRecord) -> Any:
        return None

    def on_consume(self, records: list[ConsumerRecord]) -> Any:
        return None


class DropOdd(ConsumerInterceptor):
    def on_consume(self, records: list[ConsumerRecord]) -> list[ConsumerRecord]:
        return [r for r in records if r.offset % 2 == 0]


def _record(partition: int, offset: int) -> ConsumerRecord:
    return ConsumerRecord("t", partition, offset, 0, 0, None, b"v", None, None)


def test_a_raising_on_send_is_logged_and_the_record_goes_on_as_the_previous_interceptor_left_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    chain = ProducerInterceptors("p-1", [Tagging(b"a"), Raising(), ReturnsNone(), Tagging(b"b")])
    with caplog.at_level(logging.WARNING, logger="kaflux.interceptors"):
        record = chain.on_send(ProducerRecord("t", b"v"))
    assert record.headers == [("tag", b"a"), ("tag", b"b")]
    assert "Raising.on_send raised" in caplog.text
    assert "ReturnsNone.on_send returned NoneType" in caplog.text


def test_a_raising_on_acknowledgement_does_not_stop_the_next_interceptor() -> None:
    counting = CountingProducerInterceptor()
    chain = ProducerInterceptors("p-1", [Raising(), counting])
    chain.on_acknowledgement([ProducerRecord("t")] * 2, RecordMetadata("t", 0, 5, 1), None)
    assert counting.acknowledged == [(RecordMetadata("t", 0, 5, 1), None)]


def test_on_consume_chains_filters_and_regroups_by_partition(caplog: pytest.LogCaptureFixture) -> None:
    chain = ConsumerInterceptors("c-1", [Raising(), DropOdd(), ReturnsNone()])
    by_partition = {
        TopicPartition("t", 0): [_record(0, 0), _record(0, 1), _record(0, 2)],
        TopicPartition("t", 1): [_record(1, 1)],
    }
    with caplog.at_level(logging.WARNING, logger="kaflux.interceptors"):
        result = chain.on_consume_by_partition(by_partition)
    assert result == {TopicPartition("t", 0): [_record(0, 0), _record(0, 2)]}
    assert "Raising.on_consume raised" in caplog.text


def test_on_commit_skips_a_raising_interceptor_and_is_not_called_for_nothing() -> None:
    seen: list[dict[TopicPartition, OffsetAndMetadata]] = []

    class Recording(ConsumerInterceptor):
        def on_commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
            seen.append(offsets)

    chain = ConsumerInterceptors("c-1", [Raising(), Recording()])
    chain.on_commit({})
    chain.on_commit({TopicPartition("t", 0): OffsetAndMetadata(3)})
    assert seen == [{TopicPartition("t", 0): OffsetAndMetadata(3)}]


def test_on_acknowledge_reaches_share_interceptors_only() -> None:
    seen: list[object] = []

    class Share(ShareConsumerInterceptor):
        def on_acknowledge(self, offsets: dict[TopicPartition, set[int]], error: KafkaError | None) -> None:
            seen.append((offsets, error))

    chain = ConsumerInterceptors("s-1", [ConsumerInterceptor(), Share()])
    chain.on_acknowledge({TopicPartition("t", 0): {1, 2}}, None)
    assert seen == [({TopicPartition("t", 0): {1, 2}}, None)]


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("nodots", "not a dotted class path"),
        ("no_such_module_kx.Thing", "cannot import module 'no_such_module_kx'"),
        ("support.recording_interceptors.Missing", "has no class 'Missing'"),
        (
            "support.recording_interceptors.NotAnInterceptor",
            "is not a subclass of kaflux.ProducerInterceptor",
        ),
    ],
)
def test_a_bad_interceptor_class_path_is_a_config_error_naming_the_key(path: str, says: str) -> None:
    with pytest.raises(ConfigError, match=r"interceptor\.classes") as caught:
        Producer({**UNREACHABLE, "interceptor.classes": path})
    assert says in str(caught.value)


def test_interceptor_classes_are_made_and_configured_with_the_client_config() -> None:
    found = load_interceptors(
        ProducerInterceptor,
        "producer",
        SimpleNamespace(client_id="p-1"),
        None,
        ["support.recording_interceptors.CountingProducerInterceptor"],
        {"bootstrap.servers": "x:1", "client.id": "p-1"},
    )
    assert len(found) == 1
    assert isinstance(found[0], CountingProducerInterceptor)
    assert found[0].config == {"bootstrap.servers": "x:1", "client.id": "p-1"}


def test_an_interceptor_of_the_wrong_kind_is_refused() -> None:
    with pytest.raises(TypeError, match="ProducerInterceptor instances"):
        Producer(UNREACHABLE, interceptors=[NotAnInterceptor()])  # type: ignore[list-item]


def test_a_producer_without_interceptors_keeps_the_plain_send() -> None:
    plain = Producer(UNREACHABLE)
    intercepted = Producer(UNREACHABLE, interceptors=[CountingProducerInterceptor()])
    try:
        assert "send" not in vars(plain)  # the class's method: no per-record check
        assert vars(intercepted)["send"] == intercepted._intercepted_send
    finally:
        plain.close(1.0)
        intercepted.close(1.0)


def test_a_send_that_raises_is_reported_to_on_acknowledgement_without_metadata() -> None:
    counting = CountingProducerInterceptor()
    producer = Producer(UNREACHABLE, interceptors=[counting])
    try:
        with pytest.raises(TypeError):
            producer.send("t", 12345)  # type: ignore[arg-type]  # not bytes and no serializer
        assert counting.sent == 1
        [(metadata, error)] = counting.acknowledged
        assert metadata is None
        assert isinstance(error, KafkaError)
        assert "TypeError" in str(error)
    finally:
        producer.close(1.0)
    assert counting.closed == 1


def test_registered_factories_apply_to_clients_created_afterwards_only() -> None:
    made: list[tuple[str, str]] = []

    def factory(kind: str, client: Any) -> ProducerInterceptor | None:
        made.append((kind, client.client_id))
        return CountingProducerInterceptor() if kind == "producer" else None

    before = load_interceptors(
        ProducerInterceptor, "producer", SimpleNamespace(client_id="p-0"), None, [], {}
    )
    register_interceptor_factory(factory)
    try:
        after = load_interceptors(
            ProducerInterceptor, "producer", SimpleNamespace(client_id="p-1"), None, [], {}
        )
        consumer_side = load_interceptors(
            ConsumerInterceptor, "consumer", SimpleNamespace(client_id="c-1"), None, [], {}
        )
    finally:
        unregister_interceptor_factory(factory)
    gone = load_interceptors(ProducerInterceptor, "producer", SimpleNamespace(client_id="p-2"), None, [], {})
    assert before == [] and gone == [] and consumer_side == []
    assert len(after) == 1 and isinstance(after[0], CountingProducerInterceptor)
    assert made == [("producer", "p-1"), ("consumer", "c-1")]


def test_each_interceptor_is_acknowledged_with_the_record_it_returned() -> None:
    paired: list[tuple[str, bytes]] = []

    class Replacing(ProducerInterceptor):
        def __init__(self, name: str) -> None:
            self.name = name

        def on_send(self, record: ProducerRecord) -> ProducerRecord:
            return ProducerRecord(record.topic, self.name.encode())  # a new object

        def on_record_acknowledgement(
            self, record: ProducerRecord, metadata: RecordMetadata | None, error: KafkaError | None
        ) -> None:
            paired.append((self.name, record.value))

    chain = ProducerInterceptors("p-1", [Replacing("a"), Raising(), Replacing("b")])
    seen = chain.on_send_each(ProducerRecord("t", b"original"))
    assert [r.value for r in seen] == [b"a", b"a", b"b"]
    chain.on_acknowledgement(seen, RecordMetadata("t", 0, 0, 0), None)
    assert paired == [("a", b"a"), ("b", b"b")]
