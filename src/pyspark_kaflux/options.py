"""Parse and validate the options of the kaflux source and sink. [pure]

The options are Spark's Kafka options (see ``KafkaSourceProvider`` in Apache Spark), so a job
moves from ``format("kafka")`` to ``format("kaflux")`` by changing only the format name. Every
error is a :class:`KafluxOptionError` (a ``ValueError``) that names the option at fault.

Spark hands a Python data source its options with lower-cased keys and string values; the
functions here accept any mapping and compare keys case-insensitively.

``kafka.*`` options lose their prefix and go to the kaflux client, which must know every key
(an unknown key is an error, with the nearest known key suggested). As in Spark, a few keys
are refused because the source manages them itself; ``kafka.group.id`` is accepted with a
warning and not used (kaflux reads by assign + seek and never joins a group).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kaflux.config import ConsumerConfig, ProducerConfig
from kaflux.errors import ConfigError
from kaflux.structs import TopicPartition

__all__ = [
    "EARLIEST",
    "LATEST",
    "SINK_OPTIONS",
    "SOURCE_OPTIONS",
    "Assign",
    "EarliestOffsets",
    "FormatOptions",
    "GlobalTimestamp",
    "KafluxOptionError",
    "LatestOffsets",
    "OffsetSpec",
    "OptionSpec",
    "SinkOptions",
    "SourceOptions",
    "SpecificOffsets",
    "SpecificTimestamps",
    "Strategy",
    "Subscribe",
    "SubscribePattern",
    "check_source_option_names",
    "driver_consumer_config",
    "executor_consumer_config",
    "parse_duration_ms",
    "parse_format_options",
    "parse_include_headers",
    "parse_sink_options",
    "parse_source_options",
]

log = logging.getLogger("pyspark_kaflux")

#: In offset JSON, -2 means the earliest offset of a partition and -1 the latest (Spark's values).
EARLIEST = -2
LATEST = -1

_OFFSETS_EXAMPLE = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
_TIMESTAMPS_EXAMPLE = '{"topicA":{"0":1700000000000,"1":1700000000000}}'
_ASSIGN_EXAMPLE = '{"topicA":[0,1],"topicB":[2,4]}'
_STRATEGY_KEYS = ("assign", "subscribe", "subscribePattern")

# Kafka client keys the source refuses, with Spark's reasons.
_FORBIDDEN_SOURCE_KEYS = {
    "auto.offset.reset": (
        "Kafka option 'auto.offset.reset' is not supported. Instead set the source option "
        "'startingOffsets' to 'earliest' or 'latest' to specify where to start. The source manages "
        "which offsets are consumed itself, rather than relying on the consumer to do it; "
        "'startingOffsets' only applies when a new streaming query is started, and resuming always "
        "picks up from where the query left off."
    ),
    "key.deserializer": (
        "Kafka option 'key.deserializer' is not supported as keys are always returned as bytes. "
        "Use DataFrame operations to explicitly deserialize the keys."
    ),
    "value.deserializer": (
        "Kafka option 'value.deserializer' is not supported as values are always returned as bytes. "
        "Use DataFrame operations to explicitly deserialize the values."
    ),
    "enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported",
    "interceptor.classes": "Kafka option 'interceptor.classes' is not supported",
}
_FORBIDDEN_SINK_KEYS = {
    "key.serializer": "Kafka option 'key.serializer' is not supported as keys are written as bytes.",
    "value.serializer": "Kafka option 'value.serializer' is not supported as values are written as bytes.",
}

CUSTOM_GROUP_ID_WARNING = (
    "Kafka option 'kafka.group.id' has been set on this query; kaflux ignores it: its consumers read "
    "by assign + seek, never join a group and never commit offsets."
)


class KafluxOptionError(ValueError):
    """An option of the kaflux source or sink is missing, malformed or not allowed."""


# -- subscription strategies ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Subscribe:
    """``subscribe``: a fixed list of topics (their partitions are looked up each trigger)."""

    topics: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SubscribePattern:
    """``subscribePattern``: every topic whose whole name matches a Python regular expression."""

    pattern: str

    def matches(self, topic: str) -> bool:
        return re.fullmatch(self.pattern, topic) is not None


@dataclass(frozen=True, slots=True)
class Assign:
    """``assign``: exactly these partitions."""

    partitions: tuple[TopicPartition, ...]


Strategy = Subscribe | SubscribePattern | Assign

# -- where to start or end ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EarliestOffsets:
    """``"earliest"``: the first offset of every partition."""


@dataclass(frozen=True, slots=True)
class LatestOffsets:
    """``"latest"``: the end of every partition."""


@dataclass(frozen=True, slots=True)
class SpecificOffsets:
    """Offset JSON: an offset per partition, where -2 is earliest and -1 latest."""

    offsets: dict[TopicPartition, int]


@dataclass(frozen=True, slots=True)
class GlobalTimestamp:
    """``startingTimestamp`` / ``endingTimestamp``: one timestamp (ms) for every partition."""

    timestamp: int
    strategy: str = "error"


@dataclass(frozen=True, slots=True)
class SpecificTimestamps:
    """``startingOffsetsByTimestamp`` / ``endingOffsetsByTimestamp``: a timestamp (ms) per partition."""

    timestamps: dict[TopicPartition, int]
    strategy: str = "error"


OffsetSpec = EarliestOffsets | LatestOffsets | SpecificOffsets | GlobalTimestamp | SpecificTimestamps


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """Everything the source needs, validated; picklable (plain data only)."""

    #: ``kafka.*`` options without the prefix (``kafka.group.id`` removed).
    kafka_config: dict[str, str]
    strategy: Strategy
    starting: OffsetSpec
    #: Batch queries only (None for streaming).
    ending: OffsetSpec | None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    poll_timeout_ms: int = 120_000
    fetch_offset_num_retries: int = 3
    fetch_offset_retry_interval_ms: int = 10
    #: Options the source does not know (Spark ignores them too); kept for diagnostics.
    ignored: tuple[str, ...] = field(default=())
    #: ``key.format`` / ``value.format`` and the registry (None: both binary).
    formats: FormatOptions | None = None
    #: The typed columns' reader schemas, fixed on the driver when the query starts
    #: (``schema_columns.ResolvedFormat`` values; see ``schema_columns.resolve_formats``).
    resolved_formats: tuple[Any, ...] = ()


#: ``key.format`` / ``value.format`` values
COLUMN_FORMATS = ("binary", "avro", "protobuf", "json")


@dataclass(frozen=True, slots=True)
class FormatOptions:
    """``key.format``, ``value.format``, ``schema.registry.*``, ``key/value.subject``,
    ``key/value.schema.id`` and ``decode.mode``, validated (plain data)."""

    key_format: str = "binary"
    value_format: str = "binary"
    #: the SchemaRegistryClient configuration (``schema.registry.url`` is its ``url``)
    registry: tuple[tuple[str, str], ...] = ()
    key_subject: str | None = None
    value_subject: str | None = None
    key_schema_id: int | None = None
    value_schema_id: int | None = None
    #: decode.mode=PERMISSIVE: an undecodable record gets a null column and its bytes in <column>_raw
    permissive: bool = False


def parse_format_options(options: Mapping[str, str]) -> FormatOptions | None:
    """The typed-column options (None when both columns stay binary).

    Raises:
        KafluxOptionError: naming the option at fault.
    """
    opts = _lower(options)
    formats = {}
    for column in ("key", "value"):
        kind = opts.get(f"{column}.format", "binary").strip().lower()
        if kind not in COLUMN_FORMATS:
            raise KafluxOptionError(
                f"Option '{column}.format' must be one of {', '.join(COLUMN_FORMATS)}, got {kind!r}"
            )
        formats[column] = kind
    registry = tuple(
        sorted(
            ("url" if k == "schema.registry.url" else k[len("schema.registry.") :], v)
            for k, v in opts.items()
            if k.startswith("schema.registry.")
        )
    )
    mode = opts.get("decode.mode", "FAILFAST").strip().upper()
    if mode not in ("FAILFAST", "PERMISSIVE"):
        raise KafluxOptionError(f"Option 'decode.mode' must be FAILFAST or PERMISSIVE, got {mode!r}")
    if formats["key"] == formats["value"] == "binary":
        for key in opts:
            if key in ("key.subject", "value.subject", "key.schema.id", "value.schema.id"):
                raise KafluxOptionError(f"Option '{key}' needs '{key.split('.')[0]}.format' (e.g. avro)")
        return None
    return FormatOptions(
        key_format=formats["key"],
        value_format=formats["value"],
        registry=registry,
        key_subject=opts.get("key.subject"),
        value_subject=opts.get("value.subject"),
        key_schema_id=_int(opts, "key.schema.id", minimum=0),
        value_schema_id=_int(opts, "value.schema.id", minimum=0),
        permissive=mode == "PERMISSIVE",
    )


@dataclass(frozen=True, slots=True)
class SinkOptions:
    """Everything the sink needs, validated."""

    kafka_config: dict[str, str]
    #: The ``topic`` option: when set it wins over a ``topic`` column.
    topic: str | None = None
    #: Whether the producer is idempotent (``kafka.enable.idempotence``, on by default as in
    #: Java; Java's rules turn a default-on idempotence off for a conflicting ``kafka.acks``...).
    idempotent: bool = True
    #: ``key.format`` / ``value.format`` (avro: a struct column serialised with the registry)
    formats: FormatOptions | None = None


# -- small parsers -------------------------------------------------------------------------------------


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def _bool(options: dict[str, str], name: str, default: bool) -> bool:
    raw = options.get(name.lower())
    if raw is None:
        return default
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise KafluxOptionError(f"Option '{name}' must be 'true' or 'false', got {raw!r}")
    return value == "true"


def _int(options: dict[str, str], name: str, *, minimum: int | None = None) -> int | None:
    raw = options.get(name.lower())
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise KafluxOptionError(f"Option '{name}' must be an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        what = "positive" if minimum == 1 else f"at least {minimum}"
        raise KafluxOptionError(f"Option '{name}' must be {what}, got {value}")
    return value


def _int_or(options: dict[str, str], name: str, default: int, *, minimum: int | None = None) -> int:
    value = _int(options, name, minimum=minimum)
    return default if value is None else value


_DURATION_UNITS_MS = {
    "us": 0.001,
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}


def parse_duration_ms(name: str, raw: str) -> int:
    """A duration like Spark's ``timeStringAsMs``: ``"15m"``, ``"10s"``, ``"250ms"``, ``"2h"``, ``"1d"``;
    a bare number is milliseconds."""
    match = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", raw)
    unit = match.group(2).lower() if match else ""
    if match is None or (unit and unit not in _DURATION_UNITS_MS):
        raise KafluxOptionError(
            f"Option '{name}' must be a duration such as '15m', '30s' or '500ms', got {raw!r}"
        )
    return int(int(match.group(1)) * _DURATION_UNITS_MS[unit or "ms"])


def _json_object(name: str, raw: str, example: str) -> dict[str, Any]:
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict):
        raise KafluxOptionError(f"Option '{name}' expects JSON such as {example}, got {raw!r}")
    return parsed


def _partition_numbers(
    name: str, raw: str, topic: str, values: dict[str, Any], example: str
) -> dict[int, int]:
    if not isinstance(values, dict):
        raise KafluxOptionError(
            f"Option '{name}' expects JSON such as {example}; topic {topic!r} maps to {values!r}, "
            "not to an object of partition -> number"
        )
    out: dict[int, int] = {}
    for part, number in values.items():
        if not re.fullmatch(r"\d+", str(part)) or isinstance(number, bool) or not isinstance(number, int):
            raise KafluxOptionError(
                f"Option '{name}' expects JSON such as {example}; "
                f"got {topic!r}: {{{part!r}: {number!r}}} in {raw!r}"
            )
        out[int(part)] = number
    return out


def _partition_values(
    name: str, raw: str, example: str, *, unit: str, minimum: int, problem: str
) -> dict[TopicPartition, int]:
    """JSON ``{"topic": {"partition": number}}`` as a number per partition; a number below ``minimum``
    is an error: "Option 'name': <unit> <number> for <topic>-<partition> <problem>"."""
    numbers: dict[TopicPartition, int] = {}
    for topic, values in _json_object(name, raw, example).items():
        for part, number in _partition_numbers(name, raw, topic, values, example).items():
            if number < minimum:
                raise KafluxOptionError(f"Option '{name}': {unit} {number} for {topic}-{part} {problem}")
            numbers[TopicPartition(topic, part)] = number
    return numbers


def parse_partition_offsets(name: str, raw: str) -> dict[TopicPartition, int]:
    """Offset JSON ``{"topic": {"0": 23, "1": -1}}`` (-2 earliest, -1 latest)."""
    return _partition_values(
        name,
        raw,
        _OFFSETS_EXAMPLE,
        unit="offset",
        minimum=EARLIEST,
        problem="is invalid; use an offset >= 0, -1 for latest or -2 for earliest",
    )


def parse_partition_timestamps(name: str, raw: str) -> dict[TopicPartition, int]:
    """Timestamp JSON ``{"topic": {"0": 1700000000000}}`` (epoch milliseconds)."""
    return _partition_values(
        name,
        raw,
        _TIMESTAMPS_EXAMPLE,
        unit="timestamp",
        minimum=0,
        problem="is negative; give epoch milliseconds",
    )


def parse_assign(raw: str) -> tuple[TopicPartition, ...]:
    """``assign`` JSON ``{"topicA": [0, 1]}``."""
    if not raw.strip().startswith("{"):
        raise KafluxOptionError(
            f"No topicpartitions to assign as specified value for option 'assign' is {raw!r}"
        )
    parsed = _json_object("assign", raw, _ASSIGN_EXAMPLE)
    partitions: list[TopicPartition] = []
    for topic, parts in parsed.items():
        if not isinstance(parts, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts
        ):
            raise KafluxOptionError(
                f"Option 'assign' expects JSON such as {_ASSIGN_EXAMPLE}; topic {topic!r} maps to {parts!r}"
            )
        partitions.extend(TopicPartition(topic, p) for p in parts)
    if not partitions:
        raise KafluxOptionError(
            f"No topicpartitions to assign as specified value for option 'assign' is {raw!r}"
        )
    return tuple(sorted(set(partitions)))


def _strategy(options: dict[str, str]) -> Strategy:
    given = [key for key in _STRATEGY_KEYS if key.lower() in options]
    if not given:
        raise KafluxOptionError(
            "One of the following options must be specified for the kaflux source: "
            f"{', '.join(_STRATEGY_KEYS)}."
        )
    if len(given) > 1:
        raise KafluxOptionError(
            "Only one of the following options can be specified for the kaflux source: "
            f"{', '.join(_STRATEGY_KEYS)} (got {', '.join(given)})."
        )
    key = given[0]
    raw = options[key.lower()]
    if key == "assign":
        return Assign(parse_assign(raw))
    if key == "subscribe":
        topics = tuple(dict.fromkeys(t.strip() for t in raw.split(",") if t.strip()))
        if not topics:
            raise KafluxOptionError(
                f"No topics to subscribe to as specified value for option 'subscribe' is {raw!r}"
            )
        return Subscribe(topics)
    pattern = raw.strip()
    if not pattern:
        raise KafluxOptionError(
            f"Pattern to subscribe is empty as specified value for option 'subscribePattern' is {raw!r}"
        )
    try:
        re.compile(pattern)
    except re.error as e:
        raise KafluxOptionError(
            f"Option 'subscribePattern' is not a valid (Python) regular expression: {pattern!r}: {e}"
        ) from None
    return SubscribePattern(pattern)


def _offset_spec(
    options: dict[str, str], timestamp_key: str, by_timestamp_key: str, offsets_key: str, default: OffsetSpec
) -> OffsetSpec:
    """Spark's precedence: a global timestamp, then per-partition timestamps, then offsets."""
    strategy_raw = options.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy_raw not in ("error", "latest"):
        raise KafluxOptionError(
            "Option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', "
            f"got {options['startingoffsetsbytimestampstrategy']!r}"
        )
    if timestamp_key.lower() in options:
        raw = options[timestamp_key.lower()].strip()
        if not re.fullmatch(r"\d+", raw):
            raise KafluxOptionError(
                f"Option '{timestamp_key}' expects a single timestamp in epoch milliseconds, got {raw!r}"
            )
        return GlobalTimestamp(int(raw), strategy_raw)
    if by_timestamp_key.lower() in options:
        return SpecificTimestamps(
            parse_partition_timestamps(by_timestamp_key, options[by_timestamp_key.lower()]), strategy_raw
        )
    raw_offsets = options.get(offsets_key.lower())
    if raw_offsets is None:
        return default
    word = raw_offsets.strip().lower()
    if word == "latest":
        return LatestOffsets()
    if word == "earliest":
        return EarliestOffsets()
    if not raw_offsets.strip().startswith("{"):
        raise KafluxOptionError(
            f"Option '{offsets_key}' must be 'earliest', 'latest' or JSON such as {_OFFSETS_EXAMPLE}, "
            f"got {raw_offsets!r}"
        )
    return SpecificOffsets(parse_partition_offsets(offsets_key, raw_offsets))


