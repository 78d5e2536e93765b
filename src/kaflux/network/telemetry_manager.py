"""Client metrics push (KIP-714): GetTelemetrySubscriptions, then PushTelemetry every push
interval. [bg, pure: takes now_ms]

As Java's ``ClientTelemetryReporter``: the client asks any broker for its subscription (with its
client instance id once the broker gave it one); an empty subscription is asked again after the
push interval; otherwise the metrics the subscription names are pushed to a broker every
``push_interval_ms`` (the first push after a random share of it, 0.5-1.5x, so that clients
started together spread out), OTLP-encoded (:mod:`kaflux.metrics.telemetry`) and compressed with
the first codec the broker accepts that kaflux has (gzip, zstd, lz4, snappy; else none). A
subscription the broker no longer knows (UNKNOWN_SUBSCRIPTION_ID) or a push it refuses is
answered by asking for the subscription again; a broker without these APIs (before Kafka 3.7,
or without a client-telemetry plugin) turns the manager off. Closing sends one last push marked
``terminating``.

:attr:`TelemetryRequestManager.instance_id` is a future the application thread may wait on
(Java's ``clientInstanceId(timeout)``): done with the client instance id the first subscription
gives, or with None once the manager turned itself off (a broker without the APIs).
"""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import Future

from kaflux.errors import UnsupportedVersionError
from kaflux.metrics.telemetry import encode_metrics, select_metrics
from kaflux.network.requests import ClientResponse, PollResult, RequestManager, UnsentRequest
from kaflux.protocol.messages.get_telemetry_subscriptions import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
)
from kaflux.protocol.messages.push_telemetry import PushTelemetryRequest, PushTelemetryResponse
from kaflux.protocol.primitives import ZERO_UUID
from kaflux.records.compression import compress

log = logging.getLogger(__name__)

#: the codecs kaflux can compress with, by Kafka's compression type id, in kaflux's preference
_CODECS = (1, 4, 3, 2)  # gzip, zstd, lz4, snappy
_RETRY_MS = 30_000  # ask again after a failure that names no interval


