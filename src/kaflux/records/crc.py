"""CRC-32C for the pure-Python record twin, imported on first use. [pure]

The ``crc32c`` package computes it in C, but importing the package also imports
``importlib.metadata``, ``email`` and ``argparse`` (about 17 ms): a consumer on the compiled
kernel never calls it, and the process PySpark starts for every streaming query imports the
consumer. So the package is imported by the first call, not by importing the records package.
"""

from __future__ import annotations

from collections.abc import Callable

from kaflux.records.types import BytesLike

_compiled: Callable[[BytesLike], int] | None = None


def crc32c(data: BytesLike) -> int:
    """The CRC-32C (Castagnoli) of ``data``, as Kafka's record batches carry it."""
    global _compiled
    if _compiled is None:
        from crc32c import crc32c as package_crc32c

        _compiled = package_crc32c
    return _compiled(data)
