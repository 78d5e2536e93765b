"""Vectorised Avro decoding into Arrow for flat schemas, with numpy: no Python object per record. [pure]

Avro's binary encoding puts a record's fields one after the other, so every record's field
*k* can be decoded at once from an array of positions: varints with a few vectorised passes,
strings by gathering their bytes, doubles by viewing 8 bytes; arrays and maps item by item
(item *k* of every row at once), then put in row order. :func:`compile_plan` accepts records
(nested too), arrays and maps of ``int``, ``long``, ``float``, ``double``, ``boolean``,
``string``, ``bytes``, ``enum``, unions of ``null`` and one of those, and the logical types
``date``, ``timestamp-millis``, ``timestamp-micros``, ``uuid`` and ``decimal`` (bytes); anything
else (fixed, other unions) returns None and the caller decodes record by record.

:func:`decode` returns None when any record does not end exactly where its bytes end (or
reads past them, or holds invalid UTF-8): the caller then decodes record by record too, which
says which record is bad.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

__all__ = ["Plan", "compile_plan", "decode"]

_KINDS = {"int", "long", "float", "double", "boolean", "string", "bytes"}


@dataclass(frozen=True, slots=True)
class Plan:
    """One node of a schema: ``kind`` is a primitive, ``enum`` or ``record``."""

    kind: str
    arrow_type: Any
    null_branch: int | None = None  # for [null, T] unions: the branch index of null
    fields: tuple[tuple[str, Plan], ...] = ()
    symbols: tuple[str, ...] = ()
    logical: str | None = None


def compile_plan(
    schema: Any, named: dict[str, Any], target: Any, null_branch: int | None = None
) -> Plan | None:
    """The plan decoding ``schema`` (fastavro-parsed) into Arrow type ``target``, or None."""
    if isinstance(schema, list):
        if len(schema) != 2 or "null" not in schema or null_branch is not None:
            return None
        index = schema.index("null")
        return compile_plan(schema[1 - index], named, target, index)
    if isinstance(schema, str):
        if schema in _KINDS:
            return Plan(schema, target, null_branch)
        if schema in named:
            return compile_plan(named[schema], named, target, null_branch)
        return None
    if not isinstance(schema, dict):
        return None
    kind, logical = schema.get("type"), schema.get("logicalType")
    if kind == "record":
        if not schema["fields"]:
            return None  # takes no bytes: the array check below relies on items taking some
        fields = []
        for f, t in zip(schema["fields"], target, strict=True):
            sub = compile_plan(f["type"], named, t.type)
            if sub is None:
                return None
            fields.append((f["name"], sub))
        return Plan("record", target, null_branch, tuple(fields))
    if kind == "array":
        item = compile_plan(schema["items"], named, target.value_type)
        return None if item is None else Plan("array", target, null_branch, (("item", item),))
    if kind == "map":
        value = compile_plan(schema["values"], named, target.item_type)
        key = Plan("string", target.key_type)
        return None if value is None else Plan("map", target, null_branch, (("key", key), ("value", value)))
    if kind == "enum":
        return Plan("enum", target, null_branch, symbols=tuple(schema["symbols"]))
    if logical == "decimal" and kind == "bytes" and pa.types.is_decimal128(target):
        return Plan("bytes", target, null_branch, logical="decimal")
    if logical in ("date", "timestamp-millis", "timestamp-micros", "uuid") and kind in (
        "int",
        "long",
        "string",
    ):
        return Plan(str(kind), target, null_branch, logical=str(logical))
    if logical is None and isinstance(kind, str) and kind in _KINDS:
        return Plan(kind, target, null_branch)
    if isinstance(kind, (dict, list)) and logical is None:
        return compile_plan(kind, named, target, null_branch)
    return None


class _Bad(Exception):
    pass


class _Reader:
    def __init__(self, data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> None:
        self.d = np.concatenate([data, np.zeros(16, dtype=np.uint8)])
        self.limit = len(data)
        self.pos = starts.copy()
        self.ends = ends

    def view(self, rows: np.ndarray) -> _Reader:
        """A reader over the current positions of ``rows`` (one slot each), same bytes."""
        sub = _Reader.__new__(_Reader)
        sub.d, sub.limit = self.d, self.limit
        sub.pos, sub.ends = self.pos[rows].copy(), self.ends[rows]
        return sub

    def varint(self, rows: np.ndarray) -> np.ndarray:
        """Zigzag varints at the positions of ``rows`` (advancing them)."""
        d, pos = self.d, self.pos
        cur = pos[rows]
        result = np.zeros(len(rows), dtype=np.uint64)
        live = np.arange(len(rows))
        for shift in range(0, 70, 7):
            b = d[np.minimum(cur[live], self.limit)].astype(np.uint64)
            result[live] |= (b & np.uint64(0x7F)) << np.uint64(shift)
            cur[live] += 1
            live = live[(b & np.uint64(0x80)) != 0]
            if not len(live):
                break
        else:
            raise _Bad
        pos[rows] = cur
        self.check(rows)
        return (result >> np.uint64(1)).astype(np.int64) ^ -(result & np.uint64(1)).astype(np.int64)

    def fixed(self, rows: np.ndarray, width: int) -> np.ndarray:
        """``width`` bytes at each row's position, as an (n, width) array (advancing them)."""
        at = self.pos[rows]
        self.pos[rows] = at + width
        self.check(rows)
        out: np.ndarray = self.d[at[:, None] + np.arange(width)]
        return out

    def check(self, rows: np.ndarray) -> None:
        if len(rows) and (self.pos[rows] > self.ends[rows]).any():
            raise _Bad


