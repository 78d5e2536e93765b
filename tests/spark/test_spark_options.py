"""Option parsing and validation of the kaflux source and sink (pure, plus errors as Spark shows them)."""

from __future__ import annotations

from typing import Any

import pytest

from kaflux import TopicPartition
from kaflux.devbrokers.brokers import Broker
from pyspark_kaflux.options import (
    Assign,
    EarliestOffsets,
    GlobalTimestamp,
    KafluxOptionError,
    LatestOffsets,
    SpecificOffsets,
    SpecificTimestamps,
    Subscribe,
    SubscribePattern,
    executor_consumer_config,
    parse_duration_ms,
    parse_sink_options,
    parse_source_options,
)

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t"}


def source(streaming: bool = True, **options: str) -> Any:
    return parse_source_options({**BASE, **options}, streaming=streaming)


def error_of(streaming: bool = True, base: dict[str, str] | None = None, **options: str) -> str:
    with pytest.raises(KafluxOptionError) as info:
        parse_source_options({**(BASE if base is None else base), **options}, streaming=streaming)
    return str(info.value)


# --- defaults and happy paths ------------------------------------------------------------------------


def test_defaults_follow_spark() -> None:
    stream = source()
    assert stream.strategy == Subscribe(("t",))
    assert stream.starting == LatestOffsets() and stream.ending is None
    assert stream.fail_on_data_loss and not stream.include_headers
    assert stream.max_trigger_delay_ms == 15 * 60 * 1000
    batch = source(streaming=False)
    assert batch.starting == EarliestOffsets() and batch.ending == LatestOffsets()


def test_keys_are_case_insensitive_and_kafka_options_lose_their_prefix() -> None:
    opts = parse_source_options(
        {
            "KAFKA.BOOTSTRAP.SERVERS": "127.0.0.1:1",
            "SubscribePattern": "t-.*",
            "kafka.max.poll.records": "7",
            "MaxOffsetsPerTrigger": "10",
            "INCLUDEHEADERS": "TRUE",
        },
        streaming=True,
    )
    assert opts.kafka_config == {"bootstrap.servers": "127.0.0.1:1", "max.poll.records": "7"}
    assert opts.strategy == SubscribePattern("t-.*") and opts.strategy.matches("t-1")
    assert not opts.strategy.matches("xt-1"), "a pattern must match the whole topic name"
    assert opts.max_offsets_per_trigger == 10 and opts.include_headers


def test_strategies() -> None:
    assert source(subscribe=" a, b ,,a").strategy == Subscribe(("a", "b"))
    opts = parse_source_options(
        {"kafka.bootstrap.servers": "h:1", "assign": '{"b": [1, 0], "a": [2]}'}, streaming=False
    )
    assert opts.strategy == Assign((TopicPartition("a", 2), TopicPartition("b", 0), TopicPartition("b", 1)))


def test_offset_specs_and_precedence() -> None:
    specific = source(startingOffsets='{"t": {"0": 23, "1": -2, "2": -1}}').starting
    assert specific == SpecificOffsets(
        {TopicPartition("t", 0): 23, TopicPartition("t", 1): -2, TopicPartition("t", 2): -1}
    )
    by_ts = source(startingOffsetsByTimestamp='{"t": {"0": 1000}}', startingOffsets="earliest").starting
    assert by_ts == SpecificTimestamps({TopicPartition("t", 0): 1000})
    assert source(startingTimestamp="5", startingOffsetsByTimestamp='{"t": {"0": 1}}').starting == (
        GlobalTimestamp(5)
    )
    assert source(startingTimestamp="5", startingOffsetsByTimestampStrategy="LATEST").starting == (
        GlobalTimestamp(5, "latest")
    )


def test_trigger_and_partition_options() -> None:
    opts = source(
        minOffsetsPerTrigger="5", maxOffsetsPerTrigger="9", maxTriggerDelay="30s", minPartitions="4"
    )
    assert (opts.min_offsets_per_trigger, opts.max_offsets_per_trigger) == (5, 9)
    assert opts.max_trigger_delay_ms == 30_000 and opts.min_partitions == 4
    assert [parse_duration_ms("d", v) for v in ("15m", "250ms", "2h", "1d", "100", "2 min")] == [
        900_000,
        250,
        7_200_000,
        86_400_000,
        100,
        120_000,
    ]


