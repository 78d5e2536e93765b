"""Spark's own Kafka connector (``format("kafka")``): its jars, for a SparkSession's ``spark.jars``. [test]

``python tests/support/spark_kafka_connector.py resolve`` resolves ``spark_kafka/pom.xml`` with Maven
(strict checksums) into ``~/.cache/kaflux/spark-kafka/<version>/classpath.txt`` (or under
``$KAFLUX_KAFKA_CACHE/..``); ``scripts/bootstrap.sh --test`` runs it. A second run finds the jars
there without the network. :func:`connector_jars` returns only the jars pyspark does not ship.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = ["CONNECTOR_VERSION", "ConnectorUnavailableError", "connector_jars", "resolve"]

#: The newest spark-sql-kafka-0-10 on Maven Central (Spark 4.3.0's is not published there).
CONNECTOR_VERSION = "4.2.0"
_POM = Path(__file__).resolve().parent / "spark_kafka" / "pom.xml"
_VERSIONED_JAR = re.compile(r"^(?P<artifact>.+?)-\d[\w.]*(-[A-Za-z][\w.]*)?\.jar$")


class ConnectorUnavailableError(RuntimeError):
    """Spark's Kafka connector jars are not resolved here."""


def _cache_file() -> Path:
    base = os.environ.get("KAFLUX_KAFKA_CACHE")
    root = Path(base).parent if base else Path.home() / ".cache" / "kaflux"
    return root / "spark-kafka" / CONNECTOR_VERSION / "classpath.txt"


def _artifact(jar: str) -> str:
    match = _VERSIONED_JAR.match(os.path.basename(jar))
    return match.group("artifact") if match else os.path.basename(jar)


def resolve() -> list[str]:
    """Resolve the connector's jars with Maven into the cache (a no-op when they are there)."""
    cache = _cache_file()
    try:
        jars = [j for j in cache.read_text().strip().split(os.pathsep) if j]
        if jars and all(os.path.isfile(j) for j in jars):
            return jars
    except FileNotFoundError:
        pass
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ConnectorUnavailableError("resolving Spark's Kafka connector needs Maven (mvn) on PATH")
    cache.parent.mkdir(parents=True, exist_ok=True)
    partial = cache.with_suffix(".partial")
    result = subprocess.run(
        [mvn, "--batch-mode", "--quiet", "--strict-checksums", "-f", str(_POM),
         "dependency:build-classpath", f"-Dmdep.outputFile={partial}"],
        capture_output=True, text=True, check=False, timeout=900,
    )  # fmt: skip
    if result.returncode != 0:
        raise ConnectorUnavailableError(f"Maven failed: {(result.stdout + result.stderr)[-2000:]}")
    os.replace(partial, cache)
    return [j for j in cache.read_text().strip().split(os.pathsep) if j]


def connector_jars() -> list[str]:
    """The resolved connector jars that pyspark's own ``jars/`` directory lacks."""
    cache = _cache_file()
    try:
        jars = [j for j in cache.read_text().strip().split(os.pathsep) if j]
    except FileNotFoundError:
        jars = []
    if not jars or not all(os.path.isfile(j) for j in jars):
        raise ConnectorUnavailableError(
            f"Spark's Kafka connector {CONNECTOR_VERSION} is not resolved ({cache} is missing): run "
            "`python tests/support/spark_kafka_connector.py resolve` (bootstrap.sh --test does)"
        )
    import pyspark

    shipped = {_artifact(j.name) for j in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return [j for j in jars if _artifact(j) not in shipped]


if __name__ == "__main__":
    if sys.argv[1:] != ["resolve"]:
        sys.exit("usage: python tests/support/spark_kafka_connector.py resolve")
    print(f"spark-sql-kafka-0-10 {CONNECTOR_VERSION}: {len(resolve())} jars", file=sys.stderr)
