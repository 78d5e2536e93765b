"""Every ``kaflux`` command that talks to a broker fails within 10 s against a dead address, naming
it, and takes ``--timeout`` (issue 32, point 5). ``broker start --kind mock`` without
confluent-kafka says so. [test]"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import click
import pytest

from kaflux.cli.main import DEFAULT_TIMEOUT_S, cli

from support.cli_helpers import cli_env, kaflux_command

BOUND_S = 10.0

#: each command that talks to a broker, with the arguments it needs to get that far
COMMANDS: dict[tuple[str, ...], list[str]] = {
    ("acls", "create"): [
        "--resource-type",
        "topic",
        "--resource-name",
        "t",
        "--principal",
        "User:a",
        "--operation",
        "read",
        "--permission",
        "allow",
    ],
    ("acls", "delete"): ["--resource-type", "topic"],
    ("acls", "list"): [],
    ("configs", "alter"): ["t", "--set", "retention.ms=1"],
    ("configs", "describe"): ["t"],
    ("consume",): ["t"],
    ("demo",): [],
    ("groups", "delete"): ["g"],
    ("groups", "describe"): ["g"],
    ("groups", "lag"): ["g"],
    ("groups", "list"): [],
    ("groups", "remove-members"): ["g", "--all"],
    ("groups", "reset-offsets"): ["g", "--all-topics", "--to-earliest"],
    ("produce",): ["t"],
    ("quotas", "alter"): ["--client-id", "c", "--set", "producer_byte_rate=1"],
    ("quotas", "describe"): [],
    ("share", "alter-offsets"): ["g", "t:0=0"],
    ("share", "consume"): ["t", "-g", "g"],
    ("share", "delete"): ["g"],
    ("share", "delete-offsets"): ["g", "t"],
    ("share", "describe"): ["g"],
    ("share", "list"): [],
    ("share", "offsets"): ["g"],
    ("tokens", "create"): [],
    ("tokens", "describe"): [],
    ("tokens", "expire"): ["aG1hYw=="],
    ("tokens", "renew"): ["aG1hYw=="],
    ("topics", "create"): ["t"],
    ("topics", "delete"): ["t"],
    ("topics", "describe"): ["t"],
    ("topics", "list"): [],
    ("topics", "offsets"): ["t"],
    ("transactions", "abort"): ["x"],
    ("transactions", "describe"): ["x"],
    ("transactions", "list"): [],
    ("users", "delete"): ["u"],
    ("users", "list"): [],
    ("users", "set-password"): ["u", "--password-env", "KAFLUX_TEST_PASSWORD"],
}


def dead_address() -> str:
    """A loopback port nobody listens at (connections are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def _commands(
    command: click.Command, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None
            yield from _commands(sub, (*path, name))
    else:
        yield path, command


def _broker_commands() -> dict[tuple[str, ...], click.Command]:
    return {
        path: command
        for path, command in _commands(cli)
        if any("--bootstrap-servers" in p.opts for p in command.params if isinstance(p, click.Option))
    }


def test_every_command_with_a_bootstrap_option_is_checked_here_and_takes_timeout() -> None:
    found = _broker_commands()
    assert sorted(found) == sorted(COMMANDS)
    for path, command in found.items():
        timeouts = [p for p in command.params if "--timeout" in getattr(p, "opts", ())]
        assert timeouts, f"kaflux {' '.join(path)} has no --timeout"


def run_against(
    address: str, path: tuple[str, ...], *extra: str
) -> tuple[subprocess.CompletedProcess[bytes], float]:
    started = time.monotonic()
    result = subprocess.run(
        [*kaflux_command(), *path, *COMMANDS[path], "-b", address, *extra],
        input=b"a record\n",  # for produce
        capture_output=True,
        env=cli_env({"KAFLUX_TEST_PASSWORD": "secret"}),
        timeout=60,
        check=False,
    )
    return result, time.monotonic() - started


def assert_fails_naming(result: subprocess.CompletedProcess[bytes], address: str) -> None:
    stderr = result.stderr.decode(errors="replace")
    assert result.returncode == 1, (result.args, result.returncode, stderr)
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("kaflux: error: no broker reachable at " + address), (result.args, stderr)
    assert "Traceback" not in stderr


def test_every_command_fails_against_a_dead_address_naming_it() -> None:
    """With --timeout 1 each command gives up at once (the default bound is checked below on
    two commands: they share its code)."""
    address = dead_address()
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = pool.map(lambda p: run_against(address, p, "--timeout", "1"), COMMANDS)
        runs = dict(zip(COMMANDS, results, strict=True))
    for path, (result, elapsed) in runs.items():
        assert_fails_naming(result, address)
        assert elapsed < BOUND_S, f"kaflux {' '.join(path)} took {elapsed:.1f} s"


@pytest.mark.parametrize("path", [("topics", "list"), ("consume",)], ids=["topics-list", "consume"])
def test_the_default_timeout_fails_within_10_s(path: tuple[str, ...]) -> None:
    assert DEFAULT_TIMEOUT_S <= 5.0
    address = dead_address()
    result, elapsed = run_against(address, path)
    assert_fails_naming(result, address)
    assert f"within {DEFAULT_TIMEOUT_S:g} s" in result.stderr.decode()
    assert elapsed < BOUND_S


def test_broker_start_mock_without_confluent_kafka_says_so(tmp_path: Path) -> None:
    shadow = tmp_path / "confluent_kafka"
    shadow.mkdir()
    (shadow / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'confluent_kafka'\", name='confluent_kafka')\n"
    )
    result = subprocess.run(
        [*kaflux_command(), "broker", "start", "--kind", "mock"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=cli_env({"PYTHONPATH": str(tmp_path)}),
        timeout=60,
        check=False,
    )
    stderr = result.stderr.decode(errors="replace")
    assert result.returncode == 1, stderr
    assert "needs confluent-kafka" in stderr and "pip install confluent-kafka" in stderr
    assert "No module named 'confluent_kafka'" in stderr
    assert "did not start within" not in stderr
