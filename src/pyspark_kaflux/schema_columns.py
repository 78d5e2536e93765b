"""Keys and values decoded into typed columns with the Schema Registry. [io; driver and executors]

With ``value.format=avro`` or ``json`` (or ``key.format``) the source's ``value`` column is a
struct of the schema's fields instead of bytes (JSON Schema values are parsed in bulk by
:class:`JsonColumnDecoder`). The reader schema is fixed when the query starts
(:func:`resolve_formats`, on the driver): ``value.schema.id``, else the latest version of
``value.subject`` (default ``<topic>-value`` for a single subscribed topic). Executors decode
each Arrow batch's column (:class:`AvroColumnDecoder`). When every record of the batch was
written with the reader schema (and the schema has no ``fixed`` and no union other than
``[null, T]``), the whole column is decoded at once with numpy (:mod:`pyspark_kaflux.avro_vector`),
with no Python object per record. Otherwise records are
read one by one with fastavro, with their writer's schema (asked of the registry once per id and
process) resolved to the reader schema, and built into one Arrow struct array per batch.

Undecodable records (no magic byte, an unknown schema id, a truncated payload) fail the query
naming topic, partition and offset (``decode.mode=FAILFAST``, the default), or with
``decode.mode=PERMISSIVE`` give a null struct and keep their bytes in ``value_raw``.

Records written with header framing (confluent-kafka's ``header_schema_id_serializer``,
kaflux's ``schema.id.serializer=header``: the schema's GUID in a ``__value_schema_id`` /
``__key_schema_id`` header, the bare payload) are decoded when the query has the headers
column (``includeHeaders=true``): the header names the writer's schema (asked of the registry
by GUID once per process), the whole payload is the value. Avro records framed so take the
record-by-record path. Without the headers column they fail as records with no magic byte
(the message says to set ``includeHeaders=true``).
"""

from __future__ import annotations

import io
import json
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
from pyspark.sql.types import BinaryType, DataType, StructField, StructType

from kaflux.schema_registry.client import Schema, SchemaReference, SchemaRegistryClient
from kaflux.schema_registry.wire import header_name
from pyspark_kaflux.avro_types import (
    json_schema_spark_type,
    millis_arrow_type,
    spark_type,
    strip_logical_types,
)
from pyspark_kaflux.avro_vector import compile_plan
from pyspark_kaflux.avro_vector import decode as vector_decode
from pyspark_kaflux.options import FormatOptions, KafluxOptionError, SourceOptions, Subscribe

__all__ = [
    "AvroColumnDecoder",
    "RecordDecodeError",
    "ResolvedFormat",
    "decode_batch",
    "decoded_schema",
    "registry_client",
    "resolve_formats",
]


class RecordDecodeError(ValueError):
    """A record's key or value could not be decoded with its format (decode.mode=FAILFAST)."""


@dataclass(frozen=True, slots=True)
class ResolvedFormat:
    """How one column (``key`` or ``value``) is decoded: plain data, picklable."""

    column: str
    format: str
    schema_str: str
    schema_id: int
    references: tuple[tuple[str, str, int], ...]
    registry: tuple[tuple[str, str], ...]
    permissive: bool


_NO_MAGIC = (
    "no magic byte: not written with a Schema Registry serializer's prefix framing (if it was "
    "written with header framing, its schema GUID in a __key_schema_id / __value_schema_id "
    "header, set the option includeHeaders=true to read it)"
)

_clients: dict[tuple[tuple[str, str], ...], SchemaRegistryClient] = {}
_clients_lock = threading.Lock()


def registry_client(config: tuple[tuple[str, str], ...]) -> SchemaRegistryClient:
    """One registry client per configuration and process (its caches serve every task)."""
    with _clients_lock:
        client = _clients.get(config)
        if client is None:
            client = _clients[config] = SchemaRegistryClient(dict(config))
        return client


