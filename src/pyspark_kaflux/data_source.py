"""The ``kaflux`` data source: Spark's Kafka source and sink, in Python, on kaflux. [app]

Spark finds it without any ``register()`` call, in classic and Spark Connect sessions alike: see
:mod:`pyspark_kaflux`.

Source options (Spark's names; keys are case-insensitive; checked at ``load()``, an unknown one
refused with the nearest name: ``bootstrap.servers`` -> ``kafka.bootstrap.servers``):

- ``kafka.bootstrap.servers`` (required) and any other ``kafka.<key>`` of ``kaflux.Consumer``;
  refused: ``kafka.auto.offset.reset``, ``kafka.key.deserializer``, ``kafka.value.deserializer``,
  ``kafka.enable.auto.commit``, ``kafka.interceptor.classes``; ``kafka.group.id`` is ignored
  with a warning (no group is ever joined).
- exactly one of ``subscribe`` (comma list), ``subscribePattern`` (a Python regex matched
  against whole topic names) or ``assign`` (``{"topic": [0, 1]}``).
- ``startingOffsets`` (``earliest``, ``latest``, ``{"topic": {"0": 23, "1": -2}}``; -2 earliest,
  -1 latest), ``startingTimestamp``, ``startingOffsetsByTimestamp``,
  ``startingOffsetsByTimestampStrategy`` (``error``/``latest``); batch only: ``endingOffsets``,
  ``endingTimestamp``, ``endingOffsetsByTimestamp``.
- ``failOnDataLoss`` (true), ``includeHeaders`` (false), ``minPartitions``,
  ``maxRecordsPerPartition``, ``kafkaConsumer.pollTimeoutMs`` (120000),
  ``fetchOffset.numRetries`` (3), ``fetchOffset.retryIntervalMs`` (10); streaming only:
  ``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger``, ``maxTriggerDelay`` (15m).
- ``groupIdPrefix`` is accepted and unused.
- typed columns (see :mod:`pyspark_kaflux.schema_columns`): ``value.format`` / ``key.format``
  (``binary``, the default, ``avro``, ``json`` or ``protobuf``), ``schema.registry.url`` and
  ``schema.registry.<key>`` (the registry client's keys, e.g.
  ``schema.registry.basic.auth.user.info``),
  ``value.subject`` / ``value.schema.id`` (and ``key.*``) to pin the reader schema, and
  ``decode.mode`` (``FAILFAST``, the default, or ``PERMISSIVE``: a null column and the bytes in
  ``value_raw``).

Sink options: ``kafka.bootstrap.servers`` (required), ``kafka.<key>`` of ``kaflux.Producer``
(refused: ``kafka.key.serializer``, ``kafka.value.serializer``), ``topic``; ``value.format=avro``
(and ``key.format``) with ``schema.registry.*`` and optionally ``value.subject`` /
``value.schema.id`` serialise a struct column (see :mod:`pyspark_kaflux.schema_sink`). Batch writes need
``mode("append")``: Spark refuses the default ErrorIfExists mode for Python data sources, and
Kafka cannot be overwritten.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import BinaryType, StructField, StructType

from pyspark_kaflux.options import (
    KafluxOptionError,
    SinkOptions,
    SourceOptions,
    parse_include_headers,
    parse_sink_options,
    parse_source_options,
)
from pyspark_kaflux.schema import check_sink_schema, kafka_schema

if TYPE_CHECKING:  # each imported by the method that makes it: a process loads only what it runs
    from pyspark_kaflux.reader import KafluxBatchReader
    from pyspark_kaflux.stream_reader import KafluxStreamReader
    from pyspark_kaflux.writer import KafluxBatchWriter, KafluxStreamWriter

__all__ = ["KafluxDataSource"]


class KafluxDataSource(DataSource):
    """``format("kaflux")``: reads and writes Kafka topics with the options and schema of Spark's
    built-in ``format("kafka")``, through the kaflux client instead of the JVM connector.

    Read: ``spark.read`` / ``spark.readStream`` with ``kafka.bootstrap.servers`` and one of
    ``subscribe``, ``subscribePattern`` or ``assign``. Write: ``df.write.mode("append")`` /
    ``df.writeStream`` with ``kafka.bootstrap.servers`` and a ``topic`` column or option.
    """

    @classmethod
    def name(cls) -> str:
        return "kaflux"

    def schema(self) -> StructType:
        # Spark asks for the schema at load(), batch or stream, and not for writes: every read
        # option is checked here, so a bad one fails load() instead of a running query.
        # Whether the query is a batch or a stream is not known yet; reader()/streamReader()
        # check what depends on it.
        try:
            options = parse_source_options(self.options, streaming=None)
        except KafluxOptionError as e:
            # Spark shows the traceback above the message: keep it to this one frame.
            raise KafluxOptionError(str(e)) from None
        base = kafka_schema(parse_include_headers(self.options))
        if options.formats is None:
            return base
        from pyspark_kaflux.schema_columns import decoded_schema, resolve_formats

        # typed key/value columns: the reader schema is fixed now, when the query starts
        return decoded_schema(base, resolve_formats(options, fresh=True))

    def _check_read_schema(self, schema: StructType, options: SourceOptions) -> SourceOptions:
        base = expected = kafka_schema(parse_include_headers(self.options))
        if options.formats is not None:
            from pyspark_kaflux.schema_columns import decoded_schema, resolve_formats

            resolved = resolve_formats(options)
            expected = decoded_schema(base, resolved)
            if schema != expected:  # this process resolved an older query's schemas: ask again
                resolved = resolve_formats(options, fresh=True)
                expected = decoded_schema(base, resolved)
            options = resolved
        if schema != expected:
            raise KafluxOptionError(
                "The kaflux source has a fixed schema and cannot be set with a custom one "
                f"(expected {expected.simpleString()}, got {schema.simpleString()})"
            )
        return options

    def reader(self, schema: StructType) -> KafluxBatchReader:
        from pyspark_kaflux.reader import KafluxBatchReader

        options = self._check_read_schema(schema, parse_source_options(self.options, streaming=False))
        return KafluxBatchReader(options)

    def streamReader(self, schema: StructType) -> KafluxStreamReader:
        from pyspark_kaflux.stream_reader import KafluxStreamReader

        options = self._check_read_schema(schema, parse_source_options(self.options, streaming=True))
        return KafluxStreamReader(options)

    def writer(self, schema: StructType, overwrite: bool) -> KafluxBatchWriter:
        from pyspark_kaflux.writer import KafluxBatchWriter

        if overwrite:
            raise KafluxOptionError(
                "Save mode Overwrite is not allowed for kaflux: Kafka topics cannot be overwritten. "
                "Use mode('append')."
            )
        options = parse_sink_options(self.options)
        check_sink_schema(_binary_for_typed(schema, options), options.topic)
        return KafluxBatchWriter(options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> KafluxStreamWriter:
        from pyspark_kaflux.writer import KafluxStreamWriter

        options = parse_sink_options(self.options)
        check_sink_schema(_binary_for_typed(schema, options), options.topic)
        return KafluxStreamWriter(options)


def _binary_for_typed(schema: StructType, options: SinkOptions) -> StructType:
    """The sink's schema as the binary checks see it: a key/value column the sink serialises
    (``value.format=avro``) counts as binary."""
    fmt = options.formats
    if fmt is None:
        return schema
    typed = {c for c, kind in (("key", fmt.key_format), ("value", fmt.value_format)) if kind != "binary"}
    return StructType([StructField(f.name, BinaryType()) if f.name in typed else f for f in schema.fields])
