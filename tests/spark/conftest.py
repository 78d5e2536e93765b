"""Fixtures for the ``pyspark_kaflux`` tests: one local SparkSession for the whole run (helpers to
create topics, produce and read back records are in ``spark_helpers.py``).

The session is ``local[2]`` on 127.0.0.1 with the UI off and UTC as its time zone (so collected
timestamps are naive UTC datetimes). Spark's Python workers run this interpreter, which finds
``pyspark_kaflux`` on its path, so ``format("kaflux")`` works without any ``register()`` call.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

try:  # the `spark` extra; without it this directory is not collected
    import pyarrow  # noqa: F401
    import pyspark  # noqa: F401
except ImportError:
    collect_ignore_glob = ["test_*.py"]


def _java_home() -> str | None:
    java = shutil.which("java")
    return str(Path(os.path.realpath(java)).parent.parent) if java else None


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A local SparkSession shared by every Spark test (startup costs about 10 s), with Spark's own
    Kafka connector on its classpath when it is resolved (``format("kafka")``)."""
    java_home = os.environ.get("JAVA_HOME") or _java_home()
    if java_home is None:
        pytest.skip("Spark needs Java; no java on PATH and JAVA_HOME unset")
    os.environ["JAVA_HOME"] = java_home
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from support.spark_kafka_connector import ConnectorUnavailableError, connector_jars

    try:  # Spark's own Kafka connector, the anchor of the differential tests
        jars = ",".join(connector_jars())
    except ConnectorUnavailableError:
        jars = ""  # the tests that need format("kafka") skip (and fail under CI=true)
    session = (
        SparkSession.builder.master("local[2]")
        .config("spark.jars", jars)
        .appName("kaflux-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.streaming.pollingDelay", "50ms")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        for query in session.streams.active:
            query.stop()
        session.stop()


@pytest.fixture
def spark_session(spark: Any) -> Iterator[Any]:
    """The shared session; streaming queries a test leaves running are stopped after it."""
    yield spark
    for query in spark.streams.active:
        query.stop()


@pytest.fixture(scope="session")
def spark_subprocess_env() -> dict[str, str]:
    """The environment for a child process that starts its own Spark (the local-mode settings of the
    ``spark`` fixture: Java, loopback, this interpreter for Python workers)."""
    java_home = os.environ.get("JAVA_HOME") or _java_home()
    if java_home is None:
        pytest.skip("Spark needs Java; no java on PATH and JAVA_HOME unset")
    # Nothing that would attach the child to this process's Spark (a py4j gateway, Connect mode).
    inherited = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("PYSPARK_GATEWAY_")
        and key not in ("SPARK_REMOTE", "SPARK_LOCAL_REMOTE", "SPARK_CONNECT_MODE_ENABLED")
    }
    return {
        **inherited,
        "JAVA_HOME": java_home,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
