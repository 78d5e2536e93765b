"""``kaflux share``: read a topic as a member of a share group (KIP-932), and administer share
groups: list, describe, offsets (with lag), alter-offsets, delete-offsets, delete. [app]

Each record printed was acquired by this member and is then acknowledged as ``--ack`` says:
``accept`` (done), ``release`` (deliver again, to any member, with its delivery count + 1) or
``reject`` (never again). JSON lines carry the record's ``delivery_count``. A share group starts
at the latest offset: records produced before its first member joined are not read.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Sequence

import click
from rich.console import RenderableType

from kaflux.cli.clients import admin_client
from kaflux.cli.main import (
    ClientSettings,
    CliError,
    client_options,
    client_options_without_timeout,
    client_settings,
    describe_error,
)
from kaflux.cli.output import (
    RecordWriter,
    cell,
    dumps_line,
    emit,
    format_option,
    progress,
    record_json,
    record_writer,
    table,
)
from kaflux.consumer.share.acknowledgements import AcknowledgeType
from kaflux.consumer.share.consumer import ShareConsumer
from kaflux.errors import KafkaError
from kaflux.records import ConsumerRecord
from kaflux.structs import TopicPartition

_POLL_S = 0.5
_ACK_TYPES = {
    "accept": AcknowledgeType.ACCEPT,
    "release": AcknowledgeType.RELEASE,
    "reject": AcknowledgeType.REJECT,
}


@click.group()
def share() -> None:
    """Share groups (KIP-932): queue semantics on Kafka topics; consume, and administer groups."""


def share_config(settings: ClientSettings, group: str) -> dict[str, object]:
    """The settings a share consumer takes: its own keys, keys no kaflux client knows, and any
    key given with -X (so that consumer-group settings are refused by name, not dropped)."""
    from kaflux.config import AdminConfig, ConsumerConfig, ProducerConfig, ShareConsumerConfig

    mine = frozenset(ShareConsumerConfig.keys())
    others = (
        frozenset(ConsumerConfig.keys()) | frozenset(ProducerConfig.keys()) | frozenset(AdminConfig.keys())
    )
    explicit = {key for key, _ in settings.overrides}
    config: dict[str, object] = {
        key: value
        for key, value in settings.merged().items()
        if key in mine or key not in others or key in explicit
    }
    config["group.id"] = group
    config["share.acknowledgement.mode"] = "explicit"
    return config


@share.command("consume")
@click.argument("topic")
@click.option("-g", "--group", required=True, help="The share group to join.")
@click.option(
    "--ack",
    "ack",
    type=click.Choice(sorted(_ACK_TYPES)),
    default="accept",
    show_default=True,
    help="How every record printed is acknowledged.",
)
@click.option("-n", "--count", type=click.IntRange(min=1), help="Exit after this many records.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "raw", "table"]),
    default="json",
    show_default=True,
    help="json: one object per record (with delivery_count); raw: the values only; table: rows.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    metavar="SECONDS",
    help="Stop after this long without a record (an error if -n was not reached); also how long "
    "to wait for a broker to accept a connection (default: 5).",
)
@client_options_without_timeout
def consume(topic: str, group: str, ack: str, count: int | None, fmt: str, timeout: float | None) -> None:
    """Print the records of TOPIC that the share group GROUP hands this member, acknowledging
    each as --ack says, until Ctrl-C (or -n COUNT records)."""
    settings = client_settings()
    if timeout is not None:
        settings.timeout = timeout
    config = share_config(settings, group)
    if count is not None:
        config.setdefault("max.poll.records", str(min(count, 500)))
    ack_type = _ACK_TYPES[ack]
    consumer = ShareConsumer(config)
    try:
        settings.ensure_reachable()
        consumer.subscribe([topic])
        try:
            _print_records(consumer, topic, ack_type, count, fmt, timeout)
        except KeyboardInterrupt:
            pass  # Ctrl-C (or SIGTERM): acknowledge what was printed and close cleanly
    finally:
        consumer.close(timeout=10.0)


def _print_records(
    consumer: ShareConsumer,
    topic: str,
    ack_type: AcknowledgeType,
    count: int | None,
    fmt: str,
    timeout: float | None,
) -> None:
    writer = record_writer(fmt)
    printed = 0
    last_record = time.monotonic()
    with progress(f"consuming {topic} (share group)", total=count, enabled=count is not None) as bar:
        while count is None or printed < count:
            records = consumer.poll(_POLL_S)
            if not records:
                if timeout is not None and time.monotonic() - last_record >= timeout:
                    if count is not None:
                        raise CliError(f"only {printed} of {count} records arrived (none for {timeout:g} s)")
                    return
                continue
            last_record = time.monotonic()
            keep = records if count is None else records[: count - printed]
            _write(writer, fmt, keep)
            for i, record in enumerate(records):
                # Records beyond -n go back to the group, to be delivered again.
                consumer.acknowledge(record, ack_type if i < len(keep) else AcknowledgeType.RELEASE)
            printed += len(keep)
            bar.advance(len(keep))
    # close() sends the last acknowledgements as it closes the share sessions


def _write(writer: RecordWriter, fmt: str, records: Sequence[ConsumerRecord]) -> None:
    if fmt != "json":
        writer.write(records)
        return
    lines = []
    for record in records:
        line = record_json(record)
        line["delivery_count"] = record.delivery_count
        lines.append(dumps_line(line) + "\n")
    sys.stdout.write("".join(lines))
    sys.stdout.flush()


# -- administration ------------------------------------------------------------------------------


@share.command("list")
@format_option
@client_options
def list_share_groups(fmt: str | None) -> None:
    """List the share groups."""
    with admin_client(client_settings()) as admin:
        data = [{"group_id": g.group_id, "state": g.state} for g in admin.list_groups(types=["share"])]

    def render() -> Iterable[RenderableType]:
        rows = table("GROUP", "STATE")
        for g in data:
            rows.add_row(cell(g["group_id"]), cell(g["state"]))
        return [rows]

    emit(fmt, data, render)


@share.command()
@click.argument("group")
@format_option
@client_options
def describe(group: str, fmt: str | None) -> None:
    """Show share group GROUP's state, epochs, coordinator and members with their assignments."""
    with admin_client(client_settings()) as admin:
        g = admin.describe_share_groups([group])[group]
    data: dict[str, object] = {
        "group_id": g.group_id,
        "state": g.state,
        "group_epoch": g.group_epoch,
        "target_assignment_epoch": g.target_assignment_epoch,
        "coordinator": g.coordinator._asdict(),
        "members": [
            {
                "member_id": m.member_id,
                "client_id": m.client_id,
                "host": m.host,
                "rack_id": m.rack_id,
                "member_epoch": m.member_epoch,
                "assignment": [{"topic": tp.topic, "partition": tp.partition} for tp in sorted(m.assignment)],
            }
            for m in g.members
        ],
    }

    def render() -> Iterable[RenderableType]:
        summary = table("GROUP", "STATE", "EPOCH", "COORDINATOR")
        node = g.coordinator
        summary.add_row(g.group_id, g.state, str(g.group_epoch), f"{node.node_id} ({node.host}:{node.port})")
        members = table("MEMBER", "CLIENT", "HOST", "RACK", "ASSIGNMENT", title="members")
        for m in g.members:
            assigned = ", ".join(str(tp) for tp in sorted(m.assignment))
            members.add_row(m.member_id, m.client_id, m.host, cell(m.rack_id), assigned or "-")
        return [summary, members]

    emit(fmt, data, render)


