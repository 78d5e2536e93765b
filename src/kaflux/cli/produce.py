"""``kaflux produce``: send lines from stdin or a file as records. [app]

Each line is a record's value; with ``--json`` each line is an envelope ``{"key", "value",
"headers", "partition", "timestamp"}`` (all optional; ``key_encoding``/``value_encoding`` as
``kaflux consume`` writes them, so its output can be produced again; any other field is refused,
naming the line and the field). ``--json-value`` sends each line, a JSON object, as the value.
``--key-field F`` keys each record by field F of the line's JSON object (with ``--json``: of its
value). A progress bar runs on stderr when it is a terminal, and a last line there gives the
count and the rate.
"""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

import click

from kaflux.cli.main import CliError, client_options, client_settings
from kaflux.cli.output import decode_text, progress, stderr_console
from kaflux.structs import RecordMetadata


@dataclass(frozen=True)
class Outgoing:
    """One record to send, parsed from one input line."""

    value: bytes | None
    key: bytes | None = None
    headers: list[tuple[str, bytes | None]] | None = None
    partition: int | None = None
    timestamp: int | None = None


#: the fields of a ``--json`` envelope (``kaflux consume``'s output; topic and offset are ignored)
ENVELOPE_FIELDS = frozenset(
    {"key", "key_encoding", "value", "value_encoding", "headers", "partition", "timestamp", "topic", "offset"}
)


def _key_from(document: object, field: str, line_no: int, what: str = "the line") -> bytes | None:
    if not isinstance(document, dict):
        raise CliError(f"line {line_no}: {what} is not a JSON object, needed for --key-field {field!r}")
    if field not in document:
        fields = ", ".join(sorted(map(str, document))) or "none"
        raise CliError(
            f"line {line_no}: {what} has no field {field!r} for --key-field (its fields: {fields})"
        )
    raw = document[field]
    if not isinstance(raw, str) and raw is not None:
        raw = json.dumps(raw)  # a number or an object keys by its JSON text
    return decode_text(raw, None, f"line {line_no}: field {field!r}")


def _json_value_of(envelope: dict[str, Any]) -> object:
    """The envelope's value as a JSON document (an object given inline, or JSON text)."""
    raw = envelope.get("value")
    if isinstance(raw, str) and envelope.get("value_encoding") in (None, "utf-8"):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _headers(raw: object, line_no: int) -> list[tuple[str, bytes | None]] | None:
    if raw is None:
        return None
    where = f"line {line_no}: headers"
    if isinstance(raw, dict):
        return [(str(k), decode_text(v, None, where)) for k, v in raw.items()]
    if isinstance(raw, list):
        result: list[tuple[str, bytes | None]] = []
        for item in raw:
            if not isinstance(item, dict) or not isinstance(item.get("key"), str):
                raise CliError(f'{where}: expected {{"key": ..., "value": ...}} objects, got {item!r}')
            result.append((item["key"], decode_text(item.get("value"), item.get("value_encoding"), where)))
        return result
    raise CliError(f"{where}: expected an object or a list, got {type(raw).__name__}")


def parse_line(
    line: bytes, line_no: int, *, json_input: bool, key_field: str | None, json_value: bool = False
) -> Outgoing | None:
    """The record one input line stands for (None: a blank line in --json or --json-value mode)."""
    if line.endswith(b"\n"):
        line = line[:-1]
        if line.endswith(b"\r"):
            line = line[:-1]
    if json_value:
        if not line.strip():
            return None
        try:
            document = json.loads(line)
        except ValueError as e:
            raise CliError(f"line {line_no}: not JSON ({e})") from None
        if not isinstance(document, dict):
            raise CliError(f"line {line_no}: expected a JSON object, got {type(document).__name__}")
        key = None if key_field is None else _key_from(document, key_field, line_no)
        return Outgoing(line, key=key)
    if not json_input:
        if key_field is None:
            return Outgoing(line)
        try:
            document = json.loads(line)
        except ValueError as e:
            raise CliError(f"line {line_no}: not JSON, needed for --key-field ({e})") from None
        return Outgoing(line, key=_key_from(document, key_field, line_no))
    if not line.strip():
        return None
    try:
        envelope: Any = json.loads(line)
    except ValueError as e:
        raise CliError(f"line {line_no}: not JSON ({e})") from None
    if not isinstance(envelope, dict):
        raise CliError(f"line {line_no}: expected a JSON object, got {type(envelope).__name__}")
    unknown = sorted(str(name) for name in envelope if name not in ENVELOPE_FIELDS)
    if unknown:
        raise CliError(
            f"line {line_no}: unknown field {unknown[0]!r} in a --json envelope (its fields: key, value, "
            "headers, partition, timestamp, key_encoding, value_encoding); to send each line's object "
            "as the value, use --json-value"
        )
    try:
        value = decode_text(envelope.get("value"), envelope.get("value_encoding"), f"line {line_no}: value")
        if envelope.get("key") is not None or key_field is None:
            key = decode_text(envelope.get("key"), envelope.get("key_encoding"), f"line {line_no}: key")
        else:
            key = _key_from(_json_value_of(envelope), key_field, line_no, "the value")
    except ValueError as e:
        raise CliError(str(e)) from None
    partition, timestamp = envelope.get("partition"), envelope.get("timestamp")
    for name, number in (("partition", partition), ("timestamp", timestamp)):
        if number is not None and (isinstance(number, bool) or not isinstance(number, int)):
            raise CliError(f"line {line_no}: {name} must be an integer, got {number!r}")
    return Outgoing(value, key, _headers(envelope.get("headers"), line_no), partition, timestamp)


