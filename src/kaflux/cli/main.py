"""The ``kaflux`` command: its click group, the options every client command shares, and
error handling. [app]

Client settings come from three places, later ones winning: ``--config FILE`` (a Java-style
properties file; also ``--command-config``, its only name on ``topics create``), ``-X KEY=VALUE``
(repeatable, any client setting, security included, as kcat does), and ``-b/--bootstrap-servers``
(default: ``$KAFLUX_BOOTSTRAP_SERVERS``). Each client a
command builds gets the settings its kind knows (a producer setting does not reach a consumer),
and every key no kaflux client knows, which its config class then refuses by name.

Errors end the command with one line on stderr and a non-zero status (2 for a usage error), never
a traceback (``KAFLUX_TRACEBACK=1`` shows it); SIGTERM is handled as Ctrl-C.
"""

from __future__ import annotations

import importlib
import os
import re
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from types import FrameType
from typing import TYPE_CHECKING, Any, Literal, NoReturn, TypeVar

import click

if TYPE_CHECKING:
    from pathlib import Path

# logging, pathlib, socket, time and traceback are imported where used: `kaflux --help` and
# `--version` load as little as they can (tests/cli/test_cli_startup.py)

ClientKind = Literal["consumer", "producer", "admin"]
F = TypeVar("F", bound=Callable[..., Any])

ENV_BOOTSTRAP = "KAFLUX_BOOTSTRAP_SERVERS"
_META = "kaflux.cli.settings"


class CliError(click.ClickException):
    """A failure the command explains in one line (exit status 1)."""


# --- client settings ---------------------------------------------------------------------------------


def read_properties(path: Path) -> dict[str, str]:
    """Parse a Java ``.properties`` file: ``key=value``, ``key: value`` or ``key value`` lines,
    ``#``/``!`` comments, backslash line continuations and escapes (``\\t``, ``\\uXXXX``...)."""
    text = path.read_text(encoding="utf-8")
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:  # an odd number of backslashes: the line continues
            pending += line[:-1]
            continue
        logical.append(pending + line)
        pending = ""
    if pending:
        logical.append(pending)
    result: dict[str, str] = {}
    for line in logical:
        match = re.match(r"((?:\\.|[^\\=:\s])*)\s*[=:]?\s*(.*)", line, re.DOTALL)
        assert match is not None  # the pattern matches any string
        key, value = _unescape(match[1]), _unescape(match[2])
        if key:
            result[key] = value
    return result


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        escaped = match[1]
        if escaped.startswith("u"):
            return chr(int(escaped[1:], 16))
        return _ESCAPES.get(escaped, escaped)

    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", one, text)


def _known_keys() -> dict[ClientKind, frozenset[str]]:
    from kaflux.config import AdminConfig, ConsumerConfig, ProducerConfig

    return {
        "consumer": frozenset(ConsumerConfig.keys()),
        "producer": frozenset(ProducerConfig.keys()),
        "admin": frozenset(AdminConfig.keys()),
    }


#: how long a command waits for a first broker to accept a connection, unless --timeout says
DEFAULT_TIMEOUT_S = 5.0
_RETRY_S = 0.2
_ATTEMPT_S = 2.0


