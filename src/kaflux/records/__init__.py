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
one (:mod:`~kaflux.records.batch_decoder`, :mod:`~kaflux.records.columns`); both implement
:class:`kaflux.records.interface.RecordDecoder`. :mod:`kaflux.records.kernels` chooses the
compiled one when it was built and ``KAFLUX_PURE`` is not ``"1"``; otherwise the pure one, and
when that is not by choice the ``kaflux.records`` logger says so once, at import. :data:`KERNEL`
tells which is active (``"compiled"`` or ``"pure"``). The same module chooses the producer's
encoder. Bounds and messages both twins share live in :mod:`kaflux.records.definitions`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from kaflux.records import kernels
from kaflux.records.batch_builder import (
    BatchBuilder,
    assemble_batch,
    build_control_batch,
    estimate_record_size,
)
from kaflux.records.columns import arrow_schema
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
from kaflux.records.definitions import RecordColumns
from kaflux.records.kernels import kernel_source_sha256, load_compiled_kernel
from kaflux.records.types import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    CREATE_TIME,
    LOG_APPEND_TIME,
    Record,
    RecordFormatError,
)

_impl = kernels.decoder()
#: ``"compiled"`` or ``"pure"``: which record kernel this process uses.
KERNEL: Final[str] = kernels.decoder_kind()


def active_kernel() -> RecordDecoder:
    """The record kernel this process uses (the module :data:`KERNEL` names)."""
    return _impl


if TYPE_CHECKING:
    # mypy checks that both decoder twins implement the interface.
    from kaflux.records import _kernel, _pure
    from kaflux.records.batch_decoder import (
        RecordBatch,
        control_type,
        decode_records,
        first_batch_size,
        iter_batches,
    )
    from kaflux.records.columns import BatchCursor, ColumnBuilder, to_arrow
    from kaflux.records.consumer_record import ConsumerRecord
    from kaflux.records.interface import RecordDecoder

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
    "kernel_source_sha256",
    "load_compiled_kernel",
    "to_arrow",
]
