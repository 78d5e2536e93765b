"""An AdminRequestManager driven over a fake cluster with injected time, for the admin client's
unit tests (``tests`` is on the import path). [test]"""

from __future__ import annotations

from typing import Any

from kaflux.admin.operation import AdminApi, AdminOperation, AdminResult
from kaflux.admin.request_manager import AdminRequestManager

from support.fakes import BACKOFF_MS, ClientSide, FakeCluster, FakeNetwork, connect, exact_backoff

#: how long each call may take, in the rig's milliseconds
DEADLINE = 10_000


class AdminRig:
    """The manager wired to a fake cluster; passes run the manager before the metadata manager,
    as the admin client's network thread does."""

    def __init__(self, fake: FakeCluster, net: FakeNetwork | None = None) -> None:
        self.fake = fake
        self.side: ClientSide = connect(fake)
        if net is not None:
            self.side.net = net
        self.manager = AdminRequestManager(self.side.cluster, self.side.metadata, exact_backoff())
        self.now = 1

    def submit(self, api: AdminApi[Any, Any], what: str = "call()") -> AdminOperation[Any, Any]:
        op: AdminOperation[Any, Any] = AdminOperation(what, self.now + DEADLINE, api)
        self.manager.submit(op)
        return op

    def run(self, api: AdminApi[Any, Any], what: str = "call()") -> AdminResult[Any, Any]:
        """Submit and drive passes (time moving by the backoff) until the call is done."""
        op = self.submit(api, what)
        for _ in range(1000):
            if op.future.done():
                break
            self.side.net.run([self.manager, self.side.metadata], self.now)
            if not op.future.done():
                self.now += BACKOFF_MS
        return op.future.result(0)

    def sent(self, api: type[Any]) -> list[tuple[int, Any]]:
        """(broker, request) of every request of class ``api`` the brokers handled."""
        return [(broker, request) for broker, request, _ in self.fake.handled if type(request) is api]
