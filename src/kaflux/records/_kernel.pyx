# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, embedsignature=True
"""Compiled record kernel: the twin of :mod:`kaflux.records.batch_decoder` (and of
:class:`kaflux.records.columns.ColumnBuilder`). [pure]

Same functions, same semantics, same exceptions and messages as the pure-Python decoder
(the tests run the whole record suite against both and fuzz them against each other);
:mod:`kaflux.records` picks this one when it is built. What it adds is speed: batches are
walked and CRC-checked in C (SSE4.2 CRC-32C where the CPU has it), records are decoded
straight from the receive buffer (or from cramjam's output buffer, without copying it), and
:class:`ColumnBuilder` fills Arrow-layout column buffers with no Python object per record.

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
from libc.stdint cimport INT32_MAX, INT64_MIN, int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy

import struct
import sys

from kaflux.errors import CorruptRecordError, IllegalStateError
from kaflux.records import batch_decoder as _pure
from kaflux.records import types as _types
from kaflux.records.columns import (
    OVERFLOW_MESSAGE,
    RecordColumns,
    check_append_arguments,
    out_of_range_message,
)
from kaflux.records.compression import codec_name, decompress_view
from kaflux.records.types import Record, RecordFormatError


cdef extern from "Python.h":
    long long PyLong_AsLongLongAndOverflow(object obj, int* overflow) except? -1
    object PyUnicode_DecodeUTF8(const char* s, Py_ssize_t size, const char* errors)
    const char* PyUnicode_AsUTF8AndSize(object unicode, Py_ssize_t* size) except NULL
    void PyList_SET_ITEM(object lst, Py_ssize_t i, object item)  # steals a reference
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
    or _pure._MIN_RECORD_SIZE != MIN_RECORD_SIZE
    or _pure._MIN_RECORD_BODY != MIN_RECORD_BODY
    or _pure._MAX_CODEC != MAX_CODEC
):  # pragma: no cover - the layout is fixed by the Kafka protocol
    raise ImportError("the compiled kernel's batch layout constants differ from kaflux.records.types")

_LOG_HEADER = struct.Struct(">qi")
_CONTROL_KEY = struct.Struct(">hh")
_pure_decode_records = _pure.decode_records
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


# --- varints ---------------------------------------------------------------------------------

cdef enum:
    ST_OK = 0
    ST_PAST_END = 1  # ran past the end of the buffer
    ST_TOO_LONG = 2  # more than 10 bytes
    ST_BIG = 3  # a 10-byte varint whose value does not fit 64 bits: the pure decoder decides
    FALLBACK = -2  # _decode's "hand this call to the pure decoder" (no exception set)


cdef inline int _varint(const uint8_t* p, Py_ssize_t n, Py_ssize_t* pos, int64_t* out) noexcept nogil:
    """Zig-zag varint at pos[0]; advances pos[0]. Reads only p[pos[0]:n]."""
    cdef Py_ssize_t i = pos[0]
    cdef uint64_t b, v
    cdef int k
    if i >= n:
        return ST_PAST_END
    b = p[i]
    if b < 0x80:
        out[0] = <int64_t>((b >> 1) ^ (0 - (b & 1)))
        pos[0] = i + 1
        return ST_OK
    v = b & 0x7F
    for k in range(1, 10):
        if i + k >= n:
            return ST_PAST_END
        b = p[i + k]
        if k == 9:
            if b & 0x80:
                return ST_TOO_LONG
            if b > 1:
                return ST_BIG
        v |= (b & 0x7F) << (7 * k)
        if b < 0x80:
            pos[0] = i + k + 1
            out[0] = <int64_t>((v >> 1) ^ (0 - (v & 1)))
            return ST_OK
    return ST_TOO_LONG  # not reached


cdef int _varint_fail(int status, Py_ssize_t start) except -1:
    if status == ST_PAST_END:
        raise RecordFormatError("record data runs past the end of the batch")
    if status == ST_TOO_LONG:
        raise RecordFormatError(f"varint at position {start} is longer than 10 bytes")
    return FALLBACK


cdef inline int64_t _floordiv2(int64_t x) noexcept nogil:
    return x // 2 if x >= 0 else -((1 - x) // 2)


# --- column buffers ----------------------------------------------------------------------------

cdef struct _Col:
    PyObject* obj  # a bytearray used as growable storage; its len() is the capacity
    char* p
    Py_ssize_t size
    Py_ssize_t cap

cdef enum:
    C_OFFSET = 0
    C_TIMESTAMP = 1
    C_TTYPE = 2
    C_PARTITION = 3
    C_TOPIC_OFF = 4
    C_TOPIC_DATA = 5
    C_KEY_VALID = 6
    C_KEY_OFF = 7
    C_KEY_DATA = 8
    C_VAL_VALID = 9
    C_VAL_OFF = 10
    C_VAL_DATA = 11
    C_HDR_OFF = 12
    C_HK_OFF = 13
    C_HK_DATA = 14
    C_HV_VALID = 15
    C_HV_OFF = 16
    C_HV_DATA = 17
    N_COLS = 18


cdef int _col_grow(_Col* c, Py_ssize_t need) except -1:
    cdef Py_ssize_t cap = c.cap * 2
    if cap < need:
        cap = need
    PyByteArray_Resize(<object>c.obj, cap)
    c.p = PyByteArray_AS_STRING(<object>c.obj)
    c.cap = cap
    return 0


cdef inline int _col_reserve(_Col* c, Py_ssize_t extra) except -1:
    if c.size + extra > c.cap:
        return _col_grow(c, c.size + extra)
    return 0


cdef inline int _put_i64(_Col* c, int64_t v) except -1:
    _col_reserve(c, 8)
    memcpy(c.p + c.size, &v, 8)
    c.size += 8
    return 0


cdef inline int _put_i32(_Col* c, int32_t v) except -1:
    _col_reserve(c, 4)
    memcpy(c.p + c.size, &v, 4)
    c.size += 4
    return 0


cdef inline int _put_data(_Col* data, _Col* offsets, const void* src, Py_ssize_t size) except -1:
    """Appends src[:size] to a data column and its end offset to the offsets column
    (truncated to int32 past 2 GiB; the caller then raises OverflowError)."""
    _col_reserve(data, size)
    memcpy(data.p + data.size, src, size)
    data.size += size
    return _put_i32(offsets, <int32_t>data.size)


cdef inline int _put_bit(_Col* c, Py_ssize_t i, bint valid) except -1:
    """Sets or clears bit i of a bitmap holding bits 0 .. i-1."""
    cdef Py_ssize_t byte = i >> 3
    cdef unsigned char mask = <unsigned char>(1 << (i & 7))
    if byte >= c.size:
        _col_reserve(c, 1)
        c.p[byte] = 0
        c.size = byte + 1
    if valid:
        (<unsigned char*>c.p)[byte] |= mask
    else:
        (<unsigned char*>c.p)[byte] &= <unsigned char>~mask
    return 0


cdef struct _Sel:
    # inputs
    int64_t min_offset
    Py_ssize_t max_records
    const char* topic
    Py_ssize_t topic_len
    int32_t partition
    int32_t timestamp_type
    # outputs
    bint skipping  # still inside the leading records below min_offset
    bint overflow  # a column outgrew int32 offsets: stop appending, raise at the end
    Py_ssize_t appended
    Py_ssize_t remaining
    int64_t last_offset


cdef struct _Snap:
    Py_ssize_t sizes[N_COLS]
    Py_ssize_t rows
    Py_ssize_t headers
    Py_ssize_t key_nulls
    Py_ssize_t value_nulls
    Py_ssize_t header_value_nulls


# --- the record kernel ------------------------------------------------------------------------

cdef int _precheck(Py_ssize_t n, int64_t pos, int64_t end, int64_t count) except -1:
    if pos < 0 or end > n or pos > end:
        raise RecordFormatError(f"record range {pos}..{end} is outside the {n}-byte buffer")
    if count < 0:
        raise RecordFormatError(f"negative record count {count}")
    if count > (end - pos) // MIN_RECORD_SIZE:
        raise RecordFormatError(f"record count {count} cannot fit in {end - pos} bytes")
    return 0


cdef int _decode(
    const uint8_t* p,
    Py_ssize_t n,
    Py_ssize_t pos,
    Py_ssize_t end,
    Py_ssize_t count,
    int64_t base_offset,
    int64_t base_timestamp,
    bint has_log_append_time,
    int64_t log_append_time,
    list out,
    ColumnBuilder cb,
    _Sel* sel,
) except -1:
    """Decodes exactly ``count`` records from p[pos:end] (after _precheck), reading nothing
    outside p[0:n] -- like the pure kernel, whose reads are bounded by len(data) only.

    Object mode (``out`` is a list of ``count`` empty slots): fills it with Records.
    Column mode (``cb`` is a ColumnBuilder): appends the records ``sel`` selects to it.
    Returns 0, or FALLBACK when a value needs integers beyond 64 bits; raises
    RecordFormatError with the pure kernel's messages on malformed data.
    """
    cdef Py_ssize_t r, h, start, rec_end, avail, kl, i, beyond = n + 1
    cdef int64_t length, ts_delta, offset_delta, size, header_count, offset, timestamp
    cdef int st
    cdef bint col = cb is not None
    cdef bint take = False
    cdef object key = None, value = None, headers = None, header_key = None, header_value = None
    cdef _Col* cols = NULL
    # header key cache (object mode): raw key bytes -> str, for the batch's first distinct keys
    cdef const uint8_t* cache_ptr[KEY_CACHE_SIZE]
    cdef Py_ssize_t cache_len[KEY_CACHE_SIZE]
    cdef int cache_n = 0
    cdef list cache_keys = []
    if col:
        cols = cb.cols

    for r in range(count):
        start = pos
        st = _varint(p, n, &pos, &length)
        if st:
            return _varint_fail(st, start)
        if length < MIN_RECORD_BODY or length > end - pos:
            raise RecordFormatError(f"record length {length} is out of range")
        rec_end = pos + <Py_ssize_t>length
        pos += 1  # attributes (int8, unused)
        start = pos
        st = _varint(p, n, &pos, &ts_delta)
        if st:
            return _varint_fail(st, start)
        start = pos
        st = _varint(p, n, &pos, &offset_delta)
        if st:
            return _varint_fail(st, start)
        if kx_add_overflow(base_offset, offset_delta, &offset):
            return FALLBACK
        if has_log_append_time:
            timestamp = log_append_time
        elif kx_add_overflow(base_timestamp, ts_delta, &timestamp):
            return FALLBACK

        if col:
            if sel.skipping and offset < sel.min_offset:
                take = False
            else:
                sel.skipping = False
                take = sel.appended < sel.max_records and not sel.overflow
                if not take:
                    sel.remaining += 1
            if take:
                _put_i64(&cols[C_OFFSET], offset)
                _put_i64(&cols[C_TIMESTAMP], timestamp)
                _put_i32(&cols[C_TTYPE], sel.timestamp_type)
                _put_i32(&cols[C_PARTITION], sel.partition)
                _put_data(&cols[C_TOPIC_DATA], &cols[C_TOPIC_OFF], sel.topic, sel.topic_len)

        # key
        start = pos
        st = _varint(p, n, &pos, &size)
        if st:
            return _varint_fail(st, start)
        if size >= 0:
            if size <= n - pos:
                if not col:
                    key = PyBytes_FromStringAndSize(<const char*>p + pos, <Py_ssize_t>size)
                elif take:
                    _put_bit(&cols[C_KEY_VALID], cb.rows, True)
                    _put_data(&cols[C_KEY_DATA], &cols[C_KEY_OFF], p + pos, <Py_ssize_t>size)
                pos += <Py_ssize_t>size
            else:
                pos = beyond  # the next read fails, as in the pure kernel
        elif size == -1:
            if not col:
                key = None
            elif take:
                _put_bit(&cols[C_KEY_VALID], cb.rows, False)
                _put_i32(&cols[C_KEY_OFF], <int32_t>cols[C_KEY_DATA].size)
                cb.key_nulls += 1
        else:
            raise RecordFormatError(f"negative key length {size}")

        # value
        start = pos
        st = _varint(p, n, &pos, &size)
        if st:
            return _varint_fail(st, start)
        if size >= 0:
            if size <= n - pos:
                if not col:
                    value = PyBytes_FromStringAndSize(<const char*>p + pos, <Py_ssize_t>size)
                elif take:
                    _put_bit(&cols[C_VAL_VALID], cb.rows, True)
                    _put_data(&cols[C_VAL_DATA], &cols[C_VAL_OFF], p + pos, <Py_ssize_t>size)
                pos += <Py_ssize_t>size
            else:
                pos = beyond
        elif size == -1:
            if not col:
                value = None
            elif take:
                _put_bit(&cols[C_VAL_VALID], cb.rows, False)
                _put_i32(&cols[C_VAL_OFF], <int32_t>cols[C_VAL_DATA].size)
                cb.value_nulls += 1
        else:
            raise RecordFormatError(f"negative value length {size}")

        # headers
        start = pos
        st = _varint(p, n, &pos, &header_count)
        if st:
            return _varint_fail(st, start)
        if header_count:
            # each header takes at least two bytes (key length and value length)
            if header_count < 0 or header_count > _floordiv2(rec_end - pos):
                raise RecordFormatError(f"header count {header_count} is out of range")
            if not col:
                headers = PyList_New(<Py_ssize_t>header_count)
            for h in range(<Py_ssize_t>header_count):
                start = pos
                st = _varint(p, n, &pos, &size)
                if st:
                    return _varint_fail(st, start)
                if size < 0:
                    raise RecordFormatError(f"negative header key length {size}")
                avail = n - pos
                kl = <Py_ssize_t>size if size <= avail else avail  # Python slices clamp
                if not col:
                    i = 0
                    while i < cache_n:
                        if cache_len[i] == kl and memcmp(cache_ptr[i], p + pos, kl) == 0:
                            break
                        i += 1
                    if i < cache_n:
                        header_key = cache_keys[i]
                    else:
                        try:
                            header_key = PyUnicode_DecodeUTF8(<const char*>p + pos, kl, NULL)
                        except UnicodeDecodeError:
                            raise RecordFormatError("header key is not valid UTF-8") from None
                        if cache_n < KEY_CACHE_SIZE:
                            cache_ptr[cache_n] = p + pos
                            cache_len[cache_n] = kl
                            cache_keys.append(header_key)
                            cache_n += 1
                else:
                    if not kx_utf8_valid(p + pos, kl):
                        raise RecordFormatError("header key is not valid UTF-8")
                    if take:
                        _put_data(&cols[C_HK_DATA], &cols[C_HK_OFF], p + pos, kl)
                pos = pos + <Py_ssize_t>size if size <= avail else beyond
                start = pos
                st = _varint(p, n, &pos, &size)
                if st:
                    return _varint_fail(st, start)
                if size >= 0:
                    if size <= n - pos:
                        if not col:
                            header_value = PyBytes_FromStringAndSize(
                                <const char*>p + pos, <Py_ssize_t>size
                            )
                            pair = kx_pair(header_key, header_value)
                            Py_INCREF(pair)
                            PyList_SET_ITEM(headers, h, pair)
                        elif take:
                            _put_bit(&cols[C_HV_VALID], cb.headers, True)
                            _put_data(&cols[C_HV_DATA], &cols[C_HV_OFF], p + pos, <Py_ssize_t>size)
                            cb.headers += 1
                        pos += <Py_ssize_t>size
                    else:
                        # an error follows: the next read fails or the record end mismatches
                        # (an unset list slot is fine: the list is dropped with the error)
                        pos = beyond
                elif size == -1:
                    if not col:
                        pair = kx_pair(header_key, None)
                        Py_INCREF(pair)
                        PyList_SET_ITEM(headers, h, pair)
                    elif take:
                        _put_bit(&cols[C_HV_VALID], cb.headers, False)
                        _put_i32(&cols[C_HV_OFF], <int32_t>cols[C_HV_DATA].size)
                        cb.header_value_nulls += 1
                        cb.headers += 1
                else:
                    raise RecordFormatError(f"negative header value length {size}")
        elif not col:
            headers = []
        if pos != rec_end:
            raise RecordFormatError(f"record occupies {length} bytes but its fields end elsewhere")

        if not col:
            record = kx_make_record(_Record, offset, timestamp, key, value, headers)
            Py_INCREF(record)
            PyList_SET_ITEM(out, r, record)
        elif take:
            _put_i32(&cols[C_HDR_OFF], <int32_t>cb.headers)
            cb.rows += 1
            sel.appended += 1
            sel.last_offset = offset
            if (
                cols[C_TOPIC_DATA].size > INT32_MAX
                or cols[C_KEY_DATA].size > INT32_MAX
                or cols[C_VAL_DATA].size > INT32_MAX
                or cols[C_HK_DATA].size > INT32_MAX
                or cols[C_HV_DATA].size > INT32_MAX
                or cb.headers > INT32_MAX
            ):
                sel.overflow = True
    if pos != end:
        raise RecordFormatError(f"{end - pos} bytes of trailing data after {count} records")
    return 0


cdef bint _as_i64(object obj, int64_t* out):
    """obj as an int64 when it is an exact int in range."""
    cdef int overflow = 0
    cdef long long value
    if type(obj) is not int:
        return False
    value = PyLong_AsLongLongAndOverflow(obj, &overflow)
    if overflow:
        return False
    out[0] = value
    return True


def decode_records(data, pos, end, count, base_offset, base_timestamp, log_append_time):
    """Decode exactly ``count`` records occupying ``data[pos:end]`` (see
    :func:`kaflux.records.batch_decoder.decode_records`, which this matches exactly).

    Raises :class:`RecordFormatError` (and nothing else) on any malformation.
    """
    cdef int64_t c_pos = 0, c_end = 0, c_count = 0, c_base_offset = 0, c_base_timestamp = 0, c_lat = 0
    cdef bint has_lat = log_append_time is not None
    cdef Py_ssize_t n
    cdef list out
    if (
        type(data) is not bytes
        or not _as_i64(pos, &c_pos)
        or not _as_i64(end, &c_end)
        or not _as_i64(count, &c_count)
        or not _as_i64(base_offset, &c_base_offset)
        or not _as_i64(base_timestamp, &c_base_timestamp)
        or (has_lat and not _as_i64(log_append_time, &c_lat))
    ):
        return _pure_decode_records(data, pos, end, count, base_offset, base_timestamp, log_append_time)
    n = len(<bytes>data)
    _precheck(n, c_pos, c_end, c_count)
    out = PyList_New(<Py_ssize_t>c_count)
    if _decode(
        <const uint8_t*>PyBytes_AS_STRING(data),
        n,
        <Py_ssize_t>c_pos,
        <Py_ssize_t>c_end,
        <Py_ssize_t>c_count,
        c_base_offset,
        c_base_timestamp,
        has_lat,
        c_lat,
        out,
        None,
        NULL,
    ) == FALLBACK:
        return _pure_decode_records(data, pos, end, count, base_offset, base_timestamp, log_append_time)
    return out


def control_type(record):
    """The type of a control record: 0 = ABORT, 1 = COMMIT (other values are unknown types).

    Raises :class:`RecordFormatError` when the key is not a control record key (at least
    4 bytes: int16 version >= 0, int16 type).
    """
    key = record.key
    if key is None or len(key) < _CONTROL_KEY.size:
        raise RecordFormatError("control record key is missing or shorter than 4 bytes")
    version, ctype = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise RecordFormatError(f"control record key has negative version {version}")
    return int(ctype)


# --- batches ----------------------------------------------------------------------------------

cdef inline uint64_t _be64(const uint8_t* q) noexcept nogil:
    return (
        (<uint64_t>q[0] << 56) | (<uint64_t>q[1] << 48) | (<uint64_t>q[2] << 40) | (<uint64_t>q[3] << 32)
        | (<uint64_t>q[4] << 24) | (<uint64_t>q[5] << 16) | (<uint64_t>q[6] << 8) | <uint64_t>q[7]
    )


cdef inline uint32_t _be32(const uint8_t* q) noexcept nogil:
    return (<uint32_t>q[0] << 24) | (<uint32_t>q[1] << 16) | (<uint32_t>q[2] << 8) | <uint32_t>q[3]


cdef inline int16_t _be16(const uint8_t* q) noexcept nogil:
    return <int16_t>((<uint32_t>q[0] << 8) | <uint32_t>q[1])


@cython.auto_pickle(False)
cdef class RecordBatch:
    """One v2 record batch: its parsed header and the (still encoded) records.

    Built by :func:`iter_batches`. Holds a view of the batch bytes, so it keeps the
    receive buffer alive until dropped.
    """

    cdef readonly object _buf
    cdef public int64_t base_offset
    cdef public int32_t batch_length
    cdef public int32_t partition_leader_epoch
    cdef public int magic
    cdef public uint32_t crc
    cdef public int attributes
    cdef public int compression
    cdef public int timestamp_type
    cdef public bint is_transactional
    cdef public bint is_control
    cdef public bint has_delete_horizon
    cdef public int32_t last_offset_delta
    cdef public int64_t base_timestamp
    cdef public int64_t max_timestamp
    cdef public int64_t producer_id
    cdef public int producer_epoch
    cdef public int32_t base_sequence
    cdef public int32_t record_count
    cdef public object topic
    cdef public object partition

    def __init__(self, buf, header, topic, partition):
        self._buf = buf
        (
            self.base_offset,
            self.batch_length,
            self.partition_leader_epoch,
            self.magic,
            self.crc,
            attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.record_count,
        ) = header
        self._set_attributes(attributes)
        self.topic = topic
        self.partition = partition

    cdef inline void _set_attributes(self, int attributes) noexcept:
        self.attributes = attributes
        self.compression = attributes & 0x07
        self.timestamp_type = 1 if attributes & 0x08 else 0
        self.is_transactional = (attributes & 0x10) != 0
        self.is_control = (attributes & 0x20) != 0
        self.has_delete_horizon = (attributes & 0x40) != 0

    @property
    def last_offset(self):
        return <object>self.base_offset + self.last_offset_delta

    @property
    def next_offset(self):
        """The offset following this batch (where the consumer continues)."""
        return <object>self.base_offset + self.last_offset_delta + 1

    @property
    def size_in_bytes(self):
        """Bytes this batch occupies in the fetch response."""
        return LOG_OVERHEAD + <object>self.batch_length

    def raw(self):
        """The batch's bytes, as received."""
        return self._buf

    def corrupt(self, message):
        """A CorruptRecordError locating this batch (for callers' own validation)."""
        return CorruptRecordError(message, topic=self.topic, partition=self.partition, offset=self.base_offset)

    cdef object _payload(self, Py_ssize_t* pos):
        """The buffer holding the records (decompressed if need be) and where they start."""
        cdef int codec = self.compression
        if codec:
            try:
                data = decompress_view(codec, self._buf[RECORD_BATCH_OVERHEAD:])
            except RecordFormatError as exc:
                raise self.corrupt(str(exc)) from exc
            pos[0] = 0
            return data
        pos[0] = RECORD_BATCH_OVERHEAD
        return self._buf

    cdef object _log_append_time(self):
        return self.max_timestamp if self.timestamp_type == 1 else None

    def records(self):
        """Decompress (once per call) and decode all records of the batch."""
        cdef Py_ssize_t pos
        cdef Py_buffer view
        cdef list out
        cdef int codec = self.compression
        data = self._payload(&pos)
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        try:
            _precheck(view.len, pos, view.len, self.record_count)
            out = PyList_New(self.record_count)
            if _decode(
                <const uint8_t*>view.buf,
                view.len,
                pos,
                view.len,
                self.record_count,
                self.base_offset,
                self.base_timestamp,
                self.timestamp_type == 1,
                self.max_timestamp,
                out,
                None,
                NULL,
            ) == FALLBACK:
                out = _pure_decode_records(
                    bytes(data),
                    pos,
                    view.len,
                    self.record_count,
                    self.base_offset,
                    self.base_timestamp,
                    self._log_append_time(),
                )
            return out
        except RecordFormatError as exc:
            where = f" ({codec_name(codec)}-compressed batch)" if codec else ""
            raise self.corrupt(f"{exc}{where}") from exc
        finally:
            PyBuffer_Release(&view)

    def control_type(self):
        """For a control batch, the type of its control record: 0 = ABORT, 1 = COMMIT."""
        if not self.is_control:
            raise IllegalStateError("control_type() called on a batch that is not a control batch")
        records = self.records()
        if not records:
            raise self.corrupt("control batch holds no records")
        try:
            return control_type(records[0])
        except RecordFormatError as exc:
            raise self.corrupt(str(exc)) from exc

    def __repr__(self):
        return (
            f"RecordBatch(base_offset={self.base_offset}, last_offset_delta={self.last_offset_delta}, "
            f"record_count={self.record_count}, compression={codec_name(self.compression)}, "
            f"timestamp_type={self.timestamp_type}, is_transactional={self.is_transactional}, "
            f"is_control={self.is_control}, producer_id={self.producer_id}, "
            f"producer_epoch={self.producer_epoch}, base_sequence={self.base_sequence})"
        )


