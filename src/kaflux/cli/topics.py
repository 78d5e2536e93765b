"""``kaflux topics``: list, describe, create and delete topics, and look up their offsets. [app]"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import click
from rich.console import RenderableType

from kaflux.cli.clients import admin_client, broker_id, broker_ids
from kaflux.cli.main import CliError, client_options, client_options_without_config, client_settings
from kaflux.cli.output import cell, emit, format_option, key_values_callback, table
from kaflux.errors import UnsupportedVersionError
from kaflux.structs import PartitionInfo

if TYPE_CHECKING:
    from kaflux.admin import TopicDescription


@click.group()
def topics() -> None:
    """List, describe, create and delete topics; look up their offsets."""


@topics.command("list")
@click.option("--internal", is_flag=True, help="Include internal topics.")
@format_option
@client_options
def list_topics(internal: bool, fmt: str | None) -> None:
    """List the topics with their partition counts."""
    with admin_client(client_settings()) as admin:
        found = admin.list_topics(include_internal=internal)
    data = [
        {"name": name, "partitions": len(parts), "replication_factor": _replication(parts)}
        for name, parts in found.items()
    ]

    def render() -> Iterable[RenderableType]:
        rows = table("TOPIC", "PARTITIONS", "REPLICATION", numeric=("PARTITIONS", "REPLICATION"))
        for topic in data:
            rows.add_row(str(topic["name"]), cell(topic["partitions"]), cell(topic["replication_factor"]))
        return [rows]

    emit(fmt, data, render)


def _replication(partitions: list[PartitionInfo]) -> int | None:
    return len(partitions[0].replicas) if partitions else None


def topic_json(description: TopicDescription) -> dict[str, object]:
    """One topic's description as ``topics describe --format json`` prints it."""
    return {
        "name": description.name,
        "topic_id": None if description.topic_id is None else str(description.topic_id),
        "is_internal": description.is_internal,
        "partitions": [
            {
                "partition": p.partition,
                "leader": broker_id(p.leader),
                "replicas": broker_ids(p.replicas),
                "isr": broker_ids(p.isr),
                "low_watermark": p.low_watermark,
                "high_watermark": p.high_watermark,
            }
            for p in sorted(description.partitions, key=lambda p: p.partition)
        ],
    }


@topics.command()
@click.argument("names", metavar="TOPIC...", nargs=-1, required=True)
@format_option
@client_options
def describe(names: tuple[str, ...], fmt: str | None) -> None:
    """Show each partition's leader, replicas, in-sync replicas and watermarks."""
    wanted = list(dict.fromkeys(names))
    with admin_client(client_settings()) as admin:
        found = admin.describe_topics(wanted)
    missing = [name for name in wanted if name not in found]
    if missing:
        raise CliError(f"no such topic: {', '.join(missing)}")
    data = [topic_json(found[name]) for name in wanted]

    def render() -> Iterable[RenderableType]:
        for topic in data:
            internal = ", internal" if topic["is_internal"] else ""
            title = f"{topic['name']}  (id {cell(topic['topic_id'])}{internal})"
            rows = table(
                "PARTITION",
                "LEADER",
                "REPLICAS",
                "ISR",
                "LOW",
                "HIGH",
                title=title,
                numeric=("PARTITION", "LEADER", "LOW", "HIGH"),
            )
            partitions = topic["partitions"]
            assert isinstance(partitions, list)
            for p in partitions:
                rows.add_row(
                    *(
                        cell(p[k])
                        for k in ("partition", "leader", "replicas", "isr", "low_watermark", "high_watermark")
                    )
                )
            yield rows

    emit(fmt, data, render)


