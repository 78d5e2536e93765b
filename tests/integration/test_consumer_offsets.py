"""Positions, seeks, commits and offset lookups of ``kaflux.Consumer`` (assign mode).

Where Tansu is known to answer wrongly (ListOffsets LATEST, ListOffsets by timestamp, commit metadata),
the test first asks confluent-kafka the same question and asserts the correct answer: on Tansu that
assertion fails, which is what the ``broker_defect`` marker records. The kaflux assertions that follow
run on noida-db. Tests that do not depend on those answers run on both brokers.
"""

from __future__ import annotations

import time
import uuid

import pytest

from kaflux import AdminClient, Consumer, NewTopic, OffsetAndMetadata, Producer, TopicPartition
from kaflux.devbrokers.brokers import Broker
from kaflux.errors import IllegalStateError, InvalidGroupIdError

ck = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.integration

WAIT_S = 15.0
LATEST_DEFECT = "ListOffsets LATEST returns the last batch's base offset + 1, not the high watermark"
TIMESTAMP_DEFECT = "ListOffsets by timestamp always answers offset 0 with timestamp 'now'"
METADATA_DEFECT = "OffsetCommit metadata is dropped (OffsetFetch returns null metadata)"


# --- helpers --------------------------------------------------------------------------------------


def create_topic(broker: Broker, topic: str, partitions: int) -> None:
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(topic, partitions)], timeout=WAIT_S)


def produce_batches(
    broker: Broker,
    topic: str,
    partition: int,
    batches: int,
    per_batch: int,
    timestamps: list[int] | None = None,
) -> None:
    """Produce ``batches`` record batches of ``per_batch`` records each (values ``b"v<offset>"``)."""
    with Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 10_000}) as producer:
        offset = 0
        for _ in range(batches):
            futures = []
            for _ in range(per_batch):
                ts = timestamps[offset] if timestamps is not None else None
                futures.append(producer.send(topic, b"v%d" % offset, partition=partition, timestamp=ts))
                offset += 1
            producer.flush(WAIT_S)  # one flush per batch: exactly one record batch each
            for f in futures:
                f.result(timeout=0)


def new_consumer(broker: Broker, **config: object) -> Consumer:
    settings = {"bootstrap.servers": broker.bootstrap_servers, "auto.offset.reset": "earliest", **config}
    return Consumer(settings)


def poll_until(consumer: Consumer, count: int, timeout: float = WAIT_S) -> list:
    deadline = time.monotonic() + timeout
    out: list = []
    while len(out) < count:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"got {len(out)} of {count} records within {timeout} s"
        out.extend(consumer.poll(min(1.0, remaining)))
    return out


def ck_consumer(broker: Broker, group: str | None = None):
    return ck.Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": group or f"kx-ck-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
        }
    )


def ck_high_watermark(broker: Broker, topic: str, partition: int) -> int:
    """The high watermark as librdkafka gets it from a ListOffsets LATEST request."""
    consumer = ck_consumer(broker)
    try:
        return consumer.get_watermark_offsets(
            ck.TopicPartition(topic, partition), timeout=WAIT_S, cached=False
        )[1]
    finally:
        consumer.close()


# --- seek and position ----------------------------------------------------------------------------


def test_seek_moves_the_position_within_and_across_batches(broker: Broker, topic_name: str):
    create_topic(broker, topic_name, 1)
    tp = TopicPartition(topic_name, 0)
    produce_batches(broker, topic_name, 0, batches=4, per_batch=25)
    consumer = new_consumer(broker, **{"max.poll.records": 1000})
    try:
        consumer.assign([tp])
        consumer.seek(tp, 60)  # the middle of the third batch
        assert consumer.position(tp) == 60
        got = poll_until(consumer, 40)
        assert [r.offset for r in got] == list(range(60, 100))
        assert [r.value for r in got] == [b"v%d" % i for i in range(60, 100)]
        assert consumer.position(tp) == 100

        consumer.seek(tp, 7)  # backwards, into the first batch
        assert consumer.position(tp) == 7
        got = poll_until(consumer, 93)
        assert [r.offset for r in got] == list(range(7, 100))

        consumer.seek(tp, OffsetAndMetadata(98))
        assert [r.offset for r in poll_until(consumer, 2)] == [98, 99]
    finally:
        consumer.close()