def test_group_id_is_accepted_with_a_warning_and_not_used(caplog: pytest.LogCaptureFixture) -> None:
    opts = source(**{"kafka.group.id": "mine", "groupIdPrefix": "x"})  # type: ignore[arg-type]
    assert "group.id" not in opts.kafka_config
    assert "kafka.group.id" in caplog.text


def test_executor_consumers_never_commit_reset_or_create_topics() -> None:
    config = executor_consumer_config({"bootstrap.servers": "h:1"})
    assert config["enable.auto.commit"] == "false" and config["auto.offset.reset"] == "none"
    assert config["allow.auto.create.topics"] == "false"


# --- errors, with messages that name the option ----------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "words"),
    [
        ("kafka.auto.offset.reset", "'startingOffsets'"),
        ("kafka.key.deserializer", "keys"),
        ("kafka.value.deserializer", "values"),
        ("kafka.enable.auto.commit", "'enable.auto.commit' is not supported"),
        ("kafka.interceptor.classes", "'interceptor.classes' is not supported"),
    ],
)
def test_forbidden_kafka_options(key: str, words: str) -> None:
    message = error_of(**{key: "x"})  # type: ignore[arg-type]
    assert key.removeprefix("kafka.") in message and words in message


def test_unknown_or_invalid_kafka_options_are_named() -> None:
    message = error_of(**{"kafka.max.pol.records": "5"})  # type: ignore[arg-type]
    assert "'kafka.max.pol.records'" in message and "did you mean 'kafka.max.poll.records'" in message
    message = error_of(**{"kafka.max.poll.records": "many"})  # type: ignore[arg-type]
    assert "'kafka.max.poll.records'" in message and "integer" in message


def test_bootstrap_servers_is_required() -> None:
    assert "'kafka.bootstrap.servers' must be specified" in error_of(base={"subscribe": "t"})


def test_exactly_one_strategy() -> None:
    two = error_of(assign='{"t": [0]}')
    assert "Only one of" in two and "assign" in two and "subscribe" in two
    none = error_of(base={"kafka.bootstrap.servers": "h:1"})
    assert "One of the following options must be specified" in none
    assert "No topics to subscribe" in error_of(subscribe=" , ")
    assert "Pattern to subscribe is empty" in error_of(
        base={"kafka.bootstrap.servers": "h:1", "subscribePattern": " "}
    )
    assert "regular expression" in error_of(base={"kafka.bootstrap.servers": "h:1", "subscribePattern": "("})


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"assign": "t:0"}, "No topicpartitions to assign"),
        ({"assign": '{"t": 0}'}, "Option 'assign' expects JSON"),
        ({"assign": "{not json"}, "Option 'assign' expects JSON"),
    ],
)
def test_bad_assign_json(options: dict[str, str], words: str) -> None:
    assert words in error_of(base={"kafka.bootstrap.servers": "h:1"}, **options)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"startingOffsets": "first"}, "Option 'startingOffsets' must be 'earliest', 'latest' or JSON"),
        ({"startingOffsets": '{"t": {"0": 1'}, "Option 'startingOffsets' expects JSON"),
        ({"startingOffsets": '{"t": [0]}'}, "Option 'startingOffsets' expects JSON"),
        ({"startingOffsets": '{"t": {"x": 1}}'}, "Option 'startingOffsets' expects JSON"),
        ({"startingOffsets": '{"t": {"0": -3}}'}, "offset -3 for t-0 is invalid"),
        ({"startingOffsetsByTimestamp": '{"t": {"0": -5}}'}, "timestamp -5 for t-0 is negative"),
        ({"startingTimestamp": "yesterday"}, "Option 'startingTimestamp' expects a single timestamp"),
        ({"startingOffsetsByTimestampStrategy": "closest"}, "'error' or 'latest'"),
        ({"failOnDataLoss": "yes"}, "Option 'failOnDataLoss' must be 'true' or 'false'"),
        ({"maxOffsetsPerTrigger": "0"}, "Option 'maxOffsetsPerTrigger' must be positive"),
        ({"minPartitions": "many"}, "Option 'minPartitions' must be an integer"),
        ({"maxTriggerDelay": "soon"}, "Option 'maxTriggerDelay' must be a duration"),
        ({"minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"}, "minOffsetsPerTrigger (10) is higher"),
        ({"endingOffsets": "latest"}, "ending offset not valid in streaming queries"),
        ({"endingTimestamp": "5"}, "ending timestamp not valid in streaming queries"),
    ],
)
def test_bad_source_values(options: dict[str, str], words: str) -> None:
    assert words in error_of(**options)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"startingOffsets": "latest"}, "starting offset can't be latest for batch queries"),
        ({"startingOffsets": '{"t": {"0": -1}}'}, "startingOffsets for t-0 can't be latest"),
        ({"endingOffsets": "earliest"}, "ending offset can't be earliest for batch queries"),
        ({"endingOffsets": '{"t": {"0": -2}}'}, "ending offset for t-0 can't be earliest"),
        (
            {"startingOffsets": '{"t": {"0": 1}}', "endingOffsets": '{"t": {"1": 5}}'},
            "must name the same topic partitions",
        ),
        (
            {"startingOffsets": '{"t": {"0": 9}}', "endingOffsets": '{"t": {"0": 5}}'},
            "start offset 9 is greater",
        ),
        (
            {"startingOffsetsByTimestamp": '{"t": {"0": 1}}', "endingOffsetsByTimestamp": '{"t": {"1": 5}}'},
            "Options 'startingOffsetsByTimestamp' and 'endingOffsetsByTimestamp' must name the same topic "
            "partitions: [t-0] vs [t-1]",
        ),
        (
            {"startingOffsetsByTimestamp": '{"t": {"0": 9}}', "endingOffsetsByTimestamp": '{"t": {"0": 5}}'},
            "Options 'startingOffsetsByTimestamp'/'endingOffsetsByTimestamp': start timestamp 9 is greater "
            "than end timestamp 5 for t-0",
        ),
    ],
)
def test_bad_batch_offsets(options: dict[str, str], words: str) -> None:
    assert words in error_of(streaming=False, **options)  # type: ignore[arg-type]


