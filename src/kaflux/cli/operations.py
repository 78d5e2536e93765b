"""``kaflux configs``, ``kaflux acls``, ``kaflux users`` and ``kaflux transactions``: the
operations side of the admin client. [app]"""

from __future__ import annotations

import getpass
import os
import sys
from collections.abc import Iterable

import click
from rich.console import RenderableType

from kaflux.admin import (
    AclBinding,
    AclBindingFilter,
    AlterConfigOp,
    ConfigResource,
)
from kaflux.admin.scram import UserScramCredentialDeletion, UserScramCredentialUpsertion
from kaflux.cli.clients import admin_client
from kaflux.cli.main import CliError, client_options, client_settings
from kaflux.cli.output import cell, emit, format_option, key_values_callback, table
from kaflux.errors import InvalidArgumentError

# -- configs ---------------------------------------------------------------------------------------


@click.group()
def configs() -> None:
    """Show and change topic and broker configs."""


def _resource(topic: str | None, broker: int | None) -> ConfigResource:
    if (topic is None) == (broker is None):
        raise CliError("name a TOPIC or give --broker ID (one of the two)")
    return ConfigResource("topic", topic) if topic is not None else ConfigResource("broker", str(broker))


@configs.command("describe")
@click.argument("topic", metavar="[TOPIC]", required=False)
@click.option("--broker", type=click.IntRange(min=0), help="A broker's configs instead of a topic's.")
@click.option("--all", "show_all", is_flag=True, help="Also the configs left at their defaults.")
@format_option
@client_options
def describe_configs(topic: str | None, broker: int | None, show_all: bool, fmt: str | None) -> None:
    """Show a topic's (or a broker's) configs: value, source, and flags."""
    resource = _resource(topic, broker)
    with admin_client(client_settings()) as admin:
        entries = admin.describe_configs([resource])[resource]
    data = [
        {
            "name": e.name,
            "value": e.value,
            "source": e.source.name,
            "sensitive": e.is_sensitive,
            "read_only": e.is_read_only,
        }
        for e in entries.values()
        if show_all or not e.is_default
    ]

    def render() -> Iterable[RenderableType]:
        rows = table(
            "CONFIG", "VALUE", "SOURCE", "FLAGS", title=f"{resource.type.name.lower()} {resource.name}"
        )
        for d in data:
            flags = ", ".join(f for f in ("sensitive", "read_only") if d[f])
            value = "(sensitive)" if d["sensitive"] else cell(d["value"])
            rows.add_row(str(d["name"]), value, str(d["source"]), flags)
        return [rows]

    emit(fmt, data, render)


@configs.command("alter")
@click.argument("topic", metavar="[TOPIC]", required=False)
@click.option("--broker", type=click.IntRange(min=0), help="Change a broker's configs instead.")
@click.option(
    "--set",
    "to_set",
    metavar="KEY=VALUE",
    multiple=True,
    callback=key_values_callback,
    help="Set a config (repeatable).",
)
@click.option("--delete", "to_delete", metavar="KEY", multiple=True, help="Reset a config to its default.")
@click.option("--dry-run", is_flag=True, help="Only let the broker check the changes.")
@client_options
def alter_configs(
    topic: str | None,
    broker: int | None,
    to_set: tuple[tuple[str, str], ...],
    to_delete: tuple[str, ...],
    dry_run: bool,
) -> None:
    """Set or reset configs of a topic or a broker."""
    resource = _resource(topic, broker)
    ops = [AlterConfigOp(k, v, "set") for k, v in to_set] + [
        AlterConfigOp(k, None, "delete") for k in to_delete
    ]
    if not ops:
        raise CliError("nothing to change: give --set KEY=VALUE or --delete KEY")
    with admin_client(client_settings()) as admin:
        admin.incremental_alter_configs({resource: ops}, validate_only=dry_run)
    verb = "would change" if dry_run else "changed"
    click.echo(f"{verb} {len(ops)} config(s) of {resource.type.name.lower()} {resource.name}", err=True)


# -- ACLs ------------------------------------------------------------------------------------------


@click.group()
def acls() -> None:
    """List, create and delete ACLs."""


def _acl_options(f: click.decorators.FC) -> click.decorators.FC:
    for option in reversed(
        [
            click.option("--resource-type", default=None, help="topic, group, cluster, transactional_id..."),
            click.option("--resource-name", default=None, help="The resource's name (or prefix)."),
            click.option(
                "--pattern-type", default=None, help="literal or prefixed (filters: also any, match)."
            ),
            click.option("--principal", default=None, help="e.g. User:alice"),
            click.option("--host", default=None, help="The client host ('*': any)."),
            click.option("--operation", default=None, help="read, write, describe, all..."),
            click.option("--permission", default=None, help="allow or deny."),
        ]
    ):
        f = option(f)
    return f