def _resolve_one(options: SourceOptions, fmt: FormatOptions, column: str) -> ResolvedFormat | None:
    kind = fmt.key_format if column == "key" else fmt.value_format
    if kind == "binary":
        return None
    if not fmt.registry:
        raise KafluxOptionError(f"Option '{column}.format=avro' needs 'schema.registry.url'")
    client = registry_client(fmt.registry)
    schema_id = fmt.key_schema_id if column == "key" else fmt.value_schema_id
    subject = fmt.key_subject if column == "key" else fmt.value_subject
    if schema_id is not None:
        schema = client.get_schema(schema_id)
    else:
        if subject is None:
            strategy = options.strategy
            if not isinstance(strategy, Subscribe) or len(strategy.topics) != 1:
                raise KafluxOptionError(
                    f"Option '{column}.subject' (or '{column}.schema.id') is needed unless exactly one topic "
                    "is subscribed (the default subject is <topic>-" + column + ")"
                )
            subject = f"{strategy.topics[0]}-{column}"
        latest = client.get_latest_version(subject)
        schema, schema_id = latest.schema, latest.schema_id
    if kind == "protobuf":  # as a base64 FileDescriptorProto, whatever form it was registered in
        schema = client.get_schema(schema_id, fmt="serialized")
    expected_type = {"avro": "AVRO", "json": "JSON", "protobuf": "PROTOBUF"}[kind]
    if schema.schema_type != expected_type:
        raise KafluxOptionError(
            f"Option '{column}.format={kind}': schema {schema_id} is {schema.schema_type}"
        )
    refs = tuple((r.name, r.subject, r.version) for r in schema.references)
    return ResolvedFormat(column, kind, schema.schema_str, schema_id, refs, fmt.registry, fmt.permissive)


_resolved: dict[tuple[Any, ...], tuple[ResolvedFormat, ...]] = {}


def resolve_formats(options: SourceOptions, *, fresh: bool = False) -> SourceOptions:
    """``options`` with the reader schemas of its typed columns fixed.

    ``fresh`` (the source's ``schema()``, when a query starts) asks the registry for the latest
    versions now; otherwise (``reader()``, later) the resolution this process made last for the
    same options is reused, so the two agree."""
    fmt = options.formats
    if fmt is None:
        return options
    key = (fmt, options.strategy)
    resolved = None if fresh else _resolved.get(key)
    if resolved is None:
        if fresh and fmt.registry:
            registry_client(fmt.registry).clear_latest_caches()
        resolved = tuple(r for c in ("key", "value") if (r := _resolve_one(options, fmt, c)) is not None)
        _resolved[key] = resolved
    return replace(options, resolved_formats=resolved)


def _parse(
    client: SchemaRegistryClient | None, fmt_refs: tuple[tuple[str, str, int], ...], text: str, strip: bool
) -> tuple[Any, dict[str, Any]]:
    from fastavro import parse_schema

    named: dict[str, Any] = {}

    def load(refs: tuple[tuple[str, str, int], ...]) -> None:
        for name, subject, version in refs:
            if name in named or client is None:
                continue
            registered = client.get_version(subject, version)
            load(tuple((r.name, r.subject, r.version) for r in registered.schema.references))
            raw = json.loads(registered.schema.schema_str)
            parse_schema(strip_logical_types(raw) if strip else raw, named_schemas=named)

    load(fmt_refs)
    raw = json.loads(text)
    return parse_schema(strip_logical_types(raw) if strip else raw, named_schemas=named), named


def column_spark_type(fmt: ResolvedFormat) -> DataType:
    """The Spark type of a decoded column."""
    if fmt.format == "json":
        return json_schema_spark_type(json.loads(fmt.schema_str), fmt.column)
    if fmt.format == "protobuf":
        return ProtobufColumnDecoder(fmt).spark_type
    client = registry_client(fmt.registry) if fmt.references else None
    parsed, named = _parse(client, fmt.references, fmt.schema_str, strip=False)
    return spark_type(parsed, named, fmt.column)


def decoded_schema(base: StructType, options: SourceOptions) -> StructType:
    """The source schema ``base`` with its typed columns (and ``<column>_raw`` in PERMISSIVE mode)."""
    fields = list(base.fields)
    for fmt in options.resolved_formats:
        index = [f.name for f in fields].index(fmt.column)
        fields[index] = StructField(fmt.column, column_spark_type(fmt))
        if fmt.permissive:
            fields.append(StructField(f"{fmt.column}_raw", BinaryType()))
    return StructType(fields)


