"""Assignor lookup by configured name and the choice of rebalance protocol."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from kaflux.consumer.assignors import (
    Assignment,
    CooperativeStickyAssignor,
    GroupMember,
    PartitionAssignor,
    PartitionRacks,
    RangeAssignor,
    RebalanceProtocol,
    RoundRobinAssignor,
    StickyAssignor,
    assignor_for_name,
    rebalance_protocol_for,
)
from kaflux.errors import ConfigError


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("range", RangeAssignor),
        ("roundrobin", RoundRobinAssignor),
        ("sticky", StickyAssignor),
        ("cooperative-sticky", CooperativeStickyAssignor),
        ("org.apache.kafka.clients.consumer.RangeAssignor", RangeAssignor),
        ("org.apache.kafka.clients.consumer.RoundRobinAssignor", RoundRobinAssignor),
        ("org.apache.kafka.clients.consumer.StickyAssignor", StickyAssignor),
        ("org.apache.kafka.clients.consumer.CooperativeStickyAssignor", CooperativeStickyAssignor),
        ("  range ", RangeAssignor),
    ],
)
def test_assignor_for_name(name: str, cls: type[PartitionAssignor]) -> None:
    assignor = assignor_for_name(name)
    assert type(assignor) is cls
    assert assignor.name == cls.name


def test_each_lookup_returns_a_new_instance() -> None:
    # The eager sticky assignor keeps per-consumer state.
    assert assignor_for_name("sticky") is not assignor_for_name("sticky")


@pytest.mark.parametrize(
    "name",
    [
        "Range",
        "round-robin",
        "org.apache.kafka.clients.consumer.internals.AbstractStickyAssignor",
        "org.apache.kafka.clients.consumer.ConsumerPartitionAssignor",
        "",
        "uniform",
    ],
)
def test_unknown_names_are_config_errors(name: str) -> None:
    with pytest.raises(ConfigError) as info:
        assignor_for_name(name)
    assert info.value.key == "partition.assignment.strategy"
    message = str(info.value)
    assert repr(name) in message
    for known in (
        "range",
        "roundrobin",
        "sticky",
        "cooperative-sticky",
        "org.apache.kafka.clients.consumer.StickyAssignor",
    ):
        assert known in message


def test_wire_names_match_java_and_librdkafka() -> None:
    assert [
        a.name for a in (RangeAssignor(), RoundRobinAssignor(), StickyAssignor(), CooperativeStickyAssignor())
    ] == [
        "range",
        "roundrobin",
        "sticky",
        "cooperative-sticky",
    ]


def test_rebalance_protocol_is_the_highest_supported_by_all() -> None:
    assert rebalance_protocol_for([CooperativeStickyAssignor()]) is RebalanceProtocol.COOPERATIVE
    # Java's default [range, cooperative-sticky] stays eager until range is removed.
    assert rebalance_protocol_for([RangeAssignor(), CooperativeStickyAssignor()]) is RebalanceProtocol.EAGER
    assert rebalance_protocol_for([CooperativeStickyAssignor(), StickyAssignor()]) is RebalanceProtocol.EAGER
    assert rebalance_protocol_for([RoundRobinAssignor()]) is RebalanceProtocol.EAGER
    assert rebalance_protocol_for(iter([CooperativeStickyAssignor(), CooperativeStickyAssignor()])) is (
        RebalanceProtocol.COOPERATIVE
    )
    assert RebalanceProtocol.COOPERATIVE > RebalanceProtocol.EAGER
    assert (RebalanceProtocol.EAGER.value, RebalanceProtocol.COOPERATIVE.value) == (0, 1)


class _CooperativeOnly(PartitionAssignor):
    name = "coop-only"
    supported_protocols = (RebalanceProtocol.COOPERATIVE,)

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        members: Mapping[str, GroupMember],
        partition_racks: PartitionRacks | None = None,
    ) -> dict[str, Assignment]:
        return {m: Assignment(()) for m in members}


def test_no_common_protocol_or_no_assignors_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="no common rebalance protocol") as info:
        rebalance_protocol_for([RangeAssignor(), _CooperativeOnly()])
    assert "'range'" in str(info.value) and "'coop-only'" in str(info.value)
    with pytest.raises(ConfigError, match="at least one"):
        rebalance_protocol_for([])


def test_custom_assignor_defaults() -> None:
    custom = _CooperativeOnly()
    assert custom.subscription_user_data(["t"], (), 3) is None
    custom.on_assignment(Assignment(()), 3)  # no-op by default
    assert repr(custom) == "_CooperativeOnly(name='coop-only')"
    assert PartitionAssignor.supported_protocols == (RebalanceProtocol.EAGER,)
