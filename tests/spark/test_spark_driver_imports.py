"""What PySpark's streaming-source process imports for the kaflux source (issue 23).

PySpark starts a fresh interpreter per streaming query to run a Python source's driver-side
methods (``python_streaming_source_runner``); everything it imports is paid before the query's
first trigger. These tests run that process's steps in a fresh interpreter: unpickle the data
source (import ``pyspark_kaflux``), make the stream reader, plan partitions. None of that may load
the executors' read path (pyarrow, the consumer and its record decoding), the sink (the
producer), or the typed-column and Schema Registry code; the consumer is imported by the first
offset lookup, which needs it.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kaflux.devbrokers.brokers import Broker

pytestmark = pytest.mark.integration

#: Modules the driver-side steps must not load: the executors' read path, the sink, typed columns.
NOT_ON_THE_DRIVER = (
    "pyarrow",
    "pyarrow.compute",
    "kaflux.consumer",
    "kaflux.records",
    "kaflux.producer",
    "kaflux.schema_registry",
    "pyspark_kaflux.range_reader",
    "pyspark_kaflux.writer",
    "pyspark_kaflux.reader",
    "pyspark_kaflux.schema_columns",
    "pyspark_kaflux.client_cache",
    "pyspark_kaflux.offset_reader",
)

_SCRIPT = """
import json, pickle, sys
import pyspark.sql.datasource, pyspark.sql.streaming.datasource  # what the runner has loaded
before = set(sys.modules)
from pyspark_kaflux import KafluxDataSource
from pyspark_kaflux.schema import kafka_schema
options = {"kafka.bootstrap.servers": BOOTSTRAP, "subscribe": "t"}
source = pickle.loads(pickle.dumps(KafluxDataSource(options)))
reader = source.streamReader(kafka_schema(False))
reader.getDefaultReadLimit()
planned = reader.partitions({"t": {"0": 0, "1": 5}}, {"t": {"0": 10, "1": 9}})
loaded = {"planned": [repr(p) for p in planned], "driver": sorted(set(sys.modules) - before)}
if LOOKUP:
    reader.initialOffset()
    loaded["after_lookup"] = sorted(set(sys.modules) - before)
print(json.dumps(loaded))
"""


def _run(bootstrap: str, lookup: bool) -> dict[str, list[str]]:
    script = _SCRIPT.replace("BOOTSTRAP", repr(bootstrap)).replace("LOOKUP", repr(lookup))
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    result: dict[str, list[str]] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_the_stream_reader_plans_without_importing_the_read_path() -> None:
    loaded = _run("127.0.0.1:9", lookup=False)  # no broker needed: nothing connects
    assert loaded["planned"] == ["KafkaInputPartition(t-0 [0, 10))", "KafkaInputPartition(t-1 [5, 9))"]
    assert sorted(set(NOT_ON_THE_DRIVER) & set(loaded["driver"])) == []
    assert "pyspark_kaflux.stream_reader" in loaded["driver"]


def test_the_first_offset_lookup_imports_the_consumer_but_not_the_sink(kafka: Broker) -> None:
    loaded = _run(kafka.bootstrap_servers, lookup=True)
    after = set(loaded["after_lookup"])
    assert {"kaflux.consumer", "pyspark_kaflux.offset_reader"} <= after
    assert (
        sorted(
            after
            & {
                "pyarrow.compute",
                "kaflux.producer",
                "pyspark_kaflux.range_reader",
                "pyspark_kaflux.writer",
                "kaflux.schema_registry",
            }
        )
        == []
    )