class AvroColumnDecoder:
    """Decodes one column of framed Avro records into an Arrow struct array."""

    def __init__(self, fmt: ResolvedFormat) -> None:
        from fastavro import schemaless_reader
        from pyspark.sql.pandas.types import to_arrow_type

        self._fmt = fmt
        self._client = registry_client(fmt.registry)
        parsed, named = _parse(self._client, fmt.references, fmt.schema_str, strip=False)
        self.spark_type = spark_type(parsed, named, fmt.column)
        self.arrow_type = to_arrow_type(self.spark_type, timezone="UTC")
        self._build_type = millis_arrow_type(parsed, named, self.arrow_type)
        # flat schemas decode vectorised, with no Python object per record (None: not flat)
        self._plan = compile_plan(parsed, named, self.arrow_type)
        self._reader, _ = _parse(self._client, fmt.references, fmt.schema_str, strip=True)
        self._writers: dict[int | bytes, Any] = {fmt.schema_id: self._reader}
        self._header = header_name(fmt.column)
        self._read = schemaless_reader

    def _writer(self, schema_id: int | bytes) -> Any:
        """The parsed writer schema of a schema id, or of a GUID's 16 bytes."""
        writer = self._writers.get(schema_id)
        if writer is None:
            schema: Schema = (
                self._client.get_schema(schema_id)
                if isinstance(schema_id, int)
                else self._client.get_schema_by_guid(str(uuid.UUID(bytes=schema_id)))
            )
            refs = tuple((r.name, r.subject, r.version) for r in schema.references)
            writer, _ = _parse(self._client, refs, schema.schema_str, strip=True)
            self._writers[schema_id] = writer
        return writer

    def decode(
        self, batch: pa.RecordBatch, in_header: Mapping[int, bytes] | None = None
    ) -> tuple[pa.Array, pa.Array | None]:
        """The decoded column of ``batch`` and, in PERMISSIVE mode, the raw bytes of the
        records that could not be decoded (null elsewhere). ``in_header``: the schema-id
        header value of each header-framed row (:func:`header_framed_rows`).

        The framing (magic byte, schema id) of the whole column is checked with numpy; the
        per-record loop only decodes."""
        import numpy as np

        column = batch.column(self._fmt.column)
        n = len(column)
        data = column.buffers()[2]
        raw = b"" if data is None else data.to_pybytes()
        offsets = np.frombuffer(column.buffers()[1], dtype=np.int32)[column.offset : column.offset + n + 1]
        starts, ends = offsets[:-1].astype(np.int64), offsets[1:].astype(np.int64)
        framed = (ends - starts) >= 5
        if column.null_count:
            valid = column.is_valid().to_numpy(zero_copy_only=False)
            framed &= valid
        else:
            valid = np.ones(n, dtype=bool)
        fast = framed.copy()
        if raw and fast.any():
            d = np.frombuffer(raw, dtype=np.uint8)
            at = np.where(framed, starts, 0)
            ids = (
                (d[at + 1].astype(np.int64) << 24)
                | (d[at + 2].astype(np.int64) << 16)
                | (d[at + 3].astype(np.int64) << 8)
                | d[at + 4].astype(np.int64)
            )
            fast &= (d[at] == 0) & (ids == self._fmt.schema_id)
        if in_header:
            fast[np.fromiter(in_header, dtype=np.int64, count=len(in_header))] = False
        if self._plan is not None and not (valid & ~fast).any():
            # every record is framed with the reader schema's id: decode them all at once
            payloads = np.frombuffer(raw, dtype=np.uint8)
            vectorised = vector_decode(self._plan, payloads, starts + 5, ends, fast)
            if vectorised is not None:
                permissive = pa.nulls(n, pa.binary()) if self._fmt.permissive else None
                return vectorised, permissive
            # a malformed record: the loop below finds it
        # 1: framed with the reader schema's id (the common case); 0: null; 2: anything else
        codes = np.where(fast, 1, np.where(valid, 2, 0)).tolist()
        headers = in_header or {}
        fo = io.BytesIO(raw)
        seek, tell, read, reader = fo.seek, fo.tell, self._read, self._reader
        out: list[Any] = []
        bad: list[bytes | None] | None = [] if self._fmt.permissive else None
        for i, (start, end, code) in enumerate(zip(starts.tolist(), ends.tolist(), codes, strict=True)):
            if code == 1:
                try:
                    seek(start + 5)
                    record = read(fo, reader, None)
                    if tell() == end:
                        out.append(record)
                        if bad is not None:
                            bad.append(None)
                        continue
                except Exception:
                    pass
            elif code == 0:
                out.append(None)
                if bad is not None:
                    bad.append(None)
                continue
            header = headers.get(i)
            if header is None:
                record, why = self._decode_one(fo, raw, start, end)
            else:
                record, why = self._decode_header_framed(fo, header, start, end)
            if why is None:
                out.append(record)
                if bad is not None:
                    bad.append(None)
                continue
            if bad is None:
                topic = batch.column("topic")[i].as_py()
                partition = batch.column("partition")[i].as_py()
                offset = batch.column("offset")[i].as_py()
                raise RecordDecodeError(
                    f"could not decode the {self._fmt.column} of the record at {topic}-{partition} offset "
                    f"{offset} as Avro: {why}. Set the option decode.mode=PERMISSIVE to get a null "
                    f"{self._fmt.column} and its bytes in {self._fmt.column}_raw instead"
                )
            out.append(None)
            bad.append(raw[start:end])
        decoded = pa.array(out, type=self._build_type)
        if decoded.type != self.arrow_type:
            decoded = decoded.cast(self.arrow_type)
        return decoded, None if bad is None else pa.array(bad, type=pa.binary())

    def _decode_one(self, fo: io.BytesIO, raw: bytes, start: int, end: int) -> tuple[Any, str | None]:
        """One record the fast path could not take: (the record, None) or (None, why not)."""
        if end - start < 5 or raw[start] != 0:
            return None, _NO_MAGIC
        schema_id = int.from_bytes(raw[start + 1 : start + 5], "big")
        try:
            writer = self._writer(schema_id)
            fo.seek(start + 5)
            record = self._read(fo, writer, None if schema_id == self._fmt.schema_id else self._reader)
        except Exception as exc:  # fastavro's EOF/parse errors, registry errors
            return None, f"schema id {schema_id}: {exc!r}"
        if fo.tell() != end:
            return None, f"{end - fo.tell()} bytes left over after the record (schema id {schema_id})"
        return record, None

    def _decode_header_framed(
        self, fo: io.BytesIO, header: bytes, start: int, end: int
    ) -> tuple[Any, str | None]:
        """A record whose schema is named by its header: the whole payload is the record."""
        from kaflux.schema_registry.wire import read_schema_id

        try:
            read = read_schema_id(b"", [(self._header, header)], self._fmt.column)
            writer = self._writer(read.key)
            fo.seek(start)
            record = self._read(fo, writer, self._reader)
        except Exception as exc:  # framing, fastavro's EOF/parse and registry errors
            return None, f"header-framed: {exc!r}"
        if fo.tell() != end:
            return None, f"{end - fo.tell()} bytes left over after the header-framed record"
        return record, None


