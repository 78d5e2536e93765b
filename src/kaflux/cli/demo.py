"""``kaflux demo``: the plain-client demo of :mod:`kaflux.demo`. [app]"""

from __future__ import annotations

import click

from kaflux.cli.main import DEFAULT_TIMEOUT_S, ENV_BOOTSTRAP, ClientSettings


@click.command()
@click.option(
    "-b",
    "--bootstrap-servers",
    metavar="HOST:PORT[,...]",
    envvar=ENV_BOOTSTRAP,
    show_envvar=True,
    help="A cluster to use instead of an embedded broker.",
)
@click.option("--topic", default="page-views", show_default=True)
@click.option("--records", type=click.IntRange(min=1), default=100_000, show_default=True)
@click.option("--partitions", type=click.IntRange(min=1), default=6, show_default=True)
@click.option(
    "--compression",
    type=click.Choice(["none", "gzip", "snappy", "lz4", "zstd"]),
    default="lz4",
    show_default=True,
)
@click.option(
    "--exactly-once",
    is_flag=True,
    help="Then run an exactly-once consume-transform-produce loop (embedded broker: noida-db).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=DEFAULT_TIMEOUT_S,
    show_default=True,
    metavar="SECONDS",
    help="With -b: how long to wait for a broker to accept a connection.",
)
def demo(
    bootstrap_servers: str | None,
    topic: str,
    records: int,
    partitions: int,
    compression: str,
    exactly_once: bool,
    timeout: float,
) -> None:
    """Produce page-view events and read them back with the plain clients.

    Starts an embedded broker (Tansu; noida-db with --exactly-once) unless -b names a cluster.
    """
    argv = ["--topic", topic, "--records", str(records), "--partitions", str(partitions)]
    argv += ["--compression", compression]
    if bootstrap_servers:
        ClientSettings(bootstrap_servers=bootstrap_servers, timeout=timeout).ensure_reachable()
        argv += ["--bootstrap-servers", bootstrap_servers]
    if exactly_once:
        argv.append("--exactly-once")
    from kaflux import demo as demo_job  # imported when the command runs: --help stays fast

    status = demo_job.main(argv)
    if status:
        raise click.exceptions.Exit(status)