def _check_batch_limits(starting: OffsetSpec, ending: OffsetSpec) -> None:
    if isinstance(starting, LatestOffsets):
        raise KafluxOptionError("Option 'startingOffsets': starting offset can't be latest for batch queries")
    if isinstance(starting, SpecificOffsets):
        for tp, offset in sorted(starting.offsets.items()):
            if offset == LATEST:
                raise KafluxOptionError(
                    f"Option 'startingOffsets': startingOffsets for {tp} can't be latest (-1) "
                    "for batch queries"
                )
    if isinstance(ending, EarliestOffsets):
        raise KafluxOptionError("Option 'endingOffsets': ending offset can't be earliest for batch queries")
    if isinstance(ending, SpecificOffsets):
        for tp, offset in sorted(ending.offsets.items()):
            if offset == EARLIEST:
                raise KafluxOptionError(
                    f"Option 'endingOffsets': ending offset for {tp} can't be earliest (-2) for batch queries"
                )
    if isinstance(starting, SpecificOffsets) and isinstance(ending, SpecificOffsets):
        _check_ranges("Offsets", "offset", starting.offsets, ending.offsets)
    if isinstance(starting, SpecificTimestamps) and isinstance(ending, SpecificTimestamps):
        _check_ranges("OffsetsByTimestamp", "timestamp", starting.timestamps, ending.timestamps)