def _acl_json(b: AclBinding) -> dict[str, object]:
    return {
        "resource_type": b.resource_type.name.lower(),
        "resource_name": b.name,
        "pattern_type": b.pattern_type.name.lower(),
        "principal": b.principal,
        "host": b.host,
        "operation": b.operation.name.lower(),
        "permission": b.permission.name.lower(),
    }


def _emit_acls(fmt: str | None, bindings: list[AclBinding]) -> None:
    data = [_acl_json(b) for b in bindings]

    def render() -> Iterable[RenderableType]:
        rows = table("RESOURCE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION")
        for d in data:
            rows.add_row(*(str(v) for v in d.values()))
        return [rows]

    emit(fmt, data, render)


def _filter(**fields: str | None) -> AclBindingFilter:
    try:
        return AclBindingFilter(
            fields["resource_type"] or "any",
            fields["resource_name"],
            fields["pattern_type"] or "any",
            fields["principal"],
            fields["host"],
            fields["operation"] or "any",
            fields["permission"] or "any",
        )
    except InvalidArgumentError as exc:
        raise CliError(str(exc)) from None


@acls.command("list")
@_acl_options
@format_option
@client_options
def list_acls(fmt: str | None, **fields: str | None) -> None:
    """List the ACLs matching the options (none: every ACL)."""
    with admin_client(client_settings()) as admin:
        found = admin.describe_acls(_filter(**fields))
    _emit_acls(fmt, found)


@acls.command("create")
@_acl_options
@client_options
def create_acl(**fields: str | None) -> None:
    """Create one ACL (--pattern-type defaults to literal, --host to '*')."""
    missing = [
        k for k in ("resource_type", "resource_name", "principal", "operation", "permission") if not fields[k]
    ]
    if missing:
        raise CliError("an ACL needs " + ", ".join("--" + m.replace("_", "-") for m in missing))
    try:
        binding = AclBinding(
            str(fields["resource_type"]),
            str(fields["resource_name"]),
            fields["pattern_type"] or "literal",
            str(fields["principal"]),
            fields["host"] or "*",
            str(fields["operation"]),
            str(fields["permission"]),
        )
    except InvalidArgumentError as exc:
        raise CliError(str(exc)) from None
    with admin_client(client_settings()) as admin:
        admin.create_acls([binding])
    click.echo(f"created {binding!r}", err=True)


@acls.command("delete")
@_acl_options
@format_option
@client_options
def delete_acls(fmt: str | None, **fields: str | None) -> None:
    """Delete the ACLs matching the options; prints what was deleted."""
    if not any(fields.values()):
        raise CliError("give at least one option to say which ACLs to delete")
    with admin_client(client_settings()) as admin:
        deleted = admin.delete_acls([acl_filter := _filter(**fields)])[acl_filter]
    _emit_acls(fmt, deleted)


# -- SCRAM users -----------------------------------------------------------------------------------


@click.group()
def users() -> None:
    """List SCRAM users, set their passwords, delete them."""


@users.command("list")
@click.argument("names", metavar="[USER...]", nargs=-1)
@format_option
@client_options
def list_users(names: tuple[str, ...], fmt: str | None) -> None:
    """List the users with SCRAM credentials (or only USER...)."""
    with admin_client(client_settings()) as admin:
        found = admin.describe_user_scram_credentials(list(names) or None)
    data = [
        {
            "user": d.user,
            "credentials": [
                {"mechanism": c.mechanism.label, "iterations": c.iterations} for c in d.credential_infos
            ],
        }
        for d in found.values()
    ]

    def render() -> Iterable[RenderableType]:
        rows = table("USER", "MECHANISM", "ITERATIONS", numeric=("ITERATIONS",))
        for d in found.values():
            for c in d.credential_infos:
                rows.add_row(d.user, c.mechanism.label, cell(c.iterations))
        return [rows]

    emit(fmt, data, render)


