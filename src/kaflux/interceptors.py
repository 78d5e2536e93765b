"""Client interceptors (KIP-42): code that sees every record a client sends or returns, and
every commit, without changing the application. [shared: which thread runs each hook is said
on the hook]

As Java's ``ProducerInterceptor`` and ``ConsumerInterceptor``. A client gets its interceptors
from ``interceptors=[...]`` (instances), from the ``interceptor.classes`` setting (dotted
class paths, each class made with no arguments, then ``configure(config)``), and from the
factories registered with :func:`register_interceptor_factory` (what
:class:`kaflux.opentelemetry.KafluxInstrumentor` uses), in that order; they run in that order.

* A hook that raises is logged (logger ``kaflux.interceptors``) and skipped: the record goes on
  as the previous interceptor left it, and the client is never affected, as in Java.
* Without interceptors a client pays nothing on its hot path: the producer's ``send`` is the
  plain method (a producer with interceptors gets an intercepting ``send`` as an instance
  attribute); ``poll()`` checks one attribute per call, not per record.
* The hooks live in the clients' shared core (the sync methods and their wait steps), so the
  ``kaflux.aio`` clients, ``send_arrow`` / ``poll_arrow`` and share consumers run them too.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from kaflux.errors import ConfigError, KafkaError
from kaflux.structs import OffsetAndMetadata, RecordMetadata, TopicPartition

if TYPE_CHECKING:
    from kaflux.producer.futures import BatchMetadata
    from kaflux.records import ConsumerRecord

__all__ = [
    "ConsumerInterceptor",
    "ConsumerInterceptors",
    "ProducerInterceptor",
    "ProducerInterceptors",
    "ProducerRecord",
    "ShareConsumerInterceptor",
    "load_interceptors",
    "register_interceptor_factory",
    "unregister_interceptor_factory",
]

log = logging.getLogger("kaflux.interceptors")


@dataclass(slots=True)
class ProducerRecord:
    """A record on its way into :meth:`kaflux.Producer.send`, as a producer interceptor's
    :meth:`ProducerInterceptor.on_send` sees it (before serialization: ``key`` and ``value``
    are what the application passed). ``headers`` is a list of ``(str, bytes | None)`` (an
    interceptor may append to it); ``partition`` and ``timestamp`` are None unless given."""

    topic: str
    value: Any = None
    key: Any = None
    headers: list[tuple[str, bytes | None]] | None = None
    partition: int | None = None
    timestamp: int | None = None


class ProducerInterceptor:
    """Sees each record a producer sends and its outcome. Subclass it and override the hooks
    you need (each default does nothing).

    Threads: :meth:`on_send` and :meth:`on_send_batch` run on the thread calling ``send()`` /
    ``send_arrow()`` (the event loop's thread for ``kaflux.aio.AsyncProducer``);
    :meth:`on_acknowledgement` runs on the producer's network thread, where delivery callbacks
    run, just before the record's own callback, so it must be quick; it also runs on the
    sending thread, with ``metadata`` None, when ``send()`` itself raises after
    :meth:`on_send` (Java's ``onSendError``).
    """

    def configure(self, config: Mapping[str, object]) -> None:
        """Called once with the client's configuration, for interceptors made from
        ``interceptor.classes`` or by a registered factory (instances passed in
        ``interceptors=`` are not configured)."""

    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        """Return the record to send: ``record`` itself (changed or not) or another one."""
        return record

    def on_send_batch(self, topic: str, batch: Any) -> Any:
        """``send_arrow()``: return the ``pyarrow.RecordBatch`` to send to ``topic``."""
        return batch

    def on_acknowledgement(self, metadata: RecordMetadata | None, error: KafkaError | None) -> None:
        """The record was written (``error`` None) or failed (``metadata.offset`` -1, or
        ``metadata`` None when ``send()`` raised)."""

    def on_record_acknowledgement(
        self, record: ProducerRecord, metadata: RecordMetadata | None, error: KafkaError | None
    ) -> None:
        """kaflux's :meth:`on_acknowledgement` that also gets the record this interceptor's
        :meth:`on_send` returned (the same object, whatever later interceptors did), to pair
        the two (a tracing span, say). What the producer calls; by default it calls
        :meth:`on_acknowledgement`."""
        self.on_acknowledgement(metadata, error)

    def on_batch_acknowledgement(self, metadata: BatchMetadata | None, error: BaseException | None) -> None:
        """A ``send_arrow()`` batch was written (``metadata``) or failed (``error``; ``metadata``
        None); network thread."""

    def close(self) -> None:
        """Called once when the producer closes."""


class ConsumerInterceptor:
    """Sees what a consumer returns and commits. Subclass it and override the hooks you need
    (each default does nothing).

    Threads: every hook runs on the thread using the consumer (the one calling ``poll()``,
    ``commit_*()`` or ``close()``; the event loop's thread for ``kaflux.aio``). Offsets
    committed by auto-commit are reported at the next ``poll()`` or at ``close()``, as in
    Java's consumer.
    """

    def configure(self, config: Mapping[str, object]) -> None:
        """Called once with the client's configuration, for interceptors made from
        ``interceptor.classes`` or by a registered factory."""

    def on_consume(self, records: list[ConsumerRecord]) -> list[ConsumerRecord]:
        """Return the records ``poll()`` hands the application (``records`` itself, or a
        filtered or changed list). Positions are not affected: a dropped record is skipped."""
        return records

    def on_consume_batch(self, batch: Any) -> Any:
        """``poll_arrow()``: return the ``pyarrow.RecordBatch`` to hand the application."""
        return batch

    def on_commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        """``offsets`` were committed (by ``commit_sync()``, ``commit_async()``, auto-commit or
        ``close()``)."""

    def close(self) -> None:
        """Called once when the consumer closes."""


class ShareConsumerInterceptor(ConsumerInterceptor):
    """A :class:`ConsumerInterceptor` for share consumers, which also sees acknowledgements.
    (A share consumer commits no offsets: :meth:`on_commit` is not called.)"""

    def on_acknowledge(self, offsets: dict[TopicPartition, set[int]], error: KafkaError | None) -> None:
        """Acknowledgements of these offsets completed (``error`` None) or failed; runs where
        the acknowledgement commit callback runs (the share consumer's thread)."""


InterceptorT = TypeVar("InterceptorT", ProducerInterceptor, ConsumerInterceptor)

#: ``factory(client_kind, client)`` -> an interceptor for a new client, or None
InterceptorFactory = Callable[[str, Any], "ProducerInterceptor | ConsumerInterceptor | None"]
_factories: list[InterceptorFactory] = []


def register_interceptor_factory(factory: InterceptorFactory) -> None:
    """Give every client created from now on the interceptor ``factory(kind, client)``
    returns, configured with the client's configuration. ``kind`` is ``producer``,
    ``consumer`` or ``share-consumer``; ``client`` the sync client being made (its
    ``client_id`` set, not started yet); the factory returns None for no interceptor.
    Clients already created are not changed."""
    if factory not in _factories:
        _factories.append(factory)


def unregister_interceptor_factory(factory: InterceptorFactory) -> None:
    """Undo :func:`register_interceptor_factory` (for clients created from now on)."""
    if factory in _factories:
        _factories.remove(factory)


def _load_class(path: str) -> type:
    module_name, _, name = path.rpartition(".")
    if not module_name or not name:
        raise ConfigError("interceptor.classes", f"{path!r} is not a dotted class path (module.Class)")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(
            "interceptor.classes", f"cannot import module {module_name!r} of {path!r}: {exc}"
        ) from exc
    cls = getattr(module, name, None)
    if not isinstance(cls, type):
        raise ConfigError("interceptor.classes", f"module {module_name!r} has no class {name!r}")
    return cls


def load_interceptors(
    base: type[InterceptorT],
    kind: str,
    client: Any,
    given: Iterable[InterceptorT] | None,
    class_paths: Sequence[str],
    config: Mapping[str, object],
) -> list[InterceptorT]:
    """The interceptors of a new ``client`` (its ``client_id`` set): ``given``, then one per
    class in ``class_paths`` (configured with ``config``), then the registered factories'.

    Raises:
        ConfigError: a class path cannot be imported, is not a ``base`` subclass, or its
            class cannot be made with no arguments.
        TypeError: an element of ``given`` is not a ``base``.
    """
    found: list[InterceptorT] = []
    for interceptor in given or ():
        if not isinstance(interceptor, base):
            raise TypeError(
                f"interceptors must be {base.__name__} instances, got {type(interceptor).__name__}"
            )
        found.append(interceptor)
    for path in class_paths:
        cls = _load_class(path)
        if not issubclass(cls, base):
            raise ConfigError("interceptor.classes", f"{path!r} is not a subclass of kaflux.{base.__name__}")
        try:
            made = cls()
        except Exception as exc:
            raise ConfigError("interceptor.classes", f"{path}() failed: {type(exc).__name__}: {exc}") from exc
        made.configure(dict(config))
        found.append(made)
    for factory in list(_factories):
        try:
            made_by = factory(kind, client)
        except Exception:
            log.exception(
                "an interceptor factory raised for %s %s; it gives the client no interceptor",
                kind,
                client.client_id,
            )
            continue
        if isinstance(made_by, base):
            made_by.configure(dict(config))
            found.append(made_by)
    return found


class _Chain(Generic[InterceptorT]):
    """Calls each interceptor in order, logging and skipping one that raises."""

    __slots__ = ("client_id", "interceptors")

    def __init__(self, client_id: str, interceptors: list[InterceptorT]) -> None:
        self.client_id = client_id
        self.interceptors: list[InterceptorT] = interceptors

    def _failed(self, interceptor: object, hook: str) -> None:
        log.warning(
            "%s: interceptor %s.%s raised; skipped",
            self.client_id,
            type(interceptor).__name__,
            hook,
            exc_info=True,
        )

    def close(self) -> None:
        """Close every interceptor (errors logged)."""
        for interceptor in self.interceptors:
            try:
                interceptor.close()
            except Exception:
                self._failed(interceptor, "close")


class ProducerInterceptors(_Chain[ProducerInterceptor]):
    """A producer's interceptors, called in order (Java's ``ProducerInterceptors``)."""

    __slots__ = ()

    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        """Each interceptor's :meth:`ProducerInterceptor.on_send`, each given the previous one's
        record; one that raises or returns no ProducerRecord is skipped. The record to send."""
        return self.on_send_each(record)[-1]

    def on_send_each(self, record: ProducerRecord) -> list[ProducerRecord]:
        """:meth:`on_send`, returning the record after each interceptor (the last one is the
        record to send), so that each acknowledgement can be paired with the record that
        interceptor returned (:meth:`on_acknowledgement`)."""
        after: list[ProducerRecord] = []
        for interceptor in self.interceptors:
            try:
                result = interceptor.on_send(record)
            except Exception:
                self._failed(interceptor, "on_send")
            else:
                if isinstance(result, ProducerRecord):
                    record = result
                else:
                    log.warning(
                        "%s: interceptor %s.on_send returned %s, not a ProducerRecord; skipped",
                        self.client_id,
                        type(interceptor).__name__,
                        type(result).__name__,
                    )
            after.append(record)
        return after

    def on_send_batch(self, topic: str, batch: Any) -> Any:
        """Each interceptor's :meth:`ProducerInterceptor.on_send_batch`, in order."""
        for interceptor in self.interceptors:
            try:
                result = interceptor.on_send_batch(topic, batch)
            except Exception:
                self._failed(interceptor, "on_send_batch")
                continue
            if result is not None:
                batch = result
        return batch

    def on_acknowledgement(
        self, records: list[ProducerRecord], metadata: RecordMetadata | None, error: KafkaError | None
    ) -> None:
        """Each interceptor's :meth:`ProducerInterceptor.on_record_acknowledgement` (by
        default its ``on_acknowledgement``), with the record it returned from ``on_send``
        (``records``: what :meth:`on_send_each` returned)."""
        for interceptor, record in zip(self.interceptors, records, strict=True):
            try:
                interceptor.on_record_acknowledgement(record, metadata, error)
            except Exception:
                self._failed(interceptor, "on_acknowledgement")

    def on_batch_acknowledgement(self, metadata: BatchMetadata | None, error: BaseException | None) -> None:
        """Each interceptor's :meth:`ProducerInterceptor.on_batch_acknowledgement`."""
        for interceptor in self.interceptors:
            try:
                interceptor.on_batch_acknowledgement(metadata, error)
            except Exception:
                self._failed(interceptor, "on_batch_acknowledgement")


class ConsumerInterceptors(_Chain[ConsumerInterceptor]):
    """A consumer's (or share consumer's) interceptors, called in order."""

    __slots__ = ()

    def on_consume(self, records: list[ConsumerRecord]) -> list[ConsumerRecord]:
        """Each interceptor's :meth:`ConsumerInterceptor.on_consume`, each given the previous
        one's list; one that raises or returns no list is skipped."""
        for interceptor in self.interceptors:
            try:
                result = interceptor.on_consume(records)
            except Exception:
                self._failed(interceptor, "on_consume")
                continue
            if isinstance(result, list):
                records = result
            else:
                log.warning(
                    "%s: interceptor %s.on_consume returned %s, not a list; skipped",
                    self.client_id,
                    type(interceptor).__name__,
                    type(result).__name__,
                )
        return records

    def on_consume_by_partition(
        self, by_partition: dict[TopicPartition, list[ConsumerRecord]]
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """:meth:`on_consume` for ``poll()``'s records grouped by partition (regrouped after,
        keeping each partition's order as the interceptors left it)."""
        records = [record for part in by_partition.values() for record in part]
        result = self.on_consume(records)
        regrouped: dict[TopicPartition, list[ConsumerRecord]] = {}
        for record in result:
            tp = TopicPartition(record.topic, record.partition)
            bucket = regrouped.get(tp)
            if bucket is None:
                regrouped[tp] = [record]
            else:
                bucket.append(record)
        return regrouped

    def on_consume_batch(self, batch: Any) -> Any:
        """Each interceptor's :meth:`ConsumerInterceptor.on_consume_batch`, in order."""
        for interceptor in self.interceptors:
            try:
                result = interceptor.on_consume_batch(batch)
            except Exception:
                self._failed(interceptor, "on_consume_batch")
                continue
            if result is not None:
                batch = result
        return batch

    def on_commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        """Each interceptor's :meth:`ConsumerInterceptor.on_commit` (none for no offsets)."""
        if not offsets:
            return
        for interceptor in self.interceptors:
            try:
                interceptor.on_commit(offsets)
            except Exception:
                self._failed(interceptor, "on_commit")

    def on_acknowledge(self, offsets: dict[TopicPartition, set[int]], error: KafkaError | None) -> None:
        """Each share interceptor's :meth:`ShareConsumerInterceptor.on_acknowledge`."""
        for interceptor in self.interceptors:
            if not isinstance(interceptor, ShareConsumerInterceptor):
                continue
            try:
                interceptor.on_acknowledge(offsets, error)
            except Exception:
                self._failed(interceptor, "on_acknowledge")