def _check_ranges(
    option: str, unit: str, starting: Mapping[TopicPartition, int], ending: Mapping[TopicPartition, int]
) -> None:
    """The options ``starting<option>`` and ``ending<option>`` name the same partitions, and no start
    lies after its end (negative offsets, latest and earliest, are not compared)."""
    first, last = f"starting{option}", f"ending{option}"
    if set(starting) != set(ending):
        raise KafluxOptionError(
            f"Options '{first}' and '{last}' must name the same topic partitions: "
            f"{_tps(starting)} vs {_tps(ending)}"
        )
    for tp, start in sorted(starting.items()):
        end = ending[tp]
        if start >= 0 and end >= 0 and start > end:
            raise KafluxOptionError(
                f"Options '{first}'/'{last}': start {unit} {start} is greater than end {unit} {end} for {tp}"
            )


def _tps(mapping: Mapping[TopicPartition, int]) -> str:
    return "[" + ", ".join(str(tp) for tp in sorted(mapping)) + "]"


def _kafka_params(options: dict[str, str]) -> dict[str, str]:
    return {k[len("kafka.") :]: v for k, v in sorted(options.items()) if k.startswith("kafka.")}


def _config_error(error: ConfigError) -> KafluxOptionError:
    detail = str(error)
    prefix = f"config {error.key!r}: "
    if detail.startswith(prefix):
        detail = detail[len(prefix) :]
    detail = re.sub(r"did you mean '([^']+)'", r"did you mean 'kafka.\1'", detail)
    return KafluxOptionError(f"Invalid option 'kafka.{error.key}': {detail}")


