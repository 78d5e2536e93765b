"""``kaflux consume``: print a topic's records, as JSON lines by default. [app]

Without a group the consumer assigns itself every partition of the topic (or ``-p``'s) and starts
where ``--from-beginning``, ``--offset`` or ``--from-time`` says (default: the end, as Kafka's
console consumer). With ``-g`` (or a ``group.id`` setting) it subscribes in that group: it starts at
the group's committed offsets, ``--from-beginning`` applying where there are none, and commits what
it printed; ``--offset`` and ``--from-time`` then move each partition the first time it is assigned.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import click

from kaflux.cli.main import CliError, client_options_without_timeout, client_settings
from kaflux.cli.output import progress, record_writer, timestamp_callback
from kaflux.consumer.rebalance_listener import ConsumerRebalanceListener
from kaflux.structs import TopicPartition

if TYPE_CHECKING:
    from kaflux.consumer.consumer import Consumer
    from kaflux.records import ConsumerRecord

_POLL_S = 0.5


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


class _StartOnFirstAssignment(ConsumerRebalanceListener):
    """In a group: moves each partition to the start position the first time it is assigned."""

    def __init__(self, consumer: Consumer, start: StartAt) -> None:
        self._consumer = consumer
        self._start = start
        self._seen: set[TopicPartition] = set()

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        new = partitions - self._seen
        self._seen |= new
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
        if start.kind == "beginning":
            extra["auto.offset.reset"] = "earliest"  # where the group has no committed offset
    config = settings.for_client("consumer", **extra)
    config.setdefault("allow.auto.create.topics", "false")
    if count is not None:
        config.setdefault("max.poll.records", str(min(count, 500)))
    from kaflux.consumer.consumer import Consumer  # imported when the command runs: --help stays fast

    consumer = Consumer(config)
    interrupted = False
    try:
        settings.ensure_reachable()
        if group is not None:
            listener = (
                None if start.kind in ("default", "beginning") else _StartOnFirstAssignment(consumer, start)
            )
            consumer.subscribe([topic], listener=listener)
        else:
            _assign(consumer, topic, partition, start)
        tally = _Tally()
        try:
            _print_records(consumer, topic, count, fmt, timeout, tally)
        except KeyboardInterrupt:
            # Ctrl-C (or SIGTERM): stop here, commit and close cleanly, then exit 130
            interrupted = True
            if count is not None and tally.printed < count:
                click.echo(f"\nkaflux: interrupted after {tally.printed} of {count} records", err=True)
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


@contextlib.contextmanager
def _interrupts_deferred() -> Iterator[None]:
    """Hold Ctrl-C (and SIGTERM, which the command treats alike) until the block ends, then
    raise KeyboardInterrupt; on a thread other than the main one, do nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    previous = {
        sig: signal.signal(sig, lambda signum, frame: pending.append(signum)) for sig in _STOP_SIGNALS
    }
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
    if pending:
        raise KeyboardInterrupt


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@dataclass
class _Tally:
    """Records printed so far (read after an interrupt)."""

    printed: int = 0


def _print_records(
    consumer: Consumer, topic: str, count: int | None, fmt: str, timeout: float | None, tally: _Tally
) -> None:
    writer = record_writer(fmt)
    printed = 0
    last_record = time.monotonic()
    with progress(f"consuming {topic}", total=count, enabled=count is not None) as bar:
        while count is None or printed < count:
            records = list(consumer.poll(_POLL_S))
            if not records:
                if timeout is not None and time.monotonic() - last_record >= timeout:
                    if count is not None:
                        raise CliError(f"only {printed} of {count} records arrived (none for {timeout:g} s)")
                    return
                continue
            last_record = time.monotonic()
            if count is not None and printed + len(records) > count:
                records = _keep_first(consumer, records, count - printed)
            with _interrupts_deferred():  # what was printed is what is counted
                writer.write(records)
                printed += len(records)
                tally.printed = printed
            bar.advance(len(records))


def _keep_first(consumer: Consumer, records: list[ConsumerRecord], keep: int) -> list[ConsumerRecord]:
    """The first ``keep`` records; the consumer goes back to the first dropped record of each
    partition, so that a group commits only what was printed."""
    rewind: dict[TopicPartition, int] = {}
    for record in records[keep:]:
        rewind.setdefault(TopicPartition(record.topic, record.partition), record.offset)
    for tp, first_dropped in rewind.items():
        consumer.seek(tp, first_dropped)
    return records[:keep]