class ClientSettings:
    """The client settings a command was given: ``--config``, then ``-X``, then ``-b``; and
    ``--timeout``, how long to wait for a first broker to accept a connection."""

    def __init__(
        self,
        bootstrap_servers: str | None = None,
        overrides: list[tuple[str, str]] | None = None,
        config_file: Path | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.overrides: list[tuple[str, str]] = [] if overrides is None else overrides
        self.config_file = config_file
        self.timeout = timeout
        self._reached = False

    def ensure_reachable(self) -> None:
        """Wait up to :attr:`timeout` seconds for one of the bootstrap servers to accept a TCP
        connection (once per command); raise CliError naming each address and why not. Commands
        call it once their client exists (its settings checked) and before they need a broker.

        A command against a wrong or dead address fails in seconds, as kcat does, instead of
        waiting out the clients' 60 s API timeouts. Only reaching a broker is bounded so: a
        slow answer from a live cluster still gets the client's own timeouts.
        """
        if self._reached:
            return
        import time

        servers = self.merged()["bootstrap.servers"]
        addresses = [a.strip() for a in servers.split(",") if a.strip()]
        deadline = time.monotonic() + self.timeout
        errors: dict[str, str] = {}
        while True:
            for address in addresses:
                # at most 2 s an attempt, so that a black-holed first address leaves time for the rest
                error = _try_connect(address, min(_ATTEMPT_S, max(0.05, deadline - time.monotonic())))
                if error is None:
                    self._reached = True
                    return
                errors[address] = error
            if time.monotonic() + _RETRY_S >= deadline:
                break
            time.sleep(_RETRY_S)  # a broker may be starting: try again until the deadline
        tried = ", ".join(f"{address} ({why})" for address, why in errors.items())
        raise CliError(
            f"no broker reachable at {tried} within {self.timeout:g} s: check -b/--bootstrap-servers, "
            "or wait longer with --timeout"
        )

    def merged(self) -> dict[str, str]:
        """Every setting given, as strings (the config classes parse them)."""
        result: dict[str, str] = {}
        if self.config_file is not None:
            try:
                result.update(read_properties(self.config_file))
            except (OSError, UnicodeDecodeError, ValueError) as e:
                raise CliError(f"cannot read --config {self.config_file}: {e}") from None
        result.update(self.overrides)
        if self.bootstrap_servers:
            result["bootstrap.servers"] = self.bootstrap_servers
        if not result.get("bootstrap.servers", "").strip():
            raise click.UsageError(
                f"no bootstrap servers: give -b HOST:PORT (or set {ENV_BOOTSTRAP}, -X bootstrap.servers=..., "
                "or bootstrap.servers in --config)"
            )
        return result

    def for_client(self, kind: ClientKind, **extra: object) -> dict[str, object]:
        """The settings for one client of ``kind``, with ``extra`` on top: those its kind knows,
        and any that no kaflux client knows (its config class rejects them by name)."""
        known = _known_keys()
        anyone = frozenset().union(*known.values())
        config: dict[str, object] = {
            key: value for key, value in self.merged().items() if key in known[kind] or key not in anyone
        }
        config.update(extra)
        return config


def _try_connect(address: str, timeout: float) -> str | None:
    """None when ``address`` (``[SCHEME://]host:port``) accepts a TCP connection within
    ``timeout`` seconds, else why not."""
    hostport = address.split("://", 1)[-1]
    host, sep, port_text = hostport.rpartition(":")
    if not sep or not port_text.isdigit():
        return "not of the form host:port"
    host = host.strip("[]")
    import socket

    try:
        with socket.create_connection((host, int(port_text)), timeout=timeout):
            return None
    except socket.gaierror as e:
        return f"cannot resolve {host!r}: {e.strerror}"
    except TimeoutError:
        return "connect timed out"
    except OSError as e:
        return e.strerror or type(e).__name__


def _store(name: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        settings: ClientSettings = ctx.meta.setdefault(_META, ClientSettings())
        if name == "bootstrap":
            settings.bootstrap_servers = value or None
        elif name == "timeout":
            settings.timeout = value
        elif name == "overrides":
            from kaflux.cli.output import key_values_callback  # rich: not for --version or --help

            settings.overrides = list(key_values_callback(ctx, param, value))
        else:
            settings.config_file = value

    return callback


def client_options(f: F) -> F:
    """``-b/--bootstrap-servers``, ``-X KEY=VALUE``, ``--config/--command-config FILE`` and
    ``--timeout SECONDS``; read them in the command with :func:`client_settings`."""
    return _client_options(("--config", "--command-config"))(f)


def client_options_without_config(f: F) -> F:
    """:func:`client_options` for a command whose own ``--config`` means something else
    (``topics create``): the properties file is ``--command-config`` there, as in Kafka's tools."""
    return _client_options(("--command-config",))(f)


def client_options_without_timeout(f: F) -> F:
    """:func:`client_options` for a command whose own ``--timeout`` means more (``consume``): it
    sets :attr:`ClientSettings.timeout` itself."""
    return _client_options(("--config", "--command-config"), timeout=False)(f)


def _client_options(file_option: tuple[str, ...], *, timeout: bool = True) -> Callable[[F], F]:
    def decorate(f: F) -> F:
        from pathlib import Path

        if timeout:
            f = click.option(
                "--timeout",
                type=click.FloatRange(min=0),
                default=DEFAULT_TIMEOUT_S,
                show_default=True,
                metavar="SECONDS",
                expose_value=False,
                callback=_store("timeout"),
                help="How long to wait for a broker to accept a connection.",
            )(f)
        f = click.option(
            *file_option,
            "config_file",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            metavar="FILE",
            expose_value=False,
            callback=_store("config"),
            help="A Java-style properties file of client settings.",
        )(f)
        f = click.option(
            "-X",
            "overrides",
            metavar="KEY=VALUE",
            multiple=True,
            expose_value=False,
            callback=_store("overrides"),
            help="A client setting, e.g. -X security.protocol=SASL_SSL (repeatable).",
        )(f)
        return click.option(
            "-b",
            "--bootstrap-servers",
            metavar="HOST:PORT[,...]",
            envvar=ENV_BOOTSTRAP,
            show_envvar=True,
            expose_value=False,
            callback=_store("bootstrap"),
            help="Brokers to bootstrap from.",
        )(f)

    return decorate


def client_settings() -> ClientSettings:
    """The current command's client settings."""
    settings: ClientSettings = click.get_current_context().meta.setdefault(_META, ClientSettings())
    return settings


# --- the group ---------------------------------------------------------------------------------------

#: subcommand -> (module, attribute, its short help); the module is imported when the command is
#: used (they import this module), and ``kaflux --help`` lists the short help without importing
#: any (a test checks they match the commands' own)
_SUBCOMMANDS: Mapping[str, tuple[str, str, str]] = {
    "acls": ("kaflux.cli.operations", "acls", "List, create and delete ACLs."),
    "broker": ("kaflux.cli.broker", "broker", "Run an embedded development broker."),
    "configs": ("kaflux.cli.operations", "configs", "Show and change topic and broker configs."),
    "consume": (
        "kaflux.cli.consume",
        "consume",
        "Print the records of TOPIC until Ctrl-C (or -n COUNT records).",
    ),
    "demo": (
        "kaflux.cli.demo",
        "demo",
        "Produce page-view events and read them back with the plain clients.",
    ),
    "groups": (
        "kaflux.cli.groups",
        "groups",
        "List, describe and inspect consumer groups; reset or delete their offsets; remove members.",
    ),
    "produce": (
        "kaflux.cli.produce",
        "produce",
        "Send each line of FILE (default: stdin) to TOPIC as a record's value.",
    ),
    "quotas": (
        "kaflux.cli.tokens_quotas",
        "quotas",
        "Client quotas (byte rates, request percentage...) of users, client ids and IPs.",
    ),
    "share": (
        "kaflux.cli.share",
        "share",
        "Share groups (KIP-932): queue semantics on Kafka topics; consume, and administer groups.",
    ),
    "tokens": (
        "kaflux.cli.tokens_quotas",
        "tokens",
        "Delegation tokens: create, renew, expire, describe (the brokers need delegation.token.secret.key).",
    ),
    "topics": (
        "kaflux.cli.topics",
        "topics",
        "List, describe, create and delete topics; look up their offsets.",
    ),
    "transactions": ("kaflux.cli.operations", "transactions", "List, describe and abort transactions."),
    "users": ("kaflux.cli.operations", "users", "List SCRAM users, set their passwords, delete them."),
}


class _Group(click.Group):
    """The top-level group, loading each subcommand's module when it is needed."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *_SUBCOMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        spec = _SUBCOMMANDS.get(cmd_name)
        if spec is None:
            return super().get_command(ctx, cmd_name)
        command = getattr(importlib.import_module(spec[0]), spec[1])
        assert isinstance(command, click.Command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of ``--help``, from :data:`_SUBCOMMANDS`: no subcommand module (nor
        what they import: rich, the clients, the wire protocol) is loaded to show it."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = []
        for name in names:
            spec = _SUBCOMMANDS.get(name)
            if spec is None:
                command = super().get_command(ctx, name)
                if command is None or command.hidden:
                    continue
                rows.append((name, command.get_short_help_str(limit)))
            else:
                rows.append((name, _shorten(spec[2], limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _shorten(text: str, limit: int) -> str:
    """``text`` cut at a word to fit ``limit`` characters, as click shortens a command's help."""
    return click.Command(None, help=text).get_short_help_str(limit)


def _version() -> str:
    from kaflux import __version__  # the package's own attribute: no metadata scan at start-up

    return __version__


@click.group(
    cls=_Group,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(_version(), "-V", "--version", prog_name="kaflux")
@click.option("-v", "--verbose", count=True, help="Log more: -v for info, -vv for debug.")
def cli(verbose: int) -> None:
    """kaflux: consume, produce and administer Kafka from the shell.

    Client commands take -b/--bootstrap-servers (default $KAFLUX_BOOTSTRAP_SERVERS), -X KEY=VALUE
    for any client setting and --config FILE (a Java properties file). Listings print a table on
    a terminal and JSON otherwise (--format chooses).
    """
    import logging

    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="kaflux: %(levelname)s: %(name)s: %(message)s")


# --- the entry point ---------------------------------------------------------------------------------


def _one_line(text: str) -> str:
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    return lines[0] if lines else ""


def describe_error(error: BaseException) -> str:
    """An error in one line: its message, after its class name unless the message names it
    already (broker errors do) or the class says nothing more (ValueError, OSError...)."""
    from kaflux.errors import ConfigError, KafkaError

    message = _one_line(str(error))
    name = type(error).__name__
    if not message:
        return name
    plain = isinstance(error, OSError | ValueError) and not isinstance(error, KafkaError)
    if plain or isinstance(error, ConfigError) or name in message:
        return message
    return f"{name}: {message}"


def _fail(message: str, code: int) -> NoReturn:
    click.echo(f"kaflux: error: {message}", err=True)
    sys.exit(code)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Run the ``kaflux`` command and exit with its status."""
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        result = cli.main(
            args=list(argv) if argv is not None else None, prog_name="kaflux", standalone_mode=False
        )
        sys.stdout.flush()
    except click.UsageError as e:
        hint = f" (see '{e.ctx.command_path} --help')" if e.ctx is not None else ""
        _fail(_one_line(e.format_message()) + hint, e.exit_code)
    except click.ClickException as e:
        _fail(_one_line(e.format_message()), e.exit_code)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except (click.Abort, KeyboardInterrupt):
        click.echo("", err=True)
        sys.exit(130)
    except BrokenPipeError:
        # The reader went away (``kaflux consume | head``): nothing more to say to it.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(0)
    except Exception as e:
        if os.environ.get("KAFLUX_TRACEBACK"):
            import traceback

            traceback.print_exc()
        _fail(describe_error(e), 1)
    sys.exit(result if isinstance(result, int) else 0)


if __name__ == "__main__":
    main()
