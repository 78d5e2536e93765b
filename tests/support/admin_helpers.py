"""What the AdminClient integration tests share: confluent-kafka's AdminClient on the test's
broker, to confirm each answer, kept for the module.

A test module imports ``peer`` and the autouse ``drop_peers`` fixture
(``from support.admin_helpers import drop_peers, peer``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kaflux import AdminClient

_peers: dict[str, Any] = {}


@pytest.fixture(scope="module", autouse=True)
def drop_peers() -> Iterator[None]:
    """Let the confluent-kafka clients go before the brokers stop."""
    yield
    _peers.clear()


def peer(bootstrap: str) -> Any:
    """confluent-kafka's AdminClient on ``bootstrap`` (kept: a collected client never completes
    its futures)."""
    if bootstrap not in _peers:
        ck_admin = pytest.importorskip("confluent_kafka.admin")
        _peers[bootstrap] = ck_admin.AdminClient({"bootstrap.servers": bootstrap})
    return _peers[bootstrap]


def admin_on_the_tests_broker(request: pytest.FixtureRequest) -> AdminClient:
    """A kaflux AdminClient on the broker the test asked for (``broker``, ``noida``, ``tansu`` or
    ``mock_cluster``): what the modules' ``admin`` fixtures hand out."""
    name = next(n for n in ("broker", "noida", "tansu", "mock_cluster") if n in request.fixturenames)
    return AdminClient({"bootstrap.servers": request.getfixturevalue(name).bootstrap_servers})
