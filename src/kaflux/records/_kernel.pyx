# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, embedsignature=True
"""Compiled record kernel: the twin of :mod:`kaflux.records.batch_decoder` (and of
:mod:`kaflux.records.columns` and :mod:`kaflux.records.consumer_record`). [pure]

Same functions, same semantics, same exceptions and messages as the pure-Python decoder
(the tests run the whole record suite against both and fuzz them against each other);
:mod:`kaflux.records` picks this one when it is built. What it adds is speed: batches are
walked and CRC-checked in C (SSE4.2 CRC-32C where the CPU has it), records are decoded
straight from the receive buffer (or from cramjam's output buffer, without copying it),
:class:`ConsumerRecord` is a small C-level type built directly (its key and value bytes are
the only other objects per record), :class:`ColumnBuilder` fills Arrow-layout column
buffers with no Python object per record, and :func:`to_arrow` hands those buffers to
pyarrow through the Arrow C data interface.

Every read is bounds-checked against the buffer the data lives in; positions and values
are 64-bit. Where the pure decoder would produce integers beyond 64 bits (10-byte varints
that overflow, or base offset + delta past int64 -- only corrupt data does that), the
kernel hands the whole call to the pure decoder, which defines the result.
"""

cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.list cimport PyList_New
from cpython.ref cimport Py_INCREF, Py_XDECREF, PyObject
from cpython.sequence cimport PySequence_GetSlice
from libc.stdint cimport INT32_MAX, INT64_MIN, int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t, uintptr_t
from libc.string cimport memcmp, memcpy, memset

import struct
import sys

from kaflux.errors import CorruptRecordError, IllegalStateError
from kaflux.records import batch_decoder as _pure
from kaflux.records import definitions as _definitions
from kaflux.records import types as _types
from kaflux.records.columns import arrow_schema
from kaflux.records.compression import codec_name, decompress_view
from kaflux.records.consumer_record import consumer_records_from as _pure_consumer_records_from
from kaflux.records.definitions import (
    OVERFLOW_MESSAGE,
    RecordColumns,
    check_append_arguments,
    check_record_range,
)
from kaflux.records.definitions import check_record_context as _check_record_context
from kaflux.records.types import Record, RecordFormatError
from kaflux.structs import TopicPartition


cdef extern from "Python.h":
    long long PyLong_AsLongLongAndOverflow(object obj, int* overflow) except? -1
    object PyUnicode_DecodeUTF8(const char* s, Py_ssize_t size, const char* errors)
    const char* PyUnicode_AsUTF8AndSize(object unicode, Py_ssize_t* size) except NULL
    void PyList_SET_ITEM(object lst, Py_ssize_t i, object item)  # steals a reference
    int PyList_SetSlice(object lst, Py_ssize_t low, Py_ssize_t high, PyObject* items) except -1
    void PyObject_GC_Track(object obj)
    void PyObject_GC_UnTrack(object obj)
    int PyObject_GC_IsTracked(object obj)
    int PyGC_Enable()
    int PyGC_Disable()
    Py_ssize_t PY_SSIZE_T_MAX


cdef extern from "_kernel_impl.h":
    const char* kx_source_sha256
    void kx_crc32c_init()
    uint32_t kx_crc32c(uint32_t crc, const unsigned char* p, size_t n) nogil
    uint32_t kx_crc32c_portable(uint32_t crc, const unsigned char* p, size_t n) nogil
    int kx_crc32c_hardware()
    int kx_utf8_valid(const unsigned char* p, Py_ssize_t n) nogil
    int kx_add_overflow(int64_t a, int64_t b, int64_t* r) nogil
    object kx_make_record(object rtype, object a, object b, object c, object d, object e)
    object kx_pair(object a, object b)
    struct ArrowArray:
        void (*release)(ArrowArray*) noexcept
    ctypedef struct kx_export:
        int n_views
        Py_buffer views[18]
        ArrowArray arrays[12]
    kx_export* kx_export_new()
    void kx_export_discard(kx_export* e)
    void kx_export_array(
        kx_export* e,
        int index,
        int64_t length,
        int64_t null_count,
        int n_buffers,
        const void* b0,
        const void* b1,
        const void* b2,
        int first_child,
        int n_children,
    )


