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
from kaflux.records import types as _types
from kaflux.records.columns import (
    OVERFLOW_MESSAGE,
    RecordColumns,
    arrow_schema,
    check_append_arguments,
    check_record_range,
)
from kaflux.records.compression import codec_name, decompress_view
from kaflux.records.consumer_record import check_record_context as _check_record_context
from kaflux.records.consumer_record import consumer_records_from as _pure_consumer_records_from
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


cdef inline int _bit_valid(_Col* c, Py_ssize_t nulls, Py_ssize_t row) except -1:
    """Row ``row`` of a validity bitmap is valid. Until a column's first null its bitmap is
    not written at all (it would be all ones, and finish() leaves it out)."""
    if nulls:
        return _put_bit(c, row, True)
    return 0


cdef int _bit_null(_Col* c, Py_ssize_t nulls, Py_ssize_t row) except -1:
    """Row ``row`` is null; the column's first null first writes the bits of the rows before
    it (all valid) -- until then its bitmap is empty."""
    cdef Py_ssize_t full
    if nulls == 0 and row > 0:
        full = row >> 3
        _col_reserve(c, full + 1)
        memset(c.p, 0xFF, full)
        c.size = full
        if row & 7:
            c.p[full] = <char>((1 << (row & 7)) - 1)
            c.size = full + 1
    return _put_bit(c, row, False)


cdef struct _Sel:
    # inputs
    int64_t min_offset
    Py_ssize_t max_records
    bint stop_when_full  # columns: stop decoding once max_records were appended
    const char* topic
    Py_ssize_t topic_len
    PyObject* topic_obj  # ConsumerRecords: the topic (borrowed)
    PyObject* epoch_obj  # ConsumerRecords: the leader epoch (borrowed)
    int32_t partition
    int32_t timestamp_type
    # outputs
    bint skipping  # still inside the leading records below min_offset
    bint overflow  # a column outgrew int32 offsets: stop appending, raise at the end
    Py_ssize_t appended
    Py_ssize_t remaining
    int64_t last_offset
    Py_ssize_t walked  # records decoded
    Py_ssize_t end_pos  # where the next record starts
    bint fallback  # RecordBatch._run: _decode returned FALLBACK


cdef inline void _sel_init(_Sel* s, int64_t min_offset, Py_ssize_t max_records) noexcept:
    s.min_offset = min_offset
    s.max_records = max_records
    s.stop_when_full = False
    s.topic = NULL
    s.topic_len = 0
    s.topic_obj = NULL
    s.epoch_obj = NULL
    s.partition = 0
    s.timestamp_type = 0
    s.skipping = True
    s.overflow = False
    s.appended = 0
    s.remaining = 0
    s.last_offset = 0
    s.walked = 0
    s.end_pos = 0
    s.fallback = False


cdef int _put_constants(_Col* cols, Py_ssize_t rows, _Sel* sel) except -1:
    """The columns that are the same for all rows of a batch (timestamp type, partition,
    topic), for the ``rows`` rows just appended."""
    cdef Py_ssize_t i
    cdef int32_t end
    cdef _Col* ttype = &cols[C_TTYPE]
    cdef _Col* partition = &cols[C_PARTITION]
    cdef _Col* data = &cols[C_TOPIC_DATA]
    cdef _Col* offsets = &cols[C_TOPIC_OFF]
    _col_reserve(ttype, 4 * rows)
    _col_reserve(partition, 4 * rows)
    _col_reserve(data, sel.topic_len * rows)
    _col_reserve(offsets, 4 * rows)
    for i in range(rows):
        memcpy(ttype.p + ttype.size + 4 * i, &sel.timestamp_type, 4)
        memcpy(partition.p + partition.size + 4 * i, &sel.partition, 4)
        memcpy(data.p + data.size, sel.topic, sel.topic_len)
        data.size += sel.topic_len
        end = <int32_t>data.size  # (truncated past 2 GiB; the caller then raises OverflowError)
        memcpy(offsets.p + offsets.size, &end, 4)
        offsets.size += 4
    ttype.size += 4 * rows
    partition.size += 4 * rows
    return 0


cdef struct _Snap:
    Py_ssize_t sizes[N_COLS]
    Py_ssize_t rows
    Py_ssize_t headers
    Py_ssize_t key_nulls
    Py_ssize_t value_nulls
    Py_ssize_t header_value_nulls


# --- consumer records ---------------------------------------------------------------------------

#: What a record without headers compares as (never handed out, so never changed).
cdef list _NO_HEADERS = []


cdef inline bint _atomic(object value) noexcept:
    """Whether ``value`` holds no references (so a record holding only such values cannot be
    part of a reference cycle)."""
    return value is None or type(value) is bytes or type(value) is str or type(value) is int