def test_seek_to_beginning_resolves_to_the_first_offset(broker: Broker, topic_name: str):
    create_topic(broker, topic_name, 2)
    tp0, tp1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
    produce_batches(broker, topic_name, 0, batches=2, per_batch=10)
    produce_batches(broker, topic_name, 1, batches=1, per_batch=5)
    consumer = new_consumer(broker)
    try:
        consumer.assign([tp0, tp1])
        consumer.seek(tp0, 15)
        consumer.seek(tp1, 3)
        assert sorted(r.offset for r in poll_until(consumer, 7)) == [3, 4, 15, 16, 17, 18, 19]
        consumer.seek_to_beginning([tp0])  # only tp0
        assert consumer.position(tp0) == 0
        assert consumer.position(tp1) == 5
        got = poll_until(consumer, 20)
        assert [r.offset for r in got if r.partition == 0] == list(range(20))
        assert [r for r in got if r.partition == 1] == []
        consumer.seek_to_beginning()  # no argument: every assigned partition
        assert (consumer.position(tp0), consumer.position(tp1)) == (0, 0)
    finally:
        consumer.close()


def test_position_without_a_commit_follows_auto_offset_reset_earliest(broker: Broker, topic_name: str):
    create_topic(broker, topic_name, 1)
    tp = TopicPartition(topic_name, 0)
    produce_batches(broker, topic_name, 0, batches=2, per_batch=10)
    consumer = new_consumer(broker, **{"group.id": f"kx-{uuid.uuid4().hex}", "enable.auto.commit": False})
    try:
        consumer.assign([tp])
        assert consumer.position(tp) == 0
    finally:
        consumer.close()


@pytest.mark.broker_defect("tansu", reason=LATEST_DEFECT, raises=AssertionError)
def test_seek_to_end_positions_after_the_last_record(broker: Broker, topic_name: str):
    create_topic(broker, topic_name, 1)
    tp = TopicPartition(topic_name, 0)
    produce_batches(broker, topic_name, 0, batches=3, per_batch=10)
    assert ck_high_watermark(broker, topic_name, 0) == 30  # the broker's answer (wrong on Tansu)
    consumer = new_consumer(broker)
    try:
        consumer.assign([tp])
        consumer.seek_to_end([tp])
        assert consumer.position(tp) == 30
        produce_batches_from(broker, topic_name, 0, start=30, count=2)
        got = poll_until(consumer, 2)
        assert [(r.offset, r.value) for r in got] == [(30, b"v30"), (31, b"v31")]
    finally:
        consumer.close()


@pytest.mark.broker_defect("tansu", reason=LATEST_DEFECT, raises=AssertionError)
def test_auto_offset_reset_latest_starts_at_the_end(broker: Broker, topic_name: str):
    create_topic(broker, topic_name, 1)
    tp = TopicPartition(topic_name, 0)
    produce_batches(broker, topic_name, 0, batches=2, per_batch=10)
    assert ck_high_watermark(broker, topic_name, 0) == 20
    consumer = new_consumer(broker, **{"auto.offset.reset": "latest"})
    try:
        consumer.assign([tp])
        assert consumer.position(tp) == 20
    finally:
        consumer.close()


def produce_batches_from(broker: Broker, topic: str, partition: int, start: int, count: int) -> None:
    with Producer({"bootstrap.servers": broker.bootstrap_servers}) as producer:
        futures = [producer.send(topic, b"v%d" % (start + i), partition=partition) for i in range(count)]
        producer.flush(WAIT_S)
    assert [f.result(timeout=0).offset for f in futures] == list(range(start, start + count))


def test_seek_argument_errors(broker: Broker, topic_name: str):
    create_topic(broker, topic_name, 2)
    consumer = new_consumer(broker)
    try:
        consumer.assign([TopicPartition(topic_name, 0)])
        with pytest.raises(ValueError):
            consumer.seek(TopicPartition(topic_name, 0), -1)
        with pytest.raises(IllegalStateError):
            consumer.seek(TopicPartition(topic_name, 1), 0)  # not assigned
        with pytest.raises(IllegalStateError):
            consumer.position(TopicPartition(topic_name, 1))
    finally:
        consumer.close()


# --- commits --------------------------------------------------------------------------------------


