# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Encoding records for the producer, compiled. [pure]

The compiled twin of :mod:`kaflux.records.encode`: the same functions, the same bytes, the same
errors (the tests run both against one suite). See that module for what each function does.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, realloc
from libc.string cimport memcpy
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_SET_ITEM

from kaflux.records.definitions import BinaryColumn, Chunk, HeadersColumn, IntColumn

cdef extern from *:
    """
    #ifndef KAFLUX_ENCODE_SOURCE_SHA256
    #define KAFLUX_ENCODE_SOURCE_SHA256 ""
    #endif
    """
    const char* KAFLUX_ENCODE_SOURCE_SHA256

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object unicode, Py_ssize_t* size) except NULL
    bint PyBytes_Check(object o)
    bint PyUnicode_Check(object o)
    bint PyTuple_Check(object o)
    bint PyObject_IS_GC(object o)
    void PyObject_GC_UnTrack(void* o)
    void PyObject_GC_Track(void* o)
    int PyObject_GC_IsTracked(object o)
    object PyType_GenericAlloc(PyTypeObject* t, Py_ssize_t nitems)

SOURCE_SHA256 = KAFLUX_ENCODE_SOURCE_SHA256.decode("ascii")
KIND = "compiled"

__all__ = [
    "KIND",
    "BinaryColumn",
    "Chunk",
    "HeadersColumn",
    "IntColumn",
    "RecordsWriter",
    "call_deliveries",
    "encode_columns",
    "murmur2",
    "partition_for_key",
    "track",
    "untrack",
]

cdef uint32_t _M = 0x5BD1E995

# -- murmur2 ----------------------------------------------------------------------------------


cdef inline int32_t _murmur2(const uint8_t* data, Py_ssize_t length) noexcept nogil:
    cdef uint32_t h = <uint32_t>0x9747B28C ^ <uint32_t>length
    cdef Py_ssize_t end = length - (length & 3)
    cdef Py_ssize_t i = 0
    cdef uint32_t k
    while i < end:
        k = (<uint32_t>data[i]) | (<uint32_t>data[i + 1] << 8) | (<uint32_t>data[i + 2] << 16) | (
            <uint32_t>data[i + 3] << 24
        )
        k *= _M
        k ^= k >> 24
        k *= _M
        h = (h * _M) ^ k
        i += 4
    cdef Py_ssize_t rest = length & 3
    if rest == 3:
        h ^= <uint32_t>data[end + 2] << 16
    if rest >= 2:
        h ^= <uint32_t>data[end + 1] << 8
    if rest >= 1:
        h ^= <uint32_t>data[end]
        h *= _M
    h ^= h >> 13
    h *= _M
    h ^= h >> 15
    return <int32_t>h


def murmur2(bytes data not None):
    """Kafka's 32-bit murmur2 (seed 0x9747b28c), as a signed 32-bit int like Java's."""
    return _murmur2(<const uint8_t*>PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))


