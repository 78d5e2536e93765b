"""Per-process pools of kaflux clients, keyed by their configuration. [io]

Spark reuses its Python worker processes across tasks and micro-batches, so a consumer made for
one task can serve the next, like Spark's ``KafkaDataConsumer`` cache: its connections are
open, and when the next task continues the same partition where the last one stopped, the
records it prefetched are used as they are.

Nothing here is ever pickled: the pools are module globals of the process that created them.
A consumer is lent to one task at a time (:func:`borrowed_consumer`); a producer is shared
(:func:`shared_producer`; ``Producer.send`` is thread-safe). :func:`close_all` empties the pools.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported when a client is made: a consumer's process never loads the producer
    from kaflux import Consumer, Producer, TopicPartition

__all__ = ["ConfigKey", "borrowed_consumer", "close_all", "config_key", "discard_producer", "shared_producer"]

log = logging.getLogger("pyspark_kaflux")

ConfigKey = tuple[tuple[str, str], ...]

#: Idle consumers kept per configuration; more are closed when returned.
MAX_IDLE_CONSUMERS = 4

_lock = threading.Lock()
_idle: dict[ConfigKey, list[Consumer]] = {}
_producers: dict[ConfigKey, Producer] = {}


def config_key(config: Mapping[str, str]) -> ConfigKey:
    """A hashable, order-independent key for a client configuration."""
    return tuple(sorted((str(k), str(v)) for k, v in config.items()))


def _take(key: ConfigKey, prefer: TopicPartition | None) -> Consumer | None:
    with _lock:
        pool = _idle.get(key)
        if not pool:
            return None
        if prefer is not None:
            for i, consumer in enumerate(pool):
                try:
                    if prefer in consumer.assignment():
                        return pool.pop(i)
                except Exception:  # a closed or broken consumer: drop it below
                    continue
        return pool.pop()


def _give_back(key: ConfigKey, consumer: Consumer) -> None:
    with _lock:
        pool = _idle.setdefault(key, [])
        if len(pool) < MAX_IDLE_CONSUMERS:
            pool.append(consumer)
            return
    _close_quietly(consumer)


def _close_quietly(client: Consumer | Producer) -> None:
    try:
        client.close(timeout=2.0)
    except Exception as e:  # closing is best effort
        log.debug("closing a cached kaflux client failed: %s", e)


@contextlib.contextmanager
def borrowed_consumer(config: Mapping[str, str], prefer: TopicPartition | None = None) -> Iterator[Consumer]:
    """Lend a consumer with this configuration (a cached one, or a new one).

    ``prefer`` picks an idle consumer that has that partition assigned, so it can go on from
    its prefetched records. The consumer goes back to the pool when the block ends normally;
    if the block raises (or a generator using it is closed early) it is closed instead, since
    its state is then unknown.
    """
    key = config_key(config)
    consumer = _take(key, prefer)
    if consumer is None:
        from kaflux import Consumer

        consumer = Consumer(dict(config))
    try:
        yield consumer
    except BaseException:
        _close_quietly(consumer)
        raise
    _give_back(key, consumer)


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
        consumers = [c for pool in _idle.values() for c in pool]
        producers = list(_producers.values())
        _idle.clear()
        _producers.clear()
    for consumer in consumers:
        _close_quietly(consumer)
    for producer in producers:
        _close_quietly(producer)