def first_batch_size(buf):
    """Bytes the first batch in ``buf`` occupies according to its length field.

    ``None`` when ``buf`` is too short to hold the length field (fewer than 12 bytes).
    """
    if len(buf) < LOG_OVERHEAD:
        return None
    (_base_offset, length) = _LOG_HEADER.unpack_from(buf, 0)
    return LOG_OVERHEAD + int(length)


@cython.auto_pickle(False)
cdef class _BatchIterator:
    """What :func:`iter_batches` returns: behaves like the pure decoder's generator (lazy
    start, finished for good after an error or the end)."""

    cdef object _src
    cdef object _buf
    cdef object _check_crcs
    cdef object _topic
    cdef object _partition
    cdef Py_ssize_t _pos
    cdef bint _started
    cdef bint _done

    def __iter__(self):
        return self

    def __next__(self):
        if self._done:
            raise StopIteration
        try:
            batch = self._advance()
        except BaseException:
            self._finish()
            raise
        if batch is None:
            self._finish()
            raise StopIteration
        return batch

    cdef void _finish(self) noexcept:
        self._done = True
        self._src = None
        self._buf = None

    cdef object _advance(self):
        cdef Py_buffer view
        cdef const uint8_t* p
        cdef Py_ssize_t n, pos, end
        cdef int64_t base_offset
        cdef int32_t length
        cdef uint32_t crc, computed
        cdef unsigned int magic
        cdef int attributes
        cdef RecordBatch batch
        if not self._started:
            self._started = True
            buf = self._src
            self._src = None
            if not isinstance(buf, memoryview):
                buf = memoryview(buf)
            if not buf.c_contiguous:
                buf = memoryview(buf.tobytes())
            elif buf.format != "B" or buf.ndim != 1:
                buf = buf.cast("B")
            self._buf = buf
        PyObject_GetBuffer(self._buf, &view, PyBUF_SIMPLE)
        try:
            p = <const uint8_t*>view.buf
            n = view.len
            pos = self._pos
            if n - pos < LOG_OVERHEAD:
                return None
            base_offset = <int64_t>_be64(p + pos)
            length = <int32_t>_be32(p + pos + 8)
            if n - pos > MAGIC_OFFSET:
                magic = p[pos + MAGIC_OFFSET]
                if magic != 2:
                    if magic == 0 or magic == 1:
                        message = (
                            f"legacy message format (magic v{magic}) is not supported; kaflux reads magic v2"
                        )
                    else:
                        message = f"unknown magic byte {magic}"
                    raise CorruptRecordError(
                        message, topic=self._topic, partition=self._partition, offset=base_offset
                    )
            if length < MIN_BATCH_LENGTH:
                raise CorruptRecordError(
                    f"batch length {length} is smaller than the {MIN_BATCH_LENGTH}-byte v2 batch header",
                    topic=self._topic,
                    partition=self._partition,
                    offset=base_offset,
                )
            end = pos + LOG_OVERHEAD + length
            if end > n:
                return None  # truncated trailing batch (fetch size limit): not an error
            crc = _be32(p + pos + CRC_OFFSET)
            if self._check_crcs:
                computed = kx_crc32c(0, p + pos + ATTRIBUTES_OFFSET, <size_t>(end - pos - ATTRIBUTES_OFFSET))
                if computed != crc:
                    raise CorruptRecordError(
                        f"CRC-32C mismatch: batch says 0x{crc:08x}, data gives 0x{computed:08x}",
                        topic=self._topic,
                        partition=self._partition,
                        offset=base_offset,
                    )
            batch = RecordBatch.__new__(RecordBatch)
            batch._buf = PySequence_GetSlice(self._buf, pos, end)
            batch.base_offset = base_offset
            batch.batch_length = length
            batch.partition_leader_epoch = <int32_t>_be32(p + pos + 12)
            batch.magic = <signed char>p[pos + MAGIC_OFFSET]
            batch.crc = crc
            batch._set_attributes(_be16(p + pos + ATTRIBUTES_OFFSET))
            batch.last_offset_delta = <int32_t>_be32(p + pos + 23)
            batch.base_timestamp = <int64_t>_be64(p + pos + 27)
            batch.max_timestamp = <int64_t>_be64(p + pos + 35)
            batch.producer_id = <int64_t>_be64(p + pos + 43)
            batch.producer_epoch = _be16(p + pos + 51)
            batch.base_sequence = <int32_t>_be32(p + pos + 53)
            batch.record_count = <int32_t>_be32(p + pos + 57)
            batch.topic = self._topic
            batch.partition = self._partition
            if batch.compression > MAX_CODEC:
                raise batch.corrupt(f"unknown compression codec id {batch.compression}")
            if batch.record_count < 0:
                raise batch.corrupt(f"negative record count {batch.record_count}")
            self._pos = end
            return batch
        finally:
            PyBuffer_Release(&view)


