"""Interceptors that record what they see, for the interceptor tests (importable by dotted path,
for ``interceptor.classes``)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from kaflux import ConsumerInterceptor, ProducerInterceptor, ProducerRecord, ShareConsumerInterceptor
from kaflux.errors import KafkaError
from kaflux.producer.futures import BatchMetadata
from kaflux.records import ConsumerRecord
from kaflux.structs import OffsetAndMetadata, RecordMetadata, TopicPartition


class NotAnInterceptor:
    """A class that is no interceptor (interceptor.classes must refuse it)."""


class CountingProducerInterceptor(ProducerInterceptor):
    """Counts sends, adds a ``seen-by`` header, records acknowledgements and their threads."""

    def __init__(self) -> None:
        self.config: dict[str, object] | None = None
        self.sent = 0
        self.batches = 0
        self.acknowledged: list[tuple[RecordMetadata | None, KafkaError | None]] = []
        self.batch_acknowledged: list[tuple[BatchMetadata | None, BaseException | None]] = []
        self.ack_threads: set[str] = set()
        self.closed = 0
        self.lock = threading.Lock()

    def configure(self, config: Mapping[str, object]) -> None:
        self.config = dict(config)

    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        self.sent += 1
        record.headers = [*(record.headers or []), ("seen-by", b"counting")]
        return record

    def on_send_batch(self, topic: str, batch: Any) -> Any:
        self.batches += 1
        return batch

    def on_acknowledgement(self, metadata: RecordMetadata | None, error: KafkaError | None) -> None:
        with self.lock:
            self.acknowledged.append((metadata, error))
            self.ack_threads.add(threading.current_thread().name)

    def on_batch_acknowledgement(self, metadata: BatchMetadata | None, error: BaseException | None) -> None:
        with self.lock:
            self.batch_acknowledged.append((metadata, error))

    def close(self) -> None:
        self.closed += 1


class RecordingConsumerInterceptor(ShareConsumerInterceptor):
    """Records what it sees (usable on consumers and share consumers); drops records whose
    value is ``b"drop"``."""

    def __init__(self) -> None:
        self.consumed: list[ConsumerRecord] = []
        self.batches: list[int] = []
        self.commits: list[dict[TopicPartition, OffsetAndMetadata]] = []
        self.acknowledged: list[tuple[dict[TopicPartition, set[int]], KafkaError | None]] = []
        self.threads: set[str] = set()
        self.closed = 0

    def on_consume(self, records: list[ConsumerRecord]) -> list[ConsumerRecord]:
        self.threads.add(threading.current_thread().name)
        self.consumed += records
        return [r for r in records if r.value != b"drop"]

    def on_consume_batch(self, batch: Any) -> Any:
        self.batches.append(int(batch.num_rows))
        return batch

    def on_commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        self.threads.add(threading.current_thread().name)
        self.commits.append(dict(offsets))

    def on_acknowledge(self, offsets: dict[TopicPartition, set[int]], error: KafkaError | None) -> None:
        self.acknowledged.append((offsets, error))

    def close(self) -> None:
        self.closed += 1


class RaisingEverywhere(ShareConsumerInterceptor, ProducerInterceptor):  # type: ignore[misc]
    """Every hook raises: the clients must log and carry on."""

    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        raise RuntimeError("on_send")

    def on_acknowledgement(self, metadata: RecordMetadata | None, error: KafkaError | None) -> None:
        raise RuntimeError("on_acknowledgement")

    def on_consume(self, records: list[ConsumerRecord]) -> list[ConsumerRecord]:
        raise RuntimeError("on_consume")

    def on_commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        raise RuntimeError("on_commit")

    def on_acknowledge(self, offsets: dict[TopicPartition, set[int]], error: KafkaError | None) -> None:
        raise RuntimeError("on_acknowledge")

    def close(self) -> None:
        raise RuntimeError("close")


class Interceptor(ConsumerInterceptor):
    """A plain consumer interceptor (for interceptor.classes on a consumer)."""
