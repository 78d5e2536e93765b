"""``kaflux consume``: print a topic's records, as JSON lines by default. [app]

Without a group the consumer assigns itself every partition of the topic (or ``-p``'s) and starts
where ``--from-beginning``, ``--offset`` or ``--from-time`` says (default: the end, as Kafka's
console consumer). With ``-g`` (or a ``group.id`` setting) it subscribes in that group: it starts at
the group's committed offsets, ``--from-beginning`` applying where there are none, and commits what
it printed; ``--offset`` and ``--from-time`` then move each partition the first time it is assigned.

"What it printed" is what reached stdout: records are written to its file descriptor with no
buffer between (every short write continued), and the command commits the offset after the last
record written whole, of each partition: every ``auto.commit.interval.ms``, when a partition is
revoked and at the end (the consumer's own auto-commit, which commits what was polled, is off).
SIGINT and SIGTERM that land while a poll's records are written end the write at the next record
boundary; a reader that goes away (``| head``) ends the command quietly, with what reached the
pipe committed.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Literal

import click

from kaflux.cli.main import CliError, client_options_without_timeout, client_settings
from kaflux.cli.output import RecordWriter, StdoutSink, progress, record_writer, timestamp_callback
from kaflux.consumer.rebalance_listener import ConsumerRebalanceListener
from kaflux.structs import TopicPartition

if TYPE_CHECKING:
    from kaflux.consumer.consumer import Consumer
    from kaflux.records import ConsumerRecord

log = logging.getLogger("kaflux.cli")

_POLL_S = 0.5
_COMMIT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class StartAt:
    """Where reading starts: the beginning, an offset (negative: that many before the end), a
    time (epoch ms), or wherever the consumer's reset policy or the group's commits say."""

    kind: Literal["beginning", "offset", "time", "default"]
    value: int = 0


def seek_to_start(consumer: Consumer, partitions: Iterable[TopicPartition], start: StartAt) -> None:
    """Move ``partitions`` to where ``start`` says (nothing for ``default``)."""
    wanted = sorted(partitions)
    if not wanted or start.kind == "default":
        return
    if start.kind == "beginning":
        consumer.seek_to_beginning(wanted)
    elif start.kind == "offset" and start.value >= 0:
        for tp in wanted:
            consumer.seek(tp, start.value)
    elif start.kind == "offset":
        first = consumer.beginning_offsets(wanted)
        end = consumer.end_offsets(wanted)
        for tp in wanted:
            consumer.seek(tp, max(first[tp], end[tp] + start.value))
    else:
        found = consumer.offsets_for_times(dict.fromkeys(wanted, start.value))
        later = [tp for tp, hit in found.items() if hit is None]
        for tp, hit in found.items():
            if hit is not None:
                consumer.seek(tp, hit.offset)
        if later:
            consumer.seek_to_end(later)


class _Printed:
    """In a group: the offset after the last record printed whole, of each partition, and when
    it was last committed."""

    def __init__(self, consumer: Consumer, interval_s: float) -> None:
        self._consumer = consumer
        self._interval_s = interval_s
        self._next: dict[TopicPartition, int] = {}
        self._committed: dict[TopicPartition, int] = {}  # by commit_sync
        self._sent: dict[TopicPartition, int] = {}  # by commit_async (it may fail)
        self._last_commit = time.monotonic()

    def add(self, records: Sequence[ConsumerRecord]) -> None:
        for r in records:
            self._next[TopicPartition(r.topic, r.partition)] = r.offset + 1

    def _uncommitted(
        self, done: dict[TopicPartition, int], partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, int]:
        wanted = self._next.keys() if partitions is None else partitions
        return {tp: self._next[tp] for tp in wanted if tp in self._next and done.get(tp) != self._next[tp]}

    def maybe_commit(self) -> None:
        """Commit (without waiting) when ``auto.commit.interval.ms`` has passed since the last."""
        if time.monotonic() - self._last_commit < self._interval_s:
            return
        self._last_commit = time.monotonic()
        offsets = self._uncommitted(self._sent)
        if offsets:
            self._consumer.commit_async(offsets)
            self._sent.update(offsets)

    def commit(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Commit what was printed (of ``partitions``, default all) and wait."""
        offsets = self._uncommitted(self._committed, partitions)
        if offsets:
            self._consumer.commit_sync(offsets, timeout=_COMMIT_TIMEOUT_S)
            self._committed.update(offsets)

    def forget(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            for known in (self._next, self._committed, self._sent):
                known.pop(tp, None)


class _GroupListener(ConsumerRebalanceListener):
    """In a group: commits what was printed of each revoked partition, and moves each partition
    to the start position the first time it is assigned."""

    def __init__(self, consumer: Consumer, start: StartAt, printed: _Printed) -> None:
        self._consumer = consumer
        self._start = start
        self._printed = printed
        self._seen: set[TopicPartition] = set()

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        try:
            self._printed.commit(partitions)
        except Exception as e:  # the next owner reads them again from the last commit
            log.warning("could not commit what was printed of %s: %s", sorted(partitions), e)
        # (after a KeyboardInterrupt they are kept: the commit at the end tries again)
        self._printed.forget(partitions)

    def on_partitions_lost(self, partitions: set[TopicPartition]) -> None:
        self._printed.forget(partitions)

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        new = partitions - self._seen
        self._seen |= new
        if self._start.kind not in ("default", "beginning"):
            seek_to_start(self._consumer, new, self._start)


def _start_at(from_beginning: bool, offset: int | None, from_time: int | None) -> StartAt:
    if sum((from_beginning, offset is not None, from_time is not None)) > 1:
        raise click.UsageError("give at most one of --from-beginning, --offset and --from-time")
    if from_beginning:
        return StartAt("beginning")
    if offset is not None:
        return StartAt("offset", offset)
    if from_time is not None:
        return StartAt("time", from_time)
    return StartAt("default")


@click.command()
@click.argument("topic")
@click.option("-p", "--partition", type=click.IntRange(min=0), help="Read only this partition (no group).")
@click.option("--from-beginning", is_flag=True, help="Start at the first record.")
@click.option(
    "--offset",
    type=int,
    metavar="N",
    help="Start at offset N of each partition (negative: N records before the end).",
)
@click.option(
    "--from-time",
    metavar="ISO-TIME",
    callback=timestamp_callback,
    help="Start at the first record at or after this time.",
)
@click.option("-n", "--count", type=click.IntRange(min=1), help="Exit after this many records.")
@click.option("-g", "--group", help="Subscribe in this consumer group (commits what it printed).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "raw", "table"]),
    default="json",
    show_default=True,
    help="json: one object per record; raw: the values only; table: rows.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    metavar="SECONDS",
    help="Stop after this long without a record (an error if -n was not reached); also how long "
    "to wait for a broker to accept a connection (default: 5).",
)
@client_options_without_timeout
def consume(
    topic: str,
    partition: int | None,
    from_beginning: bool,
    offset: int | None,
    from_time: int | None,
    count: int | None,
    group: str | None,
    fmt: str,
    timeout: float | None,
) -> None:
    """Print the records of TOPIC until Ctrl-C (or -n COUNT records).

    JSON lines carry topic, partition, offset, timestamp (epoch ms), key, value and headers;
    keys and values are UTF-8 text where they decode and base64 otherwise, as key_encoding and
    value_encoding say. With -n a progress bar runs on stderr when it is a terminal.
    """
    start = _start_at(from_beginning, offset, from_time)
    settings = client_settings()
    if timeout is not None:
        settings.timeout = timeout
    extra: dict[str, object] = {}
    given = settings.merged()
    group = group or given.get("group.id") or None
    if group is not None:
        if partition is not None:
            raise click.UsageError("-p reads one partition without a group; it cannot be used with -g")
        extra["group.id"] = group
        # The command commits what reached stdout itself; auto-commit would commit what was polled.
        extra["enable.auto.commit"] = "false"
        if start.kind == "beginning":
            extra["auto.offset.reset"] = "earliest"  # where the group has no committed offset
    config = settings.for_client("consumer", **extra)
    config.setdefault("allow.auto.create.topics", "false")
    if count is not None:
        config.setdefault("max.poll.records", str(min(count, 500)))
    from kaflux.consumer.consumer import Consumer  # imported when the command runs: --help stays fast

    consumer = Consumer(config)
    printed: _Printed | None = None
    interrupted = False
    try:
        settings.ensure_reachable()
        if group is not None:
            interval_s = int(str(config.get("auto.commit.interval.ms", 5000))) / 1000
            printed = _Printed(consumer, interval_s)
            consumer.subscribe([topic], listener=_GroupListener(consumer, start, printed))
        else:
            _assign(consumer, topic, partition, start)
        tally = _Tally()
        sink = _Sink(printed, tally)
        try:
            with sink.signals_deferred_while_writing():
                _print_records(consumer, topic, count, fmt, timeout, tally, sink, printed)
        except KeyboardInterrupt:
            # Ctrl-C (or SIGTERM): stop here, commit and close cleanly, then exit 130
            interrupted = True
            if count is not None and tally.printed < count:
                click.echo(f"\nkaflux: interrupted after {tally.printed} of {count} records", err=True)
        if sink.closed:
            raise BrokenPipeError  # the reader went away: the command ends quietly
    finally:
        try:
            if printed is not None:
                printed.commit()
        finally:
            consumer.close(timeout=10.0)
    if interrupted:
        raise KeyboardInterrupt


def _assign(consumer: Consumer, topic: str, partition: int | None, start: StartAt) -> None:
    infos = consumer.partitions_for(topic)
    if not infos:
        raise CliError(f"topic {topic!r} does not exist")
    if partition is not None and partition >= len(infos):
        raise CliError(f"topic {topic!r} has no partition {partition} (it has {len(infos)})")
    partitions = [TopicPartition(topic, p.partition) for p in infos if partition in (None, p.partition)]
    consumer.assign(partitions)
    seek_to_start(consumer, partitions, start)


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@dataclass
class _Tally:
    """Records printed so far (read after an interrupt)."""

    printed: int = 0


class _Sink:
    """Writes records to stdout (:class:`StdoutSink`) and notes what was written.

    While :meth:`signals_deferred_while_writing` is active, SIGINT and SIGTERM raise
    KeyboardInterrupt at once, except while records are written: then the write ends at the next
    record boundary, what was written is noted, and KeyboardInterrupt follows.
    """

    def __init__(self, printed: _Printed | None, tally: _Tally) -> None:
        self._printed = printed
        self._tally = tally
        self._writing = False
        self._pending = False
        self._out = StdoutSink(stop=lambda: self._pending)

    @property
    def closed(self) -> bool:
        """The reader went away (EPIPE)."""
        return self._out.closed

    def reader_gone(self) -> bool:
        """The reader went away, found without writing."""
        return self._out.reader_gone()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if not self._writing:
            raise KeyboardInterrupt
        self._pending = True

    @contextlib.contextmanager
    def signals_deferred_while_writing(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield  # signals reach the main thread only
            return
        previous = {sig: signal.signal(sig, self._on_signal) for sig in _STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, signal.SIG_DFL if handler is None else handler)

    def write(self, writer: RecordWriter, records: Sequence[ConsumerRecord]) -> int:
        """Write ``records``; returns how many were written whole (then noted as printed).
        Raises KeyboardInterrupt after the write when a signal arrived meanwhile."""
        self._writing = True
        try:
            written = self._out.write(writer.chunks(records))
            self._tally.printed += written
            if self._printed is not None:
                self._printed.add(records[:written])
        finally:
            self._writing = False
        if self._pending:
            raise KeyboardInterrupt
        return written


def _print_records(
    consumer: Consumer,
    topic: str,
    count: int | None,
    fmt: str,
    timeout: float | None,
    tally: _Tally,
    sink: _Sink,
    printed: _Printed | None,
) -> None:
    writer = record_writer(fmt)
    last_record = time.monotonic()
    with progress(f"consuming {topic}", total=count, enabled=count is not None) as bar:
        while count is None or tally.printed < count:
            records = list(consumer.poll(_POLL_S))
            if not records:
                if sink.reader_gone():
                    return
                if timeout is not None and time.monotonic() - last_record >= timeout:
                    if count is not None:
                        raise CliError(
                            f"only {tally.printed} of {count} records arrived (none for {timeout:g} s)"
                        )
                    return
                continue
            last_record = time.monotonic()
            if count is not None and tally.printed + len(records) > count:
                records = _keep_first(consumer, records, count - tally.printed)
            written = sink.write(writer, records)  # KeyboardInterrupt after it, on a signal
            bar.advance(written)
            if sink.closed:
                return
            if printed is not None:
                printed.maybe_commit()


def _keep_first(consumer: Consumer, records: list[ConsumerRecord], keep: int) -> list[ConsumerRecord]:
    """The first ``keep`` records; the consumer goes back to the first dropped record of each
    partition, so that a group commits only what was printed."""
    rewind: dict[TopicPartition, int] = {}
    for record in records[keep:]:
        rewind.setdefault(TopicPartition(record.topic, record.partition), record.offset)
    for tp, first_dropped in rewind.items():
        consumer.seek(tp, first_dropped)
    return records[:keep]
