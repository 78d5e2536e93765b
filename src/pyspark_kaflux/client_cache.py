"""Per-process pools of kaflux clients, keyed by their configuration. [io]

Spark reuses its Python worker processes across tasks and micro-batches, so a consumer made for
one task can serve the next, like Spark's ``KafkaDataConsumer`` cache: its connections are
open, and when the next task continues the same partition where the last one stopped, the
records it prefetched are used as they are. A worker therefore keeps one consumer per partition
it reads (up to :data:`MAX_IDLE_CONSUMERS`) rather than moving one consumer from partition to
partition, which would throw away what it prefetched at every task.

Nothing here is ever pickled: the pools are module globals of the process that created them.
A consumer is lent to one task at a time (:func:`borrowed_consumer`); a producer is shared
(:func:`shared_producer`; ``Producer.send`` is thread-safe). :func:`close_all` empties the pools.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported when a client is made: a consumer's process never loads the producer
    from kaflux import Consumer, Producer, TopicPartition

__all__ = [
    "ConfigKey",
    "PooledConsumer",
    "borrowed",
    "borrowed_consumer",
    "close_all",
    "config_key",
    "discard_producer",
    "shared_producer",
]

log = logging.getLogger("pyspark_kaflux")

ConfigKey = tuple[tuple[str, str], ...]

#: Idle consumers kept per configuration (like Spark's ``spark.kafka.consumer.cache.capacity``,
#: per Python worker): a worker keeps one per partition it reads, up to this many; beyond it, a
#: partition without one takes the least recently used consumer over, and a returned consumer
#: past the limit is closed.
MAX_IDLE_CONSUMERS = 16


@dataclass(eq=False)
class PooledConsumer:
    """A cached consumer and what its last borrower left for the next one."""

    consumer: Consumer
    #: Opaque to the cache: the range reader keeps here the records it polled past its range's
    #: end, for the next range of the same partition. Dropped with the consumer.
    carried: Any = None


_lock = threading.Lock()
_idle: dict[ConfigKey, list[PooledConsumer]] = {}  # least recently returned first
_producers: dict[ConfigKey, Producer] = {}


def config_key(config: Mapping[str, str]) -> ConfigKey:
    """A hashable, order-independent key for a client configuration."""
    return tuple(sorted((str(k), str(v)) for k, v in config.items()))


def _assigned(entry: PooledConsumer, tp: TopicPartition | None) -> bool:
    """Whether ``entry``'s consumer has ``tp`` assigned (None: has nothing assigned)."""
    try:
        assignment = entry.consumer.assignment()
    except Exception:  # a closed or broken consumer: not a match (it is reused or closed later)
        return False
    return not assignment if tp is None else tp in assignment


def _take(key: ConfigKey, prefer: TopicPartition | None) -> PooledConsumer | None:
    """An idle consumer to lend, or None to make a new one.

    Without ``prefer``: the most recently returned. With it: the one assigned ``prefer``, else
    one with nothing assigned, else a new one while the pool has room (so that the others keep
    their partitions and what they prefetched), else the least recently returned.
    """
    with _lock:
        pool = _idle.get(key)
        if not pool:
            return None
        if prefer is None:
            return pool.pop()
        for wanted in (prefer, None):
            for i, entry in enumerate(pool):
                if _assigned(entry, wanted):
                    return pool.pop(i)
        return pool.pop(0) if len(pool) >= MAX_IDLE_CONSUMERS else None


def _give_back(key: ConfigKey, entry: PooledConsumer) -> None:
    with _lock:
        pool = _idle.setdefault(key, [])
        pool.append(entry)
        if len(pool) <= MAX_IDLE_CONSUMERS:
            return
        entry = pool.pop(0)
    _close_quietly(entry.consumer)


def _close_quietly(client: Consumer | Producer) -> None:
    try:
        client.close(timeout=2.0)
    except Exception as e:  # closing is best effort
        log.debug("closing a cached kaflux client failed: %s", e)


@contextlib.contextmanager
def borrowed(config: Mapping[str, str], prefer: TopicPartition | None = None) -> Iterator[PooledConsumer]:
    """Lend a consumer with this configuration (a cached one, or a new one), with what its last
    borrower left in :attr:`PooledConsumer.carried`.

    ``prefer`` picks the idle consumer that has that partition assigned, so it can go on from
    its prefetched records. The consumer goes back to the pool when the block ends normally;
    if the block raises (or a generator using it is closed early) it is closed instead, since
    its state is then unknown.
    """
    key = config_key(config)
    entry = _take(key, prefer)
    if entry is None:
        from kaflux import Consumer

        entry = PooledConsumer(Consumer(dict(config)))
    try:
        yield entry
    except BaseException:
        _close_quietly(entry.consumer)
        raise
    _give_back(key, entry)


@contextlib.contextmanager
def borrowed_consumer(config: Mapping[str, str], prefer: TopicPartition | None = None) -> Iterator[Consumer]:
    """:func:`borrowed`, for a borrower that needs only the consumer."""
    with borrowed(config, prefer) as entry:
        yield entry.consumer


def shared_producer(config: Mapping[str, str]) -> Producer:
    """The process's producer for this configuration (created on first use)."""
    key = config_key(config)
    with _lock:
        producer = _producers.get(key)
        if producer is None:
            from kaflux import Producer

            producer = _producers[key] = Producer(dict(config))
        return producer


def discard_producer(config: Mapping[str, str]) -> None:
    """Close and forget the shared producer for this configuration (after it failed)."""
    with _lock:
        producer = _producers.pop(config_key(config), None)
    if producer is not None:
        _close_quietly(producer)


def close_all() -> None:
    """Close every cached client of this process."""
    with _lock:
        consumers = [entry.consumer for pool in _idle.values() for entry in pool]
        producers = list(_producers.values())
        _idle.clear()
        _producers.clear()
    for consumer in consumers:
        _close_quietly(consumer)
    for producer in producers:
        _close_quietly(producer)