# -- kaflux client configurations ----------------------------------------------------------------------


def executor_consumer_config(kafka_config: Mapping[str, str]) -> dict[str, str]:
    """The config of the consumers that read offset ranges on executors.

    No group, no auto-commit, no offset reset (the source seeks to exact offsets and treats a
    missing offset as data loss), no topic auto-creation by metadata requests.
    """
    config = dict(kafka_config)
    config["enable.auto.commit"] = "false"
    config["auto.offset.reset"] = "none"
    config.setdefault("allow.auto.create.topics", "false")
    config.setdefault("max.poll.records", "5000")
    return config


def driver_consumer_config(kafka_config: Mapping[str, str]) -> dict[str, str]:
    """The config of the consumer the driver uses for metadata and offset lookups."""
    config = dict(kafka_config)
    config["enable.auto.commit"] = "false"
    config.setdefault("allow.auto.create.topics", "false")
    return config


def _validate_consumer_config(kafka_config: dict[str, str]) -> None:
    try:
        ConsumerConfig.from_dict(executor_consumer_config(kafka_config))
        ConsumerConfig.from_dict(driver_consumer_config(kafka_config))
    except ConfigError as e:
        raise _config_error(e) from None


# -- the entry points -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OptionSpec:
    """One option of the source or the sink, as Spark names it: a row of the option tables."""

    name: str
    default: str
    meaning: str
    #: where it applies: "batch", "stream" or "both" (reads); "sink" for writes
    applies: str = "both"


