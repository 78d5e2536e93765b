# Included by _kernel.pyx (one compilation unit; see its docstring). Decoding the records of a batch (decode_records, control_type).

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
