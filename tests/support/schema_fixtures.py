"""Schemas and values the schema tests share: an Avro record with every type the issue names
(nested records, arrays, maps, unions with null, logical types), a JSON Schema, and v1/v2 of an
evolving Avro record. [test]"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from decimal import Decimal
from typing import Any

ADDRESS = {
    "type": "record",
    "name": "Address",
    "namespace": "kaflux.test",
    "fields": [
        {"name": "street", "type": "string"},
        {"name": "zip", "type": ["null", "int"], "default": None},
    ],
}

PAGE_VIEW = {
    "type": "record",
    "name": "PageView",
    "namespace": "kaflux.test",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "user", "type": "string"},
        {"name": "score", "type": "double"},
        {"name": "ratio", "type": "float"},
        {"name": "active", "type": "boolean"},
        {"name": "count", "type": "int"},
        {"name": "raw", "type": "bytes"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attributes", "type": {"type": "map", "values": "long"}},
        {"name": "referrer", "type": ["null", "string"], "default": None},
        {"name": "address", "type": ADDRESS},
        {"name": "previous", "type": ["null", "kaflux.test.Address"], "default": None},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at_ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "at_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "session", "type": {"type": "string", "logicalType": "uuid"}},
    ],
}
PAGE_VIEW_STR = json.dumps(PAGE_VIEW)


def page_view(i: int) -> dict[str, Any]:
    """A PageView record; every field depends on ``i``."""
    return {
        "id": 1_000_000_000_000 + i,
        "user": f"user-{i}",
        "score": i / 4,
        "ratio": 0.5,
        "active": i % 2 == 0,
        "count": -i,
        "raw": bytes([i % 256, 1, 2]),
        "tags": [f"t{i}", "x"] if i % 3 else [],
        "attributes": {"clicks": i, "views": 2 * i},
        "referrer": None if i % 2 else f"https://ref/{i}",
        "address": {"street": f"{i} Main St", "zip": None if i % 5 == 0 else 75000 + i},
        "previous": None if i % 2 else {"street": "Old St", "zip": 1},
        "price": Decimal(f"{i}.{i % 100:02d}"),
        "day": dt.date(2024, 1, 1) + dt.timedelta(days=i),
        "at_ms": dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=1000 * i + 7),
        "at_us": dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=1_000_000 * i + 9),
        "session": uuid.UUID(int=i + 1),
    }


USER_V1 = json.dumps(
    {
        "type": "record",
        "name": "User",
        "namespace": "kaflux.test",
        "fields": [{"name": "name", "type": "string"}],
    }
)
USER_V2 = json.dumps(
    {
        "type": "record",
        "name": "User",
        "namespace": "kaflux.test",
        "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int", "default": -1}],
    }
)

ORDER_JSON_SCHEMA = json.dumps(
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Order",
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "items": {"type": "array", "items": {"type": "string"}},
            "note": {"type": ["string", "null"]},
        },
        "required": ["id", "items"],
        "additionalProperties": False,
    }
)
