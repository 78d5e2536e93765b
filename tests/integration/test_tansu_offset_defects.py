"""Two Tansu defects, each shown with confluent-kafka (librdkafka) doing the same thing as kaflux,
so that they are the broker's (issue 24; docs/brokers.md, "Tansu"). Strict xfails on Tansu; on
noida-db the same tests pass, as on Kafka.

* A Fetch beyond the log end is answered with error 0 and no records, where Kafka answers
  OFFSET_OUT_OF_RANGE: a consumer whose position is past the end (a topic deleted and
  re-created, a log truncated) never resets by ``auto.offset.reset`` and reads nothing.
* A retried Produce batch that the broker had already written (an idempotent producer's retry
  after the connection was cut right after the request) is answered with base offset -1, where
  Kafka answers the batch's original offset.
"""

from __future__ import annotations

import time
import uuid

import confluent_kafka as ck
import pytest

from kaflux import Consumer, Producer, TopicPartition
from kaflux.devbrokers.brokers import Broker, BrokerUnavailableError
from kaflux.protocol.api import ApiKey

from support.scenarios import create_topic, start_proxied_broker

pytestmark = pytest.mark.integration

WAIT_S = 20.0
RECORDS = [b"r%d" % i for i in range(5)]
FETCH_DEFECT = "a Fetch beyond the log end is answered with error 0, not OFFSET_OUT_OF_RANGE"
DUPLICATE_DEFECT = "a retried duplicate Produce batch is answered with base offset -1"


def _new_topic(bootstrap: str) -> str:
    topic = f"kx-defect-{uuid.uuid4().hex[:10]}"
    create_topic(bootstrap, topic, 1)
    return topic


def _produce(bootstrap: str, topic: str) -> None:
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for value in RECORDS:
            producer.send(topic, value, partition=0)
        producer.flush(WAIT_S)


def _peer_reads_from(bootstrap: str, topic: str, offset: int) -> list[bytes | None]:
    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"kx-peer-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    values: list[bytes | None] = []
    try:
        consumer.assign([ck.TopicPartition(topic, 0, offset)])
        deadline = time.monotonic() + WAIT_S / 2
        while len(values) < len(RECORDS) and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value())
    finally:
        consumer.close()
    return values


def _kaflux_reads_from(bootstrap: str, topic: str, offset: int) -> list[bytes | None]:
    tp = TopicPartition(topic, 0)
    consumer = Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"})
    values: list[bytes | None] = []
    try:
        consumer.assign([tp])
        consumer.seek(tp, offset)
        deadline = time.monotonic() + WAIT_S / 2
        while len(values) < len(RECORDS) and time.monotonic() < deadline:
            values += [r.value for r in consumer.poll(0.2)]
    finally:
        consumer.close(5)
    return values


@pytest.mark.broker_defect("tansu", reason=FETCH_DEFECT, raises=AssertionError)
def test_a_position_beyond_the_log_end_is_reset_by_auto_offset_reset(broker: Broker) -> None:
    topic = _new_topic(broker.bootstrap_servers)
    _produce(broker.bootstrap_servers, topic)
    # the peer first: with Kafka's OFFSET_OUT_OF_RANGE, librdkafka resets to earliest
    assert _peer_reads_from(broker.bootstrap_servers, topic, 1000) == RECORDS
    assert _kaflux_reads_from(broker.bootstrap_servers, topic, 1000) == RECORDS


@pytest.mark.parametrize(
    "broker",
    [
        pytest.param(
            "tansu",
            marks=pytest.mark.xfail(
                strict=True, raises=AssertionError, reason=f"tansu defect: {DUPLICATE_DEFECT}"
            ),
        ),
        "noida",
    ],
)
def test_a_retried_batch_the_broker_already_wrote_is_answered_with_its_offset(broker: str) -> None:
    try:
        pb = start_proxied_broker(broker)
    except BrokerUnavailableError as e:
        pytest.skip(f"{broker} broker not available: {e}")
    try:
        topic = _new_topic(pb.bootstrap_servers)
        # the peer first: an idempotent librdkafka producer, its first Produce cut after the
        # broker got it, so the retry is a duplicate of a written batch
        fault = pb.proxy.cut_after_request(ApiKey.PRODUCE, times=1)
        peer = ck.Producer(
            {"bootstrap.servers": pb.bootstrap_servers, "enable.idempotence": True, "linger.ms": 0}
        )
        reports: list[tuple[object, int | None]] = []
        peer.produce(
            topic, b"once", partition=0, on_delivery=lambda err, msg: reports.append((err, msg.offset()))
        )
        assert peer.flush(WAIT_S) == 0
        assert fault.fired == 1
        assert reports == [(None, 0)], "librdkafka's delivery report: written once, at offset 0"

        fault = pb.proxy.cut_after_request(ApiKey.PRODUCE, times=1)
        with Producer({"bootstrap.servers": pb.bootstrap_servers, "linger.ms": 0}) as producer:
            metadata = producer.send(topic, b"once-more", partition=0).result(WAIT_S)
        assert fault.fired == 1
        assert metadata.offset == 1
    finally:
        pb.close()