@share.command()
@click.argument("group")
@format_option
@client_options
def offsets(group: str, fmt: str | None) -> None:
    """Show where share group GROUP is in each partition: start offset and lag."""
    with admin_client(client_settings()) as admin:
        found = admin.list_share_group_offsets(group)
    rows = [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "start_offset": info.start_offset,
            "leader_epoch": info.leader_epoch,
            "lag": info.lag,
        }
        for tp, info in found.items()
    ]
    known = [r["lag"] for r in rows if isinstance(r["lag"], int)]
    data = {"group": group, "partitions": rows, "total_lag": sum(known) if len(known) == len(rows) else None}

    def render() -> Iterable[RenderableType]:
        result = table(
            "TOPIC", "PARTITION", "START OFFSET", "LAG", title=f"share group {group}", numeric=("PARTITION",)
        )
        for r in rows:
            result.add_row(*(cell(r[k]) for k in ("topic", "partition", "start_offset", "lag")))
        result.add_section()
        result.add_row("total", "", "", cell(data["total_lag"]), style="bold")
        return [result]

    emit(fmt, data, render)


def _partition_offset(spec: str) -> tuple[TopicPartition, int]:
    try:
        where, offset = spec.rsplit("=", 1)
        topic, partition = where.rsplit(":", 1)
        return TopicPartition(topic, int(partition)), int(offset)
    except ValueError:
        raise click.BadParameter(f"{spec!r}: expected TOPIC:PARTITION=OFFSET") from None


@share.command("alter-offsets")
@click.argument("group")
@click.argument("specs", metavar="TOPIC:PARTITION=OFFSET...", nargs=-1, required=True)
@client_options
def alter_offsets(group: str, specs: tuple[str, ...]) -> None:
    """Set share group GROUP's start offsets; the group must have no members."""
    wanted = dict(_partition_offset(s) for s in specs)
    with admin_client(client_settings()) as admin:
        admin.alter_share_group_offsets(group, wanted)
    for tp, offset in sorted(wanted.items()):
        click.echo(f"share group {group}: {tp.topic}:{tp.partition} starts at {offset}", err=True)


@share.command("delete-offsets")
@click.argument("group")
@click.argument("topics", metavar="TOPIC...", nargs=-1, required=True)
@client_options
def delete_offsets(group: str, topics: tuple[str, ...]) -> None:
    """Delete where share group GROUP is in TOPICs; the group must have no members."""
    with admin_client(client_settings()) as admin:
        results = admin.delete_share_group_offsets(group, list(topics))
    _report(results, lambda topic: f"share group {group}, topic {topic}", "offsets deleted")


@share.command()
@click.argument("names", metavar="GROUP...", nargs=-1, required=True)
@client_options
def delete(names: tuple[str, ...]) -> None:
    """Delete share groups with their state; each must have no members."""
    with admin_client(client_settings()) as admin:
        results = admin.delete_share_groups(list(dict.fromkeys(names)))
    _report(results, lambda name: f"share group {name}", "deleted")


def _report(results: dict[str, KafkaError | None], subject: Callable[[str], str], done: str) -> None:
    """One line per name on stderr: ``<subject> <done>``, or the error; exit 1 if any failed."""
    failed = False
    for name, error in results.items():
        if error is None:
            click.echo(f"{subject(name)}: {done}", err=True)
        else:
            failed = True
            click.echo(f"kaflux: error: {subject(name)}: {describe_error(error)}", err=True)
    if failed:
        raise click.exceptions.Exit(1)
