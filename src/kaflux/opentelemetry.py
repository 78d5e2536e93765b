"""OpenTelemetry tracing and metrics for kaflux's clients, built on their interceptors.
[shared: the hooks run where :mod:`kaflux.interceptors` says; the metrics bridge on the thread
that collects metrics]

Needs the ``kaflux[opentelemetry]`` extra (``opentelemetry-api``, ``opentelemetry-instrumentation``)::

    from kaflux.opentelemetry import KafluxInstrumentor

    KafluxInstrumentor().instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    consumer = kaflux.Consumer({...})  # created after instrument(): traced, its metrics exported

:class:`KafluxInstrumentor` is a ``BaseInstrumentor`` as the ``opentelemetry-instrumentation-*``
packages are: it gives every client created after ``instrument()`` (sync or ``kaflux.aio``,
consumer, producer or share consumer) a tracing interceptor, and exports its ``metrics()``;
``uninstrument()`` stops that for clients created afterwards (and stops exporting metrics).
The interceptors are public too (:class:`TracingProducerInterceptor`,
:class:`TracingConsumerInterceptor`, :class:`TracingShareConsumerInterceptor`), for
``interceptors=[...]`` without the instrumentor.

Spans follow OpenTelemetry's messaging semantic conventions (1.27 and later names):

* producer: one ``send <topic>`` span (kind PRODUCER) per record, from ``send()`` to its
  acknowledgement, with ``messaging.system=kafka``, ``messaging.operation.name=send``,
  ``messaging.operation.type=send``, ``messaging.destination.name``,
  ``messaging.destination.partition.id`` and ``messaging.kafka.offset`` (once written),
  ``messaging.client.id``, ``messaging.kafka.message.key`` (a str key, or bytes that decode as
  UTF-8); a failed record gets status ERROR and ``error.type``. Its context is injected into the
  record's headers as W3C trace context (``traceparent``, by the global propagator), so that
  consumers, kaflux or not, continue the trace. ``send_arrow()``: one span per call, with
  ``messaging.batch.message_count`` (no headers are added to the rows).
* consumer: one ``poll <topic>`` span (kind CLIENT, ``messaging.operation.type=receive``) per
  ``poll()`` that returns records, linked to each record's producer context; and one
  ``process <topic>`` span (kind CONSUMER) per record, whose parent is the producer's context
  extracted from the record's headers (so the trace continues; without one it is a child of
  the poll span), with the partition, ``messaging.kafka.offset``,
  ``messaging.consumer.group.name`` and the client id. It lasts from the ``poll()`` that
  returned the record to the next ``poll()`` (or ``close()``): the time the application had
  it, as Java's agent measures. ``poll_arrow()``: the poll span only. To parent your own
  spans on a record's producer, use :func:`record_context`.
* share consumer: the same, with ``messaging.kafka.delivery_count`` (not in the conventions
  yet) on each record's span.

Metrics: every value of the clients' ``metrics()`` as an observable gauge named as Java's
client names it when it exports metrics over OpenTelemetry (KIP-714):
``org.apache.kafka.<group without -metrics>.<name>``, dashes made dots
(``consumer-fetch-manager-metrics`` / ``records-lag-max`` is
``org.apache.kafka.consumer.fetch.manager.records.lag.max``), kaflux's own groups under
``kaflux.`` (``kaflux.consumer.network.loops``), with the attributes ``client_id`` and the
group's tags (``node_id``, ``topic``, ``partition``). ``kaflux.clients`` counts the clients
exported, by ``client_kind``; collecting it measures every client (each ``metrics()`` bounded
by ``metrics_timeout``). A metric name first seen in one collection is exported from the next
one on.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, Protocol

from opentelemetry import metrics, propagate, trace
from opentelemetry.context import Context
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.propagators.textmap import Getter, Setter
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode

from kaflux import __version__
from kaflux.errors import KafkaError
from kaflux.interceptors import (
    ConsumerInterceptor,
    ProducerInterceptor,
    ProducerRecord,
    ShareConsumerInterceptor,
    register_interceptor_factory,
    unregister_interceptor_factory,
)
from kaflux.metrics.registry import split_group
from kaflux.records import ConsumerRecord
from kaflux.structs import RecordMetadata

__all__ = [
    "KafluxInstrumentor",
    "TracingConsumerInterceptor",
    "TracingProducerInterceptor",
    "TracingShareConsumerInterceptor",
    "record_context",
]

_NAME = "kaflux.opentelemetry"
_SCHEMA_URL = "https://opentelemetry.io/schemas/1.27.0"
Headers = list[tuple[str, bytes | None]]


class _HeaderSetter(Setter[Headers]):
    """Writes a propagation field as a header, replacing one of the same name."""

    def set(self, carrier: Headers, key: str, value: str) -> None:
        carrier[:] = [(k, v) for k, v in carrier if k != key]
        carrier.append((key, value.encode()))


class _HeaderGetter(Getter[Headers]):
    """Reads propagation fields from record headers (bytes values, decoded as UTF-8)."""

    def get(self, carrier: Headers, key: str) -> list[str] | None:
        found = [v.decode(errors="replace") for k, v in carrier if k == key and v is not None]
        return found or None

    def keys(self, carrier: Headers) -> list[str]:
        return [k for k, _ in carrier]


_SETTER = _HeaderSetter()
_GETTER = _HeaderGetter()


def record_context(record: ConsumerRecord) -> Context | None:
    """The trace context its producer injected into ``record``'s headers (W3C trace context,
    by the global propagator), or None: ``tracer.start_as_current_span("handle",
    context=record_context(record))`` parents your span on the producer's."""
    headers = record.headers
    if not headers:
        return None
    context = propagate.extract(headers, getter=_GETTER)
    if not trace.get_current_span(context).get_span_context().is_valid:
        return None
    return context


