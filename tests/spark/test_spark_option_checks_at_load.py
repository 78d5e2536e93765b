"""Every option of the kaflux source is checked when the DataFrame is created (``load()``), batch
and stream, with Spark's names and "did you mean" hints (issue 18)."""

from __future__ import annotations

from typing import Any

import pytest

from pyspark_kaflux.options import (
    SINK_OPTIONS,
    SOURCE_OPTIONS,
    KafluxOptionError,
    check_source_option_names,
    parse_sink_options,
    parse_source_options,
)

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t"}


def source_error(streaming: bool | None, **options: str) -> str:
    with pytest.raises(KafluxOptionError) as info:
        parse_source_options({**BASE, **options}, streaming=streaming)
    return str(info.value)


@pytest.mark.parametrize("streaming", [True, False, None])
def test_a_client_key_without_the_kafka_prefix_gets_the_prefixed_name(streaming: bool | None) -> None:
    message = source_error(streaming, **{"bootstrap.servers": "127.0.0.1:9092"})
    assert "Unknown option 'bootstrap.servers': did you mean 'kafka.bootstrap.servers'?" in message


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("startingOffset", "startingOffsets"),
        ("subscribepatern", "subscribePattern"),
        ("failOnDatLoss", "failOnDataLoss"),
    ],
)
def test_a_misspelt_option_is_refused_with_spark_s_name(typo: str, meant: str) -> None:
    assert f"did you mean '{meant}'?" in source_error(True, **{typo: "x"})


def test_an_option_nobody_knows_is_refused_and_the_known_ones_are_listed() -> None:
    message = source_error(False, colour="blue")
    assert message.startswith("Unknown option 'colour'")
    assert "startingOffsets" in message and "kafka.<key>" in message


def test_every_declared_option_is_accepted_by_name() -> None:
    check_source_option_names({**BASE, **{spec.name: "1" for spec in SOURCE_OPTIONS}})
    formats = {f"{side}.{what}" for side in ("key", "value") for what in ("format", "subject", "schema.id")}
    assert {spec.name for spec in SINK_OPTIONS} == {"topic", *formats}


def test_before_the_query_kind_is_known_only_kind_free_checks_run() -> None:
    # endingOffsets is a batch option: not refused until the query turns out to be a stream
    parse_source_options({**BASE, "endingOffsets": "latest"}, streaming=None)
    assert "startingOffsets" in source_error(None, startingOffsets="{")  # malformed values still fail


def test_the_sink_refuses_a_client_key_without_the_prefix() -> None:
    with pytest.raises(KafluxOptionError, match=r"did you mean 'kafka\.acks'"):
        parse_sink_options({"kafka.bootstrap.servers": "127.0.0.1:9092", "acks": "all"})
    parse_sink_options({"kafka.bootstrap.servers": "127.0.0.1:9092", "checkpointLocation": "/tmp/x"})


@pytest.mark.spark
@pytest.mark.parametrize("stream", [False, True], ids=["batch", "stream"])
def test_load_refuses_a_bad_option_before_any_query_runs(spark_session: Any, stream: bool) -> None:
    from pyspark.errors import PySparkException

    builder = spark_session.readStream if stream else spark_session.read
    reader = builder.format("kaflux").option("bootstrap.servers", "127.0.0.1:9").option("subscribe", "t")
    with pytest.raises(PySparkException) as info:
        reader.load()  # no collect(), no start(): the DataFrame's creation itself fails
    message = str(info.value)
    assert "Unknown option 'bootstrap.servers': did you mean 'kafka.bootstrap.servers'?" in message
    assert "UnboundLocalError" not in message
    assert message.count('File "') <= 1  # one frame above the message, not a stack
