"""The rebalance listener interface. [app: every method runs on the thread calling poll()]

Listener methods run inside ``poll()`` (or ``unsubscribe()`` / ``close()``) on the
application thread, never on the network thread, and the rebalance waits for them: revoked
partitions are not handed to another member until ``on_partitions_revoked`` returned. They may
call the consumer (commit, seek, pause, position...). An exception raised by a listener
method is re-raised by the ``poll()`` that ran it, after the rebalance was told it finished.
"""

from __future__ import annotations

from collections.abc import Awaitable

from kaflux.structs import TopicPartition


class ConsumerRebalanceListener:
    """Subclass and override what you need; the defaults do nothing. With
    ``kaflux.aio.AsyncConsumer`` the methods may be ``async def`` (they return an awaitable,
    which ``poll()`` awaits); the sync ``Consumer`` needs plain methods (returning None)."""

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> Awaitable[None] | None:
        """These partitions are being taken away: commit their offsets or flush state now.

        With the eager protocol this is every owned partition before each rebalance; with
        cooperative-sticky only the partitions that move to another member.
        """

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> Awaitable[None] | None:
        """These partitions were added to this member (may be empty after a rebalance).

        Positions are not fetched yet; ``seek()`` here decides where reading starts.
        """

    def on_partitions_lost(self, partitions: set[TopicPartition]) -> Awaitable[None] | None:
        """These partitions were lost without a clean revocation (the member was fenced or
        exceeded max.poll.interval.ms); another member may already own them, so do not commit
        their offsets. The default calls :meth:`on_partitions_revoked`, like Java."""
        return self.on_partitions_revoked(partitions)
