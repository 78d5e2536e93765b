"""One partition's data from one Fetch response. [created on bg; read on app]

The network thread builds a :class:`CompletedFetch` from a Fetch response without touching the
record bytes (``records`` is a zero-copy view of the receive buffer). The application thread's
collector then calls :meth:`CompletedFetch.fetch_records` to decode batches lazily — CRC check,
decompression, control and aborted-transaction filtering — and build :class:`ConsumerRecord`
objects, at most ``max_records`` per call.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from typing import Any

from kaflux.consumer.consumer_record import ConsumerRecord
from kaflux.errors import CorruptRecordError, KafkaError, RecordDeserializationError
from kaflux.records import CONTROL_ABORT, Record, RecordBatch, iter_batches
from kaflux.structs import TopicPartition

Deserializer = Callable[[bytes | None], Any]


class CompletedFetch:
    """Fetched data of one partition, consumed incrementally by the collector."""

    __slots__ = (
        "_aborted",
        "_aborted_pids",
        "_batch",
        "_batches",
        "_check_crcs",
        "_corruption",
        "_index",
        "_read_committed",
        "_records",
        "consumed",
        "error",
        "fetch_offset",
        "high_watermark",
        "initialized",
        "last_epoch",
        "last_stable_offset",
        "log_start_offset",
        "next_fetch_offset",
        "position_version",
        "records",
        "size_bytes",
        "tp",
    )

    def __init__(
        self,
        tp: TopicPartition,
        fetch_offset: int,
        position_version: int,
        records: memoryview | None,
        *,
        high_watermark: int = -1,
        last_stable_offset: int = -1,
        log_start_offset: int = -1,
        aborted_transactions: list[tuple[int, int]] | None = None,
        error: KafkaError | None = None,
        read_committed: bool = False,
        check_crcs: bool = True,
    ) -> None:
        self.tp = tp
        self.fetch_offset = fetch_offset
        self.position_version = position_version
        self.records = records
        self.size_bytes = len(records) if records is not None else 0
        self.high_watermark = high_watermark
        self.last_stable_offset = last_stable_offset
        self.log_start_offset = log_start_offset
        self.error = error
        self.next_fetch_offset = fetch_offset
        self.last_epoch: int | None = None
        self.consumed = False
        self.initialized = False
        self._read_committed = read_committed
        self._check_crcs = check_crcs
        # (first_offset, producer_id) min-heap of aborted transactions, per KIP-98
        self._aborted: list[tuple[int, int]] = [(first, pid) for pid, first in (aborted_transactions or [])]
        heapq.heapify(self._aborted)
        self._aborted_pids: set[int] = set()
        self._batches: Iterator[RecordBatch] | None = None
        self._batch: RecordBatch | None = None
        self._records: list[Record] = []
        self._index = 0
        # (reason, position) of corrupt data met; it is raised on every later call
        self._corruption: tuple[str, int] | None = None

    def _next_batch(self) -> RecordBatch | None:
        if self._batches is None:
            if self.records is None:
                return None
            self._batches = iter_batches(
                self.records, check_crcs=self._check_crcs, topic=self.tp.topic, partition=self.tp.partition
            )
        return next(self._batches, None)

    def _skip_batch(self, batch: RecordBatch) -> bool:
        """Whether to skip ``batch`` entirely (already consumed, control, or aborted)."""
        if batch.next_offset <= self.next_fetch_offset:
            return True
        if self._read_committed and batch.is_transactional:
            while self._aborted and self._aborted[0][0] <= batch.last_offset:
                self._aborted_pids.add(heapq.heappop(self._aborted)[1])
            if batch.is_control:
                if batch.control_type() == CONTROL_ABORT:
                    self._aborted_pids.discard(batch.producer_id)
                return True
            if batch.producer_id in self._aborted_pids:
                return True
        return batch.is_control

    def _load_next_batch(self) -> bool:
        """Advance to the next batch with records to return; False when the data is exhausted."""
        while True:
            batch = self._next_batch()
            if batch is None:
                return False
            if self._skip_batch(batch):
                self.next_fetch_offset = max(self.next_fetch_offset, batch.next_offset)
                continue
            self._batch = batch
            self._records = batch.records()
            self._index = 0
            epoch = batch.partition_leader_epoch
            self.last_epoch = epoch if epoch >= 0 else self.last_epoch
            return True

    def fetch_records(
        self,
        max_records: int,
        key_deserializer: Deserializer | None,
        value_deserializer: Deserializer | None,
    ) -> list[ConsumerRecord]:
        """Decode and return up to ``max_records`` records from the current position.

        Errors (corrupt data, a failing deserializer) are raised only when no record was
        collected in this call; otherwise the records come first and the error on the next
        call. The position does not move past a record that failed, so the error repeats
        until the application seeks past it. Corrupt data is reported at the position (the
        offset after the last good record), never at an offset read from the bad bytes.
        """
        if self._corruption is not None:
            raise self._corrupt_error()
        out: list[ConsumerRecord] = []
        try:
            while len(out) < max_records:
                if self._index >= len(self._records):
                    if self._batch is not None:
                        self.next_fetch_offset = max(self.next_fetch_offset, self._batch.next_offset)
                        self._batch = None
                        self._records = []
                    if not self._load_next_batch():
                        self.consumed = True
                        break
                    continue
                self._take(out, max_records - len(out), key_deserializer, value_deserializer)
        except CorruptRecordError as exc:
            # The batch iterator cannot resume after corrupt data: remember it. The decoder's
            # error names the offset in the batch header, which may be garbage like the rest.
            self._corruption = (exc.reason, self.next_fetch_offset)
        except RecordDeserializationError:
            # The position stays at the failing record, so the next call fails on it again.
            if not out:
                raise
        if self._corruption is not None and not out:
            raise self._corrupt_error()
        return out

    def _corrupt_error(self) -> CorruptRecordError:
        """A new error for the corrupt data met: raising one stored instance again and again
        would add the frames of every raise to its traceback."""
        assert self._corruption is not None
        reason, position = self._corruption
        return CorruptRecordError(reason, topic=self.tp.topic, partition=self.tp.partition, offset=position)

    def _take(
        self,
        out: list[ConsumerRecord],
        limit: int,
        key_deserializer: Deserializer | None,
        value_deserializer: Deserializer | None,
    ) -> None:
        """Append up to ``limit`` records of the current batch to ``out`` (the hot path)."""
        records = self._records
        i = self._index
        count = len(records)
        next_offset = self.next_fetch_offset
        while i < count and records[i][0] < next_offset:  # skip what was consumed before a seek
            i += 1
        end = min(count, i + limit)
        self._index = i
        if i >= end:
            return
        assert self._batch is not None
        topic, partition = self.tp
        ttype = self._batch.timestamp_type
        epoch = self.last_epoch
        if key_deserializer is None and value_deserializer is None:
            make = ConsumerRecord
            out.extend(
                [make(topic, partition, r[0], r[1], ttype, r[2], r[3], r[4], epoch) for r in records[i:end]]
            )
            self._index = end
            self.next_fetch_offset = records[end - 1][0] + 1
            return
        for j in range(i, end):
            record = records[j]
            key = (
                record.key if key_deserializer is None else self._deserialize(key_deserializer, record, True)
            )
            value = (
                record.value
                if value_deserializer is None
                else self._deserialize(value_deserializer, record, False)
            )
            out.append(
                ConsumerRecord(
                    topic,
                    partition,
                    record.offset,
                    record.timestamp,
                    ttype,
                    key,
                    value,
                    record.headers,
                    epoch,
                )
            )
            self._index = j + 1
            self.next_fetch_offset = record.offset + 1

    def _deserialize(self, deserializer: Deserializer, record: Record, is_key: bool) -> Any:
        data = record.key if is_key else record.value
        try:
            return deserializer(data)
        except Exception as exc:
            raise RecordDeserializationError(
                repr(exc),
                topic=self.tp.topic,
                partition=self.tp.partition,
                offset=record.offset,
                origin="key" if is_key else "value",
            ) from exc

    def drain(self) -> None:
        """Mark as fully consumed (its partition was unassigned or reset)."""
        self.consumed = True
        self._records = []
        self._batches = None
