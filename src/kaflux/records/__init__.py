"""Kafka record batches, format v2 (magic 2): decoding, encoding and compression. [pure]

Decoding (consumer hot path)::

    for batch in iter_batches(records_view, check_crcs=True, topic=t, partition=p):
        if batch.is_control:
            kind = batch.control_type()      # CONTROL_ABORT / CONTROL_COMMIT
            continue
        for record in batch.records():       # Record(offset, timestamp, key, value, headers)
            ...

Consumer records (one small object per record, built straight from the batch bytes):
``batch.consumer_records(topic, partition, leader_epoch, min_offset)``, see
:mod:`kaflux.records.consumer_record`. Columnar decoding (Arrow layout, no object per
record): :class:`ColumnBuilder`, also a few records at a time through a
:class:`BatchCursor`, see :mod:`kaflux.records.columns`. Encoding: :class:`BatchBuilder`; codecs:
:mod:`kaflux.records.compression`.

Two kernels implement decoding with identical behaviour: the compiled one
(``kaflux.records._kernel``, built from ``_kernel.pyx`` by ``pip install``) and the pure-Python
one (:mod:`~kaflux.records.batch_decoder`, :mod:`~kaflux.records.columns`). The compiled one is
used when it was built and ``KAFLUX_PURE`` is not ``"1"``; otherwise the pure one, and when
that is not by choice the ``kaflux.records`` logger says so once, at import. :data:`KERNEL`
tells which is active (``"compiled"`` or ``"pure"``).
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import os
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Final

from kaflux.records import _pure
from kaflux.records.batch_builder import (
    BatchBuilder,
    assemble_batch,
    build_control_batch,
    estimate_record_size,
)
from kaflux.records.columns import RecordColumns, arrow_schema
from kaflux.records.compression import (
    CODEC_IDS,
    CODEC_NAMES,
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    codec_id,
    codec_name,
    compress,
    decompress,
    decompression_limit,
)
from kaflux.records.types import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    CREATE_TIME,
    LOG_APPEND_TIME,
    Record,
    RecordFormatError,
)

_log = logging.getLogger("kaflux.records")

#: Files the compiled kernel is built from (setup.py stamps the build with their SHA-256).
_KERNEL_SOURCES: Final = ("_kernel.pyx", "_kernel_impl.h")


def kernel_source_sha256(directory: Path) -> str | None:
    """SHA-256 of the kernel sources in ``directory`` (as setup.py computes it), or None
    when they are not there (an installed wheel)."""
    digest = hashlib.sha256()
    try:
        for name in _KERNEL_SOURCES:
            digest.update(name.encode() + b"\0" + (directory / name).read_bytes() + b"\0")
    except OSError:
        return None
    return digest.hexdigest()


def load_compiled_kernel() -> ModuleType:
    """The compiled kernel module; ImportError saying why when it is missing or was built
    from other sources than those next to it (a stale build in a source checkout)."""
    try:
        _kernel = importlib.import_module("kaflux.records._kernel")
    except ImportError as exc:
        what = "was not built" if isinstance(exc, ModuleNotFoundError) else "could not be imported"
        raise ImportError(f"it {what} ({exc}); reinstall kaflux with a C compiler available") from exc
    built_from = _kernel.SOURCE_SHA256
    current = kernel_source_sha256(Path(__file__).parent)
    if built_from and current is not None and built_from != current:
        raise ImportError(
            f"{Path(_kernel.__file__ or '_kernel').name} was built from other sources than "
            "_kernel.pyx/_kernel_impl.h (rebuild it: pip install -e . or python setup.py build_ext --inplace)"
        )
    return _kernel


def _select_kernel() -> tuple[ModuleType, str]:
    if os.environ.get("KAFLUX_PURE") == "1":
        return _pure, "pure"
    try:
        return load_compiled_kernel(), "compiled"
    except ImportError as exc:
        _log.warning(
            "kaflux.records: the compiled record kernel is unavailable: %s. Using the pure-Python "
            "record decoder, which is several times slower.",
            exc,
        )
        return _pure, "pure"


_impl, _kernel_name = _select_kernel()
#: ``"compiled"`` or ``"pure"``: which record kernel this process uses.
KERNEL: Final[str] = _kernel_name


def active_kernel() -> RecordDecoder:
    """The record kernel this process uses (the module :data:`KERNEL` names)."""
    return _impl


if TYPE_CHECKING:
    from kaflux.records import _kernel
    from kaflux.records._protocols import RecordDecoder
    from kaflux.records.batch_decoder import (
        RecordBatch,
        control_type,
        decode_records,
        first_batch_size,
        iter_batches,
    )
    from kaflux.records.columns import BatchCursor, ColumnBuilder, to_arrow
    from kaflux.records.consumer_record import ConsumerRecord

    # mypy checks that both kernels satisfy the interface.
    _pure_conforms: RecordDecoder = _pure
    _compiled_conforms: RecordDecoder = _kernel
else:
    RecordBatch = _impl.RecordBatch
    BatchCursor = _impl.BatchCursor
    ColumnBuilder = _impl.ColumnBuilder
    ConsumerRecord = _impl.ConsumerRecord
    control_type = _impl.control_type
    decode_records = _impl.decode_records
    first_batch_size = _impl.first_batch_size
    iter_batches = _impl.iter_batches
    to_arrow = _impl.to_arrow

__all__ = [
    "CODEC_IDS",
    "CODEC_NAMES",
    "CONTROL_ABORT",
    "CONTROL_COMMIT",
    "CREATE_TIME",
    "GZIP",
    "KERNEL",
    "LOG_APPEND_TIME",
    "LZ4",
    "NONE",
    "SNAPPY",
    "ZSTD",
    "BatchBuilder",
    "BatchCursor",
    "ColumnBuilder",
    "ConsumerRecord",
    "Record",
    "RecordBatch",
    "RecordColumns",
    "RecordFormatError",
    "active_kernel",
    "arrow_schema",
    "assemble_batch",
    "build_control_batch",
    "codec_id",
    "codec_name",
    "compress",
    "control_type",
    "decode_records",
    "decompress",
    "decompression_limit",
    "estimate_record_size",
    "first_batch_size",
    "iter_batches",
    "load_compiled_kernel",
    "to_arrow",
]
