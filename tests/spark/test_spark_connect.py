"""``format("kaflux")`` through Spark Connect, where a client cannot add Spark's JVM Kafka connector:
the source (batch and availableNow), the sink and the main job in one local Connect session.

A local Connect server and a classic SparkSession cannot share a process (pyspark refuses to start
the server while a SparkContext exists: ``SESSION_ALREADY_EXIST``), and the other Spark tests keep a
classic session for the whole run. So the Connect session lives in a child process: this file run
as a script, which opens ``SparkSession.builder.remote("local[2]")`` once (through the main job's
``spark_session``) and then answers commands, one JSON line each way. Its Spark output goes to a
log file that failures quote.

The child runs with ``SPARK_TESTING=1``: pyspark then binds its local Connect server to an
ephemeral port instead of 15002, so parallel runs on one machine do not collide.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from kaflux.devbrokers.brokers import Broker

from support.spark_helpers import consume_all, create_topic, produce

pytestmark = [pytest.mark.spark, pytest.mark.integration]

START_S = 180.0  # session start: about 10 s on an idle machine, much more on a busy one
CALL_S = 150.0  # one command; the first Python data source action of a session starts its workers
STOP_S = 60.0
SOURCE = "kaflux"


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


# --- the child process: a Connect session answering commands -------------------------------------


def _read(spark: Any, bootstrap: str, topic: str) -> list[list[Any]]:
    rows = (
        spark.read.format(SOURCE)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .load()
        .collect()
    )
    return [
        [
            r.topic,
            r.partition,
            r.offset,
            _b64(r.key),
            _b64(r.value),
            r.timestamp.isoformat(),
            r.timestampType,
            None if r.headers is None else [[h.key, _b64(h.value)] for h in r.headers],
        ]
        for r in rows
    ]


def _register(spark: Any) -> str:
    from pyspark_kaflux import KafluxDataSource

    spark.dataSource.register(KafluxDataSource)
    return str(KafluxDataSource.name())


def _write(spark: Any, bootstrap: str, topic: str, rows: list[list[Any]]) -> int:
    df = spark.createDataFrame([tuple(r) for r in rows], "key string, value string, partition int")
    df.write.format(SOURCE).mode("append").option("kafka.bootstrap.servers", bootstrap).option(
        "topic", topic
    ).save()
    return len(rows)


def _stream(spark: Any, bootstrap: str, topic: str, path: str, max_per_trigger: int) -> list[int]:
    query = (
        spark.readStream.format(SOURCE)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(max_per_trigger))
        .load()
        .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
        .writeStream.format("parquet")
        .option("path", f"{path}/data")
        .option("checkpointLocation", f"{path}/checkpoint")
        .trigger(availableNow=True)
        .start()
    )
    if not query.awaitTermination(CALL_S - 30):
        query.stop()
        raise TimeoutError("the availableNow query did not finish")
    return [p.numInputRows for p in query.recentProgress]


def _job(spark: Any, bootstrap: str, argv: list[str]) -> dict[str, Any]:
    from pyspark_kaflux.pipeline import parse_args, run

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = run(spark, bootstrap, parse_args(argv))
    return {"exit": code, "printed": printed.getvalue()}


def _serve() -> None:
    """Child main: a local Connect session; one JSON command per stdin line, one JSON answer per line
    on the original stdout (everything else written to fd 1, e.g. by the JVM, goes to stderr)."""
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)

    def answer(**fields: Any) -> None:
        answers.write(json.dumps(fields) + "\n")

    from pyspark_kaflux.pipeline import spark_session

    spark = spark_session(remote="local[2]")
    answer(session=type(spark).__module__, version=spark.version)
    ops: dict[str, Callable[..., Any]] = {
        "read": _read,
        "register": _register,
        "write": _write,
        "stream": _stream,
        "job": _job,
    }
    try:
        for line in sys.stdin:
            command = json.loads(line)
            op = command.pop("op")
            if op == "stop":
                break
            try:
                answer(result=ops[op](spark, **command))
            except Exception as error:
                answer(error=f"{type(error).__name__}: {error}")
    finally:
        spark.stop()
        answer(stopped=True)


# --- the test side -----------------------------------------------------------------------------


class ConnectChild:
    """The child process holding the Connect session; :meth:`call` runs one command with a deadline."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, __file__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=env,
            text=True,
        )
        self._answers: queue.Queue[dict[str, Any] | None] = queue.Queue()
        assert self.proc.stdout is not None
        self._pump_thread = threading.Thread(target=self._pump, args=(self.proc.stdout,), daemon=True)
        self._pump_thread.start()
        self.hello = self._next(START_S, "start the Connect session")

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            try:
                self._answers.put(json.loads(line))
            except ValueError:  # not an answer; the child sends nothing else here, but be safe
                continue
        self._answers.put(None)  # the child closed its stdout: it exited

    def _next(self, timeout: float, what: str) -> dict[str, Any]:
        try:
            reply = self._answers.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(
                f"the Connect child did not {what} within {timeout:.0f} s{self.log_tail()}"
            ) from None
        if reply is None:
            raise AssertionError(
                f"the Connect child exited ({self.proc.poll()}) before it could {what}{self.log_tail()}"
            )
        return reply

    def call(self, op: str, **args: Any) -> Any:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.proc.stdin.flush()
        reply = self._next(CALL_S, op)
        if "error" in reply:
            raise AssertionError(f"{op} failed in the Connect session: {reply['error']}{self.log_tail()}")
        return reply["result"]

    def log_tail(self, lines: int = 40) -> str:
        self._log.flush()
        tail = self.log_path.read_text(errors="replace").splitlines()[-lines:]
        return f"\n--- last lines of {self.log_path} ---\n" + "\n".join(tail)

    def stop(self) -> None:
        """Ask the child to stop its session; kill it if it has not exited within ``STOP_S``."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            if self.proc.poll() is None:
                self.proc.stdin.write(json.dumps({"op": "stop"}) + "\n")
                self.proc.stdin.close()
            self.proc.wait(STOP_S)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait(STOP_S)
        finally:
            self._pump_thread.join(STOP_S)
            self.proc.stdout.close()
            if not self.proc.stdin.closed:
                self.proc.stdin.close()
            self._log.close()


def _connect_env(spark_subprocess_env: dict[str, str]) -> dict[str, str]:
    # The child runs this file as a script: it imports the test-support package from tests/.
    tests_dir = str(Path(__file__).resolve().parents[1])
    python_path = os.pathsep.join(filter(None, [tests_dir, spark_subprocess_env.get("PYTHONPATH")]))
    return {**spark_subprocess_env, "SPARK_TESTING": "1", "PYTHONUNBUFFERED": "1", "PYTHONPATH": python_path}


@pytest.fixture(scope="module")
def connect(
    spark_subprocess_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConnectChild]:
    """One local Connect session for the module's tests, in a child process."""
    child = ConnectChild(_connect_env(spark_subprocess_env), tmp_path_factory.mktemp("connect") / "spark.log")
    try:
        assert child.hello["session"].startswith("pyspark.sql.connect"), child.hello
        yield child
    finally:
        child.stop()