@cython.freelist(256)
cdef class ConsumerRecord:
    """One record as the consumer returns it (see
    :class:`kaflux.records.consumer_record.ConsumerRecord`, the pure twin it matches).

    Built by :meth:`RecordBatch.consumer_records` straight from the batch bytes: the key
    and value bytes are its only companions; offset and timestamp are stored as C integers,
    an absent header list is made on first access, and a record holding nothing but
    strings, bytes, integers and None is not tracked by the garbage collector (storing
    anything else in it makes it tracked again).
    """

    cdef object _topic
    cdef object _key
    cdef object _value
    cdef object _headers  # None: no headers (an empty list is made when asked for)
    cdef object _leader_epoch
    cdef object _delivery_count  # share groups (KIP-932); None for a plain consumer
    cdef public int64_t offset
    cdef public int64_t timestamp
    cdef public int32_t partition
    cdef public int32_t timestamp_type

    def __init__(
        self, topic, partition, offset, timestamp, timestamp_type, key, value, headers, leader_epoch,
        delivery_count=None,
    ):
        self._topic = topic
        self.partition = partition
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self._key = key
        self._value = value
        self._headers = headers
        self._leader_epoch = leader_epoch
        self._delivery_count = delivery_count

    cdef inline void _holds(self, object value) noexcept:
        if not _atomic(value) and not PyObject_GC_IsTracked(self):
            PyObject_GC_Track(self)

    @property
    def topic(self):
        return self._topic

    @topic.setter
    def topic(self, value):
        self._holds(value)
        self._topic = value

    @property
    def key(self):
        return self._key

    @key.setter
    def key(self, value):
        self._holds(value)
        self._key = value

    @property
    def value(self):
        return self._value

    @value.setter
    def value(self, value):
        self._holds(value)
        self._value = value

    @property
    def headers(self):
        """``(key, value)`` pairs: a list, empty when the record has none."""
        if self._headers is None:
            self._holds([])
            self._headers = []
        return self._headers

    @headers.setter
    def headers(self, value):
        self._holds(value)
        self._headers = value

    @property
    def leader_epoch(self):
        return self._leader_epoch

    @leader_epoch.setter
    def leader_epoch(self, value):
        self._holds(value)
        self._leader_epoch = value

    @property
    def delivery_count(self):
        return self._delivery_count

    @delivery_count.setter
    def delivery_count(self, value):
        self._holds(value)
        self._delivery_count = value

    @property
    def topic_partition(self):
        return TopicPartition(self._topic, self.partition)

    def __repr__(self):
        return (
            f"ConsumerRecord(topic={self._topic!r}, partition={self.partition}, offset={self.offset}, "
            f"timestamp={self.timestamp}, key={self._key!r}, value={self._value!r})"
        )

    def __eq__(self, other):
        cdef ConsumerRecord o
        if not isinstance(other, ConsumerRecord):
            return NotImplemented
        o = <ConsumerRecord>other
        return bool(
            (_NO_HEADERS if self._headers is None else self._headers)
            == (_NO_HEADERS if o._headers is None else o._headers)
            and self._key == o._key
            and self._leader_epoch == o._leader_epoch
            and self._delivery_count == o._delivery_count
            and self.offset == o.offset
            and self.partition == o.partition
            and self.timestamp == o.timestamp
            and self.timestamp_type == o.timestamp_type
            and self._topic == o._topic
            and self._value == o._value
        )

    def __ne__(self, other):
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = None

    def __reduce__(self):
        return (
            ConsumerRecord,
            (
                self._topic,
                self.partition,
                self.offset,
                self.timestamp,
                self.timestamp_type,
                self._key,
                self._value,
                self.headers,
                self._leader_epoch,
                self._delivery_count,
            ),
        )


cdef list _consumer_records_slow(RecordBatch batch, topic, partition, leader_epoch, min_offset):
    """consumer_records() for batches whose values need integers beyond 64 bits: what the
    pure kernel does (decode Records, check their range, build the ConsumerRecords)."""
    return _pure_consumer_records_from(batch, batch.records(), topic, partition, leader_epoch, min_offset, ConsumerRecord)


# --- the record kernel ------------------------------------------------------------------------

cdef int _precheck(Py_ssize_t n, int64_t pos, int64_t end, int64_t count) except -1:
    if pos < 0 or end > n or pos > end:
        raise RecordFormatError(f"record range {pos}..{end} is outside the {n}-byte buffer")
    if count < 0:
        raise RecordFormatError(f"negative record count {count}")
    if count > (end - pos) // MIN_RECORD_SIZE:
        raise RecordFormatError(f"record count {count} cannot fit in {end - pos} bytes")
    return 0


