"""Columns of a pyarrow RecordBatch as the record encoder takes them. [app]

``Producer.send_arrow(topic, batch)`` hands whole columns to
:func:`kaflux.records.encode.encode_columns` (compiled when built), which encodes every row
without a Python object per row. This module only finds the columns and exposes their Arrow
buffers: ``key`` and ``value`` (binary or string, large ones too), and the optional
``partition`` (integer), ``timestamp`` (integer milliseconds, or an Arrow timestamp) and
``headers`` (``list<struct<key: string, value: binary>>``, Spark's Kafka layout). pyarrow is an
optional dependency (``pip install 'kaflux[arrow]'``).
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

from kaflux.records.encode import BinaryColumn, HeadersColumn, IntColumn

__all__ = ["ArrowColumns", "arrow_columns", "require_pyarrow"]

_KNOWN = ("key", "value", "partition", "timestamp", "headers")


def require_pyarrow() -> Any:
    """The pyarrow module. Raises ImportError naming the extra that installs it."""
    try:
        import pyarrow
    except ImportError as exc:
        raise ImportError("Producer.send_arrow() needs pyarrow: pip install 'kaflux[arrow]'") from exc
    return pyarrow


class ArrowColumns(NamedTuple):
    """A batch's columns as encoder buffers (None: no such column, or all null)."""

    num_rows: int
    keys: BinaryColumn | None
    values: BinaryColumn | None
    partitions: IntColumn | None
    timestamps: IntColumn | None
    headers: HeadersColumn | None
    #: the arrays the buffers belong to (kept alive while encoding)
    keep: tuple[Any, ...]


def _view(buffer: Any, fmt: Literal["B", "i", "q"]) -> memoryview:
    if buffer is None or buffer.size == 0:
        return memoryview(b"").cast(fmt)
    view: memoryview = memoryview(buffer).cast(fmt)
    return view


def _validity(array: Any) -> memoryview | None:
    if array.null_count == 0:
        return None
    return _view(array.buffers()[0], "B")


def _binary(pa: Any, array: Any, name: str) -> tuple[BinaryColumn | None, Any]:
    kind = array.type
    if pa.types.is_null(kind) or array.null_count == len(array):
        return None, array
    if pa.types.is_large_binary(kind) or pa.types.is_large_string(kind) or pa.types.is_string(kind):
        array = array.cast(pa.binary())
    elif not pa.types.is_binary(kind):
        raise TypeError(f"column {name!r} must be binary or string, got {kind}")
    buffers = array.buffers()
    return BinaryColumn(_validity(array), _view(buffers[1], "i"), _view(buffers[2], "B"), array.offset), array


def _integers(pa: Any, array: Any, name: str, width: Any) -> tuple[IntColumn | None, Any]:
    kind = array.type
    if pa.types.is_null(kind) or array.null_count == len(array):
        return None, array
    if name == "timestamp" and pa.types.is_timestamp(kind):
        array = array.cast(pa.timestamp("ms"), safe=False).cast(pa.int64())
    elif not pa.types.is_integer(kind):
        raise TypeError(f"column {name!r} must be an integer column, got {kind}")
    if array.type != width:
        array = array.cast(width)  # safe: raises on overflow
    values = _view(array.buffers()[1], "q") if width == pa.int64() else _view(array.buffers()[1], "i")
    return IntColumn(_validity(array), values, array.offset), array


def _headers(pa: Any, array: Any) -> tuple[HeadersColumn | None, tuple[Any, ...]]:
    kind = array.type
    if pa.types.is_null(kind) or array.null_count == len(array):
        return None, (array,)
    if pa.types.is_large_list(kind):
        array = array.cast(pa.list_(kind.value_type))
    if not pa.types.is_list(kind := array.type) or not pa.types.is_struct(kind.value_type):
        raise TypeError(
            f"column 'headers' must be list<struct<key: string, value: binary>>, got {array.type}"
        )
    entries = array.values
    if entries.null_count:
        raise ValueError("column 'headers' has a null header entry (a header needs at least a key)")
    keys, keep_keys = _binary(pa, entries.field("key"), "headers.key")
    values, keep_values = _binary(pa, entries.field("value"), "headers.value")
    if keys is None and len(entries):
        raise ValueError("column 'headers' has null header keys")
    column = HeadersColumn(_validity(array), _view(array.buffers()[1], "i"), array.offset, keys, values)
    return column, (array, keep_keys, keep_values)


def arrow_columns(pa: Any, batch: Any) -> ArrowColumns:
    """The encoder's view of ``batch`` (a ``pyarrow.RecordBatch``; a Table is combined into one).

    Raises:
        TypeError: a column has a type the producer cannot send, or ``batch`` is not Arrow data.
        ValueError: there is no ``value`` column.
    """
    if isinstance(batch, pa.Table):
        batch = batch.combine_chunks().to_batches()[0] if batch.num_rows else pa.RecordBatch.from_pylist([])
    if not isinstance(batch, pa.RecordBatch):
        raise TypeError(f"send_arrow() takes a pyarrow.RecordBatch, got {type(batch).__name__}")
    names = batch.schema.names
    if "value" not in names:
        raise ValueError(f"send_arrow() needs a 'value' column; the batch has {names}")
    keep: list[Any] = []
    values, array = _binary(pa, batch.column("value"), "value")
    keep.append(array)
    keys = None
    if "key" in names:
        keys, array = _binary(pa, batch.column("key"), "key")
        keep.append(array)
    partitions = None
    if "partition" in names:
        partitions, array = _integers(pa, batch.column("partition"), "partition", pa.int32())
        keep.append(array)
    timestamps = None
    if "timestamp" in names:
        timestamps, array = _integers(pa, batch.column("timestamp"), "timestamp", pa.int64())
        keep.append(array)
    headers = None
    if "headers" in names:
        headers, arrays = _headers(pa, batch.column("headers"))
        keep.extend(arrays)
    return ArrowColumns(batch.num_rows, keys, values, partitions, timestamps, headers, tuple(keep))
