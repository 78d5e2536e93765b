"""Kafka record batches, format v2 (magic 2): decoding, encoding and compression. [pure]

Decoding (consumer hot path)::

    for batch in iter_batches(records_view, check_crcs=True, topic=t, partition=p):
        if batch.is_control:
            kind = batch.control_type()      # CONTROL_ABORT / CONTROL_COMMIT
            continue
        for record in batch.records():       # Record(offset, timestamp, key, value, headers)
            ...

Encoding: :class:`BatchBuilder`; codecs: :mod:`kaflux.records.compression`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kaflux.records import batch_decoder as _decoder
from kaflux.records.batch_builder import (
    BatchBuilder,
    assemble_batch,
    build_control_batch,
    estimate_record_size,
)
from kaflux.records.batch_decoder import (
    RecordBatch,
    control_type,
    decode_records,
    first_batch_size,
    iter_batches,
)
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

if TYPE_CHECKING:
    from kaflux.records._protocols import RecordDecoder

    # mypy checks that the pure-Python decoder satisfies the interface a compiled twin must.
    _conforms: RecordDecoder = _decoder

__all__ = [
    "CODEC_IDS",
    "CODEC_NAMES",
    "CONTROL_ABORT",
    "CONTROL_COMMIT",
    "CREATE_TIME",
    "GZIP",
    "LOG_APPEND_TIME",
    "LZ4",
    "NONE",
    "SNAPPY",
    "ZSTD",
    "BatchBuilder",
    "Record",
    "RecordBatch",
    "RecordFormatError",
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
]