class TelemetryRequestManager(RequestManager):
    """Keeps the client's telemetry subscription and pushes its metrics."""

    def __init__(
        self,
        snapshot: Callable[[int], Mapping[str, Mapping[str, float]]],
        resource: Mapping[str, str],
        *,
        # the wall clock in ns (OTLP data points carry wall times), injected: this module reads none
        rng: random.Random | None = None,
        wall_ns: Callable[[], int],
    ) -> None:
        self._snapshot = snapshot
        self._resource = dict(resource)
        self._rng = rng or random.Random()
        self._wall_ns = wall_ns
        self._start_ns = wall_ns()
        self.client_instance_id: uuid.UUID = ZERO_UUID
        #: done with the client instance id once a broker gave one (None: telemetry turned off);
        #: thread-safe, the one thing of this manager another thread may hold
        self.instance_id: Future[uuid.UUID | None] = Future()
        self._subscription: GetTelemetrySubscriptionsResponse | None = None
        self._next_ms = 0  # when to send the next request (subscribe or push)
        self._in_flight = False
        self._disabled = False
        self._terminated = False
        self._previous: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        self.pushes = 0

    @property
    def subscription(self) -> GetTelemetrySubscriptionsResponse | None:
        """The subscription in force (None: none yet)."""
        return self._subscription

    def poll(self, now_ms: int) -> PollResult:
        if self._disabled or self._terminated:
            return PollResult()
        if self._in_flight:
            return PollResult(1000)
        if now_ms < self._next_ms:
            return PollResult(self._next_ms - now_ms)
        sub = self._subscription
        if sub is None or not sub.requested_metrics:
            return PollResult(1000, [self._subscribe()])
        return PollResult(1000, [self._push(now_ms, terminating=False)])

    def poll_on_close(self, now_ms: int) -> PollResult:
        sub = self._subscription
        if self._disabled or self._terminated or self._in_flight or sub is None or not sub.requested_metrics:
            return PollResult()
        self._terminated = True
        return PollResult(unsent=[self._push(now_ms, terminating=True)])

    # -- requests --------------------------------------------------------------------------------

    def _subscribe(self) -> UnsentRequest[GetTelemetrySubscriptionsResponse]:
        self._in_flight = True
        request = GetTelemetrySubscriptionsRequest(client_instance_id=self.client_instance_id)
        return UnsentRequest(request, None, self._on_subscription)

    def _push(self, now_ms: int, *, terminating: bool) -> UnsentRequest[PushTelemetryResponse]:
        sub = self._subscription
        assert sub is not None
        metrics = select_metrics(self._snapshot(now_ms), sub.requested_metrics)
        if sub.delta_temporality:
            metrics = [self._delta(m) for m in metrics]
        payload = encode_metrics(
            metrics,
            resource=self._resource,
            now_ns=self._wall_ns(),
            start_ns=self._start_ns,
            delta=sub.delta_temporality,
        )
        codec = next((c for c in sub.accepted_compression_types if c in _CODECS), 0)
        if codec:
            payload = compress(codec, payload)
        self._in_flight = True
        request = PushTelemetryRequest(
            client_instance_id=self.client_instance_id,
            subscription_id=sub.subscription_id,
            terminating=terminating,
            compression_type=codec,
            metrics=payload,
        )
        return UnsentRequest(request, None, self._on_push)

    def _delta(
        self, metric: tuple[str, dict[str, str], float, bool]
    ) -> tuple[str, dict[str, str], float, bool]:
        name, attributes, value, is_sum = metric
        if not is_sum:
            return metric
        key = (name, tuple(sorted(attributes.items())))
        previous = self._previous.get(key, 0.0)
        self._previous[key] = value
        return name, attributes, value - previous, is_sum

    # -- answers ---------------------------------------------------------------------------------

    def _fail(self, error: BaseException, now_ms: int) -> None:
        if isinstance(error, UnsupportedVersionError):
            log.debug("client telemetry off: the broker has no client-telemetry APIs (%s)", error)
            self._disabled = True
            if not self.instance_id.done():
                self.instance_id.set_result(None)
            return
        self._next_ms = now_ms + _RETRY_MS

    def _on_subscription(self, response: ClientResponse[GetTelemetrySubscriptionsResponse]) -> None:
        self._in_flight = False
        now_ms = response.received_ms
        if response.error is not None:
            self._fail(response.error, now_ms)
            return
        body = response.body
        if body.error_code:
            self._subscription = None
            self._next_ms = now_ms + (body.push_interval_ms or _RETRY_MS)
            return
        self.client_instance_id = body.client_instance_id
        if not self.instance_id.done():
            self.instance_id.set_result(body.client_instance_id)
        changed = self._subscription is None or self._subscription.subscription_id != body.subscription_id
        self._subscription = body
        interval = max(body.push_interval_ms, 100)
        if not body.requested_metrics:
            self._next_ms = now_ms + interval
        elif changed:
            self._previous.clear()
            self._next_ms = now_ms + int(interval * self._rng.uniform(0.5, 1.5))
        else:
            self._next_ms = now_ms + interval

    def _on_push(self, response: ClientResponse[PushTelemetryResponse]) -> None:
        self._in_flight = False
        now_ms = response.received_ms
        if response.error is not None:
            self._fail(response.error, now_ms)
            return
        sub = self._subscription
        code = response.body.error_code
        if code:  # UNKNOWN_SUBSCRIPTION_ID, TELEMETRY_TOO_LARGE...: start over with a fresh subscription
            log.debug("client telemetry push refused (error %d): asking for the subscription again", code)
            self._subscription = None
            self._next_ms = now_ms
            return
        self.pushes += 1
        self._next_ms = now_ms + (sub.push_interval_ms if sub is not None else _RETRY_MS)
