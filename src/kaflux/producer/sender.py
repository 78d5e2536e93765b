"""Turns ready batches into Produce requests and their answers into record futures.
[bg, pure: takes now_ms]

A request manager: ``poll(now_ms)`` drains ready batches from the accumulator, groups them by
leader and returns one Produce request per broker. Retriable errors (a leader moved, a
timeout, a lost connection) put the batch back at the head of its partition after
``retry.backoff.ms`` (exponential, jittered) while ``retries`` and ``delivery.timeout.ms``
allow; other errors fail the batch's futures with the broker's error class.
"""

from __future__ import annotations

from collections import defaultdict

from kaflux.errors import KafkaError, KafkaTimeoutError, error_for_code
from kaflux.network.backoff import ExponentialBackoff
from kaflux.network.cluster import ClusterMetadata
from kaflux.network.metadata_manager import MetadataManager
from kaflux.network.requests import ClientResponse, PollResult, UnsentRequest
from kaflux.producer.accumulator import ProducerBatch, RecordAccumulator
from kaflux.protocol.messages.produce import (
    PartitionProduceData,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
)

#: The newest Produce version that still addresses topics by name.
MAX_PRODUCE_VERSION = 11


class ProduceRequestManager:
    """Sends batches; completes, retries or fails them."""

    def __init__(
        self,
        accumulator: RecordAccumulator,
        cluster: ClusterMetadata,
        metadata: MetadataManager,
        *,
        acks: int,
        request_timeout_ms: int,
        retries: int,
        delivery_timeout_ms: int,
        retry_backoff: ExponentialBackoff,
    ) -> None:
        self._accumulator = accumulator
        self._cluster = cluster
        self._metadata = metadata
        self._acks = acks
        self._request_timeout_ms = request_timeout_ms
        self._retries = retries
        self._delivery_timeout_ms = delivery_timeout_ms
        self._retry_backoff = retry_backoff
        self.in_flight_requests = 0

    def poll(self, now_ms: int) -> PollResult:
        """Return Produce requests for every broker that leads a ready partition."""
        for batch in self._accumulator.expire(now_ms):
            batch.fail(
                KafkaTimeoutError(
                    f"{len(batch.futures)} record(s) for {batch.tp} expired after delivery.timeout.ms="
                    f"{self._delivery_timeout_ms} without being sent"
                )
            )
            self._accumulator.deallocate(batch)
        topics = self._accumulator.topics_with_data()
        if topics:
            self._metadata.add_topics(topics)
        by_node, wait_ms, unknown_leader = self._accumulator.drain_ready(now_ms, self._cluster.leader_for)
        if unknown_leader:
            self._metadata.request_update()
            wait_ms = min(wait_ms, 50)
        unsent = [self._request_for(node, batches, now_ms) for node, batches in by_node.items()]
        return PollResult(wait_ms, unsent)

    def poll_on_close(self, now_ms: int) -> PollResult:
        """At close: send everything still buffered."""
        self._accumulator.close()
        return self.poll(now_ms)

    def _request_for(self, node_id: int, batches: list[ProducerBatch], now_ms: int) -> UnsentRequest:
        by_topic: dict[str, list[PartitionProduceData]] = defaultdict(list)
        for batch in batches:
            by_topic[batch.tp.topic].append(
                PartitionProduceData(index=batch.tp.partition, records=memoryview(batch.builder.build()))
            )
        request = ProduceRequest(
            acks=self._acks,
            timeout_ms=self._request_timeout_ms,
            topic_data=[TopicProduceData(name=t, partition_data=p) for t, p in sorted(by_topic.items())],
        )
        self.in_flight_requests += 1

        def handle(response: ClientResponse) -> None:
            self.in_flight_requests -= 1
            self._on_response(batches, response)

        # delivery.timeout.ms bounds the whole life of a record, retries and in-flight time
        # included: the request may not outlive its oldest batch's delivery deadline.
        delivery_deadline = min(b.created_ms for b in batches) + self._delivery_timeout_ms
        timeout = max(1, min(self._request_timeout_ms, delivery_deadline - now_ms))
        return UnsentRequest(
            request,
            node_id,
            handle,
            max_version=MAX_PRODUCE_VERSION,
            expect_response=self._acks != 0,
            timeout_ms=timeout,
            deadline_ms=delivery_deadline,
        )

    def _on_response(self, batches: list[ProducerBatch], response: ClientResponse) -> None:
        now_ms = response.received_ms
        if response.error is not None:
            for batch in batches:
                self._fail_or_retry(batch, response.error, now_ms)
            return
        if self._acks == 0:
            for batch in batches:
                batch.complete(-1, -1)
                self._accumulator.deallocate(batch)
            return
        body: ProduceResponse = response.body
        results = {(t.name, p.index): p for t in body.responses for p in t.partition_responses}
        for batch in batches:
            result = results.get((batch.tp.topic, batch.tp.partition))
            if result is None:
                self._fail_or_retry(batch, KafkaError(f"the broker did not answer for {batch.tp}"), now_ms)
            elif result.error_code != 0:
                detail = result.error_message or None
                self._fail_or_retry(batch, error_for_code(result.error_code)(detail), now_ms)
            else:
                batch.complete(result.base_offset, result.log_append_time_ms)
                self._accumulator.deallocate(batch)

    def _fail_or_retry(self, batch: ProducerBatch, error: KafkaError, now_ms: int) -> None:
        if error.invalid_metadata:
            self._metadata.request_update()
        age = now_ms - batch.created_ms
        if error.retriable and batch.attempts < self._retries and age < self._delivery_timeout_ms:
            self._accumulator.reenqueue(batch, now_ms + self._retry_backoff.backoff_ms(batch.attempts))
            return
        if error.retriable and age >= self._delivery_timeout_ms:
            error = KafkaTimeoutError(
                f"{len(batch.futures)} record(s) for {batch.tp} were not acknowledged within "
                f"delivery.timeout.ms={self._delivery_timeout_ms} (last error: {error})"
            )
        batch.fail(error)
        self._accumulator.deallocate(batch)
