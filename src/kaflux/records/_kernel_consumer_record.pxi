# Included by _kernel.pyx (one compilation unit; see its docstring). ConsumerRecord, the compiled twin of kaflux.records.consumer_record.

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