cdef enum:
    # what _decode does with the records it decodes
    M_RECORDS = 0  # fill ``out`` (``count`` empty slots) with Records
    M_CONSUMER = 1  # fill ``out`` with ConsumerRecords of the records from sel.min_offset on
    M_COLUMNS = 2  # append the records ``sel`` selects to a ColumnBuilder
    M_VALIDATE = 3  # only check the records (the columns path with nothing to append)


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
    int mode,
    list out,
    ColumnBuilder cb,
    _Sel* sel,
) except -1:
    """Decodes ``count`` records from p[pos:end] (after _precheck), reading nothing outside
    p[0:n] -- like the pure kernel, whose reads are bounded by len(data) only.

    ``mode`` says what becomes of them (see M_RECORDS ...). In M_COLUMNS with
    ``sel.stop_when_full`` it stops once ``sel.max_records`` records were appended (data
    already validated: resuming a cursor); otherwise it decodes all ``count`` and checks
    that they end at ``end``. ``sel.walked`` and ``sel.end_pos`` tell how far it went.
    Returns 0, or FALLBACK when a value needs integers beyond 64 bits; raises
    RecordFormatError with the pure kernel's messages on malformed data.
    """
    cdef Py_ssize_t r, h, start, rec_end, avail, kl, i, beyond = n + 1
    cdef int64_t length, ts_delta, offset_delta, size, header_count, offset, timestamp
    cdef int st
    cdef bint col = mode >= M_COLUMNS
    cdef bint take = False  # columns: append this record
    cdef bint make = mode == M_RECORDS  # objects: build this record
    cdef object key = None, value = None, headers = None, header_key = None, header_value = None
    cdef ConsumerRecord crec
    cdef _Col* cols = NULL
    # header key cache (object modes): raw key bytes -> str, for the batch's first distinct keys
    cdef const uint8_t* cache_ptr[KEY_CACHE_SIZE]
    cdef Py_ssize_t cache_len[KEY_CACHE_SIZE]
    cdef int cache_n = 0
    cdef list cache_keys = []
    if mode == M_COLUMNS:
        cols = cb.cols

    sel.walked = 0
    for r in range(count):
        if sel.stop_when_full and (sel.appended >= sel.max_records or sel.overflow):
            break
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

        if mode == M_CONSUMER:
            if sel.skipping and offset < sel.min_offset:
                make = False
            else:
                sel.skipping = False
                make = True
        elif col:
            if sel.skipping and offset < sel.min_offset:
                take = False
            else:
                sel.skipping = False
                take = sel.appended < sel.max_records and not sel.overflow
                if not take:
                    sel.remaining += 1
            if take:  # (timestamp type, partition and topic: for all rows at the end)
                _put_i64(&cols[C_OFFSET], offset)
                _put_i64(&cols[C_TIMESTAMP], timestamp)

        # key
        start = pos
        st = _varint(p, n, &pos, &size)
        if st:
            return _varint_fail(st, start)
        if size >= 0:
            if size <= n - pos:
                if make:
                    key = PyBytes_FromStringAndSize(<const char*>p + pos, <Py_ssize_t>size)
                elif take:
                    _bit_valid(&cols[C_KEY_VALID], cb.key_nulls, cb.rows)
                    _put_data(&cols[C_KEY_DATA], &cols[C_KEY_OFF], p + pos, <Py_ssize_t>size)
                pos += <Py_ssize_t>size
            else:
                pos = beyond  # the next read fails, as in the pure kernel
        elif size == -1:
            if make:
                key = None
            elif take:
                _bit_null(&cols[C_KEY_VALID], cb.key_nulls, cb.rows)
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
                if make:
                    value = PyBytes_FromStringAndSize(<const char*>p + pos, <Py_ssize_t>size)
                elif take:
                    _bit_valid(&cols[C_VAL_VALID], cb.value_nulls, cb.rows)
                    _put_data(&cols[C_VAL_DATA], &cols[C_VAL_OFF], p + pos, <Py_ssize_t>size)
                pos += <Py_ssize_t>size
            else:
                pos = beyond
        elif size == -1:
            if make:
                value = None
            elif take:
                _bit_null(&cols[C_VAL_VALID], cb.value_nulls, cb.rows)
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
            if make:
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
                if make:
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
                        if make:
                            header_value = PyBytes_FromStringAndSize(
                                <const char*>p + pos, <Py_ssize_t>size
                            )
                            pair = kx_pair(header_key, header_value)
                            Py_INCREF(pair)
                            PyList_SET_ITEM(headers, h, pair)
                        elif take:
                            _bit_valid(&cols[C_HV_VALID], cb.header_value_nulls, cb.headers)
                            _put_data(&cols[C_HV_DATA], &cols[C_HV_OFF], p + pos, <Py_ssize_t>size)
                            cb.headers += 1
                        pos += <Py_ssize_t>size
                    else:
                        # an error follows: the next read fails or the record end mismatches
                        # (an unset list slot is fine: the list is dropped with the error)
                        pos = beyond
                elif size == -1:
                    if make:
                        pair = kx_pair(header_key, None)
                        Py_INCREF(pair)
                        PyList_SET_ITEM(headers, h, pair)
                    elif take:
                        _bit_null(&cols[C_HV_VALID], cb.header_value_nulls, cb.headers)
                        _put_i32(&cols[C_HV_OFF], <int32_t>cols[C_HV_DATA].size)
                        cb.header_value_nulls += 1
                        cb.headers += 1
                else:
                    raise RecordFormatError(f"negative header value length {size}")
        elif mode == M_RECORDS:
            headers = []
        else:
            headers = None  # a ConsumerRecord makes its empty list when asked for it
        if pos != rec_end:
            raise RecordFormatError(f"record occupies {length} bytes but its fields end elsewhere")

        if mode == M_RECORDS:
            record = kx_make_record(_Record, offset, timestamp, key, value, headers)
            Py_INCREF(record)
            PyList_SET_ITEM(out, r, record)
        elif make:
            crec = ConsumerRecord.__new__(ConsumerRecord)
            crec._topic = <object>sel.topic_obj
            crec._key = key
            crec._value = value
            crec._headers = headers
            crec._leader_epoch = <object>sel.epoch_obj
            crec.offset = offset
            crec.timestamp = timestamp
            crec.partition = sel.partition
            crec.timestamp_type = sel.timestamp_type
            if headers is None:
                # holds only str, bytes, int and None: it cannot be part of a reference
                # cycle, so the garbage collector need not know it (setters re-track it)
                PyObject_GC_UnTrack(crec)
            Py_INCREF(crec)
            PyList_SET_ITEM(out, sel.appended, crec)
            sel.appended += 1
        elif take:
            _put_i32(&cols[C_HDR_OFF], <int32_t>cb.headers)
            cb.rows += 1
            sel.appended += 1
            sel.last_offset = offset
            if (
                cols[C_KEY_DATA].size > INT32_MAX
                or cols[C_VAL_DATA].size > INT32_MAX
                or cols[C_HK_DATA].size > INT32_MAX
                or cols[C_HV_DATA].size > INT32_MAX
                or cb.headers > INT32_MAX
            ):
                sel.overflow = True
        sel.walked += 1
    sel.end_pos = pos
    if mode == M_COLUMNS and sel.appended:
        _put_constants(cols, sel.appended, sel)
        if cols[C_TOPIC_DATA].size > INT32_MAX:
            sel.overflow = True
    if sel.walked == count and pos != end:
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
    cdef _Sel sel
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
    _sel_init(&sel, INT64_MIN, 0)
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
        M_RECORDS,
        out,
        None,
        &sel,
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

    cdef list _run(self, object data, Py_ssize_t pos, int mode, ColumnBuilder cb, _Sel* sel):
        """Runs _decode over all records of the batch in ``data[pos:]`` (its payload); in
        the object modes returns the list it filled (``record_count`` slots), else None.
        Sets ``sel.fallback`` when the pure decoder must decide. Malformed data raises
        CorruptRecordError locating the batch."""
        cdef Py_buffer view
        cdef int codec = self.compression
        cdef list out = None
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        try:
            _precheck(view.len, pos, view.len, self.record_count)
            if mode == M_RECORDS or mode == M_CONSUMER:
                out = PyList_New(self.record_count)  # after _precheck bounded the count
            sel.fallback = _decode(
                <const uint8_t*>view.buf,
                view.len,
                pos,
                view.len,
                self.record_count,
                self.base_offset,
                self.base_timestamp,
                self.timestamp_type == 1,
                self.max_timestamp,
                mode,
                out,
                cb,
                sel,
            ) == FALLBACK
            return out
        except RecordFormatError as exc:
            where = f" ({codec_name(codec)}-compressed batch)" if codec else ""
            raise self.corrupt(f"{exc}{where}") from exc
        finally:
            PyBuffer_Release(&view)

    def records(self):
        """Decompress (once per call) and decode all records of the batch."""
        cdef Py_ssize_t pos
        cdef list out
        cdef _Sel sel
        data = self._payload(&pos)
        _sel_init(&sel, INT64_MIN, 0)
        out = self._run(data, pos, M_RECORDS, None, &sel)
        if sel.fallback:
            try:
                payload = bytes(data)
                out = _pure_decode_records(
                    payload,
                    pos,
                    len(payload),
                    self.record_count,
                    self.base_offset,
                    self.base_timestamp,
                    self._log_append_time(),
                )
            except RecordFormatError as exc:
                where = f" ({codec_name(self.compression)}-compressed batch)" if self.compression else ""
                raise self.corrupt(f"{exc}{where}") from exc
        return out

    def consumer_records(self, topic, partition, leader_epoch, min_offset=INT64_MIN):
        """Decompress and decode all records of the batch (see
        :meth:`kaflux.records.batch_decoder.RecordBatch.consumer_records`, which this
        matches exactly): the ConsumerRecords of those from the first whose offset is
        ``min_offset`` or more on."""
        cdef Py_ssize_t pos
        cdef list out
        cdef _Sel sel
        check_append_arguments(partition, min_offset, 0)
        _check_record_context(topic, leader_epoch)
        data = self._payload(&pos)
        _sel_init(&sel, min_offset, 0)
        sel.topic_obj = <PyObject*>topic
        sel.epoch_obj = <PyObject*>leader_epoch
        sel.partition = partition
        sel.timestamp_type = self.timestamp_type
        # Every object the garbage collector could track counts towards its next collection,
        # even one untracked at once: without this, decoding a batch of 10,000 records would
        # run a collection every 700 records. With it, at most one runs afterwards. (No other
        # thread runs meanwhile: the GIL is held throughout.)
        gc_was_enabled = PyGC_Disable()
        try:
            out = self._run(data, pos, M_CONSUMER, None, &sel)
        finally:
            if gc_was_enabled:
                PyGC_Enable()
        if sel.fallback:
            return _consumer_records_slow(self, topic, partition, leader_epoch, min_offset)
        if sel.appended < self.record_count:
            PyList_SetSlice(out, sel.appended, self.record_count, NULL)
        return out

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
cdef class BatchCursor:
    """A batch whose records a consumer takes a few at a time (see
    :class:`kaflux.records.columns.BatchCursor`, which this matches): made once per batch, it
    decompresses the batch and checks all its records, so that every later
    ``ColumnBuilder.append_cursor`` or :meth:`consumer_records` only builds what it takes,
    resuming where the last one stopped."""

    cdef readonly RecordBatch batch
    cdef object _data  # the payload: the batch bytes, or the codec's output buffer
    cdef Py_ssize_t _pos  # where the next record starts in _data
    cdef Py_ssize_t _index  # records consumed
    cdef list _records  # only for batches that need integers beyond 64 bits: their Records

    def __init__(self, batch):
        cdef RecordBatch b
        cdef Py_ssize_t pos
        cdef _Sel sel
        if not isinstance(batch, RecordBatch):
            raise TypeError(f"expected a compiled-kernel RecordBatch, got {type(batch).__name__}")
        b = <RecordBatch>batch
        data = b._payload(&pos)
        _sel_init(&sel, INT64_MIN, 0)
        b._run(data, pos, M_VALIDATE, None, &sel)
        if sel.fallback:
            records = b.records()
            check_record_range(b, records)
            self._records = records
        else:
            self._data = data
            self._pos = pos
        self.batch = b
        self._index = 0

    @property
    def remaining(self):
        """Records of the batch not yet taken or skipped."""
        return self.batch.record_count - self._index

    def consumer_records(self, topic, partition, leader_epoch, min_offset=INT64_MIN, max_records=sys.maxsize):
        """The ConsumerRecords of the cursor's next records: the leading ones whose offset is
        below ``min_offset`` are skipped, then up to ``max_records`` are taken (see
        :meth:`kaflux.records.columns.BatchCursor.consumer_records`)."""
        cdef RecordBatch b = self.batch
        cdef _Sel sel
        cdef Py_buffer view
        cdef Py_ssize_t i, count, end, slots
        cdef list out
        check_append_arguments(partition, min_offset, max_records)
        _check_record_context(topic, leader_epoch)
        if self._records is not None:
            records = self._records
            count = len(records)
            i = self._index
            while i < count and records[i][0] < min_offset:
                i += 1
            end = min(count, i + max_records)
            self._index = end
            ttype = b.timestamp_type
            return [
                ConsumerRecord(topic, partition, r[0], r[1], ttype, r[2], r[3], r[4], leader_epoch)
                for r in records[i:end]
            ]
        count = b.record_count - self._index
        slots = count if max_records >= count else max_records
        out = PyList_New(slots)
        _sel_init(&sel, min_offset, slots)
        sel.stop_when_full = True
        sel.topic_obj = <PyObject*>topic
        sel.epoch_obj = <PyObject*>leader_epoch
        sel.partition = partition
        sel.timestamp_type = b.timestamp_type
        PyObject_GetBuffer(self._data, &view, PyBUF_SIMPLE)
        gc_was_enabled = PyGC_Disable()  # see RecordBatch.consumer_records
        try:
            # validated when the cursor was made: this cannot fail or need the slow path
            _decode(
                <const uint8_t*>view.buf,
                view.len,
                self._pos,
                view.len,
                count,
                b.base_offset,
                b.base_timestamp,
                b.timestamp_type == 1,
                b.max_timestamp,
                M_CONSUMER,
                out,
                None,
                &sel,
            )
        finally:
            if gc_was_enabled:
                PyGC_Enable()
            PyBuffer_Release(&view)
        if sel.appended < slots:
            PyList_SetSlice(out, sel.appended, slots, NULL)
        self._pos = sel.end_pos
        self._index += sel.walked
        return out



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
        """Fresh, empty columns (the last ones were handed out), each allocated with the size
        the previous round needed: a consumer's polls are much alike, and growing a column
        from nothing again every time would copy its data several times over."""
        cdef int i
        cdef Py_ssize_t cap
        for i in range(N_COLS):
            cap = self.cols[i].size + 64 if self.cols[i].size > 192 else 256
            storage = PyByteArray_FromStringAndSize(NULL, cap)
            Py_XDECREF(self.cols[i].obj)
            Py_INCREF(storage)
            self.cols[i].obj = <PyObject*>storage
            self.cols[i].p = PyByteArray_AS_STRING(storage)
            self.cols[i].size = 0
            self.cols[i].cap = cap
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
        cdef Py_ssize_t pos
        check_append_arguments(partition, min_offset, max_records)
        topic_utf8 = topic.encode()
        if not isinstance(batch, RecordBatch):
            raise TypeError(f"expected a compiled-kernel RecordBatch, got {type(batch).__name__}")
        b = <RecordBatch>batch
        _sel_init(&sel, min_offset, max_records if max_records < PY_SSIZE_T_MAX else PY_SSIZE_T_MAX)
        sel.topic = PyBytes_AS_STRING(topic_utf8)
        sel.topic_len = len(topic_utf8)
        sel.partition = partition
        sel.timestamp_type = b.timestamp_type
        data = b._payload(&pos)
        self._snapshot(&snap)
        try:
            b._run(data, pos, M_COLUMNS, self, &sel)
        except BaseException:
            self._restore(&snap)
            raise
        if sel.fallback:
            self._restore(&snap)
            return self._append_records(b, topic_utf8, partition, min_offset, max_records)
        if sel.overflow:
            self._restore(&snap)
            raise OverflowError(OVERFLOW_MESSAGE)
        return sel.appended, sel.remaining, sel.last_offset if sel.appended else None

    cdef object _append_records(self, RecordBatch batch, bytes topic_utf8, partition, min_offset, max_records):
        """The slow path (what the pure builder does), for batches whose values need
        integers beyond 64 bits: decode to Records, check ranges, append them."""
        cdef Py_ssize_t i, count, end
        records = batch.records()
        check_record_range(batch, records)
        count = len(records)
        i = 0
        while i < count and records[i][0] < min_offset:
            i += 1
        end = min(count, i + max_records)
        self._append_list(records, i, end, topic_utf8, partition, batch.timestamp_type)
        return end - i, count - end, records[end - 1][0] if end > i else None

    def append_cursor(self, cursor, topic, partition, min_offset=INT64_MIN, max_records=sys.maxsize):
        """Append the next records of ``cursor`` (a BatchCursor of this kernel), skipping the
        leading ones whose offset is below ``min_offset``, at most ``max_records``; returns
        ``(appended, last_offset)`` (see :meth:`kaflux.records.columns.ColumnBuilder.append_cursor`)."""
        cdef BatchCursor c
        cdef RecordBatch b
        cdef _Sel sel
        cdef _Snap snap
        cdef Py_buffer view
        cdef Py_ssize_t i, count, end
        cdef int st = 0
        check_append_arguments(partition, min_offset, max_records)
        topic_utf8 = topic.encode()
        if not isinstance(cursor, BatchCursor):
            raise TypeError(f"expected a compiled-kernel BatchCursor, got {type(cursor).__name__}")
        c = <BatchCursor>cursor
        b = c.batch
        if c._records is not None:
            records = c._records
            count = len(records)
            i = c._index
            while i < count and records[i][0] < min_offset:
                i += 1
            end = min(count, i + max_records)
            self._append_list(records, i, end, topic_utf8, partition, b.timestamp_type)
            c._index = end
            return end - i, records[end - 1][0] if end > i else None
        _sel_init(&sel, min_offset, max_records if max_records < PY_SSIZE_T_MAX else PY_SSIZE_T_MAX)
        sel.stop_when_full = True
        sel.topic = PyBytes_AS_STRING(topic_utf8)
        sel.topic_len = len(topic_utf8)
        sel.partition = partition
        sel.timestamp_type = b.timestamp_type
        self._snapshot(&snap)
        PyObject_GetBuffer(c._data, &view, PyBUF_SIMPLE)
        try:
            # the cursor validated the batch: this cannot fail or need the slow path
            st = _decode(
                <const uint8_t*>view.buf,
                view.len,
                c._pos,
                view.len,
                b.record_count - c._index,
                b.base_offset,
                b.base_timestamp,
                b.timestamp_type == 1,
                b.max_timestamp,
                M_COLUMNS,
                None,
                self,
                &sel,
            )
        except BaseException:
            self._restore(&snap)
            raise
        finally:
            PyBuffer_Release(&view)
        if st == FALLBACK or sel.overflow:
            self._restore(&snap)
            if st == FALLBACK:  # pragma: no cover - excluded by the cursor's validation
                raise IllegalStateError("a validated batch needed the slow path")
            raise OverflowError(OVERFLOW_MESSAGE)
        c._pos = sel.end_pos
        c._index += sel.walked
        return sel.appended, sel.last_offset if sel.appended else None

    cdef int _append_list(
        self, list records, Py_ssize_t i, Py_ssize_t end, bytes topic_utf8, partition, int timestamp_type
    ) except -1:
        """Appends the Records ``records[i:end]`` (offsets and timestamps in int64 range),
        all or none."""
        cdef _Snap snap
        cdef Py_ssize_t size
        cdef const char* text
        cdef _Col* cols = self.cols
        self._snapshot(&snap)
        try:
            for record in records[i:end]:
                _put_i64(&cols[C_OFFSET], record[0])
                _put_i64(&cols[C_TIMESTAMP], record[1])
                _put_i32(&cols[C_TTYPE], timestamp_type)
                _put_i32(&cols[C_PARTITION], partition)
                _put_data(&cols[C_TOPIC_DATA], &cols[C_TOPIC_OFF], PyBytes_AS_STRING(topic_utf8), len(topic_utf8))
                key = record[2]
                if key is None:
                    _bit_null(&cols[C_KEY_VALID], self.key_nulls, self.rows)
                    _put_i32(&cols[C_KEY_OFF], <int32_t>cols[C_KEY_DATA].size)
                    self.key_nulls += 1
                else:
                    _bit_valid(&cols[C_KEY_VALID], self.key_nulls, self.rows)
                    _put_data(&cols[C_KEY_DATA], &cols[C_KEY_OFF], PyBytes_AS_STRING(key), len(key))
                value = record[3]
                if value is None:
                    _bit_null(&cols[C_VAL_VALID], self.value_nulls, self.rows)
                    _put_i32(&cols[C_VAL_OFF], <int32_t>cols[C_VAL_DATA].size)
                    self.value_nulls += 1
                else:
                    _bit_valid(&cols[C_VAL_VALID], self.value_nulls, self.rows)
                    _put_data(&cols[C_VAL_DATA], &cols[C_VAL_OFF], PyBytes_AS_STRING(value), len(value))
                for header_key, header_value in record[4]:
                    text = PyUnicode_AsUTF8AndSize(header_key, &size)
                    _put_data(&cols[C_HK_DATA], &cols[C_HK_OFF], text, size)
                    if header_value is None:
                        _bit_null(&cols[C_HV_VALID], self.header_value_nulls, self.headers)
                        _put_i32(&cols[C_HV_OFF], <int32_t>cols[C_HV_DATA].size)
                        self.header_value_nulls += 1
                    else:
                        _bit_valid(&cols[C_HV_VALID], self.header_value_nulls, self.headers)
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
        return 0

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