def partition_for_key(bytes key not None, int num_partitions):
    """The partition Java's default partitioner picks for ``key``."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    cdef int32_t h = _murmur2(<const uint8_t*>PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key))
    return (h & 0x7FFFFFFF) % num_partitions


# -- the cyclic garbage collector ------------------------------------------------------------


def untrack(object obj):
    """Take ``obj`` out of the cyclic garbage collector's lists (it is freed by its reference
    count alone). For the producer's record futures: kept by the hundred thousand, each full
    collection walked them all. Only for an object no reference cycle goes through."""
    if PyObject_IS_GC(obj):
        PyObject_GC_UnTrack(<PyObject*>obj)


def track(object obj):
    """Undo :func:`untrack` (nothing if ``obj`` is tracked already)."""
    if PyObject_IS_GC(obj) and not PyObject_GC_IsTracked(obj):
        PyObject_GC_Track(<PyObject*>obj)


# -- delivery callbacks ------------------------------------------------------------------------


cdef inline object _new4(PyTypeObject* t, object a, object b, object c, object d):
    """``tuple.__new__(t, (a, b, c, d))`` without the intermediate tuple."""
    cdef object made = PyType_GenericAlloc(t, 4)
    Py_INCREF(a)
    PyTuple_SET_ITEM(made, 0, a)
    Py_INCREF(b)
    PyTuple_SET_ITEM(made, 1, b)
    Py_INCREF(c)
    PyTuple_SET_ITEM(made, 2, c)
    Py_INCREF(d)
    PyTuple_SET_ITEM(made, 3, d)
    return made


def call_deliveries(
    list callbacks not None,
    type metadata_type not None,
    object topic,
    object partition,
    int64_t base_offset,
    int64_t log_append_time,
    object on_error,
):
    """The delivery callbacks of a batch written without error (see the pure twin)."""
    cdef Py_ssize_t i = 0
    cdef object index, timestamp, callback, offset
    cdef object append_time = log_append_time
    if len(callbacks) % 3:
        raise ValueError("callbacks must be (index, timestamp, callback) triples")
    if (
        not issubclass(metadata_type, tuple)
        or len(getattr(metadata_type, "_fields", ())) != 4
        or metadata_type.__basicsize__ != tuple.__basicsize__
    ):
        raise TypeError(f"metadata_type must be a NamedTuple of 4 fields, got {metadata_type!r}")
    cdef PyTypeObject* t = <PyTypeObject*>metadata_type
    while i + 2 < len(callbacks):
        index = callbacks[i]
        timestamp = callbacks[i + 1]
        callback = callbacks[i + 2]
        i += 3
        offset = base_offset + <int64_t>index if base_offset >= 0 else -1
        try:
            callback(_new4(t, topic, partition, offset, append_time if log_append_time >= 0 else timestamp), None)
        except Exception:
            on_error()


# -- varints and a growable buffer ------------------------------------------------------------


cdef inline int _varint_size(int64_t value) noexcept nogil:
    cdef uint64_t z = (<uint64_t>value << 1) ^ <uint64_t>(value >> 63)
    cdef int size = 1
    while z > 0x7F:
        z >>= 7
        size += 1
    return size


cdef inline uint8_t* _put_varint(uint8_t* p, int64_t value) noexcept nogil:
    cdef uint64_t z = (<uint64_t>value << 1) ^ <uint64_t>(value >> 63)
    while z > 0x7F:
        p[0] = <uint8_t>((z & 0x7F) | 0x80)
        p += 1
        z >>= 7
    p[0] = <uint8_t>z
    return p + 1


cdef struct Buf:
    uint8_t* data
    Py_ssize_t length
    Py_ssize_t capacity


cdef int _reserve(Buf* b, Py_ssize_t extra) except -1:
    cdef Py_ssize_t need = b.length + extra
    cdef Py_ssize_t capacity
    cdef uint8_t* grown
    if need <= b.capacity:
        return 0
    capacity = b.capacity * 2 if b.capacity else 256
    if capacity < need:
        capacity = need
    grown = <uint8_t*>realloc(b.data, capacity)
    if grown == NULL:
        raise MemoryError()
    b.data = grown
    b.capacity = capacity
    return 0


cdef inline uint8_t* _put_bytes(uint8_t* p, const uint8_t* data, Py_ssize_t length) noexcept nogil:
    p = _put_varint(p, length)
    if length:
        memcpy(p, data, length)
    return p + length


cdef inline Py_ssize_t _field_size(Py_ssize_t length) noexcept nogil:
    """A nullable bytes field: its length varint and its bytes (-1: null, one byte)."""
    if length < 0:
        return 1
    return _varint_size(length) + length


# -- one record at a time ------------------------------------------------------------------------


cdef _check_bytes(str what, object data):
    if data is not None and not PyBytes_Check(data):
        raise TypeError(f"{what} must be bytes or None, got {type(data).__name__}")


cdef list _encoded_headers(object headers):
    cdef list out = []
    if not headers:
        return out
    for item in headers:
        if not PyTuple_Check(item) or len(item) != 2:
            raise TypeError(f"a header must be a (str, bytes | None) pair, got {item!r}")
        key, value = item
        if not PyUnicode_Check(key):
            raise TypeError(f"a header key must be str, got {type(key).__name__}")
        _check_bytes("a header value", value)
        out.append(((<str>key).encode("utf-8"), value))
    return out


cdef class RecordsWriter:
    """The records of one batch, appended in order, up to ``limit`` bytes."""

    cdef Buf _buf
    cdef Py_ssize_t _limit
    cdef int _count
    cdef int64_t _base_timestamp
    cdef int64_t _max_timestamp

    def __cinit__(self, Py_ssize_t limit):
        self._buf.data = NULL
        self._buf.length = 0
        self._buf.capacity = 0
        self._limit = limit
        self._count = 0
        self._base_timestamp = -1
        self._max_timestamp = -1

    def __dealloc__(self):
        free(self._buf.data)

    def append(self, int64_t timestamp, object key, object value, object headers=None):
        """Add a record; returns the bytes it took, or 0 when it does not fit (nothing added)."""
        _check_bytes("key", key)
        _check_bytes("value", value)
        cdef list encoded = _encoded_headers(headers) if headers else None
        cdef int count = self._count
        cdef int64_t base = timestamp if count == 0 else self._base_timestamp
        cdef int64_t delta = timestamp - base
        cdef Py_ssize_t key_len = -1 if key is None else PyBytes_GET_SIZE(key)
        cdef Py_ssize_t value_len = -1 if value is None else PyBytes_GET_SIZE(value)
        cdef Py_ssize_t header_count = 0 if encoded is None else len(encoded)
        cdef Py_ssize_t body = 1 + _varint_size(delta) + _varint_size(count)
        body += _field_size(key_len) + _field_size(value_len) + _varint_size(header_count)
        cdef object hk
        cdef object hv
        if header_count:
            for hk, hv in encoded:
                body += _field_size(PyBytes_GET_SIZE(hk))
                body += _field_size(-1 if hv is None else PyBytes_GET_SIZE(hv))
        cdef Py_ssize_t total = _varint_size(body) + body
        if count and self._buf.length + total > self._limit:
            return 0
        _reserve(&self._buf, total)
        cdef uint8_t* p = self._buf.data + self._buf.length
        p = _put_varint(p, body)
        p[0] = 0
        p = _put_varint(p + 1, delta)
        p = _put_varint(p, count)
        if key is None:
            p[0] = 1
            p += 1
        else:
            p = _put_bytes(p, <const uint8_t*>PyBytes_AS_STRING(key), key_len)
        if value is None:
            p[0] = 1
            p += 1
        else:
            p = _put_bytes(p, <const uint8_t*>PyBytes_AS_STRING(value), value_len)
        p = _put_varint(p, header_count)
        if header_count:
            for hk, hv in encoded:
                p = _put_bytes(p, <const uint8_t*>PyBytes_AS_STRING(hk), PyBytes_GET_SIZE(hk))
                if hv is None:
                    p[0] = 1
                    p += 1
                else:
                    p = _put_bytes(p, <const uint8_t*>PyBytes_AS_STRING(hv), PyBytes_GET_SIZE(hv))
        self._buf.length += total
        if count == 0:
            self._base_timestamp = timestamp
            self._max_timestamp = timestamp
        elif timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        self._count = count + 1
        return total

    @property
    def count(self):
        """Records appended so far."""
        return self._count

    @property
    def size(self):
        """Bytes of the records section so far."""
        return self._buf.length

    @property
    def base_timestamp(self):
        """The first record's timestamp (-1 while empty)."""
        return self._base_timestamp

    @property
    def max_timestamp(self):
        """The largest record timestamp (-1 while empty)."""
        return self._max_timestamp

    def getvalue(self):
        """The records section."""
        return PyBytes_FromStringAndSize(<const char*>self._buf.data, self._buf.length)