class JsonColumnDecoder:
    """Decodes one column of framed JSON values into an Arrow struct array with Arrow's JSON
    reader: the values (their 5-byte framing blanked out) are parsed as one newline-delimited
    document, in C++, with no Python object per record."""

    def __init__(self, fmt: ResolvedFormat) -> None:
        from pyspark.sql.pandas.types import to_arrow_type

        self._fmt = fmt
        self.spark_type = json_schema_spark_type(json.loads(fmt.schema_str), fmt.column)
        self.arrow_type = to_arrow_type(self.spark_type, timezone="UTC")

    def _parse(self, document: bytes) -> pa.StructArray:
        import pyarrow.json as pj

        options = pj.ParseOptions(
            explicit_schema=pa.schema(list(self.arrow_type)),
            unexpected_field_behavior="ignore",
            newlines_in_values=True,
        )
        table = pj.read_json(io.BytesIO(document), parse_options=options)
        return table.to_struct_array().combine_chunks().cast(self.arrow_type)

    def decode(
        self, batch: pa.RecordBatch, in_header: Mapping[int, bytes] | None = None
    ) -> tuple[pa.Array, pa.Array | None]:
        """The decoded column and, in PERMISSIVE mode, the bytes of undecodable records
        (``in_header``: the header-framed rows, whose whole payload is the JSON)."""
        import numpy as np
        import pyarrow.compute as pc

        column = batch.column(self._fmt.column)
        n = len(column)
        data = column.buffers()[2]
        original = b"" if data is None else data.to_pybytes()
        raw = np.frombuffer(original, dtype=np.uint8)
        offsets = np.frombuffer(column.buffers()[1], dtype=np.int32)[column.offset : column.offset + n + 1]
        starts, ends = offsets[:-1].astype(np.int64), offsets[1:].astype(np.int64)
        prefix = np.full(n, 5, dtype=np.int64)  # bytes of framing before each value's JSON
        good = (ends - starts) >= 5
        if column.null_count:
            good &= column.is_valid().to_numpy(zero_copy_only=False)
        at = np.where(good, starts, 0)
        if len(raw):
            good &= raw[at] == 0
        header_why: dict[int, str] = {}
        if in_header:
            from kaflux.schema_registry.wire import FramingError, read_schema_id

            rows_in_header = np.fromiter(in_header, dtype=np.int64, count=len(in_header))
            prefix[rows_in_header] = 0
            good[rows_in_header] = column.is_valid().to_numpy(zero_copy_only=False)[rows_in_header]
            for i, header in in_header.items():
                try:
                    read_schema_id(b"", [(header_name(self._fmt.column), header)], self._fmt.column)
                except FramingError as exc:
                    good[i] = False
                    header_why[i] = f"header-framed: {exc}"
        rows = np.flatnonzero(good)
        why: dict[int, str] = {
            int(i): header_why.get(int(i), _NO_MAGIC)
            for i in np.flatnonzero(~good & (column.is_valid().to_numpy(zero_copy_only=False)))
        }
        parsed = self._parse_rows(raw, starts + prefix, ends, rows, why)
        if why and not self._fmt.permissive:
            i = min(why)
            topic, partition = batch.column("topic")[i].as_py(), batch.column("partition")[i].as_py()
            raise RecordDecodeError(
                f"could not decode the {self._fmt.column} of the record at {topic}-{partition} offset "
                f"{batch.column('offset')[i].as_py()} as JSON: "
                f"{why[i]}. Set the option decode.mode=PERMISSIVE to get a null {self._fmt.column} and its "
                f"bytes in {self._fmt.column}_raw instead"
            )
        kept = [int(i) for i in rows if int(i) not in why]
        index = np.full(n, -1, dtype=np.int64)
        index[kept] = np.arange(len(kept))
        indices = pa.array(index, mask=index < 0)
        decoded = pc.take(parsed, indices) if len(kept) else pa.nulls(n, self.arrow_type)
        if not self._fmt.permissive:
            return decoded, None
        bad = [original[starts[i] : ends[i]] if i in why else None for i in range(n)] if why else [None] * n
        return decoded, pa.array(bad, type=pa.binary())

    def _parse_rows(self, raw: Any, starts: Any, ends: Any, rows: Any, why: dict[int, str]) -> pa.StructArray:
        """Parse ``rows`` (their JSON from ``starts``, past any framing, to ``ends``) as one
        document; on an error, find the bad rows one by one (into ``why``) and parse the
        others."""
        import numpy as np

        newline = len(raw)
        text = np.concatenate((raw, np.array([0x0A], dtype=np.uint8)))

        def document(selected: Any) -> bytes:
            if not len(selected):
                return b""
            # each value: a newline, then its JSON
            s, e = starts[selected], ends[selected]
            lengths = e - s + 1
            first = np.concatenate(([0], np.cumsum(lengths)[:-1]))
            index = np.repeat(s - 1 - first, lengths) + np.arange(lengths.sum())
            index[first] = newline
            out: bytes = text[index].tobytes()
            return out

        try:
            return self._parse(document(rows))
        except (pa.ArrowInvalid, ValueError):
            pass
        ok: list[int] = []
        for i in rows.tolist():
            try:
                self._parse(document(np.array([i])))
                ok.append(i)
            except (pa.ArrowInvalid, ValueError) as exc:
                why[i] = f"not valid JSON for its schema: {exc}"
        return self._parse(document(np.array(ok, dtype=np.int64)))


