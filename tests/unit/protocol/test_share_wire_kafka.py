"""Share-group requests byte for byte as Apache Kafka 4.4.0 writes them.

The expected bytes were written by Kafka 4.4.0's own ``ShareFetchRequestData`` (kafka-clients
4.4.0, ``MessageUtil.toByteBufferAccessor(data, (short) 2)``) for the same field values. Kafka 4.4's
ShareFetch v2 carries ``IsRenewAck`` after ``ShareAcquireMode``; an encoding without it is misread
by the broker ("Tried to allocate a collection of size 10250"), which closes the connection, so no
share consumer could fetch from Kafka (found by the share-group tests on Kafka).
"""

from __future__ import annotations

import uuid

from kaflux.protocol.messages import share_fetch as sf
from kaflux.protocol.primitives import Writer

#: Kafka 4.4.0: group "g", member "m", epoch 0, max wait 500, min bytes 1, max bytes 1000, max records
#: 7, batch size 9, acquire mode 1, renew ack, topic id (1, 2), partition 3 with no acknowledgements.
KAFKA_4_4_SHARE_FETCH_V2 = bytes.fromhex(
    "0267026d00000000000001f400000001000003e800000007000000090101"
    "020000000000000001000000000000000202000000030100000100"
)


def test_share_fetch_v2_is_encoded_as_kafka_4_4_encodes_it() -> None:
    request = sf.ShareFetchRequest(
        group_id="g",
        member_id="m",
        share_session_epoch=0,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=1000,
        max_records=7,
        batch_size=9,
        share_acquire_mode=1,
        is_renew_ack=True,
        topics=[
            sf.FetchTopic(
                topic_id=uuid.UUID(int=(1 << 64) | 2), partitions=[sf.FetchPartition(partition_index=3)]
            )
        ],
    )
    w = Writer()
    request.encode(w, 2)
    assert w.getvalue() == KAFKA_4_4_SHARE_FETCH_V2
