"""A Spark standalone cluster on loopback, started from the installed pyspark's own
``bin/spark-class``: one master and N workers (1 core, 1 GiB each), each a JVM this process
started in its own process group and stops by PID. Not a test module. [test]

Spark reads ``spark-defaults.conf`` from :attr:`StandaloneCluster.conf_dir`; pass
:meth:`StandaloneCluster.env` to a driver process (``--master`` :attr:`master_url`) so that it
binds to loopback and sizes its executors to fit the workers.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

WAIT_S = 60.0


def free_port() -> int:
    [port] = free_ports(1)
    return port


def free_ports(count: int) -> list[int]:
    """``count`` distinct free loopback ports (all held at once while they are chosen, so two
    JVMs of one cluster are never handed the same one)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def java_home() -> str | None:
    if os.environ.get("JAVA_HOME"):
        return os.environ["JAVA_HOME"]
    java = shutil.which("java")
    return str(Path(os.path.realpath(java)).parent.parent) if java else None


class StandaloneCluster:
    """``with StandaloneCluster(tmp_path, workers=2) as cluster: ...``"""

    def __init__(self, root: Path, *, workers: int = 2, worker_memory: str = "1g") -> None:
        self.root = root
        self.conf_dir = root / "conf"
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        self._workers_wanted = workers
        self._worker_memory = worker_memory
        self.master_port, self.master_ui_port, *self._worker_ui_ports = free_ports(2 + workers)
        self.master_url = f"spark://127.0.0.1:{self.master_port}"
        self.master: subprocess.Popen[bytes] | None = None
        self.workers: list[subprocess.Popen[bytes]] = []
        self._logs: list[Path] = []
        (self.conf_dir / "spark-defaults.conf").write_text(
            "\n".join(
                [
                    "spark.driver.host 127.0.0.1",
                    "spark.driver.bindAddress 127.0.0.1",
                    "spark.driver.memory 1g",
                    "spark.executor.memory 512m",
                    "spark.executor.cores 1",
                    "spark.ui.enabled false",
                    "spark.ui.showConsoleProgress false",
                    # a lost executor's tasks go to the other one at once
                    "spark.locality.wait 0s",
                    # a job starts once every worker's executor has registered
                    "spark.scheduler.minRegisteredResourcesRatio 1.0",
                    "spark.scheduler.maxRegisteredResourcesWaitingTime 60s",
                ]
            )
            + "\n"
        )

    def env(self) -> dict[str, str]:
        """The environment for the cluster's JVMs and for a driver using it."""
        env = dict(os.environ)
        home = java_home()
        if home is not None:
            env["JAVA_HOME"] = home
        env.update(
            {
                "SPARK_HOME": str(spark_home()),
                "SPARK_CONF_DIR": str(self.conf_dir),
                "SPARK_LOCAL_IP": "127.0.0.1",
                "SPARK_LOCAL_DIRS": str(self.root / "local"),
                "SPARK_WORKER_DIR": str(self.root / "work"),
                "PYSPARK_PYTHON": sys.executable,
                "PYSPARK_DRIVER_PYTHON": sys.executable,
            }
        )
        return env

    def _start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = self.root / f"{name}.log"
        self._logs.append(log)
        with log.open("wb") as out:
            return subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), *args],
                env=self.env(),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group: stopping it stops its executors
            )

    def start(self) -> StandaloneCluster:
        self.master = self._start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.master_port),
            "--webui-port",
            str(self.master_ui_port),
        )
        for index in range(self._workers_wanted):
            self.workers.append(
                self._start(
                    f"worker-{index}",
                    "org.apache.spark.deploy.worker.Worker",
                    self.master_url,
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    "1",
                    "--memory",
                    self._worker_memory,
                    "--webui-port",
                    str(self._worker_ui_ports[index]),
                    "--work-dir",
                    str(self.root / "work"),
                )
            )
        self.wait_for_workers(self._workers_wanted)
        return self

    def alive_workers(self) -> int:
        """Workers the master lists as ALIVE (from its JSON status page)."""
        import json

        with urllib.request.urlopen(f"http://127.0.0.1:{self.master_ui_port}/json/", timeout=2) as answer:
            try:
                status = json.load(answer)
            except ValueError:  # not the master's status yet (or another server): ask again
                return 0
        return sum(1 for w in status.get("workers", []) if w.get("state") == "ALIVE")

    def wait_for_workers(self, count: int, timeout: float = WAIT_S) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self.alive_workers() >= count:
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{count} workers not registered within {timeout} s; logs:\n{self.logs()}")
            time.sleep(0.2)

    def kill_worker(self, index: int) -> None:
        """SIGKILL a worker JVM (only it: its executor notices and exits, as on a lost machine)."""
        os.kill(self.workers[index].pid, signal.SIGKILL)
        self.workers[index].wait(10)

    def logs(self) -> str:
        return "\n".join(f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}" for log in self._logs)

    def stop(self) -> None:
        """Stop every JVM this cluster started, by process group (its own PID), TERM then KILL."""
        processes = [p for p in [*self.workers, self.master] if p is not None]
        for process in processes:
            _signal_group(process, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for process in processes:
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            _signal_group(process, signal.SIGKILL)
            process.wait(5)

    def __enter__(self) -> StandaloneCluster:
        try:
            return self.start()
        except BaseException:
            self.stop()  # the JVMs already started, and their Popen objects, are not left behind
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _signal_group(process: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(process.pid, sig)  # the group this process leads (start_new_session)
    except (ProcessLookupError, PermissionError):
        pass
