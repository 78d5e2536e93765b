"""Shared fixtures: real brokers for integration tests, unique topic names, broker-defect markers.

Brokers (see :mod:`kaflux.devbrokers.brokers` and docs/brokers.md for their defects):

- ``kafka``: Apache Kafka 4.4 (a KRaft single node), the reference broker. ``tansu`` / ``noida``:
  the stand-ins. One started broker each for the whole session, stopped at the end.
- ``broker``: parametrized over all three (ids ``kafka``, ``tansu`` and ``noida``), reusing the
  session brokers. A session broker found dead (e.g. a test crashed it) is restarted first; Tansu
  then comes back empty.
- ``fresh_broker(kind)`` / ``fresh_tansu()``: factories for a private broker that the test may kill or
  restart; stopped and deleted when the test ends.

Do not kill or restart the session brokers; use a fresh one.

Marking a known broker defect::

    @pytest.mark.broker_defect(
        "tansu", reason="ListOffsets LATEST returns the last batch's base + 1", raises=AssertionError
    )
    def test_high_watermark(broker): ...

When the test runs with ``broker`` = ``tansu`` it becomes a strict xfail: it must fail, with the
exception ``raises`` names (a class or a tuple of them), and starts failing the run (XPASS(strict))
once the broker is fixed, so the marker gets removed. Any other exception fails the test: a kaflux
regression is not hidden behind the broker's defect. With other brokers (Apache Kafka first) it runs
normally. Several markers may be stacked; the broker name must be in ``BROKER_KINDS``. A plain
``pytest.mark.xfail`` for a broker defect (e.g. the mock's) must be strict and name ``raises=`` too.

With ``CI=true`` a skipped test fails the run (a missing Java, Kafka jar, stunnel4 or KDC must not
make tests vanish from a green run), unless it is marked ``ci_may_skip(reason)``.

Tests that use any broker fixture get the ``integration`` marker automatically; mark them explicitly
too, so that ``-m "not integration"`` is obvious from the file.
"""

from __future__ import annotations

import gc
import os
import re
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, cast

import pytest

from kaflux.devbrokers.brokers import (
    Broker,
    BrokerUnavailableError,
    NoidaBroker,
    TansuBroker,
)
from kaflux.devbrokers.kinds import BROKER_KINDS, start_broker
from kaflux.devbrokers.mock_cluster import MockCluster

# The test-support package (tests/support): its asserts are rewritten like the tests' own. The TLS/SASL
# test doubles (certs, tls_tansu, mtls_tansu, tls_tansu_other_host, sasl_tansu, sasl_ssl_tansu,
# make_sasl_tansu) live in support/security_fixtures.py.
pytest.register_assert_rewrite("support")
pytest_plugins = ["support.security_fixtures"]
from support.security_fixtures import SECURITY_FIXTURES  # noqa: E402

if TYPE_CHECKING:
    from support.schema_registry import SchemaRegistryDouble

_BROKER_FIXTURES = (
    frozenset({"kafka", "tansu", "noida", "broker", "fresh_broker", "fresh_tansu", "fresh_noida"})
    | {"mock_cluster"}
    | SECURITY_FIXTURES
)

_START_TIMEOUT = 30.0
# Apache Kafka's JVM: about 10 s alone, longer while the other xdist worker keeps a core busy.
_KAFKA_START_TIMEOUT = 180.0
_IN_CI = os.environ.get("CI", "").lower() == "true"


def _start_timeout(kind: str) -> float:
    """A session broker's start budget: the other xdist worker keeps a core busy meanwhile."""
    return _KAFKA_START_TIMEOUT if kind == "kafka" else _START_TIMEOUT


def pytest_configure(config: pytest.Config) -> None:
    # pytest-xdist registers it only when it runs (CI: -n 2); runs without xdist know it too
    config.addinivalue_line("markers", "xdist_group(name): run these tests on one xdist worker, in order")
    config.addinivalue_line(
        "markers",
        "broker_defect(broker_name, reason, raises): strict xfail of this test, which must raise `raises`, "
        f"when its `broker` fixture parameter is broker_name (one of {', '.join(BROKER_KINDS)}); runs "
        "normally on other brokers",
    )
    config.addinivalue_line(
        "markers", "ci_may_skip(reason): this test may skip under CI=true (any other skip fails CI)"
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome: Any = yield
    report: pytest.TestReport = outcome.get_result()
    if (
        _IN_CI
        and report.skipped
        and not hasattr(report, "wasxfail")
        and item.get_closest_marker("ci_may_skip") is None
    ):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = (
            f"skipped under CI=true, which needs every tool installed: {reason}\n"
            "(bash scripts/bootstrap.sh --test installs them; mark a test ci_may_skip only if it "
            "can never run here)"
        )


def _is_exception_class(value: object) -> bool:
    return isinstance(value, type) and issubclass(value, BaseException)


def _defect_args(mark: pytest.Mark) -> tuple[str, str, type[BaseException] | tuple[type[BaseException], ...]]:
    args = list(mark.args)
    name = args.pop(0) if args else mark.kwargs.get("broker_name")
    reason = args.pop(0) if args else mark.kwargs.get("reason")
    raises = args.pop(0) if args else mark.kwargs.get("raises")
    if name not in BROKER_KINDS:
        raise pytest.UsageError(f"broker_defect needs a broker name from {BROKER_KINDS}, got {name!r}")
    if not reason:
        raise pytest.UsageError(f"broker_defect({name!r}) needs a reason")
    if not (
        _is_exception_class(raises)
        or (isinstance(raises, tuple) and raises and all(map(_is_exception_class, raises)))
    ):
        raise pytest.UsageError(
            f"broker_defect({name!r}, {reason!r}) needs raises=: the exception the defect makes the test "
            f"raise (a class or a tuple of classes), so that another failure is not hidden; got {raises!r}"
        )
    return str(name), str(reason), cast("type[BaseException] | tuple[type[BaseException], ...]", raises)


def _check_strict_xfail(item: pytest.Item) -> None:
    """A plain xfail in an integration test is a broker's defect: strict, and naming what it raises."""
    for mark in item.iter_markers("xfail"):
        if mark.kwargs.get("strict") is not True or "raises" not in mark.kwargs:
            raise pytest.UsageError(
                f"{item.nodeid}: an xfail for a broker defect must be strict=True and name raises= "
                "(the exception the defect makes the test raise)"
            )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.parent.name == "spark" or item.get_closest_marker("spark") is not None:
            # Under pytest-xdist (CI: -n 2 --dist loadgroup) one worker runs every Spark test,
            # so that a single SparkSession (and its JVM) serves them all.
            item.add_marker(pytest.mark.xdist_group("spark"))
        if _BROKER_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)
        callspec = getattr(item, "callspec", None)
        param = callspec.params.get("broker") if callspec is not None else None
        for mark in item.iter_markers("broker_defect"):
            name, reason, raises = _defect_args(mark)
            if param == name:
                item.add_marker(
                    pytest.mark.xfail(strict=True, raises=raises, reason=f"{name} defect: {reason}")
                )
        if item.get_closest_marker("integration") is not None:
            _check_strict_xfail(item)