#: Every option of the source but the ``kafka.*`` ones (the kaflux consumer's keys). Adding an
#: option is adding a row here (and reading it in :func:`parse_source_options`): the names are
#: checked, suggested and documented from this table.
SOURCE_OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec("assign", "", 'Partitions to read, as JSON: {"topicA":[0,1],"topicB":[2,4]}.'),
    OptionSpec("subscribe", "", "Topics to read, comma-separated."),
    OptionSpec("subscribePattern", "", "A Python regex matched against whole topic names."),
    OptionSpec(
        "startingOffsets",
        "latest (stream), earliest (batch)",
        'earliest, latest, or JSON {"topic":{"0":23,"1":-2}} (-2 earliest, -1 latest).',
    ),
    OptionSpec("endingOffsets", "latest", "Where a batch read stops: latest, or JSON.", "batch"),
    OptionSpec("startingTimestamp", "", "Start each partition at this epoch ms."),
    OptionSpec("endingTimestamp", "", "Stop every partition at this epoch ms.", "batch"),
    OptionSpec("startingOffsetsByTimestamp", "", 'Start times per partition: {"topic":{"0":1700000000000}}.'),
    OptionSpec("endingOffsetsByTimestamp", "", "Per-partition end times (JSON).", "batch"),
    OptionSpec(
        "startingOffsetsByTimestampStrategy",
        "error",
        "error, or latest: what a partition with no record at or after the time does.",
    ),
    OptionSpec("failOnDataLoss", "true", "Fail when offsets were deleted or a topic vanished."),
    OptionSpec("includeHeaders", "false", "Add the headers column."),
    OptionSpec("maxOffsetsPerTrigger", "", "At most this many offsets per micro-batch.", "stream"),
    OptionSpec("minOffsetsPerTrigger", "", "Wait for this many offsets (up to maxTriggerDelay).", "stream"),
    OptionSpec("maxTriggerDelay", "15m", "The longest wait for minOffsetsPerTrigger.", "stream"),
    OptionSpec("minPartitions", "", "Split offset ranges into at least this many Spark partitions."),
    OptionSpec("maxRecordsPerPartition", "", "Split offset ranges so no Spark partition has more records."),
    OptionSpec("kafkaConsumer.pollTimeoutMs", "120000", "How long an executor waits for one fetch."),
    OptionSpec("fetchOffset.numRetries", "3", "Retries of an offset lookup."),
    OptionSpec("fetchOffset.retryIntervalMs", "10", "Wait between offset lookup retries."),
    OptionSpec("groupIdPrefix", "", "Accepted for compatibility; unused (no group is joined)."),
    OptionSpec("path", "", "Set by Spark for load(path); unused."),
    # typed columns (schema_columns.py), with schema.registry.* for the registry client
    OptionSpec("key.format", "binary", "binary, avro, protobuf or json: decode keys into a typed column."),
    OptionSpec(
        "value.format", "binary", "binary, avro, protobuf or json: decode values into a struct column."
    ),
    OptionSpec("key.subject", "<topic>-key", "The registry subject whose latest schema reads keys."),
    OptionSpec("value.subject", "<topic>-value", "The registry subject whose latest schema reads values."),
    OptionSpec("key.schema.id", "", "Pin the key reader schema by registry id."),
    OptionSpec("value.schema.id", "", "Pin the value reader schema by registry id."),
    OptionSpec(
        "decode.mode",
        "FAILFAST",
        "FAILFAST: fail on an undecodable record, naming it; PERMISSIVE: null value, bytes in value_raw.",
    ),
)