def test_main_job_takes_master_or_remote(capsys: pytest.CaptureFixture[str]) -> None:
    from pyspark_kaflux.pipeline import main

    with pytest.raises(SystemExit):
        main(["--master", "local[1]", "--remote", "sc://127.0.0.1:15002"])
    assert "not allowed with argument" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--remote", "spark://127.0.0.1:7077"])
    assert "--remote takes sc://host:port or local[N]" in capsys.readouterr().err


def test_batch_read_without_registering(connect: ConnectChild, kafka: Broker, topic_name: str) -> None:
    create_topic(kafka.bootstrap_servers, topic_name, 3)
    produced = produce(kafka.bootstrap_servers, topic_name, 30, partitions=3, headers=True)
    rows = connect.call("read", bootstrap=kafka.bootstrap_servers, topic=topic_name)
    want = [
        [
            p.topic,
            p.partition,
            p.offset,
            _b64(p.key),
            _b64(p.value),
            p.spark_timestamp.isoformat(),
            0,
            [[k, _b64(v)] for k, v in p.headers] if p.headers else None,
        ]
        for p in produced
    ]
    assert sorted(rows, key=repr) == sorted(want, key=repr)


def test_batch_write_after_registering(connect: ConnectChild, kafka: Broker, topic_name: str) -> None:
    create_topic(kafka.bootstrap_servers, topic_name, 2)
    assert connect.call("register") == "kaflux"  # the one call that works on classic and Connect alike
    rows = [[None if i % 4 == 0 else f"k{i}", f"v{i}", i % 2] for i in range(20)]
    assert connect.call("write", bootstrap=kafka.bootstrap_servers, topic=topic_name, rows=rows) == 20
    got = consume_all(kafka.bootstrap_servers, topic_name, len(rows), 2)
    assert sorted(((r.partition, r.key, r.value) for r in got), key=repr) == sorted(
        ((p, None if k is None else k.encode(), v.encode()) for k, v, p in rows),  # type: ignore[union-attr]
        key=repr,
    )


def test_stream_available_now_to_parquet(
    connect: ConnectChild, kafka: Broker, topic_name: str, tmp_path: Path
) -> None:
    import pyarrow.parquet as pq

    create_topic(kafka.bootstrap_servers, topic_name, 2)
    produced = produce(kafka.bootstrap_servers, topic_name, 16, partitions=2)
    batches = connect.call(
        "stream", bootstrap=kafka.bootstrap_servers, topic=topic_name, path=str(tmp_path), max_per_trigger=10
    )
    assert batches == [10, 6]  # maxOffsetsPerTrigger holds through Connect
    table = pq.read_table(tmp_path / "data").to_pylist()
    assert sorted((r["partition"], r["offset"], r["value"]) for r in table) == sorted(
        (p.partition, p.offset, p.value.decode()) for p in produced if p.value is not None
    )


def test_main_job_on_the_connect_session(
    connect: ConnectChild, kafka: Broker, topic_name: str, tmp_path: Path
) -> None:
    """The main job's body (``pipeline.run``) with a ``--remote local[2]`` command line, on a session
    from the job's own ``spark_session(remote="local[2]")``: what ``main`` runs, minus a second
    Connect server (which would double this module's time)."""
    argv = [
        "--remote", "local[2]", "--topic", topic_name, "--partitions", "2", "--records", "1000",
        "--rate", "2000", "--max-offsets-per-trigger", "600", "--output", str(tmp_path), "--timeout", "100",
    ]  # fmt: skip
    done = connect.call("job", bootstrap=kafka.bootstrap_servers, argv=argv)
    assert done["exit"] == 0, done["printed"]
    assert "total views in Parquet: 1,000; events read: 1,000 -> OK" in done["printed"], done["printed"]


if __name__ == "__main__":
    _serve()
