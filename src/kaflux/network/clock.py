"""The clock every kaflux timer uses. [app, bg: read by both threads; holds no state]

Kept apart from :mod:`kaflux.network.network_thread` so that what only needs the time (the
clients' modules at import) does not import the network stack with it.
"""

from __future__ import annotations

import time

__all__ = ["monotonic_ms"]


def monotonic_ms() -> int:
    """The clock every kaflux timer uses: monotonic milliseconds."""
    return int(time.monotonic() * 1000)