# -- many rows from Arrow buffers ---------------------------------------------------------------


cdef struct BinCol:
    bint present
    const uint8_t* validity
    const int32_t* offsets
    const uint8_t* data
    Py_ssize_t offset


cdef struct Open:
    Buf buf
    int count
    int64_t base
    int64_t max_ts


cdef const uint8_t* _validity_ptr(object validity, list keep) except? NULL:
    cdef const uint8_t[::1] bits
    if validity is None:
        return NULL
    bits = validity
    keep.append(bits)
    if bits.shape[0] == 0:
        return NULL
    return &bits[0]


cdef int _bin_col(BinCol* out, object column, list keep) except -1:
    cdef const int32_t[::1] offsets
    cdef const uint8_t[::1] data
    out.present = column is not None
    out.validity = NULL
    out.offsets = NULL
    out.data = NULL
    out.offset = 0
    if column is None:
        return 0
    out.validity = _validity_ptr(column.validity, keep)
    offsets = column.offsets
    data = column.data
    keep.append(offsets)
    keep.append(data)
    out.offsets = &offsets[0] if offsets.shape[0] else NULL
    out.data = &data[0] if data.shape[0] else NULL
    out.offset = column.offset
    return 0


cdef inline bint _valid(const uint8_t* validity, Py_ssize_t index) noexcept nogil:
    return validity == NULL or (validity[index >> 3] >> (index & 7)) & 1


