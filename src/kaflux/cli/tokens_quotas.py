"""``kaflux tokens`` (delegation tokens, KIP-48) and ``kaflux quotas`` (client quotas, KIP-546). [app]

A token's HMAC is its secret: ``tokens create`` prints it (base64) once, with the
``sasl.jaas.config`` line a client logs in with; ``renew`` and ``expire`` take it back in base64.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from typing import TYPE_CHECKING

import click
from rich.console import RenderableType

from kaflux.cli.clients import admin_client
from kaflux.cli.main import client_options, client_settings
from kaflux.cli.output import cell, emit, format_option, print_json, table

if TYPE_CHECKING:
    from kaflux.admin import DelegationToken


@click.group()
def tokens() -> None:
    """Delegation tokens: create, renew, expire, describe (the brokers need delegation.token.secret.key)."""


def _hmac(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise click.BadParameter(f"{text!r} is not a base64 HMAC (as tokens create prints it)") from None


def _token_json(token: DelegationToken) -> dict[str, object]:
    info = token.token_info
    return {
        "token_id": info.token_id,
        "owner": info.owner,
        "token_requester": info.token_requester,
        "renewers": list(info.renewers),
        "issue_timestamp_ms": info.issue_timestamp_ms,
        "expiry_timestamp_ms": info.expiry_timestamp_ms,
        "max_timestamp_ms": info.max_timestamp_ms,
    }


@tokens.command("create")
@click.option(
    "--renewer", "renewers", multiple=True, metavar="PRINCIPAL", help="Who may renew it (User:bob)."
)
@click.option("--owner", metavar="PRINCIPAL", help="Create it for this user (needs CREATE_TOKENS on it).")
@click.option("--max-lifetime", type=click.FloatRange(min=0), metavar="SECONDS", help="Cap its life.")
@client_options
def create(renewers: tuple[str, ...], owner: str | None, max_lifetime: float | None) -> None:
    """Create a delegation token; prints it as JSON with its HMAC and the jaas line to log in with."""
    with admin_client(client_settings()) as admin:
        token = admin.create_delegation_token(renewers=renewers, owner=owner, max_lifetime=max_lifetime)
    print_json({**_token_json(token), "hmac": token.password, "sasl_jaas_config": token.jaas_config()})


@tokens.command("renew")
@click.argument("hmac")
@click.option("--period", type=click.FloatRange(min=0), metavar="SECONDS", help="Default: the broker's.")
@client_options
def renew(hmac: str, period: float | None) -> None:
    """Renew the token whose base64 HMAC is HMAC; prints its new expiry (epoch ms)."""
    with admin_client(client_settings()) as admin:
        click.echo(admin.renew_delegation_token(_hmac(hmac), renew_period=period))


@tokens.command("expire")
@click.argument("hmac")
@click.option(
    "--period", type=float, metavar="SECONDS", help="Expire it this long from now (default: at once)."
)
@client_options
def expire(hmac: str, period: float | None) -> None:
    """Expire the token whose base64 HMAC is HMAC; prints its expiry (epoch ms)."""
    with admin_client(client_settings()) as admin:
        click.echo(admin.expire_delegation_token(_hmac(hmac), expiry_period=period))


@tokens.command("describe")
@click.option("--owner", "owners", multiple=True, metavar="PRINCIPAL", help="Only this owner's (repeatable).")
@format_option
@client_options
def describe(owners: tuple[str, ...], fmt: str | None) -> None:
    """List the delegation tokens the caller may see (without their HMACs)."""
    with admin_client(client_settings()) as admin:
        found = admin.describe_delegation_tokens(list(owners) or None)
    data = [_token_json(t) for t in found]

    def render() -> Iterable[RenderableType]:
        rows = table("TOKEN", "OWNER", "RENEWERS", "EXPIRES (ms)", "MAX (ms)")
        for t in data:
            rows.add_row(
                cell(t["token_id"]),
                cell(t["owner"]),
                ", ".join(t["renewers"]) or "-",  # type: ignore[arg-type]
                cell(t["expiry_timestamp_ms"]),
                cell(t["max_timestamp_ms"]),
            )
        return [rows]

    emit(fmt, data, render)


@click.group()
def quotas() -> None:
    """Client quotas (byte rates, request percentage...) of users, client ids and IPs."""


def _entity_options(f: click.decorators.FC) -> click.decorators.FC:
    for name in ("ip", "client-id", "user"):
        f = click.option(
            f"--{name}",
            name.replace("-", "_"),
            metavar="NAME",
            help=f"The {name} entity ('' : the default {name}).",
        )(f)
    return f


def _entries(user: str | None, client_id: str | None, ip: str | None) -> dict[str, str | None]:
    given = {"user": user, "client-id": client_id, "ip": ip}
    return {k: (v or None) for k, v in given.items() if v is not None}


@quotas.command("describe")
@_entity_options
@format_option
@client_options
def describe_quotas(user: str | None, client_id: str | None, ip: str | None, fmt: str | None) -> None:
    """Show the quotas of the entities named (all quotas when none is)."""
    from kaflux.admin import ClientQuotaFilterComponent

    components = [
        ClientQuotaFilterComponent.of_entity(k, v)
        if v is not None
        else ClientQuotaFilterComponent.of_default_entity(k)
        for k, v in _entries(user, client_id, ip).items()
    ]
    with admin_client(client_settings()) as admin:
        found = admin.describe_client_quotas(components)
    data = [{"entity": entity.entries, "quotas": values} for entity, values in found.items()]

    def render() -> Iterable[RenderableType]:
        rows = table("ENTITY", "QUOTAS")
        for d in data:
            entity = ", ".join(f"{k}={v if v is not None else '<default>'}" for k, v in d["entity"].items())  # type: ignore[attr-defined]
            rows.add_row(entity, ", ".join(f"{k}={v:g}" for k, v in d["quotas"].items()))  # type: ignore[attr-defined]
        return [rows]

    emit(fmt, data, render)


@quotas.command("alter")
@_entity_options
@click.option(
    "--set", "to_set", multiple=True, metavar="KEY=VALUE", help="Set a quota (producer_byte_rate=1048576)."
)
@click.option("--delete", "to_delete", multiple=True, metavar="KEY", help="Remove a quota.")
@click.option("--dry-run", is_flag=True, help="Only let the broker check the changes.")
@client_options
def alter_quotas(
    user: str | None,
    client_id: str | None,
    ip: str | None,
    to_set: tuple[str, ...],
    to_delete: tuple[str, ...],
    dry_run: bool,
) -> None:
    """Set or remove quotas of one entity (--user and/or --client-id, or --ip)."""
    from kaflux.admin import ClientQuotaAlteration, ClientQuotaEntity

    entries = _entries(user, client_id, ip)
    if not entries:
        raise click.UsageError("name the entity: --user, --client-id and/or --ip")
    if not to_set and not to_delete:
        raise click.UsageError("give --set KEY=VALUE or --delete KEY")
    ops: dict[str, float | None] = {}
    for item in to_set:
        key, sep, value = item.partition("=")
        try:
            ops[key] = float(value)
        except ValueError:
            raise click.BadParameter(f"{item!r}: expected KEY=NUMBER", param_hint="--set") from None
        if not sep or not key:
            raise click.BadParameter(f"{item!r}: expected KEY=NUMBER", param_hint="--set")
    ops.update(dict.fromkeys(to_delete))
    with admin_client(client_settings()) as admin:
        admin.alter_client_quotas(
            [ClientQuotaAlteration(ClientQuotaEntity(entries), ops)], validate_only=dry_run
        )
    click.echo(("checked" if dry_run else "altered") + f" quotas of {entries}", err=True)
