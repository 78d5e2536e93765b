"""kaflux: a Kafka client for Python on the event-driven, two-thread consumer design. [app]

Public API::

    from kaflux import Consumer, Producer, AdminClient, TopicPartition
"""

from kaflux.admin import AdminClient, NewTopic
from kaflux.consumer.consumer import Consumer
from kaflux.consumer.consumer_record import ConsumerRecord, ConsumerRecords
from kaflux.consumer.membership.group import GroupMetadata, GroupState
from kaflux.consumer.rebalance_listener import ConsumerRebalanceListener
from kaflux.consumer.share.acknowledgements import AcknowledgeType
from kaflux.consumer.share.consumer import ShareConsumer
from kaflux.errors import KafkaError
from kaflux.producer.producer import Producer
from kaflux.structs import (
    Node,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    PartitionInfo,
    RecordMetadata,
    TopicPartition,
)

__version__ = "0.1.0"

__all__ = [
    "AcknowledgeType",
    "AdminClient",
    "Consumer",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "ConsumerRecords",
    "GroupMetadata",
    "GroupState",
    "KafkaError",
    "NewTopic",
    "Node",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "PartitionInfo",
    "Producer",
    "RecordMetadata",
    "ShareConsumer",
    "TopicPartition",
    "__version__",
]