cdef inline Py_ssize_t _get(const BinCol* c, Py_ssize_t row, const uint8_t** data) noexcept nogil:
    """The value's length (its bytes in ``data``), or -1 for null."""
    cdef Py_ssize_t index
    if not c.present:
        return -1
    index = c.offset + row
    if not _valid(c.validity, index):
        return -1
    data[0] = c.data + c.offsets[index]
    return c.offsets[index + 1] - c.offsets[index]


cdef class _Encoder:
    """The state of one encode_columns call."""

    cdef Open* chunks
    cdef int num_partitions
    cdef Py_ssize_t limit
    cdef list out
    cdef BinCol keys
    cdef BinCol values
    cdef BinCol header_keys
    cdef BinCol header_values
    cdef const int32_t* header_offsets
    # the row being placed
    cdef int64_t timestamp
    cdef Py_ssize_t key_len
    cdef Py_ssize_t value_len
    cdef const uint8_t* key
    cdef const uint8_t* value
    cdef int32_t first_header
    cdef int32_t end_header

    def __cinit__(self, int num_partitions, Py_ssize_t limit):
        self.chunks = NULL
        self.num_partitions = num_partitions
        self.limit = limit
        self.out = []
        cdef Py_ssize_t size = num_partitions * sizeof(Open)
        self.chunks = <Open*>realloc(NULL, size)
        if self.chunks == NULL:
            raise MemoryError()
        cdef int i
        for i in range(num_partitions):
            self.chunks[i].buf.data = NULL
            self.chunks[i].buf.length = 0
            self.chunks[i].buf.capacity = 0
            self.chunks[i].count = 0
            self.chunks[i].base = 0
            self.chunks[i].max_ts = 0

    def __dealloc__(self):
        cdef int i
        if self.chunks != NULL:
            for i in range(self.num_partitions):
                free(self.chunks[i].buf.data)
            free(self.chunks)

    cdef Py_ssize_t _body_size(self, int64_t delta, int offset_delta) noexcept:
        """The record's size without its length varint."""
        cdef Py_ssize_t body = 1 + _varint_size(delta) + _varint_size(offset_delta)
        cdef int32_t entry
        cdef const uint8_t* ignored
        body += _field_size(self.key_len) + _field_size(self.value_len)
        body += _varint_size(self.end_header - self.first_header)
        for entry in range(self.first_header, self.end_header):
            body += _field_size(_get(&self.header_keys, entry, &ignored))
            body += _field_size(_get(&self.header_values, entry, &ignored))
        return body

    cdef int _write(self, Open* chunk, int64_t delta) except -1:
        cdef Py_ssize_t body = self._body_size(delta, chunk.count)
        cdef Py_ssize_t total = _varint_size(body) + body
        cdef uint8_t* p
        cdef int32_t entry
        cdef const uint8_t* hdata = NULL
        cdef Py_ssize_t hlen
        _reserve(&chunk.buf, total)
        p = chunk.buf.data + chunk.buf.length
        p = _put_varint(p, body)
        p[0] = 0
        p = _put_varint(p + 1, delta)
        p = _put_varint(p, chunk.count)
        if self.key_len < 0:
            p[0] = 1
            p += 1
        else:
            p = _put_bytes(p, self.key, self.key_len)
        if self.value_len < 0:
            p[0] = 1
            p += 1
        else:
            p = _put_bytes(p, self.value, self.value_len)
        p = _put_varint(p, self.end_header - self.first_header)
        for entry in range(self.first_header, self.end_header):
            hlen = _get(&self.header_keys, entry, &hdata)
            p = _put_bytes(p, hdata, hlen)
            hlen = _get(&self.header_values, entry, &hdata)
            if hlen < 0:
                p[0] = 1
                p += 1
            else:
                p = _put_bytes(p, hdata, hlen)
        chunk.buf.length += total
        return 0

    cdef bint _try_append(self, int partition) except -1:
        cdef Open* chunk = &self.chunks[partition]
        cdef int64_t delta
        cdef Py_ssize_t body
        if chunk.count == 0:
            chunk.base = self.timestamp
            chunk.max_ts = self.timestamp
            self._write(chunk, 0)
            chunk.count = 1
            return True
        delta = self.timestamp - chunk.base
        body = self._body_size(delta, chunk.count)
        if chunk.buf.length + _varint_size(body) + body > self.limit:
            return False
        self._write(chunk, delta)
        chunk.count += 1
        if self.timestamp > chunk.max_ts:
            chunk.max_ts = self.timestamp
        return True

    cdef int _roll(self, int partition) except -1:
        cdef Open* chunk = &self.chunks[partition]
        records = PyBytes_FromStringAndSize(<const char*>chunk.buf.data, chunk.buf.length)
        self.out.append(Chunk(partition, records, chunk.count, chunk.base, chunk.max_ts))
        chunk.buf.length = 0
        chunk.count = 0
        return 0


