"""kaflux for asyncio: the same clients on the same event core, awaited on an event loop.
[app: every public method runs on the event loop's thread]

Each client wraps its sync twin and awaits the futures that client's one network thread
completes (bridged with ``loop.call_soon_threadsafe``): no executor, no extra thread, and no
second implementation of any request. See :mod:`kaflux.aio.driver` for how waiting works.
"""

from kaflux.aio.admin import AsyncAdminClient
from kaflux.aio.consumer import AsyncConsumer, AsyncConsumerRebalanceListener
from kaflux.aio.producer import AsyncProducer
from kaflux.aio.share import AsyncShareConsumer

__all__ = [
    "AsyncAdminClient",
    "AsyncConsumer",
    "AsyncConsumerRebalanceListener",
    "AsyncProducer",
    "AsyncShareConsumer",
]
