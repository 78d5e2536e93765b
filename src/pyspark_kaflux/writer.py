"""The sink: ``df.write.format("kaflux")`` and ``df.writeStream.format("kaflux")``. [io; executors]

Each task sends its rows with the process's shared kaflux producer and flushes before it
reports success, so a committed batch or micro-batch is in Kafka: delivery is at-least-once
(a retried task or a replayed micro-batch sends its rows again), as with Spark's Kafka sink.

Columns: ``value`` (string or binary, required), ``key`` (string or binary), ``topic``
(string; the ``topic`` option wins over it), ``partition`` (int; the producer's partitioner
decides when it is absent or null) and ``headers`` (``array<struct<key string, value binary>>``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from kaflux import RecordMetadata
from pyspark_kaflux.client_cache import shared_producer
from pyspark_kaflux.options import SinkOptions

__all__ = [
    "KafluxBatchWriter",
    "KafluxCommitMessage",
    "KafluxSinkError",
    "KafluxStreamWriter",
    "write_batches",
]

log = logging.getLogger("pyspark_kaflux")

#: Extra seconds a task waits for its records beyond the producer's delivery.timeout.ms.
_FLUSH_GRACE_S = 30.0


class KafluxSinkError(RuntimeError):
    """A row could not be written: a null topic, or the broker refused or lost a record."""


@dataclass
class KafluxCommitMessage(WriterCommitMessage):
    """What a write task reports: how many records it sent (all acknowledged)."""

    records: int


class _Deliveries:
    """Counts acknowledged records and keeps the first failure (callbacks run on the producer's thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.failed = 0
        self.first_error: BaseException | None = None

    def track(self, future: Future[RecordMetadata]) -> None:
        future.add_done_callback(self._done)

    def _done(self, future: Future[RecordMetadata]) -> None:
        error = future.exception()
        if error is not None:
            with self._lock:
                self.failed += 1
                if self.first_error is None:
                    self.first_error = error

    def raise_if_failed(self) -> None:
        with self._lock:
            error, failed = self.first_error, self.failed
        if error is not None:
            raise KafluxSinkError(f"{failed} record(s) could not be written to Kafka: {error}") from error


def _bytes_column(batch: pa.RecordBatch, name: str) -> list[bytes | None]:
    column = batch.column(name)
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.binary())
    values: list[bytes | None] = column.to_pylist()
    return values


def write_batches(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> int:
    """Send every row of ``batches``, flush, and return the number of records written.

    Raises:
        KafluxSinkError: a row has a null topic, or a record was not acknowledged.
    """
    config = options.kafka_config
    producer = shared_producer(config)
    deliveries = _Deliveries()
    sent = 0
    for batch in batches:
        names = set(batch.schema.names)
        rows = batch.num_rows
        values = _bytes_column(batch, "value")
        keys = _bytes_column(batch, "key") if "key" in names else [None] * rows
        topics: list[str | None] = (
            [options.topic] * rows if options.topic is not None else batch.column("topic").to_pylist()
        )
        partitions: list[int | None] = (
            batch.column("partition").to_pylist() if "partition" in names else [None] * rows
        )
        headers = batch.column("headers").to_pylist() if "headers" in names else [None] * rows
        for i in range(rows):
            topic = topics[i]
            if topic is None:
                raise KafluxSinkError(
                    "Null topic present in the data. Use the topic option for setting a topic."
                )
            header_row = headers[i]
            row_headers = [(h["key"], h["value"]) for h in header_row] if header_row else None
            deliveries.track(
                producer.send(topic, values[i], key=keys[i], headers=row_headers, partition=partitions[i])
            )
        sent += rows
        deliveries.raise_if_failed()
    delivery_timeout_s = int(config.get("delivery.timeout.ms", "120000")) / 1000
    producer.flush(delivery_timeout_s + _FLUSH_GRACE_S)
    deliveries.raise_if_failed()
    return sent


class KafluxBatchWriter(DataSourceArrowWriter):
    """Writes a DataFrame to Kafka (``mode("append")``; Kafka cannot be overwritten)."""

    def __init__(self, options: SinkOptions) -> None:
        self._options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafluxCommitMessage:
        return KafluxCommitMessage(write_batches(self._options, iterator))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        total = sum(m.records for m in messages if isinstance(m, KafluxCommitMessage))
        log.info("kaflux sink: wrote %d records", total)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        written = sum(m.records for m in messages if isinstance(m, KafluxCommitMessage))
        log.warning(
            "kaflux sink: write aborted; %d records were already written by successful tasks", written
        )


class KafluxStreamWriter(DataSourceStreamArrowWriter):
    """Writes each micro-batch to Kafka (at-least-once: a replayed micro-batch is sent again)."""

    def __init__(self, options: SinkOptions) -> None:
        self._options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafluxCommitMessage:
        return KafluxCommitMessage(write_batches(self._options, iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        total = sum(m.records for m in messages if isinstance(m, KafluxCommitMessage))
        log.info("kaflux sink: micro-batch %d wrote %d records", batchId, total)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("kaflux sink: micro-batch %d aborted; it will be written again when replayed", batchId)
