"""Client-side partition assignors of the classic consumer group protocol. [pure]

The leader of a classic group computes everyone's assignment with a :class:`PartitionAssignor`.
Built in, interoperating with Java and librdkafka members under the same names:

- :class:`RangeAssignor` ("range") and :class:`RoundRobinAssignor` ("roundrobin"): Java's results
  exactly, eager only. Range is rack-aware (KIP-881), as Java's.
- :class:`StickyAssignor` ("sticky"): balanced and sticky, eager, rack-aware (KIP-881).
- :class:`CooperativeStickyAssignor` ("cooperative-sticky"): the same, with the cooperative
  two-phase hand-over (KIP-429).

Rack-aware assignors get :func:`partition_racks` (the racks of each partition's replicas, from
the leader's metadata) and each member's ``client.rack`` from its subscription.

:mod:`~kaflux.consumer.assignors.consumer_protocol` encodes the JoinGroup/SyncGroup metadata.
"""

from kaflux.consumer.assignors.base import (
    GroupMember,
    PartitionAssignor,
    PartitionRacks,
    RebalanceProtocol,
    partition_racks,
)
from kaflux.consumer.assignors.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kaflux.consumer.assignors.range import RangeAssignor
from kaflux.consumer.assignors.registry import assignor_for_name, rebalance_protocol_for
from kaflux.consumer.assignors.roundrobin import RoundRobinAssignor
from kaflux.consumer.assignors.sticky import CooperativeStickyAssignor, StickyAssignor

__all__ = [
    "Assignment",
    "CooperativeStickyAssignor",
    "GroupMember",
    "PartitionAssignor",
    "PartitionRacks",
    "RangeAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "StickyAssignor",
    "Subscription",
    "assignor_for_name",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
    "partition_racks",
    "rebalance_protocol_for",
]