# --- Arrow export -------------------------------------------------------------------------------

cdef const void* _export_view(kx_export* e, object buf, Py_ssize_t need, str name) except? NULL:
    """A view of bytearray ``buf`` (None: NULL) held by ``e``, which must hold ``need`` bytes."""
    cdef Py_buffer* view
    if buf is None:
        return NULL
    view = &e.views[e.n_views]
    PyObject_GetBuffer(buf, view, PyBUF_SIMPLE)
    e.n_views += 1
    if view.len < need:
        raise ValueError(f"RecordColumns.{name} holds {view.len} bytes, fewer than the {need} its rows need")
    return view.buf


cdef int _check_offsets(const void* offsets, Py_ssize_t count, const void* data, Py_ssize_t data_len, str name) except -1:
    """The last of ``count + 1`` int32 offsets must lie within the data."""
    cdef int32_t last
    memcpy(&last, <const char*>offsets + 4 * count, 4)
    if last < 0 or last > data_len:
        raise ValueError(f"RecordColumns.{name} ends at {last}, outside its {data_len} bytes of data")
    return 0


def to_arrow(columns):
    """A ``pyarrow.RecordBatch`` over the buffers of ``columns``, without copying them (see
    :func:`kaflux.records.columns.to_arrow`, whose result this equals): the buffers go to
    pyarrow in one step through the Arrow C data interface, and stay referenced (and cannot
    be resized) until pyarrow lets go of them. ValueError when a buffer is shorter than the
    rows need."""
    import pyarrow as pa

    cdef kx_export* e
    cdef Py_ssize_t n = columns.num_rows
    cdef Py_ssize_t h = columns.header_count
    cdef const void* offset
    cdef const void* timestamp
    cdef const void* ttype
    cdef const void* partition
    cdef const void* topic_off
    cdef const void* topic_data
    cdef const void* key_valid
    cdef const void* key_off
    cdef const void* key_data
    cdef const void* val_valid
    cdef const void* val_off
    cdef const void* val_data
    cdef const void* hdr_off
    cdef const void* hk_off
    cdef const void* hk_data
    cdef const void* hv_valid
    cdef const void* hv_off
    cdef const void* hv_data
    cdef Py_ssize_t bits = (n + 7) // 8
    cdef Py_ssize_t header_bits = (h + 7) // 8
    schema = arrow_schema()
    if n < 0 or h < 0:
        raise ValueError("RecordColumns has a negative row or header count")
    e = kx_export_new()
    if e == NULL:
        raise MemoryError()
    try:
        offset = _export_view(e, columns.offset, 8 * n, "offset")
        timestamp = _export_view(e, columns.timestamp, 8 * n, "timestamp")
        ttype = _export_view(e, columns.timestamp_type, 4 * n, "timestamp_type")
        partition = _export_view(e, columns.partition, 4 * n, "partition")
        topic_off = _export_view(e, columns.topic_offsets, 4 * (n + 1), "topic_offsets")
        topic_data = _export_view(e, columns.topic_data, 0, "topic_data")
        _check_offsets(topic_off, n, topic_data, e.views[e.n_views - 1].len, "topic_offsets")
        key_valid = _export_view(e, columns.key_validity, bits, "key_validity")
        key_off = _export_view(e, columns.key_offsets, 4 * (n + 1), "key_offsets")
        key_data = _export_view(e, columns.key_data, 0, "key_data")
        _check_offsets(key_off, n, key_data, e.views[e.n_views - 1].len, "key_offsets")
        val_valid = _export_view(e, columns.value_validity, bits, "value_validity")
        val_off = _export_view(e, columns.value_offsets, 4 * (n + 1), "value_offsets")
        val_data = _export_view(e, columns.value_data, 0, "value_data")
        _check_offsets(val_off, n, val_data, e.views[e.n_views - 1].len, "value_offsets")
        hdr_off = _export_view(e, columns.header_offsets, 4 * (n + 1), "header_offsets")
        _check_offsets(hdr_off, n, NULL, h, "header_offsets")
        hk_off = _export_view(e, columns.header_key_offsets, 4 * (h + 1), "header_key_offsets")
        hk_data = _export_view(e, columns.header_key_data, 0, "header_key_data")
        _check_offsets(hk_off, h, hk_data, e.views[e.n_views - 1].len, "header_key_offsets")
        hv_valid = _export_view(e, columns.header_value_validity, header_bits, "header_value_validity")
        hv_off = _export_view(e, columns.header_value_offsets, 4 * (h + 1), "header_value_offsets")
        hv_data = _export_view(e, columns.header_value_data, 0, "header_value_data")
        _check_offsets(hv_off, h, hv_data, e.views[e.n_views - 1].len, "header_value_offsets")
        key_nulls = columns.key_null_count if key_valid != NULL else 0
        value_nulls = columns.value_null_count if val_valid != NULL else 0
        header_value_nulls = columns.header_value_null_count if hv_valid != NULL else 0
    except BaseException:
        kx_export_discard(e)
        raise
    # the record batch (a struct of the 8 columns), then each column, in the schema's order
    kx_export_array(e, 0, n, 0, 1, NULL, NULL, NULL, 1, 8)
    kx_export_array(e, 1, n, key_nulls, 3, key_valid, key_off, key_data, 0, 0)
    kx_export_array(e, 2, n, value_nulls, 3, val_valid, val_off, val_data, 0, 0)
    kx_export_array(e, 3, n, 0, 3, NULL, topic_off, topic_data, 0, 0)
    kx_export_array(e, 4, n, 0, 2, NULL, partition, NULL, 0, 0)
    kx_export_array(e, 5, n, 0, 2, NULL, offset, NULL, 0, 0)
    kx_export_array(e, 6, n, 0, 2, NULL, timestamp, NULL, 0, 0)
    kx_export_array(e, 7, n, 0, 2, NULL, ttype, NULL, 0, 0)
    kx_export_array(e, 8, n, 0, 2, NULL, hdr_off, NULL, 9, 1)  # headers: list of ...
    kx_export_array(e, 9, h, 0, 1, NULL, NULL, NULL, 10, 2)  # ... struct of key and value
    kx_export_array(e, 10, h, 0, 3, NULL, hk_off, hk_data, 0, 0)
    kx_export_array(e, 11, h, header_value_nulls, 3, hv_valid, hv_off, hv_data, 0, 0)
    try:
        return pa.RecordBatch._import_from_c(<uintptr_t>&e.arrays[0], schema)
    finally:
        if e.arrays[0].release != NULL:  # not taken over by pyarrow (it failed)
            e.arrays[0].release(&e.arrays[0])