@topics.command()
@click.argument("name", metavar="TOPIC")
@click.option("--partitions", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--replication-factor", type=click.IntRange(min=1), default=1, show_default=True)
@click.option(
    "--config",
    "configs",
    metavar="KEY=VALUE",
    callback=key_values_callback,
    multiple=True,
    help="A topic setting, e.g. --config retention.ms=60000 (repeatable).",
)
@click.option("--if-not-exists", is_flag=True, help="Succeed when the topic exists already.")
@client_options_without_config
def create(
    name: str,
    partitions: int,
    replication_factor: int,
    configs: tuple[tuple[str, str], ...],
    if_not_exists: bool,
) -> None:
    """Create TOPIC. (Client settings from a file: --command-config FILE.)"""
    from kaflux.admin import NewTopic  # imported when the command runs: --help stays fast

    with admin_client(client_settings()) as admin:
        try:
            admin.create_topics(
                [NewTopic(name, partitions, replication_factor, dict(configs))], exist_ok=if_not_exists
            )
        except UnsupportedVersionError as e:
            if "CREATE_TOPICS" not in str(e):
                raise
            raise CliError(
                "this broker does not implement CreateTopics (librdkafka's mock cluster does not): it "
                f"creates a topic when a record is first produced to it, e.g. 'kaflux produce {name}'"
            ) from None
    click.echo(
        f"created topic {name} ({partitions} partitions, replication factor {replication_factor})", err=True
    )


@topics.command()
@click.argument("names", metavar="TOPIC...", nargs=-1, required=True)
@click.option("--if-exists", is_flag=True, help="Succeed when a topic does not exist.")
@client_options
def delete(names: tuple[str, ...], if_exists: bool) -> None:
    """Delete topics."""
    with admin_client(client_settings()) as admin:
        admin.delete_topics(names, missing_ok=if_exists)
    click.echo(f"deleted {', '.join(names)}", err=True)


_SPECS = ("earliest", "latest", "max-timestamp")


@topics.command()
@click.argument("name", metavar="TOPIC")
@click.option(
    "--spec",
    default="latest",
    show_default=True,
    metavar="earliest|latest|max-timestamp|MS",
    help="Which offset: the first, the next to be written, the record with the highest timestamp, "
    "or the first record at or after a time (ms since the epoch).",
)
@click.option(
    "--partition", "partitions", type=click.IntRange(min=0), multiple=True, help="Only this one (repeatable)."
)
@click.option(
    "--isolation-level",
    type=click.Choice(["read_uncommitted", "read_committed"]),
    default="read_uncommitted",
    show_default=True,
    help="read_committed: latest is the last stable offset (before the first open transaction).",
)
@format_option
@client_options
def offsets(name: str, spec: str, partitions: tuple[int, ...], isolation_level: str, fmt: str | None) -> None:
    """Look up an offset of each partition of TOPIC (offset -1: no such record)."""
    from kaflux.admin import OffsetSpec  # imported when the command runs: --help stays fast
    from kaflux.structs import TopicPartition

    if spec in _SPECS:
        wanted = getattr(OffsetSpec, spec.replace("-", "_"))()
    elif spec.isdigit():
        wanted = OffsetSpec.for_timestamp(int(spec))
    else:
        raise click.BadParameter(
            f"{spec!r}: use earliest, latest, max-timestamp or a time in ms", param_hint="'--spec'"
        )
    with admin_client(client_settings()) as admin:
        numbers = list(dict.fromkeys(partitions))
        if not numbers:
            described = admin.describe_topics([name])[name]
            numbers = [p.partition for p in described.partitions]
        found = admin.list_offsets(
            {TopicPartition(name, p): wanted for p in numbers}, isolation_level=isolation_level
        )
    data = [
        {
            "partition": tp.partition,
            "offset": info.offset,
            "timestamp": info.timestamp,
            "leader_epoch": info.leader_epoch,
        }
        for tp, info in found.items()
    ]

    def render() -> Iterable[RenderableType]:
        rows = table(
            "PARTITION",
            "OFFSET",
            "TIMESTAMP",
            "LEADER EPOCH",
            title=f"{name}  ({spec})",
            numeric=("PARTITION", "OFFSET", "TIMESTAMP", "LEADER EPOCH"),
        )
        for row in data:
            rows.add_row(*(cell(row[k]) for k in ("partition", "offset", "timestamp", "leader_epoch")))
        return [rows]

    emit(fmt, data, render)