def _key_attribute(key: object) -> str | None:
    if isinstance(key, str):
        return key
    if isinstance(key, bytes):
        try:
            return key.decode()
        except UnicodeDecodeError:
            return None
    return None


def _tracer(tracer_provider: trace.TracerProvider | None) -> trace.Tracer:
    return trace.get_tracer(_NAME, __version__, tracer_provider, schema_url=_SCHEMA_URL)


class TracingProducerInterceptor(ProducerInterceptor):
    """A ``send <topic>`` span per record, its context injected into the record's headers
    (see :mod:`kaflux.opentelemetry`)."""

    def __init__(self, tracer_provider: trace.TracerProvider | None = None, client_id: str = "") -> None:
        """``tracer_provider``: None for the global one; ``client_id``: the producer's (the
        ``messaging.client.id`` attribute; else ``client.id`` from :meth:`configure`)."""
        self._tracer = _tracer(tracer_provider)
        self._client_id = client_id
        #: id(record) -> its span, from on_send to its acknowledgement (the record is kept
        #: alive meanwhile by the producer's delivery callback, so its id is not reused)
        self._spans: dict[int, Span] = {}
        #: called when the producer closes (the instrumentor stops exporting its metrics)
        self.on_close: Callable[[], None] | None = None

    def configure(self, config: Mapping[str, object]) -> None:
        """Take ``client.id`` from the producer's configuration, if not given."""
        if not self._client_id:
            self._client_id = str(config.get("client.id") or "")

    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        """Start the record's span and inject its context into a copy of its headers."""
        attributes: dict[str, Any] = {
            "messaging.system": "kafka",
            "messaging.operation.name": "send",
            "messaging.operation.type": "send",
            "messaging.destination.name": record.topic,
        }
        if self._client_id:
            attributes["messaging.client.id"] = self._client_id
        if record.partition is not None:
            attributes["messaging.destination.partition.id"] = str(record.partition)
        key = _key_attribute(record.key)
        if key is not None:
            attributes["messaging.kafka.message.key"] = key
        span = self._tracer.start_span(f"send {record.topic}", kind=SpanKind.PRODUCER, attributes=attributes)
        headers: Headers = list(record.headers or ())
        propagate.inject(headers, context=trace.set_span_in_context(span), setter=_SETTER)
        record.headers = headers
        self._spans[id(record)] = span
        return record

    def on_record_acknowledgement(
        self, record: ProducerRecord, metadata: RecordMetadata | None, error: KafkaError | None
    ) -> None:
        """End the record's span with where it landed, or its error."""
        span = self._spans.pop(id(record), None)
        if span is None:
            return
        if metadata is not None:
            span.set_attribute("messaging.destination.partition.id", str(metadata.partition))
            if metadata.offset >= 0:
                span.set_attribute("messaging.kafka.offset", metadata.offset)
        if error is not None:
            span.set_attribute("error.type", type(error).__name__)
            span.set_status(Status(StatusCode.ERROR, str(error)))
        span.end()

    def on_send_batch(self, topic: str, batch: Any) -> Any:
        """One span for a ``send_arrow()`` call (no headers are added to its rows)."""
        attributes: dict[str, Any] = {
            "messaging.system": "kafka",
            "messaging.operation.name": "send",
            "messaging.operation.type": "send",
            "messaging.destination.name": topic,
            "messaging.batch.message_count": int(batch.num_rows),
        }
        if self._client_id:
            attributes["messaging.client.id"] = self._client_id
        self._tracer.start_span(f"send {topic}", kind=SpanKind.PRODUCER, attributes=attributes).end()
        return batch

    def close(self) -> None:
        """End the spans of records never acknowledged (the producer closed first)."""
        spans, self._spans = self._spans, {}
        for span in spans.values():
            span.set_status(
                Status(StatusCode.ERROR, "the producer closed before the record was acknowledged")
            )
            span.end()
        if self.on_close is not None:
            self.on_close()


