"""Faults on a 3-node Apache Kafka 4.4 cluster under load: nothing acknowledged is lost, nothing is
read twice, and the clients recover (the recovery times are printed and kept in docs/brokers.md,
"Faults on a 3-node Apache Kafka cluster").

The cluster (one per module) is three combined broker+controller nodes (KRaft). Each node's plain
listener advertises the port of a :class:`~support.fault_proxy.FaultProxy` in front of it, so that
every client connection to a node goes through its proxy, while the nodes replicate to each other
on a separate listener, directly. The topic has 3 partitions, replication 3 and
``min.insync.replicas=2``. The load (support/cluster_load.py) is an idempotent kaflux producer with
``acks=all`` sending numbered keys round-robin over the partitions, and a kaflux group consumer
committing after every poll.

Faults, one per test, each with the books checked afterwards:

1. SIGKILL the leader of a partition (not the active controller), then restart it;
2. SIGKILL the active controller (the KRaft quorum leader, from ``DescribeMetadataQuorum``; every
   node is combined here, so killing the controller kills a broker with it), then restart it;
3. partition a node away from the clients (its proxy stalls every connection and refuses new ones)
   for a while, then heal: the node stays in the cluster and keeps its leaderships.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from kaflux import AdminClient, NewTopic
from kaflux.devbrokers.apache_kafka import KafkaBroker, KafkaCluster
from kaflux.devbrokers.brokers import BrokerUnavailableError, free_port

from support.cluster_load import ClusterLoad, Outcome, keys_summary
from support.fault_proxy import FaultProxy
from support.java_client import java_admin

# One worker runs them all (CI: pytest-xdist --dist loadgroup), so that one cluster serves the module.
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("kafka-cluster-faults")]

PARTITIONS = 3
WAIT_S = 120.0
STEADY_S = 3.0  # load before the fault and after the recovery
PARTITION_HOLD_S = 8.0


@dataclass
class Rig:
    cluster: KafkaCluster
    proxies: dict[int, FaultProxy]  # node id -> the proxy its clients go through

    @property
    def bootstrap(self) -> str:
        return ",".join(p.bootstrap_servers for p in self.proxies.values())


@pytest.fixture(scope="module")
def rig() -> Iterator[Rig]:
    ports = [free_port() for _ in range(3)]
    try:
        cluster = KafkaCluster(3, advertised_ports=ports)
    except BrokerUnavailableError as e:
        pytest.skip(f"Apache Kafka is not available: {e}")
    proxies = {
        node.node_id: FaultProxy((node.host, node.port), port=port, name=f"proxy-node-{node.node_id}").start()
        for node, port in zip(cluster.nodes, ports, strict=True)
    }
    try:
        cluster.start(timeout=180)
        yield Rig(cluster, proxies)
    finally:
        cluster.cleanup()
        for proxy in proxies.values():
            proxy.close()


def _create_topic(rig: Rig) -> str:
    topic = f"kx-faults-{uuid.uuid4().hex[:8]}"
    with AdminClient({"bootstrap.servers": rig.bootstrap}) as admin:
        admin.create_topics(
            [NewTopic(topic, PARTITIONS, replication_factor=3, config={"min.insync.replicas": "2"})],
            timeout=WAIT_S,
        )
    _wait_full_isr(rig, topic, time.monotonic() + WAIT_S)
    return topic


def _leaders_and_isr(rig: Rig, topic: str) -> dict[int, tuple[int, list[int]]]:
    with AdminClient({"bootstrap.servers": rig.bootstrap}) as admin:
        (description,) = admin.describe_topics([topic], timeout=30).values()
    return {p.partition: (p.leader, sorted(p.isr)) for p in description.partitions}


def _wait_full_isr(rig: Rig, topic: str, deadline: float) -> float:
    """Wait until every partition has all three replicas in sync; returns when that was seen."""
    last: object = None
    while True:
        try:
            last = _leaders_and_isr(rig, topic)
            if all(isr == [1, 2, 3] for _, isr in last.values()):
                return time.monotonic()
        except Exception as e:
            last = e
        assert time.monotonic() < deadline, f"the ISR did not become [1, 2, 3]: {last}"
        time.sleep(0.5)


def _active_controller(rig: Rig) -> int:
    """The KRaft quorum leader. (Metadata's controller id is no use here: in KRaft a broker answers
    with a random live broker, since clients never talk to the controllers.)"""
    (answer,) = java_admin(rig.bootstrap, [{"op": "quorum"}])
    return int(answer["leader"])


def _restart(node: KafkaBroker) -> None:
    node.restart(timeout=180)


def _report(name: str, figures: dict[str, object], outcome: Outcome) -> None:
    line = ", ".join(f"{k} {v:.2f} s" if isinstance(v, float) else f"{k} {v}" for k, v in figures.items())
    print(f"\n[faults] {name}: {line}; {outcome.summary()}")


def _check(outcome: Outcome) -> None:
    assert outcome.lost == [], f"acknowledged but never read: {keys_summary(outcome.lost)}"
    assert outcome.duplicated_in_log == {}, f"stored twice: {keys_summary(outcome.duplicated_in_log)}"
    assert outcome.duplicated_reads == {}, f"read twice: {keys_summary(outcome.duplicated_reads)}"
    assert outcome.failed == 0, (
        "a send failed although the cluster always came back within delivery.timeout.ms"
    )


Inject = Callable[[str], tuple[Callable[[], None], dict[str, object], float | None]]


def _run(rig: Rig, name: str, inject: Inject) -> None:
    """Load, fault, repair, check. ``inject(topic)`` makes the fault and returns the repair, figures
    of its own, and the moment recovery counts from (None: the fault)."""
    topic = _create_topic(rig)
    load = ClusterLoad(rig.bootstrap, topic, PARTITIONS, f"kx-faults-{uuid.uuid4().hex[:8]}").start()
    try:
        start = time.monotonic()
        load.wait_flowing(start)
        time.sleep(STEADY_S)
        fault_at = time.monotonic()
        repair, figures, since = inject(topic)
        since = fault_at if since is None else since
        load.wait_flowing(since)
        repair_at = time.monotonic()
        repair()
        figures["ISR full again after restart/heal"] = (
            _wait_full_isr(rig, topic, time.monotonic() + WAIT_S) - repair_at
        )
        load.wait_flowing(time.monotonic())
        time.sleep(STEADY_S)
        end = time.monotonic()
        figures["producer recovered after"], figures["consumer recovered after"] = load.recovered_after(
            since, end
        )
        gap, gap_partition, gap_began = load.max_ack_gap(start, end)
        figures["repair began after the fault"] = repair_at - fault_at
        figures["longest ack gap"] = (
            f"{gap:.2f} s on partition {gap_partition}, from {gap_began - fault_at:.2f} s after the fault"
        )
    finally:
        outcome = load.finish()
    _report(name, figures, outcome)
    _check(outcome)


def test_sigkill_partition_leader_then_restart_loses_and_duplicates_nothing(rig: Rig):
    def inject(topic: str) -> tuple[Callable[[], None], dict[str, object], float | None]:
        controller = _active_controller(rig)
        leaders = {leader for leader, _ in _leaders_and_isr(rig, topic).values()}
        victim = min(leaders - {controller}, default=None)
        if victim is None:  # every partition led by the controller: kill a leader all the same
            victim = min(leaders)
        node = rig.cluster.node(victim)
        node.kill()
        return (lambda: _restart(node)), {"killed node": victim, "controller": controller}, None

    _run(rig, "SIGKILL a partition leader", inject)


def test_sigkill_active_controller_then_restart_loses_and_duplicates_nothing(rig: Rig):
    def inject(topic: str) -> tuple[Callable[[], None], dict[str, object], float | None]:
        controller = _active_controller(rig)
        node = rig.cluster.node(controller)
        # Combined mode: this kills the KRaft leader *and* one of the three brokers.
        node.kill()
        killed_at = time.monotonic()
        deadline = killed_at + WAIT_S
        while True:
            try:
                new_controller = _active_controller(rig)
                if new_controller != controller:
                    break
            except AssertionError:
                pass
            assert time.monotonic() < deadline, "no new KRaft leader was elected"
            time.sleep(0.2)
        figures: dict[str, object] = {
            "killed controller": controller,
            "new controller": new_controller,
            "new controller seen after": time.monotonic() - killed_at,
        }
        return (lambda: _restart(node)), figures, None

    _run(rig, "SIGKILL the active controller", inject)


def test_node_partitioned_from_clients_then_healed_loses_and_duplicates_nothing(rig: Rig):
    def inject(topic: str) -> tuple[Callable[[], None], dict[str, object], float | None]:
        leaders = {leader for leader, _ in _leaders_and_isr(rig, topic).values()}
        victim = min(leaders)
        proxy = rig.proxies[victim]
        proxy.stall(upstream=True, downstream=True)
        proxy.refuse_connections("unlisten")
        time.sleep(PARTITION_HOLD_S)
        healed_at = time.monotonic()
        proxy.reset()
        figures: dict[str, object] = {"partitioned node": victim, "partitioned for": PARTITION_HOLD_S}
        return (lambda: None), figures, healed_at  # recovery counts from the heal

    _run(rig, "partition a node from the clients", inject)
