# Included by _kernel.pyx (one compilation unit; see its docstring). BatchCursor and ColumnBuilder (Arrow-layout columns).

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
        # tuple.__new__ with the fields in order: RecordColumns' own __new__ is a Python
        # function taking 23 arguments, a measurable share of a small poll_arrow()'s cost.
        columns = _new_tuple(RecordColumns, (
            self.rows,
            self._take(C_OFFSET, False, 0),
            self._take(C_TIMESTAMP, False, 0),
            self._take(C_TTYPE, False, 0),
            self._take(C_PARTITION, False, 0),
            self._take(C_TOPIC_OFF, False, 0),
            self._take(C_TOPIC_DATA, False, 0),
            self._take(C_KEY_VALID, True, self.rows) if self.key_nulls else None,
            self.key_nulls,
            self._take(C_KEY_OFF, False, 0),
            self._take(C_KEY_DATA, False, 0),
            self._take(C_VAL_VALID, True, self.rows) if self.value_nulls else None,
            self.value_nulls,
            self._take(C_VAL_OFF, False, 0),
            self._take(C_VAL_DATA, False, 0),
            self._take(C_HDR_OFF, False, 0),
            self.headers,
            self._take(C_HK_OFF, False, 0),
            self._take(C_HK_DATA, False, 0),
            self._take(C_HV_VALID, True, self.headers) if self.header_value_nulls else None,
            self.header_value_nulls,
            self._take(C_HV_OFF, False, 0),
            self._take(C_HV_DATA, False, 0),
        ))
        self._reset()
        return columns
