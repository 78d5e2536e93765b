"""What the ``kaflux`` command prints: JSON, rich tables, progress bars, bytes as text. [app]

* ``--format table|json``: :func:`format_option` and :func:`emit`. A table by default when stdout is
  a terminal, JSON otherwise, so that a script piping the output always parses JSON.
* :func:`progress`: a rich progress bar on stderr, drawn only when stderr is a terminal and cleared
  when it ends (``transient``); elsewhere a tracker that draws nothing.
* Keys, values and header values are shown as UTF-8 text where they decode, as base64 otherwise,
  with the choice named beside them (``"key_encoding": "utf-8"``): :func:`encode_bytes` and its
  inverse :func:`decode_text`, so ``kaflux consume`` output feeds ``kaflux produce --json``.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import contextlib
import datetime as dt
import itertools
import json
import os
import select
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import IO, Any, Literal, Protocol, TypeVar

import click
from rich.console import Console, RenderableType
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Column, Table
from rich.text import Text

Encoding = Literal["utf-8", "base64"]
F = TypeVar("F", bound=Callable[..., Any])

# --- formats -----------------------------------------------------------------------------------------


def _is_terminal(stream: IO[str] | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError):  # replaced by something without isatty(), or closed
        return False


def stdout_is_terminal() -> bool:
    """Whether stdout is a terminal (then listings default to tables). Only the stream decides,
    not FORCE_COLOR and the like: piped output must stay JSON."""
    return _is_terminal(sys.stdout)


def format_option(f: F) -> F:
    """``--format table|json`` for a command that lists or describes (its parameter: ``fmt``)."""
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(["table", "json"]),
        default=None,
        help="Output format. Default: table when stdout is a terminal, JSON otherwise.",
    )(f)


def resolve_format(fmt: str | None) -> str:
    """The format asked for, or table on a terminal and JSON elsewhere."""
    if fmt is not None:
        return fmt
    return "table" if stdout_is_terminal() else "json"


def _ensure_ascii(stream: IO[str]) -> bool:
    encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "").replace("_", "")
    return encoding != "utf8"


def dumps_line(data: object) -> str:
    """``data`` as one compact JSON line (non-ASCII kept when stdout is UTF-8)."""
    return json.dumps(data, separators=(",", ":"), ensure_ascii=_ensure_ascii(sys.stdout))


def print_json(data: object) -> None:
    """One JSON document on stdout."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=_ensure_ascii(sys.stdout)) + "\n")
    sys.stdout.flush()


def print_renderables(renderables: Iterable[RenderableType]) -> None:
    """Rich renderables (tables, text) on stdout."""
    console = Console()
    for renderable in renderables:
        console.print(renderable)


def emit(fmt: str | None, data: object, render: Callable[[], Iterable[RenderableType]]) -> None:
    """Print ``data`` (plain JSON values) as JSON, or what ``render()`` returns (rich tables), as
    ``fmt`` says."""
    if resolve_format(fmt) == "json":
        print_json(data)
    else:
        print_renderables(render())


def table(*columns: str, title: str | None = None, numeric: Iterable[str] = ()) -> Table:
    """A rich table with these column headers (``numeric`` ones right-aligned)."""
    right = set(numeric)
    result = Table(title=title, title_justify="left", header_style="bold")
    for column in columns:
        result.add_column(column, justify="right" if column in right else "left", overflow="fold")
    return result


def cell(value: object) -> str:
    """A table cell: ``-`` for None, lists joined by commas."""
    if value is None:
        return "-"
    if isinstance(value, (list, tuple, set, frozenset)):
        return ",".join(cell(v) for v in value)
    return str(value)


# --- bytes as text -----------------------------------------------------------------------------------


def encode_bytes(data: bytes | None) -> tuple[str | None, Encoding | None]:
    """``data`` as UTF-8 text where it decodes, else base64; with the encoding used (None: null)."""
    if data is None:
        return None, None
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), "base64"


