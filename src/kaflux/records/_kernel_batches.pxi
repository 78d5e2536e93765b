# Included by _kernel.pyx (one compilation unit; see its docstring). RecordBatch, first_batch_size and iter_batches.

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
