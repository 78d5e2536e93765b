"""``kaflux groups``: list, describe, lag, reset-offsets, remove-members and delete consumer groups. [app]

``lag`` compares each committed offset with the partition's end offset (from a group-less
consumer's ``end_offsets``). ``reset-offsets`` follows Kafka's ``kafka-consumer-groups.sh``: it
prints the planned offsets and changes nothing unless ``--execute`` is given, and then only while
the group has no active members.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import click
from rich.console import RenderableType

from kaflux.cli.clients import admin_client, offsets_consumer
from kaflux.cli.main import CliError, client_options, client_settings, describe_error
from kaflux.cli.output import cell, emit, format_option, table, timestamp_callback
from kaflux.structs import OffsetAndMetadata, TopicPartition

if TYPE_CHECKING:
    from kaflux.consumer.consumer import Consumer

#: states in which a group has no members whose commits a reset would race
_INACTIVE = frozenset({"empty", "dead", "unknown", ""})


@click.group()
def groups() -> None:
    """List, describe and inspect consumer groups; reset or delete their offsets; remove members."""


@groups.command("list")
@click.option(
    "--type",
    "types",
    multiple=True,
    type=click.Choice(["classic", "consumer", "share", "streams", "all"], case_sensitive=False),
    help="List groups of this type (repeatable; all: every type, KIP-1043). Default: consumer groups.",
)
@format_option
@client_options
def list_groups(types: tuple[str, ...], fmt: str | None) -> None:
    """List the consumer groups, or with --type the groups of any type (share, streams...)."""
    with admin_client(client_settings()) as admin:
        if types:
            wanted = None if "all" in {t.lower() for t in types} else [t.lower() for t in types]
            data = [
                {
                    "group_id": g.group_id,
                    "state": g.state,
                    "protocol_type": g.protocol,
                    "group_type": g.group_type,
                }
                for g in admin.list_groups(types=wanted)
            ]
        else:
            data = [
                {
                    "group_id": g.group_id,
                    "state": g.state or None,
                    "protocol_type": g.protocol_type,
                    "group_type": g.group_type,
                }
                for g in sorted(admin.list_consumer_groups(), key=lambda g: g.group_id)
            ]

    def render() -> Iterable[RenderableType]:
        rows = table("GROUP", "STATE", "PROTOCOL TYPE", "TYPE")
        for g in data:
            rows.add_row(*(cell(g[k]) for k in ("group_id", "state", "protocol_type", "group_type")))
        return [rows]

    emit(fmt, data, render)


def _partitions_json(partitions: Iterable[TopicPartition]) -> list[dict[str, object]]:
    return [{"topic": tp.topic, "partition": tp.partition} for tp in sorted(partitions)]


@groups.command()
@click.argument("group")
@format_option
@client_options
def describe(group: str, fmt: str | None) -> None:
    """Show GROUP's state, coordinator and members with their assignments."""
    with admin_client(client_settings()) as admin:
        found = admin.describe_consumer_groups([group])
    if group not in found:
        raise CliError(f"the broker did not describe group {group!r}")
    g = found[group]
    data: dict[str, object] = {
        "group_id": g.group_id,
        "state": g.state or None,
        "protocol_type": g.protocol_type,
        "protocol": g.protocol,
        "coordinator": g.coordinator._asdict(),
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "host": m.host,
                "assignment": _partitions_json(m.assignment),
            }
            for m in sorted(g.members, key=lambda m: m.member_id)
        ],
    }

    def render() -> Iterable[RenderableType]:
        summary = table("GROUP", "STATE", "PROTOCOL TYPE", "PROTOCOL", "COORDINATOR")
        node = g.coordinator
        summary.add_row(
            *(cell(data[k]) for k in ("group_id", "state", "protocol_type", "protocol")),
            f"{node.node_id} ({node.host}:{node.port})",
        )
        members = table("MEMBER", "INSTANCE", "CLIENT", "HOST", "ASSIGNMENT", title="members")
        for m in g.members:
            assigned = ", ".join(str(tp) for tp in sorted(m.assignment))
            members.add_row(m.member_id, cell(m.group_instance_id), m.client_id, m.host, assigned or "-")
        return [summary, members]

    emit(fmt, data, render)


def _committed(group: str, topics: Iterable[str] = ()) -> dict[TopicPartition, int]:
    """GROUP's committed offsets (only of ``topics`` if any are named)."""
    only = set(topics)
    with admin_client(client_settings()) as admin:
        offsets = admin.list_consumer_group_offsets(group)
    return {
        tp: meta.offset
        for tp, meta in sorted(offsets.items())
        if meta is not None and meta.offset >= 0 and (not only or tp.topic in only)
    }


