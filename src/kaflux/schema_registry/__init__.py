"""Confluent Schema Registry support: the registry clients and the subject strategies. [app]

:class:`SchemaRegistryClient` (blocking) and :class:`AsyncSchemaRegistryClient` (asyncio) run
one sans-I/O core; a ``mock://scope`` URL gives either the in-memory registry of
:mod:`kaflux.schema_registry.mock`. The serializers, sync and async, live in
:mod:`kaflux.schema_registry.avro`, :mod:`.protobuf` and :mod:`.json_schema`; install the
``kaflux[schema-registry]`` extra for them and the clients.
"""

from kaflux.schema_registry.aio import AsyncSchemaRegistryClient
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
    "AsyncSchemaRegistryClient",
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