class ProtobufColumnDecoder:
    """Decodes one column of framed Protobuf messages (the message class built from the
    registry's schema, see :mod:`pyspark_kaflux.protobuf_columns`) into an Arrow struct array."""

    def __init__(self, fmt: ResolvedFormat) -> None:
        from pyspark.sql.pandas.types import to_arrow_type

        from pyspark_kaflux.protobuf_columns import message_class_for, proto_spark_type

        self._fmt = fmt
        client = registry_client(fmt.registry)
        refs = tuple(SchemaReference(n, s, v) for n, s, v in fmt.references)
        self._class = message_class_for(client, Schema(fmt.schema_str, "PROTOBUF", refs))
        self.spark_type = proto_spark_type(self._class.DESCRIPTOR)
        self.arrow_type = to_arrow_type(self.spark_type, timezone="UTC")

    def decode(
        self, batch: pa.RecordBatch, in_header: Mapping[int, bytes] | None = None
    ) -> tuple[pa.Array, pa.Array | None]:
        """The decoded column and, in PERMISSIVE mode, the bytes of undecodable records
        (``in_header``: the header-framed rows, whose message indexes follow the GUID in the
        header and whose whole payload is the message)."""
        from kaflux.schema_registry.wire import decode_message_indexes, header_name, read_schema_id
        from pyspark_kaflux.protobuf_columns import to_row

        name = header_name(self._fmt.column)
        headers = in_header or {}
        column = batch.column(self._fmt.column)
        parse = self._class.FromString
        out: list[Any] = []
        bad: list[bytes | None] | None = [] if self._fmt.permissive else None
        for i, data in enumerate(column.to_pylist()):
            why = None
            if data is not None:
                try:
                    header = headers.get(i)
                    if header is None and data[:1] != b"\x00":
                        raise ValueError(_NO_MAGIC)
                    read = read_schema_id(
                        data, None if header is None else [(name, header)], self._fmt.column
                    )
                    if read.header is None:
                        _, pos = decode_message_indexes(data, read.end)
                    else:
                        decode_message_indexes(read.header, read.end)
                        pos = 0
                    out.append(to_row(parse(data[pos:])))
                    if bad is not None:
                        bad.append(None)
                    continue
                except Exception as exc:  # framing errors, protobuf's DecodeError
                    why = repr(exc)
            if why is None:
                out.append(None)
                if bad is not None:
                    bad.append(None)
                continue
            if bad is None:
                topic, partition = batch.column("topic")[i].as_py(), batch.column("partition")[i].as_py()
                raise RecordDecodeError(
                    f"could not decode the {self._fmt.column} of the record at {topic}-{partition} offset "
                    f"{batch.column('offset')[i].as_py()} as Protobuf: {why}. Set the option "
                    f"decode.mode=PERMISSIVE to get a null {self._fmt.column} and its bytes in "
                    f"{self._fmt.column}_raw instead"
                )
            out.append(None)
            bad.append(data)
        decoded = pa.array(out, type=self.arrow_type)
        return decoded, None if bad is None else pa.array(bad, type=pa.binary())