def test_commit_sync_and_committed_round_trip(broker: Broker, topic_name: str):
    create_topic(broker, topic_name, 3)
    tps = [TopicPartition(topic_name, p) for p in range(3)]
    consumer = new_consumer(broker, **{"group.id": f"kx-{uuid.uuid4().hex}", "enable.auto.commit": False})
    try:
        consumer.assign(tps)
        assert consumer.committed(tps, timeout=WAIT_S) == {tp: None for tp in tps}
        consumer.commit_sync({tps[0]: 5, tps[1]: OffsetAndMetadata(9)}, timeout=WAIT_S)
        committed = consumer.committed(tps, timeout=WAIT_S)
        assert {tp: (m.offset if m else None) for tp, m in committed.items()} == {
            tps[0]: 5,
            tps[1]: 9,
            tps[2]: None,
        }
        consumer.commit_sync({tps[0]: 2}, timeout=WAIT_S)  # commits may move backwards
        assert consumer.committed([tps[0]], timeout=WAIT_S)[tps[0]].offset == 2  # type: ignore[union-attr]
    finally:
        consumer.close()


@pytest.mark.broker_defect("tansu", reason=METADATA_DEFECT, raises=AssertionError)
def test_commit_metadata_round_trips(broker: Broker, topic_name: str):
    create_topic(broker, topic_name, 2)
    # The broker's behaviour, seen by librdkafka.
    proof = ck_consumer(broker)
    try:
        proof.commit(offsets=[ck.TopicPartition(topic_name, 1, 4, metadata="ck-meta")], asynchronous=False)
        (ck_committed,) = proof.committed([ck.TopicPartition(topic_name, 1)], timeout=WAIT_S)
    finally:
        proof.close()
    assert (ck_committed.offset, ck_committed.metadata) == (4, "ck-meta")

    tp = TopicPartition(topic_name, 0)
    consumer = new_consumer(broker, **{"group.id": f"kx-{uuid.uuid4().hex}", "enable.auto.commit": False})
    try:
        consumer.assign([tp])
        consumer.commit_sync({tp: OffsetAndMetadata(11, "kaflux ✓ metadata")}, timeout=WAIT_S)
        committed = consumer.committed([tp], timeout=WAIT_S)[tp]
    finally:
        consumer.close()
    assert committed is not None
    assert (committed.offset, committed.metadata) == (11, "kaflux ✓ metadata")


def test_new_consumer_in_the_group_resumes_from_the_committed_offset(broker: Broker, topic_name: str):
    create_topic(broker, topic_name, 1)
    tp = TopicPartition(topic_name, 0)
    produce_batches(broker, topic_name, 0, batches=2, per_batch=15)
    group = f"kx-{uuid.uuid4().hex}"
    config = {"group.id": group, "enable.auto.commit": False, "max.poll.records": 8}
    first = new_consumer(broker, **config)
    try:
        first.assign([tp])
        got = first.poll(WAIT_S)
        assert [r.offset for r in got] == list(range(8))
        first.commit_sync(timeout=WAIT_S)  # default: the consumed position
        assert first.committed([tp], timeout=WAIT_S)[tp].offset == 8  # type: ignore[union-attr]
    finally:
        first.close()

    second = new_consumer(broker, **config)  # auto.offset.reset=earliest, but a commit exists
    try:
        second.assign([tp])
        assert second.position(tp) == 8
        got = poll_until(second, 22)  # type: ignore[assignment]
        assert [r.offset for r in got] == list(range(8, 30))
    finally:
        second.close()


def test_reassigning_does_not_commit_when_auto_commit_is_disabled(broker: Broker, topic_name: str):
    create_topic(broker, topic_name, 2)
    tp0, tp1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
    produce_batches(broker, topic_name, 0, batches=1, per_batch=10)
    config = {"group.id": f"kx-{uuid.uuid4().hex}", "enable.auto.commit": False, "max.poll.records": 4}
    first = new_consumer(broker, **config)
    try:
        first.assign([tp0])
        assert [r.offset for r in first.poll(WAIT_S)] == [0, 1, 2, 3]
        first.assign([tp0, tp1])
    finally:
        first.close()
    second = new_consumer(broker, **config)
    try:
        second.assign([tp0])
        assert second.committed([tp0], timeout=WAIT_S) == {tp0: None}
        assert second.position(tp0) == 0  # nothing committed: auto.offset.reset=earliest
    finally:
        second.close()


def test_close_commits_consumed_positions_when_auto_commit_is_enabled(broker: Broker, topic_name: str):
    create_topic(broker, topic_name, 1)
    tp = TopicPartition(topic_name, 0)
    produce_batches(broker, topic_name, 0, batches=1, per_batch=20)
    config = {"group.id": f"kx-{uuid.uuid4().hex}", "enable.auto.commit": True, "max.poll.records": 7}
    first = new_consumer(broker, **config)
    try:
        first.assign([tp])
        assert [r.offset for r in first.poll(WAIT_S)] == list(range(7))
    finally:
        first.close()
    second = new_consumer(broker, **config)
    try:
        second.assign([tp])
        assert second.position(tp, timeout=WAIT_S) == 7
        assert [r.offset for r in poll_until(second, 13)] == list(range(7, 20))
    finally:
        second.close()


