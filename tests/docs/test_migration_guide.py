"""docs/migrating.md runs: every fenced ``python`` block, the other clients' "before" blocks
included, in a child interpreter against an Apache Kafka broker, in the page's order (each pair shares
a consumer group, so the kaflux block starts where the other client's consumer committed). And
the page's one claim that is not code: keyed records of confluent-kafka's default partitioner
land elsewhere than kaflux's, and with ``partitioner=murmur2_random`` on the same partition."""

from __future__ import annotations

import itertools
import sys
import uuid
from pathlib import Path

import pytest

from kaflux import AdminClient, NewTopic, Producer
from kaflux.devbrokers import Broker

from support.doc_blocks import Block, child_env, fenced_blocks, run_child

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("migration-guide")]

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "migrating.md"
BLOCKS = [
    b for b in fenced_blocks(GUIDE.read_text(encoding="utf-8"), "docs/migrating.md") if b.language == "python"
]
PLACEHOLDER = "127.0.0.1:9092"
TOPIC = "payments"


def test_the_guide_has_a_runnable_before_and_after_for_each_client() -> None:
    assert all(b.mode == "run" for b in BLOCKS), [b.line for b in BLOCKS if b.mode != "run"]
    imports = {
        client: [b.line for b in BLOCKS if f"from {client} import" in b.code]
        for client in ("confluent_kafka", "kafka", "aiokafka", "kaflux", "kaflux.aio")
    }
    assert all(imports.values()), imports
    assert all(PLACEHOLDER in b.code for b in BLOCKS)
    assert len(PAIRS) == 3


@pytest.fixture(scope="module")
def payments(kafka: Broker) -> str:
    with AdminClient({"bootstrap.servers": kafka.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(TOPIC, 3)], exist_ok=True, timeout=30)
    return kafka.bootstrap_servers


PEERS = ("confluent_kafka", "kafka", "aiokafka")
#: (another client's block, the kaflux block right after it): one consumer group each
PAIRS = [
    (before, after)
    for before, after in itertools.pairwise(BLOCKS)
    if any(f"from {peer} import" in before.code for peer in PEERS)
]
SINGLES = [b for b in BLOCKS if not any(b in pair for pair in PAIRS)]


def run(block: Block, bootstrap: str, cwd: Path) -> set[tuple[int, int]]:
    """Run ``block``; the (partition, offset) of each record it printed (lines ``partition offset ...``)."""
    out = run_child(
        [sys.executable, "-c", block.code.replace(PLACEHOLDER, bootstrap)], block, cwd, child_env(), 120
    )
    printed = [line.split() for line in out.splitlines()]
    return {(int(f[0]), int(f[1])) for f in printed if len(f) >= 2 and f[0].isdigit() and f[1].isdigit()}


@pytest.mark.parametrize(("before", "after"), PAIRS, ids=[f"{a.id}-then-{b.id}" for a, b in PAIRS])
def test_a_group_moves_to_kaflux(before: Block, after: Block, payments: str, tmp_path: Path) -> None:
    assert "kaflux" in after.code and not any(f"from {peer} import" in after.code for peer in PEERS)
    theirs = run(before, payments, tmp_path)
    ours = run(after, payments, tmp_path)
    assert len(theirs) >= 3 and len(ours) == 3, (theirs, ours)
    # the kaflux consumer started where the other client's consumer committed: nothing again
    assert not theirs & ours, sorted(theirs & ours)


@pytest.mark.parametrize("block", SINGLES, ids=[b.id for b in SINGLES])
def test_guide_example(block: Block, payments: str, tmp_path: Path) -> None:
    run(block, payments, tmp_path)


def _partitions_of(
    bootstrap: str, topic: str, keys: list[bytes], **confluent: str
) -> tuple[list[int], list[int]]:
    """Where confluent-kafka (with ``confluent`` settings) and kaflux put each key."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    placed: dict[bytes, int] = {}

    def delivered(error: object, msg: object) -> None:
        assert error is None, error
        placed[msg.key()] = msg.partition()  # type: ignore[attr-defined]

    peer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, **confluent})
    for key in keys:
        peer.produce(topic, value=b"v", key=key, on_delivery=delivered)
    assert peer.flush(30) == 0
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        ours = [f.result(timeout=30).partition for f in [producer.send(topic, b"v", key=k) for k in keys]]
    return [placed[k] for k in keys], ours


def test_the_partitioner_note_holds(payments: str) -> None:
    topic = f"kx-partitioner-{uuid.uuid4().hex[:8]}"
    with AdminClient({"bootstrap.servers": payments}) as admin:
        admin.create_topics([NewTopic(topic, 6)], timeout=30)
    keys = [b"customer-%d" % i for i in range(40)]
    theirs, ours = _partitions_of(payments, topic, keys)
    assert theirs != ours  # librdkafka's default, consistent_random, hashes keys differently
    theirs, ours = _partitions_of(payments, topic, keys, partitioner="murmur2_random")
    assert theirs == ours