@groups.command()
@click.argument("group")
@click.option("--topic", "topics", multiple=True, help="Only this topic (repeatable).")
@format_option
@client_options
def lag(group: str, topics: tuple[str, ...], fmt: str | None) -> None:
    """Show GROUP's lag per partition (end offset - committed offset) and in total."""
    committed = _committed(group, topics)
    with offsets_consumer(client_settings()) as consumer:
        ends = consumer.end_offsets(list(committed)) if committed else {}
    lags = {tp: max(0, ends[tp] - offset) for tp, offset in committed.items()}
    rows = [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "committed": offset,
            "end_offset": ends[tp],
            "lag": lags[tp],
        }
        for tp, offset in committed.items()
    ]
    data = {"group": group, "partitions": rows, "total_lag": sum(lags.values())}

    def render() -> Iterable[RenderableType]:
        result = table(
            "TOPIC",
            "PARTITION",
            "COMMITTED",
            "END OFFSET",
            "LAG",
            title=f"group {group}",
            numeric=("PARTITION", "COMMITTED", "END OFFSET", "LAG"),
        )
        for r in rows:
            result.add_row(*(cell(r[k]) for k in ("topic", "partition", "committed", "end_offset", "lag")))
        result.add_section()
        result.add_row("total", "", "", "", cell(data["total_lag"]), style="bold")
        return [result]

    emit(fmt, data, render)


def _parse_topic(spec: str, consumer: Consumer) -> list[TopicPartition]:
    """``TOPIC`` (every partition) or ``TOPIC:P[,P...]``."""
    name, _, numbers = spec.partition(":")
    infos = consumer.partitions_for(name)
    if not infos:
        raise CliError(f"topic {name!r} does not exist")
    existing = {p.partition for p in infos}
    if not numbers:
        return [TopicPartition(name, p) for p in sorted(existing)]
    try:
        wanted = [int(n) for n in numbers.split(",") if n.strip()]
    except ValueError:
        raise click.BadParameter(f"{spec!r} is not TOPIC or TOPIC:P[,P...]", param_hint="--topic") from None
    missing = sorted(set(wanted) - existing)
    if missing:
        raise CliError(f"topic {name!r} has no partition {missing[0]}")
    return [TopicPartition(name, p) for p in wanted]


def plan_offsets(
    consumer: Consumer,
    partitions: list[TopicPartition],
    current: Mapping[TopicPartition, int],
    *,
    to_earliest: bool,
    to_latest: bool,
    to_datetime: int | None,
    shift_by: int | None,
) -> dict[TopicPartition, int]:
    """The new offset of each partition (always within its first and end offsets)."""
    first = consumer.beginning_offsets(partitions)
    end = consumer.end_offsets(partitions)
    if to_earliest:
        return first
    if to_latest:
        return end
    if to_datetime is not None:
        found = consumer.offsets_for_times(dict.fromkeys(partitions, to_datetime))
        return {tp: end[tp] if (hit := found.get(tp)) is None else hit.offset for tp in partitions}
    assert shift_by is not None
    missing = [tp for tp in partitions if tp not in current]
    if missing:
        raise CliError(f"--shift-by needs a committed offset; {missing[0]} has none")
    return {tp: min(max(current[tp] + shift_by, first[tp]), end[tp]) for tp in partitions}


