"""Choosing a partition for a record. [pure]

Keyed records go where Java's ``BuiltInPartitioner`` (and librdkafka's ``murmur2_random``)
put them: ``(murmur2(key) & 0x7fffffff) % partitions``. Keyless records are *sticky*: they
all go to one partition until its batch is sent, then the partitioner moves on, which fills
batches instead of spreading single records over every partition (KIP-480).
"""

from __future__ import annotations

import random

# One murmur2 for the producer's send() and for send_arrow()'s column encoder.
from kaflux.records.encode import murmur2, partition_for_key

__all__ = ["StickyPartitioner", "murmur2", "partition_for_key"]


class StickyPartitioner:
    """Picks one partition per topic for keyless records until told its batch is done."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        self._current: dict[str, int] = {}

    def partition(self, topic: str, num_partitions: int) -> int:
        """The sticky partition of ``topic``."""
        current = self._current.get(topic)
        if current is None or current >= num_partitions:
            current = self._rng.randrange(num_partitions)
            self._current[topic] = current
        return current

    def on_new_batch(self, topic: str, num_partitions: int, previous: int) -> None:
        """The sticky partition's batch filled up: move to another partition."""
        if self._current.get(topic) != previous or num_partitions <= 1:
            return
        choice = self._rng.randrange(num_partitions - 1)
        self._current[topic] = choice if choice < previous else choice + 1
