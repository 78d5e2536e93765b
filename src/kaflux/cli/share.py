"""``kaflux share consume``: read a topic as a member of a share group (KIP-932). [app]

Each record printed was acquired by this member and is then acknowledged as ``--ack`` says:
``accept`` (done), ``release`` (deliver again, to any member, with its delivery count + 1) or
``reject`` (never again). JSON lines carry the record's ``delivery_count``. A share group starts
at the latest offset: records produced before its first member joined are not read.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence

import click

from kaflux.cli.main import ClientSettings, CliError, client_options_without_timeout, client_settings
from kaflux.cli.output import RecordWriter, dumps_line, progress, record_json, record_writer
from kaflux.consumer.share.acknowledgements import AcknowledgeType
from kaflux.consumer.share.consumer import ShareConsumer
from kaflux.records import ConsumerRecord

_POLL_S = 0.5
_ACK_TYPES = {
    "accept": AcknowledgeType.ACCEPT,
    "release": AcknowledgeType.RELEASE,
    "reject": AcknowledgeType.REJECT,
}


@click.group()
def share() -> None:
    """Share groups (KIP-932): queue semantics on Kafka topics."""


def share_config(settings: ClientSettings, group: str) -> dict[str, object]:
    """The settings a share consumer takes: its own keys, keys no kaflux client knows, and any
    key given with -X (so that consumer-group settings are refused by name, not dropped)."""
    from kaflux.config import AdminConfig, ConsumerConfig, ProducerConfig, ShareConsumerConfig

    mine = frozenset(ShareConsumerConfig.keys())
    others = (
        frozenset(ConsumerConfig.keys()) | frozenset(ProducerConfig.keys()) | frozenset(AdminConfig.keys())
    )
    explicit = {key for key, _ in settings.overrides}
    config: dict[str, object] = {
        key: value
        for key, value in settings.merged().items()
        if key in mine or key not in others or key in explicit
    }
    config["group.id"] = group
    config["share.acknowledgement.mode"] = "explicit"
    return config


@share.command("consume")
@click.argument("topic")
@click.option("-g", "--group", required=True, help="The share group to join.")
@click.option(
    "--ack",
    "ack",
    type=click.Choice(sorted(_ACK_TYPES)),
    default="accept",
    show_default=True,
    help="How every record printed is acknowledged.",
)
@click.option("-n", "--count", type=click.IntRange(min=1), help="Exit after this many records.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "raw", "table"]),
    default="json",
    show_default=True,
    help="json: one object per record (with delivery_count); raw: the values only; table: rows.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    metavar="SECONDS",
    help="Stop after this long without a record (an error if -n was not reached); also how long "
    "to wait for a broker to accept a connection (default: 5).",
)
@client_options_without_timeout
def consume(topic: str, group: str, ack: str, count: int | None, fmt: str, timeout: float | None) -> None:
    """Print the records of TOPIC that the share group GROUP hands this member, acknowledging
    each as --ack says, until Ctrl-C (or -n COUNT records)."""
    settings = client_settings()
    if timeout is not None:
        settings.timeout = timeout
    config = share_config(settings, group)
    if count is not None:
        config.setdefault("max.poll.records", str(min(count, 500)))
    ack_type = _ACK_TYPES[ack]
    consumer = ShareConsumer(config)
    try:
        settings.ensure_reachable()
        consumer.subscribe([topic])
        try:
            _print_records(consumer, topic, ack_type, count, fmt, timeout)
        except KeyboardInterrupt:
            pass  # Ctrl-C (or SIGTERM): acknowledge what was printed and close cleanly
    finally:
        consumer.close(timeout=10.0)


def _print_records(
    consumer: ShareConsumer,
    topic: str,
    ack_type: AcknowledgeType,
    count: int | None,
    fmt: str,
    timeout: float | None,
) -> None:
    writer = record_writer(fmt)
    printed = 0
    last_record = time.monotonic()
    with progress(f"consuming {topic} (share group)", total=count, enabled=count is not None) as bar:
        while count is None or printed < count:
            records = consumer.poll(_POLL_S)
            if not records:
                if timeout is not None and time.monotonic() - last_record >= timeout:
                    if count is not None:
                        raise CliError(f"only {printed} of {count} records arrived (none for {timeout:g} s)")
                    return
                continue
            last_record = time.monotonic()
            keep = records if count is None else records[: count - printed]
            _write(writer, fmt, keep)
            for i, record in enumerate(records):
                # Records beyond -n go back to the group, to be delivered again.
                consumer.acknowledge(record, ack_type if i < len(keep) else AcknowledgeType.RELEASE)
            printed += len(keep)
            bar.advance(len(keep))
    # close() sends the last acknowledgements as it closes the share sessions


def _write(writer: RecordWriter, fmt: str, records: Sequence[ConsumerRecord]) -> None:
    if fmt != "json":
        writer.write(records)
        return
    lines = []
    for record in records:
        line = record_json(record)
        line["delivery_count"] = record.delivery_count
        lines.append(dumps_line(line) + "\n")
    sys.stdout.write("".join(lines))
    sys.stdout.flush()
