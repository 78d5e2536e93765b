"""``kaflux --help`` stays cheap (issue 32, point 8): it lists the commands without importing
their modules, rich, the clients or the wire protocol; and the list it shows is each command's
own short help. (Asserted on the modules a child process loaded, not on time; the times are in
docs/benchmarks.md, from bench/bench_startup.py.) [test]"""

from __future__ import annotations

import json
import subprocess
import sys

import click

from kaflux.cli.main import _SUBCOMMANDS, cli

from support.cli_helpers import cli_env

#: what --help must not load: heavy, and none of it needed to print the command list
HEAVY = (
    "kaflux.cli.",  # the subcommands' modules (kaflux.cli.main itself is needed)
    "kaflux.admin",
    "kaflux.consumer",
    "kaflux.producer",
    "kaflux.network",
    "kaflux.protocol",
    "kaflux.records",
    "rich",
    "pyarrow",
    "ssl",
    "confluent_kafka",
)

_CHILD = """
import json, sys
from kaflux.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit as e:
    code = e.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def loaded_by(*args: str) -> tuple[str, set[str]]:
    result = subprocess.run(
        [sys.executable, "-c", _CHILD, *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=cli_env(),
        timeout=60,
        check=True,
    )
    report = json.loads(result.stderr.decode().strip().splitlines()[-1])
    assert report["code"] in (0, None)
    return result.stdout.decode(), set(report["modules"])


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m != "kaflux.cli.main" and any(m.startswith(h) for h in HEAVY))


def test_help_lists_every_command_without_importing_heavy_modules() -> None:
    out, modules = loaded_by("--help")
    for name in _SUBCOMMANDS:
        assert f"  {name} " in out
    assert "kaflux.cli.main" in modules  # the check sees what the child loaded
    assert heavy(modules) == []


def test_version_imports_nothing_heavy_either() -> None:
    out, modules = loaded_by("--version")
    assert out.startswith("kaflux, version ")
    assert heavy(modules) == []


def test_the_listed_short_help_is_each_command_s_own() -> None:
    ctx = click.Context(cli)
    for name, (_, _, listed) in _SUBCOMMANDS.items():
        command = cli.get_command(ctx, name)
        assert command is not None
        assert command.get_short_help_str(limit=1000) == listed, name
