"""A read-process-write worker for exactly-once tests, run as a child process.

Not a test module. ``python eos_worker.py BOOTSTRAP IN OUT GROUP TXN_ID TOTAL PAUSE_S`` consumes
``IN`` (one partition) in group ``GROUP`` with ``read_committed``, and for each poll writes every
value, upper-cased, to ``OUT`` and sends the consumed offsets, in one transaction of the
producer ``TXN_ID``. It prints ``committed <offset>`` after each commit (flushed), waits
``PAUSE_S`` seconds inside each transaction (so a SIGKILL can land mid-transaction), and exits 0
once the group's position reaches ``TOTAL``.
"""

from __future__ import annotations

import sys
import time

from kaflux import Consumer, OffsetAndMetadata, Producer, TopicPartition


def main(argv: list[str]) -> int:
    bootstrap, source, sink, group, txn_id, total_s, pause_s = argv
    total, pause = int(total_s), float(pause_s)
    tp = TopicPartition(source, 0)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "max.poll.records": 7,
        }
    )
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    producer.init_transactions(60.0)
    consumer.assign([tp])
    committed = consumer.committed({tp}, 30.0).get(tp)
    if committed is not None:
        consumer.seek(tp, committed.offset)
    deadline = time.monotonic() + 120.0
    while time.monotonic() < deadline:
        if consumer.position(tp, 30.0) >= total:
            break
        records = consumer.poll(1.0)
        if not records:
            continue
        producer.begin_transaction()
        last = -1
        for record in records:
            producer.send(sink, (record.value or b"").upper(), partition=0)
            last = record.offset
        time.sleep(pause)
        producer.send_offsets_to_transaction({tp: OffsetAndMetadata(last + 1)}, consumer.group_metadata())
        producer.commit_transaction(60.0)
        print(f"committed {last + 1}", flush=True)
    else:
        return 2
    producer.close(10.0)
    consumer.close(10.0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
