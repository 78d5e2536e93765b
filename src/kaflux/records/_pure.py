"""The pure-Python record kernel as one namespace, the twin of the compiled ``_kernel``. [pure]

(:mod:`~kaflux.records.batch_decoder`, :mod:`~kaflux.records.columns` and
:mod:`~kaflux.records.consumer_record`.)

:mod:`kaflux.records` uses this module when the compiled kernel is not available (or when
``KAFLUX_PURE=1``); tests use it to run the same checks against both kernels.
"""

from __future__ import annotations

from kaflux.records.batch_decoder import (
    RecordBatch,
    control_type,
    decode_records,
    first_batch_size,
    iter_batches,
)
from kaflux.records.columns import BatchCursor, ColumnBuilder, to_arrow
from kaflux.records.consumer_record import ConsumerRecord

__all__ = [
    "BatchCursor",
    "ColumnBuilder",
    "ConsumerRecord",
    "RecordBatch",
    "control_type",
    "decode_records",
    "first_batch_size",
    "iter_batches",
    "to_arrow",
]