@groups.command("reset-offsets")
@click.argument("group")
@click.option(
    "--topic", "topic_specs", multiple=True, metavar="TOPIC[:P,...]", help="Reset this topic (repeatable)."
)
@click.option("--all-topics", is_flag=True, help="Reset every topic the group has committed offsets for.")
@click.option("--to-earliest", is_flag=True, help="To the first offset.")
@click.option("--to-latest", is_flag=True, help="To the end offset.")
@click.option(
    "--to-datetime",
    metavar="ISO-TIME",
    callback=timestamp_callback,
    help="To the first offset at or after this time.",
)
@click.option("--shift-by", type=int, metavar="N", help="Move the committed offset by N (may be negative).")
@click.option("--execute", is_flag=True, help="Commit the new offsets (without it: a dry run).")
@click.option("--dry-run", is_flag=True, help="Only print the planned offsets (the default).")
@format_option
@client_options
def reset_offsets(
    group: str,
    topic_specs: tuple[str, ...],
    all_topics: bool,
    to_earliest: bool,
    to_latest: bool,
    to_datetime: int | None,
    shift_by: int | None,
    execute: bool,
    dry_run: bool,
    fmt: str | None,
) -> None:
    """Plan, or with --execute commit, new offsets for GROUP (which must have no active members)."""
    if bool(topic_specs) == all_topics:
        raise click.UsageError("give --topic TOPIC (repeatable) or --all-topics")
    if sum((to_earliest, to_latest, to_datetime is not None, shift_by is not None)) != 1:
        raise click.UsageError("give exactly one of --to-earliest, --to-latest, --to-datetime and --shift-by")
    if execute and dry_run:
        raise click.UsageError("--execute and --dry-run exclude each other")
    settings = client_settings()
    current = _committed(group)
    with offsets_consumer(settings) as consumer:
        if all_topics:
            partitions = sorted(current)
            if not partitions:
                raise CliError(f"group {group!r} has no committed offsets")
        else:
            partitions = sorted({tp for spec in topic_specs for tp in _parse_topic(spec, consumer)})
        planned = plan_offsets(
            consumer,
            partitions,
            current,
            to_earliest=to_earliest,
            to_latest=to_latest,
            to_datetime=to_datetime,
            shift_by=shift_by,
        )
    if execute:
        with admin_client(settings) as admin:
            described = admin.describe_consumer_groups([group]).get(group)
            state = described.state if described is not None else ""
            if state.lower() not in _INACTIVE or (described is not None and described.members):
                raise CliError(
                    f"group {group!r} is active (state {state}); offsets can be reset only while it "
                    "has no members: stop its consumers first"
                )
            admin.alter_consumer_group_offsets(
                group, {tp: OffsetAndMetadata(offset) for tp, offset in planned.items()}
            )
    rows = [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "current_offset": current.get(tp),
            "new_offset": planned[tp],
        }
        for tp in partitions
    ]
    data = {"group": group, "executed": execute, "partitions": rows}

    def render() -> Iterable[RenderableType]:
        title = f"group {group}: " + ("new offsets" if execute else "planned offsets")
        result = table(
            "TOPIC",
            "PARTITION",
            "CURRENT OFFSET",
            "NEW OFFSET",
            title=title,
            numeric=("PARTITION", "CURRENT OFFSET", "NEW OFFSET"),
        )
        for r in rows:
            result.add_row(*(cell(r[k]) for k in ("topic", "partition", "current_offset", "new_offset")))
        return [result]

    emit(fmt, data, render)
    if not execute:
        click.echo("dry run: no offset changed; --execute commits these", err=True)


@groups.command()
@click.argument("names", metavar="GROUP...", nargs=-1, required=True)
@client_options
def delete(names: tuple[str, ...]) -> None:
    """Delete consumer groups (their committed offsets); each must have no active members."""
    with admin_client(client_settings()) as admin:
        results = admin.delete_consumer_groups(list(dict.fromkeys(names)))
    failed = False
    for name in dict.fromkeys(names):
        error = results.get(name)
        if error is None and name in results:
            click.echo(f"deleted group {name}", err=True)
        else:
            failed = True
            why = "no answer from the broker" if error is None else describe_error(error)
            click.echo(f"kaflux: error: group {name}: {why}", err=True)
    if failed:
        raise click.exceptions.Exit(1)


@groups.command("remove-members")
@click.argument("group")
@click.argument("instance_ids", metavar="[INSTANCE_ID]...", nargs=-1)
@click.option("--member-id", "member_ids", multiple=True, help="A member by its member id (repeatable).")
@click.option("--all", "remove_all", is_flag=True, help="Every member of the group.")
@click.option("--reason", help="Appended to the reason the coordinator records.")
@client_options
def remove_members(
    group: str,
    instance_ids: tuple[str, ...],
    member_ids: tuple[str, ...],
    remove_all: bool,
    reason: str | None,
) -> None:
    """Remove members from GROUP, by group.instance.id (static members, e.g. whose host is gone),
    --member-id, or --all; the group rebalances at once."""
    from kaflux.admin import MemberToRemove  # imported when the command runs: --help stays fast

    named = [MemberToRemove(i) for i in instance_ids] + [MemberToRemove(member_id=m) for m in member_ids]
    if remove_all == bool(named):
        raise click.UsageError("name members (INSTANCE_ID... or --member-id) or give --all, not both")
    with admin_client(client_settings()) as admin:
        removed = admin.remove_members_from_consumer_group(
            group, None if remove_all else named, reason=reason
        )
    for member in removed:
        click.echo(f"removed {member} from group {group}", err=True)
    if not removed:
        click.echo(f"group {group} has no members", err=True)