_decoders: dict[ResolvedFormat, AvroColumnDecoder | JsonColumnDecoder | ProtobufColumnDecoder] = {}


def header_framed_rows(batch: pa.RecordBatch, column: str) -> dict[int, bytes] | None:
    """The rows whose ``column`` names its schema in a header (header framing), each with the
    value of that header (the last one, as Java's ``lastHeader``), or None when no row does
    or the batch has no ``headers`` column."""
    import pyarrow.compute as pc

    if "headers" not in batch.schema.names:
        return None
    headers = batch.column("headers")
    entries = headers.flatten()
    if not len(entries):
        return None
    named = pc.equal(entries.field("key"), header_name(column))
    hit = pc.fill_null(pc.and_(named, pc.is_valid(entries.field("value"))), False)
    if not pc.any(hit).as_py():
        return None
    parents = pc.filter(pc.list_parent_indices(headers), hit).to_pylist()
    values = pc.filter(entries.field("value"), hit).to_pylist()
    return dict(zip(parents, values, strict=True))


def decode_batch(batch: pa.RecordBatch, options: SourceOptions) -> pa.RecordBatch:
    """``batch`` (in the source's binary schema) with its typed columns decoded, prefix- or
    (with the headers column) header-framed."""
    columns = list(batch.columns)
    names = list(batch.schema.names)
    for fmt in options.resolved_formats:
        in_header = header_framed_rows(batch, fmt.column)
        decoder = _decoders.get(fmt)
        if decoder is None:
            if fmt.format == "avro":
                decoder = AvroColumnDecoder(fmt)
            elif fmt.format == "json":
                decoder = JsonColumnDecoder(fmt)
            else:
                decoder = ProtobufColumnDecoder(fmt)
            _decoders[fmt] = decoder
        decoded, raw = decoder.decode(batch, in_header)
        columns[names.index(fmt.column)] = decoded
        if raw is not None:
            columns.append(raw)
            names.append(f"{fmt.column}_raw")
    return pa.RecordBatch.from_arrays(columns, names=names)