def decode_text(value: object, encoding: object, what: str) -> bytes | None:
    """The bytes a JSON field stands for: a string as UTF-8 (or base64 when ``encoding`` says so),
    any other JSON value as its compact JSON text, null as None. Raises ValueError."""
    if value is None:
        return None
    if encoding not in (None, "utf-8", "base64"):
        raise ValueError(f"{what}: unknown encoding {encoding!r} (expected utf-8 or base64)")
    if isinstance(value, str):
        if encoding == "base64":
            try:
                return base64.b64decode(value, validate=True)
            except binascii.Error as e:
                raise ValueError(f"{what}: not valid base64 ({e})") from None
        return value.encode("utf-8")
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class RecordLike(Protocol):
    """What the writers read from a consumed record (``kaflux.ConsumerRecord``)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: Any
    value: Any
    headers: list[tuple[str, bytes | None]]


def record_json(record: RecordLike) -> dict[str, object]:
    """One consumed record as a JSON object (the ``kaflux consume`` line format)."""
    key, key_encoding = encode_bytes(record.key)
    value, value_encoding = encode_bytes(record.value)
    headers = []
    for name, raw in record.headers:
        text, encoding = encode_bytes(raw)
        headers.append({"key": name, "value": text, "value_encoding": encoding})
    return {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "key": key,
        "key_encoding": key_encoding,
        "value": value,
        "value_encoding": value_encoding,
        "headers": headers,
    }


# --- consumed records on stdout ----------------------------------------------------------------------


class RecordWriter(Protocol):
    """Turns consumed records into what stdout shows, one poll's worth at a time."""

    def chunks(self, records: Sequence[RecordLike]) -> list[bytes]:
        """The bytes of each record, in order: one chunk per record (an empty chunk for a record
        an earlier chunk showed already, as a table's rows)."""
        ...

    def write(self, records: Sequence[RecordLike]) -> None:
        """Print ``records`` on ``sys.stdout`` and flush it."""
        ...


class _ChunkWriter:
    def chunks(self, records: Sequence[RecordLike]) -> list[bytes]:
        raise NotImplementedError

    def write(self, records: Sequence[RecordLike]) -> None:
        data = b"".join(self.chunks(records))
        out = sys.stdout  # looked up each time: a live progress bar may stand in for it
        binary = getattr(out, "buffer", None)
        out.flush()
        if binary is not None:
            binary.write(data)
            binary.flush()
        else:
            out.write(data.decode("utf-8", "replace"))
            out.flush()


class JsonLinesWriter(_ChunkWriter):
    """One JSON object per record and line."""

    def chunks(self, records: Sequence[RecordLike]) -> list[bytes]:
        encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
        return [(dumps_line(record_json(r)) + "\n").encode(encoding, "replace") for r in records]


class RawWriter(_ChunkWriter):
    """Each record's value as it is, one per line (a null value as an empty line)."""

    def chunks(self, records: Sequence[RecordLike]) -> list[bytes]:
        return [(r.value or b"") + b"\n" for r in records]


class TableWriter(_ChunkWriter):
    """Records as rows of a table, printed as they come (the header once)."""

    _COLUMNS = (
        ("partition", 9, "right"),
        ("offset", 10, "right"),
        ("timestamp", 24, "left"),
        ("key", 16, "left"),
    )

    def __init__(self) -> None:
        self._header = True

    def chunks(self, records: Sequence[RecordLike]) -> list[bytes]:
        if not records:
            return []
        rows = Table(box=None, show_header=self._header, header_style="bold", pad_edge=False)
        self._header = False
        for name, width, justify in self._COLUMNS:
            rows.add_column(
                name, width=width, justify="right" if justify == "right" else "left", no_wrap=True
            )
        rows.add_column("value", overflow="fold", ratio=1)
        for r in records:
            stamp = dt.datetime.fromtimestamp(r.timestamp / 1000, dt.UTC).isoformat(timespec="milliseconds")
            key, _ = encode_bytes(r.key)
            value, _ = encode_bytes(r.value)
            rows.add_row(
                str(r.partition), str(r.offset), stamp.replace("+00:00", "Z"), cell(key), Text(cell(value))
            )
        console = Console(file=sys.stdout)  # a terminal's width and colours, when stdout is one
        with console.capture() as captured:
            console.print(rows)
        # The table is one piece: the first record's chunk; the others' are empty.
        return [captured.get().encode("utf-8", "replace")] + [b""] * (len(records) - 1)


def record_writer(fmt: str) -> RecordWriter:
    """The writer for ``--format json|raw|table``."""
    if fmt == "raw":
        return RawWriter()
    if fmt == "table":
        return TableWriter()
    return JsonLinesWriter()


