"""``format("kaflux")`` on a real Spark standalone cluster (issue 24): a batch read spreads over both
workers' executors, and the main job (``python -m pyspark_kaflux.pipeline``) survives a worker
killed mid-stream.

A master and two workers (1 core, 1 GiB each) start from the installed pyspark's
``bin/spark-class`` on loopback (:mod:`support.spark_cluster`); the job runs as its own driver process
with ``--master spark://...`` and an embedded broker, streaming page views through
``format("kaflux")`` into Parquet with a checkpoint. Once the first micro-batch is done, one
worker JVM gets SIGKILL: its executor goes with it, and Spark runs the lost tasks on the other
one. The job must still end with every produced record counted exactly once in the Parquet
output. Every process is stopped by PID.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kaflux import Producer
from kaflux.devbrokers.brokers import Broker

from support.scenarios import create_topic
from support.spark_cluster import StandaloneCluster, java_home

pytestmark = pytest.mark.spark

RECORDS = 20_000
#: the job's own deadline (its --timeout) and this test's, in seconds
JOB_TIMEOUT_S = 150
_PROGRESS = re.compile(r"produced\s+([\d,]+)\s+read\s+([\d,]+)")
_TOTAL = re.compile(r"total views in Parquet: ([\d,]+); events read: ([\d,]+) -> (\w+)")


def _number(text: str) -> int:
    return int(text.replace(",", ""))


BATCH_JOB = Path(__file__).with_name("spark_cluster_batch_job.py")


@pytest.mark.skipif(java_home() is None, reason="Spark needs Java")
def test_a_batch_read_spreads_over_both_workers_executors(kafka: Broker, tmp_path: Path) -> None:
    broker = kafka
    with StandaloneCluster(tmp_path, workers=2) as cluster:
        topic = "kx-cluster-batch"
        create_topic(broker.bootstrap_servers, topic, 4)
        with Producer({"bootstrap.servers": broker.bootstrap_servers}) as producer:
            for i in range(4000):
                producer.send(topic, b"%d" % i, partition=i % 4)
            producer.flush(30)
        job = subprocess.run(
            [sys.executable, str(BATCH_JOB), cluster.master_url, broker.bootstrap_servers, topic],
            env=cluster.env(),
            capture_output=True,
            text=True,
            timeout=JOB_TIMEOUT_S,
        )
        assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-3000:] + cluster.logs()
    result = json.loads(job.stdout.strip().splitlines()[-1])
    assert result["rows"] == 4000
    assert len(result["executors"]) == 2, f"the read ran in executors {result['executors']}"


@pytest.mark.skipif(java_home() is None, reason="Spark needs Java")
def test_the_main_job_survives_a_worker_killed_mid_stream(tmp_path: Path) -> None:
    started = time.monotonic()
    with StandaloneCluster(tmp_path, workers=2) as cluster:
        job = subprocess.Popen(
            [
                sys.executable,
                "-u",
                "-m",
                "pyspark_kaflux.pipeline",
                "--master",
                cluster.master_url,
                "--records",
                str(RECORDS),
                "--rate",
                "5000",
                "--partitions",
                "4",
                "--max-offsets-per-trigger",
                "5000",
                "--output",
                str(tmp_path / "out"),
                "--timeout",
                str(JOB_TIMEOUT_S),
            ],
            env=cluster.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        lines: list[str] = []
        killed_after: list[int] = []

        def read_output() -> None:
            assert job.stdout is not None
            for line in job.stdout:
                lines.append(line)
                match = _PROGRESS.search(line)
                if match and not killed_after and 0 < _number(match[2]) < RECORDS:
                    cluster.kill_worker(0)
                    killed_after.append(_number(match[2]))

        reader = threading.Thread(target=read_output, daemon=True)
        reader.start()
        try:
            try:
                job.wait(JOB_TIMEOUT_S + 60)
            except subprocess.TimeoutExpired:
                os.killpg(job.pid, 9)
                job.wait(10)
                pytest.fail("the job did not end in time:\n" + "".join(lines[-40:]))
        finally:
            reader.join(10)
            assert job.stdout is not None
            job.stdout.close()
        output = "".join(lines)
        assert job.returncode == 0, output[-4000:] + cluster.logs()
        assert killed_after, f"the worker was never killed mid-stream:\n{output[-4000:]}"
        assert cluster.alive_workers() == 1
    assert "Lost executor" in output, "the killed worker's executor was in use"
    total = _TOTAL.search(output)
    assert total is not None, output[-4000:]
    # every produced record exactly once in the Parquet sink
    assert (_number(total[1]), _number(total[2]), total[3]) == (RECORDS, RECORDS, "OK")
    print(
        f"standalone cluster: worker killed after {killed_after[0]:,} of {RECORDS:,} records; "
        f"whole test {time.monotonic() - started:.0f} s"
    )