def test_sink_options() -> None:
    opts = parse_sink_options({"kafka.bootstrap.servers": "h:1", "topic": " out ", "kafka.linger.ms": "0"})
    assert opts.topic == "out" and opts.kafka_config == {"bootstrap.servers": "h:1", "linger.ms": "0"}
    for key in ("kafka.key.serializer", "kafka.value.serializer"):
        with pytest.raises(KafluxOptionError, match="is not supported"):
            parse_sink_options({"kafka.bootstrap.servers": "h:1", key: "x"})
    with pytest.raises(KafluxOptionError, match=r"'kafka\.bootstrap\.servers' must be specified"):
        parse_sink_options({"topic": "t"})
    with pytest.raises(KafluxOptionError, match=r"'kafka\.lingr\.ms'"):
        parse_sink_options({"kafka.bootstrap.servers": "h:1", "kafka.lingr.ms": "0"})


# --- the same errors as a Spark job sees them ----------------------------------------------------------


@pytest.mark.spark
def test_option_errors_surface_in_spark(spark_session: Any, kafka: Broker) -> None:
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    def failure(**options: str) -> str:
        reader = spark_session.read.format("kaflux").option(
            "kafka.bootstrap.servers", kafka.bootstrap_servers
        )
        for key, value in options.items():
            reader = reader.option(key, value)
        with pytest.raises((PySparkException, Py4JJavaError)) as info:
            reader.load().collect()
        return str(info.value)

    assert "Kafka option 'auto.offset.reset' is not supported" in failure(
        subscribe="t", **{"kafka.auto.offset.reset": "earliest"}
    )
    assert "Only one of the following options" in failure(subscribe="t", assign='{"t": [0]}')
    assert "Option 'assign' expects JSON" in failure(assign='{"t": "zero"}')
    with pytest.raises((PySparkException, Py4JJavaError), match="ending offset not valid in streaming"):
        (
            spark_session.readStream.format("kaflux")
            .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
            .option("subscribe", "t")
            .option("endingOffsets", "latest")
            .load()
            .writeStream.format("memory")
            .queryName("kx_bad_options")
            .start()
            .awaitTermination(30)
        )