class StdoutSink:
    """Writes records' chunks to stdout's file descriptor with no buffer in between, so that it
    knows which records reached stdout: every short write is continued, EINTR retried (PEP 475)
    and a full pipe waited on. When ``stop()`` turns true meanwhile (a signal arrived), it ends
    at the next record boundary. A closed reader (EPIPE) ends it too, and :attr:`closed` says so.

    Where stdout is not a plain file descriptor (a progress bar's proxy, a test's capture), the
    chunks go through ``sys.stdout`` and count as written once it is flushed.
    """

    def __init__(self, stop: Callable[[], bool] = lambda: False, fd: int | None = None) -> None:
        self._stop = stop
        self._fd = fd  # None: stdout's
        #: the reader went away (EPIPE): nothing more can be written
        self.closed = False

    def write(self, chunks: Sequence[bytes]) -> int:
        """Write ``chunks``; returns how many were written whole, the first ones."""
        if self.closed:
            return 0
        fd = _stdout_fd() if self._fd is None else self._fd
        if fd is None:
            out = sys.stdout
            out.write(b"".join(chunks).decode(getattr(out, "encoding", None) or "utf-8", "replace"))
            out.flush()
            return len(chunks)
        if self._fd is None:
            sys.stdout.flush()  # anything printed before goes first
        ends = list(itertools.accumulate(len(c) for c in chunks))
        data = memoryview(b"".join(chunks))
        limit = len(data)
        done = 0
        stopping = False
        while done < limit:
            if not stopping and self._stop():
                stopping = True  # finish the record being written, then stop
                limit = 0 if done == 0 else ends[bisect.bisect_left(ends, done)]
                continue
            try:
                done += os.write(fd, data[done:limit])
            except BlockingIOError:  # stdout shared with someone who made it non-blocking
                select.select([], [fd], [])
            except BrokenPipeError:
                self.closed = True
                break
        return bisect.bisect_right(ends, done)

    def reader_gone(self) -> bool:
        """Whether stdout is a pipe whose reader went away (``| head`` ended), found without
        writing: a command with nothing to print learns it here, not at its next record."""
        fd = _stdout_fd() if self._fd is None else self._fd
        if fd is not None and not self.closed and hasattr(select, "poll"):  # not on Windows
            poller = select.poll()
            poller.register(fd, select.POLLOUT)  # a pipe without readers reports POLLERR
            if any(events & select.POLLERR for _, events in poller.poll(0)):
                self.closed = True
        return self.closed


def _stdout_fd() -> int | None:
    out = sys.stdout
    if out is not sys.__stdout__ or out is None:
        return None
    try:
        return out.fileno()
    except (AttributeError, ValueError, OSError):  # io.UnsupportedOperation is an OSError
        return None


# --- progress ----------------------------------------------------------------------------------------


class Tracker(Protocol):
    """Advances a progress bar (or nothing)."""

    def advance(self, amount: float = 1) -> None: ...


class _NoTracker:
    def advance(self, amount: float = 1) -> None:
        pass


class _BarTracker:
    def __init__(self, progress: Progress, task: Any) -> None:
        self._progress = progress
        self._task = task

    def advance(self, amount: float = 1) -> None:
        self._progress.advance(self._task, amount)


class RateColumn(ProgressColumn):
    """Items per second, in the bar's unit."""

    def __init__(self, unit: str) -> None:
        super().__init__()
        self._unit = unit

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("" if speed is None else f"{speed:,.0f} {self._unit}/s", style="progress.data.speed")


def stderr_console() -> Console:
    """The console progress bars and notes go to."""
    return Console(stderr=True, soft_wrap=True)


@contextlib.contextmanager
def progress(
    description: str, total: float | None, unit: str = "records", *, enabled: bool = True
) -> Iterator[Tracker]:
    """A progress bar on stderr while the block runs, cleared at its end; drawn only when stderr
    is a terminal (and ``enabled``). ``total`` None: a count without an end. Lines printed on
    stdout meanwhile go above the bar when stdout is a terminal too."""
    if not enabled or not _is_terminal(sys.stderr):
        yield _NoTracker()
        return
    label = Column(max_width=40, no_wrap=True, overflow="ellipsis")
    columns: list[ProgressColumn | str] = [
        SpinnerColumn(),
        TextColumn("{task.description}", table_column=label),
    ]
    if total is None:
        columns += [TextColumn("{task.completed:,.0f} " + unit), TimeElapsedColumn(), RateColumn(unit)]
    elif unit == "bytes":
        columns += [BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn()]
    else:
        columns += [BarColumn(), MofNCompleteColumn(), RateColumn(unit), TimeRemainingColumn()]
    bar = Progress(
        *columns,
        console=stderr_console(),
        transient=True,
        redirect_stdout=stdout_is_terminal(),
        redirect_stderr=True,
    )
    with bar:
        yield _BarTracker(bar, bar.add_task(description, total=total))


# --- option callbacks ----------------------------------------------------------------------------------


def parse_timestamp(text: str) -> int:
    """An ISO 8601 date/time (local time when it has no offset) or epoch milliseconds, as epoch
    milliseconds. Raises ValueError."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"{text!r} is neither an ISO 8601 time (2024-05-01T12:00:00Z) nor epoch milliseconds"
        ) from None
    return int(moment.timestamp() * 1000)  # naive: local time, as Kafka's tools


def timestamp_callback(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """Option callback: :func:`parse_timestamp` of the value (None when absent)."""
    if value is None:
        return None
    try:
        return parse_timestamp(value)
    except ValueError as e:
        raise click.BadParameter(str(e), ctx, param) from None


def key_values_callback(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> tuple[tuple[str, str], ...]:
    """Option callback for a repeatable ``KEY=VALUE`` option (split at the first ``=``)."""
    pairs = []
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{value!r} is not of the form KEY=VALUE", ctx, param)
        pairs.append((key.strip(), rest))
    return tuple(pairs)
