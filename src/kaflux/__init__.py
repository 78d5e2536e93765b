"""kaflux: a Kafka client for Python on the event-driven, two-thread consumer design. [app]

Public API::

    from kaflux import Consumer, Producer, AdminClient, TopicPartition

``import kaflux`` alone is cheap: each name below is imported on first use (PEP 562), so a
command such as ``kaflux --version`` does not pay for the generated wire protocol.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kaflux.admin import AdminClient, NewTopic
    from kaflux.consumer.close_options import CloseOptions, GroupMembershipOperation
    from kaflux.consumer.consumer import Consumer
    from kaflux.consumer.consumer_record import ConsumerRecord, ConsumerRecords
    from kaflux.consumer.membership.group import GroupMetadata, GroupState
    from kaflux.consumer.rebalance_listener import ConsumerRebalanceListener
    from kaflux.consumer.share.acknowledgements import AcknowledgeType
    from kaflux.consumer.share.consumer import ShareConsumer
    from kaflux.errors import KafkaError
    from kaflux.interceptors import (
        ConsumerInterceptor,
        ProducerInterceptor,
        ProducerRecord,
        ShareConsumerInterceptor,
    )
    from kaflux.producer.producer import Producer
    from kaflux.structs import (
        Node,
        OffsetAndMetadata,
        OffsetAndTimestamp,
        PartitionInfo,
        RecordMetadata,
        SubscriptionPattern,
        TopicPartition,
    )

__version__ = "0.1.0"

#: public name -> the module that defines it
_LAZY: dict[str, str] = {
    "AdminClient": "kaflux.admin",
    "NewTopic": "kaflux.admin",
    "CloseOptions": "kaflux.consumer.close_options",
    "GroupMembershipOperation": "kaflux.consumer.close_options",
    "Consumer": "kaflux.consumer.consumer",
    "ConsumerRecord": "kaflux.consumer.consumer_record",
    "ConsumerRecords": "kaflux.consumer.consumer_record",
    "GroupMetadata": "kaflux.consumer.membership.group",
    "GroupState": "kaflux.consumer.membership.group",
    "ConsumerRebalanceListener": "kaflux.consumer.rebalance_listener",
    "AcknowledgeType": "kaflux.consumer.share.acknowledgements",
    "ShareConsumer": "kaflux.consumer.share.consumer",
    "KafkaError": "kaflux.errors",
    "ConsumerInterceptor": "kaflux.interceptors",
    "ProducerInterceptor": "kaflux.interceptors",
    "ProducerRecord": "kaflux.interceptors",
    "ShareConsumerInterceptor": "kaflux.interceptors",
    "Producer": "kaflux.producer.producer",
    "Node": "kaflux.structs",
    "OffsetAndMetadata": "kaflux.structs",
    "OffsetAndTimestamp": "kaflux.structs",
    "PartitionInfo": "kaflux.structs",
    "RecordMetadata": "kaflux.structs",
    "SubscriptionPattern": "kaflux.structs",
    "TopicPartition": "kaflux.structs",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kaflux' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "AcknowledgeType",
    "AdminClient",
    "CloseOptions",
    "Consumer",
    "ConsumerInterceptor",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "ConsumerRecords",
    "GroupMembershipOperation",
    "GroupMetadata",
    "GroupState",
    "KafkaError",
    "NewTopic",
    "Node",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "PartitionInfo",
    "Producer",
    "ProducerInterceptor",
    "ProducerRecord",
    "RecordMetadata",
    "ShareConsumer",
    "ShareConsumerInterceptor",
    "SubscriptionPattern",
    "TopicPartition",
    "__version__",
]