#: Every option of the sink but the ``kafka.*`` ones (the kaflux producer's keys).
SINK_OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec("topic", "", "The topic to write to; wins over a topic column.", "sink"),
    OptionSpec("key.format", "binary", "avro: serialise a struct key column with the registry.", "sink"),
    OptionSpec("value.format", "binary", "avro: serialise a struct value column with the registry.", "sink"),
    OptionSpec("key.subject", "<topic>-key", "The registry subject for keys.", "sink"),
    OptionSpec("value.subject", "<topic>-value", "The registry subject for values.", "sink"),
    OptionSpec("key.schema.id", "", "Write keys with this registered schema.", "sink"),
    OptionSpec("value.schema.id", "", "Write values with this registered schema.", "sink"),
)

_KNOWN_SOURCE_OPTIONS = frozenset(spec.name.lower() for spec in SOURCE_OPTIONS)
_SPARK_NAMES = {spec.name.lower(): spec.name for spec in (*SOURCE_OPTIONS, *SINK_OPTIONS)}


def _unknown_option(key: str, known: frozenset[str], client_keys: frozenset[str]) -> str | None:
    """Why ``key`` (lower-cased, not ``kafka.*``) is not an option, with the nearest name, or
    None when it is one."""
    if key in known:
        return None
    if key in client_keys:
        return f"Unknown option '{key}': did you mean 'kafka.{key}'? (client settings take the kafka. prefix)"
    import difflib  # only for a misspelt option: not imported on every query's start

    names = {name: _SPARK_NAMES.get(name, name) for name in known}
    close = difflib.get_close_matches(key, list(names), n=1, cutoff=0.75)
    if close:
        return f"Unknown option '{key}': did you mean '{names[close[0]]}'?"
    close = difflib.get_close_matches(key, sorted(client_keys), n=1, cutoff=0.8)
    if close:
        return f"Unknown option '{key}': did you mean 'kafka.{close[0]}'?"
    return f"Unknown option '{key}'"


