"""Fixtures and helpers for the fault-injection tests (``test_fault_*.py``). Not a test module.

* ``proxied_tansu`` / ``proxied_noida``: one broker behind a
  :class:`~support.fault_proxy.FaultProxy` per test module; every test starts and ends with
  no faults armed (``clean_proxy``, autouse where imported).
* ``proxied_tansu_tls``: the same over TLS (relay -> stunnel -> proxy -> Tansu, see
  :func:`support.scenarios.start_proxied_broker`); ``tansu_rig`` is either, by its parameter
  ``transport`` ("plaintext" or "tls"), for tests that run over both. Clients take
  ``pb.config(...)``, which adds the TLS settings.
* ``timing``: records a measured time against its bound; the values are printed with the test's
  result line (``[timings] ...``) and kept as the test's ``user_properties`` (JUnit XML).

Time bounds are a deadline plus :data:`MARGIN_S`: generous on a loaded 2-core machine, where the
measured times are far below them (they are printed so that this stays visible).

Tests import this module as ``from support.fault_helpers import ...``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from kaflux import Consumer, Producer
from kaflux.devbrokers.brokers import BrokerUnavailableError

from support.certs import TestCerts
from support.fault_proxy import Fault, FaultProxy
from support.scenarios import ProxiedBroker, create_topic, start_proxied_broker
from support.tls import TlsUnavailableError

#: slack added to every deadline before a test calls it missed
MARGIN_S = 3.0
WAIT_S = 20.0
REQUEST_TIMEOUT_MS = 2000

Timing = Callable[[str, float, float], None]


def proxied_broker(
    kind: str, *, security: str = "PLAINTEXT", certs: TestCerts | None = None
) -> Iterator[ProxiedBroker]:
    """Body of a fixture: a broker of ``kind`` behind a new proxy, skipped when not installed."""
    try:
        pb = start_proxied_broker(kind, security=security, certs=certs)
    except (BrokerUnavailableError, TlsUnavailableError) as e:
        pytest.skip(f"{kind} broker over {security} not available: {e}")
    try:
        yield pb
    finally:
        pb.close()


@pytest.fixture(scope="module")
def proxied_tansu() -> Iterator[ProxiedBroker]:
    """Tansu behind a proxy, for the whole module (do not kill it: use a private one)."""
    yield from proxied_broker("tansu")


@pytest.fixture(scope="module")
def proxied_noida() -> Iterator[ProxiedBroker]:
    """noida-db behind a proxy (which rewrites its address), for the whole module."""
    yield from proxied_broker("noida")


@pytest.fixture(scope="module")
def proxied_tansu_tls(certs: TestCerts) -> Iterator[ProxiedBroker]:
    """Tansu behind the TLS rig (relay, stunnel, proxy), for the whole module."""
    yield from proxied_broker("tansu", security="SSL", certs=certs)


@pytest.fixture(params=["plaintext", "tls"])
def tansu_rig(request: pytest.FixtureRequest) -> ProxiedBroker:
    """``proxied_tansu`` or ``proxied_tansu_tls``, with no faults armed."""
    name = "proxied_tansu" if request.param == "plaintext" else "proxied_tansu_tls"
    pb: ProxiedBroker = request.getfixturevalue(name)
    for proxy in pb.proxies():
        reset_proxy(proxy)
    return pb


def reset_proxy(proxy: FaultProxy) -> None:
    proxy.reset()
    proxy.cut_connections()


@pytest.fixture
def timing(request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]) -> Iterator[Timing]:
    lines: list[str] = []

    def record(label: str, seconds: float, bound: float) -> None:
        lines.append(f"{label} {seconds:.2f} s (bound {bound:.1f} s)")
        request.node.user_properties.append((label, round(seconds, 3)))

    yield record
    if lines:
        with capsys.disabled():
            print(f"\n[timings] {request.node.name}: " + "; ".join(lines))


def new_topic(pb: ProxiedBroker, partitions: int = 1) -> str:
    topic = f"kx-fault-{uuid.uuid4().hex[:10]}"
    create_topic(pb.bootstrap_servers, topic, partitions, config=pb.security)
    return topic


def arm(proxy: FaultProxy, variant: str, api_key: int) -> Fault:
    """Arm the fault named ``variant`` (a FaultProxy method, e.g. ``cut_after_response``) once."""
    fault: Fault = getattr(proxy, variant)(api_key)
    return fault


def produce_keys(
    bootstrap: str,
    topic: str,
    keys: list[str],
    partition: int | None = None,
    *,
    config: dict[str, object] | None = None,
) -> None:
    """Produce ``keys`` (value = key) and wait until all are acknowledged (``config``: further
    client settings, e.g. ``pb.security``)."""
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **(config or {})}) as producer:
        futures = [producer.send(topic, k.encode(), key=k.encode(), partition=partition) for k in keys]
        producer.flush(WAIT_S)
    for f in futures:
        f.result(timeout=0)


def poll_until(consumer: Consumer, done: Callable[[], bool], timeout: float) -> bool:
    """Call ``consumer.poll(0.1)`` until ``done()`` holds (True) or ``timeout`` passed (False)."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() >= deadline:
            return False
        consumer.poll(0.1)
    return True
