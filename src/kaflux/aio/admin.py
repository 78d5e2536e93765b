"""``kaflux.aio.AsyncAdminClient``: the admin client for asyncio. [app: on the event loop's
thread; the client's one network thread does all I/O]

Every :class:`~kaflux.AdminClient` call is a blocking method written as wait steps
(:func:`kaflux.blocking.blocking`); this class offers each of them as a coroutine, found by name,
so an admin call added to ``AdminClient`` is async here with no edit.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any, Self

from kaflux.admin.client import AdminClient
from kaflux.aio.driver import LoopGuard
from kaflux.blocking import Blocking


class AsyncAdminClient:
    """Administers topics, partitions and consumer groups, on an asyncio event loop: every
    :class:`~kaflux.AdminClient` method, as a coroutine with the same arguments and results::

        async with AsyncAdminClient({"bootstrap.servers": "127.0.0.1:9092"}) as admin:
            await admin.create_topics(["orders"], exist_ok=True)
            print(await admin.describe_cluster())
    """

    def __init__(self, config: Mapping[str, object]) -> None:
        """Validate ``config`` and start the network thread. Raises ConfigError."""
        self._admin = AdminClient(config)
        self._guard = LoopGuard("AsyncAdminClient")

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self, timeout: float = 5.0) -> None:
        """Stop the network thread. Idempotent."""
        await self._guard.run(AdminClient.close.steps(self._admin, timeout))

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        """``AdminClient.<name>`` as a coroutine function."""
        call = getattr(AdminClient, name, None) if not name.startswith("_") else None
        if not isinstance(call, Blocking):
            raise AttributeError(f"AsyncAdminClient has no call {name!r} (AdminClient has no such call)")
        steps, admin, guard = call.steps, self._admin, self._guard

        @functools.wraps(steps)
        async def coroutine(*args: Any, **kwargs: Any) -> Any:
            return await guard.run(steps(admin, *args, **kwargs))

        return coroutine

    def __dir__(self) -> list[str]:
        calls = [name for name in dir(AdminClient) if isinstance(getattr(AdminClient, name, None), Blocking)]
        return sorted({*super().__dir__(), *calls})
