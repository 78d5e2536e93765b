"""``kaflux broker start``: run an embedded development broker until Ctrl-C or SIGTERM. [app]

The broker is a child process from :mod:`kaflux.devbrokers` (noida-db, Tansu, or librdkafka's
three-broker mock cluster) on 127.0.0.1; its bootstrap string is the one line on stdout, so
``BOOTSTRAP=$(kaflux broker start &)``-style scripts can read it. It is stopped by its PID when
this command ends, and dies with it even when this process is killed.
"""

from __future__ import annotations

import sys
import time

import click

from kaflux.cli.main import CliError
from kaflux.devbrokers.brokers import Broker, NoidaBroker, TansuBroker
from kaflux.devbrokers.mock_cluster import MockCluster

_CHECK_S = 0.5


@click.group()
def broker() -> None:
    """Run an embedded development broker."""


@broker.command()
@click.option(
    "--kind",
    type=click.Choice(["noida", "tansu", "mock"]),
    default="noida",
    show_default=True,
    help="noida-db (data in a temporary directory), Tansu (in memory) or librdkafka's mock cluster.",
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
    default=30.0,
    show_default=True,
    help="Seconds to wait for it to start.",
)
def start(kind: str, port: int | None, brokers: int, timeout: float) -> None:
    """Start a broker on 127.0.0.1, print its bootstrap servers and run until Ctrl-C or SIGTERM."""
    server: Broker | MockCluster
    if kind == "mock":
        if port is not None:
            raise click.UsageError("--port does not apply to the mock cluster (it picks its ports)")
        server = MockCluster(brokers=brokers)
    else:
        server = NoidaBroker(port=port) if kind == "noida" else TansuBroker(port=port)
    try:
        server.start(timeout)
        click.echo(server.bootstrap_servers)
        sys.stdout.flush()
        click.echo(
            f"{kind} broker running at {server.bootstrap_servers} (pid {server.pid}); "
            "Ctrl-C or SIGTERM stops it",
            err=True,
        )
        try:
            while server.is_alive():
                time.sleep(_CHECK_S)  # SIGINT, and SIGTERM (see kaflux.cli.main), interrupt it
        except KeyboardInterrupt:
            click.echo(f"stopping the {kind} broker (pid {server.pid})", err=True)
            return
        raise CliError(f"the {kind} broker exited on its own")
    finally:
        server.cleanup()
