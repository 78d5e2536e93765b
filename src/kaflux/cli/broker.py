"""``kaflux broker start``: run an embedded development broker until Ctrl-C or SIGTERM. [app]

The broker is a child process from :mod:`kaflux.devbrokers` (noida-db, Tansu, Apache Kafka, or
librdkafka's three-broker mock cluster) on 127.0.0.1; its bootstrap string is the one line on stdout, so
``BOOTSTRAP=$(kaflux broker start &)``-style scripts can read it. It is stopped by its PID when
this command ends, and dies with it even when this process is killed.

``kaflux broker start --env`` runs the same command detached (its own session, its log in a
temporary file) and prints shell ``export`` lines for its address and PID, so that
``eval "$(kaflux broker start --env)"`` leaves a broker running and ``$KAFLUX_BOOTSTRAP_SERVERS``
set; ``kaflux broker stop`` stops it (``$KAFLUX_BROKER_PID``).
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time

import click

from kaflux.cli.main import CliError

_CHECK_S = 0.5
ENV_PID = "KAFLUX_BROKER_PID"


@click.group()
def broker() -> None:
    """Run an embedded development broker."""


@broker.command()
@click.option(
    "--kind",
    type=click.Choice(["noida", "tansu", "kafka", "mock"]),
    default="noida",
    show_default=True,
    help="noida-db (data in a temporary directory), Tansu (in memory), Apache Kafka (a KRaft node; "
    "needs Java 17 and Kafka's jars) or librdkafka's mock cluster.",
)
@click.option(
    "--kafka-home",
    type=click.Path(exists=True, file_okay=False),
    envvar="KAFLUX_KAFKA_HOME",
    show_envvar=True,
    help="--kind kafka: an unpacked Apache Kafka distribution to run (default: the jar cache that "
    "`python -m kaflux.devbrokers resolve` fills).",
)
@click.option(
    "--port", type=click.IntRange(1, 65535), help="Listen on this port (noida, tansu; default: a free one)."
)
@click.option(
    "--brokers", type=click.IntRange(1, 16), default=3, show_default=True, help="Brokers of the mock cluster."
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    help="Seconds to wait for it to start.  [default: 30; 120 for kafka]",
)
@click.option(
    "--env",
    is_flag=True,
    help=f'Run in the background and print export lines: eval "$(kaflux broker start --env)" sets '
    f"$KAFLUX_BOOTSTRAP_SERVERS and ${ENV_PID} (kaflux broker stop stops it).",
)
def start(
    kind: str, kafka_home: str | None, port: int | None, brokers: int, timeout: float | None, env: bool
) -> None:
    """Start a broker on 127.0.0.1, print its bootstrap servers and run until Ctrl-C or SIGTERM."""
    if kafka_home is not None and kind != "kafka":
        raise click.UsageError("--kafka-home applies to --kind kafka only")
    if env:
        _start_detached(kind, kafka_home, port, brokers, timeout)
        return
    from kaflux.devbrokers.brokers import (  # imported when the command runs: --help stays fast
        Broker,
        BrokerUnavailableError,
        NoidaBroker,
        TansuBroker,
    )
    from kaflux.devbrokers.mock_cluster import MockCluster

    server: Broker | MockCluster
    if kind == "mock":
        if port is not None:
            raise click.UsageError("--port does not apply to the mock cluster (it picks its ports)")
        server = MockCluster(brokers=brokers)
    elif kind == "kafka":
        from kaflux.devbrokers.apache_kafka import KafkaBroker

        try:
            server = KafkaBroker(port=port, kafka_home=kafka_home)
        except BrokerUnavailableError as e:
            raise CliError(str(e)) from None
    else:
        server = NoidaBroker(port=port) if kind == "noida" else TansuBroker(port=port)
    try:
        server.start(timeout)  # None: the kind's own default
        click.echo(server.bootstrap_servers)
        sys.stdout.flush()
        version = getattr(server, "started_version", lambda: None)()
        what = f"{kind} broker" + (f" (Apache Kafka {version})" if version else "")
        click.echo(
            f"{what} running at {server.bootstrap_servers} (pid {server.pid}); Ctrl-C or SIGTERM stops it",
            err=True,
        )
        try:
            while server.is_alive():
                time.sleep(_CHECK_S)  # SIGINT, and SIGTERM (see kaflux.cli.main), interrupt it
        except KeyboardInterrupt:
            click.echo(f"stopping the {kind} broker (pid {server.pid})", err=True)
            raise  # an interrupt exits 130, as every command does
        raise CliError(f"the {kind} broker exited on its own")
    finally:
        server.cleanup()


def _start_detached(
    kind: str, kafka_home: str | None, port: int | None, brokers: int, timeout: float | None
) -> None:
    """``start`` in its own session, its stdout read for the bootstrap string; prints exports."""
    command = [sys.executable, "-m", "kaflux.cli", "broker", "start", "--kind", kind]
    if timeout is not None:
        command += ["--timeout", str(timeout)]
    if kafka_home is not None:
        command += ["--kafka-home", kafka_home]
    if port is not None:
        command += ["--port", str(port)]
    if kind == "mock":
        command += ["--brokers", str(brokers)]
    log_fd, log_path = tempfile.mkstemp(prefix=f"kaflux-{kind}-broker-", suffix=".log")
    with os.fdopen(log_fd, "wb") as log:
        proc = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, start_new_session=True
        )
    assert proc.stdout is not None
    line = proc.stdout.readline().decode().strip()  # the child prints it once started, or exits
    proc.stdout.close()  # it writes nothing more there
    if not line:
        proc.wait(timeout=10)
        with open(log_path, encoding="utf-8", errors="replace") as f:
            why = f.read().strip().splitlines()
        last = why[-1] if why else "no output"
        raise CliError(f"the {kind} broker did not start: {last} (log: {log_path})")
    click.echo(f"export KAFLUX_BOOTSTRAP_SERVERS={shlex.quote(line)}")
    click.echo(f"export {ENV_PID}={proc.pid}")
    click.echo(
        f"{kind} broker running at {line} (pid {proc.pid}, log {log_path}); 'kaflux broker stop' stops it",
        err=True,
    )


@broker.command()
@click.option(
    "--pid",
    type=int,
    envvar=ENV_PID,
    show_envvar=True,
    required=True,
    help="The broker command's PID, as kaflux broker start --env exported it.",
)
@click.option(
    "--timeout", type=click.FloatRange(min=0), default=15.0, show_default=True, help="Seconds to wait."
)
def stop(pid: int, timeout: float) -> None:
    """Stop a broker started with kaflux broker start --env."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        raise CliError(f"no process {pid}: the broker is not running") from None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not is_running(pid):
            click.echo(f"stopped the broker (pid {pid})", err=True)
            return
        time.sleep(0.1)
    raise CliError(f"the broker (pid {pid}) did not stop within {timeout:g} s")


def is_running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie nobody reaped yet counts as ended)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True
