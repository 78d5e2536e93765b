"""What a new user meets in the ``kaflux`` command (issue 18): ``--json`` envelopes checked by
field, ``--json-value``, ``--key-field`` on the line's object, exit codes 0/1/130 with a shortfall
message, ``broker start --env``, no thread tags in ``--help``, ``topics create`` on the mock
cluster. [test]"""

from __future__ import annotations

import re
import signal
import subprocess
import sys

import click

from kaflux.cli.broker import is_running
from kaflux.cli.main import cli
from kaflux.devbrokers import Broker
from kaflux.devbrokers.mock_cluster import MockCluster

from support.cli_helpers import (
    WAIT_S,
    LineReader,
    cli_env,
    create_topic,
    json_lines,
    kaflux_command,
    ok,
    produce,
    run_kaflux,
)

CLOSED = "127.0.0.1:9"


def error_line(result: subprocess.CompletedProcess[bytes]) -> str:
    assert result.returncode == 1, (result.returncode, result.stderr)
    lines = result.stderr.decode().strip().splitlines()
    return lines[-1]


def test_a_json_envelope_with_an_unknown_field_is_refused_naming_the_line_and_the_field() -> None:
    lines = b'\n{"customer": "c7", "amount": 3}\n'
    message = error_line(run_kaflux("produce", "orders", "--json", "-b", CLOSED, input=lines))
    assert "line 2: unknown field 'amount' in a --json envelope" in message
    assert "--json-value" in message  # what to use instead


def test_json_and_json_value_are_exclusive() -> None:
    result = run_kaflux("produce", "orders", "--json", "--json-value", "-b", CLOSED, input=b"")
    assert result.returncode == 2 and b"at most one of --json and --json-value" in result.stderr


def test_json_value_sends_each_object_keyed_by_the_line_s_field(kafka: Broker, topic_name: str) -> None:
    b = kafka.bootstrap_servers
    create_topic(b, topic_name, 1)
    lines = ['{"customer": "c7", "amount": 12}', '{"customer": 8, "amount": 3}']
    text = "\n".join(lines) + "\n"
    ok(
        run_kaflux(
            "produce", topic_name, "--json-value", "--key-field", "customer", "-b", b, input=text.encode()
        )
    )
    records = json_lines(
        run_kaflux("consume", topic_name, "--from-beginning", "-n", "2", "--timeout", "30", "-b", b)
    )
    assert [(r["key"], r["value"]) for r in records] == [("c7", lines[0]), ("8", lines[1])]


def test_key_field_names_the_fields_the_line_has_when_it_is_missing() -> None:
    message = error_line(
        run_kaflux("produce", "t", "--json-value", "--key-field", "id", "-b", CLOSED, input=b'{"user": 1}\n')
    )
    assert "line 1: the line has no field 'id' for --key-field (its fields: user)" in message


def test_an_interrupted_consume_says_it_stopped_short_and_exits_130(kafka: Broker, topic_name: str) -> None:
    b = kafka.bootstrap_servers
    create_topic(b, topic_name, 1)
    produce(b, topic_name, {0: [b"r"] * 3})
    with subprocess.Popen(
        [*kaflux_command(), "consume", topic_name, "--from-beginning", "-n", "5000", "-b", b],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(),
    ) as child:
        try:
            assert child.stdout is not None and child.stderr is not None
            stdout, errors = LineReader(child.stdout), LineReader(child.stderr)
            for _ in range(3):
                stdout.next_line()
            child.send_signal(signal.SIGINT)
            child.wait(timeout=WAIT_S)
            stderr = errors.rest().decode()
            stdout.rest()
        finally:
            if child.poll() is None:
                child.kill()
    assert child.returncode == 130
    assert "interrupted after 3 of 5000 records" in stderr and "Traceback" not in stderr


def test_consume_exit_codes_success_and_error(kafka: Broker, topic_name: str) -> None:
    b = kafka.bootstrap_servers
    create_topic(b, topic_name, 1)
    produce(b, topic_name, {0: [b"r"] * 2})
    assert run_kaflux("consume", topic_name, "--from-beginning", "-n", "2", "-b", b).returncode == 0
    short = run_kaflux("consume", topic_name, "--from-beginning", "-n", "5", "--timeout", "1", "-b", b)
    assert "only 2 of 5 records arrived" in error_line(short)


def test_broker_start_env_exports_a_working_address_and_stop_ends_it() -> None:
    started = subprocess.run(
        [*kaflux_command(), "broker", "start", "--kind", "mock", "--env"],
        capture_output=True,
        env=cli_env(),
        timeout=60,
        check=True,
    )
    exports = dict(re.findall(r"^export (\w+)=(\S+)$", started.stdout.decode(), re.MULTILINE))
    assert set(exports) == {"KAFLUX_BOOTSTRAP_SERVERS", "KAFLUX_BROKER_PID"}
    env = {"KAFLUX_BOOTSTRAP_SERVERS": exports["KAFLUX_BOOTSTRAP_SERVERS"]}
    try:
        ok(run_kaflux("produce", "first-hour", input=b"hello\n", env=env))
        records = json_lines(run_kaflux("consume", "first-hour", "--from-beginning", "-n", "1", env=env))
        assert records[0]["value"] == "hello"
    finally:
        stopped = run_kaflux("broker", "stop", env={"KAFLUX_BROKER_PID": exports["KAFLUX_BROKER_PID"]})
    assert stopped.returncode == 0, stopped.stderr
    assert not is_running(int(exports["KAFLUX_BROKER_PID"]))


def test_topics_create_on_the_mock_cluster_says_it_creates_topics_on_first_produce(
    mock_cluster: MockCluster,
) -> None:
    result = run_kaflux("topics", "create", "orders", "-b", mock_cluster.bootstrap_servers)
    message = error_line(result)
    assert "does not implement CreateTopics" in message and "first produced" in message


def _all_commands(command: click.Command, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [path]
    if isinstance(command, click.Group):
        with click.Context(command) as ctx:
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None
                found += _all_commands(sub, (*path, name))
    return found


def test_no_help_text_shows_a_thread_tag() -> None:
    tag = re.compile(r"\[(app|bg|pure|shared|io|test)[\]:]")
    commands = _all_commands(cli)
    assert len(commands) > 10
    for path in commands:
        help_text = ok(run_kaflux(*path, "--help"))
        assert not tag.search(help_text), (path, help_text)
    for module in ("kaflux.demo", "pyspark_kaflux.pipeline"):
        text = subprocess.run(
            [sys.executable, "-m", module, "--help"], capture_output=True, check=True, timeout=60
        ).stdout.decode()
        assert not tag.search(text), (module, text)


def test_the_demo_uses_the_cluster_in_kaflux_bootstrap_servers(kafka: Broker, topic_name: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kaflux.demo", "--records", "20", "--partitions", "1", "--topic", topic_name],
        capture_output=True,
        env={**cli_env(), "KAFLUX_BOOTSTRAP_SERVERS": kafka.bootstrap_servers},
        timeout=120,
        check=False,
    )
    out = result.stdout.decode()
    assert result.returncode == 0, result.stderr.decode()
    assert "embedded" not in out and "broker up at" not in out  # it used the given cluster
    assert "read back 20 events" in out
