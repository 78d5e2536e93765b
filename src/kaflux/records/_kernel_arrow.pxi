# Included by _kernel.pyx (one compilation unit; see its docstring). to_arrow through the Arrow C data interface.

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
