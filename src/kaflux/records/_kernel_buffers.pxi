# Included by _kernel.pyx (one compilation unit; see its docstring). Varints and the column buffers ColumnBuilder fills.

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
