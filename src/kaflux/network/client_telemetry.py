"""One client's KIP-714 metrics push, as every client (consumer, producer, admin client, share
consumer) wires it. [app: at construction, and where client_instance_id() waits]

With ``enable.metrics.push`` on, the client's network thread runs a
:class:`~kaflux.network.telemetry_manager.TelemetryRequestManager` over the snapshot of the
metrics that thread records (the client's group prefix gives their telemetry names:
``producer-metrics`` -> ``org.apache.kafka.producer.*``, ``admin-client-metrics`` ->
``org.apache.kafka.admin.client.*``...). The application thread keeps only the manager's
instance-id future, a thread-safe handle, for ``client_instance_id(timeout)`` (Java's
``clientInstanceId(Duration)``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import Future

from kaflux.blocking import DoneWait, Steps
from kaflux.errors import IllegalStateError
from kaflux.network.requests import RequestManager
from kaflux.network.telemetry_manager import TelemetryRequestManager
from kaflux.timeouts import timeout_seconds

__all__ = ["ClientTelemetry"]


class ClientTelemetry:
    """The telemetry request manager of one client (none when push is off) and the wait for
    its client instance id."""

    def __init__(
        self,
        enabled: bool,
        client_id: str,
        snapshot: Callable[[int], Mapping[str, Mapping[str, float]]],
    ) -> None:
        """``snapshot(now_ms)``: the metrics the network thread records (called there)."""
        self._instance_id: Future[uuid.UUID | None] | None = None
        #: the request managers to add to the network thread's (one, or none when push is off)
        self.managers: list[RequestManager] = []
        if enabled:
            manager = TelemetryRequestManager(
                snapshot,
                {"client_id": client_id, "client_software_name": "kaflux"},
                wall_ns=time.time_ns,
            )
            self._instance_id = manager.instance_id
            self.managers.append(manager)

    @property
    def enabled(self) -> bool:
        return self._instance_id is not None

    def client_instance_id(self, timeout: float) -> Steps[uuid.UUID | None]:
        """The client instance id the brokers gave this client (KIP-714), waiting at most
        ``timeout`` seconds for the first telemetry subscription; None if none came by then
        (as Java returns null) or the brokers have no client-telemetry APIs.

        Raises:
            IllegalStateError: ``enable.metrics.push`` is false.
            InvalidArgumentError: ``timeout`` is negative or not a number.
        """
        seconds = timeout_seconds(timeout, 0.0)
        future = self._instance_id
        if future is None:
            raise IllegalStateError(
                "client telemetry is off, so the client has no client instance id: "
                "set enable.metrics.push to true to get one"
            )
        if not future.done():
            yield DoneWait(future, seconds)
        return future.result() if future.done() else None