def _input_size(stream: IO[bytes]) -> int | None:
    """The size of a regular input file (None for a pipe or a terminal)."""
    try:
        info = os.fstat(stream.fileno())
    except (OSError, ValueError):
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) else None


class _Deliveries:
    """Counts acknowledgements and keeps the first failure (callbacks run on the network thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.acknowledged = 0
        self.error: Exception | None = None

    def __call__(self, metadata: RecordMetadata, error: Exception | None) -> None:
        with self._lock:
            if error is None:
                self.acknowledged += 1
            elif self.error is None:
                self.error = error


def _lines(stream: IO[bytes]) -> Iterator[bytes]:
    yield from iter(stream.readline, b"")


@click.command()
@click.argument("topic")
@click.argument("file", type=click.File("rb"), default="-")
@click.option(
    "--json",
    "json_input",
    is_flag=True,
    help='Lines are {"key", "value", "headers", "partition", "timestamp"} envelopes '
    "(other fields are refused).",
)
@click.option("--json-value", is_flag=True, help="Lines are JSON objects, each sent as a record's value.")
@click.option(
    "--key-field",
    metavar="FIELD",
    help="Key each record by this field of the line's JSON object (with --json: of its value).",
)
@click.option("-p", "--partition", type=click.IntRange(min=0), help="Send every record to this partition.")
@click.option(
    "--compression",
    type=click.Choice(["none", "gzip", "snappy", "lz4", "zstd"]),
    help="Compress record batches (compression.type).",
)
@client_options
def produce(
    topic: str,
    file: IO[bytes],
    json_input: bool,
    json_value: bool,
    key_field: str | None,
    partition: int | None,
    compression: str | None,
) -> None:
    """Send each line of FILE (default: stdin) to TOPIC as a record's value."""
    if json_input and json_value:
        raise click.UsageError("give at most one of --json and --json-value")
    extra: dict[str, object] = {} if compression is None else {"compression.type": compression}
    settings = client_settings()
    config = settings.for_client("producer", **extra)
    total_bytes = _input_size(file)
    deliveries = _Deliveries()
    sent = 0
    started = time.monotonic()
    from kaflux.producer.producer import Producer  # imported when the command runs: --help stays fast

    producer = Producer(config)
    try:
        with progress(
            f"producing to {topic}",
            total=total_bytes,
            unit="bytes" if total_bytes is not None else "records",
            enabled=not file.isatty(),  # no bar over lines being typed
        ) as bar:
            for line_no, line in enumerate(_lines(file), start=1):
                record = parse_line(
                    line, line_no, json_input=json_input, key_field=key_field, json_value=json_value
                )
                if record is not None:
                    if sent == 0:
                        settings.ensure_reachable()  # a wrong address fails in seconds, not 60
                    producer.send(
                        topic,
                        record.value,
                        key=record.key,
                        headers=record.headers,
                        partition=partition if partition is not None else record.partition,
                        timestamp=record.timestamp,
                        callback=deliveries,
                    )
                    sent += 1
                    if deliveries.error is not None:
                        break
                bar.advance(len(line) if total_bytes is not None else 1 if record is not None else 0)
            producer.flush()
    finally:
        producer.close()
    if deliveries.error is not None:
        raise deliveries.error
    if deliveries.acknowledged < sent:
        raise CliError(f"only {deliveries.acknowledged} of {sent} records were acknowledged")
    elapsed = max(time.monotonic() - started, 1e-9)
    stderr_console().print(
        f"produced {sent:,} records to {topic} in {elapsed:.2f} s ({sent / elapsed:,.0f} records/s)",
        highlight=False,
    )
