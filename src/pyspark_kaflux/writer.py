"""The sink: ``df.write.format("kaflux")`` and ``df.writeStream.format("kaflux")``. [io; executors]

Each task hands its Arrow batches to the process's shared kaflux producer with
``Producer.send_arrow`` (no Python object per row) and flushes before it reports success, so a
committed batch or micro-batch is in Kafka.

What the sink guarantees on task retry: **at-least-once across task retries**, like Spark's own
Kafka sink: a retried task, or a replayed micro-batch, sends its rows again. Within one task
attempt there are **no duplicates**: the producer is idempotent (``kafka.enable.idempotence``,
on by default as in Java's client), so a request it retries after a lost connection or a
timeout is written once, in order. ``kafka.enable.idempotence=false`` turns that off (then a
retried request may be written twice, as with ``acks=1`` producers).

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
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

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
    """Keeps the first failure of the sent batches (callbacks run on the producer's thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.failed = 0
        self.first_error: BaseException | None = None

    def track(self, future: Future[Any]) -> None:
        future.add_done_callback(self._done)

    def _done(self, future: Future[Any]) -> None:
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
            raise KafluxSinkError(
                f"{failed} batch(es) of records could not be written to Kafka: {error}"
            ) from error


def _sendable(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The columns the producer sends (the topic column is not one of them)."""
    names = [n for n in ("key", "value", "partition", "headers") if n in batch.schema.names]
    return pa.RecordBatch.from_arrays([batch.column(n) for n in names], names=names)


def _by_topic(options: SinkOptions, batch: pa.RecordBatch) -> list[tuple[str, pa.RecordBatch]]:
    """The batch's rows grouped by destination topic (one group when the option names it)."""
    if options.topic is not None:
        return [(options.topic, _sendable(batch))]
    import pyarrow.compute as pc

    topics = batch.column("topic")
    if topics.null_count:
        raise KafluxSinkError("Null topic present in the data. Use the topic option for setting a topic.")
    names = topics.unique().to_pylist()
    if len(names) == 1:
        return [(names[0], _sendable(batch))]
    return [(name, _sendable(batch.filter(pc.equal(topics, name)))) for name in names]


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
        for topic, rows in _by_topic(options, batch):
            if options.formats is not None:  # value.format=avro: struct columns to Avro bytes
                from pyspark_kaflux.schema_sink import serialize_columns

                rows = serialize_columns(options.formats, topic, rows)
            for future in producer.send_arrow(topic, rows):
                deliveries.track(future)
        sent += batch.num_rows
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