class TracingConsumerInterceptor(ConsumerInterceptor):
    """A ``poll <topic>`` span per poll that returns records and a ``process <topic>`` span per
    record, parented on its producer's context (see :mod:`kaflux.opentelemetry`)."""

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        client_id: str = "",
        group_id: str | None = None,
    ) -> None:
        """``tracer_provider``: None for the global one; ``client_id`` and ``group_id``: the
        consumer's (else ``client.id`` and ``group.id`` from :meth:`configure`)."""
        self._tracer = _tracer(tracer_provider)
        self._client_id = client_id
        self._group_id = group_id
        #: the process spans of the last poll, ended by the next one (or close)
        self._open: list[Span] = []
        #: called when the consumer closes (the instrumentor stops exporting its metrics)
        self.on_close: Callable[[], None] | None = None

    def configure(self, config: Mapping[str, object]) -> None:
        """Take ``client.id`` and ``group.id`` from the consumer's configuration, if not given."""
        if not self._client_id:
            self._client_id = str(config.get("client.id") or "")
        if self._group_id is None and config.get("group.id"):
            self._group_id = str(config.get("group.id"))

    def _base_attributes(self, operation: str, kind: str) -> dict[str, Any]:
        attributes: dict[str, Any] = {
            "messaging.system": "kafka",
            "messaging.operation.name": operation,
            "messaging.operation.type": kind,
        }
        if self._client_id:
            attributes["messaging.client.id"] = self._client_id
        if self._group_id:
            attributes["messaging.consumer.group.name"] = self._group_id
        return attributes

    def _end_open(self) -> None:
        spans, self._open = self._open, []
        for span in spans:
            span.end()

    def on_consume(self, records: list[ConsumerRecord]) -> list[ConsumerRecord]:
        """End the last poll's record spans; start this poll's."""
        self._end_open()
        if not records:
            return records
        topics = {r.topic for r in records}
        topic = next(iter(topics)) if len(topics) == 1 else None
        creators: list[Context | None] = [record_context(r) for r in records]
        links = [Link(trace.get_current_span(c).get_span_context()) for c in creators if c is not None]
        attributes = self._base_attributes("poll", "receive")
        attributes["messaging.batch.message_count"] = len(records)
        if topic is not None:
            attributes["messaging.destination.name"] = topic
        tracer = self._tracer
        poll_span = tracer.start_span(
            f"poll {topic}" if topic is not None else "poll",
            kind=SpanKind.CLIENT,
            attributes=attributes,
            links=links,
        )
        poll_context = trace.set_span_in_context(poll_span)
        base = self._base_attributes("process", "process")
        opened = self._open
        for record, creator in zip(records, creators, strict=True):
            attributes = dict(base)
            attributes["messaging.destination.name"] = record.topic
            attributes["messaging.destination.partition.id"] = str(record.partition)
            attributes["messaging.kafka.offset"] = record.offset
            key = _key_attribute(record.key)
            if key is not None:
                attributes["messaging.kafka.message.key"] = key
            self._more_attributes(record, attributes)
            opened.append(
                tracer.start_span(
                    f"process {record.topic}",
                    context=creator if creator is not None else poll_context,
                    kind=SpanKind.CONSUMER,
                    attributes=attributes,
                )
            )
        poll_span.end()
        return records

    def _more_attributes(self, record: ConsumerRecord, attributes: dict[str, Any]) -> None:
        """Attributes of a record's span beyond the conventions' (the share consumer's)."""

    def on_consume_batch(self, batch: Any) -> Any:
        """One poll span for a ``poll_arrow()`` batch (no per-row spans)."""
        self._end_open()
        attributes = self._base_attributes("poll", "receive")
        attributes["messaging.batch.message_count"] = int(batch.num_rows)
        self._tracer.start_span("poll", kind=SpanKind.CLIENT, attributes=attributes).end()
        return batch

    def close(self) -> None:
        """End the last poll's record spans."""
        self._end_open()
        if self.on_close is not None:
            self.on_close()