kx_crc32c_init()

#: SHA-256 of the kernel sources this module was built from ("" if built without setup.py).
SOURCE_SHA256 = kx_source_sha256.decode()

if not (
    issubclass(Record, tuple)
    and Record.__basicsize__ == tuple.__basicsize__
    and Record.__itemsize__ == tuple.__itemsize__
):  # pragma: no cover - Record is a NamedTuple without instance dict
    raise ImportError("kaflux.records.Record is not a plain tuple subclass")

# --- layout constants (see kaflux.records.types) ---------------------------------------------
cdef enum:
    LOG_OVERHEAD = 12
    RECORD_BATCH_OVERHEAD = 61
    MIN_BATCH_LENGTH = 49
    MAGIC_OFFSET = 16
    CRC_OFFSET = 17
    ATTRIBUTES_OFFSET = 21
    MIN_RECORD_SIZE = 7
    MIN_RECORD_BODY = 6
    MAX_CODEC = 4
    KEY_CACHE_SIZE = 8

if (
    _types.LOG_OVERHEAD != LOG_OVERHEAD
    or _types.RECORD_BATCH_OVERHEAD != RECORD_BATCH_OVERHEAD
    or _types.MAGIC_OFFSET != MAGIC_OFFSET
    or _types.CRC_OFFSET != CRC_OFFSET
    or _types.ATTRIBUTES_OFFSET != ATTRIBUTES_OFFSET
    or _definitions.MIN_RECORD_SIZE != MIN_RECORD_SIZE
    or _definitions.MIN_RECORD_BODY != MIN_RECORD_BODY
    or _definitions.MAX_CODEC != MAX_CODEC
):  # pragma: no cover - the layout is fixed by the Kafka protocol
    raise ImportError("the compiled kernel's batch layout constants differ from kaflux.records.types")

_LOG_HEADER = struct.Struct(">qi")
_CONTROL_KEY = struct.Struct(">hh")
_pure_decode_records = _pure.decode_records
_new_tuple = tuple.__new__
if RecordColumns._fields != (
    "num_rows", "offset", "timestamp", "timestamp_type", "partition", "topic_offsets", "topic_data",
    "key_validity", "key_null_count", "key_offsets", "key_data", "value_validity", "value_null_count",
    "value_offsets", "value_data", "header_offsets", "header_count", "header_key_offsets",
    "header_key_data", "header_value_validity", "header_value_null_count", "header_value_offsets",
    "header_value_data",
):  # pragma: no cover - ColumnBuilder.finish() builds the tuple positionally
    raise ImportError("kaflux.records.definitions.RecordColumns changed its fields; update ColumnBuilder.finish()")
cdef object _Record = Record


def crc32c(data, /):
    """CRC-32C of a bytes-like object (hardware-accelerated where the CPU allows)."""
    cdef Py_buffer view
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        return kx_crc32c(0, <const unsigned char*>view.buf, <size_t>view.len)
    finally:
        PyBuffer_Release(&view)


def crc32c_portable(data, /):
    """CRC-32C computed by the table-driven path, whatever the CPU (for tests)."""
    cdef Py_buffer view
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        return kx_crc32c_portable(0, <const unsigned char*>view.buf, <size_t>view.len)
    finally:
        PyBuffer_Release(&view)


def crc32c_hardware():
    """Whether CRC-32C uses the CPU's crc32 instruction."""
    return bool(kx_crc32c_hardware())


def utf8_valid(data, /):
    """Whether ``data`` is UTF-8 that ``bytes.decode()`` accepts (the kernel's check)."""
    cdef Py_buffer view
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        return bool(kx_utf8_valid(<const unsigned char*>view.buf, view.len))
    finally:
        PyBuffer_Release(&view)


# --- the kernel, one section per file (Cython includes them textually, in this order) ---
include "_kernel_buffers.pxi"
include "_kernel_consumer_record.pxi"
include "_kernel_decode.pxi"
include "_kernel_batches.pxi"
include "_kernel_columns.pxi"
include "_kernel_arrow.pxi"
