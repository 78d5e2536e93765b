"""ShareFetch v2 as Apache Kafka 4.4 reads it.

Kafka 4.4's ShareFetchRequest v2 carries ``IsRenewAck`` (a bool, KIP-1222) right after
``ShareAcquireMode``. A request without it was refused by Kafka 4.4 (the broker logged "non-nullable
field partitions was serialized as null" and closed the connection), so a kaflux ShareConsumer
never got a record from Apache Kafka (shown by
tests/integration/test_java_interop_groups.py::test_share_group_of_java_and_kaflux_delivers_every_record_once).
The layout below is Kafka 4.4's generated schema (``ShareFetchRequestData.SCHEMAS[2]``).
"""

from __future__ import annotations

import struct

import pytest

from kaflux.errors import UnsupportedVersionError
from kaflux.protocol.messages.share_fetch import ShareFetchRequest
from kaflux.protocol.primitives import Reader, Writer


def _request(**overrides: object) -> ShareFetchRequest:
    fields: dict[str, object] = {
        "group_id": "g",
        "member_id": "m",
        "share_session_epoch": 3,
        "max_wait_ms": 500,
        "min_bytes": 1,
        "max_bytes": 1000,
        "max_records": 50,
        "batch_size": 40,
        "share_acquire_mode": 1,
        "is_renew_ack": True,
        **overrides,
    }
    return ShareFetchRequest(**fields)  # type: ignore[arg-type]


def test_share_fetch_v2_has_is_renew_ack_after_share_acquire_mode() -> None:
    w = Writer()
    _request().encode(w, 2)
    expected = (
        b"\x02g"  # group_id: compact nullable string
        + b"\x02m"  # member_id
        + struct.pack(
            ">iiiiii", 3, 500, 1, 1000, 50, 40
        )  # epoch, max wait, min, max bytes, max records, batch
        + b"\x01"  # share_acquire_mode: int8
        + b"\x01"  # is_renew_ack: bool
        + b"\x01"  # topics: empty compact array
        + b"\x01"  # forgotten_topics_data: empty compact array
        + b"\x00"  # tagged fields
    )
    assert w.getvalue() == expected
    assert ShareFetchRequest.decode(Reader(expected), 2) == _request()


def test_share_fetch_v1_cannot_carry_is_renew_ack() -> None:
    with pytest.raises(UnsupportedVersionError):
        _request(share_acquire_mode=0).encode(Writer(), 1)
    w = Writer()
    _request(share_acquire_mode=0, is_renew_ack=False).encode(w, 1)
    assert ShareFetchRequest.decode(Reader(w.getvalue()), 1) == _request(
        share_acquire_mode=0, is_renew_ack=False
    )