class TracingShareConsumerInterceptor(TracingConsumerInterceptor, ShareConsumerInterceptor):
    """:class:`TracingConsumerInterceptor` for share consumers: each record's span also has
    ``messaging.kafka.delivery_count``."""

    def _more_attributes(self, record: ConsumerRecord, attributes: dict[str, Any]) -> None:
        if record.delivery_count is not None:
            attributes["messaging.kafka.delivery_count"] = record.delivery_count


class _MetricsSource(Protocol):
    client_id: str

    def metrics(self, timeout: float = ...) -> Mapping[str, Mapping[str, float]]: ...


def otel_metric_name(group: str, name: str) -> str:
    """The OpenTelemetry name of Java's metric ``name`` of ``group`` (KIP-714's mapping):
    ``org.apache.kafka.`` + the group without ``-metrics`` + the name, dashes made dots;
    kaflux's own groups under ``kaflux.``."""
    base = group.removesuffix("-metrics").replace("-", ".")
    metric = name.replace("-", ".")
    if base.startswith("kaflux."):
        return f"{base}.{metric}"
    return f"org.apache.kafka.{base}.{metric}"


class _MetricsBridge:
    """Observable gauges reading the instrumented clients' ``metrics()`` (see the module
    docstring). [collection thread; clients are added from the threads that create them]"""

    def __init__(self, meter: metrics.Meter, timeout: float) -> None:
        self._meter = meter
        self._timeout = timeout
        self._lock = threading.Lock()
        self._clients: dict[int, tuple[str, weakref.ref[Any]]] = {}
        self._instruments: set[str] = set()
        #: the values measured by the last collection: OTel name -> [(value, attributes)]
        self._values: dict[str, list[tuple[float, dict[str, str]]]] = {}
        self._stopped = False
        meter.create_observable_gauge(
            "kaflux.clients",
            callbacks=[self._measure],
            unit="{client}",
            description="kaflux clients whose metrics are exported (collecting this measures them)",
        )

    def add(self, kind: str, client: _MetricsSource) -> None:
        """Export ``client``'s metrics (until :meth:`remove` or it is garbage)."""
        with self._lock:
            if not self._stopped:
                self._clients[id(client)] = (kind, weakref.ref(client))

    def remove(self, client: object) -> None:
        """Stop exporting ``client``'s metrics (it closed)."""
        with self._lock:
            self._clients.pop(id(client), None)

    def stop(self) -> None:
        """Export nothing any more (uninstrument()); the instruments stay, observing nothing."""
        with self._lock:
            self._stopped = True
            self._clients.clear()
            self._values = {}

    def _measure(self, options: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            clients = [(kind, ref()) for kind, ref in self._clients.values()]
        counts: dict[str, int] = {}
        values: dict[str, list[tuple[float, dict[str, str]]]] = {}
        for kind, client in clients:
            if client is None:
                continue
            counts[kind] = counts.get(kind, 0) + 1
            try:
                snapshot = client.metrics(self._timeout)
            except Exception:
                continue  # a client closing meanwhile: measured next time, or removed
            for group_key, group_values in snapshot.items():
                group, tags = split_group(group_key)
                attributes = {
                    "client_id": client.client_id,
                    **{t.replace("-", "_"): v for t, v in tags.items()},
                }
                for metric, value in group_values.items():
                    if math.isnan(value):
                        continue
                    values.setdefault(otel_metric_name(group, metric), []).append((float(value), attributes))
        new = [name for name in values if name not in self._instruments]
        with self._lock:
            self._values = {} if self._stopped else values
        if new:
            # The SDK holds its lock while it collects: an instrument can only be made after
            # this collection, so a short-lived thread makes them (they report from the next).
            self._instruments.update(new)
            threading.Thread(
                target=self._register, args=(new,), name="kaflux-otel-metrics", daemon=True
            ).start()
        return [Observation(count, {"client_kind": kind}) for kind, count in counts.items()]

    def _register(self, names: list[str]) -> None:
        for name in names:
            self._meter.create_observable_gauge(name, callbacks=[self._observer(name)])

    def _observer(self, name: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(value, attributes) for value, attributes in self._values.get(name, ())]

        return observe


class KafluxInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Traces and measures every kaflux client created after :meth:`instrument` (see
    :mod:`kaflux.opentelemetry`). As every ``BaseInstrumentor``, one instance per process.

    ``instrument(tracer_provider=None, meter_provider=None, metrics_timeout=0.5)``: None for
    the global providers; ``metrics_timeout`` bounds each client's ``metrics()`` when metrics
    are collected (seconds). ``uninstrument()``: clients created afterwards are not traced,
    and no client's metrics are exported any more.
    """

    _factory: Callable[[str, Any], Any] | None = None
    _bridge: _MetricsBridge | None = None

    def instrumentation_dependencies(self) -> Collection[str]:
        """The packages this instruments: kaflux."""
        return ("kaflux >= 0.1.0",)

    def _instrument(self, **kwargs: Any) -> None:
        tracer_provider: trace.TracerProvider | None = kwargs.get("tracer_provider")
        meter_provider: metrics.MeterProvider | None = kwargs.get("meter_provider")
        timeout = float(kwargs.get("metrics_timeout", 0.5))
        meter = metrics.get_meter(_NAME, __version__, meter_provider, schema_url=_SCHEMA_URL)
        bridge = self._bridge = _MetricsBridge(meter, timeout)

        def factory(kind: str, client: Any) -> Any:
            client_id = str(client.client_id)
            bridge.add(kind, client)
            tracing: TracingProducerInterceptor | TracingConsumerInterceptor
            if kind == "producer":
                tracing = TracingProducerInterceptor(tracer_provider, client_id)
            elif kind == "share-consumer":
                tracing = TracingShareConsumerInterceptor(tracer_provider, client_id)
            else:
                tracing = TracingConsumerInterceptor(tracer_provider, client_id)
            ref = weakref.ref(client)

            def closed() -> None:
                gone = ref()
                if gone is not None:
                    bridge.remove(gone)

            tracing.on_close = closed
            return tracing

        self._factory = factory
        register_interceptor_factory(factory)

    def _uninstrument(self, **kwargs: Any) -> None:
        if self._factory is not None:
            unregister_interceptor_factory(self._factory)
            self._factory = None
        if self._bridge is not None:
            self._bridge.stop()
            self._bridge = None
