"""Acquired records and their acknowledgements (KIP-932). [pure]

A share consumer *acquires* records: the broker lends them to it for a time-limited lock, with
a delivery count. Each must then be acknowledged: ACCEPT (done), RELEASE (deliver again, to
anyone, with its delivery count + 1), REJECT (never again: it is unprocessable) or RENEW
(KIP-1222: keep the lock longer). Offsets the broker acquired for us but that hold no record
(control records, compacted away) are acknowledged as GAP without the application seeing them.

:class:`AcknowledgementBook` is the application thread's ledger: which delivered records wait
for an acknowledgement, which are acknowledged, and what to send (``take``), grouped by the
broker that delivered them (acknowledgements go back on that broker's share session).
:class:`Acknowledgements` holds one partition's acknowledgements and turns them into the
wire's batches: runs of consecutive offsets, with one type for the whole run when it is
uniform, one type per offset otherwise.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field

from kaflux.errors import IllegalStateError
from kaflux.structs import TopicPartition

__all__ = ["GAP", "AckBatch", "AcknowledgeType", "AcknowledgementBook", "Acknowledgements"]

#: the wire's type for an acquired offset that holds no record
GAP = 0


class AcknowledgeType(enum.IntEnum):
    """How a share consumer acknowledges a record (Java's ``AcknowledgeType``; wire values)."""

    ACCEPT = 1
    """Processed: the record is done."""
    RELEASE = 2
    """Not processed: deliver it again (its delivery count goes up)."""
    REJECT = 3
    """Unprocessable: never deliver it again."""
    RENEW = 4
    """Still processing: renew the acquisition lock (KIP-1222; ShareAcknowledge v2+)."""


@dataclass(frozen=True, slots=True)
class AckBatch:
    """One acknowledgement batch as the wire carries it."""

    first_offset: int
    last_offset: int
    #: one type for the whole range, or one per offset
    types: tuple[int, ...]


@dataclass(slots=True)
class Acknowledgements:
    """One partition's acknowledgements: per offset (``types``), and whole ranges of one type
    (``runs``, what implicit mode produces: no per-record work)."""

    types: dict[int, int] = field(default_factory=dict)
    #: (first offset, last offset, type), disjoint from each other and from ``types``
    runs: list[tuple[int, int, int]] = field(default_factory=list)

    def add(self, offset: int, ack_type: int) -> None:
        self.types[offset] = ack_type

    def add_range(self, first: int, last: int, ack_type: int) -> None:
        self.runs.append((first, last, ack_type))

    def merge(self, other: Acknowledgements) -> None:
        self.types.update(other.types)
        self.runs.extend(other.runs)

    def __len__(self) -> int:
        return len(self.types) + sum(last - first + 1 for first, last, _ in self.runs)

    def __bool__(self) -> bool:
        return bool(self.types or self.runs)

    def has_renew(self) -> bool:
        return AcknowledgeType.RENEW in self.types.values() or any(
            t == AcknowledgeType.RENEW for *_, t in self.runs
        )

    def as_dict(self) -> dict[int, int]:
        """Every acknowledged offset and its type."""
        out = {o: t for first, last, t in self.runs for o in range(first, last + 1)}
        out.update(self.types)
        return out

    def offsets(self, *, with_gaps: bool = False) -> set[int]:
        """The acknowledged offsets (without GAPs unless asked: the application never saw them)."""
        return {o for o, t in self.as_dict().items() if with_gaps or t != GAP}

    def batches(self) -> list[AckBatch]:
        """Runs of consecutive offsets, in offset order. Adjacent runs of one type go as one
        batch: the broker keeps an acquisition as whole batches and takes an acknowledgement
        that covers them whole as one; one that splits an acquired batch (the ranges of
        successive polls, 500 records each, rarely end where a record batch does) makes it
        track every offset of that batch apart, and its ShareFetch answers come slower."""
        if not self.types:
            out: list[AckBatch] = []
            for first, last, t in sorted(self.runs):
                if out and out[-1].last_offset + 1 == first and out[-1].types == (t,):
                    out[-1] = AckBatch(out[-1].first_offset, last, (t,))
                else:
                    out.append(AckBatch(first, last, (t,)))
            return out
        types = self.as_dict()
        out = []
        run: list[tuple[int, int]] = []
        for offset in sorted(types):
            if run and offset != run[-1][0] + 1:
                out.append(_batch(run))
                run = []
            run.append((offset, types[offset]))
        if run:
            out.append(_batch(run))
        return out


def _batch(run: list[tuple[int, int]]) -> AckBatch:
    types = {t for _, t in run}
    uniform = (run[0][1],) if len(types) == 1 else tuple(t for _, t in run)
    return AckBatch(run[0][0], run[-1][0], uniform)


@dataclass(slots=True)
class _Delivered:
    node: int
    #: explicit mode: offset -> type, None while waiting for the application
    pending: dict[int, int | None] = field(default_factory=dict)
    #: explicit mode: how many of ``pending`` are None
    waiting: int = 0
    #: implicit mode: acquired ranges, all accepted at the next take() but for ``gaps``
    ranges: list[tuple[int, int]] = field(default_factory=list)
    gaps: set[int] = field(default_factory=set)


class AcknowledgementBook:
    """The application thread's ledger of delivered records and their acknowledgements.

    ``implicit``: every delivered record is accepted by the next :meth:`take`, so only ranges
    are kept (no work per record); otherwise each record waits for :meth:`acknowledge`."""

    def __init__(self, *, implicit: bool = False) -> None:
        self._implicit = implicit
        self._delivered: dict[TopicPartition, _Delivered] = {}

    def deliver(
        self, tp: TopicPartition, node: int, acquired: Sequence[tuple[int, int]], delivered: Sequence[int]
    ) -> None:
        """The ``acquired`` offset ranges (first, last) were lent to us by ``node``;
        ``delivered`` (offsets) of them go to the application, the others are gaps
        (acknowledged as GAP without it)."""
        entry = self._delivered.get(tp)
        if entry is None or entry.node != node:
            entry = self._delivered[tp] = _Delivered(node)
        total = sum(last - first + 1 for first, last in acquired)
        gaps: set[int] = set()
        if len(delivered) != total:
            shown = set(delivered)
            gaps = {o for first, last in acquired for o in range(first, last + 1) if o not in shown}
        if self._implicit:
            entry.ranges.extend(acquired)
            entry.gaps |= gaps
            return
        for first, last in acquired:
            for offset in range(first, last + 1):
                entry.pending[offset] = GAP if offset in gaps else None
        entry.waiting += total - len(gaps)

    def acknowledge(self, tp: TopicPartition, offset: int, ack_type: AcknowledgeType) -> None:
        """Record the application's acknowledgement of one delivered record (explicit mode)."""
        entry = self._delivered.get(tp)
        if self._implicit or entry is None or offset not in entry.pending or entry.pending[offset] == GAP:
            raise IllegalStateError(
                f"record {tp.topic}-{tp.partition}@{offset} is not waiting for an acknowledgement: "
                "acknowledge only records the last poll() returned, once each, before the next poll()"
            )
        if entry.pending[offset] is None:
            entry.waiting -= 1
        entry.pending[offset] = int(ack_type)

    def release(self, tp: TopicPartition, node: int, offset: int) -> None:
        """RELEASE a delivered record the application never saw (it could not be deserialized)."""
        entry = self._delivered.get(tp)
        if entry is None or entry.node != node:
            entry = self._delivered[tp] = _Delivered(node)
        if offset in entry.pending and entry.pending[offset] is None:
            entry.waiting -= 1
        entry.pending[offset] = int(AcknowledgeType.RELEASE)

    def unsettled_nodes(self) -> set[int]:
        """Brokers some of whose delivered records wait for the application."""
        if self._implicit:
            return {e.node for e in self._delivered.values()}
        return {e.node for e in self._delivered.values() if e.waiting}

    def unacknowledged(self) -> int:
        """How many delivered records wait for the application's acknowledgement."""
        if self._implicit:
            return sum(
                sum(last - first + 1 for first, last in e.ranges) - len(e.gaps)
                for e in self._delivered.values()
            )
        return sum(e.waiting for e in self._delivered.values())

    def take(self, *, implicit: bool) -> dict[int, dict[TopicPartition, Acknowledgements]]:
        """The acknowledgements to send, by node, forgetting them here. ``implicit``: records
        still waiting are ACCEPTed (implicit mode); otherwise they stay waiting."""
        out: dict[int, dict[TopicPartition, Acknowledgements]] = {}
        for tp, entry in list(self._delivered.items()):
            acks = Acknowledgements()
            for first, last in entry.ranges:
                if entry.gaps and any(first <= g <= last for g in entry.gaps):
                    for offset in range(first, last + 1):
                        acks.add(offset, GAP if offset in entry.gaps else AcknowledgeType.ACCEPT)
                else:
                    acks.add_range(first, last, AcknowledgeType.ACCEPT)
            entry.ranges.clear()
            entry.gaps.clear()
            for offset, ack_type in list(entry.pending.items()):
                if ack_type is None:
                    if not implicit:
                        continue
                    ack_type = AcknowledgeType.ACCEPT
                    entry.waiting -= 1
                acks.add(offset, ack_type)
                if ack_type == AcknowledgeType.RENEW:
                    entry.pending[offset] = None  # renewed, still to be acknowledged for good
                    entry.waiting += 1
                else:
                    del entry.pending[offset]
            if acks:
                out.setdefault(entry.node, {})[tp] = acks
            if not entry.pending and not entry.ranges:
                del self._delivered[tp]
        return out

    def release_all(self) -> dict[int, dict[TopicPartition, Acknowledgements]]:
        """Everything still waiting, RELEASEd (explicit mode, closing): the rest as take()."""
        for entry in self._delivered.values():
            for offset, ack_type in entry.pending.items():
                if ack_type is None:
                    entry.pending[offset] = int(AcknowledgeType.RELEASE)
            entry.waiting = 0
        return self.take(implicit=False)

    def forget(self, partitions: set[TopicPartition]) -> None:
        """Drop what is waiting for partitions no longer assigned (the broker took them back)."""
        for tp in [tp for tp in self._delivered if tp not in partitions]:
            del self._delivered[tp]
