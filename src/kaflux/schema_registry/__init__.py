"""Confluent Schema Registry support: the registry client and the subject strategies. [app]

The serializers live in :mod:`kaflux.schema_registry.avro`, :mod:`.protobuf` and
:mod:`.json_schema`; install the ``kaflux[schema-registry]`` extra for them and the client.
"""

from kaflux.schema_registry.client import (
    RegisteredSchema,
    Schema,
    SchemaReference,
    SchemaRegistryClient,
    SchemaRegistryError,
)
from kaflux.schema_registry.subjects import (
    SubjectNameStrategy,
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
    topic_subject_name_strategy,
)

__all__ = [
    "RegisteredSchema",
    "Schema",
    "SchemaReference",
    "SchemaRegistryClient",
    "SchemaRegistryError",
    "SubjectNameStrategy",
    "record_subject_name_strategy",
    "topic_record_subject_name_strategy",
    "topic_subject_name_strategy",
]