def encode_columns(
    Py_ssize_t num_rows,
    int num_partitions,
    int sticky_partition,
    Py_ssize_t limit,
    int64_t default_timestamp,
    keys,
    values,
    partitions,
    timestamps,
    headers,
):
    """Encode ``num_rows`` rows into per-partition chunks of at most ``limit`` bytes."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    cdef list keep = []
    cdef _Encoder enc = _Encoder(num_partitions, limit)
    cdef int sticky = sticky_partition % num_partitions
    if sticky < 0:
        sticky += num_partitions
    _bin_col(&enc.keys, keys, keep)
    _bin_col(&enc.values, values, keep)
    cdef const uint8_t* part_validity = NULL
    cdef const int32_t* part_values = NULL
    cdef Py_ssize_t part_offset = 0
    cdef const int32_t[::1] part_view
    if partitions is not None:
        part_validity = _validity_ptr(partitions.validity, keep)
        part_view = partitions.values
        keep.append(part_view)
        part_values = &part_view[0] if part_view.shape[0] else NULL
        part_offset = partitions.offset
    cdef const uint8_t* ts_validity = NULL
    cdef const int64_t* ts_values = NULL
    cdef Py_ssize_t ts_offset = 0
    cdef const int64_t[::1] ts_view
    if timestamps is not None:
        ts_validity = _validity_ptr(timestamps.validity, keep)
        ts_view = timestamps.values
        keep.append(ts_view)
        ts_values = &ts_view[0] if ts_view.shape[0] else NULL
        ts_offset = timestamps.offset
    cdef const uint8_t* header_validity = NULL
    cdef Py_ssize_t header_offset = 0
    cdef const int32_t[::1] header_view
    enc.header_keys.present = False
    enc.header_values.present = False
    enc.header_offsets = NULL
    if headers is not None:
        header_validity = _validity_ptr(headers.validity, keep)
        header_view = headers.offsets
        keep.append(header_view)
        enc.header_offsets = &header_view[0] if header_view.shape[0] else NULL
        header_offset = headers.offset
        _bin_col(&enc.header_keys, headers.keys, keep)
        _bin_col(&enc.header_values, headers.values, keep)
    cdef Py_ssize_t row
    cdef Py_ssize_t index
    cdef int32_t entry
    cdef int64_t partition
    cdef bint by_sticky
    cdef const uint8_t* ignored
    for row in range(num_rows):
        enc.key_len = _get(&enc.keys, row, &enc.key)
        enc.value_len = _get(&enc.values, row, &enc.value)
        partition = -1
        if part_values != NULL:
            index = part_offset + row
            if _valid(part_validity, index):
                partition = part_values[index]
                if not 0 <= partition < num_partitions:
                    raise ValueError(
                        f"row {row}: partition {partition} does not exist (the topic has {num_partitions})"
                    )
        by_sticky = False
        if partition < 0:
            if enc.key_len >= 0:
                partition = (_murmur2(enc.key, enc.key_len) & 0x7FFFFFFF) % num_partitions
            else:
                partition = sticky
                by_sticky = True
        enc.timestamp = default_timestamp
        if ts_values != NULL:
            index = ts_offset + row
            if _valid(ts_validity, index):
                enc.timestamp = ts_values[index]
        enc.first_header = 0
        enc.end_header = 0
        if enc.header_offsets != NULL:
            index = header_offset + row
            if _valid(header_validity, index):
                enc.first_header = enc.header_offsets[index]
                enc.end_header = enc.header_offsets[index + 1]
                for entry in range(enc.first_header, enc.end_header):
                    if _get(&enc.header_keys, entry, &ignored) < 0:
                        raise ValueError(f"row {row}: a header has a null key")
        if enc._try_append(<int>partition):
            continue
        enc._roll(<int>partition)
        if by_sticky and num_partitions > 1:
            sticky = (sticky + 1) % num_partitions
            partition = sticky
            if enc._try_append(<int>partition):
                continue
            enc._roll(<int>partition)
        enc._try_append(<int>partition)
    cdef int p
    for p in range(num_partitions):
        if enc.chunks[p].count:
            enc._roll(p)
    return enc.out, sticky
