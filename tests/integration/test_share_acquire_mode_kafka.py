"""``share.acquire.mode`` (KIP-1206) on Apache Kafka 4.4: how much one ShareFetch acquires for a
member, seen from what another member of the group can have meanwhile.

A backlog of 30 records in one record batch on one partition; member A polls once
(``max.poll.records`` 7) and then holds its records (it does not poll); member B, in the same
group, reads what it can. With ``record_limit`` the broker keeps to ShareFetch's ``MaxRecords``
exactly: A holds 7 and B gets the other 23. With ``batch_optimized`` (the default) the broker may
acquire up to the end of the record batch, and Kafka 4.4 does: A's one ShareFetch takes all 30
and B gets none of them until A lets them go (the contrast that shows the record_limit case can
fail; should a later Kafka round differently, this case says so).
"""

from __future__ import annotations

import time
import uuid

import pytest

from kaflux import AdminClient, ConsumerRecord, Producer, ShareConsumer
from kaflux.admin import NewTopic
from kaflux.devbrokers.brokers import Broker

from support.kafka_helpers import set_group_configs

pytestmark = pytest.mark.integration

WAIT_S = 30.0
RECORDS = 30
MAX_POLL_RECORDS = 7
#: the group's timings: a fresh group's first member gets its partitions one heartbeat later
GROUP_CONFIGS = {"share.auto.offset.reset": "earliest", "share.heartbeat.interval.ms": "1000"}


def _backlog(bootstrap: str) -> tuple[str, str, list[bytes]]:
    """A topic of one partition holding :data:`RECORDS` records in one batch, and a share group
    reading it from the earliest offset."""
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"acquire-mode-{suffix}", f"acquire-mode-group-{suffix}"
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 1)], timeout=WAIT_S)
        set_group_configs(admin, group, GROUP_CONFIGS)
    values = [f"job-{i}".encode() for i in range(RECORDS)]
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 1000}) as producer:
        futures = [producer.send(topic, value, partition=0) for value in values]
        producer.flush(WAIT_S)
    offsets = [f.result(WAIT_S).offset for f in futures]
    assert offsets == list(range(RECORDS))
    return topic, group, values


def _member(bootstrap: str, group: str, topic: str, mode: str) -> ShareConsumer:
    member = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "max.poll.records": MAX_POLL_RECORDS,
            "share.acquire.mode": mode,
        }
    )
    member.subscribe([topic])
    return member


def _first_poll(member: ShareConsumer) -> list[ConsumerRecord]:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        got = member.poll(0.2)
        if got:
            return got
    raise AssertionError(f"no records within {WAIT_S} s")


def _read_for(member: ShareConsumer, seconds: float, enough: int) -> list[ConsumerRecord]:
    """What ``member`` gets in ``seconds`` (or until it has ``enough``)."""
    got: list[ConsumerRecord] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and len(got) < enough:
        got += member.poll(0.2)
    return got


@pytest.mark.parametrize("mode", ["record_limit", "batch_optimized"])
def test_what_one_member_acquires_and_another_can_have_meanwhile(kafka: Broker, mode: str) -> None:
    topic, group, values = _backlog(kafka.bootstrap_servers)
    holder = _member(kafka.bootstrap_servers, group, topic, mode)
    other: ShareConsumer | None = None
    try:
        first = _first_poll(holder)
        assert len(first) == MAX_POLL_RECORDS  # one poll returns max.poll.records either way
        # the holder processes its records (it does not poll); another member joins and reads
        other = _member(kafka.bootstrap_servers, group, topic, "record_limit")
        # record_limit: until it has the 23 (its join and reads within the holder's 30 s lock);
        # batch_optimized: 3 s in which it must get nothing
        got = _read_for(other, 20.0 if mode == "record_limit" else 3.0, RECORDS - MAX_POLL_RECORDS)
        if mode == "record_limit":
            assert len(got) == RECORDS - MAX_POLL_RECORDS, (
                f"the other member got {len(got)} of {RECORDS}: the holder acquired more than "
                f"max.poll.records ({MAX_POLL_RECORDS}) in record_limit mode"
            )
            assert sorted(r.value for r in first + got) == sorted(values)
        else:
            assert got == [], "batch_optimized: the holder's one ShareFetch took the whole batch"
        # the holder hands out the rest of what it acquired, or the other member gets it
        rest = _read_for(holder, 0.5, RECORDS)
        more = _read_for(other, WAIT_S, RECORDS - len(first) - len(got) - len(rest))
        seen = [r.value for r in first + got + rest + more]
        assert sorted(seen) == sorted(values), f"{len(seen)} records seen, {len(set(seen))} of them distinct"
    finally:
        holder.close(10)
        if other is not None:
            other.close(10)