def _validity(active: np.ndarray) -> pa.Buffer | None:
    if active.all():
        return None
    return pa.py_buffer(np.packbits(active, bitorder="little").tobytes())


def _leaf(reader: _Reader, plan: Plan, active: np.ndarray) -> pa.Array:
    n = len(active)
    rows = np.flatnonzero(active)
    kind = plan.kind
    if kind in ("int", "long", "enum"):
        values = np.zeros(n, dtype=np.int64)
        values[rows] = reader.varint(rows)
        if kind == "enum":
            if len(rows) and ((values[rows] < 0) | (values[rows] >= len(plan.symbols))).any():
                raise _Bad
            indices = pa.array(values, mask=~active)
            return pa.array(plan.symbols, pa.string()).take(indices).cast(plan.arrow_type)
        if kind == "int":
            if len(rows) and ((values[rows] < -(2**31)) | (values[rows] >= 2**31)).any():
                raise _Bad
            raw = pa.Array.from_buffers(
                pa.int32(), n, [_validity(active), pa.py_buffer(values.astype(np.int32))]
            )
        else:
            raw = pa.Array.from_buffers(pa.int64(), n, [_validity(active), pa.py_buffer(values)])
        if plan.logical == "date":
            return raw.cast(pa.date32()).cast(plan.arrow_type)
        if plan.logical == "timestamp-millis":
            return raw.cast(pa.timestamp("ms", tz="UTC")).cast(plan.arrow_type)
        if plan.logical == "timestamp-micros":
            return raw.cast(pa.timestamp("us", tz="UTC")).cast(plan.arrow_type)
        return raw.cast(plan.arrow_type)
    if kind in ("float", "double"):
        width, dtype = (4, np.float32) if kind == "float" else (8, np.float64)
        values = np.zeros((n, width), dtype=np.uint8)
        values[rows] = reader.fixed(rows, width)
        numbers = values.reshape(-1).view(dtype)
        arrow = pa.float32() if kind == "float" else pa.float64()
        return pa.Array.from_buffers(arrow, n, [_validity(active), pa.py_buffer(numbers)]).cast(
            plan.arrow_type
        )
    if kind == "boolean":
        flags = np.zeros(n, dtype=np.uint8)
        flags[rows] = reader.fixed(rows, 1)[:, 0]
        if (flags > 1).any():
            raise _Bad
        bits = pa.py_buffer(np.packbits(flags.astype(bool), bitorder="little").tobytes())
        return pa.Array.from_buffers(pa.bool_(), n, [_validity(active), bits])
    if kind in ("string", "bytes"):
        lengths = np.zeros(n, dtype=np.int64)
        lengths[rows] = reader.varint(rows)
        if (lengths < 0).any():
            raise _Bad
        starts = reader.pos[rows]
        reader.pos[rows] = starts + lengths[rows]
        reader.check(rows)
        total = int(lengths.sum())
        if total >= 2**31:
            raise _Bad
        offsets = np.zeros(n + 1, dtype=np.int32)
        offsets[1:] = np.cumsum(lengths)
        row_lengths = lengths[rows]
        first = np.concatenate(([0], np.cumsum(row_lengths)[:-1])).astype(np.int64)
        gather = np.repeat(starts - first, row_lengths) + np.arange(total, dtype=np.int64)
        if plan.logical == "decimal":
            return _decimals(reader.d, starts, row_lengths, rows, active, plan.arrow_type)
        data = reader.d[gather]
        arrow = pa.string() if kind == "string" else pa.binary()
        array = pa.Array.from_buffers(
            arrow, n, [_validity(active), pa.py_buffer(offsets), pa.py_buffer(data)]
        )
        if kind == "string":
            try:
                array.validate(full=True)
            except pa.ArrowInvalid as exc:  # invalid UTF-8
                raise _Bad from exc
        return array.cast(plan.arrow_type)
    raise _Bad


