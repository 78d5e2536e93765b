"""The kaflux clients the ``topics`` and ``groups`` commands build from the command's
settings, and small readers of admin results. [app]"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from kaflux.cli.main import ClientSettings

if TYPE_CHECKING:
    from kaflux.admin import AdminClient
    from kaflux.consumer.consumer import Consumer


@contextmanager
def admin_client(settings: ClientSettings) -> Iterator[AdminClient]:
    """An AdminClient on the command's settings, closed at the end."""
    from kaflux.admin import AdminClient  # imported when the command runs: --help stays fast

    with AdminClient(settings.for_client("admin")) as admin:
        settings.ensure_reachable()
        yield admin


@contextmanager
def offsets_consumer(settings: ClientSettings) -> Iterator[Consumer]:
    """A consumer outside any group, for partitions and offset lookups; closed at the end."""
    config = settings.for_client("consumer")
    for key in ("group.id", "group.instance.id", "enable.auto.commit"):
        config.pop(key, None)
    config["allow.auto.create.topics"] = "false"
    from kaflux.consumer.consumer import Consumer  # imported when the command runs: --help stays fast

    consumer = Consumer(config)
    try:
        settings.ensure_reachable()
        yield consumer
    finally:
        consumer.close(timeout=5.0)


def broker_id(node_id: int) -> int | None:
    """A broker id as shown: None for none (-1)."""
    return node_id if node_id >= 0 else None


def broker_ids(node_ids: Iterable[int]) -> list[int | None]:
    """Broker ids as shown."""
    return [broker_id(n) for n in node_ids]