def pytest_collection_finish(session: pytest.Session) -> None:
    # The modules, test items and fixtures collection made live for the whole session: freeze
    # them out of the garbage collector, so that a full collection during a test scans only what
    # the tests made since. (About 250k objects: a full collection of them takes ~0.15 s here,
    # a stall every thread of a test that measures time would feel.)
    gc.collect()
    gc.freeze()


@pytest.fixture
def registry() -> Iterator[SchemaRegistryDouble]:
    """A Schema Registry double (no users) for one test; a module needing users overrides it."""
    from support.schema_registry import SchemaRegistryDouble  # its test extras: imported on use

    with SchemaRegistryDouble() as double:
        yield double


def _session_broker(kind: str) -> Iterator[Broker]:
    try:
        broker = start_broker(kind, timeout=_start_timeout(kind))
    except BrokerUnavailableError as e:
        pytest.skip(f"{kind} broker not available: {e}")
    try:
        yield broker
    finally:
        broker.cleanup()


@pytest.fixture(scope="session")
def kafka() -> Iterator[Broker]:
    """Apache Kafka 4.4, a KRaft single node, shared by the whole session."""
    yield from _session_broker("kafka")


@pytest.fixture(scope="session")
def tansu() -> Iterator[Broker]:
    """A Tansu broker (memory storage) shared by the whole session."""
    yield from _session_broker("tansu")


@pytest.fixture(scope="session")
def noida() -> Iterator[Broker]:
    """A noida-db broker shared by the whole session."""
    yield from _session_broker("noida")


@pytest.fixture(scope="session")
def mock_cluster() -> Iterator[MockCluster]:
    """librdkafka's mock cluster (3 brokers; KIP-848; no CreateTopics: producing creates a topic with
    4 partitions) shared by the whole session; see kaflux.devbrokers.mock_cluster for its limits."""
    cluster = MockCluster(brokers=3)
    try:
        cluster.start(timeout=_START_TIMEOUT)
    except ImportError as e:
        pytest.skip(f"librdkafka's mock cluster needs confluent-kafka: {e}")
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(params=list(BROKER_KINDS), ids=list(BROKER_KINDS))
def broker(request: pytest.FixtureRequest) -> Broker:
    """Each session broker in turn; restarted first if an earlier test left it dead."""
    session_broker: Broker = request.getfixturevalue(request.param)
    if not session_broker.is_alive():
        session_broker.restart(timeout=_START_TIMEOUT)
    return session_broker


@pytest.fixture
def fresh_broker() -> Iterator[Callable[[str], Broker]]:
    """Factory: ``fresh_broker("noida")`` starts a private broker, removed when the test ends."""
    started: list[Broker] = []

    def make(kind: str) -> Broker:
        try:
            broker = start_broker(kind, timeout=_start_timeout(kind))
        except BrokerUnavailableError as e:
            pytest.skip(f"{kind} broker not available: {e}")
        started.append(broker)
        return broker

    yield make
    for broker in started:
        broker.cleanup()


@pytest.fixture
def fresh_tansu(fresh_broker: Callable[[str], Broker]) -> Callable[[], TansuBroker]:
    """Factory: ``fresh_tansu()`` starts a private Tansu broker for kill/restart tests."""

    def make() -> TansuBroker:
        broker = fresh_broker("tansu")
        assert isinstance(broker, TansuBroker)
        return broker

    return make


@pytest.fixture
def fresh_noida(fresh_broker: Callable[[str], Broker]) -> Callable[[], NoidaBroker]:
    """Factory: ``fresh_noida()`` starts a private noida-db broker (its data survives restarts)."""

    def make() -> NoidaBroker:
        broker = fresh_broker("noida")
        assert isinstance(broker, NoidaBroker)
        return broker

    return make


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name unique to this test (and this run): ``kx-<test name>-<8 hex>``."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name).strip("-.")[:80]
    return f"kx-{base}-{uuid.uuid4().hex[:8]}"