def _decimals(
    d: np.ndarray,
    starts: np.ndarray,
    lengths: np.ndarray,
    rows: np.ndarray,
    active: np.ndarray,
    arrow_type: Any,
) -> pa.Array:
    """Avro decimals (big-endian two's complement of the unscaled value, at most 16 bytes here)
    as Arrow's decimal128 (16 bytes, little-endian)."""
    n = len(active)
    if (lengths > 16).any():
        raise _Bad
    values = np.zeros((n, 16), dtype=np.uint8)
    negative = np.zeros(len(rows), dtype=bool)
    nonempty = lengths > 0
    negative[nonempty] = d[starts[nonempty]] >= 0x80
    values[rows[negative]] = 0xFF  # sign extension
    total = int(lengths.sum())
    first = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
    k = np.arange(total, dtype=np.int64) - np.repeat(first, lengths)  # byte k from the right
    values[np.repeat(rows, lengths), k] = d[np.repeat(starts + lengths - 1, lengths) - k]
    return pa.Array.from_buffers(arrow_type, n, [_validity(active), pa.py_buffer(values.reshape(-1))])


def _node(reader: _Reader, plan: Plan, active: np.ndarray) -> pa.Array:
    if plan.null_branch is not None:
        rows = np.flatnonzero(active)
        branch = reader.varint(rows)
        if ((branch != 0) & (branch != 1)).any():
            raise _Bad
        present = active.copy()
        present[rows[branch == plan.null_branch]] = False
        active = present
    if plan.kind in ("array", "map"):
        return _repeated(reader, plan, active)
    if plan.kind != "record":
        return _leaf(reader, plan, active)
    children = [_node(reader, sub, active) for _, sub in plan.fields]
    return pa.StructArray.from_arrays(
        children, fields=list(plan.arrow_type), mask=None if active.all() else pa.array(~active)
    )


def _repeated(reader: _Reader, plan: Plan, active: np.ndarray) -> pa.Array:
    """An array or map: blocks of items (a count, negative when a byte size follows), ending
    with a count of 0. Item k of every row is decoded at once; items are then put in row order."""
    n = len(active)
    seq = np.zeros(n, dtype=np.int64)  # items read so far per row
    pieces: list[tuple[np.ndarray, np.ndarray, list[pa.Array]]] = []
    pending = np.flatnonzero(active)
    while len(pending):
        counts = reader.varint(pending)
        negative = counts < 0
        if negative.any():
            counts = np.abs(counts)
            reader.varint(pending[negative])  # the block's size in bytes, not needed
        more = counts > 0
        pending, counts = pending[more], counts[more]
        if not len(pending):
            break
        if (counts > reader.ends[pending] - reader.pos[pending]).any():
            raise _Bad  # every item takes at least one byte
        for k in range(int(counts.max())):
            slots = pending[counts > k]
            sub = reader.view(slots)
            ones = np.ones(len(slots), dtype=bool)
            children = [_node(sub, item, ones) for _, item in plan.fields]
            reader.pos[slots] = sub.pos
            pieces.append((slots, seq[slots].copy(), children))
            seq[slots] += 1
    offsets = np.zeros(n + 1, dtype=np.int32)
    offsets[1:] = np.cumsum(seq)
    if pieces:
        rows = np.concatenate([p[0] for p in pieces])
        order = pa.array(np.lexsort((np.concatenate([p[1] for p in pieces]), rows)))
        values = [pa.concat_arrays([p[2][i] for p in pieces]).take(order) for i in range(len(plan.fields))]
    else:
        values = [pa.array([], type=item.arrow_type) for _, item in plan.fields]
    mask = None if active.all() else pa.array(~active)
    if plan.kind == "array":
        return pa.ListArray.from_arrays(pa.array(offsets), values[0], type=plan.arrow_type, mask=mask)
    return pa.MapArray.from_arrays(pa.array(offsets), values[0], values[1], type=plan.arrow_type, mask=mask)


def decode(
    plan: Plan, data: np.ndarray, starts: np.ndarray, ends: np.ndarray, valid: np.ndarray
) -> pa.Array | None:
    """Decode the records at ``data[starts[i]:ends[i]]`` (payloads, framing excluded) of the
    rows where ``valid``; null elsewhere. None when a record is malformed."""
    reader = _Reader(data, starts.astype(np.int64), ends.astype(np.int64))
    try:
        out = _node(reader, plan, valid.copy())
    except (_Bad, IndexError, ValueError, pa.ArrowException):  # a malformed record
        return None
    rows = np.flatnonzero(valid)
    if (reader.pos[rows] != reader.ends[rows]).any():
        return None
    return out