def test_commit_without_group_id_fails(broker: Broker, topic_name: str):
    create_topic(broker, topic_name, 1)
    tp = TopicPartition(topic_name, 0)
    consumer = new_consumer(broker)
    try:
        consumer.assign([tp])
        with pytest.raises(InvalidGroupIdError):
            consumer.commit_sync({tp: 1}, timeout=5.0)
        with pytest.raises(InvalidGroupIdError):
            consumer.committed([tp], timeout=5.0)
    finally:
        consumer.close()


# --- offset lookups -------------------------------------------------------------------------------


@pytest.mark.broker_defect("tansu", reason=TIMESTAMP_DEFECT, raises=AssertionError)
def test_offsets_for_times(broker: Broker, topic_name: str):
    create_topic(broker, topic_name, 2)
    base = int(time.time() * 1000) - 100_000
    timestamps = [base + 10 * i for i in range(30)]
    produce_batches(broker, topic_name, 0, batches=3, per_batch=10, timestamps=timestamps)
    tp0, tp1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)

    proof = ck_consumer(broker)
    try:
        answers = [
            proof.offsets_for_times([ck.TopicPartition(topic_name, 0, ts)], timeout=WAIT_S)[0]
            for ts in (base + 125, base + 10_000)
        ]
    finally:
        proof.close()
    assert [a.offset for a in answers] == [13, -1]  # the broker's answer (wrong on Tansu)

    consumer = new_consumer(broker)
    try:
        answer = consumer.offsets_for_times({tp0: base + 125, tp1: base}, timeout=WAIT_S)
        assert answer[tp1] is None  # an empty partition
        assert (answer[tp0].offset, answer[tp0].timestamp) == (13, base + 130)  # type: ignore[union-attr]
        result = consumer.offsets_for_times({tp0: base}, timeout=WAIT_S)[tp0]
        assert (result.offset, result.timestamp) == (0, base)  # type: ignore[union-attr]
        result = consumer.offsets_for_times({tp0: base + 95}, timeout=WAIT_S)[tp0]
        assert (result.offset, result.timestamp) == (10, base + 100)  # type: ignore[union-attr]  # the first record of batch 2
        assert consumer.offsets_for_times({tp0: base + 10_000}, timeout=WAIT_S) == {tp0: None}
    finally:
        consumer.close()


def test_beginning_offsets(broker: Broker, topic_name: str):
    create_topic(broker, topic_name, 2)
    produce_batches(broker, topic_name, 0, batches=2, per_batch=10)
    tps = [TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)]
    consumer = new_consumer(broker)
    try:
        assert consumer.beginning_offsets(tps, timeout=WAIT_S) == {tps[0]: 0, tps[1]: 0}
    finally:
        consumer.close()


def test_end_offsets_agree_with_librdkafka(broker: Broker, topic_name: str):
    """Whatever the broker answers to ListOffsets LATEST, kaflux reports the same as librdkafka."""
    create_topic(broker, topic_name, 2)
    produce_batches(broker, topic_name, 0, batches=3, per_batch=10)
    produce_batches(broker, topic_name, 1, batches=1, per_batch=1)
    tps = [TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)]
    consumer = new_consumer(broker)
    try:
        ends = consumer.end_offsets(tps, timeout=WAIT_S)
    finally:
        consumer.close()
    assert ends == {tp: ck_high_watermark(broker, topic_name, tp.partition) for tp in tps}


@pytest.mark.broker_defect("tansu", reason=LATEST_DEFECT, raises=AssertionError)
def test_end_offsets_are_the_high_watermarks(broker: Broker, topic_name: str):
    create_topic(broker, topic_name, 3)
    produce_batches(broker, topic_name, 0, batches=3, per_batch=10)
    produce_batches(broker, topic_name, 1, batches=1, per_batch=4)
    assert [ck_high_watermark(broker, topic_name, p) for p in range(3)] == [30, 4, 0]
    tps = [TopicPartition(topic_name, p) for p in range(3)]
    consumer = new_consumer(broker)
    try:
        assert consumer.end_offsets(tps, timeout=WAIT_S) == {tps[0]: 30, tps[1]: 4, tps[2]: 0}
    finally:
        consumer.close()