def iter_batches(buf, *, check_crcs=True, topic=None, partition=None):
    """Yield the complete v2 record batches in ``buf`` (see
    :func:`kaflux.records.batch_decoder.iter_batches`, which this matches exactly).

    A truncated trailing batch ends the iteration silently; malformed data raises
    :class:`CorruptRecordError`.
    """
    cdef _BatchIterator it = _BatchIterator.__new__(_BatchIterator)
    it._src = buf
    it._check_crcs = check_crcs
    it._topic = topic
    it._partition = partition
    return it


# --- columnar decoding ------------------------------------------------------------------------

@cython.auto_pickle(False)
cdef class ColumnBuilder:
    """Accumulates the records of many batches as Arrow-layout column buffers, decoding
    straight from the batch bytes (no Python object per record).

    Same contract as :class:`kaflux.records.columns.ColumnBuilder` (see that module).
    """

    cdef _Col cols[N_COLS]
    cdef Py_ssize_t rows
    cdef Py_ssize_t headers
    cdef Py_ssize_t key_nulls
    cdef Py_ssize_t value_nulls
    cdef Py_ssize_t header_value_nulls

    def __cinit__(self):
        self._reset()

    def __dealloc__(self):
        cdef int i
        for i in range(N_COLS):
            Py_XDECREF(self.cols[i].obj)
            self.cols[i].obj = NULL

    cdef int _reset(self) except -1:
        cdef int i
        for i in range(N_COLS):
            storage = PyByteArray_FromStringAndSize(NULL, 256)
            Py_XDECREF(self.cols[i].obj)
            Py_INCREF(storage)
            self.cols[i].obj = <PyObject*>storage
            self.cols[i].p = PyByteArray_AS_STRING(storage)
            self.cols[i].size = 0
            self.cols[i].cap = 256
        for i in (C_TOPIC_OFF, C_KEY_OFF, C_VAL_OFF, C_HDR_OFF, C_HK_OFF, C_HV_OFF):
            _put_i32(&self.cols[i], 0)
        self.rows = self.headers = 0
        self.key_nulls = self.value_nulls = self.header_value_nulls = 0
        return 0

    cdef void _snapshot(self, _Snap* s) noexcept:
        cdef int i
        for i in range(N_COLS):
            s.sizes[i] = self.cols[i].size
        s.rows = self.rows
        s.headers = self.headers
        s.key_nulls = self.key_nulls
        s.value_nulls = self.value_nulls
        s.header_value_nulls = self.header_value_nulls

    cdef void _restore(self, _Snap* s) noexcept:
        cdef int i
        for i in range(N_COLS):
            self.cols[i].size = s.sizes[i]
        self.rows = s.rows
        self.headers = s.headers
        self.key_nulls = s.key_nulls
        self.value_nulls = s.value_nulls
        self.header_value_nulls = s.header_value_nulls

    def __len__(self):
        return self.rows

    @property
    def nbytes(self):
        """Bytes of the variable-size data (topic, key, value, header key and value)."""
        return (
            self.cols[C_TOPIC_DATA].size
            + self.cols[C_KEY_DATA].size
            + self.cols[C_VAL_DATA].size
            + self.cols[C_HK_DATA].size
            + self.cols[C_HV_DATA].size
        )

    def append_batch(self, batch, topic, partition, min_offset=INT64_MIN, max_records=sys.maxsize):
        """Decode ``batch`` and append its records from ``min_offset`` on, at most
        ``max_records`` of them; returns ``(appended, remaining, last_offset)``."""
        cdef RecordBatch b
        cdef _Sel sel
        cdef _Snap snap
        cdef Py_buffer view
        cdef Py_ssize_t pos
        cdef int st = 0
        cdef int codec
        check_append_arguments(partition, min_offset, max_records)
        topic_utf8 = topic.encode()
        if not isinstance(batch, RecordBatch):
            raise TypeError(f"expected a compiled-kernel RecordBatch, got {type(batch).__name__}")
        b = <RecordBatch>batch
        codec = b.compression
        sel.min_offset = min_offset
        sel.max_records = max_records if max_records < PY_SSIZE_T_MAX else PY_SSIZE_T_MAX
        sel.topic = PyBytes_AS_STRING(topic_utf8)
        sel.topic_len = len(topic_utf8)
        sel.partition = partition
        sel.timestamp_type = b.timestamp_type
        sel.skipping = True
        sel.overflow = False
        sel.appended = 0
        sel.remaining = 0
        sel.last_offset = 0
        data = b._payload(&pos)
        self._snapshot(&snap)
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        try:
            _precheck(view.len, pos, view.len, b.record_count)
            st = _decode(
                <const uint8_t*>view.buf,
                view.len,
                pos,
                view.len,
                b.record_count,
                b.base_offset,
                b.base_timestamp,
                b.timestamp_type == 1,
                b.max_timestamp,
                None,
                self,
                &sel,
            )
        except RecordFormatError as exc:
            self._restore(&snap)
            where = f" ({codec_name(codec)}-compressed batch)" if codec else ""
            raise b.corrupt(f"{exc}{where}") from exc
        except BaseException:
            self._restore(&snap)
            raise
        finally:
            PyBuffer_Release(&view)
        if st == FALLBACK:
            self._restore(&snap)
            return self._append_records(b, topic_utf8, partition, min_offset, max_records)
        if sel.overflow:
            self._restore(&snap)
            raise OverflowError(OVERFLOW_MESSAGE)
        return sel.appended, sel.remaining, sel.last_offset if sel.appended else None

    cdef object _append_records(self, RecordBatch batch, bytes topic_utf8, partition, min_offset, max_records):
        """The slow path (what the pure builder does), for batches whose values need
        integers beyond 64 bits: decode to Records, check ranges, append them."""
        cdef _Snap snap
        cdef int64_t offset, timestamp
        cdef Py_ssize_t size, i, count, end, h
        cdef const char* text
        cdef _Col* cols = self.cols
        records = batch.records()
        for record in records:
            offset_obj, timestamp_obj = record[0], record[1]
            if not (_as_i64(offset_obj, &offset) and _as_i64(timestamp_obj, &timestamp)):
                raise batch.corrupt(out_of_range_message(offset_obj, timestamp_obj))
        count = len(records)
        i = 0
        while i < count and records[i][0] < min_offset:
            i += 1
        end = min(count, i + max_records)
        self._snapshot(&snap)
        try:
            for record in records[i:end]:
                _put_i64(&cols[C_OFFSET], record[0])
                _put_i64(&cols[C_TIMESTAMP], record[1])
                _put_i32(&cols[C_TTYPE], batch.timestamp_type)
                _put_i32(&cols[C_PARTITION], partition)
                _put_data(&cols[C_TOPIC_DATA], &cols[C_TOPIC_OFF], PyBytes_AS_STRING(topic_utf8), len(topic_utf8))
                key = record[2]
                if key is None:
                    _put_bit(&cols[C_KEY_VALID], self.rows, False)
                    _put_i32(&cols[C_KEY_OFF], <int32_t>cols[C_KEY_DATA].size)
                    self.key_nulls += 1
                else:
                    _put_bit(&cols[C_KEY_VALID], self.rows, True)
                    _put_data(&cols[C_KEY_DATA], &cols[C_KEY_OFF], PyBytes_AS_STRING(key), len(key))
                value = record[3]
                if value is None:
                    _put_bit(&cols[C_VAL_VALID], self.rows, False)
                    _put_i32(&cols[C_VAL_OFF], <int32_t>cols[C_VAL_DATA].size)
                    self.value_nulls += 1
                else:
                    _put_bit(&cols[C_VAL_VALID], self.rows, True)
                    _put_data(&cols[C_VAL_DATA], &cols[C_VAL_OFF], PyBytes_AS_STRING(value), len(value))
                for header_key, header_value in record[4]:
                    text = PyUnicode_AsUTF8AndSize(header_key, &size)
                    _put_data(&cols[C_HK_DATA], &cols[C_HK_OFF], text, size)
                    if header_value is None:
                        _put_bit(&cols[C_HV_VALID], self.headers, False)
                        _put_i32(&cols[C_HV_OFF], <int32_t>cols[C_HV_DATA].size)
                        self.header_value_nulls += 1
                    else:
                        _put_bit(&cols[C_HV_VALID], self.headers, True)
                        _put_data(
                            &cols[C_HV_DATA], &cols[C_HV_OFF], PyBytes_AS_STRING(header_value), len(header_value)
                        )
                    self.headers += 1
                _put_i32(&cols[C_HDR_OFF], <int32_t>self.headers)
                self.rows += 1
                if (
                    cols[C_TOPIC_DATA].size > INT32_MAX
                    or cols[C_KEY_DATA].size > INT32_MAX
                    or cols[C_VAL_DATA].size > INT32_MAX
                    or cols[C_HK_DATA].size > INT32_MAX
                    or cols[C_HV_DATA].size > INT32_MAX
                    or self.headers > INT32_MAX
                ):
                    raise OverflowError(OVERFLOW_MESSAGE)
        except BaseException:
            self._restore(&snap)
            raise
        return end - i, count - end, records[end - 1][0] if end > i else None

    cdef object _take(self, int index, bint bitmap, Py_ssize_t bits):
        """Column ``index`` as an exact-size bytearray (bitmaps: bits past ``bits`` cleared)."""
        cdef _Col* c = &self.cols[index]
        cdef object storage = <object>c.obj
        if bitmap and bits & 7:
            (<unsigned char*>c.p)[c.size - 1] &= <unsigned char>((1 << (bits & 7)) - 1)
        PyByteArray_Resize(storage, c.size)
        return storage

    def finish(self):
        """The columns of everything appended so far (a RecordColumns); the builder starts
        over empty."""
        columns = RecordColumns(
            num_rows=self.rows,
            offset=self._take(C_OFFSET, False, 0),
            timestamp=self._take(C_TIMESTAMP, False, 0),
            timestamp_type=self._take(C_TTYPE, False, 0),
            partition=self._take(C_PARTITION, False, 0),
            topic_offsets=self._take(C_TOPIC_OFF, False, 0),
            topic_data=self._take(C_TOPIC_DATA, False, 0),
            key_validity=self._take(C_KEY_VALID, True, self.rows) if self.key_nulls else None,
            key_null_count=self.key_nulls,
            key_offsets=self._take(C_KEY_OFF, False, 0),
            key_data=self._take(C_KEY_DATA, False, 0),
            value_validity=self._take(C_VAL_VALID, True, self.rows) if self.value_nulls else None,
            value_null_count=self.value_nulls,
            value_offsets=self._take(C_VAL_OFF, False, 0),
            value_data=self._take(C_VAL_DATA, False, 0),
            header_offsets=self._take(C_HDR_OFF, False, 0),
            header_count=self.headers,
            header_key_offsets=self._take(C_HK_OFF, False, 0),
            header_key_data=self._take(C_HK_DATA, False, 0),
            header_value_validity=(
                self._take(C_HV_VALID, True, self.headers) if self.header_value_nulls else None
            ),
            header_value_null_count=self.header_value_nulls,
            header_value_offsets=self._take(C_HV_OFF, False, 0),
            header_value_data=self._take(C_HV_DATA, False, 0),
        )
        self._reset()
        return columns