def check_source_option_names(options: Mapping[str, str]) -> None:
    """Refuse every source option that is neither in :data:`SOURCE_OPTIONS` nor ``kafka.*``,
    suggesting the nearest name.

    Raises:
        KafluxOptionError: naming the first unknown option.
    """
    consumer_keys = frozenset(ConsumerConfig.keys())
    for key in sorted(_lower(options)):
        if key.startswith(("kafka.", "schema.registry.")):
            continue
        problem = _unknown_option(key, _KNOWN_SOURCE_OPTIONS, consumer_keys)
        if problem is not None and "did you mean" in problem:
            raise KafluxOptionError(problem)
        if problem is not None:
            readable = ", ".join(spec.name for spec in SOURCE_OPTIONS if spec.name != "path")
            raise KafluxOptionError(f"{problem}. The kaflux source takes kafka.<key> and: {readable}")


def parse_include_headers(options: Mapping[str, str]) -> bool:
    """The ``includeHeaders`` option (default false), which decides the read schema."""
    return _bool(_lower(options), "includeHeaders", False)


def parse_source_options(options: Mapping[str, str], *, streaming: bool | None) -> SourceOptions:
    """Validate the source options of a batch (``streaming=False``) or streaming query.
    ``streaming=None`` (the query's kind is not known yet, at ``load()``) checks everything
    but what depends on the kind.

    Defaults follow Spark: ``startingOffsets`` is ``latest`` for streaming and ``earliest`` for
    batch, ``endingOffsets`` (batch only) is ``latest``, ``failOnDataLoss`` is true.

    Raises:
        KafluxOptionError: naming the option at fault.
    """
    opts = _lower(options)
    check_source_option_names(opts)
    if streaming:
        if "endingoffsets" in opts:
            raise KafluxOptionError("Option 'endingOffsets': ending offset not valid in streaming queries")
        for key in ("endingOffsetsByTimestamp", "endingTimestamp"):
            if key.lower() in opts:
                raise KafluxOptionError(f"Option '{key}': ending timestamp not valid in streaming queries")

    kafka = _kafka_params(opts)
    for key, message in _FORBIDDEN_SOURCE_KEYS.items():
        if key in kafka:
            raise KafluxOptionError(message)
    if "bootstrap.servers" not in kafka:
        raise KafluxOptionError(
            "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer"
        )
    if "group.id" in kafka:
        log.warning(CUSTOM_GROUP_ID_WARNING)
        del kafka["group.id"]
    _validate_consumer_config(kafka)

    strategy = _strategy(opts)
    starting = _offset_spec(
        opts,
        "startingTimestamp",
        "startingOffsetsByTimestamp",
        "startingOffsets",
        LatestOffsets() if streaming else EarliestOffsets(),
    )
    ending: OffsetSpec | None = None
    if streaming is None:
        _offset_spec(opts, "endingTimestamp", "endingOffsetsByTimestamp", "endingOffsets", LatestOffsets())
    elif not streaming:
        ending = _offset_spec(
            opts, "endingTimestamp", "endingOffsetsByTimestamp", "endingOffsets", LatestOffsets()
        )
        _check_batch_limits(starting, ending)
        for key in ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay"):
            if key.lower() in opts:
                log.warning("%s option ignored in batch queries", key)

    max_offsets = _int(opts, "maxOffsetsPerTrigger", minimum=1)
    min_offsets = _int(opts, "minOffsetsPerTrigger", minimum=1)
    if max_offsets is not None and min_offsets is not None and min_offsets > max_offsets:
        raise KafluxOptionError(
            f"The value of minOffsetsPerTrigger ({min_offsets}) is higher than the "
            f"maxOffsetsPerTrigger ({max_offsets})."
        )
    delay_raw = opts.get("maxtriggerdelay")
    delay_ms = 15 * 60 * 1000 if delay_raw is None else parse_duration_ms("maxTriggerDelay", delay_raw)

    ignored = tuple(
        sorted(
            k
            for k in opts
            if not k.startswith(("kafka.", "schema.registry.")) and k not in _KNOWN_SOURCE_OPTIONS
        )
    )
    if ignored:
        log.warning("kaflux source: ignoring unknown options %s", ", ".join(ignored))
    return SourceOptions(
        kafka_config=kafka,
        strategy=strategy,
        starting=starting,
        ending=ending,
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        include_headers=_bool(opts, "includeHeaders", False),
        max_offsets_per_trigger=max_offsets,
        min_offsets_per_trigger=min_offsets,
        max_trigger_delay_ms=delay_ms,
        min_partitions=_int(opts, "minPartitions", minimum=1),
        max_records_per_partition=_int(opts, "maxRecordsPerPartition", minimum=1),
        poll_timeout_ms=_int_or(opts, "kafkaConsumer.pollTimeoutMs", 120_000, minimum=1),
        fetch_offset_num_retries=_int_or(opts, "fetchOffset.numRetries", 3, minimum=0),
        fetch_offset_retry_interval_ms=_int_or(opts, "fetchOffset.retryIntervalMs", 10, minimum=0),
        ignored=ignored,
        formats=parse_format_options(opts),
    )


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Validate the sink options: ``kafka.bootstrap.servers`` (required), ``kafka.*`` for the
    kaflux producer (``kafka.enable.idempotence``: on by default, so a task attempt writes no
    duplicates), and ``topic`` (which wins over a ``topic`` column).

    Raises:
        KafluxOptionError: naming the option at fault.
    """
    opts = _lower(options)
    producer_keys = frozenset(ProducerConfig.keys())
    for key in sorted(opts):
        if not key.startswith("kafka.") and key in producer_keys:
            # Other unknown keys are Spark's own (checkpointLocation, path...).
            raise KafluxOptionError(f"{_unknown_option(key, frozenset({'topic'}), producer_keys)}")
    kafka = _kafka_params(opts)
    for key, message in _FORBIDDEN_SINK_KEYS.items():
        if key in kafka:
            raise KafluxOptionError(message)
    if "bootstrap.servers" not in kafka:
        raise KafluxOptionError(
            "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka producer"
        )
    try:
        producer_config = ProducerConfig.from_dict(kafka)
    except ConfigError as e:
        raise _config_error(e) from None
    topic = opts.get("topic")
    if topic is not None:
        topic = topic.strip()
        if not topic:
            raise KafluxOptionError("Option 'topic' must not be empty")
    return SinkOptions(
        kafka_config=kafka,
        topic=topic,
        idempotent=producer_config.enable_idempotence,
        formats=parse_format_options(opts),
    )