@users.command("set-password")
@click.argument("user")
@click.option(
    "--mechanism", default="SCRAM-SHA-512", show_default=True, help="SCRAM-SHA-256 or SCRAM-SHA-512."
)
@click.option("--iterations", type=click.IntRange(4096, 16384), default=4096, show_default=True)
@click.option(
    "--password-env",
    metavar="VAR",
    help="Read the password from this environment variable (default: prompt, or one line of stdin).",
)
@client_options
def set_password(user: str, mechanism: str, iterations: int, password_env: str | None) -> None:
    """Set USER's SCRAM password (salted here; the password itself is never sent)."""
    if password_env is not None:
        password = os.environ.get(password_env)
        if not password:
            raise CliError(f"the environment variable {password_env} is not set or empty")
    elif sys.stdin.isatty():
        password = getpass.getpass(f"password for {user}: ")
    else:
        password = sys.stdin.readline().rstrip("\n")
    try:
        upsertion = UserScramCredentialUpsertion(user, mechanism, password, iterations)
    except InvalidArgumentError as exc:
        raise CliError(str(exc)) from None
    with admin_client(client_settings()) as admin:
        admin.alter_user_scram_credentials([upsertion])
    click.echo(f"set the {upsertion.mechanism.label} password of {user}", err=True)


@users.command("delete")
@click.argument("user")
@click.option(
    "--mechanism", default="SCRAM-SHA-512", show_default=True, help="SCRAM-SHA-256 or SCRAM-SHA-512."
)
@client_options
def delete_user(user: str, mechanism: str) -> None:
    """Delete USER's SCRAM credential for one mechanism."""
    try:
        deletion = UserScramCredentialDeletion(user, mechanism)
    except InvalidArgumentError as exc:
        raise CliError(str(exc)) from None
    with admin_client(client_settings()) as admin:
        admin.alter_user_scram_credentials(deletions=[deletion])
    click.echo(f"deleted the {deletion.mechanism.label} credential of {user}", err=True)


# -- transactions ----------------------------------------------------------------------------------


@click.group()
def transactions() -> None:
    """List, describe and abort transactions."""


@transactions.command("list")
@click.option("--state", "states", multiple=True, help="Only transactions in this state, e.g. Ongoing.")
@format_option
@client_options
def list_transactions(states: tuple[str, ...], fmt: str | None) -> None:
    """List the transactional ids the coordinators know."""
    with admin_client(client_settings()) as admin:
        found = admin.list_transactions(states=states)
    data = [
        {"transactional_id": t.transactional_id, "producer_id": t.producer_id, "state": t.state}
        for t in found
    ]

    def render() -> Iterable[RenderableType]:
        rows = table("TRANSACTIONAL ID", "PRODUCER ID", "STATE", numeric=("PRODUCER ID",))
        for d in data:
            rows.add_row(str(d["transactional_id"]), cell(d["producer_id"]), str(d["state"]))
        return [rows]

    emit(fmt, data, render)


@transactions.command("describe")
@click.argument("ids", metavar="TRANSACTIONAL_ID...", nargs=-1, required=True)
@format_option
@client_options
def describe_transactions(ids: tuple[str, ...], fmt: str | None) -> None:
    """Describe transactions: state, producer, timeout and partitions."""
    with admin_client(client_settings()) as admin:
        found = admin.describe_transactions(ids)
    data = [
        {
            "transactional_id": d.transactional_id,
            "state": d.state,
            "producer_id": d.producer_id,
            "producer_epoch": d.producer_epoch,
            "timeout_ms": d.transaction_timeout_ms,
            "start_time_ms": d.start_time_ms,
            "partitions": sorted(f"{tp.topic}-{tp.partition}" for tp in d.partitions),
        }
        for d in found.values()
    ]

    def render() -> Iterable[RenderableType]:
        rows = table("TRANSACTIONAL ID", "STATE", "PRODUCER", "EPOCH", "TIMEOUT MS", "PARTITIONS")
        for d in data:
            rows.add_row(
                *(cell(d[k]) for k in ("transactional_id", "state", "producer_id", "producer_epoch")),
                cell(d["timeout_ms"]),
                cell(d["partitions"]),
            )
        return [rows]

    emit(fmt, data, render)


@transactions.command("abort")
@click.argument("ids", metavar="TRANSACTIONAL_ID...", nargs=-1, required=True)
@client_options
def abort_transactions(ids: tuple[str, ...]) -> None:
    """Abort the open transactions of these ids by fencing their producers (their epoch is
    bumped; the coordinator aborts what they left open)."""
    with admin_client(client_settings()) as admin:
        fenced = admin.fence_producers(ids)
    for tid, pe in fenced.items():
        click.echo(f"fenced {tid} (producer id {pe.producer_id}, epoch {pe.epoch})", err=True)
